"""course.feedback.FeedbackExporter renders the page that nbconvert's HTMLExporter renders, without its costs."""

import copy

import nbformat
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter

from course.cells import read
from course.feedback import NO_ALT, REMEMBERED, SHARED_BYTECODE, FeedbackExporter
from course.layout import ROOT

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
    ours, _ = FeedbackExporter(template_name='classic').from_notebook_node(nb)
    assert BeautifulSoup(ours, 'html.parser').decode() == BeautifulSoup(theirs, 'html.parser').decode()
    assert f'alt="{NO_ALT}"' in ours, 'the image without alt text gets nbconvert\'s placeholder'


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
    ours, _ = FeedbackExporter(template_name='classic').from_notebook_node(nb)
    assert calls == [code[0].source], f'expected only the changed cell highlighted again, saw {len(calls)} cells highlighted'
    monkeypatch.undo()
    theirs, _ = HTMLExporter(template_name='classic').from_notebook_node(nb)
    assert BeautifulSoup(ours, 'html.parser').decode() == BeautifulSoup(theirs, 'html.parser').decode()
