"""The grading kernel's sandbox: each test runs student code in it, as nbgrader autograde does, in a fake course, and
checks one guarantee, twice: in a kernel started cold in a sandbox of its own (course.isolation.sandbox), and in a warm
kernel forked by a kernel server (course.isolation.warm, what course.grader.grade uses). One fake course and one warm
server serve a whole module (each test gets a student folder of its own, as each submission does); every test also
checks that nothing it started is left running."""

import ast
import contextlib
import itertools
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.api import Gradebook
from nbgrader.preprocessors import Execute

from conftest import NO_SANDBOX, can_sandbox, running
from course import runner
from course.isolation import cgroups, policy, sandbox, warm
from course.layout import ROOT, notebooks, steps

SECRET = 'SOLUTION-ONLY-IN-SOURCE'
pytestmark = pytest.mark.skipif(not can_sandbox(), reason=NO_SANDBOX)


# What a test waits for (a process to end, to appear) is an event; this is only the cap on a wait, generous enough for
# a machine loaded many times over: reaching it fails the test, saying what it waited for.
CAP = 300


def gone(pids, cap=CAP):
    """Wait until every process of pids has ended (psutil: a pidfd each, no timer), at most cap seconds; whether they had."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    return not psutil.wait_procs(procs, timeout=cap)[1]


def none_left(left, cap=CAP):
    """Wait until left() (lines 'pid command line' of running processes) is empty: for each process it lists to end, then
    for the next it lists (one may start another as it ends), at most cap seconds in all; whether it emptied."""
    deadline = time.monotonic() + cap
    while lines := left():
        if time.monotonic() > deadline:
            return False
        gone([int(line.split()[0]) for line in lines], max(0, deadline - time.monotonic()))
    return True


def appears(marker, cap=CAP):
    """Wait until a process whose command line holds marker runs, at most cap seconds (no event says a process started:
    looked for again every 0.1 s); whether one did."""
    deadline = time.monotonic() + cap
    while not running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def fake_course(root):
    """source/, gradebook.db, another student's work and input.txt: what a kernel must not reach."""
    for folder in ('source/hw', 'submitted/other/hw', 'autograded/other/hw'):
        (root / folder).mkdir(parents=True)
    (root / 'source/hw/secret.txt').write_text(SECRET)
    (root / 'submitted/other/hw/work.ipynb').write_text(SECRET)
    (root / 'autograded/other/hw/work.ipynb').write_text(SECRET)
    with sqlite3.connect(root / 'gradebook.db') as db:
        db.execute('create table grade (student text, score real)')
    if (ROOT / 'input.txt').exists():
        shutil.copy(ROOT / 'input.txt', root / 'input.txt')
    return root


@pytest.fixture(scope='module', params=['cold', 'warm'])
def kernels(request, tmp_path_factory):
    """A fake course shared by the module's tests, and the kernels for it: cold ones, or a warm kernel server's. On
    teardown (the server stopped), no process started from the course may be left."""
    base = tmp_path_factory.mktemp(request.param)
    root = fake_course(base / 'course')
    with contextlib.ExitStack() as stack:
        if request.param == 'warm':
            sock = stack.enter_context(warm.server(root))
            args, launcher = (lambda folder: warm.kernel_config(sock)), 'course.isolation.warm'
        else:
            args, launcher = sandbox.kernel_config, 'course.isolation.sandbox'
        server = set(running(str(base)))  # the warm kernel server's processes (pid and command line: it names the course)
        yield SimpleNamespace(base=base, root=root, args=args, launcher=launcher, warm=request.param == 'warm',
                              left=lambda: [line for line in running(str(base)) if line not in server],
                              count=itertools.count())
    none_left(lambda: running(str(base)))
    left = running(str(base))
    for line in left:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert not left, f'processes left running: {left}'


