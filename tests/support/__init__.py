"""What the tests share that is not a test: the classes they grade, the hostile corpus, the synthetic step, the stand-in
LMS platforms, the browser's page driver, the docs' pictures (run as a script by `make pictures`); hub/, what the tests
of tests/hub/ share (the machine, the hub they run, the exchange's class loop, Unix users and PostgreSQL).

Imported as `support.<module>` (pytest puts tests/ on sys.path, tests/ having no __init__.py). pytest collects none of
it: its files are not named test_*.py."""

# The one step the tests name, for what is scripted on one step: the docs' pictures show it (support/docpictures.py),
# so the JupyterLab journeys that take them type its first exercise (support/browserpage.py: tests/test_browser.py,
# tests/hub/test_hub.py), and the hub's (support/hub/hubserver.py, hosthub.py) release, launch and grade it. Step 4, the
# attention head: the lesson the docs show a student and an instructor working on. Everything else about it (its
# notebook, first exercise, written answer, first mistake of its bank) is read from source/; the rest of the suite runs
# on every step, or on steps it derives (course.layout.steps()). tests/test_layout.py lists what else names a step.
REFERENCE_STEP = 'step4'
