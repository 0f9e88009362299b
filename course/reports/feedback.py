"""The exporter of the feedback pages: nbconvert's HTMLExporter, less three costs that a feedback page does not need.

nbgrader's generate_feedback renders each page with `GenerateFeedback.exporter_class` (nbconvert's HTMLExporter by
default); nbgrader_config.py points it here. Per page, HTMLExporter:
- compiles its Jinja templates again, because every nbgrader run makes a new exporter with a new Jinja environment.
  FeedbackExporter gives every environment of the process one shared in-memory bytecode cache (Jinja's own mechanism):
  a long-lived grading worker compiles the templates once, then loads their code.
- parses the whole rendered page again with BeautifulSoup, to add `alt` text to images without it and `tabindex` to the
  cells of JupyterLab-styled pages. nbgrader's feedback template is the classic one, which has no such cells; and an
  image of the feedback without alt text gets nbconvert's placeholder here too, by a regular expression over the `<img>`
  tags, without parsing the page.
- highlights the code of every cell with Pygments, although most of it (the course's given code and visible tests) is
  the same in every submission. FeedbackExporter's highlighter remembers, for the life of the process, what it
  highlighted: a worker highlights the course's code once and each submission's own code once.
The page is otherwise the same; tests/test_feedback.py compares it with HTMLExporter's.

Before any of that, ScrubHiddenTests (also run after autograde's execution) takes out of every output of every cell
any text of a hidden test that the student's code printed, ClearHiddenTestsOfTestCells cuts the hidden regions out
of the test cells alone (see below), and TestMessagesOnly shows a failed test's error as its name and message, never
its traceback.

And two things for the student who opens it:
- Its summary names each claim and says first what to fix. nbgrader's table of contents ("Test cell (Score: 0.0 / 3.0)"
  for every test) becomes: the claims that failed, each named by the first line of its test's docstring ("Check that
  ...") or its grade_id, with its score, the one-line message of its error and a link to the cell; then the written
  answers awaiting a grader, then those graded; then the claims that passed, folded. The preprocessor ClaimSummary
  (after nbgrader's GetGrades) collects them: each claim's name from the test cell of the gradebook's source notebook
  with its hidden tests cut out, never from the submission or a hidden line; everything written into the page escaped.
- Its maths renders with no network: MathJax 2 (the copy jupyter-server-mathjax ships) is written into the page itself
  (nbgrader's release_feedback hands out the .html file alone), TeX in, MathML out (the browser draws it: no font or file
  to fetch), with MathJax's Safe extension. nbgrader's template loads MathJax from a CDN, so offline every formula stayed
  raw LaTeX.
"""

import functools
import html
import json
import re
from pathlib import Path

from jinja2 import BytecodeCache, ChoiceLoader, DictLoader
from markupsafe import Markup
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from traitlets import Bool, Integer

from course.cells import grade_id, role

NO_ALT = 'No description has been provided for this image'  # nbconvert's own placeholder
IMG_WITHOUT_ALT = re.compile(r'<img(?![^>]*\salt=)', re.I)


class SharedBytecode(BytecodeCache):
    """Jinja bytecode kept in memory for the life of the process, shared by every environment that uses it."""

    def __init__(self):
        self.code = {}

    def load_bytecode(self, bucket):
        if bucket.key in self.code:
            bucket.bytecode_from_string(self.code[bucket.key])

    def dump_bytecode(self, bucket):
        self.code[bucket.key] = bucket.bytecode_to_string()

    def clear(self):
        self.code.clear()


SHARED_BYTECODE = SharedBytecode()


