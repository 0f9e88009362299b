"""Keep what a student submits from running in the instructor's browser (the threat model: docs/security.md).

nbgrader preprocessors, set in nbgrader_config.py for `nbgrader autograde` (course.grader.grade runs it) and
`nbgrader generate_feedback`:
  - SnapshotFiles (before Execute) and RemoveNewFiles (after it): delete every file and folder that the student's code
    wrote into its autograded/<student>/<assignment>/ folder while graded; the formgrader would serve them.
  - SanitizeActiveContent: nbconvert's SanitizeHTML (bleach) over every output and markdown cell, answers included,
    with an allowlist that keeps text, PNG/JPEG images (with alt text), LaTeX, tables and test messages. Markdown is judged
    as nbconvert renders it (markdown2html, what the formgrader and the feedback show): raw HTML and markdown's own
    links (`[x](javascript:...)`, which nbconvert's renderer lets through) alike. What it removed is written to the
    notebook's metadata (course.active_content_removed) and to the repair report, repairs/<student>/<assignment>.txt.
And, for the formgrader started from the course (nbgrader loads nbgrader_config.py inside the Jupyter server):
  - protect_formgrader(): content-security headers on the formgrader's pages (only its own scripts run) and on the files
    it serves from autograded/ (a sandbox: no script at all).
"""

import base64
import contextlib
import functools
import hashlib
import html
import mimetypes
import os
import re
import shutil
import stat
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import bleach
from bleach import html5lib_shim
from bleach.css_sanitizer import CSSSanitizer
from bleach.sanitizer import BleachSanitizerFilter
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from course.layout import ROOT, repairs_path

# The lines of repairs/<student>/<assignment>.txt written here (course/grader/repair.py writes the rest): active content removed
# from outputs and markdown, and files the student's code wrote while graded, deleted.
REPORT_PREFIX, DELETED_PREFIX = 'removed: ', 'deleted: '

# What graders need from markdown and rich outputs: text, headings, lists, code, tables, images, links. No script, no
# style sheet, no form, no frame, no SVG or MathML (they carry scripts and links of their own).
TAGS = bleach.ALLOWED_TAGS | {
    'p', 'div', 'span', 'pre', 'br', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'table', 'thead', 'tbody', 'tfoot', 'tr',
    'th', 'td', 'caption', 'img', 'sub', 'sup', 'del', 's', 'u', 'dl', 'dt', 'dd', 'kbd', 'samp', 'var', 'small', 'mark',
    'figure', 'figcaption'}
PROTOCOLS = {'http', 'https', 'mailto', 'data'}  # data: only as an image's src (see allowed())
IMAGE_DATA = re.compile(r'data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*', re.I)
ALIGN = re.compile(r'\s*text-align\s*:\s*(left|right|center)\s*;?\s*', re.I)  # what markdown tables set on th/td


# Files nbgrader never copies from a submission (into autograded/, which the formgrader serves, and feedback/), nor takes
# in at `nbgrader submit` / `collect`: every extension the server would serve as a page, a script or XML (mimetypes, as
# tornado's StaticFileHandler guesses), in any letter case. nbgrader_config.py adds them to CourseDirectory.ignore.
ACTIVE_TYPES = {'text/html', 'application/xhtml+xml', 'image/svg+xml', 'text/xml', 'application/xml', 'text/xsl',
                'application/xslt+xml', 'text/javascript', 'application/javascript', 'application/x-javascript',
                'application/ecmascript', 'text/ecmascript', 'application/pdf'}


def any_case(ext):
    return '*' + ''.join(f'[{ch.lower()}{ch.upper()}]' if ch.isalpha() else ch for ch in ext)


WEB_FILES = sorted({any_case(ext) for ext, kind in mimetypes.types_map.items() if kind in ACTIVE_TYPES}
                   | {any_case(ext) for ext in ('.html', '.htm', '.xhtml', '.svg', '.xml', '.js', '.mjs')})


