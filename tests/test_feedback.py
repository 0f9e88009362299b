"""course.reports.feedback.FeedbackExporter renders the page that nbconvert's HTMLExporter renders, without its costs; and the
page's summary of claims and its offline maths (tests/test_browser.py opens real pages in Chromium)."""

import copy
import re

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter

from course.cells import read
from course.layout import ROOT
from course.reports.feedback import NO_ALT, REMEMBERED, SHARED_BYTECODE, ClaimSummary, FeedbackExporter, claim_name

PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='


def notebook():
    """An executed solution of the course, with one more image: without alt text."""
    nb = copy.deepcopy(read(next((ROOT / 'notebooks').glob('*.ipynb'))))
    nb.cells.append(nbformat.v4.new_code_cell('show()', outputs=[nbformat.v4.new_output(
        'display_data', data={'image/png': PNG, 'text/plain': '<Figure>'})]))
    return nb


def test_feedback_page_is_html_exporters_page():
    """Parsed, the two pages are the same document (HTMLExporter's BeautifulSoup pass only re-serialises it)."""
    nb = notebook()
    theirs, _ = HTMLExporter(template_name='classic').from_notebook_node(nb)
    ours, _ = FeedbackExporter(template_name='classic', offline_maths=False).from_notebook_node(nb)
    assert BeautifulSoup(ours, 'html.parser').decode() == BeautifulSoup(theirs, 'html.parser').decode()
    assert f'alt="{NO_ALT}"' in ours, 'the image without alt text gets nbconvert\'s placeholder'


# nbconvert's mathjax() macro (MathJax from a CDN) and FeedbackExporter's (MathJax in the page).
CDN_MATHJAX = re.compile(r'<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->', re.S)
OWN_MATHJAX = re.compile(r'<!-- MathJax 2, offline: see course/reports/feedback.py -->'
                         r'(\s*<script type="text/javascript">.*?</script>)+', re.S)


def test_the_maths_is_in_the_page_in_place_of_the_cdns_and_the_page_is_otherwise_the_same():
    nb = notebook()
    theirs, _ = HTMLExporter(template_name='classic').from_notebook_node(nb)
    ours, _ = FeedbackExporter(template_name='classic').from_notebook_node(nb)
    assert re.search(r'<script[^>]*\ssrc="[^"]*mathjax', theirs, re.I), "nbconvert's page loads MathJax from a CDN"
    assert not re.search(r'<script[^>]*\ssrc="[^"]*mathjax', ours, re.I), 'ours loads it from nowhere'
    assert len(OWN_MATHJAX.findall(ours)) == 1 and 'MathJax.Hub.Config' in ours and "root: 'about:blank'" in ours
    same = [BeautifulSoup(pattern.sub('', page), 'html.parser').decode() for pattern, page in
            ((CDN_MATHJAX, theirs), (OWN_MATHJAX, ours))]
    assert same[0] == same[1], 'only the maths differ'


def test_templates_are_compiled_once_per_process():
    """A second exporter (nbgrader makes one per run) loads the templates' code from the shared cache."""
    SHARED_BYTECODE.clear()
    FeedbackExporter(template_name='classic').from_notebook_node(notebook())
    compiled = dict(SHARED_BYTECODE.code)
    assert compiled, 'the first page compiled the templates into the shared cache'
    loaded = []
    load = SHARED_BYTECODE.load_bytecode
    SHARED_BYTECODE.load_bytecode = lambda bucket: (loaded.append(bucket.key), load(bucket))
    try:
        FeedbackExporter(template_name='classic').from_notebook_node(notebook())
    finally:
        del SHARED_BYTECODE.load_bytecode
    assert set(loaded) == set(compiled) and SHARED_BYTECODE.code == compiled, 'the second page compiled nothing'


def test_code_is_highlighted_once_per_process(monkeypatch):
    """A second page highlights only the code the first did not have, and is still HTMLExporter's page."""
    from nbconvert.filters import highlight

    REMEMBERED.clear()
    FeedbackExporter(template_name='classic').from_notebook_node(notebook())
    nb = notebook()
    code = [c for c in nb.cells if c.cell_type == 'code']
    code[0].source += '\n# a line only this submission has'
    calls = []
    real = highlight._pygments_highlight

    def counted(source, *args, **kw):
        calls.append(source)
        return real(source, *args, **kw)

    monkeypatch.setattr(highlight, '_pygments_highlight', counted)
    ours, _ = FeedbackExporter(template_name='classic', offline_maths=False).from_notebook_node(nb)
    assert calls == [code[0].source], f'expected only the changed cell highlighted again, saw {len(calls)} cells highlighted'
    monkeypatch.undo()
    theirs, _ = HTMLExporter(template_name='classic').from_notebook_node(nb)
    assert BeautifulSoup(ours, 'html.parser').decode() == BeautifulSoup(theirs, 'html.parser').decode()