class RememberedHighlight(Highlight2HTML):
    """nbconvert's Highlight2HTML, remembering the HTML of each (code, language, options) it highlighted, for the life of
    the process, shared by every instance (REMEMBERED, emptied past MAX_REMEMBERED entries)."""

    MAX_REMEMBERED = 20_000

    def __call__(self, source, language=None, metadata=None):
        # What Highlight2HTML's output depends on: the code, the language, a cell's magics language, the formatter options.
        key = (source, language or self.pygments_lexer, (metadata or {}).get('magics_language'),
               repr(sorted(self.extra_formatter_options.items())))
        if key not in REMEMBERED:
            if len(REMEMBERED) >= self.MAX_REMEMBERED:
                REMEMBERED.clear()
            REMEMBERED[key] = super().__call__(source, language, metadata)
        return REMEMBERED[key]


REMEMBERED = {}


# The summary: what ClaimSummary collects, and the HTML that takes the place of nbgrader's table of contents.

HIDDEN = re.compile(r'^[^\n]*### BEGIN HIDDEN TESTS.*?(### END HIDDEN TESTS[^\n]*(\n|$)|\Z)', re.M | re.S)
DOCSTRING = re.compile(r'^[rRuU]?("""|\'\'\'|"|\')(.*?)(\1)?\s*$')


def claim_name(source, gid):
    """The name of the claim a test cell checks: the first line of its docstring with the hidden tests cut out of source
    (nbgrader's markers), else its grade_id."""
    visible = HIDDEN.sub('', source or '')
    first = next((line.strip() for line in visible.splitlines() if line.strip()), '')
    m = DOCSTRING.match(first)
    return (m and m[2].strip()) or gid


# Nothing of a hidden test leaves the grader. nbgrader's ClearHiddenTests cuts the hidden tests out of the test cells'
# source in the feedback; but the student's kernel ran them, and any code of the student's (an IPython hook, a function
# a hidden test calls, a later cell) can print what it saw: into any output of any cell, as text, HTML, an error. So
# every output of every cell is scrubbed of hidden-test text, in the autograded notebook (the formgrader, the class
# report, results/) and in the feedback page: ScrubHiddenTests.

SCRUBBED = '[removed by the grader: this output quoted a hidden test]'
GRAM = 16  # characters (whitespace aside) of a hidden line's code that, found in an output, count as quoting it
LINE = 10  # characters (whitespace aside) of a whole hidden line that, found in an output, count as quoting it
ANSI = re.compile(r'\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])')
TAG = re.compile(r'</?[A-Za-z][^<>]*>')
SPACE_AND_ESCAPES = re.compile(r'\s+|\\[nrtu]|\\(?=[\'"\\])')
# A string literal on one line (an assertion's message, f-strings too): what a hidden test says when it fails is meant to
# be read; its code, around the strings, is what stays hidden.
STRING = re.compile(r"[rRbBuUfF]{0,2}('{3}|\"{3}|'|\")(?:\\.|(?!\1)[^\\\n])*\1")


def hidden_and_visible(source):
    """([lines of the hidden test regions], [the other lines]) of a cell's source, as nbgrader's ClearHiddenTests reads
    the markers (a line holding BEGIN HIDDEN TESTS opens a region, one holding END HIDDEN TESTS closes it)."""
    hidden, visible, inside = [], [], False
    for line in (source or '').split('\n'):
        if 'BEGIN HIDDEN TESTS' in line:
            inside = True
        elif 'END HIDDEN TESTS' in line:
            inside = False
        else:
            (hidden if inside else visible).append(line)
    return hidden, visible


def normal(text):
    """text as compared with a hidden line: terminal escapes (a traceback's colours) and HTML entities undone, whitespace
    and a string's escapes (a repr's \\n, \\') dropped, case folded: the same line printed raw, repr'd, re-indented,
    wrapped, coloured or as HTML reads the same."""
    text = ANSI.sub('', text)
    for _ in range(3):  # entities escaped twice over, as HTML in HTML
        unescaped = html.unescape(text)
        if unescaped == text:
            break
        text = unescaped
    return SPACE_AND_ESCAPES.sub('', text).casefold()


def grams(text):
    return {text[i:i + GRAM] for i in range(len(text) - GRAM + 1)}