def local(url):
    """True for a relative URL that stays in the served submission folder (a figure the student submitted, say)."""
    parts = urlsplit(url.strip())
    path = unquote(parts.path)
    return not (parts.scheme or parts.netloc or path.startswith(('/', '\\')) or '\\' in path or '..' in path.split('/'))


def allowed(tag, name, value):
    """bleach's attribute filter: which attribute of which tag survives."""
    if name in ('class', 'title'):
        return True
    if tag == 'img':
        if name == 'src':
            # An image on the web (the formgrader's CSP keeps it from loading), inline, or next to the notebook.
            web = urlsplit(value.strip()).scheme in ('http', 'https')
            return bool(IMAGE_DATA.fullmatch(value.strip())) or web or local(value)
        return name in ('alt', 'width', 'height')
    if tag == 'a':
        return name == 'href' and not value.strip().lower().startswith('data:')
    if tag in ('th', 'td'):
        return name in ('colspan', 'rowspan', 'align') or (name == 'style' and bool(ALIGN.fullmatch(value)))
    if tag in ('h1', 'h2', 'h3', 'h4', 'h5', 'h6'):
        return name == 'id'  # nbconvert's heading anchors
    return tag == 'ol' and name == 'start'


CSS = CSSSanitizer(allowed_css_properties=['text-align'])


class _Recorder(BleachSanitizerFilter):
    """bleach's own sanitizing filter, noting each tag and attribute it removes (what it keeps, it keeps unchanged)."""

    def __init__(self, *args, removed, **kw):
        super().__init__(*args, **kw)
        self.removed = removed

    def sanitize_token(self, token):
        if token['type'] in ('StartTag', 'EmptyTag'):
            name = token['name']
            if name not in self.allowed_tags:
                self.removed.append(f'<{name}>')
                return super().sanitize_token(token)
            before = dict(token['data'])
            out = super().sanitize_token(token)
            after = out['data'] if isinstance(out, dict) else {}
            for key, value in before.items():
                kept = after.get(key)
                if kept is None or (kept != value and re.sub(r'[\s;]', '', kept) != re.sub(r'[\s;]', '', value)):
                    self.removed.append(f'{key[1]} on <{name}>')
            return out
        return super().sanitize_token(token)


def cleaner():
    """bleach's Cleaner with the allowlist above; a tag it does not allow is escaped (the grader sees it as text)."""
    return bleach.Cleaner(tags=TAGS, attributes=allowed, protocols=PROTOCOLS, strip=False, strip_comments=True,
                          css_sanitizer=CSS)


def removed_from_html(html):
    """What the sanitizer removes from html (an empty list if nothing): bleach's sanitizing filter, run on the parse tree
    of a parser that lets every tag through to it (bleach's Cleaner turns a tag it does not allow into text before its
    filter sees it), noting each tag and attribute it drops."""
    removed = []
    parser = html5lib_shim.BleachHTMLParser(tags=None, strip=False, consume_entities=False, namespaceHTMLElements=False)
    tokens = _Recorder(source=html5lib_shim.getTreeWalker('etree')(parser.parseFragment(html)), allowed_tags=TAGS,
                       attributes=allowed, strip_disallowed_tags=False, strip_html_comments=True, css_sanitizer=CSS,
                       allowed_protocols=PROTOCOLS, removed=removed)
    for _ in tokens:
        pass
    return removed


def fenced(text):
    """text as a fenced code block: markdown shows it verbatim, nothing in it renders."""
    fence = '`' * max(3, 1 + max((len(run) for run in re.findall(r'`+', text)), default=0))
    return f'{fence}text\n{text}\n{fence}\n'


@functools.lru_cache(maxsize=4096)
def removed_when_rendered(source):
    """removed_from_html() of nbconvert's rendering of the markdown source, as a tuple. Remembered for the life of the
    process: a grading worker meets the same cells (the course's text) in every submission, and renders each once."""
    return tuple(removed_from_html(markdown2html_mistune(source)))


