"""The course's tooling: build the student release and the executed solutions, autograde a class in a sandbox,
report and export the grades. `python -m course.<package>.<module>` runs the command-line modules, the Makefile's verbs
call them, and docs/ explains them.

Subpackages by role, in layers. A module imports only from its own layer and the layers listed before it, never from
one listed after it (tests/test_layering.py reads this list and checks every import of every module against it):

  course            cells, layout, runner: the cell metadata, where files live, running nbgrader's apps
  course.isolation  policy, cgroups, sandbox, warm, warm_server: the sandbox, warm kernels: where a student's code runs
  course.authoring  build, reproduced, colab, data, publish, demo: from a step's source to the release and the solution
  course.classroom  gradebook, exchange_collect, lms, collect: the gradebook, nbgrader's exchange, an LMS's files
  course.reports    results, export, classreport, report, feedback, active_content: what grading leaves behind
  course.grader     grade, grading, preprocessors, probe, claims, repair, progress, killmatrix, benchmark: the grading

Kept free of imports beyond the standard library's, as course.isolation's __init__ is: the warm server
(course.isolation.warm_server) runs inside the sandbox, where only these two files, course.isolation.policy and the
server itself are present.
"""

import sys

# jsonschema (imported by nbformat, so by every nbgrader process) registers an "iri" format checker only when the optional
# rfc3987_syntax is importable, and that module builds an Earley parser for RFC 3987 when imported: about 1.2 s of CPU
# here, in the grading command, the workers' forkserver and each test process. Nothing the course validates uses the
# "iri" format (nbformat's schemas do not, and nbformat checks no formats), so the course's processes skip it: jsonschema
# imports it inside contextlib.suppress(ImportError). Measured in docs/performance.md.
sys.modules.setdefault('rfc3987_syntax', None)