class Secrets:
    """What of a notebook's hidden tests must not be shown: every run of GRAM characters (normal()) of the code of a line
    of its test cells' hidden regions (its string literals aside: a failed assertion's message is meant to be read) that no
    cell of the course shows openly (a visible test, the given code, the text), and each whole hidden line, strings and
    all. An output that holds one, raw, repr'd, as HTML, re-indented, split over lines, quotes a hidden test. Made once
    per process for each notebook as the course gives it (the student's own solutions aside: Secrets.of())."""

    @classmethod
    def of(cls, cells):
        given = tuple((role(c), c.get('source', '') if isinstance(c.get('source'), str) else '') for c in cells
                      if role(c) not in ('solution', 'answer'))
        return secrets_of(given)

    def __init__(self, cells):
        parts = [(kind, *hidden_and_visible(source)) for kind, source in cells]
        hidden = set().union(*(grams(normal(code)) for kind, h, _ in parts if kind == 'test'
                               for line in h for code in STRING.split(line)[::2]))
        lines = {normal(line) for kind, h, _ in parts if kind == 'test' for line in h}
        shown = {normal(line) for _, _, v in parts for line in v}
        self.grams = hidden - set().union(*map(grams, shown))
        self.lines = sorted((line for line in lines - shown if len(line) >= LINE), key=len, reverse=True)
        self.pattern = re.compile('|'.join(map(re.escape, self.lines))) if self.lines else None

    def __bool__(self):
        return bool(self.grams or self.lines)

    def quoted(self, text, stride=1):
        """Whether text holds a whole hidden line, or a run of a hidden line's code (looked for every stride characters:
        with stride s, any run of GRAM + s - 1 characters is found)."""
        for n in {normal(text), normal(TAG.sub('', text))}:  # the text, and what a browser shows of it
            if self.pattern and self.pattern.search(n):
                return True
            if any(n[i:i + GRAM] in self.grams for i in range(0, len(n) - GRAM + 1, stride)):
                return True
        return False

    def scrub(self, text):
        """text without its lines that quote a hidden line; SCRUBBED in their place, and in place of all of it if what
        is left still does (a line printed across several)."""
        if not self or not isinstance(text, str) or not self.quoted(text, 1 if len(text) < 20_000 else 4):
            return text
        lines = text.split('\n')
        kept = [line for line in lines if not self.quoted(line, 1 if len(line) < 2000 else 4)]
        for width in (2, 3):  # a hidden line cut into short lines: runs of neighbours that quote one together
            gone = {j for i in range(len(kept) - width + 1) if len(''.join(kept[i:i + width])) < 2000
                    and self.quoted(''.join(kept[i:i + width])) for j in range(i, i + width)}
            kept = [line for j, line in enumerate(kept) if j not in gone]
        out = '\n'.join(kept + [SCRUBBED] * (len(kept) < len(lines)))
        return SCRUBBED if self.quoted(out, 4) else out


BINARY = frozenset({'image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/pdf'})


@functools.lru_cache(maxsize=64)
def secrets_of(given):
    return Secrets(given)


def scrub_output(out, secrets):
    """Scrub one output (nbformat's dict) of secrets, in place; whether anything was removed. An error stays an error
    (nbgrader scores a test cell by it) and a stream keeps its name (stderr zeroes a test cell)."""
    before = repr(out)
    if out.get('output_type') == 'error':
        out['evalue'] = secrets.scrub(str(out.get('evalue', '')))
        if secrets.quoted(str(out.get('ename', '')), 4):
            out['ename'] = 'Error'
        if any(secrets.quoted(str(line), 4) for line in out.get('traceback', [])):
            out['traceback'] = [f'{out["ename"]}: {out["evalue"]}']
    elif 'text' in out:
        out['text'] = secrets.scrub(out['text'] if isinstance(out['text'], str) else ''.join(out['text']))
    for mime, value in list(out.get('data', {}).items()):
        if mime in BINARY:  # base64 of an image: no text to read (an image of text, or a cipher, is not recognised)
            continue
        if isinstance(value, list):
            value = ''.join(map(str, value))
        if isinstance(value, str):
            out['data'][mime] = secrets.scrub(value)
        elif secrets.quoted(json.dumps(value), 4):  # JSON data
            del out['data'][mime]
            out['data'].setdefault('text/plain', SCRUBBED)
    if out.get('metadata') and secrets.quoted(json.dumps(out['metadata'], default=str), 4):
        out['metadata'] = {}
    return repr(out) != before


