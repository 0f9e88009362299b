"""What the grading command (course.grader.grade) runs, grade_class(): prepare a class (nbgrader generate_assignment,
course.grader.repair), autograde every submission in long-lived nbgrader workers, --jobs at a time, each notebook in a
sandboxed kernel, record each outcome (course.reports.results), then export the grades (course.reports.export).

A worker (serve(), in a process of its own forked from a forkserver with nbgrader and torch imported) grades submission
after submission through nbgrader's Python API, each in a fresh kernel; the Worker object in the main process stops it,
with whatever it started, when a submission takes too long or kills it, and starts another.
"""

import contextlib
import enum
import os
import queue
import re
import resource
import shutil
import signal
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from course import gate, runner
from course.cells import read_submitted
from course.classroom import gradebook
from course.grader.progress import Progress
from course.grader.repair import repair_submission
from course.isolation import cgroups, sandbox, warm
from course.layout import ROOT, autograded_path, feedback_path, log_path, notebooks, submitted_path
from course.reports import results


def unreadable(step, student, root=ROOT):
    """Why a submission's notebook cannot be read ('empty file', 'nested too deep', the exception's name), or None."""
    for name in notebooks(step, root):
        path = submitted_path(student, step, root) / name
        if path.exists():
            try:
                read_submitted(path)
            except RecursionError:  # json's decoder stops at Python's recursion limit, at once
                return 'nested too deep'
            except Exception as e:  # any damage to the file: nbformat raises JSON, validation or unicode errors
                return 'empty file' if path.stat().st_size == 0 else type(e).__name__
    return None


def submitted_steps(selected, root=ROOT):
    """The steps of selected that have a submission in root/submitted/ (a folder submitted/<student>/<step>/)."""
    folder = submitted_path(root=root)
    students = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    return [step for step in selected if any((p / step).is_dir() for p in students)]


def handed_in(step, root=ROOT):
    """The names of the folders of submitted/ that hold something named step (a folder, or whatever a student put
    there): each one goes through the gate (course.gate), whatever it is. Names as they are, never as patterns."""
    folder = submitted_path(root=root)
    return sorted(p.name for p in folder.iterdir() if os.path.lexists(p / step))


def refuse(step, student, verdict, record, root=ROOT):
    """Record a submission the gate refused (or too large to read): never read, nor graded; whatever an earlier grading
    left of it (its autograded notebook, its feedback page) removed, so that none is released or counted."""
    record['refused' if verdict.status == 'refused' else 'over_budget'] = verdict.detail
    record['kernel'] = None  # none ran
    record['status'], record['detail'] = results.status(record)
    results.save(record, root)
    for folder in (autograded_path(student, step, root), feedback_path(student, step, root)):
        shutil.rmtree(folder, ignore_errors=True)


def prepare(selected, kernel, root=ROOT, duedates=None):
    """For each step of selected: nbgrader generate_assignment (it records the source's cells in the gradebook; its
    release copy goes to .build/), with its due date from duedates ({step: datetime}, if given), then each submission
    through the gate (course.gate: a student id that is not a plain name, a link, a file that is not a regular one, a
    name that could be read as a pattern or print as something else, a size over budget: refused, never read), then a
    check against the release and the repairs of what is clearly meant (course.grader.repair), recorded in each
    submission's results record. Returns [(step, student)] to grade."""
    extra = runner.Config()
    extra.CourseDirectory.release_directory = '.build/release'
    api = runner.api(extra, root)
    jobs, refused = [], []
    for step in selected:
        result = api.generate_assignment(step, force=True)
        if not result.get('success'):
            sys.exit(f'error: nbgrader generate_assignment {step} failed:\n{result.get("log", "")}{result.get("error", "")}')
        if (duedates or {}).get(step):
            with api.gradebook as gb:
                gb.update_or_create_assignment(step, duedate=duedates[step])
        bad_ids = []
        for student in handed_in(step, root):
            if verdict := gate.check_id(student):  # never a path, a pattern nor a gradebook entry: listed by itself
                bad_ids.append({'student': gate.printable(student), 'detail': verdict.detail})
                continue
            record = results.new(step, student, kernel)
            verdict = gate.check(submitted_path(root=root), student, step)
            if verdict:  # never read, nor graded: its record says why
                refuse(step, student, verdict, record, root)
                refused.append((step, student))
                continue
            record['repairs'], record['attention'] = repair_submission(step, student, root)
            record['unreadable'] = unreadable(step, student, root)
            results.save(record, root)
            jobs.append((step, student))
        results.save_refused_ids(step, bad_ids, root)
    # Every student in the gradebook before any worker starts: two workers grading one student's two steps at once would
    # otherwise both try to add the student (a UNIQUE constraint error for one of them). A refused submission's student
    # too, without a submission (an earlier one's removed): the grade table shows its row, its status and no points.
    from nbgrader.api import MissingEntry

    with api.gradebook as gb:
        for student in sorted({student for _, student in jobs + refused}):
            gb.update_or_create_student(student)
        for step, student in refused:
            with contextlib.suppress(MissingEntry):
                gb.remove_submission(step, student)
    # SQLite's write-ahead logging: --jobs nbgrader processes then read the gradebook while one writes
    # (course.classroom.gradebook).
    gradebook.prepare_for_workers(api.coursedir.db_url)
    return jobs


