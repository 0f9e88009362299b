"""Cold grading kernels: a Jupyter kernel launcher that starts ipykernel from scratch inside bubblewrap (bwrap), with
course.isolation.policy applied as bwrap and prlimit flags; and the set-up both kernel kinds share (the folders a kernel may
write, the kernelspec, the nbgrader Config that selects it).

  kernel_config(folder) -> (Config, env) for one nbgrader process; `python -m course.isolation.sandbox <connection file>` is the
  kernelspec's argv (launch()).
"""

import contextlib
import ctypes
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from course.isolation import cgroups, policy
from course.layout import ROOT

NAME = 'course-sandbox'  # the kernelspec name
MARK = f'{NAME}.txt'  # in the folder kernel_config() makes
PR_SET_CHILD_SUBREAPER = 36  # prctl option, linux/prctl.h
FRESH_MOUNTS = ('--proc', '/proc', '--dev', '/dev')  # every kernel's sandbox: a fresh /proc, a minimal /dev
# make grade fails closed: without a working sandbox it grades nothing, and says this (one line).
UNAVAILABLE = ('error: no working sandbox here (bubblewrap missing, or it cannot create namespaces or mount a fresh '
               '/proc), so no student code was run: install it (apt-get install bubblewrap, or make system as root), grade '
               'where /proc is not partly covered (a container\'s read-only /proc/sys), or pass --no-sandbox to grade '
               'trusted code unsandboxed')
DEMO_UNSANDBOXED = ('note: no working sandbox here (apt-get install bubblewrap, or make system as root): the demo class, '
                    'generated from source/, is our own code and is graded WITHOUT a sandbox; make grade refuses a real '
                    'class so')


def available():
    """True if bwrap (and prlimit, setpriv) are installed and bwrap can build a sandbox on this machine: its namespaces,
    and the FRESH_MOUNTS every kernel's sandbox mounts (bwrap_argv()), whose /proc the kernel refuses where a mount covers
    part of the host's /proc, as a container's read-only /proc/sys does."""
    if not all(shutil.which(t) for t in ('bwrap', 'prlimit', 'setpriv')):
        return False
    argv = [*namespaces(), '--ro-bind', '/', '/', *FRESH_MOUNTS, 'true']
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