def safe_markdown(source, sanitize):
    """(markdown that renders safely, what was removed): source unchanged if nbconvert's rendering of it holds nothing
    the sanitizer removes; else source passed through sanitize (bleach), if that renders clean; else source shown verbatim
    as a code block."""
    removed = list(removed_when_rendered(source))
    if not removed:
        return source, []
    cleaned = sanitize(source)
    if not removed_when_rendered(cleaned):
        return cleaned, removed
    note = '*Shown as plain text by the grader: this cell held active content.*\n\n'
    return note + fenced(source), removed


def valid_image(data, mime):
    """True if data is base64 of a PNG or JPEG image (the signature checked), as nbconvert embeds it."""
    try:
        raw = base64.b64decode(''.join(data) if isinstance(data, list) else data, validate=False)
    except (ValueError, TypeError):
        return False
    return raw.startswith(b'\x89PNG\r\n\x1a\n') if mime == 'image/png' else raw.startswith(b'\xff\xd8\xff')


OUTPUT_METADATA = ('alt', 'width', 'height', 'unconfined', 'needs_background')  # per MIME type, what templates read


class SanitizeActiveContent(SanitizeHTML):
    """nbconvert's SanitizeHTML over every code output and markdown cell (answers included), with the course's allowlist,
    recording what it removed: in the notebook (metadata course.active_content_removed) and, if report, in
    repairs/<student>/<assignment>.txt (lines 'removed: ...', replaced at each run)."""

    enabled = Bool(True).tag(config=True)  # nbconvert preprocessors are off unless enabled; nbgrader's are on
    report = Bool(True, help='write what was removed to repairs/<student>/<assignment>.txt').tag(config=True)

    def __init__(self, **kw):
        super().__init__(**kw)
        self.tags, self.attributes = sorted(TAGS), allowed  # SanitizeHTML's bleach settings

    def sanitize_html_tags(self, html_str):
        return cleaner().clean(html_str)

    def preprocess(self, nb, resources):
        self.removed = []
        for key in [k for k in nb.metadata if k == 'widgets']:  # widget state: scripts for Lab and nbconvert
            del nb.metadata[key]
            self.removed.append('notebook: widget state')
        nb, resources = super().preprocess(nb, resources)
        if self.removed:
            nb.metadata.setdefault('course', {})['active_content_removed'] = self.removed
        if self.report and 'nbgrader' in resources:
            write_report(resources['nbgrader']['assignment'], resources['nbgrader']['student'], self.removed,
                         resources.get('files_deleted', []))
        return nb, resources

    def where(self, cell, index):
        gid = cell.get('metadata', {}).get('nbgrader', {}).get('grade_id')
        return f'cell {index + 1}' + (f' ({gid})' if gid else '')

    def note(self, cell, index, what, items):
        self.removed.append(f'{self.where(cell, index)}, {what}: {", ".join(dict.fromkeys(items))}')

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type in ('markdown', 'raw'):
            if cell.cell_type == 'markdown':
                cell.source, removed = safe_markdown(cell.source, self.sanitize_html_tags)
            else:
                removed = removed_from_html(cell.source)
                cell.source = self.sanitize_html_tags(cell.source) if removed else cell.source
            if removed:
                self.note(cell, index, f'{cell.cell_type} cell', removed)
            for name, bundle in list(cell.get('attachments', {}).items()):
                for mime in [m for m in bundle if m not in ('image/png', 'image/jpeg')]:
                    del bundle[mime]
                    self.note(cell, index, f'attachment {name}', [mime])
        elif cell.cell_type == 'code':
            for n, out in enumerate(cell.get('outputs', [])):
                self.sanitize_output(out, lambda items, n=n: self.note(cell, index, f'output {n + 1}', items))
        return cell, resources

    def sanitize_output(self, out, note):
        if out.get('output_type') not in ('display_data', 'execute_result'):
            return  # stream and error outputs are text: every template escapes them
        removed = []
        data = out.get('data', {})
        for mime in list(data):
            if mime in ('image/png', 'image/jpeg'):
                if not valid_image(data[mime], mime):
                    del data[mime]
                    removed.append(f'{mime} (not an image)')
            elif mime == 'text/html':
                found = removed_from_html(data[mime])
                if found:
                    data[mime] = self.sanitize_html_tags(data[mime])
                    removed += found
            elif mime == 'text/markdown':
                data[mime], found = safe_markdown(data[mime], self.sanitize_html_tags)
                removed += found
            elif mime not in self.safe_output_keys:  # text/plain, text/latex, application/json: escaped by templates
                del data[mime]
                removed.append(mime)
        # Output metadata: only what templates read for images, as plain values (no 'filenames': a URL of any file).
        meta = out.get('metadata', {})
        kept = {mime: {k: v for k, v in m.items() if k in OUTPUT_METADATA and isinstance(v, (int, float, str, bool))}
                for mime, m in meta.items() if mime in ('image/png', 'image/jpeg') and isinstance(m, dict)}
        dropped = [k for k in meta if k not in kept] + [f'{mime}.{k}' for mime in kept for k in meta[mime] if k not in kept[mime]]
        if dropped:
            out['metadata'] = kept
            removed += [f'metadata {k}' for k in dropped]
        if removed:
            if not data:
                data['text/plain'] = '[output removed by the grader: active content]'
            note(removed)