@pytest.fixture
def course(kernels, monkeypatch):
    """One test's view of the shared course: cwd is autograded/<a student of its own>/hw/; args(folder) gives the
    (Config, env) of one more nbgrader process; left() the processes started from the course still running (the server
    aside). On teardown, none may be left."""
    n = next(kernels.count)
    student = f'alice{n}'
    cwd = kernels.root / 'autograded' / student / 'hw'
    cwd.mkdir(parents=True)
    config, env = kernels.args(kernels.base / f'sandbox-{n}')
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield SimpleNamespace(base=kernels.base, root=kernels.root, cwd=cwd, student=student, config=config, args=kernels.args,
                          launcher=kernels.launcher, warm=kernels.warm, left=kernels.left, n=n)
    # on a loaded machine, the 256 processes of a fork bomb take a while to die once their namespace is gone
    left = [] if none_left(kernels.left) else kernels.left()
    assert not left, f'processes left running after the test: {left}'


def text(cell):
    """A cell's output as text: streams, results, and errors as 'Ename: evalue'."""
    parts = []
    for out in cell.outputs:
        if out.output_type == 'stream':
            parts.append(out.text)
        elif out.output_type == 'error':
            parts.append(f'{out.ename}: {out.evalue}')
        else:
            parts.append(out.get('data', {}).get('text/plain', ''))
    return ''.join(parts)


def fork_until_refused(most):
    """Code for a kernel: fork sleeping children until a fork fails (or most of them), and print how many it made."""
    return ("import os, time\n"
            "children = []\n"
            "try:\n"
            f"    while len(children) < {most}:\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            time.sleep(1000)\n"
            "            os._exit(0)\n"
            "        children.append(pid)\n"
            "except OSError as e:\n"
            "    print('stopped after', len(children), type(e).__name__)")


@contextmanager
def kernel(course, timeout=20, student=None, extra=()):
    """A sandboxed kernel started by nbgrader's Execute preprocessor as autograde configures it; yields run(source),
    which executes one cell and returns its output as text. The kernel is shut down on exit, as after a notebook.
    Another student gets a sandbox folder of their own, as each nbgrader process running at the same time does."""
    config = course.config
    if student is not None:
        student = f'{course.student}-{student}'
        (course.root / 'autograded' / student / 'hw').mkdir(parents=True, exist_ok=True)
        config = course.args(course.base / f'sandbox-{course.n}-{student}')[0]
    ep = Execute(config=config, timeout=timeout, **({'extra_arguments': list(extra)} if extra else {}))
    folder = course.root / 'autograded' / (student or course.student) / 'hw'
    ep.nb, ep.resources = nbformat.v4.new_notebook(), {'metadata': {'path': str(folder)}}

    def run(source):
        cell = nbformat.v4.new_code_cell(source)
        ep.nb.cells.append(cell)
        ep.execute_cell(cell, len(ep.nb.cells) - 1)
        return text(cell)

    run.client = ep  # its km is the kernel's manager
    with ep.setup_kernel():
        yield run


def test_kernel_gets_the_whole_policy_and_its_extra_arguments(course):
    """course.isolation.policy, as the kernel sees it: every resource limit, the size of each tmpfs cover, the hostname, the
    kernel arguments, and the extra arguments nbgrader passes (which the warm launcher once dropped)."""
    extra = '--IPKernelApp.log_level=WARN'
    with kernel(course, extra=[extra]) as run:
        out = run("import json, os, resource, socket, sys\n"
                  f"names, covers = {list(policy.LIMITS)}, {[c.path for c in policy.COVERS]}\n"
                  "limits = {n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n.upper()))[0] for n in names}\n"
                  "sizes = {p: os.statvfs(p).f_blocks * os.statvfs(p).f_frsize for p in covers + ['.']}\n"
                  "print(json.dumps({'limits': limits, 'sizes': sizes, 'host': socket.gethostname(), 'argv': sys.argv}))")
    import json

    seen = json.loads(out)
    assert seen['limits'] == policy.LIMITS, seen['limits']
    assert seen['sizes'] == {c.path: c.size for c in (*policy.COVERS, policy.FOLDER)}, seen['sizes']
    assert seen['host'] == policy.HOSTNAME
    assert set(policy.KERNEL_ARGS) <= set(seen['argv']) and extra in seen['argv'], seen['argv']


