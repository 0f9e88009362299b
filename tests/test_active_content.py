"""course/reports/active_content.py, fast: what the sanitizer removes and keeps, the files written while graded, the formgrader's
content-security policy. The end-to-end journey (graded by course.grader.grade, opened in the formgrader) is in
tests/test_browser.py."""

import base64
import functools
import os
from html.parser import HTMLParser

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course.layout import ROOT
from course.reports import active_content
from course.reports.active_content import (
    RemoveNewFiles,
    SanitizeActiveContent,
    SnapshotFiles,
    page_policy,
    read_removed,
    sha256,
    write_report,
)

JS = "alert('XSS')"
# Each a way for a student to run JS in the page nbconvert renders (the formgrader, the feedback), in a markdown cell.
MARKDOWN = {
    'script': f'<script>{JS}</script>',
    'img onerror': f'<img src="x" onerror="{JS}">',
    'svg onload': f'<svg onload="{JS}"></svg>',
    'details ontoggle': f'<details open ontoggle="{JS}">x</details>',
    'iframe srcdoc': f'<iframe srcdoc="<script>{JS}</script>"></iframe>',
    'markdown javascript: link': f'[click](javascript:{JS})',
    'html javascript: link': f'<a href="javascript:{JS}">click</a>',
    'data: link': '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">click</a>',
    'form': '<form action="/api/contents" method="post"><button>go</button></form>',
    'object': '<object data="x.swf"></object>',
    'style': '<style>body { display: none }</style>',
    'math mutation': f'<math><mtext><table><mglyph><style><img src=x onerror="{JS}"></style></mglyph></table></mtext></math>',
    'api image': '<img src="/api/contents/secret.txt">',
    'traversal image': '<img src="../../../api/contents/x">',
    'encoded traversal image': '<img src="%2e%2e/%2e%2e/api/x">',
}
OUTPUTS = {
    'text/html script': {'text/html': f'<b>hi</b><script>{JS}</script>', 'text/plain': 'hi'},
    'text/html handler': {'text/html': f'<b onmouseover="{JS}">hi</b>', 'text/plain': 'hi'},
    'application/javascript': {'application/javascript': JS, 'text/plain': '<Javascript>'},
    'text/markdown': {'text/markdown': f'[x](javascript:{JS})', 'text/plain': 'md'},
    'image/svg+xml': {'image/svg+xml': f'<svg xmlns="http://www.w3.org/2000/svg" onload="{JS}"/>'},
    'widget': {'application/vnd.jupyter.widget-view+json': {'model_id': 'x'}, 'text/plain': 'w'},
    'png that is not one': {'image/png': f'x" onerror="{JS}'},
}
PNG = base64.b64encode(b'\x89PNG\r\n\x1a\n' + bytes(24)).decode()


def sanitized(nb):
    nb, _ = SanitizeActiveContent(report=False).preprocess(nb, {})
    return nb, nb.metadata.get('course', {}).get('active_content_removed', [])


class Active(HTMLParser):
    """What is active in a rendered page's body: the student's JS (script text, event handlers, javascript: URLs), and
    elements or URLs that load or submit something (a form, a frame, an object, a URL into the server's API)."""

    BAD_TAGS = {'script', 'iframe', 'frame', 'object', 'embed', 'form', 'svg', 'math', 'style', 'link', 'meta', 'base'}

    def __init__(self):
        super().__init__()
        self.found, self.in_body, self.in_script = [], False, False

    def handle_starttag(self, tag, attrs):
        self.in_body |= tag == 'body'
        self.in_script = tag == 'script'
        if not self.in_body:
            return
        if tag in self.BAD_TAGS:
            self.found.append(f'<{tag}>')
        for name, value in attrs:
            value = (value or '').strip().lower()
            if name.startswith('on') or 'javascript:' in value or 'xss' in value and name in ('srcdoc', 'data', 'action'):
                self.found.append(f'{tag} {name}={value[:60]}')
            if name in ('href', 'src', 'action', 'data') and (
                    '/api/' in value or '..' in value or '%2e' in value or value.startswith('data:') and
                    not value.startswith('data:image/png;base64,')):
                self.found.append(f'{tag} {name}={value[:60]}')

    def handle_data(self, data):
        if self.in_script and 'XSS' in data:
            self.found.append(f'script {data[:60]}')

    def handle_endtag(self, tag):
        self.in_script = False


