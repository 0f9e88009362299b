"""Running nbgrader on the course: its configuration (nbgrader_config.py, plus a traitlets Config of our own), its Python
API in this process, its command in a subprocess, and its export."""

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import subprocess
import sys
from pathlib import Path

from traitlets.config import Config

from course.layout import ROOT


def env(root=ROOT):
    """The environment an nbgrader process needs: this venv's bin on PATH (a new gradebook runs alembic), and this
    course's package importable (nbgrader_config.py and `nbgrader export` import it)."""
    return {**os.environ, 'PATH': f'{Path(sys.executable).parent}{os.pathsep}{os.environ["PATH"]}', 'PYTHONPATH': str(root)}


def on_path():
    """Put this venv's bin on this process's PATH: nbgrader runs alembic when it opens a gradebook, even in-process."""
    os.environ['PATH'] = env()['PATH'] if Path(sys.executable).parent.as_posix() not in os.environ['PATH'] else os.environ['PATH']


def config(extra=None, root=ROOT):
    """The course's nbgrader configuration as the nbgrader command loads it (nbgrader_config.py), then extra (a Config)."""
    from traitlets.config.loader import PyFileConfigLoader

    c = PyFileConfigLoader('nbgrader_config.py', path=str(root)).load_config()
    if extra is not None:
        c.merge(extra)
    c.CourseDirectory.root = str(root)
    db = c.CourseDirectory.get('db_url', '')
    if db.startswith('sqlite:///') and not db.startswith('sqlite:////'):  # relative to the course, not to this process's cwd
        c.CourseDirectory.db_url = f'sqlite:///{Path(root).resolve() / db.removeprefix("sqlite:///")}'
    on_path()
    return c


def merged(*configs):
    """One Config from several (later ones win)."""
    out = Config()
    for c in configs:
        if c is not None:
            out.merge(c)
    return out


def api(extra=None, root=ROOT):
    """nbgrader's Python API (NbGraderAPI) on the course, configured as config() is."""
    from nbgrader.apps import NbGraderAPI

    return NbGraderAPI(config=config(extra, root))


def share_engines():
    """In this process, one SQLAlchemy engine per database URL for every nbgrader Gradebook. nbgrader opens a Gradebook,
    hence a new engine, in each preprocessor that touches the gradebook (about ten a submission), and an engine's cache
    of compiled statements dies with it: a grading worker, which grades submission after submission against one
    gradebook, recompiled the same queries every time (about 0.1 s of CPU a submission). Gradebook.close() disposes of
    the engine's connection pool, which only closes idle connections; the engine and its cache stay usable."""
    import functools

    import nbgrader.api
    import sqlalchemy

    nbgrader.api.create_engine = functools.lru_cache(maxsize=None)(sqlalchemy.create_engine)


def export(to, root=ROOT):
    """`nbgrader export` in this process, with the plugin nbgrader_config.py names (course.reports.export.CellCsvExport)."""
    from nbgrader.apps import ExportApp

    extra = Config()
    extra.ExportPlugin.to = str(to)
    extra.Application.log_level = 'WARN'
    app = ExportApp(config=config(extra, root))
    with contextlib.chdir(root):  # the app loads nbgrader_config.py from its cwd too, over the config given
        app.initialize([])
        app.start()


def run(*args, check=True, cwd=ROOT, **kw):
    """One nbgrader command in a subprocess, in cwd (the course root): the CompletedProcess; exits with its log if check
    is set and it failed. For what nbgrader only offers as a command (validate) and for plain nbgrader in tests."""
    done = subprocess.run([sys.executable, '-m', 'nbgrader', *args], cwd=cwd, env=env(cwd), capture_output=True, text=True, **kw)
    if check and done.returncode:
        sys.exit(f'error: nbgrader {" ".join(args[:2])} failed:\n{done.stdout}{done.stderr}')
    return done


# What each nbgrader worker (course.grader.workers) needs imported before it grades: nbgrader, the course's preprocessors, and
# torch (the out-of-process checks compute their references with it).
WORKER_PRELOAD = ['course.grader.workers', 'course.grader.preprocessors', 'nbgrader.apps.api', 'nbgrader.converters', 'torch']


def worker_context():
    """The multiprocessing context nbgrader workers are started from: a forkserver that imports WORKER_PRELOAD once,
    started now, so that it imports while this process does other work (course.grader.grade calls it first)."""
    # One torch thread in each grading process, set here for the workers and the kernel server started after them: the
    # kernels share the cores, and the checks' references are small. With the default, one per core, OpenMP threads
    # spin between operations on the cores the kernels need (a class of 30 graded 5% slower).
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    context = multiprocessing.get_context('forkserver')
    context.set_forkserver_preload(WORKER_PRELOAD)
    multiprocessing.forkserver.ensure_running()
    return context


def stop_worker_context():
    """Stop the forkserver at once (it holds nothing; its interpreter's teardown, with torch loaded, takes seconds)."""
    server = multiprocessing.forkserver._forkserver  # the stdlib keeps it private: its pid, and _stop(), which waits for it
    if server._forkserver_pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server._forkserver_pid, signal.SIGKILL)
        server._stop()