def test_writes_only_its_own_folder(course):
    real = ROOT / f'pwned-{course.base.name}-{course.n}.txt'  # in the real course root, removed even if the sandbox fails
    targets = ['../../../pwned.txt', '../../other/hw/work.ipynb', '../../../source/hw/secret.txt',
               f'{course.root}/pwned.txt', str(real), '/usr/pwned.txt', '/pwned.txt']
    try:
        with kernel(course) as run:
            out = run("open('answer.txt', 'w').write('42')\nprint(open('answer.txt').read())\n"
                      f"for path in {targets}:\n"
                      "    try:\n"
                      "        open(path, 'w').write('pwned')\n"
                      "        print('wrote', path)\n"
                      "    except OSError as e:\n"
                      "        print('refused', type(e).__name__, e.strerror)")
        assert not real.exists()
    finally:
        real.unlink(missing_ok=True)
    assert out.startswith('42\n') and not (course.cwd / 'answer.txt').exists(), out  # its own, while it runs
    assert 'wrote' not in out and out.count('refused') == len(targets), out
    assert not (course.root / 'pwned.txt').exists()
    assert (course.root / 'autograded/other/hw/work.ipynb').read_text() == SECRET
    assert (course.root / 'source/hw/secret.txt').read_text() == SECRET


def test_what_it_writes_in_its_folder_is_capped_and_gone_with_it_but_the_record(course):
    """policy.FOLDER: the kernel writes into its folder until the cover is full (ENOSPC at its size, not later); it
    cannot change what the folder held, only fill policy.RECORDS; once it is gone, the folder holds what it held before,
    and the record as the kernel wrote it."""
    (course.cwd / 'given.txt').write_text('as submitted')
    (course.cwd / policy.PROBE_RECORD).touch()
    before = sorted(p.name for p in course.cwd.iterdir())
    with kernel(course) as run:
        out = run("import errno, os\n"
                  "written = 0\n"
                  "try:\n"
                  f"    while written < {2 * policy.FOLDER.size}:\n"  # twice the cap at most, not to fill the disk
                  "        with open(f'fill-{written}.bin', 'wb') as f:\n"
                  "            f.write(bytes(16 << 20))\n"
                  "        written += 16 << 20\n"
                  "    print('no cap', written)\n"
                  "except OSError as e:\n"
                  "    print('stopped', written, errno.errorcode[e.errno])\n"
                  "for change in (lambda: open('given.txt', 'w').write('changed'), lambda: os.remove('given.txt')):\n"
                  "    try:\n"
                  "        change()\n"
                  "        print('changed given.txt')\n"
                  "    except OSError as e:\n"
                  "        print('given.txt refused', errno.errorcode[e.errno])\n"
                  f"open({policy.PROBE_RECORD!r}, 'wb').write(b'numbers')")
    word, written, why = out.split('\n')[0].split()
    assert (word, why) == ('stopped', 'ENOSPC') and int(written) <= policy.FOLDER.size, out
    assert out.count('given.txt refused') == 2 and 'changed' not in out, out
    assert sorted(p.name for p in course.cwd.iterdir()) == before
    assert (course.cwd / 'given.txt').read_text() == 'as submitted'
    assert (course.cwd / policy.PROBE_RECORD).read_bytes() == b'numbers'