# The summary.

POINTS = {'t_pass': 1, 't_fail': 2, 't_stderr': 1, 'answer_todo': 2, 'answer_done': 2}
HOSTILE_LINE = '"""<img src=x onerror=alert(1)>Check <b>me</b>"""'


def graded_notebook():
    """A feedback notebook as nbgrader's GetGrades leaves it: a test that passed, one that failed with a message (its
    first line edited by the student into HTML), one that wrote to stderr, a written answer awaiting a grader and one
    graded with a comment."""
    def cell(gid, source, kind='test', score=None, outputs=(), comment=None):
        meta = {'grade': True, 'grade_id': gid, 'points': POINTS[gid], 'score': score, 'locked': kind == 'test',
                'solution': kind == 'answer', 'schema_version': 3}
        if comment:
            meta['comment'] = comment
        if kind == 'answer':
            return nbformat.v4.new_markdown_cell(source, metadata={'nbgrader': meta})
        return nbformat.v4.new_code_cell(source, metadata={'nbgrader': meta}, outputs=list(outputs))

    error = nbformat.v4.new_output('error', ename='AssertionError', traceback=[],
                                   evalue='expected 3, got <script>alert(1)</script>; check the sign\nsecond line')
    stderr = nbformat.v4.new_output('stream', name='stderr', text='\nRuntimeWarning: overflow\n')
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell('# Title, and $x^2$'),
                cell('t_pass', '"""Check that it passes."""\nassert True', score=1),
                cell('t_fail', HOSTILE_LINE + '\nassert False', score=0, outputs=[error]),
                cell('t_stderr', 'import warnings', score=0, outputs=[stderr]),
                cell('answer_todo', 'My answer.', kind='answer', score=0),
                cell('answer_done', 'My other answer.', kind='answer', score=1.5, comment='Good.')]
    return nb


def resources():
    return {'nbgrader': {'notebook': 'step0', 'score': 2.5, 'max_score': 8, 'late_penalty': 0}}


def feedback_page(monkeypatch, sources=None, awaiting=('answer_todo',)):
    """(the page FeedbackExporter writes with nbgrader's feedback template, resources['claims']), ClaimSummary's gradebook
    answering sources ({grade_id: source cell}) and which answers await a grader."""
    import os

    import nbgrader

    monkeypatch.setattr(ClaimSummary, 'from_gradebook',
                        lambda self, info: (sources or {}, {gid: gid in awaiting for gid in POINTS}))
    nb, res = ClaimSummary().preprocess(graded_notebook(), resources())
    formgrader = os.path.join(os.path.dirname(nbgrader.__file__), 'server_extensions', 'formgrader')
    css = os.path.join(formgrader, 'static', 'node_modules', 'bootstrap', 'dist', 'css')  # as nbgrader's GenerateFeedback
    exporter = FeedbackExporter(template_name='feedback', extra_template_basedirs=[os.path.join(formgrader, 'templates')],
                                extra_template_paths=[css])
    page, _ = exporter.from_notebook_node(nb, res)
    return page, res['claims']


def summary_of(page):
    return BeautifulSoup(page, 'html.parser').find(id='summary')