@functools.cache
def exporter():
    return HTMLExporter(template_name='classic')


def render(nb):
    """The page nbconvert makes of nb (the formgrader and the feedback use its classic template), and the student's JS
    that is active in it."""
    html, _ = exporter().from_notebook_node(nb)
    parser = Active()
    parser.feed(html)
    return html, parser.found


@pytest.mark.parametrize('vector', MARKDOWN)
def test_markdown_vector_is_removed_and_reported(vector):
    nb = new_notebook(cells=[new_markdown_cell(f'My answer. {MARKDOWN[vector]} The end.')])
    assert render(nb)[1], f'{vector}: the unsanitized page should hold it, or the test proves nothing'
    nb, removed = sanitized(nb)
    html, active = render(nb)
    assert not active, f'{vector}: still active after sanitizing: {active}'
    assert removed and removed[0].startswith('cell 1, markdown cell'), removed
    assert 'My answer.' in nb.cells[0].source and 'The end.' in nb.cells[0].source, nb.cells[0].source


@pytest.mark.parametrize('vector', OUTPUTS)
def test_output_vector_is_removed_and_reported(vector):
    nb = new_notebook(cells=[new_code_cell('x', outputs=[new_output('display_data', data=OUTPUTS[vector])])])
    nb, removed = sanitized(nb)
    html, active = render(nb)
    assert not active, f'{vector}: still active after sanitizing: {active}'
    assert removed and removed[0].startswith('cell 1, output 1'), removed
    assert nb.cells[0].outputs[0].data, 'an output left with nothing to show'


def test_what_graders_need_is_kept_unchanged():
    markdown = ('# Heading\n\nThe scores are $s_{ij} = q_i \\cdot k_j / \\sqrt{d}$ and $a<b$, $$\\sum_j A_{ij} = 1$$\n\n'
                '| T | loss |\n|:--|--:|\n| 8 | 2.5 |\n\n> a quote, `x < y`, **bold**, <sub>2</sub>\n\n'
                '```python\nif a < b:\n    pass\n```\n\n'
                '[the paper](https://arxiv.org/abs/1706.03762) ![a figure](figure.png) <img src="data:image/png;base64,'
                f'{PNG}" alt="inline">')
    table = '<table><thead><tr><th>T</th><th>loss</th></tr></thead><tbody><tr><td>8</td><td>2.50</td></tr></tbody></table>'
    error = new_output('error', ename='AssertionError', evalue='expected rows summing to 1 <got 0.5>; check the mask',
                       traceback=['AssertionError: expected rows summing to 1 <got 0.5>; check the mask'])
    cells = [new_markdown_cell(markdown), new_code_cell('x', outputs=[
        new_output('display_data', data={'image/png': PNG, 'text/plain': '<Figure>'},
                   metadata={'image/png': {'alt': 'A heatmap of A[i, j]', 'width': 300}}),
        new_output('display_data', data={'text/html': table, 'text/plain': 'table'}),
        new_output('display_data', data={'text/latex': '$\\frac{1}{\\sqrt{d}}$', 'text/plain': 'latex'}),
        new_output('stream', name='stdout', text='loss 2.50 <3\n'), error])]
    nb = new_notebook(cells=cells)
    before = nbformat.writes(nb)
    nb, removed = sanitized(nb)
    assert removed == [] and nbformat.writes(nb) == before, removed
    html, _ = render(nb)
    assert 'alt="A heatmap of A[i, j]"' in html and 'expected rows summing to 1 &lt;got 0.5&gt;' in html


