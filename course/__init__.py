"""The course's tooling, one package: build the student release and the executed solutions, autograde a class in a
sandbox, export the grades. Each module does one job; `python -m course.<verb>` runs the command-line ones
(build, data, grade, benchmark). The Makefile's verbs call them; docs/ explains them.

Kept free of imports: course.warm_server runs inside the sandbox, where only this package's standard-library modules
(course.policy, course.warm_server) are present.
"""
