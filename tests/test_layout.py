"""course.layout owns where a class's things are: no other module of course/ (nor hub/) spells a folder of the class or
the gradebook's file as a path (course.settings aside, which reads course.toml's); they reach them through layout's
names and accessors (class_path(), submitted_path(), result_path(), ...)."""

import ast
import re
from pathlib import Path

import course
from course import layout

PACKAGE = Path(course.__file__).parent
REPO = PACKAGE.parent
NAMES = (layout.SUBMITTED, layout.AUTOGRADED, layout.FEEDBACK, layout.RESULTS, layout.REPAIRS, layout.REPORTS, layout.LMS,
         layout.LOGS, layout.GRADEBOOK)
OWNERS = {'course/layout.py', 'course/settings.py'}
# What must spell one of them, with why: (file, the string) -> reason.
ALLOWED = {
    ('hub/roles/lti/course_lti_launch.py', 'feedback/*/*.html'):
        "nbgrader fetch_feedback's folder in a student's own home (<step>/feedback/<time>/), not the course's feedback/; "
        "this runs in the student's Jupyter server, which has no course package to import",
    ('hub/admin.py', 'gradebook.db'):
        "root's hub administration names the course's gradebook by itself: root never imports code from the instructor's "
        "clone (docs/hub.md)",
}
PATHLIKE = re.compile('^(' + '|'.join(re.escape(n) for n in NAMES) + r')(/\S*)?$')


def parents(tree):
    """{node: its parent} of every node of tree."""
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def spellings(source):
    """(line, string) of each string constant of source that spells a class folder (or the gradebook) as a path: the
    name alone or a path below it, in a path expression (x / 'submitted'), a call (Path('lms'), .glob('feedback/*')),
    a name's value (LMS = 'lms'), a tuple or list of such names, a set, or a path string 'lms/...'. Not a dict key, a
    subscript (record['feedback']), a comparison (handin == 'lms'), a keyword's value, nor prose (an f-string's text)."""
    tree = ast.parse(source)
    up = parents(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and PATHLIKE.match(node.value)):
            continue
        parent = up.get(node)
        if isinstance(parent, ast.JoinedStr):
            continue  # the text of an f-string: a message
        if isinstance(parent, ast.Dict) and node in parent.keys or isinstance(parent, (ast.Subscript, ast.Compare)):
            continue  # a key of a record or a row, or a value compared with one
        if isinstance(parent, ast.keyword):
            continue  # setting('lms', ...) and its kin: a value, not a path
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr in (
                'get', 'setdefault', 'pop'):
            continue  # record.get('feedback'): a key
        if isinstance(parent, (ast.List, ast.Tuple)) and not all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) and PATHLIKE.match(e.value) for e in parent.elts):
            continue  # one name among other words: a list of columns
        if isinstance(parent, ast.Dict):  # a dict's value: a path only when it has a slash
            if '/' not in node.value:
                continue
        yield node.lineno, node.value


def found(files):
    out = []
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        if rel in OWNERS:
            continue
        for line, value in spellings(path.read_text()):
            if (rel, value) not in ALLOWED:
                out.append(f'{rel}:{line}: {value!r}')
    return out


def test_no_module_spells_a_class_folder_but_layout():
    files = sorted(PACKAGE.rglob('*.py')) + sorted((REPO / 'hub').rglob('*.py'))
    bad = found(files)
    assert not bad, ('a folder of the class spelled outside course/layout.py: use layout\'s names and accessors '
                     '(SUBMITTED, class_path(), result_path(), ...), or, if it must be spelled, list it in ALLOWED with '
                     'why:\n' + '\n'.join(bad))


