"""course.grader.preprocessors: CheckCellMetadataOnce (nbgrader's CheckCellMetadata, each cell checked once per process), and
JudgeProbe's reading of the probe's record."""

import copy
import tracemalloc
import zipfile

import jsonschema
import numpy as np
import pytest
from nbgrader.preprocessors import CheckCellMetadata

from course.cells import read, role
from course.grader import preprocessors
from course.grader.preprocessors import VALID, CheckCellMetadataOnce, JudgeProbe, OverBudget, read_record
from course.layout import ROOT, notebooks, steps


@pytest.fixture
def nb():
    VALID.clear()
    step = steps()[0]
    return read(ROOT / 'source' / step / notebooks(step)[0])


def check(nb):
    return CheckCellMetadataOnce().preprocess(copy.deepcopy(nb), {})


def test_a_cell_seen_valid_is_not_checked_against_the_schema_again(nb, monkeypatch):
    check(nb)
    assert VALID, 'the valid cells were remembered'
    calls = []
    monkeypatch.setattr(jsonschema, 'validate', lambda *a, **k: calls.append(a))
    check(nb)
    assert calls == [], f'the second check of the same cells called jsonschema.validate {len(calls)} times'


@pytest.mark.parametrize('damage', ['duplicate grade id', 'points missing', 'grade_id missing', 'schema too old'])
def test_damaged_metadata_is_refused_after_the_valid_cells_were_remembered(nb, damage):
    check(nb)  # every valid cell remembered
    bad = copy.deepcopy(nb)
    tests = [c for c in bad.cells if role(c) == 'test']
    meta = tests[0].metadata['nbgrader']
    if damage == 'duplicate grade id':
        tests[1].metadata['nbgrader']['grade_id'] = meta['grade_id']
    elif damage == 'points missing':
        del meta['points']
    elif damage == 'grade_id missing':
        del meta['grade_id']
    else:
        meta['schema_version'] = 1
    with pytest.raises(Exception) as theirs:
        CheckCellMetadata().preprocess(copy.deepcopy(bad), {})  # nbgrader's own refuses it
    with pytest.raises(type(theirs.value)) as ours:
        check(bad)
    assert str(ours.value) == str(theirs.value), f'nbgrader says {theirs.value!r}; CheckCellMetadataOnce {ours.value!r}'


def test_validator_is_nbgraders_own():
    """The remembering validator checks what nbgrader's does: nbgrader's class, only validate_cell overridden."""
    from nbgrader.nbgraderformat import MetadataValidator

    ours = preprocessors.RememberingValidator
    assert issubclass(ours, MetadataValidator) and ours.validate_nb is MetadataValidator.validate_nb


def test_one_function_returning_none_costs_only_its_own_checks(tmp_path):
    """Check that an object entry in the probe's record (a function returned None) becomes that function's error, and
    the other functions' numbers are still read: numpy refuses the whole file's object arrays without pickle."""
    path = tmp_path / 'record.npz'
    np.savez(path, **{'head.out': np.arange(3.0), 'stats.raw_std': np.asarray(None), 'stats.scaled_std': np.asarray(1.0)})
    record = read_record(path, max_bytes=10**6)
    assert set(record) == {'head.out', 'stats.scaled_std', 'stats.error'}, sorted(record)
    assert np.array_equal(record['head.out'], np.arange(3.0))
    assert 'stats.raw_std' in str(record['stats.error']), record['stats.error']


def test_a_missing_or_empty_record_reads_as_nothing_and_an_oversized_one_is_over_budget(tmp_path):
    path = tmp_path / 'record.npz'
    assert read_record(path, max_bytes=10**6) == {}
    path.touch()
    assert read_record(path, max_bytes=10**6) == {}
    np.savez(path, x=np.zeros(1000))
    with pytest.raises(OverBudget, match='is 8,[0-9]{3} bytes, over the 100 the grader reads'):
        read_record(path, max_bytes=100)
    assert set(read_record(path, max_bytes=10**6)) == {'x'}


