"""Shared fixtures: every step of source/ and its notebooks, the graded classes, and the process finder."""

import os

# One torch (OpenMP) thread in every process of the suite and every kernel it starts, as make grade gives its workers and
# kernels (course.runner.worker_context): the suite keeps both cores busy, and more threads than that spin-wait on the
# cores the rest need. Set before anything imports torch.
os.environ.setdefault('OMP_NUM_THREADS', '1')

import http.server
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import psutil
import pytest

from course.isolation import sandbox
from course.layout import ROOT, notebooks, steps

STEPS = steps()
# The longest files first: pytest-xdist (--dist loadfile, pytest.ini) hands files to its workers in collection order, so
# these start at once, side by side, and the short files fill in after them.
LONGEST_FIRST = ('test_grading.py', 'test_nonroot.py', 'test_colab_runtime.py', 'test_browser.py', 'test_new_step.py',
                 'test_sandbox.py')


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # a stable sort: each file keeps its own order

NOTEBOOKS = [(step, name) for step in STEPS for name in notebooks(step)]


@pytest.fixture(params=NOTEBOOKS, ids=[f'{a}/{n}' for a, n in NOTEBOOKS])
def notebook(request):
    """(step, notebook name) of every source notebook."""
    return request.param


@pytest.fixture(params=STEPS)
def step(request):
    """Every step of source/."""
    return request.param


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on (free now; the caller binds it or relies on it being closed)."""
    import socket

    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(scope='session')
def listener():
    """A real TCP listener on the host's loopback, for the hostile network attempt: (port, accepted()), where accepted()
    says whether anything connected to it."""
    import socket

    server = socket.create_server(('127.0.0.1', 0))
    server.setblocking(False)
    seen = []

    def accepted():
        try:
            seen.append(server.accept())
        except BlockingIOError:
            pass
        return bool(seen)

    yield server.getsockname()[1], accepted
    server.close()


@pytest.fixture(scope='session')
def graded(tmp_path_factory, plain_started, listener):
    """One class graded by the real command (python -m course.grader.grade) in a copy of the course: the demo class of every
    step and the damaged, broken and hostile corpus of every step (tests/support/corpus.py); and, first, a few clean students
    alone, to compare with. Plain nbgrader grades one of each step at the same time (plain_started)."""
    from support.classroom import grade_class

    return grade_class(tmp_path_factory.mktemp('course'), listener[0])


@pytest.fixture(scope='session')
def plain_started(tmp_path_factory):
    """One demo student per step (classroom.plain_sample) being graded by plain serial `nbgrader autograde`,
    in a thread (nbgrader itself runs in a process of its own): a future of {(step, student): {test cell: score}}."""
    from support.classroom import grade_plain

    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(grade_plain, tmp_path_factory.mktemp('plain'))


@pytest.fixture(scope='session')
def plain(plain_started):
    return plain_started.result()


def can_sandbox():
    """Whether this machine can sandbox a grading kernel (make system installs bubblewrap as root)."""
    return sandbox.available()


NO_SANDBOX = ('no sandbox on this machine: bubblewrap is missing or cannot create namespaces here '
              '(as root with apt-get, `make system` installs it)')


def running(marker):
    """'pid command line' of every process whose command line holds marker (this process and its parents aside)."""
    own = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    found = []
    for p in psutil.process_iter(['pid', 'cmdline']):
        cmd = ' '.join(p.info['cmdline'] or [])
        if marker in cmd and p.info['pid'] not in own:
            found.append(f"{p.info['pid']} {cmd}")
    return found



class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope='session')
def server(tmp_path_factory):
    """The base URL of an HTTP server on 127.0.0.1 standing in for the real download URLs: good.txt (Tiny Shakespeare),
    corrupted.txt (one byte changed), and every file a step ships next to its notebook (Step 6's checkpoint)."""
    www = tmp_path_factory.mktemp('www')
    good = (ROOT / 'input.txt').read_bytes()  # put in place by make data
    (www / 'good.txt').write_bytes(good)
    (www / 'corrupted.txt').write_bytes(good[:1000] + bytes([good[1000] ^ 1]) + good[1001:])
    for shipped in (ROOT / 'release').glob('*/*'):
        if shipped.suffix != '.ipynb':
            shutil.copy(shipped, www / shipped.name)
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), partial(Quiet, directory=www))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{httpd.server_address[1]}'
    httpd.shutdown()
    httpd.server_close()


# A Colab GPU runtime, as far as a notebook can tell without using the GPU: torch says CUDA is there.
GPU_CLAIM = 'import torch; torch.cuda.is_available = lambda: True; torch.cuda.device_count = lambda: 1'


@pytest.fixture(scope='session')
def colab_kernelspecs(tmp_path_factory):
    """The kernelspecs of Colab's runtime (course.authoring.colab: a virtualenv of colab-profile.txt, built on first use),
    'colab' and 'colab-gpu' (GPU_CLAIM): (their KernelSpecManager, the JUPYTER_PATH folder that holds them)."""
    from jupyter_client.kernelspec import KernelSpecManager

    from course.authoring import colab as profile

    python = profile.venv()
    folder = tmp_path_factory.mktemp('colab-kernels')
    profile.kernelspec(python, folder, 'colab')
    profile.kernelspec(python, folder, 'colab-gpu', exec_lines=[GPU_CLAIM])
    return KernelSpecManager(kernel_dirs=[str(folder / 'kernels')]), folder


@pytest.fixture
def colab(colab_kernelspecs):
    """Kernels of Colab's runtime: colab(gpu=False) is a jupyter_client KernelManager for a new kernel of it; gpu=True,
    one in which torch.cuda.is_available() is True. Every kernel they started is shut down when the test ends (nbclient
    leaves running a kernel it did not create: each would hold its memory to the session's end)."""
    from jupyter_client import KernelManager

    specs, folder = colab_kernelspecs
    made = []

    def kernel(gpu=False):
        made.append(KernelManager(kernel_name='colab-gpu' if gpu else 'colab', kernel_spec_manager=specs))
        return made[-1]

    kernel.jupyter_path = folder  # JUPYTER_PATH for a tool that finds kernels by name (nbval's --nbval-kernel-name)
    yield kernel
    for km in made:
        if km.has_kernel:
            km.shutdown_kernel(now=True)


# tests/hub/ (make test-hub) starts PostgreSQL and a JupyterHub and creates Unix users: plain make test leaves it out;
# `pytest tests/hub` (an explicit path) still collects it. test_submissions.py and test_classreport_demo.py test the class
# that test_grading.py grades: they are collected through it (its star imports), on the pytest-xdist worker that grades
# the class once, not again on their own (given by name, `pytest tests/test_submissions.py`, one still runs alone).
collect_ignore = ['hub', 'test_submissions.py', 'test_classreport_demo.py']
