"""course.reports.classreport on a small class made by hand, with no kernel: the synthetic step of
tests/support/synthetic.py, its gradebook
written through nbgrader's Gradebook API, each submission's record in results/ and its autograded notebook. The class has
a copied solution, two students who make the same mistake, a student who pastes the visible tests into the solution cell,
and hostile text (a <script>, an <img onerror>, a </style>, a student id with HTML) in every field that reaches the page.
The demo class's report, from a real grading run, is tested in tests/test_classreport_demo.py."""

import hashlib
import re
import shutil
import statistics
import subprocess
import sys
import textwrap

import nbformat
import pytest

from course import runner
from course.cells import CODE_STUB, grade_id
from course.layout import ROOT
from course.reports import classreport, results
from support import synthetic
from support.browserpage import open_page

STEP, NAME = synthetic.STEP, synthetic.NAME
NB = NAME.removesuffix('.ipynb')
SHOTS = ROOT / 'test-artifacts' / 'classreport'
HOSTILE = ('<script>window.pwned = "script"; alert("script")</script><img src=x onerror="window.pwned = \'img\'">'
           '</style></pre></code></td></table><style>body { display: none }</style><b>bold</b>')
HOSTILE_ID = '<img src=x onerror=alert(document.domain)>'  # a student id is a folder name: anything but a slash

COPIED = '''\
    total = 0.0
    for term in (a, b):
        if term == term:
            total = total + term * 1.0
        else:
            total = total - 0.0
    return total - 0.0 if total != 0 else total'''
OWN = '''\
    import operator
    values = [a, b]
    return operator.add(*values)'''
PASTED = '''\
    assert add(1, 2) == 3, f'add(1, 2): expected 3, got {add(1, 2)}; check the operator'
    assert add(2, 7) == add(7, 2) == 9, f'expected 9 both ways, got {add(2, 7)} and {add(7, 2)}; check the order'
    return a + b'''
SUBTRACTS = ('AssertionError: add(1, 2): expected 3, got {}; check the operator',
             'AssertionError: expected 9 both ways, got {} and {}; check the order')
# student: (the body of add, add_small_cases's score, add_is_symmetric's score, failures, fields of the record)
CLASS = {
    'perfect': ('    return a + b', 1, 2, {}, {}),
    'perfect_too': ('    return a + b', 1, 2, {}, {}),
    'pastes_tests': (PASTED, 1, 2, {}, {}),
    'copy_a': (COPIED, 1, 2, {}, {}),
    'copy_b': (COPIED.replace('total', 'acc').replace('term', 't'), 1, 2, {}, {}),
    'own': (OWN, 1, 2, {}, {}),
    'subtracts': ('    return a - b', 0, 0, {'add_small_cases': SUBTRACTS[0].format(-1),
                                           'add_is_symmetric': SUBTRACTS[1].format(-5, 5)}, {}),
    'subtracts_too': ('    return b - a', 0, 0, {'add_small_cases': SUBTRACTS[0].format(1),
                                               'add_is_symmetric': SUBTRACTS[1].format(5, -5)}, {}),
    'stub_left': (CODE_STUB.replace('\n', '\n    ').join(['    ', '']), 0, 0,
                  {'add_small_cases': classreport.STUB_FAILURE, 'add_is_symmetric': classreport.STUB_FAILURE}, {}),
    HOSTILE_ID: (f'    # {HOSTILE}\n    note = {HOSTILE!r}\n' + COPIED, 0, 2, {'add_small_cases': f'AssertionError: {HOSTILE}'},
                 {'kernel': HOSTILE, 'repairs': [HOSTILE]}),
    'needs_attention': ('    return a + b', 0, 0, {}, {'attention': [f'two notebooks, neither {NAME}: {HOSTILE}.ipynb'],
                                                       'graded': False}),
    'blank': (None, 0, 0, {}, {'blank': True}),
}


