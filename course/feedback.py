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
"""

import re

from jinja2 import BytecodeCache
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

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


class FeedbackExporter(HTMLExporter):
    """HTMLExporter with templates compiled once per process, code highlighted once per process, and without the
    BeautifulSoup pass (see the module)."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = SHARED_BYTECODE  # keyed by template name and source checksum: never stale
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
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return IMG_WITHOUT_ALT.sub(f'<img alt="{NO_ALT}"', html), resources