def namespaces(nest=False):
    """bwrap and its isolation flags, as this user can run it. nest: as a user, let the sandbox create user namespaces of
    its own (the warm kernel server, which gives each kernel one); a kernel never may."""
    # policy.NAMESPACES (pid 1 of the pid namespace is bwrap, which exits with the kernel); cgroup where the kernel has it.
    argv = ['bwrap', *(f'--unshare-{ns}' + '-try' * (ns == 'cgroup') for ns in policy.NAMESPACES),
            '--hostname', policy.HOSTNAME,
            # SIGKILL everything inside if bwrap or the launcher dies (jupyter_client signals their process group); a new
            # session, no tty tricks.
            '--die-with-parent', '--new-session']
    if os.geteuid() == 0:
        # As root bwrap is privileged: keep only what setpriv needs to drop to the kernel's user (no user namespace, as
        # bwrap would map the kernel to root).
        return argv + ['--cap-drop', 'ALL', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID']
    return argv + ['--unshare-user'] + ['--disable-userns'] * (not nest)  # as a user: a user namespace (no nested one)


def find_data(cwd):
    """The data, where the notebook looks for it: the nearest input.txt up to 3 folders above cwd (None if none)."""
    return next((d / 'input.txt' for d in cwd.parents[:3] if (d / 'input.txt').is_file()), None)


def folder_cover(cwd):
    """bwrap flags that cover the notebook's folder with policy.FOLDER: a capped tmpfs, the folder's entries read-only
    through it, and its policy.RECORDS read-write."""
    argv = ['--perms', f'{policy.FOLDER.mode:o}', '--size', str(policy.FOLDER.size), '--tmpfs', str(cwd)]
    argv += [a for name in policy.folder_entries(cwd) for a in ('--ro-bind', str(cwd / name), str(cwd / name))]
    return argv + [a for name in policy.record_entries(cwd) for a in ('--bind', str(cwd / name), str(cwd / name))]


def bwrap_argv(cwd, connection_file, kernel_argv, uid=None, files=None, caps=(), limits=True, nest=False, cover_cwd=True):
    """The command that runs kernel_argv sandboxed: it may write only cwd (and a private /tmp), read the system, the
    Python install and input.txt, and reach only the sockets next to connection_file; as uid if given (root only).
    files: {path in the sandbox: open file descriptor} of files bwrap copies into its /tmp (pass_fds them to bwrap).
    caps: capabilities kept (as root, besides setuid's; as a user, in the sandbox's user namespace only); limits: False to
    leave policy.LIMITS to kernel_argv (the warm kernel server applies them to each kernel it forks); nest: see
    namespaces(); cover_cwd: False to bind cwd read-write rather than cover it (folder_cover()): the warm kernel server, which
    covers each kernel's folder itself."""
    # The system, read-only: /usr, /etc, and /bin, /lib... as they are here (symlinks into /usr on Debian).
    binds = [('--ro-bind', '/usr'), ('--ro-bind', '/etc')]
    binds += [('--ro-bind', top) for top in ('/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32')
              if os.path.isdir(top) and not os.path.islink(top)]
    # Python, read-only: the virtualenv (at the path the kernel runs it from, even through a symlink: a venv linked into a
    # checkout) and the interpreter it links to (under /root/.pyenv here).
    pythons = [str(Path(sys.prefix).absolute()), *(str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix))]
    binds += [('--ro-bind', p) for p in dict.fromkeys(pythons)]
    data = find_data(cwd)
    binds += [('--ro-bind', str(data))] if data else []  # read-only
    # Read-write: the folder of the connection file (the kernel creates its unix sockets there) and cwd, through its cover
    # (folder_cover()), nothing else.
    binds += [('--bind', str(connection_file.parent)), ('--bind', str(cwd))]

    argv = namespaces(nest) + [a for cap in caps for a in ('--cap-add', cap)]
    # Fresh /proc, minimal /dev, policy.COVERS (a private /tmp and /dev/shm in RAM, capped).
    argv += FRESH_MOUNTS
    for cover in sorted(policy.COVERS, key=lambda c: c.path.count('/'), reverse=True):  # /dev/shm after /dev
        argv += ['--perms', f'{cover.mode:o}', '--size', str(cover.size), '--tmpfs', cover.path]
    # Binds below /tmp (cwd in tests, the connection file) hang from a tmpfs of their own, made read-only below, not from
    # the writable /tmp: there, as anywhere outside cwd and /tmp, writing fails.
    targets = [p for _, p in binds]
    hooks = [h for h in dict.fromkeys('/tmp/' + p.split('/')[2] for p in targets if p.startswith('/tmp/')) if h not in targets]
    argv += [a for h in hooks for a in ('--tmpfs', h)]
    # The folders leading to each bind, world-readable (bwrap would make them 0700, closed to the kernel's user).
    for folder in dict.fromkeys(str(a) for p in targets for a in reversed(Path(p).parents[:-1])):
        if folder != '/tmp' and folder not in hooks:
            argv += ['--perms', '0755', '--dir', folder]
    for top in ('/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'):
        if os.path.islink(top):
            argv += ['--symlink', os.readlink(top), top]
    for flag, path in binds:
        argv += folder_cover(cwd) if path == str(cwd) and cover_cwd else [flag, path, path]
    # policy.WRITABLE folders, and the files to copy into /tmp.
    argv += [a for folder in policy.WRITABLE for a in ('--perms', '1777', '--dir', folder)]
    for path, fd in (files or {}).items():
        argv += ['--perms', '0644', '--file', str(fd), path]
    # All the rest (the skeleton bwrap made, /dev) read-only.
    argv += [a for h in hooks for a in ('--remount-ro', h)] + ['--remount-ro', '/dev', '--remount-ro', '/']
    # A clean environment (bwrap is pid 1 here, the kernel's parent).
    argv += ['--chdir', str(cwd), '--clearenv']
    for k, v in policy.kernel_env(os.environ).items():
        argv += ['--setenv', k, v]
    argv.append('--')
    # Inside: drop root (if we are root), then set the resource limits (in the sandbox's user namespace), then run.
    if uid is not None:
        argv += ['setpriv', f'--reuid={uid}', f'--regid={uid}', '--clear-groups', '--inh-caps=-all']
    if limits:
        argv += ['prlimit', *(f'--{k}={v}' for k, v in policy.LIMITS.items()), '--']
    return argv + kernel_argv