def test_summary_lists_failed_claims_first_with_their_message_then_answers_then_passed_folded(monkeypatch):
    page, claims = feedback_page(monkeypatch)
    summary = summary_of(page)
    assert summary is not None and 'id="toc"' not in page, "nbgrader's table of contents is replaced"
    headings = [h.get_text() for h in summary.find_all(['h5', 'summary'])]
    assert headings == ['To fix: 2 of 3 claims failed', 'Written answers awaiting a grader: 1', 'Written answers graded: 1',
                        'Passed: 1 claim'], headings
    failed = summary.select('ol.failed > li')
    assert [li.a['href'] for li in failed] == ['#t_fail', '#t_stderr']
    assert failed[0].select_one('.message').get_text() == 'expected 3, got <script>alert(1)</script>; check the sign'
    assert failed[1].select_one('.message').get_text() == 'wrote to stderr: RuntimeWarning: overflow'
    assert [a['href'] for a in summary.select('details ol.passed a')] == ['#t_pass']
    assert summary.select_one('details').get('open') is None, 'the passed claims are folded'
    assert summary.find('a', href='#comment-answer_done'), 'a graded answer links to its comment'
    page_anchors = {a.get('name') for a in BeautifulSoup(page, 'html.parser').find_all('a') if a.get('name')}
    assert {a['href'][1:] for a in summary.find_all('a')} <= page_anchors, 'every link reaches its cell'


def test_summary_escapes_what_the_student_wrote(monkeypatch):
    """The edited first line and the error message are shown as text: no element of theirs in the summary."""
    page, _ = feedback_page(monkeypatch)
    summary = summary_of(page)
    assert not summary.find(['img', 'script', 'b']), summary.decode()[:2000]
    assert '&lt;script&gt;alert(1)&lt;/script&gt;' in summary.decode()


def test_summary_names_a_claim_from_the_sources_visible_docstring_not_the_submission_nor_a_hidden_test(monkeypatch):
    source = ('### BEGIN HIDDEN TESTS\n"""A hidden docstring, never shown."""\nassert secret()\n### END HIDDEN TESTS\n'
              '"""Check that the real claim holds."""\nassert True')
    page, claims = feedback_page(monkeypatch, sources={'t_fail': source})
    names = {c['grade_id']: c['name'] for c in claims}
    assert names == {'t_pass': 'Check that it passes.', 't_fail': 'Check that the real claim holds.',
                     't_stderr': 't_stderr', 'answer_todo': 'answer_todo', 'answer_done': 'answer_done'}, names
    text = summary_of(page).get_text()
    assert 'Check that the real claim holds.' in text and 'hidden' not in text and 'Check <b>me' not in text


@pytest.mark.parametrize('source, name', [
    ('"""Check that A holds."""\nassert A', 'Check that A holds.'),
    ("r'''Check B, over\ntwo lines.'''", 'Check B, over'),
    ('### BEGIN HIDDEN TESTS\n"""Hidden."""\nassert x\n### END HIDDEN TESTS\n"""Check C."""', 'Check C.'),
    ('### BEGIN HIDDEN TESTS\n"""Hidden, and never closed."""', 'gid'),
    ('assert x == 1  # no docstring', 'gid'),
    ('""""""', 'gid'),
    ('', 'gid')])
def test_claim_name_is_the_first_line_of_the_visible_docstring_else_the_grade_id(source, name):
    assert claim_name(source, 'gid') == name


# Hidden-test text printed by the student's code, in every form an output takes.
HIDDEN_TEST = '''"""Check that the head matches the reference."""
assert head(x).shape == (2, 3)
### BEGIN HIDDEN TESTS
secret_reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
assert torch.allclose(head(x), secret_reference, atol=1e-5), "the head differs from the reference"
### END HIDDEN TESTS'''
SECRET = 'secret_reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)'


def scrubbed_notebook(outputs):
    """A notebook of a test cell with a hidden region and a student's cell with outputs, scrubbed by ScrubHiddenTests."""
    from course.reports.feedback import ScrubHiddenTests

    test = nbformat.v4.new_code_cell(HIDDEN_TEST, metadata={'nbgrader': {
        'grade': True, 'grade_id': 'head_matches', 'points': 1, 'solution': False, 'locked': True}})
    student = nbformat.v4.new_code_cell('print(shapes)', outputs=outputs)
    nb = nbformat.v4.new_notebook(cells=[test, student])
    ScrubHiddenTests().preprocess(nb, {})
    return nb.cells[1].outputs


