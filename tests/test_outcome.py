"""course.grader.outcome: one submission's outcome travels with the submission (in nbgrader's resources), never in
module-level state: two submissions graded one after the other in one process each get their own, and no module of
course/ keeps mutable state at module level that code changes (but for caches of facts about the course, listed with
why)."""

import ast
from pathlib import Path

import nbformat
import pytest

import course
from course.grader import outcome
from course.grader.preprocessors import PROBE_OUT, JudgeProbe, RecordedExecute
from course.layout import steps

PACKAGE = Path(course.__file__).parent

# Module-level containers that code of course/ may change, each with why it carries nothing of a submission.
CACHES = {
    ('course/grader/preprocessors.py', 'VALID'): 'the cell metadata found valid (the type and nbgrader metadata of the '
                                                 "course's own cells): a fact about a cell, whoever submits it",
    ('course/reports/feedback.py', 'REMEMBERED'): 'the HTML Pygments makes of a piece of code: a pure function of the '
                                                  'code and the options, remembered',
}
MUTATORS = {'append', 'add', 'clear', 'update', 'setdefault', 'pop', 'popitem', 'extend', 'insert', 'remove', 'discard'}
CONTAINERS = {'dict', 'list', 'set', 'defaultdict', 'Counter', 'OrderedDict', 'deque', 'bytearray'}


def module_containers(tree):
    """{name: line} of each module-level name bound to a mutable container (a display, a comprehension, dict(), ...)."""
    found = {}
    for node in tree.body:
        value = getattr(node, 'value', None)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        mutable = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
            isinstance(value, ast.Call) and getattr(value.func, 'id', getattr(value.func, 'attr', None)) in CONTAINERS)
        found.update({t.id: node.lineno for t in targets if isinstance(t, ast.Name) and mutable})
    return found


def changed_names(tree):
    """(name, line, rebound) of each name code changes in place (x[k] = v, del x[k], x.clear(), x.update(...)...), as a
    bare name or an attribute (module.x), and of each name a function rebinds with `global` (rebound: True)."""
    def last(node):
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            yield from ((name, node.lineno, True) for name in node.names)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            for target in getattr(node, 'targets', None) or [node.target]:
                if isinstance(target, ast.Subscript) and last(target.value):
                    yield last(target.value), node.lineno, False
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            if last(node.func.value):
                yield last(node.func.value), node.lineno, False


def module_state(package=PACKAGE):
    """['course/x.py:line: NAME (changed at course/y.py:line)'] for each module-level container of the package that some
    module of it changes, CACHES aside, and each module-level name a function rebinds (`global`)."""
    trees = {path: ast.parse(path.read_text()) for path in sorted(package.rglob('*.py'))}
    where = lambda path: path.relative_to(package.parent).as_posix()  # noqa: E731
    owned = {name: (where(path), line) for path, tree in trees.items() for name, line in module_containers(tree).items()}
    found = []
    for path, tree in trees.items():
        for name, line, rebound in changed_names(tree):
            if rebound:
                found.append(f'{where(path)}:{line}: {name} (rebound with global)')
            elif name in owned and (owned[name][0], name) not in CACHES:
                found.append(f'{owned[name][0]}:{owned[name][1]}: {name} (changed at {where(path)}:{line})')
    return sorted(set(found))


def test_no_module_of_course_keeps_state_that_code_changes():
    bad = module_state()
    assert not bad, ('module-level state that code changes: what one submission leaves there, the next one reads. Carry '
                     "a submission's outcome in course.grader.outcome.Outcome (nbgrader's resources), or, for a cache of "
                     'a fact about the course, list it in CACHES with why:\n' + '\n'.join(bad))


def test_the_state_check_can_fail(tmp_path):
    """The check finds a module-level dict changed by subscript, by a method, through its module, and a global rebound;
    not a constant that nothing changes, nor a local of the same shape."""
    (tmp_path / 'pkg').mkdir()
    (tmp_path / 'pkg' / 'a.py').write_text("OUT = {'reason': None}\nSEEN = set()\nLIMITS = {'x': 1}\nN = 0\n"
                                           "def f():\n    OUT['reason'] = 1\n    local = {}\n    local['k'] = 2\n"
                                           "def g():\n    global N\n    N = 1\n")
    (tmp_path / 'pkg' / 'b.py').write_text('from pkg import a\n\ndef h():\n    a.SEEN.add(1)\n    return a.LIMITS["x"]\n')
    found = module_state(tmp_path / 'pkg')
    assert sorted(f.split(': ')[1] for f in found) == [
        'N (rebound with global)', 'OUT (changed at pkg/a.py:6)', 'SEEN (changed at pkg/b.py:4)'], found


def probe_notebook(error=None):
    """A graded notebook with AddProbe's cell at its end, which stopped with error (an exception name) if given."""
    cell = nbformat.v4.new_code_cell('probe')
    cell.metadata['course'] = {'probe': True}
    if error:
        cell.outputs = [nbformat.v4.new_output('error', ename=error, evalue='', traceback=[])]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1'), cell])


def judge(folder, record, error=None, resources=None):
    """JudgeProbe on one submission in folder (of the course's first step, whose checks it judges by), whose probe wrote
    record (bytes) and stopped with error; its resources."""
    folder.mkdir()
    (folder / PROBE_OUT).write_bytes(record)
    resources = {**(resources or {}), 'metadata': {'path': str(folder)}, 'nbgrader': {'assignment': steps()[0]},
                 'probe_inputs': {}}
    JudgeProbe(max_bytes=100).preprocess(probe_notebook(error), resources)
    return resources