class SanitizeFeedback(SanitizeActiveContent):
    """SanitizeActiveContent for nbgrader generate_feedback: the same sanitizing, without touching the repair report
    (autograde wrote it)."""

    report = Bool(False).tag(config=True)


def write_report(aid, student, removed, deleted=()):
    """Replace the 'removed: ' and 'deleted: ' lines of repairs/<student>/<aid>.txt (course/grader/repair.py's report) with what
    was removed and the files deleted."""
    path = repairs_path(aid, student, ROOT)
    lines = [line for line in (path.read_text().splitlines() if path.exists() else [])
             if not line.startswith((REPORT_PREFIX, DELETED_PREFIX))]
    lines += [REPORT_PREFIX + r for r in removed]
    if deleted:
        shown = ', '.join(deleted[:20]) + (f' and {len(deleted) - 20} more' if len(deleted) > 20 else '')
        lines.append(f'{DELETED_PREFIX}written by the code while graded: {shown}')
    if lines:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(''.join(f'{line}\n' for line in lines))
    else:
        path.unlink(missing_ok=True)


def read_removed(aid, student):
    """What SanitizeActiveContent and RemoveNewFiles removed from a submission, from its repair report."""
    path = repairs_path(aid, student, ROOT)
    lines = path.read_text().splitlines() if path.exists() else []
    return [line[len(REPORT_PREFIX):] for line in lines if line.startswith(REPORT_PREFIX)]


# Files written while graded.

def listing(folder):
    """Every entry below folder (relative paths), links not followed."""
    found = set()
    for parent, dirs, files in os.walk(folder):  # os.walk never descends into a link to a folder
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(parent, name), folder))
    return found


class SnapshotFiles(NbGraderPreprocessor):
    """Before Execute: record what the submission's folder holds (the submission and what nbgrader put there)."""

    def preprocess(self, nb, resources):
        resources['files_before'] = listing(resources['metadata']['path'])
        return nb, resources


