"""The exporter of the feedback pages: nbconvert's HTMLExporter, less two costs that a feedback page does not need.

nbgrader's generate_feedback renders each page with `GenerateFeedback.exporter_class` (nbconvert's HTMLExporter by
default); nbgrader_config.py points it here. Per page, HTMLExporter:
- compiles its Jinja templates again, because every nbgrader run makes a new exporter with a new Jinja environment.
  FeedbackExporter gives every environment of the process one shared in-memory bytecode cache (Jinja's own mechanism):
  a long-lived grading worker compiles the templates once, then loads their code.
- parses the whole rendered page again with BeautifulSoup, to add `alt` text to images without it and `tabindex` to the
  cells of JupyterLab-styled pages. nbgrader's feedback template is the classic one, which has no such cells; and an
  image of the feedback without alt text gets nbconvert's placeholder here too, by a regular expression over the `<img>`
  tags, without parsing the page.
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


class FeedbackExporter(HTMLExporter):
    """HTMLExporter with templates compiled once per process and without the BeautifulSoup pass (see the module)."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = SHARED_BYTECODE  # keyed by template name and source checksum: never stale
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        # HTMLExporter.from_notebook_node up to its BeautifulSoup pass (nbconvert 7.17): the same filters, then the render.
        langinfo = nb.metadata.get('language_info', {})
        lexer = langinfo.get('pygments_lexer', langinfo.get('name', None))
        highlight_code = self.filters.get('highlight_code', Highlight2HTML(pygments_lexer=lexer, parent=self))
        resources = self._init_resources(resources)
        self.register_filter('highlight_code', highlight_code)
        self.register_filter('filter_data_type',
                             WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return IMG_WITHOUT_ALT.sub(f'<img alt="{NO_ALT}"', html), resources
