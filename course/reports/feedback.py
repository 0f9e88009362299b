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
import re
from pathlib import Path

from jinja2 import BytecodeCache, ChoiceLoader, DictLoader
from markupsafe import Markup
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbgrader.preprocessors import NbGraderPreprocessor
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
