"""The course's tooling, one package: build the student release and the executed solutions, autograde a class in a
sandbox, export the grades. Each module does one job; `python -m course.<verb>` runs the command-line ones
(build, data, grade, benchmark). The Makefile's verbs call them; docs/ explains them.

Kept free of imports beyond the standard library's: course.warm_server runs inside the sandbox, where only this
package's standard-library modules (course.policy, course.warm_server) are present.
"""

import sys

# jsonschema (imported by nbformat, so by every nbgrader process) registers an "iri" format checker only when the optional
# rfc3987_syntax is importable, and that module builds an Earley parser for RFC 3987 when imported: about 1.2 s of CPU
# here, in the grading command, the workers' forkserver and each test process. Nothing the course validates uses the
# "iri" format (nbformat's schemas do not, and nbformat checks no formats), so the course's processes skip it: jsonschema
# imports it inside contextlib.suppress(ImportError). Measured in docs/performance.md.
sys.modules.setdefault('rfc3987_syntax', None)
