"""The probe every step shares: its runtime (course/grader/probe.py, sent to the student's kernel as code), the cell AddProbe
builds from it and a step's probe parts (@records), and what reaches the claims (course/grader/claims.py)."""

import importlib.util
import inspect
import json
import types

import numpy as np
import pytest
import torch

from course.grader import preprocessors
from course.grader import probe as runtime
from course.grader.claims import Record, Unrecorded, judge
from course.grader.preprocessors import probe_cell, probe_constants, read_record
from course.isolation import policy
from course.layout import instructor_module, steps


def run_cell(code, folder, monkeypatch, notebook=None):
    """Execute a probe cell as the kernel would, in folder, with notebook as the notebook's names; the record read back
    as JudgeProbe reads it."""
    monkeypatch.chdir(folder)
    exec(compile(code, '<probe cell>', 'exec'), notebook if notebook is not None else {})
    return read_record(folder / policy.PROBE_RECORD, max_bytes=10**9)


def write_inputs(folder, checks):
    np.savez(folder / runtime.INPUTS, **checks.make_inputs(), **{runtime.CONSTANTS: probe_constants(checks)})


def test_the_runtime_writes_the_record_the_sandbox_lets_the_kernel_write():
    assert runtime.RECORD == policy.PROBE_RECORD and preprocessors.PROBE_IN == runtime.INPUTS


@pytest.mark.parametrize('step', steps())
def test_a_guard_added_to_the_runtime_reaches_every_step(step, tmp_path, monkeypatch):
    """Check that the code a step's kernel runs is the shared runtime, and that every one of the step's functions goes
    through its Record.run: a guard added there (here, one that marks each function it sees) is in every step's record,
    with nothing changed in the step's checks.py."""
    checks = instructor_module(step, 'checks')
    guard = ('\n\n_unguarded = Record.run\n\n\n'
             'def _guarded(self, name, fn):\n'
             '    import numpy as np\n'
             "    self[f'guard.{name}'] = np.asarray(True)\n"
             '    return _unguarded(self, name, fn)\n\n\n'
             'Record.run = _guarded\n')
    patched = types.ModuleType('course.grader.probe')
    source = inspect.getsource(runtime)
    exec(compile(source + guard, runtime.__file__, 'exec'), patched.__dict__)
    monkeypatch.setattr(inspect, 'getsource', lambda obj, _real=inspect.getsource: source + guard
                        if obj is patched else _real(obj))
    monkeypatch.setattr(preprocessors, 'probe_runtime', patched)
    write_inputs(tmp_path, checks)
    record = run_cell(probe_cell(checks), tmp_path, monkeypatch)  # a notebook with none of the step's names
    ran = {k.split('.')[0] for k in record} - {'probe', 'guard'}  # each function's error, or what it recorded
    guarded = {k.split('.', 1)[1] for k in record if k.startswith('guard.')}
    assert ran and guarded == ran, f'functions run: {sorted(ran)}; seen by the new guard: {sorted(guarded)}'
    assert 'probe.error' not in record, record['probe.error']


@pytest.mark.parametrize('step', steps())
def test_each_step_probe_is_sent_whole_with_its_constants_as_data(step):
    """The probe parts use only their parameters, builtins and their own imports (probe_cell refuses anything else), and the
    constants it takes reach the kernel unchanged, as JSON."""
    checks = instructor_module(step, 'checks')
    compile(probe_cell(checks), f'{step} probe cell', 'exec')
    constants = json.loads(probe_constants(checks))
    assert constants == {k: json.loads(json.dumps(getattr(checks, k))) for k in constants}