class ScrubHiddenTests(NbGraderPreprocessor):
    """Every output of every cell scrubbed of the notebook's hidden-test text (Secrets, scrub_output()): after autograde's
    execution, before its grades are saved; and first in generate_feedback, while the test cells still hold their hidden
    regions. What was removed is counted in resources['hidden_test_text_removed'] and logged."""

    def preprocess(self, nb, resources):
        secrets = Secrets.of(nb.cells)
        if not secrets:
            return nb, resources
        removed = sum(scrub_output(out, secrets) for cell in nb.cells for out in cell.get('outputs', []))
        if removed:
            self.log.warning('removed hidden-test text from %d outputs', removed)
            resources['hidden_test_text_removed'] = removed
        return nb, resources


class TestMessagesOnly(NbGraderPreprocessor):
    """In feedback, a failed test cell shows its error's name and message, not a traceback that could quote hidden tests."""

    def preprocess_cell(self, cell, resources, index):
        if role(cell) == 'test':
            for out in cell.get('outputs', []):
                if out.get('output_type') == 'error':
                    out.traceback = [f'{out.ename}: {out.evalue}']
        return cell, resources


class ClearHiddenTestsOfTestCells(ClearHiddenTests):
    """nbgrader's ClearHiddenTests on the test cells alone. Any other cell is the student's: nbgrader's would read the
    marker text in it (`print('### BEGIN HIDDEN TESTS')`) as an unclosed region, raise, and leave the student without a
    feedback page."""

    def preprocess_cell(self, cell, resources, index):
        if role(cell) != 'test':
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


def error_line(cell, max_chars):
    """The one line that says why a test cell lost its points: its error's message (the exception's name too, unless it
    is an AssertionError, whose message says it all), else the first line it wrote to stderr, else ''."""
    for out in cell.get('outputs', []):
        if out.get('output_type') == 'error':
            message = next((line.strip() for line in str(out.get('evalue', '')).splitlines() if line.strip()), '')
            name = str(out.get('ename', ''))
            line = message if message and name == 'AssertionError' else ': '.join(filter(None, [name, message]))
            break
    else:
        line = next((f'wrote to stderr: {text.strip()}' for out in cell.get('outputs', [])
                     if out.get('output_type') == 'stream' and out.get('name') == 'stderr'
                     for text in out.get('text', '').splitlines() if text.strip()), '')
    return line if len(line) <= max_chars else line[:max_chars - 1] + '\u2026'


