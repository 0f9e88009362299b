"""Warm grading kernels: a server in the bubblewrap sandbox imports torch and matplotlib once, then forks each kernel,
fresh, into namespaces, folders and a user of its own.

The server runs no student code: it only forks. Each kernel it forks (K0 -> K1 -> K2 below) starts from that clean state
and gets what tools/sandbox.py gives a kernel started cold, so one student's state cannot reach another's:
  - a pid namespace of its own (K1 is its pid 1: when the kernel ends, whatever it started is killed), and its own
    network (none), IPC and hostname;
  - a mount namespace where /tmp and /dev/shm are new and empty, and the folders the server shares (every student's
    autograded/ folder, every kernel's sockets) are covered, showing only its own notebook folder and sockets (and
    input.txt, read-only);
  - a user of its own (as root: UID_BASE + the launcher's pid), no capabilities, and sandbox.LIMITS.
The launcher (the kernelspec's argv, which jupyter_client starts and stops) asks the server for a kernel over a unix
socket, passes it its stdout and stderr, and exits with the kernel's status once the kernel is gone; if the launcher goes
away, the server stops the kernel.

  grade.py starts a server with `with server(root) as s:` and gives each nbgrader process nbgrader_args(s).
"""

import contextlib
import ctypes
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import sandbox

NAME = 'course-warm'  # the kernelspec name
SOCKET_ENV = 'COURSE_WARM_SOCKET'  # the kernelspec sets it for the launcher: the server's socket
# What the server imports before it forks: the notebook's heavy imports, and the kernel with what it imports as it
# starts (its debugger among them).
PRELOAD = ('numpy', 'torch', 'torch.nn', 'torch.nn.functional', 'matplotlib', 'matplotlib.pyplot',
           'matplotlib_inline.backend_inline', 'IPython', 'ipykernel.kernelapp', 'ipykernel.ipkernel', 'ipykernel.debugger',
           'IPython.core.debugger', 'IPython.core.completerlib', 'IPython.core.oinspect', 'IPython.core.logger',
           'IPython.extensions.storemagic', 'sqlite3', 'pydoc', 'tornado.gen', 'tornado.queues', 'tornado.platform.asyncio',
           'http.server', 'mimetypes', 'encodings.idna', 'faulthandler')
# Kept by the server besides setuid's, to build each kernel's namespaces and reach its folder; no kernel keeps any.
CAPS = ('CAP_SYS_ADMIN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH')
RLIMITS = {'data': resource.RLIMIT_DATA, 'cpu': resource.RLIMIT_CPU, 'nproc': resource.RLIMIT_NPROC,
           'fsize': resource.RLIMIT_FSIZE, 'nofile': resource.RLIMIT_NOFILE, 'core': resource.RLIMIT_CORE}
# linux/sched.h, linux/mount.h, linux/prctl.h
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = (
    0x20000, 0x2000000, 0x4000000, 0x8000000, 0x20000000, 0x40000000)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
libc = ctypes.CDLL(None, use_errno=True)


def available():
    """True if warm kernels can run here: the sandbox, as root (each kernel needs a user of its own)."""
    return os.geteuid() == 0 and sandbox.available()


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f'{what}: {os.strerror(err)}')


def mount(source, target, fstype=None, flags=0, data=None):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    check(libc.mount(enc(source), enc(str(target)), enc(fstype), flags, enc(data)), f'mount {target}')


# The server, inside the sandbox.

def serve(config):
    """The server: import PRELOAD, say 'ready' on stdout, then fork a kernel for each request on config['socket']; tell
    each launcher its kernel's exit status; stop a kernel whose launcher has gone or asks it to stop."""
    cfg = json.loads(config)
    os.environ['MPLBACKEND'] = 'module://matplotlib_inline.backend_inline'  # as ipykernel sets it before the notebook runs
    os.environ['PYDEVD_DISABLE_FILE_VALIDATION'] = '1'  # debugpy's import-time note on frozen modules, not for the grader
    for name in PRELOAD:
        __import__(name)
    import gc
    gc.freeze()  # what is imported stays shared with the kernels: the collector leaves it alone, no copy on write
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(cfg['socket'])
    listener.listen(128)
    print('ready', flush=True)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            try:
                if key.data is None:
                    start_kernel(cfg, listener, sel)
                elif key.data[0] == 'launcher':  # 'stop', or the launcher is gone: stop the kernel (K0 takes K1 down)
                    _, pid, conn, _ = key.data
                    with contextlib.suppress(KeyError, ValueError):  # its exit, in the same batch, came first
                        sel.unregister(conn)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
                else:  # the kernel is gone: tell its launcher how it ended
                    _, pid, conn, pidfd = key.data
                    _, status = os.waitpid(pid, 0)
                    sel.unregister(pidfd)
                    os.close(pidfd)
                    with contextlib.suppress(KeyError, ValueError):
                        sel.unregister(conn)
                    with contextlib.suppress(OSError):
                        conn.sendall(f'{os.waitstatus_to_exitcode(status)}\n'.encode())
                    conn.close()
            except Exception as e:  # one kernel's trouble (out of files, a bad request) must not stop the others'
                print(f'warm: {e!r}', file=sys.stderr, flush=True)