def check_folders(cwd, conn_dir):
    """Refuse to expose the course (cwd, seen by the kernel, must not hold it) or a folder kernel_config() did not make,
    or to cover a folder of more entries than policy.FOLDER_ENTRIES."""
    if cwd == Path('/tmp') or ROOT.is_relative_to(cwd) or any((cwd / n).exists() for n in ('nbgrader_config.py', 'gradebook.db')):
        sys.exit(f'sandbox: refusing to start: the notebook folder (cwd) {cwd} holds a course root')
    if not (conn_dir.name == 'runtime' and (conn_dir.parent / MARK).is_file()):
        sys.exit(f'sandbox: refusing to start: the connection file folder {conn_dir} is not one that '
                 'course.isolation.sandbox.kernel_config() made (private, and emptied at each start): '
                 'set KernelManager.connection_file as it does')
    try:
        policy.folder_entries(cwd)
    except ValueError as e:
        sys.exit(f'sandbox: refusing to start: {e} ({cwd})')


def prepare(connection_file):
    """Before a kernel starts (the launcher, with cwd the notebook's folder): check the folders, empty the connection
    file's folder of what an earlier kernel left, and, as root, hand both folders to the kernel's user, whose uid it
    returns (None if not root): UID_BASE + this launcher's pid."""
    cwd, conn = Path.cwd().resolve(), Path(connection_file).resolve()
    check_folders(cwd, conn.parent)
    os.chmod(conn.parent, 0o700)  # private again: an earlier kernel owned it, and may have opened it to all
    for entry in conn.parent.iterdir():  # remove what an earlier kernel left there, not to pass it on
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        elif entry != conn:
            entry.unlink()
    uid = policy.UID_BASE + os.getpid() if os.geteuid() == 0 else None
    if uid is not None:  # the kernel's user must write cwd and the connection file's folder, and read that file
        for parent, subdirs, names in os.walk(cwd):
            for path in [parent, *(os.path.join(parent, n) for n in subdirs + names)]:
                os.chown(path, uid, uid, follow_symlinks=False)
        os.chown(conn.parent, uid, uid)
        os.chown(conn, uid, uid)
    return cwd, conn, uid


def mpl_cache():
    """{path in the sandbox: open fd} of the grader's matplotlib font list, if any, where the kernel's matplotlib looks:
    building it anew costs each kernel half a second. A copy: what a kernel does to it stays in its own /tmp."""
    mpl = Path(os.environ.get('MPLCONFIGDIR') or Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'matplotlib')
    return {f'{policy.MPLCONFIGDIR}/{p.name}': os.open(p, os.O_RDONLY) for p in mpl.glob('fontlist-*.json')}