def test_two_submissions_judged_in_one_process_each_get_their_own_outcome(tmp_path):
    """The first submission's probe stopped and its record is over budget; the second's is fine: its outcome says
    nothing of the first's, and neither does a fresh Outcome."""
    first, second = outcome.Outcome(), outcome.Outcome()
    judge(tmp_path / 'alice', b'x' * 1000, 'CellTimeoutError', {outcome.KEY: first})
    judge(tmp_path / 'bob', b'', None, {outcome.KEY: second})
    assert first.probe == 'CellTimeoutError' and 'over the 100 the grader reads' in first.over_budget, first
    assert second == outcome.Outcome() == outcome.Outcome(), second
    plain = judge(tmp_path / 'carol', b'x' * 1000)  # a plain nbgrader autograde: an outcome of its own, in resources
    assert outcome.of(plain).over_budget and outcome.of(plain) is not first


def test_outputs_over_budget_are_recorded_in_the_outcome_of_the_notebook_executing():
    """RecordedExecute records a notebook's outputs past max_output_bytes in the outcome of the resources it executes
    with (nbclient keeps them as self.resources): the next notebook's outcome starts clean."""
    def pour(resources, n):
        ep = RecordedExecute(max_output_bytes=120)
        ep.reset_execution_trackers()
        ep.clear_before_next_output, ep.output_bytes, ep.resources = False, 0, resources  # as preprocess() sets them
        outs = []
        for _ in range(n):
            ep.output(outs, {'msg_type': 'stream', 'header': {'msg_type': 'stream'}, 'parent_header': {'msg_id': 'm'},
                             'content': {'name': 'stdout', 'text': 'y' * 40}}, None, 0)
        return outcome.of(resources)

    assert pour({}, 5).over_budget.startswith('its outputs passed'), 'five outputs of 54 bytes pass 120'
    assert pour({}, 2).over_budget is None, 'two do not: the first notebook\'s outcome is not this one\'s'


def test_each_notebook_nbgrader_converts_carries_the_submissions_outcome(tmp_path):
    """RecordingAutograde (what course.grader.workers autogrades with) puts the one Outcome it is given in the resources
    of every notebook it converts, both passes (sanitize, autograde); nbgrader's own resources are all there."""
    from nbgrader.coursedir import CourseDirectory

    mine = outcome.Outcome()
    app = outcome.RecordingAutograde(mine, coursedir=CourseDirectory(root=str(tmp_path)))
    path = tmp_path / 'submitted' / 'alice' / 'stepA' / 'stepA.ipynb'
    resources = app.init_single_notebook_resources(str(path))
    assert resources[outcome.KEY] is mine and outcome.of(resources) is mine, resources
    assert resources['nbgrader'] == {'student': 'alice', 'assignment': 'stepA', 'notebook': 'stepA',
                                     'db_url': app.coursedir.db_url}, resources


@pytest.mark.parametrize('kind', ['warm', 'cold', 'unsandboxed'])
def test_kernels_name_their_kind_and_the_warm_servers_socket_only_for_warm_kernels(kind):
    from course.grader.workers import KernelKind, Kernels

    assert Kernels(kind, '/tmp/k.sock' if kind == 'warm' else None).kind is KernelKind(kind)
    with pytest.raises(ValueError, match='socket'):
        Kernels(kind, None if kind == 'warm' else '/tmp/k.sock')
    assert f'{KernelKind(kind)}' == kind, 'results records and the grade table name the kind as before'



def test_two_submissions_autograded_in_one_process_each_record_only_their_own(tmp_path):
    """Through nbgrader itself, as a grading worker does (one process, one API, submission after submission; here
    without a sandbox, on a copy of the course, an assignment of two cells): the first submission's cell runs past the
    cell limit and its outputs past the grader's budget; the second, the release as it is, records none of that."""
    from traitlets.config import Config

    from course import runner
    from course.layout import copy_course

    course = copy_course(tmp_path / 'course')
    test = nbformat.v4.new_code_cell('assert x == 1')
    test.metadata['nbgrader'] = {'grade': True, 'grade_id': 'x_is_one', 'locked': True, 'points': 1, 'schema_version': 3,
                                 'solution': False, 'task': False}
    (course / 'source' / 'tiny').mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1'), test],
                                            metadata={'kernelspec': {'name': 'python3', 'display_name': 'Python 3',
                                                                     'language': 'python'}}),
                   course / 'source' / 'tiny' / 'tiny.ipynb')
    extra = Config()
    extra.CourseDirectory.release_directory = '.build/release'
    extra.Execute.timeout, extra.RecordedExecute.max_output_bytes = 5, 2000
    api = runner.api(extra, course)
    assert api.generate_assignment('tiny', force=True)['success']
    release = nbformat.read(course / '.build' / 'release' / 'tiny' / 'tiny.ipynb', as_version=4)
    hostile = nbformat.from_dict(release)
    hostile.cells = [nbformat.v4.new_code_cell("print('y' * 5000)\nimport time\ntime.sleep(60)"), *release.cells]
    for student, nb in (('alice', hostile), ('bob', release)):
        (course / 'submitted' / student / 'tiny').mkdir(parents=True)
        nbformat.write(nb, course / 'submitted' / student / 'tiny' / 'tiny.ipynb')
    first, second = outcome.Outcome(), outcome.Outcome()
    assert outcome.autograde(api, 'tiny', 'alice', first)['success']
    assert outcome.autograde(api, 'tiny', 'bob', second)['success']
    assert first.over_budget and list(first.timeouts) == [hostile.cells[0].id], first  # nbgrader goes on past a timeout
    assert second == outcome.Outcome(), second