def start_kernel(cfg, listener, sel):
    """Accept a launcher's request, check it, and fork its kernel (K0), watched through a pidfd."""
    conn, _ = listener.accept()
    fds = []
    try:
        conn.settimeout(10)  # a launcher sends its request at once: one that does not must not hold up the others
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 2)
        conn.settimeout(None)
        req = json.loads(msg)
        covers = [Path(c) for c in cfg['cover']]
        if not (len(fds) == 2 and isinstance(req.get('uid'), int) and req['uid'] >= sandbox.UID_BASE
                and Path(req['cwd']).parent.parent in covers[:1] and Path(req['conn']).is_relative_to(covers[1])):
            raise ValueError(f'refused: {msg[:300]!r}')  # only launchers write here; a kernel runs as its own user
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # blocked in K0 and K1 until each is ready for it
        try:
            pid = os.fork()
        finally:
            if locals().get('pid') != 0:  # the server (or a failed fork)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    except BaseException:
        for fd in fds:
            os.close(fd)
        conn.close()
        raise
    if pid == 0:
        code = 70
        try:
            for other in [listener, conn, sel] + [k.fileobj for k in sel.get_map().values()]:
                os.close(other) if isinstance(other, int) else other.close()  # pidfds are ints
            k0(cfg, req, fds)
        except BaseException as e:  # the kernel could not be set up: say why, in the student's log
            with contextlib.suppress(OSError):
                os.write(fds[1], f'warm: kernel setup failed: {e!r}\n'.encode())
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        conn.close()
        raise
    sel.register(conn, selectors.EVENT_READ, ('launcher', pid, conn, pidfd))
    sel.register(pidfd, selectors.EVENT_READ, ('exit', pid, conn, pidfd))


def k0(cfg, req, fds):
    """Forked by the server (SIGTERM blocked): new namespaces for what it forks next, K1, which it waits for; SIGTERM
    kills K1, and with it the namespace."""
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP), 'unshare')
    child = os.fork()
    if child == 0:
        k1(cfg, req, fds)
    for fd in fds:
        os.close(fd)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGKILL))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def k1(cfg, req, fds):
    """Pid 1 of the kernel's namespace: confine the file system, fork the kernel (K2), reap until it ends, then end
    (and with it, every process left in the namespace)."""
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), 'prctl')  # if K0 is killed, so is the namespace
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # K0 could not be killed before this (SIGTERM blocked)
    mount(None, '/', None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the server
    mount('proc', '/proc', 'proc', MS_NOSUID | MS_NODEV)  # this namespace's processes only
    confine(cfg, req)
    os.chdir('/')  # not in the server's autograded/, under the cover
    kernel = os.fork()
    if kernel == 0:
        k2(cfg, req, fds)
    for fd in fds:
        os.close(fd)
    while True:
        pid, status = os.wait()
        if pid == kernel:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def confine(cfg, req):
    """Cover /tmp, /dev/shm and the server's shared folders with new file systems, then show through them only the
    kernel's own folders (read-write) and the data (read-only); the covers over shared folders are read-only."""
    keep = {req['cwd']: False, str(Path(req['conn']).parent): False}
    # Read-only, what the sandbox shows below /tmp or a shared folder (a venv or a course under /tmp, say): the data, and
    # Python (the kernel imports more of it as it runs).
    covered = ('/tmp', *cfg['cover'])
    for path in [cfg.get('data'), *{str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)}]:
        if path and any(Path(path).is_relative_to(c) for c in covered):
            keep[path] = True
    held = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in keep}
    mount('tmpfs', '/tmp', 'tmpfs', MS_NOSUID | MS_NODEV, f'size={sandbox.TMP_SIZE},mode=1777')
    mount('tmpfs', '/dev/shm', 'tmpfs', MS_NOSUID | MS_NODEV, f'size={sandbox.SHM_SIZE},mode=1777')
    covers = [p for p in cfg['cover'] if os.path.isdir(p)]  # those below /tmp are already gone
    for path in covers:
        mount('tmpfs', path, 'tmpfs', MS_NOSUID | MS_NODEV, 'size=1m,mode=0755')
    for path, readonly in keep.items():
        if os.path.isdir(f'/proc/self/fd/{held[path]}'):
            os.makedirs(path, exist_ok=True)
        elif not os.path.lexists(path):  # a file under a cover: a mount point for it (outside, it is there, read-only)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_WRONLY, 0o644))
        mount(f'/proc/self/fd/{held[path]}', path, None, MS_BIND)
        if readonly:
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(held[path])
    for path in covers:
        mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.makedirs(sandbox.MPLCONFIGDIR, exist_ok=True)
    for folder in (sandbox.MPLCONFIGDIR, os.path.dirname(sandbox.MPLCONFIGDIR)):
        os.chmod(folder, 0o1777)