def launch(connection_file, *extra):
    """Kernel launcher (the kernelspec's argv), with cwd the notebook's folder: run bwrap around ipykernel, in a cgroup of
    its own (course.isolation.cgroups), wait until it and everything it started are gone, remove the cgroup, then sanitize cwd,
    and only then exit, so that nbgrader, which waits for this process, writes the graded notebook into a folder without
    the kernel's links."""
    cwd, conn, uid = prepare(connection_file)
    kernel = policy.kernel_argv(conn, extra)
    files = mpl_cache()
    argv = bwrap_argv(cwd, conn, kernel, uid, files)
    # Become the reaper of whatever bwrap leaves: when jupyter_client's SIGTERM (to this process group) kills bwrap, the
    # sandbox's pid 1 (killed by --die-with-parent, taking the namespace down) is reparented here and waited for.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    cgroup = cgroups.Cgroup.make(os.getpid())  # policy.TOTALS, where this grader may make a cgroup (else None)
    bwrap = subprocess.Popen(argv, pass_fds=list(files.values()), preexec_fn=cgroup.join if cgroup else None)
    signal.signal(signal.SIGTERM, lambda *_: bwrap.terminate())  # SIGTERM to this process alone: pass it on
    status = bwrap.wait()
    with contextlib.suppress(ChildProcessError):
        while True:
            os.wait()
    if cgroup:
        cgroup.remove()
    sanitize(cwd)
    sys.exit(policy.exit_status(status))


def sanitize(folder):
    """Remove from folder what only a kernel would leave there for the grader to trip on, since nbgrader writes and chmods
    files there: symbolic links (to gradebook.db, say), fifos (an open for writing would block), sockets, devices."""
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(parent, name)
            mode = os.lstat(path).st_mode
            if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
                os.unlink(path)


def kernelspec(folder, name=NAME, launcher=__name__, env=None):
    """Write the kernelspec name under folder/kernels/, whose argv runs the launcher module (course.isolation.sandbox's launch(),
    or course.isolation.warm's) with env, and return its path. The launcher runs with -P: the notebook's folder, its cwd, is never
    on its sys.path (a submission's own course/ folder must not be imported)."""
    spec = folder / 'kernels' / name
    spec.mkdir(parents=True, exist_ok=True)
    (spec / 'kernel.json').write_text(json.dumps({
        'argv': [sys.executable, '-P', '-m', launcher, '{connection_file}'],
        'display_name': f'Python 3 ({name})',
        'language': 'python',
        # Interrupt by message: ipykernel then sends SIGINT to itself inside; the launcher is not the kernel (a signal to
        # it would kill bwrap, or the warm kernel's launcher).
        'interrupt_mode': 'message',
        'env': {'PYTHONPATH': str(ROOT), **(env or {})},
        'metadata': {'debugger': False},
    }, indent=1) + '\n')
    return spec / 'kernel.json'


def kernel_config(folder=None, name=NAME, launcher=__name__, env=None):
    """(Config, env) that make nbgrader run every notebook in a sandboxed kernel; env goes into the nbgrader process's
    environment (JUPYTER_PATH: where jupyter_client finds the kernelspec). folder (default: a new temporary folder, not
    removed afterwards) receives the kernelspec and, in turn, each kernel's connection file and sockets: nbgrader runs one
    kernel at a time, so nbgrader processes running at the same time each need their own call. name, launcher, env: the
    kernelspec's (kernelspec())."""
    folder = Path(folder or tempfile.mkdtemp(prefix=f'{NAME}-'))  # short: a unix socket path has at most 107 bytes
    kernelspec(folder, name, launcher, env)
    (folder / MARK).write_text('Made by course.isolation.sandbox: the kernelspec in kernels/; in runtime/, the connection '
                               'file and\nsockets of one sandboxed kernel at a time (emptied each time one starts).\n')
    (folder / 'runtime').mkdir(mode=0o700, exist_ok=True)  # private: bound read-write into each sandbox in turn
    from traitlets.config import (
        Config,  # here: the kernel launchers (course.isolation.sandbox, course.isolation.warm) start faster without it
    )

    c = Config()
    c.Execute.kernel_name = name
    # unix sockets (the sandbox has no network), named after the connection file: runtime/kernel-ipc-<n>
    c.KernelManager.transport = 'ipc'
    c.KernelManager.connection_file = str(folder / 'runtime' / 'kernel.json')
    return c, {'JUPYTER_PATH': str(folder)}


def kill_tree(pid):
    """SIGKILL pid and every process below it (stopped first, so it starts nothing more while they are listed)."""
    try:
        proc = psutil.Process(pid)
        proc.suspend()
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


if __name__ == '__main__':
    launch(*sys.argv[1:])