class RemoveNewFiles(NbGraderPreprocessor):
    """After Execute (and after JudgeProbe has read the probe's record): delete every file and folder the student's code
    created in the submission's folder; links are removed, never followed. nbgrader writes the graded notebook afterwards."""

    keep = Bool(False, help='keep the files (for debugging a submission)').tag(config=True)

    def preprocess(self, nb, resources):
        folder = resources['metadata']['path']
        before = resources.get('files_before')
        if before is None or self.keep:
            return nb, resources
        deleted = []
        for rel in sorted(listing(folder) - before, key=lambda p: p.count(os.sep)):
            path = os.path.join(folder, rel)
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:  # inside a folder removed just before
                continue
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISDIR(mode):
                    shutil.rmtree(path)  # refuses links; removes links inside without following them
                else:
                    os.unlink(path)
            deleted.append(rel + '/' * stat.S_ISDIR(mode))
        if deleted:
            shown = ', '.join(deleted[:10]) + (f' and {len(deleted) - 10} more' if len(deleted) > 10 else '')
            self.log.info('deleted what the submission wrote while graded: %s', shown)
            resources['files_deleted'] = deleted
        return nb, resources


# The formgrader, in the Jupyter server.

class _InlineScripts(HTMLParser):
    """The text of each inline <script> (no src) of a page, and its on* attributes, as the browser hashes them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts, self.handlers, self.open = [], [], None

    def handle_starttag(self, tag, attrs):
        self.handlers += [v for k, v in attrs if k.startswith('on') and v]
        if tag == 'script' and not dict(attrs).get('src'):
            self.open = []

    def handle_data(self, data):
        if self.open is not None:
            self.open.append(data)

    def handle_endtag(self, tag):
        if tag == 'script' and self.open is not None:
            self.scripts.append(''.join(self.open))
            self.open = None


def sha256(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def own_inline():
    """(hashes of the inline scripts, hashes of the inline event handlers) written in nbgrader's formgrader templates
    with no template expression in them, so the same in every page (the tooltips of the submission page's navigation bar,
    onclick="toggle_name(true);")."""
    from nbgrader.server_extensions.formgrader import handlers

    scripts, events = set(), set()
    for path in Path(handlers.template_path).rglob('*'):
        if path.is_file():
            parser = _InlineScripts()
            parser.feed(path.read_text(errors='replace'))
            scripts |= {sha256(s) for s in parser.scripts if s.strip() and '{{' not in s and '{%' not in s}
            events |= {sha256(h) for h in parser.handlers if '{{' not in h and '{%' not in h}
    return sorted(scripts), sorted(events)


def page_policy(body, mathjax, own=((), ())):
    """The formgrader page's policy: its scripts from this server (and mathjax, if not ''), and by hash, the inline scripts
    of its <head> (nbgrader writes the head from its templates and the course's ids; a submission's content is in the
    <body>) and own, the inline scripts and event handlers written as they are in nbgrader's templates (own_inline())."""
    text = body.decode('utf-8', 'replace')
    head = re.split(r'</head\s*>', text, maxsplit=1, flags=re.I)[0] if re.search(r'</head\s*>', text, re.I) else ''
    parser = _InlineScripts()
    parser.feed(head)
    scripts, events = own
    hashes = sorted({sha256(s) for s in parser.scripts} | set(scripts))
    handlers = ["'unsafe-hashes'", *events] if events else []
    return '; '.join(' '.join(d.split()) for d in [
        "default-src 'self'",
        f"script-src 'self' {mathjax} {' '.join(hashes + handlers)}",
        f"style-src 'self' 'unsafe-inline' {mathjax}", "img-src 'self' data:", f"font-src 'self' data: {mathjax}",
        "connect-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'self'"])


# nbconvert's mathjax() macro, which nbgrader's formgrade and feedback templates call without a URL, loads MathJax 2 from
# cdnjs: offline, or where that host is blocked, the grader's page waits on it and every formula stays raw TeX.
CDN_MATHJAX = re.compile(r'<script src="https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/[^"<>]*">')
# The copy jupyter_server_mathjax serves (installed with the course, enabled in the venv's Jupyter server), in its own
# configuration: TeX in, HTML-CSS or MathML out, and the Safe extension (a student's TeX makes no link or style).
LOCAL_CONFIG = 'TeX-AMS-MML_HTMLorMML-full,Safe'