class ClaimSummary(NbGraderPreprocessor):
    """For the feedback page's summary: each graded cell of the notebook, in order, as resources['claims'], with its
    kind ('test' or 'answer'), name, score, points, whether a grader has yet to grade it, whether it has a comment and,
    for a test, the line that says why it lost points. Runs after nbgrader's GetGrades (the scores and comments) and
    ClearHiddenTests."""

    max_chars = Integer(400, help="characters kept of a failed claim's message in the summary").tag(config=True)

    def preprocess(self, nb, resources):
        sources, awaiting = self.from_gradebook(resources.get('nbgrader', {}))
        claims = []
        for cell in nb.cells:
            kind, gid, meta = role(cell), grade_id(cell), cell.get('metadata', {}).get('nbgrader', {})
            if kind not in ('test', 'answer') or not gid:
                continue
            # A test is named from the source notebook's cell (the gradebook's copy); the submission's only if the
            # gradebook is out of reach (autograde has put the source's text back in it anyway). An answer by its
            # grade_id: its source cell holds the model answer.
            name = claim_name(sources.get(gid, cell.source), gid) if kind == 'test' else gid
            score, points = meta.get('score'), meta.get('points')
            claims.append({'kind': kind, 'grade_id': gid, 'name': name, 'score': score, 'points': points,
                           'awaiting': kind == 'answer' and awaiting.get(gid, score is None),
                           'comment': bool(meta.get('comment')),
                           'message': error_line(cell, self.max_chars) if kind == 'test' else ''})
        resources['claims'] = claims
        return nb, resources

    def from_gradebook(self, info):
        """({grade_id: source of the test cell, hidden tests and all}, {grade_id: needs a manual grade}) from the
        gradebook that nbgrader names in resources; ({}, {}) outside nbgrader."""
        if not info.get('db_url'):
            return {}, {}
        from nbgrader.api import BaseCell, Grade, Gradebook, SourceCell

        with Gradebook(info['db_url']) as gb:  # two queries, not one per cell (each Grade's name is a query of its own)
            notebook = gb.find_notebook(info['notebook'], info['assignment'])
            submission = gb.find_submission_notebook(info['notebook'], info['assignment'], info['student'])
            sources = dict(gb.db.query(SourceCell.name, SourceCell.source).filter(SourceCell.notebook_id == notebook.id))
            awaiting = {name: bool(todo) for name, todo in gb.db.query(BaseCell.name, Grade.needs_manual_grade)
                        .join(Grade, Grade.cell_id == BaseCell.id).filter(Grade.notebook_id == submission.id)}
        return sources, awaiting


def points(value):
    return 'ungraded' if value is None else f'{float(value):g}'


def n_claims(n):
    return f'{n} claim' + 's' * (n != 1)


SUMMARY_CSS = """<style>
#summary { margin-top: 0.5em; }
#summary h5 { margin: 0.9em 0 0.3em; font-weight: bold; }
#summary ol { margin-bottom: 0.3em; padding-left: 2em; }
#summary li { margin: 0.25em 0; }
#summary .failed li { border-left: 4px solid #d2413a; padding-left: 0.5em; }
#summary .message { display: block; color: #8a1f1a; font-family: monospace; white-space: pre-wrap; word-break: break-word; }
#summary .points { color: #555; white-space: nowrap; }
#summary summary { display: list-item; cursor: pointer; font-weight: bold; margin-top: 0.9em; }
</style>"""


def summary_html(claims, late_penalty=0):
    """The summary (see the module) of resources['claims'], every text escaped. tex2jax_ignore: MathJax leaves it as
    it is (a message may hold a $)."""
    e = html.escape

    def link(c, text=None):
        return f'<a href="#{e(c["grade_id"])}">{e(text or c["name"])}</a>'

    def score(c):
        return f'<span class="points">({points(c["score"])} / {points(c["points"])})</span>'

    def comment(c):
        return f' <a href="#comment-{e(c["grade_id"])}">comment</a>' if c['comment'] else ''

    tests = [c for c in claims if c['kind'] == 'test']
    failed = [c for c in tests if c['score'] is None or float(c['score']) < float(c['points'])]
    passed = [c for c in tests if c not in failed]
    answers = [c for c in claims if c['kind'] == 'answer']
    awaiting = [c for c in answers if c['awaiting']]
    graded = [c for c in answers if not c['awaiting']]
    parts = [SUMMARY_CSS, '<div id="summary" class="tex2jax_ignore">']
    if failed:
        parts.append(f'<h5>To fix: {len(failed)} of {n_claims(len(tests))} failed</h5><ol class="failed">')
        parts += [f'<li>{link(c)} {score(c)}<span class="message">{e(c["message"]) or "no message: see the cell"}'
                  '</span></li>' for c in failed]
        parts.append('</ol>')
    elif tests:
        parts.append(f'<h5>Every one of the {len(tests)} claims holds</h5>')
    if awaiting:
        parts.append(f'<h5>Written answers awaiting a grader: {len(awaiting)}</h5><ol>')
        parts += [f'<li>{link(c, "Written answer " + c["name"])} <span class="points">({points(c["points"])} points)'
                  f'</span>{comment(c)}</li>' for c in awaiting]
        parts.append('</ol>')
    if graded:
        parts.append(f'<h5>Written answers graded: {len(graded)}</h5><ol>')
        parts += [f'<li>{link(c, "Written answer " + c["name"])} {score(c)}{comment(c)}</li>' for c in graded]
        parts.append('</ol>')
    if passed:
        parts.append(f'<details><summary>Passed: {n_claims(len(passed))}</summary><ol class="passed">')
        parts += [f'<li>{link(c)} {score(c)}</li>' for c in passed]
        parts.append('</ol></details>')
    if late_penalty:
        parts.append(f'<p class="late-penalty">Late submission penalty: -{points(late_penalty)}</p>')
    parts.append('</div>')
    return '\n'.join(parts)