def test_memory_and_processes_are_capped_in_total_per_kernel(course):
    """policy.TOTALS, through a cgroup of the kernel's own (course.isolation.cgroups), beneath the grader's and gone with the
    kernel: three processes that each stay under the per-process LIMITS but together touch more than TOTALS['memory']
    do not all live; forks stop at TOTALS['pids'], below LIMITS['nproc'] (which alone would let them go on)."""
    trial = cgroups.Cgroup.make('trial-of-the-test')
    if not trial:
        pytest.skip('this grader may not make a cgroup (not root, no delegated cgroup): docs/security.md')
    trial.remove()
    share = policy.TOTALS['memory'] * 3 // 8  # 3/8 of the total each: three of them pass it, two would not
    assert share < policy.LIMITS['data']
    with kernel(course, timeout=120) as run:
        key = run.client.km.provisioner.pid  # the launcher's: it names the kernel's cgroups
        made = lambda: [p for parent, _ in cgroups.places() if (p := parent / f'{cgroups.PREFIX}{key}').is_dir()]  # noqa: E731
        assert len(made()) == len(cgroups.places()), made()  # the kernel's, while it runs
        # Each child touches its share (resident), says so, then holds it until the kernel lets them all go: the three
        # shares are held at once whatever the machine's load (the OOM killer may take one before it says so).
        memory = run("import os, numpy as np\n"
                     "go_r, go_w = os.pipe()\n"
                     "children = []\n"
                     "for _ in range(3):\n"
                     "    ready_r, ready_w = os.pipe()\n"
                     "    pid = os.fork()\n"
                     "    if pid == 0:\n"
                     "        os.close(go_w)\n"
                     f"        a = np.ones({share}, np.uint8)\n"  # touched: resident
                     "        os.write(ready_w, b'1')\n"
                     "        os.read(go_r, 1)\n"  # until the kernel closes go_w
                     "        os._exit(0)\n"
                     "    os.close(ready_w)\n"
                     "    os.read(ready_r, 1)\n"  # b'1', or b'' if it died first
                     "    children.append(pid)\n"
                     "os.close(go_w)\n"
                     "print([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children])")
        forks = run(fork_until_refused(policy.LIMITS['nproc']))
    statuses = ast.literal_eval(memory)  # the exit codes the kernel printed
    assert -9 in statuses, f'every process lived: {memory}'  # the cgroup's OOM killer took one
    assert forks.startswith('stopped after') and int(forks.split()[2]) < policy.TOTALS['pids'], forks
    # Removed by the launcher once the kernel's processes are gone, or, if jupyter_client had to SIGKILL it (190
    # processes take a while to end), by the next sweep (each kernel's start, each batch's end). Waited for as events:
    # the launcher's end, then each process left in its cgroups (pidfds); 300 s is only a cap, failing loudly.
    assert gone([key], CAP), f'the launcher {key} still runs after {CAP} s'
    assert cgroups.wait_empty(made(), CAP), f'processes still in {made()} after {CAP} s'
    cgroups.sweep()
    assert not made(), f'cgroups left behind: {made()}'


def test_cannot_read_source_gradebook_or_other_students(course):
    targets = [course.root / name for name in ('source/hw/secret.txt', 'gradebook.db', 'submitted/other/hw/work.ipynb',
                                               'autograded/other/hw/work.ipynb')]
    targets += [ROOT / 'nbgrader_config.py',
               *(ROOT / 'source' / aid / name for aid in steps() for name in notebooks(aid))]
    with kernel(course) as run:
        out = run(f"import os\nprint(sorted(os.listdir('{course.root}')))\n"
                  f"for path in {[str(t) for t in targets]}:\n"
                  "    try:\n"
                  "        print('read', path, len(open(path, 'rb').read()))\n"
                  "    except OSError as e:\n"
                  "        print('refused', type(e).__name__)")
    assert out.splitlines()[0] == "['autograded', 'input.txt']", out  # the course root holds only the path to cwd, and the data
    assert 'read' not in out and out.count('refused FileNotFoundError') == len(targets), out


def test_has_no_network(course):
    """A listener really waits on the host's loopback (this test reaches it first, to prove it does); the kernel's
    attempt to reach it is refused, and the listener accepts nothing more."""
    with socket.create_server(('127.0.0.1', 0)) as server:
        port = server.getsockname()[1]
        socket.create_connection(('127.0.0.1', port), timeout=3).close()
        server.accept()[0].close()  # reachable from outside the sandbox
        with kernel(course) as run:
            out = run("import socket\n"
                      "try:\n"
                      f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                      "    print('connected')\n"
                      "except OSError as e:\n"
                      "    print('refused', type(e).__name__, e.strerror)")
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody from the sandbox connected to the host's loopback
    assert out.startswith('refused'), out


def test_memory_bomb_gets_memory_error_and_the_kernel_goes_on(course):
    with kernel(course) as run:
        out = run("hog = []\n"  # bytes(n) is calloc, fast: counted at once, in RAM once touched; stops at twice the limit
                  "try:\n"
                  f"    while len(hog) < {policy.LIMITS['data'] >> 27}:\n"
                  "        hog.append(bytes(256 << 20))\n"
                  "    print('no limit')\n"
                  "except MemoryError:\n"
                  "    print('MemoryError after', len(hog) * 256, 'MiB')\n"
                  "del hog")
        assert run("print('alive')") == 'alive\n'
    mib = int(out.split()[2])
    assert out.startswith('MemoryError after') and 2048 <= mib < policy.LIMITS['data'] >> 20, out