def peak_while(fn):
    """(what fn() raised or returned, the most memory it allocated at once, in bytes; numpy's arrays included)."""
    tracemalloc.start()
    try:
        try:
            out = fn()
        except Exception as e:
            out = e
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def lying_header(path):
    """An npz whose one entry's header declares 10**12 float64 in an entry of a few bytes."""
    import io

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {'descr': '<f8', 'fortran_order': False, 'shape': (10**12,)})
    with zipfile.ZipFile(path, 'w') as z:
        z.writestr('head.out.npy', header.getvalue() + bytes(8))


@pytest.mark.parametrize('kind', ['bomb', 'many entries', 'lying header', 'bzip2'])
def test_a_record_over_budget_is_refused_before_it_is_decompressed(tmp_path, kind):
    """A record of a few MB that declares 2 GiB of numbers (every byte really there: its CRCs hold), one of
    20,000 tiny entries, one whose array header declares more than its entry holds, and one compressed with a method
    whose decompressor takes no output bound, each raise OverBudget, having allocated almost nothing."""
    from support.corpus import many_entries, record_bomb

    path = tmp_path / 'record.npz'
    if kind == 'bomb':
        path.write_bytes(record_bomb())
    elif kind == 'many entries':
        path.write_bytes(many_entries())
    elif kind == 'lying header':
        lying_header(path)
    else:
        with zipfile.ZipFile(path, 'w', zipfile.ZIP_BZIP2) as z:
            z.writestr('head.out.npy', b'')
    assert 0 < path.stat().st_size < JudgeProbe.max_bytes.default_value
    out, peak = peak_while(lambda: read_record(path, JudgeProbe.max_bytes.default_value))
    assert isinstance(out, OverBudget) and 'the probe record' in str(out), out
    assert peak < 16 << 20, f'reading it cost {peak:,} bytes'


def test_a_real_records_size_is_far_within_the_budget(tmp_path):
    """The budget leaves room: a record of 200 entries of 10 MB in all (the largest real one: Step 6's, 3.7 MB in 139)
    reads whole."""
    path = tmp_path / 'record.npz'
    np.savez(path, **{f'gpt.w{i}': np.ones(6250) for i in range(200)})
    assert len(read_record(path, JudgeProbe.max_bytes.default_value)) == 200


def test_outputs_past_the_budget_are_dropped_but_each_cells_first_error_is_kept():
    """RecordedExecute holds a notebook's outputs to max_output_bytes as they arrive (here 100 bytes): later
    outputs are dropped with one note, and the submission's outcome says why; but a cell's first error is kept, capped (nbgrader
    scores a test cell by its error: dropping it would give a failed test its points), and a second one is not."""
    from course.grader import outcome
    from course.grader.preprocessors import RecordedExecute

    def msg(kind, **content):
        return {'msg_type': kind, 'header': {'msg_type': kind}, 'parent_header': {'msg_id': 'm'}, 'content': content}

    ep = RecordedExecute(max_output_bytes=120)
    ep.reset_execution_trackers()
    ep.clear_before_next_output, ep.output_bytes, ep.resources = False, 0, {}  # as preprocess() sets them
    outs = []
    for _ in range(5):
        ep.output(outs, msg('stream', name='stdout', text='y' * 40), None, 0)
    ep.output(outs, msg('error', ename='AssertionError', evalue='z' * 5000, traceback=['t' * 10] * 100), None, 0)
    ep.output(outs, msg('error', ename='AssertionError', evalue='again', traceback=[]), None, 0)
    ep.output(outs, msg('stream', name='stdout', text='later'), None, 0)
    kinds = [o.output_type for o in outs]
    assert kinds == ['stream', 'stream', 'stream', 'error'], kinds  # two of 54 bytes (keys too), the note, the first error
    assert 'outputs dropped by the grader' in outs[2].text, outs[2]
    assert outs[3].ename == 'AssertionError' and len(outs[3].evalue) < 2100 and len(outs[3].traceback) == 20, outs[3]
    assert outcome.of(ep.resources).over_budget.startswith('its outputs passed'), ep.resources