def release_of(nb):
    """The student version of a source notebook, as nbgrader's ClearSolutions and ClearHiddenTests make it."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        cell.source = re.sub(r'^([ \t]*)### BEGIN SOLUTION\n.*?### END SOLUTION',
                             lambda m: textwrap.indent(CODE_STUB, m[1]), cell.source, flags=re.M | re.S)
        cell.source = re.sub(r'^[ \t]*### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS\n?', '', cell.source, flags=re.M | re.S)
    return nb


def submission(body):
    """The source notebook with add's body replaced by body (the release's stub if None), as nbgrader autograded it."""
    nb = synthetic.notebook()
    cell = next(c for c in nb.cells if grade_id(c) == 'add')
    if body is None:
        return release_of(nb)
    cell.source = re.sub(r'[ \t]*### BEGIN SOLUTION\n.*?### END SOLUTION', body, cell.source, flags=re.S)
    return nb


def make_class(root):
    """The course at root: source/ and release/ of the synthetic step, the course package (for
    python -m course.reports.classreport), a gradebook, results/ and autograded/ for CLASS."""
    from nbgrader.api import Gradebook

    shutil.copytree(ROOT / 'course', root / 'course', ignore=shutil.ignore_patterns('__pycache__'))
    for folder, nb in (('source', synthetic.notebook()), ('release', release_of(synthetic.notebook()))):
        (root / folder / STEP).mkdir(parents=True)
        nbformat.write(nb, root / folder / STEP / NAME)
    runner.on_path()  # nbgrader runs alembic when it creates a gradebook
    with Gradebook(f'sqlite:///{root / "gradebook.db"}') as gb:
        gb.update_or_create_assignment(STEP)
        gb.update_or_create_notebook(NB, STEP)
        gb.update_or_create_grade_cell('add_small_cases', NB, STEP, max_score=1, cell_type='code')
        gb.update_or_create_grade_cell('add_is_symmetric', NB, STEP, max_score=2, cell_type='code')
        gb.update_or_create_grade_cell('why', NB, STEP, max_score=1, cell_type='markdown')
        gb.update_or_create_solution_cell('why', NB, STEP)
        for student, (body, small, symmetric, failures, fields) in CLASS.items():
            gb.update_or_create_student(student, first_name=HOSTILE, last_name=HOSTILE, email=HOSTILE)
            gb.add_submission(STEP, student)
            for gid, score in (('add_small_cases', small), ('add_is_symmetric', symmetric)):  # as autograde sets them
                grade = gb.find_grade(gid, NB, STEP, student)
                grade.auto_score, grade.needs_manual_grade = score, False
            gb.find_grade('why', NB, STEP, student).needs_manual_grade = body is not None
            gb.db.commit()
            record = results.new(STEP, student, 'warm')
            record.update({'autograde': {'success': True, 'error': None}, 'graded': True, 'failures': failures,
                           'seconds': {'autograde': 2.0 + len(student) / 10, 'feedback': 0.5}, **fields})
            record['status'], record['detail'] = results.status(record)
            results.save(record, root)
            (root / 'autograded' / student / STEP).mkdir(parents=True)
            nbformat.write(submission(body), root / 'autograded' / student / STEP / NAME)
    return root


@pytest.fixture(scope='module')
def course(tmp_path_factory):
    return make_class(tmp_path_factory.mktemp('classreport'))


@pytest.fixture(scope='module')
def report(course):
    """The page, and what Chromium saw opening it (a screenshot in test-artifacts/classreport/hostile-class.png)."""
    path = classreport.write(course)
    return path.read_text(), open_page(path, SHOTS / 'hostile-class.png')


def test_normalise_groups_messages_that_differ_only_in_numbers():
    a = 'AssertionError: rows sum to [0.98, 1.02, 0.5] not 1: took the softmax over dim 0 (tensor(0x7f3a2b))'
    b = 'AssertionError: rows sum to [[1e-3, -2.5E+2], [3, 4]] not 1: took the softmax over dim 1 (tensor(0x7f00ff))'
    assert classreport.normalise(a) == classreport.normalise(b) == (
        'AssertionError: rows sum to [#] not #: took the softmax over dim # (tensor(#))')
    assert classreport.normalise('head4 got max_wt_2 = 3') == 'head4 got max_wt_2 = #', 'names keep their digits'
    assert classreport.normalise('expected shape') != classreport.normalise('expected dtype')


def row(student, cells, record=None):
    return {'student_id': student, 'cells': cells, 'autograded': sum(cells.values()),
            'record': record or {'failures': {}, 'graded': True, 'status': 'graded'}}


def test_cell_table_gives_pass_rate_discrimination_and_flags():
    """Six students of abilities 5..0, seven cells: `hard` nobody passes, `easy` everybody does, `a`, `b`, `c` and `fair`
    are passed from some ability up, `odd` only below it (negative discrimination); discrimination is Pearson's r of the
    cell's score with the rest of the student's score."""
    points = {'hard': 1, 'easy': 1, 'a': 1, 'b': 1, 'c': 1, 'fair': 2, 'odd': 1}
    subs = [row(f's{ability}', {'hard': 0, 'easy': 1, 'a': float(ability >= 1), 'b': float(ability >= 2),
                                'c': float(ability >= 4), 'fair': 2.0 * (ability >= 3), 'odd': float(ability < 3)})
            for ability in (5, 4, 3, 2, 1, 0)]
    table = {c['grade_id']: c for c in classreport.cell_table(subs, points)}
    assert table['hard']['flags'] == ['nobody passes'] and table['hard']['pass_rate'] == 0
    assert table['easy']['flags'] == ['everybody passes'] and table['easy']['pass_rate'] == 1
    assert table['odd']['flags'] == ['negative discrimination'] and table['odd']['discrimination'] < -0.5
    assert table['fair']['flags'] == [] and table['fair']['pass_rate'] == pytest.approx(0.5)
    assert table['fair']['mean'] == pytest.approx(1.0)
    totals = [s['autograded'] for s in subs]
    fair = [s['cells']['fair'] for s in subs]
    assert table['fair']['discrimination'] == pytest.approx(
        statistics.correlation(fair, [t - f for t, f in zip(totals, fair, strict=True)]))
    assert table['hard']['discrimination'] is None, 'a cell whose score does not vary has no correlation'


def test_similarity_lists_the_copied_solutions_and_not_the_release_the_reference_or_the_pasted_tests(course):
    """copy_a, copy_b (the same code renamed) and the hostile student (who copied copy_a's) are listed; two students who
    wrote the reference solution, one who pasted the visible tests into the solution cell, and the blank one are not."""
    students = [s for s, spec in CLASS.items() if spec[0] is not None]
    pairs, compared = classreport.similar_pairs(STEP, students, course)
    listed = {frozenset(p['students']) for p in pairs}
    assert listed == {frozenset(p) for p in [('copy_a', 'copy_b'), ('copy_a', HOSTILE_ID), ('copy_b', HOSTILE_ID)]}, listed
    assert compared == len(students) - 4, 'perfect, perfect_too, needs_attention and stub_left wrote nothing of their own'
    copied = next(p for p in pairs if set(p['students']) == {'copy_a', 'copy_b'})
    assert min(copied['similarity']) > 0.9, copied['similarity']
    shared = ''.join(text for text, marked in copied['code'][0] if marked)
    assert 'for term in (a, b)' in shared, f'the copied lines are marked: {copied["code"][0]}'


def test_failure_messages_are_grouped_with_their_share_of_the_class(course, report):
    html, seen = report
    assert '20% of the class (2 of 10)' in seen['text'], 'subtracts and subtracts_too, whose numbers differ, are one group'
    assert 'AssertionError: add(…, …): expected …, got …; check the operator' in seen['text']
    assert '1 left the function\'s stub (NotImplementedError): stub_left' in seen['text']
    assert '11 written answers awaiting a grader' in seen['text'], 'the answer cell of each submission but the blank one'


def test_hostile_text_in_every_field_shows_as_text_and_never_runs_in_chromium(report):
    """Student id, failure message, status detail, kernel, names and solution code carry a <script>, an <img onerror>, a
    </style> and friends: Chromium ran no script (no dialog, no global set, no console message: the CSP refused nothing
    because nothing tried), the page holds no script element and no event handler, and the text reads as written."""
    html, seen = report
    assert '<script' not in html.lower() and html.count('<style') == 1 and HOSTILE not in html and HOSTILE_ID not in html, (
        'hostile markup reached the page unescaped')
    assert not seen['dialogs'] and seen['pwned'] is None and not seen['console'] and not seen['requests'], seen
    assert seen['scripts'] == 0 and not seen['handlers'], seen
    assert all(img['src'] == 'data:image/png;base64,' for img in seen['images']) and len(seen['images']) == 3, seen['images']
    for where, text in [('the student id', HOSTILE_ID), ('the failure message', HOSTILE)]:
        assert text in seen['text'], f'{where} does not read as written'
    for where, text in [('the solution code', f'note = {HOSTILE!r}'), ('the kernel', HOSTILE),
                        ('the status detail', f'{NAME}: {HOSTILE}.ipynb')]:
        assert text in seen['all_text'], f'{where} does not read as written (in a closed <details>: the page\'s text)'


def test_the_hostile_check_sees_a_script_that_runs(tmp_path):
    """Positive control: the same hostile text put in a page unescaped, without the CSP, runs, and open_page sees it."""
    page = tmp_path / 'unsafe.html'
    page.write_text(f'<!DOCTYPE html><html><body><p>{HOSTILE}</p><p>{HOSTILE_ID}</p></body></html>')
    seen = open_page(page, tmp_path / 'unsafe.png')
    assert seen['dialogs'] and seen['pwned'] and seen['scripts'] and seen['handlers'], seen


def test_the_classreport_command_rebuilds_the_page_after_manual_grading_without_regrading(course, report):
    """The page lists the answers awaiting a grader; one is graded in the gradebook (as the formgrader does);
    `python -m course.reports.classreport` rebuilds the page: that answer is gone from the list, and nothing of grading moved.
    (Last: it grades.)"""
    from nbgrader.api import Gradebook

    def grading_state():
        return {str(p.relative_to(course)): hashlib.sha256(p.read_bytes()).hexdigest()
                for folder in ('results', 'autograded') for p in (course / folder).rglob('*') if p.is_file()}

    def awaiting(html):
        cell = html.split('<code>why</code></td>', 1)[1].split('</tr>', 1)[0]
        return int(re.search(r'class="num">(\d+)<', cell)[1]), 'perfect_too' in cell

    before = grading_state()
    assert awaiting(report[0]) == (11, True)
    with Gradebook(f'sqlite:///{course / "gradebook.db"}') as gb:
        grade = gb.find_grade('why', NB, STEP, 'perfect_too')
        grade.manual_score, grade.needs_manual_grade = 1, False  # as the formgrader sets them
        gb.db.commit()
    done = subprocess.run([sys.executable, '-m', 'course.reports.classreport'], cwd=course, capture_output=True, text=True,
                          env=runner.env(course))
    assert done.returncode == 0 and 'reports/index.html' in done.stdout, done.stdout + done.stderr
    assert awaiting((course / 'reports' / 'index.html').read_text()) == (10, False), 'the graded answer is still listed'
    assert grading_state() == before
