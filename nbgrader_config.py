"""nbgrader settings for this course; every key is documented at nbgrader.readthedocs.io (Configuration options)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the course package (course/): our preprocessors and export

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    ClearMarkScheme,
    ClearOutput,
    DeduplicateIds,
    GetGrades,
    IgnorePattern,
    IncludeHeaderFooter,
    LockCells,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from course.cells import CODE_STUB, TEXT_STUB  # noqa: E402
from course.classroom.gradebook import url as gradebook_url  # noqa: E402
from course.grader.preprocessors import (  # noqa: E402
    AddProbe,
    CapOutput,
    CheckCellMetadataOnce,
    GateSubmission,
    JudgeProbe,
    RecordedExecute,
)
from course.reports.active_content import (  # noqa: E402
    WEB_FILES,
    RemoveNewFiles,
    SanitizeActiveContent,
    SanitizeFeedback,
    SnapshotFiles,
    protect_formgrader,
)
from course.reports.feedback import (  # noqa: E402
    ClaimSummary,
    ClearHiddenTestsOfTestCells,
    ScrubHiddenTests,
    TestMessagesOnly,
)

# nbgrader's formgrader loads this file inside the Jupyter server started from the course: there, this adds
# content-security headers to the formgrader's pages and served files (docs/security.md). Anywhere else it does nothing.
protect_formgrader()

c = get_config()  # noqa: F821

c.CourseDirectory.course_id = 'transformer-from-scratch'
# The gradebook: by default SQLite, gradebook.db next to this file (one instructor). For several graders at once, one
# setting switches to PostgreSQL: COURSE_GRADEBOOK_URL in the environment or gradebook_url in course.toml
# (course/classroom/gradebook.py, docs/gradebook.md).
c.CourseDirectory.db_url = gradebook_url(Path(__file__).resolve().parent)
c.CourseDirectory.solution_directory = '.build/solution'
# Never copied by nbgrader (into release/, the solution, autograded/, a student's fetch): nbgrader's defaults, each step's
# instructor/ folder (its out-of-process checks and bank of mistakes: the grader's alone), the originals course.grader.repair
# keeps, and stray probe files.
c.CourseDirectory.ignore = ['.ipynb_checkpoints', '*.pyc', '__pycache__', 'feedback', 'instructor', '.original',
                            '_probe_*.npz']
# Nor any file a browser would run as a page or script (.html, .svg, .js ... : course/reports/active_content.py).
c.CourseDirectory.ignore += WEB_FILES

# On a hub (hub/, docs/hub.md), nbgrader's exchange: collect skips a submission that another Unix account put in the
# exchange under a student's name (nbgrader's own collect warns and takes it). Without an exchange, nothing changes.
c.ExchangeFactory.collect = 'course.classroom.exchange_collect.OwnerCheckedCollect'
# Releasing a step writes its due date from course.toml's [schedule] into the gradebook; Release feedback releases
# every student's feedback it can and names those it skips (course/classroom/exchange_release.py).
c.ExchangeFactory.release_assignment = 'course.classroom.exchange_release.ScheduledRelease'
c.ExchangeFactory.release_feedback = 'course.classroom.exchange_release.PartialReleaseFeedback'

# The stub students see in place of each solution region, and in each written answer.
c.ClearSolutions.code_stub = {'python': CODE_STUB}
c.ClearSolutions.text_stub = TEXT_STUB

# course.authoring.build removes the ### BEGIN/END marker lines and executes the solution itself (with nbclient).
c.GenerateSolution.preprocessors = [IncludeHeaderFooter, LockCells, ClearOutput, ClearMarkScheme]

# Autograding a real class.
# Seconds per cell, on the clock: Step 6's graded training run (its cell my_run) takes about 10 s of CPU on a quiet core,
# every other cell under a few; 120 leaves room for a loaded grader running --jobs submissions at once.
c.Execute.timeout = 120
# After a cell is interrupted, the seconds to wait for its last output (4 by default): a loaded machine, grading --jobs
# at once, can take longer than that, and the interrupted notebook would then lose its remaining cells.
c.Execute.iopub_timeout = 15
c.OverwriteCells.add_missing_cells = True  # a deleted test cell is put back and scores 0, instead of being skipped
# Any stderr output zeroes a test cell, so drop library warnings (a torch UserWarning, a matplotlib font notice) first.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r'\w*Warning: |Matplotlib is building the font cache'
# nbgrader's LimitOutput counts lines only (one 20 MB line passes): CapOutput caps lines and characters.
# AddProbe/JudgeProbe: source/<assignment>/instructor/checks.py
# records the student code's numbers in the kernel and judges them here, in
# nbgrader's own process, which never runs student code; a test cell whose claim does not hold there scores 0.
# RecordedExecute: nbgrader's Execute (configured as c.Execute), which also records the exception that stopped a notebook.
# SnapshotFiles/RemoveNewFiles: files the student's code wrote while graded are deleted (the formgrader serves that
# folder); SanitizeActiveContent: no script or other active content in the outputs and markdown a grader opens.
# CheckCellMetadataOnce: nbgrader's CheckCellMetadata, which checks a cell met in an earlier submission only once per
# grading worker; in both of autograde's passes (the first is nbgrader's default sanitizing pass otherwise).
# GateSubmission: a plain `nbgrader autograde` is held to the course's gate too (course/gate.py, docs/security.md).
c.Autograde.sanitize_preprocessors = [GateSubmission, ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells,
                                      CheckCellMetadataOnce]
# ScrubHiddenTests: no output of any cell keeps text of a hidden test that the student's code printed (a hook that prints
# each cell it runs, say): course/reports/feedback.py.
c.Autograde.autograde_preprocessors = [AddProbe, SnapshotFiles, RecordedExecute, JudgeProbe, RemoveNewFiles, IgnorePattern,
                                       ClearMetadataPreprocessor, CapOutput, ScrubHiddenTests, SanitizeActiveContent,
                                       SaveAutoGrades, AssignLatePenalties, CheckCellMetadataOnce]

# Late work: a submission whose time (submitted/<student>/<step>/timestamp.txt, written by nbgrader's collect or
# zip_collect, course.classroom.collect) is past its step's due date (in the gradebook: course.classroom.collect
# --due) scores 0, applied by
# nbgrader's AssignLatePenalties above. Without a due date nothing is late. Another rule: a LateSubmissionPlugin subclass
# as c.AssignLatePenalties.plugin_class (docs/lms.md).
c.LateSubmissionPlugin.penalty_method = 'zero'

# nbconvert validates the whole notebook after every preprocessor (a dozen a pass, three passes a submission); validate
# once, after the last one, as nbconvert's optimistic_validation offers: an invalid notebook is still refused, only the
# name of the preprocessor that broke it is lost. About 0.1 s of CPU a submission (docs/performance.md).
c.Exporter.optimistic_validation = True

# `nbgrader export` writes grades.csv (a row per student and step), grades-cells.csv and grades-total.csv: course.reports.export.
c.ExportApp.plugin_class = 'course.reports.export.CellCsvExport'

# Feedback shows each failed test's name and message, never the hidden tests' source or tracebacks quoting it:
# ScrubHiddenTests first (every output of every cell, while the test cells still hold their hidden regions), then
# nbgrader's ClearHiddenTests on the test cells only (ClearHiddenTestsOfTestCells: a student's cell that holds the marker
# text no longer stops its page from being written).
# SanitizeFeedback: the feedback pages are sanitized as the autograded notebooks are. ClaimSummary: each claim's name,
# score and message, for the summary at the top of the page (course/reports/feedback.py).
c.GenerateFeedback.preprocessors = [ScrubHiddenTests, ClearHiddenTestsOfTestCells, TestMessagesOnly, GetGrades,
                                    CSSHTMLHeaderPreprocessor, SanitizeFeedback, ClaimSummary]
# The page is rendered by nbconvert's HTMLExporter less its per-page template compiling and its BeautifulSoup pass (about
# a quarter of the time, the same page): course/reports/feedback.py says why that is safe. It also puts the claims' summary in
# place of nbgrader's table of contents, and MathJax in the page, so that its maths renders offline.
c.GenerateFeedback.exporter_class = 'course.reports.feedback.FeedbackExporter'