def k2(cfg, req, fds):
    """The kernel: limits, its own user without capabilities, its stdout and stderr (the launcher's), a clean
    environment, then ipykernel, as `python -m ipykernel_launcher -f <connection file>` would run it."""
    code = 1
    try:
        out, err = fds
        null = os.open('/dev/null', os.O_RDONLY)
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)  # nothing of the server's: no socket, no other kernel's pipe
        os.setsid()  # its own session and process group, as jupyter_client starts a kernel: an interrupt reaches its children
        for name, value in sandbox.LIMITS.items():
            resource.setrlimit(RLIMITS[name], (value, value))
        if req.get('uid') is not None:
            os.setgroups([])
            os.setresgid(req['uid'], req['uid'], req['uid'])
            os.setresuid(req['uid'], req['uid'], req['uid'])  # not root any more: every capability is gone
            check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 'prctl')  # its /proc/self is its own, as after an exec
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 'prctl')  # and no setuid program gives one back
        os.chdir(req['cwd'])
        os.environ.clear()
        os.environ.update(sandbox.kernel_env(req['env']), MPLBACKEND='module://matplotlib_inline.backend_inline')
        sys.path[:] = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
        sys.argv = ['ipykernel_launcher', '-f', req['conn'], '--HistoryManager.hist_file=:memory:']
        import numpy
        numpy.random.seed()  # numpy's global generator was seeded once, in the server: a fresh seed, as a new process has
        from ipykernel import kernelapp
        try:
            kernelapp.launch_new_instance()
            code = 0
        except SystemExit as e:
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()  # into the student's log: why this kernel could not start
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


# The launcher and the server's setup, outside the sandbox.

def launch(connection_file):
    """Kernel launcher (the kernelspec's argv), with cwd the notebook's folder: prepare the folders as tools/sandbox.py
    does, ask the server for a kernel, wait until it is gone (asking the server to stop it on SIGTERM), sanitize cwd,
    then exit with the kernel's status."""
    cwd, conn, uid = sandbox.prepare(connection_file)
    server = os.environ.get(SOCKET_ENV, '')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(server)
    except OSError as e:
        sys.exit(f'warm kernel: no kernel server at {server!r} ({e.strerror}): tools/grade.py starts one; '
                 'or grade with tools/grade.py --cold')
    req = {'cwd': str(cwd), 'conn': str(conn), 'uid': uid,
           'env': {k: os.environ[k] for k in sandbox.KEEP_ENV if k in os.environ}}
    socket.send_fds(sock, [json.dumps(req).encode()], [sys.stdout.fileno(), sys.stderr.fileno()])
    def stop(*_):
        with contextlib.suppress(OSError):
            sock.send(b'stop\n')

    signal.signal(signal.SIGTERM, stop)
    reply = b''
    while not reply.endswith(b'\n'):
        chunk = sock.recv(64)
        if not chunk:
            break
        reply += chunk
    sandbox.sanitize(cwd)
    status = int(reply) if reply.strip() else 1
    sys.exit(status if status >= 0 else 128 - status)


@contextlib.contextmanager
def server(root):
    """Start a kernel server for grading the course at root (its kernels' folders are below root/autograded/); yield the
    path of its socket, for nbgrader_args(); stop it, and every kernel still running, on exit."""
    batch = Path(tempfile.mkdtemp(prefix=f'{NAME}-'))  # short: a unix socket path has at most 107 bytes
    autograded = Path(root).resolve() / 'autograded'
    autograded.mkdir(exist_ok=True)
    data = sandbox.find_data(autograded / 'student' / 'assignment')
    sock = batch / 'server.sock'
    cfg = {'socket': str(sock), 'cover': [str(autograded), str(batch)], 'data': str(data) if data else None}
    files = sandbox.mpl_cache()
    code = {f'/tmp/{p.name}': os.open(p, os.O_RDONLY) for p in (Path(__file__).resolve(), Path(sandbox.__file__).resolve())}
    argv = sandbox.bwrap_argv(autograded, sock, [sys.executable, '/tmp/warm.py', '--serve', json.dumps(cfg)],
                              files={**files, **code}, caps=CAPS, limits=False)
    # A session of its own: Ctrl-C stops grade.py, which then stops the server (and bwrap --die-with-parent, if it dies).
    proc = subprocess.Popen(argv, pass_fds=[*files.values(), *code.values()], stdout=subprocess.PIPE, start_new_session=True)
    for fd in [*files.values(), *code.values()]:
        os.close(fd)
    try:
        if proc.stdout.readline() != b'ready\n':
            raise RuntimeError(f'warm kernels: the kernel server did not start (bwrap exit status {proc.poll()}); '
                               'grade with tools/grade.py --cold')
        yield str(sock)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(batch, ignore_errors=True)


def nbgrader_args(sock):
    """(flags, env) that make nbgrader autograde run every notebook in a warm kernel from the server at sock: the
    sandbox's (sandbox.nbgrader_args()), in a folder of its own next to the server's socket, with this file as the
    kernelspec's launcher, told where the server is."""
    return sandbox.nbgrader_args(tempfile.mkdtemp(prefix='w-', dir=Path(sock).parent), NAME, __file__, {SOCKET_ENV: sock})


if __name__ == '__main__':
    if sys.argv[1] == '--serve':
        serve(sys.argv[2])
    else:
        launch(sys.argv[1])