@pytest.mark.parametrize('form', ['raw', 'repr', 'html', 'reindented', 'wrapped', 'upper', 'ansi', 'half'])
def test_hidden_test_text_printed_in_any_form_is_scrubbed_and_the_rest_kept(form):
    import html as html_module
    import textwrap

    printed = {'raw': SECRET, 'repr': repr(HIDDEN_TEST), 'html': html_module.escape(SECRET),
               'reindented': '        ' + SECRET.replace(', ', ',   '), 'wrapped': '\n'.join(textwrap.wrap(SECRET, 30)),
               'upper': SECRET.upper(), 'ansi': SECRET.replace('torch', '\x1b[31mtorch\x1b[0m'),
               'half': SECRET[:40] + '\nnoise\n' + SECRET[40:]}[form]
    outputs = scrubbed_notebook([
        nbformat.v4.new_output('stream', name='stdout', text=f'my shapes: (2, 3)\n{printed}\ndone\n'),
        nbformat.v4.new_output('display_data', data={'text/html': f'<pre>{printed}</pre>', 'text/plain': printed}),
        nbformat.v4.new_output('error', ename='ValueError', evalue=printed, traceback=[printed, 'ValueError: x']),
    ])
    shown = repr(outputs)
    assert normal_free_of_secret(shown), shown
    assert 'my shapes: (2, 3)' in outputs[0].text and 'done' in outputs[0].text, 'the student\'s own lines are kept'
    assert [o.output_type for o in outputs] == ['stream', 'display_data', 'error'] and outputs[2].ename == 'ValueError'


def normal_free_of_secret(text):
    from course.reports.feedback import normal

    flat = normal(text)
    return all(normal(part) not in flat for part in ('torch.nn.functional.scaled_dot_product', 'secret_reference=torch'))


def test_honest_outputs_what_the_test_cell_shows_openly_and_a_hidden_tests_message_are_not_scrubbed():
    """Kept: the visible lines of the test, the student's own output, and the message a failed hidden test gives (a
    string of its code: meant to be read)."""
    outputs = scrubbed_notebook([
        nbformat.v4.new_output('stream', name='stdout', text=(
            'assert head(x).shape == (2, 3)\n"""Check that the head matches the reference."""\ntensor([1., 2.])\n')),
        nbformat.v4.new_output('error', ename='AssertionError', evalue='the head differs from the reference',
                               traceback=['AssertionError: the head differs from the reference'])])
    assert outputs[0].text == ('assert head(x).shape == (2, 3)\n"""Check that the head matches the reference."""\n'
                               'tensor([1., 2.])\n')
    assert outputs[1].evalue == 'the head differs from the reference' and len(outputs[1].traceback) == 1


def test_a_students_cell_holding_the_hidden_test_marker_still_gets_its_feedback_page():
    """nbgrader's ClearHiddenTests raises on a non-test cell that holds the marker (no page was written, the status said
    graded); ClearHiddenTestsOfTestCells cuts the hidden regions out of the test cells only."""
    from course.reports.feedback import ClearHiddenTestsOfTestCells

    test = nbformat.v4.new_code_cell(HIDDEN_TEST, metadata={'nbgrader': {
        'grade': True, 'grade_id': 'head_matches', 'points': 1, 'solution': False, 'locked': True}})
    student = nbformat.v4.new_code_cell("print('### BEGIN HIDDEN TESTS')")
    nb, _ = ClearHiddenTestsOfTestCells().preprocess(nbformat.v4.new_notebook(cells=[test, student]), {})
    assert 'secret_reference' not in nb.cells[0].source and nb.cells[1].source == "print('### BEGIN HIDDEN TESTS')"


def test_a_failed_test_cell_shows_its_errors_name_and_message_never_its_traceback():
    """TestMessagesOnly (in generate_feedback's pipeline): a test cell's error keeps its name and message, its traceback
    (which could quote a hidden test's line) becomes that one line; a student's cell keeps its own traceback."""
    from course.reports.feedback import TestMessagesOnly

    def failed(source, **nbgrader):
        cell = nbformat.v4.new_code_cell(source, outputs=[nbformat.v4.new_output(
            'error', ename='AssertionError', evalue='expected 3, got 4', traceback=['  assert f(2) == 3  # hidden', 'x'])])
        if nbgrader:
            cell.metadata['nbgrader'] = nbgrader
        return cell

    test = failed('assert f(2) == 3', grade=True, solution=False, locked=True, grade_id='f_adds_one', points=1)
    mine = failed('f(2)')
    nb = nbformat.v4.new_notebook(cells=[test, mine])
    TestMessagesOnly().preprocess(nb, {})
    assert nb.cells[0].outputs[0].traceback == ['AssertionError: expected 3, got 4'], nb.cells[0].outputs
    assert nb.cells[1].outputs[0].traceback == ['  assert f(2) == 3  # hidden', 'x'], 'the student\'s own cell is theirs'
