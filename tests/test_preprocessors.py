"""course.preprocessors: CheckCellMetadataOnce (nbgrader's CheckCellMetadata, each cell checked once per process), and
JudgeProbe's reading of the probe's record."""

import copy

import jsonschema
import numpy as np
import pytest
from nbgrader.preprocessors import CheckCellMetadata

from course import preprocessors
from course.cells import read, role
from course.layout import ROOT, notebooks, steps
from course.preprocessors import VALID, CheckCellMetadataOnce, read_record


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


def test_a_missing_empty_or_oversized_record_reads_as_nothing(tmp_path):
    path = tmp_path / 'record.npz'
    assert read_record(path, max_bytes=10**6) == {}
    path.touch()
    assert read_record(path, max_bytes=10**6) == {}
    np.savez(path, x=np.zeros(1000))
    assert read_record(path, max_bytes=100) == {}
    assert set(read_record(path, max_bytes=10**6)) == {'x'}
