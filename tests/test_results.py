"""course.reports.results: the status of a submission is a pure function of its record (no log text), one case per status."""

import pytest

from course.reports.results import STATUSES, label, new, status


def record(**fields):
    r = new('stepX', 'alice', 'warm')
    r.update({'autograde': {'success': True, 'error': None}, 'graded': True, **fields})
    return r


CASES = [
    (record(), ('graded', '')),
    (record(repairs=['a', 'b']), ('graded', '2 repairs')),
    (record(repairs=['a']), ('graded', '1 repair')),
    (record(blank=True), ('blank', '')),
    (record(attention=['no nb.ipynb'], unreadable='empty file'), ('needs attention', 'no nb.ipynb')),
    (record(unreadable='empty file', graded=False), ('unreadable', 'empty file')),
    (record(over_budget='the probe record declares 2 GiB'), ('over budget', 'the probe record declares 2 GiB')),
    (record(over_budget='nb.ipynb is 83,886,080 bytes, over the 67,108,864 the grader reads', graded=False),
     ('over budget', 'nb.ipynb is 83,886,080 bytes, over the 67,108,864 the grader reads')),
    (record(stopped='timeout', seconds={'limit': 90}, graded=False), ('timeout', 'autograde took over 90 s and was stopped')),
    (record(stopped='died', graded=False), ('not graded', 'the nbgrader process died')),
    (record(autograde={'success': False, 'error': 'DeadKernelError'}, graded=False), ('kernel died', '')),
    (record(autograde={'success': False, 'error': 'CellTimeoutError'}, graded=False),
     ('timeout', 'a cell ran past the limit and ignored the interrupt')),
    (record(autograde={'success': False, 'error': 'OSError'}, graded=False), ('not graded', 'OSError')),
    (record(cells={'head': 'CellTimeoutError'}), ('timeout', 'in cell head')),
    (record(cells={'head': 'DeadKernelError'}), ('kernel died', 'in cell head')),
    (record(refused='symbolic link: notes.txt', graded=False, autograde=None), ('refused', 'symbolic link: notes.txt')),
    (record(feedback={'written': False, 'error': 'RuntimeError: no end hidden tests statement found'}),
     ('graded, no feedback', 'RuntimeError: no end hidden tests statement found')),
    (record(feedback={'written': True, 'error': None}), ('graded', '')),
]


@pytest.mark.parametrize('rec, expected', CASES, ids=[f'{e[0]}-{i}' for i, (_, e) in enumerate(CASES)])
def test_status_of_a_record(rec, expected):
    assert status(rec) == expected
    assert expected[0] in STATUSES


def test_every_status_is_reached_by_a_case_and_labels_read_well():
    reached = {expected[0] for _, expected in CASES} | {'not submitted'}
    assert reached == set(STATUSES)
    r = record(repairs=['a'])
    r['status'], r['detail'] = status(r)
    assert label(r) == 'graded (1 repair)' and label(None) == 'not submitted'