def test_the_check_catches_each_way_of_spelling_one(tmp_path):
    """The check finds a path expression, a call, a constant, a tuple of folders, a path string; not a record's key, a
    row's column among others, a comparison, nor a message."""
    caught = ["x = root / 'submitted' / s", "Path('lms')", "LMS_FOLDER = 'lms'", "for f in ('autograded', 'feedback'): pass",
              "root.glob('feedback/*/*.html')", "RESERVED = frozenset({'nbgrader_config.py', 'gradebook.db'})",
              "f'{root / \"results\"}'"]
    passed = ["record['feedback']", "r.get('submitted')", "COLUMNS = ['student_id', 'lms', 'file']", "x == 'lms'",
              "{'autograded': 1.0}", "f'put the class in submitted/<student>/<step>/'", "setting(default='lms')"]
    for source in caught:
        assert list(spellings(source)), f'not caught: {source}'
    for source in passed:
        assert not list(spellings(source)), f'caught, wrongly: {source}'


def step_names(source, names):
    """(line, string) of each string constant of source's code (docstrings aside: their examples name steps) that names
    one of names, as a word."""
    tree = ast.parse(source)
    docstrings = {id(body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  for body in [node.body] if body and isinstance(body[0], ast.Expr)}
    word = re.compile(r'(?<![A-Za-z0-9])(' + '|'.join(map(re.escape, names)) + r')(?![0-9])')
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and word.search(node.value)]


def test_no_code_of_course_names_a_step():
    """docs/adding-a-step.md: nothing in course/ names a step; every step is found in source/ (layout.steps())."""
    names = layout.steps()
    bad = [f'{path.relative_to(REPO)}:{line}: {value!r}' for path in sorted(PACKAGE.rglob('*.py'))
           for line, value in step_names(path.read_text(), names)]
    assert not bad, 'course/ names a step: find the steps with course.layout.steps() instead:\n' + '\n'.join(bad)
    assert step_names("'''stepZ in a docstring'''\nSTEP = 'stepZ'\nf'--step stepZ'\nNOT = 'stepZ9'\n", ['stepZ']) == [
        (2, 'stepZ'), (3, '--step stepZ')], 'the check finds a step named in code, not in a docstring'


# What in tests/ names a step of source/ (a string in code, docstrings aside), with why; the rest of the suite runs on
# every step, or on one it derives (course.layout.steps()[0], the synthetic step's next free number).
NAMES_A_STEP = {
    'tests/support/__init__.py':
        "REFERENCE_STEP, Step 4: the docs' pictures show it, so the browser's and the hub's scripted journeys that take "
        'them are typed on it (everything else about it is read from source/)',
    'tests/test_kinds.py': "each step's checks by kind, on that step's own inputs and stand-ins",
    'tests/test_publish.py':
        'a release schedule mid-course (Steps 1-4 past due, Step 5 open), and Steps 6 and 7, whose releases rebuild the '
        "step before's solution",
    'tests/test_colab_runtime.py': "Step 6's notebook reads its checkpoint's address from STEP6_CHECKPOINT_URL",
}


def test_what_in_tests_names_a_step_is_listed_with_why():
    """docs/adding-a-step.md: in tests/, only what NAMES_A_STEP lists names a step; a test that needs a step of the
    course but not a given one derives it (course.layout.steps()), and a class a test makes up gets labels of its own."""
    names = layout.steps()
    found = {}
    for path in sorted((REPO / 'tests').rglob('*.py')):
        hits = step_names(path.read_text(), names)
        if hits:
            found[path.relative_to(REPO).as_posix()] = hits
    bad = [f'{rel}:{line}: {value!r}' for rel, hits in found.items() if rel not in NAMES_A_STEP for line, value in hits]
    assert not bad, ('a test names a step: derive it (course.layout.steps()), use a label of its own in a class it makes '
                     "up, or list the file in NAMES_A_STEP with why (and in docs/adding-a-step.md):\n" + '\n'.join(bad))
    stale = sorted(set(NAMES_A_STEP) - set(found))
    assert not stale, f'NAMES_A_STEP lists {stale}, which name no step now: take them off (and off the docs)'
