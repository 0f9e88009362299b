"""The warm kernel server, run inside bubblewrap by course.isolation.warm: it imports torch and matplotlib once, then forks each
grading kernel, fresh, into namespaces, folders and a user of its own, applying course.isolation.policy (the same policy that
course.isolation.sandbox gives a kernel started cold) through unshare, mount, sethostname and setrlimit.

The server runs no student code: it only forks. Per kernel (K0 -> K1 -> K2):
  - K0 unshares policy.NAMESPACES for what it forks next (K1), and waits for it; SIGTERM to K0 kills K1, and with it the
    namespace;
  - K1, pid 1 of the new pid namespace, mounts /proc, puts policy.COVERS over /tmp and /dev/shm and read-only covers
    over the folders the server shares (every student's autograded/ folder, every kernel's sockets), and shows through
    them only its own sockets and notebook folder (under policy.FOLDER), and input.txt and Python, read-only;
  - K2 applies policy.LIMITS, setsid, its own uid (policy.UID_BASE + the launcher's pid), no_new_privs, policy.kernel_env
    and a fresh numpy seed, then runs ipykernel with policy.kernel_argv.
Run by a user rather than root (cfg['userns']), the server cannot give a kernel a uid of its own: K0 also unshares a user
namespace, in which the kernel is policy.USERNS_UID (the user outside), the only uid mapped; K1 builds the rest in it;
K2 drops every capability it has there, since its uid did not change.
Standard library and course.isolation.policy only: those are the files course.isolation.warm copies into the sandbox.
"""

import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import socket
import sys
import traceback
from pathlib import Path

from course.isolation import policy

# What the server imports before it forks: the notebook's heavy imports, and the kernel with what it imports as it
# starts (its debugger among them).
PRELOAD = ('numpy', 'torch', 'torch.nn', 'torch.nn.functional', 'torch.optim',
           'torch._dynamo',  # what an optimizer's first step() imports (seconds of CPU per kernel otherwise)
           'matplotlib', 'matplotlib.pyplot',
           'matplotlib_inline.backend_inline', 'IPython', 'ipykernel.kernelapp', 'ipykernel.ipkernel', 'ipykernel.debugger',
           'IPython.core.debugger', 'IPython.core.completerlib', 'IPython.core.oinspect', 'IPython.core.logger',
           'IPython.extensions.storemagic', 'sqlite3', 'pydoc', 'tornado.gen', 'tornado.queues', 'tornado.platform.asyncio',
           'http.server', 'mimetypes', 'encodings.idna', 'faulthandler')
RLIMITS = {name: getattr(resource, f'RLIMIT_{name.upper()}') for name in policy.LIMITS}
# linux/sched.h, linux/mount.h, linux/prctl.h
CLONE = {'mnt': 0x20000, 'cgroup': 0x2000000, 'uts': 0x4000000, 'ipc': 0x8000000, 'user': 0x10000000, 'pid': 0x20000000,
         'net': 0x40000000}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL, LINUX_CAPABILITY_VERSION_3 = 4, 0x20080522
libc = ctypes.CDLL(None, use_errno=True)


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f'{what}: {os.strerror(err)}')


def mount(source, target, fstype=None, flags=0, data=None):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    check(libc.mount(enc(source), enc(str(target)), enc(fstype), flags, enc(data)), f'mount {target}')


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
                if key.data is None:  # a launcher connects: its request is read once it has arrived (no timer)
                    conn, _ = listener.accept()
                    sel.register(conn, selectors.EVENT_READ, ('request', conn))
                elif key.data[0] == 'request':
                    sel.unregister(key.data[1])
                    start_kernel(cfg, listener, sel, key.data[1])
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


def start_kernel(cfg, listener, sel, conn):
    """Read a launcher's request, which has arrived on conn, check it, and fork its kernel (K0), watched through a pidfd."""
    fds = []
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 4)  # stdout, stderr, and the kernel's cgroup.procs files (0 to 2)
        req = json.loads(msg)
        covers = [Path(c) for c in cfg['cover']]
        uid = req.get('uid')
        uid_ok = uid is None if cfg.get('userns') else isinstance(uid, int) and uid >= policy.UID_BASE
        if not (2 <= len(fds) <= 4 and uid_ok
                and Path(req['cwd']).parent.parent in covers[:1] and Path(req['conn']).is_relative_to(covers[1])
                and all(isinstance(a, str) for a in req.get('extra', []))):
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
                os.write(fds[1], f'warm: kernel setup failed: {e!r}\n{traceback.format_exc()}'.encode())
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
    """Forked by the server (SIGTERM blocked): join the kernel's cgroups, if the launcher sent them, then new namespaces
    for what it forks next, K1, which it waits for; SIGTERM kills K1, and with it the namespace."""
    fds, procs = fds[:2], fds[2:]
    # the kernel's cgroups (course.isolation.cgroups), which the launcher opened: join them, before anything starts
    for fd in procs:
        os.write(fd, b'0')
        os.close(fd)
    flags = CLONE['mnt']  # a mount namespace of its own, besides the policy's
    for ns in policy.NAMESPACES:
        flags |= CLONE[ns]
    uid, gid = os.geteuid(), os.getegid()
    check(libc.unshare(flags | CLONE['user'] * bool(cfg.get('userns'))), 'unshare')
    if cfg.get('userns'):  # the user namespace comes first, and owns the others: map the one uid there is
        for name, text in (('setgroups', 'deny'), ('uid_map', f'{policy.USERNS_UID} {uid} 1'),
                           ('gid_map', f'{policy.USERNS_UID} {gid} 1')):
            with open(f'/proc/self/{name}', 'w') as f:
                f.write(text)
    child = os.fork()
    if child == 0:
        k1(cfg, req, fds)
    for fd in fds:
        os.close(fd)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGKILL))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    _, status = os.waitpid(child, 0)
    os._exit(policy.wait_status(status))