# nbgrader's table of contents, as its feedback template writes it: the first <div id="toc"> of the page (in the page's
# heading, before any cell) up to its </div> (it holds no other div).
TOC = re.compile(r'<div id="toc">.*?</div>', re.S)


# The maths: MathJax 2, written into the page.

MATHJAX_CONFIG = r"""
window.MathJax = {
  root: 'about:blank',  // everything MathJax uses is in this page: a part it would load from its folder is not fetched
  jax: ['input/TeX', 'output/NativeMML'],
  extensions: ['tex2jax.js', 'Safe.js'],
  TeX: {extensions: ['AMSmath.js', 'AMSsymbols.js', 'noErrors.js', 'noUndefined.js']},
  tex2jax: {inlineMath: [['$', '$'], ['\\(', '\\)']], displayMath: [['$$', '$$'], ['\\[', '\\]']],
            processEscapes: true, processEnvironments: true},
  delayStartupUntil: 'onload',  // once the parts below (later scripts of this page) are in
  messageStyle: 'none', showMathMenu: false, showMathMenuMSIE: false,
  menuSettings: {renderer: 'NativeMML', assistiveMML: false, zoom: 'None'},
  AuthorInit: function () {
    // MathML out, in every browser: the combined configuration would pick HTML-CSS, whose fonts are not in the page.
    MathJax.Hub.Register.StartupHook('End Config', function () {
      MathJax.Hub.outputJax['jax/mml'] = [MathJax.OutputJax.NativeMML];
    }, 20);
    MathJax.Hub.Register.StartupHook('End', function () {
      letters(document);
      document.documentElement.setAttribute('data-maths', 'typeset');
    });
  }
};

// MathML Core (Chromium) draws no mathvariant but 'normal': \mathbb{R} would show as R. Write the Unicode mathematical
// letter instead (what MathML Core asks of authors); a browser that knows mathvariant shows the same.
function letters(root) {
  var base = {'bold': [0x1D400, 0x1D41A, 0x1D7CE], 'italic': [0x1D434, 0x1D44E], 'bold-italic': [0x1D468, 0x1D482],
              'script': [0x1D49C, 0x1D4B6], 'fraktur': [0x1D504, 0x1D51E], 'double-struck': [0x1D538, 0x1D552, 0x1D7D8],
              'sans-serif': [0x1D5A0, 0x1D5BA, 0x1D7E2], 'monospace': [0x1D670, 0x1D68A, 0x1D7F6]};
  var holes = {'italic': {h: 0x210E},
               'script': {B: 0x212C, E: 0x2130, F: 0x2131, H: 0x210B, I: 0x2110, L: 0x2112, M: 0x2133, R: 0x211B,
                          e: 0x212F, g: 0x210A, o: 0x2134},
               'fraktur': {C: 0x212D, H: 0x210C, I: 0x2111, R: 0x211C, Z: 0x2128},
               'double-struck': {C: 0x2102, H: 0x210D, N: 0x2115, P: 0x2119, Q: 0x211A, R: 0x211D, Z: 0x2124}};
  root.querySelectorAll('math [mathvariant]').forEach(function (el) {
    var variant = el.getAttribute('mathvariant'), b = base[variant], hole = holes[variant] || {};
    if (!b || el.children.length) return;
    el.textContent = Array.from(el.textContent).map(function (ch) {
      var c = ch.charCodeAt(0);
      if (hole[ch]) return String.fromCodePoint(hole[ch]);
      if (c >= 65 && c <= 90) return String.fromCodePoint(b[0] + c - 65);
      if (c >= 97 && c <= 122) return String.fromCodePoint(b[1] + c - 97);
      if (c >= 48 && c <= 57 && b[2]) return String.fromCodePoint(b[2] + c - 48);
      return ch;
    }).join('');
    el.setAttribute('mathvariant', 'normal');
  });
}
"""
# MathJax's own files, in this order: its core, the combined configuration (TeX in, MathML out, and more), Safe (no
# \href to javascript:, no \style or \class from the TeX of a student), then the operator tables it loads on demand.
MATHJAX_FILES = ('MathJax.js', 'config/TeX-AMS-MML_HTMLorMML-full.js', 'extensions/Safe.js', 'jax/element/mml/optable/*.js')