def grade_one(api, step, student, feedback, root=ROOT):
    """nbgrader autograde, then (if feedback) generate_feedback, of one submission through api; the logs and stderr go to
    .build/logs/, the outcome (course.grader.outcome.Outcome, made here and passed with the submission through nbgrader's
    resources) to its results record. nbgrader reads the student id as a glob pattern (its converters glob
    submitted/<student>/<step>): only an id the gate let through (course.gate.STUDENT_ID, no pattern character) gets here."""
    from course.grader.outcome import Outcome, autograde

    if gate.check_id(student) or gate.check_id(step):
        raise ValueError(f"not a plain id, refused by course.gate: '{gate.printable(student)}', '{gate.printable(step)}'")
    outcome, seconds, written = Outcome(), {}, None  # this submission's, filled in by the preprocessors as nbgrader runs
    peak_rss(reset=True)
    with open(log_path(step, student, root), 'w') as log:
        os.dup2(log.fileno(), 2)  # library warnings, and the kernel's stderr, go to the log
        warnings.simplefilter('ignore')  # nbgrader's SQLAlchemy and nbformat warnings say nothing about the submission
        start = time.perf_counter()
        result = autograde(api, step, student, outcome)
        seconds['autograde'] = round(time.perf_counter() - start, 3)
        log.write(result.get('log', '') + result.get('error', ''))
        ran = {'success': bool(result.get('success')), 'error': outcome.stopped}
        if feedback and result.get('success'):
            log.flush()
            start = time.perf_counter()
            result = api.generate_feedback(step, student)
            seconds['feedback'] = round(time.perf_counter() - start, 3)
            log.write(result.get('log', '') + result.get('error', ''))
            written = feedback_written(step, student, result, root)
    results.update(step, student, root, autograde=ran, seconds=seconds, memory={'worker_peak_rss': peak_rss()},
                   feedback=written, **outcome.record())


def feedback_written(step, student, result, root=ROOT):
    """{'written': whether generate_feedback wrote a page for every notebook of the step, 'error': why not (the last line
    of its error, the exception), or None}."""
    folder = feedback_path(student, step, root)
    missing = [n for n in notebooks(step, root) if not (folder / n.replace('.ipynb', '.html')).is_file()]
    if result.get('success') and not missing:
        return {'written': True, 'error': None}
    lines = [line.strip() for line in (result.get('error') or result.get('log') or '').splitlines() if line.strip()]
    why = next((line for line in reversed(lines) if re.match(r'[\w.]+(Error|Exception): ', line)), None)
    return {'written': False, 'error': gate.printable((why or f'no page for {", ".join(missing)}')[:300])}


LOG_BUDGET = 16 << 20  # of a submission's log kept: what the kernel wrote to its stderr is the student's