def test_fork_bomb_is_capped_does_not_hinder_another_sandbox_and_dies_with_the_kernel(course):
    with kernel(course, timeout=90) as run:  # 256 forks of a kernel with torch loaded: slow on a loaded machine
        out = run(fork_until_refused(policy.LIMITS['nproc'] + 50))  # the limit + 50 if there is none, not to harm the machine
        assert len(course.left()) > 100  # the forks are there, until the kernel is shut down
        with kernel(course, student='bob') as other:  # graded at the same time: the cap is per sandbox
            assert other("import torch\nprint(torch.ones(2, 2).sum().item())") == '4.0\n'
    assert out.startswith('stopped after') and int(out.split()[2]) < policy.LIMITS['nproc'] and 'BlockingIOError' in out, out


def test_double_forked_daemon_dies_with_the_kernel(course):
    marker = f'daemon-of-{course.cwd}'
    with kernel(course) as run:
        daemon = f'(trap \"\" HUP INT TERM; sleep 1000; : {marker}) >/dev/null 2>&1 &'  # a subshell, orphaned, ignoring signals
        run(f"import subprocess\nsubprocess.run(['sh', '-c', '{daemon}'], start_new_session=True)")
        assert appears(marker), 'the daemon did not start'
    assert none_left(lambda: running(marker)), 'the daemon outlived the kernel'


def test_sigkill_to_the_launcher_takes_everything_down(course):
    """What jupyter_client does last to a kernel that will not stop: SIGKILL the process it started (the launcher)."""
    marker = f'daemon-of-{course.cwd}'
    with kernel(course) as run:
        daemon = f'(trap \"\" HUP INT TERM; sleep 1000; : {marker}) >/dev/null 2>&1 &'
        run(f"import subprocess\nsubprocess.run(['sh', '-c', '{daemon}'], start_new_session=True)")
        assert appears(marker), 'the daemon did not start'
        os.kill(run.client.km.provisioner.pid, signal.SIGKILL)
        assert none_left(course.left), 'processes outlived the launcher'


@pytest.mark.parametrize('crash', ['import os; os._exit(3)', 'import ctypes; ctypes.string_at(0)'], ids=['os_exit', 'segfault'])
def test_crash_kills_only_that_kernel(course, crash):
    with kernel(course) as run:
        with pytest.raises(DeadKernelError):
            run(crash)
    with kernel(course) as run:  # the next notebook of the batch
        assert run("print('next')") == 'next\n'
    assert not list(course.cwd.glob('core*'))


def test_infinite_loop_is_interrupted_and_the_notebook_goes_on(course):
    with kernel(course, timeout=2) as run:
        assert 'KeyboardInterrupt' in run('while True: pass')
        assert run("print('next cell')") == 'next cell\n'


def test_loop_that_ignores_sigint_is_killed(course):
    """The cell times out, the interrupt is ignored, nbclient gives up waiting for the cell's output (iopub_timeout) and
    raises; the kernel, asked to shut down, does not, and jupyter_client sends SIGTERM to the launcher (bwrap)."""
    start = time.monotonic()
    with pytest.raises(CellTimeoutError):
        with kernel(course, timeout=2) as run:
            run.client.iopub_timeout = 1  # 4 by default: the same path, sooner
            run('import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass')
    assert time.monotonic() - start < CAP  # it ends (not how fast: a loaded machine is slow)