def k1(cfg, req, fds):
    """Pid 1 of the kernel's namespace: confine the file system, fork the kernel (K2), reap until it ends, then end
    (and with it, every process left in the namespace)."""
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), 'prctl')  # if K0 is killed, so is the namespace
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # K0 could not be killed before this (SIGTERM blocked)
    mount(None, '/', None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the server
    mount('proc', '/proc', 'proc', MS_NOSUID | MS_NODEV)  # this namespace's processes only
    name = policy.HOSTNAME.encode()
    check(libc.sethostname(name, len(name)), 'sethostname')
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
            os._exit(policy.wait_status(status))


def confine(cfg, req):
    """Cover /tmp, /dev/shm and the server's shared folders with new file systems, then show through them only the
    kernel's own folders (its sockets', read-write; its notebook's, through policy.FOLDER) and the data (read-only); the
    covers over shared folders are read-only."""
    keep = {req['cwd']: False, str(Path(req['conn']).parent): False}
    # Read-only, what the sandbox shows below /tmp or a shared folder (a venv or a course under /tmp, say): the data, and
    # Python (the kernel imports more of it as it runs).
    covered = (*(c.path for c in policy.COVERS), *cfg['cover'])
    for path in [cfg.get('data'), *{str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)}]:
        if path and any(Path(path).is_relative_to(c) for c in covered):
            keep[path] = True
    held = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in keep}
    for cover in policy.COVERS:
        mount('tmpfs', cover.path, 'tmpfs', MS_NOSUID | MS_NODEV, f'size={cover.size},mode={cover.mode:o}')
    covers = [p for p in cfg['cover'] if os.path.isdir(p)]  # those below /tmp are already gone
    # What is kept below the new /tmp hangs from a small file system of its own at /tmp/<first folder>, made read-only
    # once the binds are in, as course.isolation.sandbox's bwrap does: the folders leading to them are not the kernel's to write
    # (as a user, the kernel owns every folder made here, so their mode alone would not stop it).
    hooks = sorted({'/'.join(Path(p).parts[:3]) for p in keep if len(Path(p).parts) > 3 and Path(p).parts[1] == 'tmp'})
    for path in covers + hooks:
        os.makedirs(path, exist_ok=True)
        mount('tmpfs', path, 'tmpfs', MS_NOSUID | MS_NODEV, 'size=1m,mode=0755')
    for path, readonly in keep.items():
        if path == req['cwd']:
            cover_folder(path, held[path])
        else:
            bind(held[path], path, readonly)
        os.close(held[path])
    for path in covers + hooks:
        mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for folder in policy.WRITABLE:
        os.makedirs(folder, exist_ok=True)
        os.chmod(folder, 0o1777)


def bind(fd, path, readonly):
    """Bind what fd (O_PATH) opens at path, making a mount point for it if there is none, read-only if asked."""
    if os.path.isdir(f'/proc/self/fd/{fd}'):
        os.makedirs(path, exist_ok=True)
    elif not os.path.lexists(path):  # a file under a cover: a mount point for it (outside, it is there, read-only)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_WRONLY, 0o644))
    mount(f'/proc/self/fd/{fd}', path, None, MS_BIND)
    if readonly:
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def cover_folder(path, fd):
    """Cover the notebook's folder (fd, O_PATH) with policy.FOLDER at path: a capped tmpfs, the folder's entries
    read-only through it, and its policy.RECORDS read-write (as course.isolation.sandbox.folder_cover() does with bwrap)."""
    folder = f'/proc/self/fd/{fd}'
    entries = [(name, True) for name in policy.folder_entries(folder)]
    entries += [(name, False) for name in policy.record_entries(folder)]
    os.makedirs(path, exist_ok=True)
    mount('tmpfs', path, 'tmpfs', MS_NOSUID | MS_NODEV, f'size={policy.FOLDER.size},mode={policy.FOLDER.mode:o}')
    for name, readonly in entries:
        entry = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            bind(entry, os.path.join(path, name), readonly)
        finally:
            os.close(entry)


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
        for name, value in policy.LIMITS.items():
            resource.setrlimit(RLIMITS[name], (value, value))
        if req.get('uid') is not None:
            os.setgroups([])
            os.setresgid(req['uid'], req['uid'], req['uid'])
            os.setresuid(req['uid'], req['uid'], req['uid'])  # not root any more: every capability is gone
            check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 'prctl')  # its /proc/self is its own, as after an exec
        else:
            drop_capabilities()  # its uid is the one it had: its capabilities in its user namespace must go explicitly
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 'prctl')  # and no setuid program gives one back
        os.chdir(req['cwd'])
        os.environ.clear()
        os.environ.update(policy.kernel_env(req['env']), MPLBACKEND='module://matplotlib_inline.backend_inline')
        sys.path[:] = [p for p in sys.path if p != cfg['code']]  # the server's own code is not the student's to import
        for name in [m for m in sys.modules if m == 'course' or m.startswith('course.')]:
            del sys.modules[name]
        sys.argv = policy.kernel_argv(req['conn'], req.get('extra', ()))[2:]  # as `python -m ipykernel_launcher ...`
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


def drop_capabilities():
    """Empty the bounding, ambient, effective, permitted and inheritable capability sets of this process, for good."""
    with open('/proc/sys/kernel/cap_last_cap') as f:
        last = int(f.read())
    for cap in range(last + 1):
        check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), 'prctl')
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), 'prctl')
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two of {effective, permitted, inheritable}, all zero
    check(libc.capset(header, data), 'capset')


if __name__ == '__main__':
    serve(sys.argv[1])