def printable_log(path, budget=LOG_BUDGET):
    """Rewrite a submission's log (nbgrader's, with what the student's kernel wrote to stderr) with every control
    character of each line escaped (course.gate.printable), so that showing it (cat, less -R, an editor) cannot move or
    restyle the instructor's terminal; past budget bytes, its start and end only."""
    try:
        with open(path, 'rb') as f:
            size = os.fstat(f.fileno()).st_size
            data = f.read(budget // 2)
            if size > budget:
                f.seek(size - budget // 2)
                data += f'\n... {size - budget:,} bytes of the log left out ...\n'.encode() + f.read(budget // 2)
            else:
                data += f.read()
    except OSError:
        return
    text = '\n'.join(gate.printable(line) for line in data.decode('utf-8', 'replace').split('\n'))
    tmp = Path(f'{path}.part')
    tmp.write_text(text)
    tmp.replace(path)


def peak_rss(reset=False):
    """This process's peak resident memory in bytes (VmHWM) since the last reset (None where Linux's /proc lacks it);
    reset: start counting again from what it holds now (writing 5 to /proc/self/clear_refs)."""
    try:
        if reset:
            Path('/proc/self/clear_refs').write_text('5')
            return None
        with open('/proc/self/status') as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith('VmHWM:'))
    except (OSError, StopIteration):
        return None


def serve(conn, settings, kernels, feedback, root):
    """A worker: grade_one() each (step, student) received on conn, answering 'done' after each, its kernels started as
    kernels (a Kernels) says. The worker runs one kernel at a time, so one sandbox folder (sockets, kernelspec) serves all
    its kernels in turn."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the main process, which stops the workers
    limit_memory()
    kernel, env = kernels.config()
    os.environ.update(env)
    runner.share_engines()
    api = runner.api(runner.merged(settings, kernel), root)
    try:
        while (job := conn.recv()) is not None:
            grade_one(api, *job, feedback, root)
            conn.send('done')
    finally:
        if env:
            shutil.rmtree(env['JUPYTER_PATH'], ignore_errors=True)


# What a grading worker may hold (RLIMIT_DATA: its heap and private mappings, not torch's libraries nor the address space
# glibc reserves per thread): grading a submission peaks at about 300 MB resident. Past it, the worker's allocation
# fails (MemoryError: that submission is not graded) instead of the machine's OOM killer choosing what dies.
WORKER_MEMORY = 2 << 30


def limit_memory(limit=WORKER_MEMORY):
    """Hold this process to limit bytes of data. Only the soft limit: the kernel launchers this worker starts inherit
    it, and a cold kernel's prlimit must still raise it to the kernel's own (course.isolation.policy.LIMITS, 4 GiB) as a user."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


class Worker:
    """One of the --jobs nbgrader processes: it grades submission after submission (nbgrader and torch stay imported;
    each submission still gets a kernel of its own), and is replaced when one of them takes too long or kills it."""

    def __init__(self, context, *args):
        self.context, self.args = context, args  # serve()'s, after conn
        self.start()

    def start(self):
        self.conn, child = self.context.Pipe()
        self.proc = self.context.Process(target=serve, args=(child, *self.args), daemon=True)
        self.proc.start()
        child.close()

    def stop(self):
        """Kill the worker and whatever it started (the kernel's launcher: a warm kernel's server then stops the kernel)."""
        sandbox.kill_tree(self.proc.pid)
        self.proc.join()

    def grade(self, step, student, timeout, root):
        """Autograde one submission; stop it, and whatever it started, after timeout s."""
        log_path(step, student, root).parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        try:
            self.conn.send((step, student))
            if self.conn.poll(timeout):
                self.conn.recv()
                return
            stopped = 'timeout'
        except (EOFError, OSError):  # it died, with this submission or before (out of memory, say)
            stopped = 'died'
        from course.grader.outcome import machine_load

        load = machine_load()  # the limit is on the clock: how busy the machine was goes with it (course.reports.results.status)
        self.stop()
        results.update(step, student, root, stopped=stopped, timeouts={'submission': load} if stopped == 'timeout' else {},
                       seconds={'limit': timeout, 'stopped_after': round(time.perf_counter() - start, 3)})
        self.start()


def grade_all(jobs, kernels, settings, timeout, workers, feedback, root=ROOT, stream=None):
    """Autograde, and write the feedback of, every (step, student) of jobs (a list, or a future of one), `workers` at a
    time, each on the next idle worker, its kernels started as kernels (a Kernels) says; complete each one's record
    (course.reports.results.finish()) as it is done, and show the progress on stream (default stderr:
    course.grader.progress)."""
    context = runner.worker_context()
    pool_workers = [Worker(context, settings, kernels, feedback, root) for _ in range(max(1, workers))]
    idle = queue.Queue()
    for worker in pool_workers:
        idle.put(worker)

    def grade(job):
        worker = idle.get()
        try:
            worker.grade(*job, timeout, root)
        finally:
            idle.put(worker)
        printable_log(log_path(*job, root))
        shown.add(results.finish(*job, root)['status'])

    pool = ThreadPoolExecutor(len(pool_workers))
    try:
        jobs = jobs.result() if hasattr(jobs, 'result') else jobs
        shown = Progress(len(jobs), stream)
        list(pool.map(grade, jobs))
        shown.close()
    finally:
        pool.shutdown(cancel_futures=True)  # on Ctrl-C, no more submissions
        for worker in pool_workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
            worker.proc.join(10)
            if worker.proc.is_alive():
                worker.stop()
        runner.stop_worker_context()


def memory_capped(kind):
    """Whether each grading kernel of kind (a KernelKind) runs under a memory cap of its own (course.isolation.cgroups: as
    root, or with a delegated cgroup): tried by making, then removing, one such cgroup."""
    if kind == KernelKind.UNSANDBOXED:
        return False
    group = cgroups.Cgroup.make(os.getpid())
    if group is None:
        return False
    group.remove(cap=5)
    return True


class KernelKind(enum.StrEnum):
    """The kernels a grading run starts, as its results records name them (course.reports.results: 'kernel')."""

    WARM = 'warm'  # forked, past its imports, from a kernel server in a sandbox (course.isolation.warm)
    COLD = 'cold'  # started from scratch, each in a sandbox of its own (course.isolation.sandbox)
    UNSANDBOXED = 'unsandboxed'  # no sandbox: trusted code only (--no-sandbox, or the demo class where none works)


@dataclass(frozen=True)
class Kernels:
    """How a grading worker starts each kernel: their kind and, for warm kernels, the socket of the kernel server the
    grading run started (course.isolation.warm.server)."""

    kind: KernelKind
    socket: str | None = None

    def __post_init__(self):
        object.__setattr__(self, 'kind', KernelKind(self.kind))
        if (self.kind == KernelKind.WARM) != (self.socket is not None):
            raise ValueError(f'{self.kind} kernels {"need" if self.kind == KernelKind.WARM else "take no"} a kernel '
                             f'server\'s socket (given: {self.socket!r})')

    def config(self):
        """(the nbgrader Config that starts them, or None; the environment the worker needs for them)."""
        if self.kind == KernelKind.WARM:
            return warm.kernel_config(self.socket)
        if self.kind == KernelKind.COLD:
            return sandbox.kernel_config()
        return None, {}


def kernel_kind(no_sandbox=False, cold=False):
    """The KernelKind this machine grades with, given the options."""
    if no_sandbox or not sandbox.available():
        return KernelKind.UNSANDBOXED
    return KernelKind.COLD if cold or not warm.available() else KernelKind.WARM


def grade_class(selected, kind, settings=None, timeout=180, workers=None, feedback=True, root=ROOT, duedates=None):
    """Grade every submission of the steps selected in root/submitted/ with kernels of kind, a KernelKind (each step's
    due date from duedates, {step: datetime}, if given), record each outcome, and export grades.csv; return the export's rows
    (course.reports.export.rows())."""
    root, kind = Path(root), KernelKind(kind)
    if not submitted_path(root=root).is_dir():
        sys.exit('error: no submitted/ folder: put the class in submitted/<student>/<step>/, or run make demo.')
    # nbgrader, in this process and the workers, needs this venv's bin on PATH, and the workers' forkserver imports its
    # preloaded modules through PYTHONPATH (CPython 3.11 ignores the sys_path it is given): this course's package.
    os.environ.update(runner.env(root))
    # (already running from course.grader.grade) its one-torch-thread setting reaches the kernel server too
    runner.worker_context()
    with ThreadPoolExecutor(1) as background:
        jobs = background.submit(prepare, selected, kind, root, duedates)  # while the kernel server and the workers start
        with warm.server(root) if kind == KernelKind.WARM else contextlib.nullcontext() as socket:
            grade_all(jobs, Kernels(kind, socket), settings, timeout, workers or os.cpu_count() + 2, feedback, root)
        for step, student in jobs.result():  # each finished as it was graded; on Ctrl-C, those left are too
            if (results.load(step, student, root) or {}).get('status') is None:
                results.finish(step, student, root)
    cgroups.sweep()  # the kernels' cgroups that a launcher killed by jupyter_client left (empty)
    runner.export(root / 'grades.csv', root)
    from nbgrader.api import Gradebook

    from course.reports.export import rows

    with Gradebook(gradebook.configured(root)) as gb:
        return rows(gb, root)