def test_nbgrader_autograde_runs_the_course_notebook_in_the_sandbox(course):
    """nbgrader autograde with the sandbox's kernel Config in a copy of the course: the solution gets every autograded point,
    and a cell appended to it shows it ran in the sandbox, and that the traps it tried to leave for nbgrader, which writes
    and chmods files in its folder after the kernel, did not work: its notebook replaced by a fifo (writing it would
    block), and a link to gradebook.db (chmod 444 would follow it)."""
    if not (course.root / 'input.txt').exists():
        pytest.skip('no input.txt: run make data')
    shutil.copytree(ROOT / 'source', course.root / 'source', dirs_exist_ok=True)
    shutil.copy(ROOT / 'nbgrader_config.py', course.root)
    (course.root / 'gradebook.db').unlink()
    probe = ("import contextlib, glob, os, socket\nnb = glob.glob('*.ipynb')[0]\n"
             "for trap in (lambda: os.remove(nb), lambda: os.mkfifo(nb), lambda: os.symlink('../../../gradebook.db', 'link')):\n"
             "    with contextlib.suppress(OSError):\n"
             "        trap()\n"
             "print(socket.gethostname(), os.path.exists('../../../gradebook.db'), os.path.isfile(nb))")
    step = steps()[0]  # the sandbox's work with nbgrader does not depend on the step
    for name in notebooks(step):
        nb = nbformat.read(ROOT / 'notebooks' / name, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(probe))
        (course.root / 'submitted/alice' / step).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, course.root / 'submitted/alice' / step / name)
    extra = runner.merged(course.config)
    extra.CourseDirectory.release_directory = '.build/release'
    api = runner.api(extra, course.root)
    assert api.generate_assignment(step, force=True)['success']
    mode = (course.root / 'gradebook.db').stat().st_mode
    done = api.autograde(step, 'alice', force=True, create=True)
    log = done.get('log', '') + done.get('error', '')
    assert (course.root / 'gradebook.db').stat().st_mode == mode
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        sub = gb.find_submission(step, 'alice')
        assert sub.code_score == sub.max_code_score > 0, log
    for name in notebooks(step):
        nb = nbformat.read(course.root / 'autograded/alice' / step / name, as_version=4)
        assert text(nb.cells[-1]) == f'{policy.HOSTNAME} False True\n', log  # its notebook is read-only to it
        assert nb.metadata.kernelspec.name not in (sandbox.NAME, warm.NAME)  # feedback opens with the students' kernel
    assert not (course.root / 'autograded/alice' / step / 'link').exists()


def test_launcher_refuses_a_folder_it_should_not_expose(course, tmp_path):
    """Started by hand, from the course root or with a connection file in a shared folder, the launcher stops at once."""
    shared = tmp_path / 'shared'
    shared.mkdir()
    (shared / 'other-kernel.json').write_text('{}')
    made = Path(course.config.KernelManager.connection_file)  # a folder kernel_config() made, but the course root as cwd
    for cwd, conn in ((ROOT, made), (course.cwd, shared / 'kernel.json')):
        done = subprocess.run([sys.executable, '-P', '-m', course.launcher, conn], cwd=cwd, capture_output=True, text=True,
                              env=runner.env())
        assert done.returncode and 'sandbox: refusing to start' in done.stderr, done.stderr
    assert (shared / 'other-kernel.json').exists()


def test_nothing_passes_from_one_kernel_to_the_next_or_to_one_running_beside_it(course):
    """The one folder kernels share in turn (their sockets') is emptied at each start; /tmp, modules and the numpy
    generator are each kernel's own (a warm kernel is forked from a server that never runs student code)."""
    where = "from pathlib import Path\nfrom ipykernel import get_connection_file\nsockets = Path(get_connection_file()).parent\n"
    leave = ("import numpy, torch\n(sockets / 'note.txt').write_text('answers')\nPath('/tmp/note.txt').write_text('answers')\n"
             "torch.note = 'answers'\nprint(numpy.random.randint(1 << 30))")
    look = ("import numpy, torch\n"
            "print(sorted(p.name for p in sockets.iterdir()), Path('/tmp/note.txt').exists(), hasattr(torch, 'note'))")
    with kernel(course) as run:
        draw = run(where + leave)
        with kernel(course, student='bob') as other:
            beside = other(where + look)
    with kernel(course) as run:
        after = run(where + look + "\nprint(numpy.random.randint(1 << 30))")
    for out in (beside, after):
        assert out.splitlines()[0].endswith(' False False') and 'note.txt' not in out, out
    assert after.splitlines()[1] != draw.strip(), 'two kernels drew the same "random" number'