def checks_file(folder, source):
    """A checks.py written in folder, imported as the grader imports a step's."""
    path = folder / 'instructor' / 'checks.py'
    path.parent.mkdir()
    path.write_text('import numpy as np\n\nfrom course.grader.claims import records\n\n\n' + source)
    spec = importlib.util.spec_from_file_location('some_step_checks', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_probe_using_a_name_of_checks_py_is_refused_in_one_line(tmp_path):
    checks = checks_file(tmp_path, 'LIMIT = 3\n\n\n@records\ndef probe(nb, inp, run):\n'
                                   '    run("f", lambda: {"x": nb.f(LIMIT)})\n')
    with pytest.raises(ValueError) as e:
        probe_cell(checks)
    assert 'instructor/checks.py' in str(e.value) and 'LIMIT' in str(e.value) and '\n' not in str(e.value), e.value


def test_helpers_are_sent_with_the_probe_and_checked_as_it_is(tmp_path, monkeypatch):
    """A helper of PROBE_HELPERS (here one the grader's claims would use too) reaches the kernel with the probe part, which
    calls it; one that uses a name of checks.py is refused in one line, naming the name."""
    checks = checks_file(tmp_path, (
        "def make_inputs():\n    return {'x': np.arange(3.0)}\n\n\n"
        'def double(t):\n    return 2 * t\n\n\n'
        'PROBE_HELPERS = (double,)\n\n\n'
        "@records\ndef probe(nb, inp, run):\n    run('f', lambda: {'y': nb.f(double(inp.tensor('x')))})\n"))
    write_inputs(tmp_path, checks)
    record = run_cell(probe_cell(checks), tmp_path, monkeypatch, {'f': lambda t: t + 1})
    assert np.array_equal(record['f.y'], [1.0, 3.0, 5.0]), record
    (tmp_path / 'refused').mkdir()
    checks = checks_file(tmp_path / 'refused', (
        'LIMIT = 3\n\n\ndef clip(t):\n    return t.clamp(max=LIMIT)\n\n\nPROBE_HELPERS = (clip,)\n\n\n'
        "@records\ndef probe(nb, inp, run):\n    run('f', lambda: {'y': clip(nb.f())})\n"))
    with pytest.raises(ValueError) as e:
        probe_cell(checks)
    assert 'instructor/checks.py' in str(e.value) and 'LIMIT' in str(e.value) and '\n' not in str(e.value), e.value


def test_a_constant_that_is_not_json_is_refused_in_one_line(tmp_path):
    checks = checks_file(tmp_path, 'SHAPE = np.zeros(3)\n\n\n@records\ndef probe(nb, inp, run, *, SHAPE):\n    pass\n')
    with pytest.raises(ValueError) as e:
        probe_constants(checks)
    assert 'instructor/checks.py' in str(e.value) and 'not JSON' in str(e.value) and '\n' not in str(e.value), e.value


def test_the_cell_defines_nothing_in_the_notebook_and_saves_the_record_whatever_happens(tmp_path, monkeypatch):
    checks = checks_file(tmp_path, (
        "def make_inputs():\n    return {'x': np.arange(3.0)}\n\n\n"
        '@records\ndef probe(nb, inp, run, *, FACTOR):\n'
        "    run('scale', lambda: {'y': nb.scale(inp.tensor('x'), FACTOR)})\n"
        "    raise RuntimeError('the probe itself failed')\n\n\n"
        'FACTOR = 2.5\n'))
    write_inputs(tmp_path, checks)
    notebook = {'scale': lambda t, k: k * t, 'Record': "the student's own Record"}
    record = run_cell(probe_cell(checks), tmp_path, monkeypatch, notebook)
    assert set(notebook) == {'scale', 'Record', '__builtins__'} and notebook['Record'] == "the student's own Record"
    assert np.array_equal(record['scale.y'], [0.0, 2.5, 5.0]), record
    assert 'the probe itself failed' in str(record['probe.error'])


def test_the_parts_run_in_order_each_with_its_constants_and_a_failing_part_costs_only_itself(tmp_path, monkeypatch):
    """A step's probe is its @records parts, run in the order checks.py defines them, each given the constants it takes
    (all of them reach the kernel as data); a part that raises outside its functions records '<part>.error' and the
    next part still runs."""
    checks = checks_file(tmp_path, (
        "def make_inputs():\n    return {'x': np.arange(3.0)}\n\n\n"
        'SHIFT, FACTOR = 1.0, 2.0\n\n\n'
        '@records\ndef shifted(nb, inp, run, *, SHIFT):\n'
        "    run('shift', lambda: {'y': nb.shift(inp.tensor('x'), SHIFT)})\n"
        "    raise RuntimeError('the first part failed')\n\n\n"
        '@records\ndef scaled(nb, inp, run, *, FACTOR):\n'
        "    run('scale', lambda: {'y': nb.scale(inp.tensor('x'), FACTOR)})\n"))
    assert json.loads(probe_constants(checks)) == {'FACTOR': 2.0, 'SHIFT': 1.0}
    write_inputs(tmp_path, checks)
    record = run_cell(probe_cell(checks), tmp_path, monkeypatch, {'shift': lambda t, k: t + k, 'scale': lambda t, k: k * t})
    assert np.array_equal(record['shift.y'], [1.0, 2.0, 3.0]) and np.array_equal(record['scale.y'], [0.0, 2.0, 4.0]), record
    assert 'the first part failed' in str(record['shifted.error']) and 'probe.error' not in record, record


def test_a_checks_py_without_a_probe_part_is_refused_in_one_line(tmp_path):
    checks = checks_file(tmp_path, "def probe(nb, inp, run):\n    run('f', lambda: {'x': nb.f()})\n")
    with pytest.raises(ValueError) as e:
        probe_cell(checks)
    assert 'instructor/checks.py' in str(e.value) and '@records' in str(e.value) and '\n' not in str(e.value), e.value


def test_odd_values_cost_only_their_own_entries():
    """None, a list of tensors of different shapes, an object, a value too large: each becomes its function's error,
    the function's other values are recorded, and nothing that needs pickle reaches the record."""
    record = runtime.Record()
    record.run('f', lambda: {'none': None, 'ok': torch.ones(2, requires_grad=True), 'ragged': [torch.ones(2), torch.ones(3)],
                             'same': [torch.ones(2, requires_grad=True), torch.zeros(2)], 'obj': object(),
                             'big': np.zeros(runtime.MAX_ENTRY_BYTES // 8 + 1), 'huge_int': 2**70})
    record.run('g', lambda: 1 / 0)
    assert set(record) == {'f.ok', 'f.same', 'f.error', 'g.error'}, sorted(record)
    assert record['f.same'].shape == (2, 2) and not record['f.same'].dtype.hasobject
    assert 'none' in str(record['f.error']) and 'NoneType' in str(record['f.error'])
    assert 'ZeroDivisionError' in str(record['g.error'])


def test_the_record_stays_under_its_budget(monkeypatch):
    monkeypatch.setattr(runtime, 'MAX_RECORD_BYTES', 100)
    record = runtime.Record()
    record.run('f', lambda: {'a': np.zeros(10), 'b': np.zeros(10)})
    assert set(record) == {'f.a', 'f.error'} and 'full' in str(record['f.error'])


def test_a_missing_or_errored_entry_fails_the_claims_that_read_it_with_the_reason():
    rec = Record({'f.x': np.arange(3), 'g.error': np.asarray("ValueError('bad shape')")})
    assert rec['f.x'].tolist() == [0, 1, 2]
    with pytest.raises(Unrecorded, match=r"g: your code raised ValueError\('bad shape'\)"):
        rec['g.y']
    with pytest.raises(Unrecorded, match='h.z was not recorded'):
        rec.tensor('h.z')


def test_judge_runs_every_claim_of_a_module_and_says_why_one_fails():
    from course.grader.claims import claim

    checks = types.SimpleNamespace()

    @claim
    def holds(inp, rec):
        assert rec['f.x'].sum() == inp['n']

    @claim
    def fails(inp, rec):
        assert rec['f.x'].sum() == inp['n'] + 1, 'expected one more'

    def helper(inp, rec):  # not a claim: no verdict
        raise AssertionError

    checks.holds, checks.helper, checks.fails = holds, helper, fails
    verdicts = judge(checks, {'n': 3}, {'f.x': np.arange(3)})
    assert list(verdicts) == ['holds', 'fails'] and verdicts['holds'] is None, verdicts
    assert verdicts['fails'].startswith('AssertionError: expected one more'), verdicts  # (pytest adds to asserts here)
    assert set(judge(checks, {'n': 3}, {}).values()) == {"Unrecorded: f.x was not recorded (did your code run to the end?)"}