def local_mathjax(page, url):
    """page (bytes) with the <head>'s MathJax script loading url (the Jupyter server's own copy), not the CDN's; the
    <body>, where a submission's content is, untouched."""
    parts = re.split(rb'(</head\s*>)', page, maxsplit=1, flags=re.I)
    if len(parts) < 3:
        return page
    script = f'<script src="{html.escape(url)}?config={LOCAL_CONFIG}">'
    head = CDN_MATHJAX.sub(lambda _: script, parts[0].decode('utf-8', 'replace'))
    return head.encode('utf-8') + parts[1] + parts[2]


# Files served from autograded/: never a script, never a frame, never a plugin; shown, if at all, in an opaque origin.
FILE_POLICY = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'self'"


def _transform_class(base_url, settings=None):
    """The OutputTransform protect_formgrader() adds; settings: the server's (jupyter_server_mathjax puts the URL of its
    MathJax there, 'mathjax_url', once it has started)."""
    import tornado.web
    from jupyter_server.utils import url_path_join

    settings = {} if settings is None else settings
    own = own_inline()
    prefix = base_url.rstrip('/') + '/formgrader/'
    own_static = tuple(prefix + p for p in ('static/', 'fonts/', 'submissions/components/'))
    submission = re.compile(re.escape(prefix) + r'submissions/[^/]+/?$')
    navigation = re.compile(re.escape(prefix) + r'submissions/[^/]+/(next|prev|next_incorrect|prev_incorrect)/?$')

    class FormgraderCSP(tornado.web.OutputTransform):
        """Add the content-security headers to every response under <base_url>/formgrader/: FILE_POLICY on the files
        served from autograded/, page_policy() on every page; nbgrader's own static files are left as they are."""

        def __init__(self, request):
            super().__init__(request)
            self.path = request.path

        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            path = self.path
            if not path.startswith(prefix) or path.startswith(own_static) or navigation.match(path):
                return status_code, headers, chunk
            files = path.startswith(prefix + 'submissions/') and not submission.match(path)
            if files:
                headers['Content-Security-Policy'] = FILE_POLICY
            elif status_code == 304:  # a cached page would take this response's policy: none of its scripts run
                headers['Content-Security-Policy'] = "script-src 'none'"
            else:
                if finishing and chunk:  # the whole page: its MathJax from this server, so that it works offline
                    url = settings.get('mathjax_url') or url_path_join(base_url, 'static/jupyter_server_mathjax/MathJax.js')
                    chunk = local_mathjax(chunk, url)
                    if 'Content-Length' in headers:
                        headers['Content-Length'] = str(len(chunk))
                headers['Content-Security-Policy'] = page_policy(chunk if finishing else b'', '', own)
                # Each page's policy hashes that page: never kept, so never revalidated with a 304 (see above).
                headers['Cache-Control'] = 'no-store'
                headers.pop('Etag', None)
            headers['X-Content-Type-Options'] = 'nosniff'
            return status_code, headers, chunk

    return FormgraderCSP


def protect_formgrader():
    """Inside a Jupyter server (nbgrader's formgrader extension loads nbgrader_config.py there, from the folder the server
    started in, before the first request), add FormgraderCSP to the server's tornado application, once. Elsewhere (an
    nbgrader command, a test) do nothing."""
    serverapp = sys.modules.get('jupyter_server.serverapp')
    if serverapp is None or not serverapp.ServerApp.initialized():
        return False
    app = serverapp.ServerApp.instance()
    web_app = getattr(app, 'web_app', None)
    if web_app is None:
        return False
    if not any(getattr(t, '__name__', '') == 'FormgraderCSP' for t in web_app.transforms):
        web_app.add_transform(_transform_class(web_app.settings.get('base_url', '/'), web_app.settings))
    return True
