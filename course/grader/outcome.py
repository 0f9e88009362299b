"""One submission's outcome while nbgrader grades it: what the course's preprocessors (course.grader.preprocessors) learn
that nbgrader's own result does not say, carried with the submission instead of in module-level state.

course.grader.workers makes an Outcome for each submission and hands it to autograde(), which runs nbgrader's Autograde
with the Outcome in the resources of every notebook it converts (both of its passes): each preprocessor reaches it as
of(resources), records into it, and grading writes it into the submission's results record (course.reports.results)
once nbgrader returns. A plain `nbgrader autograde` (no grader around it) gets a throwaway Outcome per notebook.
"""

import os
from dataclasses import dataclass, field

from nbgrader.converters import Autograde
from nbgrader.utils import capture_log, temp_attrs

KEY = 'course_outcome'  # its key in nbgrader's resources


@dataclass
class Outcome:
    """What grading one submission learned beyond nbgrader's success and log (each field as the results record holds it):
      stopped      the name of the exception that stopped a notebook's execution (DeadKernelError, CellTimeoutError...),
                   which nbgrader only logs (RecordedExecute)
      over_budget  why what the grader reads of the submission was too large to read whole (JudgeProbe's record,
                   RecordedExecute's outputs), or None
      probe        the exception that stopped the grader's probe cell (its checks fail: JudgeProbe), or None
      timeouts     {cell: {'load': 1-minute load average, 'cores': n}} of each cell that ran past Execute.timeout (the
                   probe's as 'probe'): the limit is on the clock, and a status says when the machine was busier than its
                   cores (course.reports.results.busy)"""

    stopped: str | None = None
    over_budget: str | None = None
    probe: str | None = None
    timeouts: dict = field(default_factory=dict)

    def __deepcopy__(self, memo):
        """Itself: nbconvert deep-copies a notebook's resources before its preprocessors run (Exporter._preprocess), and
        what they record must reach the grader, which holds this one."""
        return self

    def __copy__(self):
        return self

    def record(self):
        """The fields of the submission's results record this outcome fills (course.reports.results.update's)."""
        return {'over_budget': self.over_budget, 'probe': self.probe, 'timeouts': dict(self.timeouts)}


def of(resources):
    """The Outcome that travels in nbgrader's resources (autograde() puts it there); outside the grader (a plain nbgrader
    autograde, a test), a new one, kept in resources for the preprocessors after this one."""
    outcome = resources.get(KEY)
    if not isinstance(outcome, Outcome):
        outcome = resources[KEY] = Outcome()
    return outcome


class RecordingAutograde(Autograde):
    """nbgrader's Autograde, with one submission's Outcome in the resources of each notebook it converts."""

    def __init__(self, outcome, **kwargs):
        super().__init__(**kwargs)
        self.outcome = outcome

    def init_single_notebook_resources(self, notebook_filename):
        resources = super().init_single_notebook_resources(notebook_filename)
        resources[KEY] = self.outcome
        return resources


def autograde(api, step, student, outcome):
    """NbGraderAPI.autograde(step, student, force=True, create=True) on api's course, through RecordingAutograde: the
    same result ({'success', 'log', 'error'}), and outcome filled in as the notebooks are graded."""
    with temp_attrs(api.coursedir, assignment_id=step, student_id=student):
        app = RecordingAutograde(outcome, coursedir=api.coursedir, parent=api)
        app.force, app.create_student = True, True
        return capture_log(app)


def machine_load():
    """{'load': the 1-minute load average, 'cores': the cores this process may use}."""
    return {'load': round(os.getloadavg()[0], 2), 'cores': len(os.sched_getaffinity(0))}
