"""The course's tooling: build the student release and the executed solutions, autograde a class in a sandbox,
report and export the grades. `python -m course.<package>.<module>` runs the command-line modules, the Makefile's verbs
call them, and docs/ explains them.

Subpackages by role, in layers. A module imports only from its own layer and the layers listed before it, never from
one listed after it (tests/test_layering.py reads this list and checks every import of every module against it):

  course            cells, layout, settings, runner, gate: the cell metadata, where files live, course.toml,
                    nbgrader's apps, what a submission may be
  course.isolation  policy, cgroups, sandbox, warm, warm_server: the sandbox, warm kernels: where a student's code runs
  course.authoring  build, reproduced, sizes, colab, data, publish, demo: from a step's source to the release and the solution
  course.classroom  gradebook, backup, exchange_collect, exchange_release, lms, lms_canvas, lms_moodle, lms_lti13, collect:
                    the gradebook, backups, nbgrader's exchange, each LMS by platform (its files, or LTI Advantage's
                    services)
  course.reports    results, export, passback, classreport, gradetable, feedback, active_content: what grading leaves
                    behind, and where it goes (an LTI class's LMS)
  course.grader     grade, workers, outcome, preprocessors, probe, claims, repair, progress, killmatrix, benchmark: the
                    grading

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
