"""Warm grading kernels, outside the sandbox: the kernel server's lifecycle (server()), the nbgrader Config that selects
warm kernels (kernel_config()), and the kernel launcher (launch(), the kernelspec's argv: `python -m course.isolation.warm`).

The server (course.isolation.warm_server) runs in one bubblewrap sandbox per grading run and forks each kernel, past its imports,
into namespaces, folders and a user of its own (as root, a uid of its own; as a user, a user namespace of its own,
docs/security.md says what differs). The launcher, which jupyter_client starts and stops as it would a
kernel, asks the server for a kernel over a unix socket, passes it its stdout, stderr and extra arguments, and exits
with the kernel's status once the kernel is gone; if the launcher goes away, the server stops the kernel.

  course.grader.workers starts a server with `with server(root) as s:` and gives each nbgrader worker kernel_config(s).
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from course.isolation import cgroups, policy, sandbox
from course.layout import autograded_path

NAME = 'course-warm'  # the kernelspec name
SOCKET_ENV = 'COURSE_WARM_SOCKET'  # the kernelspec sets it for the launcher: the server's socket
# Kept by the server besides setuid's, to build each kernel's namespaces and reach its folder; no kernel keeps any. As a
# user, they are capabilities in the server's user namespace only, over nothing the user could not touch anyway.
CAPS = ('CAP_SYS_ADMIN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH')
CODE = '/tmp/warm-code'  # in the server's sandbox: the package files it runs (SERVER_FILES), copied there
SERVER_FILES = ('__init__.py', 'isolation/__init__.py', 'isolation/policy.py', 'isolation/warm_server.py')


def available():
    """True if warm kernels can run here: the sandbox, and as a user, user namespaces inside it (a kernel of the server
    gets one of its own)."""
    if not sandbox.available():
        return False
    if os.geteuid() == 0:
        return True
    argv = [*sandbox.namespaces(nest=True), '--ro-bind', '/', '/', '--proc', '/proc', 'unshare', '--user', '--map-root-user',
            'true']
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


def launch(connection_file, *extra):
    """Kernel launcher (the kernelspec's argv), with cwd the notebook's folder: prepare the folders as
    course.isolation.sandbox does, ask the server for a kernel (passing on jupyter_client's extra arguments), wait until
    it is gone (asking the server to stop it on SIGTERM), remove its cgroup (course.isolation.cgroups; the launcher
    makes it, the kernel joins it), sanitize cwd, then exit with the kernel's status."""
    cwd, conn, uid = sandbox.prepare(connection_file)
    server = os.environ.get(SOCKET_ENV, '')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(server)
    except OSError as e:
        sys.exit(f'warm kernel: no kernel server at {server!r} ({e.strerror}): `python -m course.grader.grade` starts one; '
                 'or grade with --cold')
    req = {'cwd': str(cwd), 'conn': str(conn), 'uid': uid, 'extra': list(extra),
           'env': {k: os.environ[k] for k in policy.KEEP_ENV if k in os.environ}}
    cgroup = cgroups.Cgroup.make(os.getpid())  # policy.TOTALS, where this grader may make a cgroup (else None)
    procs = cgroup.open_procs() if cgroup else []  # the kernel's K0 joins by writing to them
    socket.send_fds(sock, [json.dumps(req).encode()], [sys.stdout.fileno(), sys.stderr.fileno(), *procs])
    for fd in procs:
        os.close(fd)

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
    if cgroup:
        cgroup.remove()
    sandbox.sanitize(cwd)
    sys.exit(policy.exit_status(int(reply) if reply.strip() else 1))


@contextlib.contextmanager
def server(root):
    """Start a kernel server for grading the course at root (its kernels' folders are below root/autograded/); yield the
    path of its socket, for kernel_config(); stop it, and every kernel still running, on exit."""
    batch = Path(tempfile.mkdtemp(prefix=f'{NAME}-'))  # short: a unix socket path has at most 107 bytes
    autograded = autograded_path(root=Path(root).resolve())
    autograded.mkdir(exist_ok=True)
    data = sandbox.find_data(autograded / 'student' / 'assignment')
    sock = batch / 'server.sock'
    cfg = {'socket': str(sock), 'cover': [str(autograded), str(batch)], 'data': str(data) if data else None, 'code': CODE,
           'userns': os.geteuid() != 0}  # as a user: a user namespace per kernel instead of a uid
    files = sandbox.mpl_cache()
    here = Path(__file__).resolve().parent.parent  # course/
    code = {f'{CODE}/course/{name}': os.open(here / name, os.O_RDONLY) for name in SERVER_FILES}
    serve = f'import sys; sys.path.insert(0, {CODE!r}); from course.isolation.warm_server import serve; serve(sys.argv[1])'
    argv = sandbox.bwrap_argv(autograded, sock, [sys.executable, '-P', '-c', serve, json.dumps(cfg)],
                              files={**files, **code}, caps=CAPS, limits=False, nest=True, cover_cwd=False)
    # A session of its own: Ctrl-C stops the grading, which then stops the server (and bwrap --die-with-parent, if it dies).
    proc = subprocess.Popen(argv, pass_fds=[*files.values(), *code.values()], stdout=subprocess.PIPE, start_new_session=True)
    for fd in [*files.values(), *code.values()]:
        os.close(fd)
    try:
        if proc.stdout.readline() != b'ready\n':
            raise RuntimeError(f'warm kernels: the kernel server did not start (bwrap exit status {proc.poll()}); '
                               'grade with --cold')
        yield str(sock)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(batch, ignore_errors=True)


def kernel_config(sock):
    """(Config, env) that make nbgrader run every notebook in a warm kernel from the server at sock: the sandbox's
    (sandbox.kernel_config()), in a folder of its own next to the server's socket, with this module as the kernelspec's
    launcher, told where the server is."""
    return sandbox.kernel_config(tempfile.mkdtemp(prefix='w-', dir=Path(sock).parent), NAME, __name__, {SOCKET_ENV: sock})


if __name__ == '__main__':
    launch(*sys.argv[1:])