@pytest.mark.parametrize('path', sorted((ROOT / 'notebooks').glob('*.ipynb')), ids=lambda p: p.name)
def test_the_executed_solutions_lose_nothing(path):
    """The course's own notebooks, executed with their figures and printed numbers: nothing in them is active."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    nb, removed = sanitized(nb)
    assert removed == [] and nbformat.writes(nb) == before, removed


def test_widget_state_and_output_metadata_urls_are_dropped():
    nb = new_notebook(cells=[new_code_cell('x', outputs=[new_output(
        'display_data', data={'image/png': PNG}, metadata={'filenames': {'image/png': '/api/contents/x'},
                                                          'text/html': {'isolated': True}, 'image/png': {'alt': 'ok'}})])])
    nb.metadata['widgets'] = {'application/vnd.jupyter.widget-state+json': {'state': {}}}
    nb, removed = sanitized(nb)
    assert 'widgets' not in nb.metadata and nb.cells[0].outputs[0].metadata == {'image/png': {'alt': 'ok'}}, removed


def test_files_written_while_graded_are_deleted_and_links_not_followed(tmp_path):
    outside = tmp_path / 'outside'
    outside.mkdir()
    (outside / 'keep.txt').write_text('the grader\'s')
    folder = tmp_path / 'autograded'
    folder.mkdir()
    (folder / 'submitted.ipynb').write_text('{}')
    resources = {'metadata': {'path': str(folder)}}
    nb, resources = SnapshotFiles().preprocess(new_notebook(), resources)
    (folder / 'pwn.html').write_text('<script></script>')
    (folder / 'sub' / 'deeper').mkdir(parents=True)
    (folder / 'sub' / 'deeper' / 'x.html').write_text('x')
    os.symlink(outside, folder / 'link_to_folder')
    os.symlink(outside / 'keep.txt', folder / 'link_to_file')
    os.symlink(outside, folder / 'sub' / 'inner_link')
    RemoveNewFiles().preprocess(nb, resources)
    assert sorted(p.name for p in folder.iterdir()) == ['submitted.ipynb']
    assert (outside / 'keep.txt').read_text() == 'the grader\'s'
    assert set(resources['files_deleted']) >= {'pwn.html', 'sub/', 'link_to_folder', 'link_to_file'}


def test_report_lines_are_replaced_and_repairs_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(active_content, 'ROOT', tmp_path)
    report = tmp_path / 'repairs' / 'amy' / 'stepA.txt'
    report.parent.mkdir(parents=True)
    report.write_text('repaired: head_tests: locked cell edited; graded with the original\nremoved: an old line\n')
    write_report('stepA', 'amy', ['cell 3, output 1: <script>'], ['pwn.html'])
    assert read_removed('stepA', 'amy') == ['cell 3, output 1: <script>']
    assert report.read_text().splitlines() == ['repaired: head_tests: locked cell edited; graded with the original',
                                               'removed: cell 3, output 1: <script>',
                                               'deleted: written by the code while graded: pwn.html']
    write_report('stepA', 'amy', [], [])
    assert read_removed('stepA', 'amy') == [] and report.read_text().startswith('repaired: ')


def test_page_policy_trusts_the_heads_inline_scripts_only():
    own, student = 'var base_url = "/formgrader";', "alert('XSS')"
    page = f'<html><head><script>{own}</script></head><body><script>{student}</script></body></html>'
    policy = page_policy(page.encode(), 'https://cdn.example/mathjax/')
    script_src = next(d for d in policy.split('; ') if d.startswith('script-src'))
    assert sha256(own) in script_src and sha256(student) not in script_src and 'unsafe-inline' not in script_src, policy


def test_protect_formgrader_does_nothing_outside_a_jupyter_server():
    assert active_content.protect_formgrader() is False