@functools.lru_cache(maxsize=1)
def mathjax_html():
    """The <script> elements that typeset the page's maths offline (read once per process)."""
    import jupyter_server_mathjax

    folder = Path(jupyter_server_mathjax.__file__).parent / 'static'
    scripts = [MATHJAX_CONFIG] + [path.read_text(encoding='utf-8') for name in MATHJAX_FILES
                                  for path in sorted(folder.glob(name))]
    # Inside <script>, only '</script' ends it and '<!--' may start an escaped run: neither is left ('\/' and '\!' mean
    # '/' and '!' in a JavaScript string or regular expression, where MathJax has them).
    safe = [re.sub(r'</(?=script)', r'<\\/', js, flags=re.I).replace('<!--', r'<\!--') for js in scripts]
    return Markup('<!-- MathJax 2, offline: see course/reports/feedback.py -->\n'
                  + '\n'.join(f'<script type="text/javascript">{js}</script>' for js in safe))


# nbconvert's templates take the mathjax() macro from mathjax.html.j2 (a CDN's MathJax): FeedbackExporter's own.
OFFLINE_MATHJAX_TEMPLATE = '{%- macro mathjax(url="") -%}{{ offline_mathjax }}{%- endmacro %}'


class FeedbackExporter(HTMLExporter):
    """HTMLExporter with templates compiled once per process, code highlighted once per process, and without the
    BeautifulSoup pass; with the claims' summary and the maths written into the page (see the module)."""

    offline_maths = Bool(True, help='write MathJax into the page (else: from the CDN nbconvert names)').tag(
        config=True, affects_environment=True)
    summary = Bool(True, help="replace nbgrader's table of contents by the claims' summary (ClaimSummary)").tag(config=True)

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = SHARED_BYTECODE  # keyed by template name and source checksum: never stale
        if self.offline_maths:
            environment.loader = ChoiceLoader([DictLoader({'mathjax.html.j2': OFFLINE_MATHJAX_TEMPLATE}),
                                               environment.loader])
            environment.globals['offline_mathjax'] = mathjax_html()
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        # HTMLExporter.from_notebook_node up to its BeautifulSoup pass (nbconvert 7.17): the same filters, then the render.
        langinfo = nb.metadata.get('language_info', {})
        lexer = langinfo.get('pygments_lexer', langinfo.get('name', None))
        highlight_code = self.filters.get('highlight_code', RememberedHighlight(pygments_lexer=lexer, parent=self))
        resources = self._init_resources(resources)
        self.register_filter('highlight_code', highlight_code)
        self.register_filter('filter_data_type',
                             WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if self.summary and 'claims' in resources:
            summary = summary_html(resources['claims'], resources.get('nbgrader', {}).get('late_penalty') or 0)
            page = TOC.sub(lambda _: summary, page, count=1)
        return IMG_WITHOUT_ALT.sub(f'<img alt="{NO_ALT}"', page), resources