def test_kernel_runs_as_a_user_of_its_own_without_capabilities_or_the_servers_socket(course):
    """No capability to undo the sandbox; and no unix socket in sight but its own: neither the warm kernel server's (a
    kernel cannot ask for more kernels) nor another kernel's."""
    with kernel(course) as run:
        out = run("import os, stat\nfrom ipykernel import get_connection_file\n"
                  "own = os.path.dirname(get_connection_file())\n"
                  f"tops = ('/tmp', '{course.root}')\n"
                  "walk = [os.path.join(d, n) for top in tops for d, _, names in os.walk(top) for n in names]\n"
                  "socks = [p for p in walk if stat.S_ISSOCK(os.lstat(p).st_mode) and os.path.dirname(p) != own]\n"
                  "caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapPrm', 'CapAmb'))]\n"
                  "print(os.getuid(), socks, caps)")
    uid, rest = out.split(maxsplit=1)
    assert rest.strip() == "[] ['0000000000000000', '0000000000000000', '0000000000000000']", out
    assert os.geteuid() != 0 or int(uid) >= policy.UID_BASE, out  # as root, a user of its own


def test_links_and_fifos_the_kernel_makes_never_reach_nbgrader(course):
    """The launcher exits (and nbgrader goes on) only once the sandbox is gone, and with it the folder's cover and all
    the kernel made there; cwd holds only files and folders (course.isolation.sandbox.sanitize(), a second guard)."""
    (course.root / 'victim.txt').write_text(SECRET)
    with kernel(course) as run:
        run("import os\nos.symlink('../../../victim.txt', 'graded.ipynb')\nos.mkfifo('fifo')\nos.makedirs('sub')\n"
            "os.symlink('/', 'sub/root')")
    assert sorted(p.name for p in course.cwd.rglob('*')) == []  # gone with the folder's cover
    assert (course.root / 'victim.txt').read_text() == SECRET


def test_kernel_imports_modules_nothing_imported_before_it(course):
    """A warm kernel's server imported torch and matplotlib; the kernel must still import the rest of Python and the venv
    (in a checkout under /tmp, as CI's may be, a cover over /tmp once hid them)."""
    with kernel(course) as run:
        out = run("import email.mime.text, numpy.polynomial, sys\nprint('imported from', sys.prefix)")
    assert out == f'imported from {sys.prefix}\n', out


def test_warm_kernels_run_for_a_course_outside_tmp(tmp_path, monkeypatch):
    """The fixture's courses live under /tmp, which each warm kernel covers whole; a real course (here, one inside this
    repository's .build/) does not: the kernel must still get its folder, read input.txt, and write nowhere else."""
    if not warm.available():
        pytest.skip('warm kernels need root')
    (ROOT / '.build').mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix='course-outside-tmp-', dir=ROOT / '.build'))
    try:
        (root / 'autograded/alice/hw').mkdir(parents=True)
        (root / 'input.txt').write_text('to be, or not to be')
        with warm.server(root) as sock:
            config, env = warm.kernel_config(sock)
            for key, value in env.items():
                monkeypatch.setenv(key, value)
            course = SimpleNamespace(root=root, config=config, student='alice')
            with kernel(course) as run:
                out = run("import os\nprint(open('../../../input.txt').read())\nopen('answer.txt', 'w').write('42')\n"
                          "print(open('answer.txt').read())\n"
                          "for path in ('../../../input.txt', '../../../pwned.txt'):\n"
                          "    try:\n"
                          "        open(path, 'a').write('pwned')\n"
                          "        print('wrote', path)\n"
                          "    except OSError as e:\n"
                          "        print('refused', e.strerror)")
        lines = out.splitlines()
        assert lines[:2] == ['to be, or not to be', '42'] and [x.split()[0] for x in lines[2:]] == ['refused', 'refused'], out
        assert not (root / 'autograded/alice/hw/answer.txt').exists()  # written in its folder's cover, gone with it
        assert (root / 'input.txt').read_text() == 'to be, or not to be' and not (root / 'pwned.txt').exists()
    finally:
        shutil.rmtree(root)
