"""The isolation policy of a grading kernel, as data, in one place. Two mechanisms apply it:
  - course.isolation.sandbox: a cold kernel, started from scratch in bubblewrap (bwrap_argv() turns this policy into bwrap and
    prlimit flags);
  - course.isolation.warm_server: a warm kernel, forked from a server that is itself in bubblewrap (k0/k1/k2 turn it into unshare,
    mount, setrlimit and sethostname calls).
Standard library only: course.isolation.warm_server imports it inside the sandbox.
"""

import os
import sys
from pathlib import Path
from typing import NamedTuple

# Grading as root, each kernel runs as a user of its own, UID_BASE + the launcher's pid (unique while it runs, far above
# real users): root ignores RLIMIT_NPROC, which counts the processes of a user, so sandboxes must not share one.
UID_BASE = 1 << 30
# Grading as a user, each warm kernel runs in a user namespace of its own as this uid, mapped to the user outside (the one
# uid a user may map); not 0, so that a program it runs gains no capability there.
USERNS_UID = 1000

# Per process. The real notebook, on 2 cores, peaks at 1.5 GiB of address space, 0.45 GiB of data, 330 MiB resident,
# 16 threads (each counts as a process) and 6 s of CPU; torch on 64 threads (a big machine) takes 1.8 GiB of data
# (thread stacks count) and 130 threads. Each limit leaves room for that.
LIMITS = {
    # Private writable memory (heap, arrays, stacks): a memory bomb gets MemoryError at 4 GiB. Not the address space,
    # which glibc's per-thread malloc arenas inflate in proportion to the number of cores.
    'data': 4 << 30,
    'cpu': 600,  # seconds of CPU: a backstop behind nbgrader's per-cell timeout (Execute.timeout)
    'nproc': 256,  # processes and threads of the kernel's user: a fork bomb gets EAGAIN
    'fsize': 256 << 20,  # bytes per file written
    'nofile': 1024,  # open files
    'core': 0,  # no core dumps in the student's folder after a segfault
}

# New namespaces: no network (the kernel talks to nbgrader over unix sockets), its own pids (whatever the student starts
# dies with the kernel), IPC, hostname and cgroup view.
NAMESPACES = ('net', 'pid', 'ipc', 'uts', 'cgroup')
HOSTNAME = 'sandbox'


class Cover(NamedTuple):
    """A new, empty file system in RAM over a shared folder, capped."""
    path: str
    size: int  # bytes
    mode: int


COVERS = (Cover('/tmp', 512 << 20, 0o1777), Cover('/dev/shm', 64 << 20, 0o1777))

# The notebook's folder (cwd) is covered too, by FOLDER: a file system in RAM, capped, through which the kernel sees what
# the folder held when it started, read-only (regular files and folders only, at most FOLDER_ENTRIES of them), and can
# write only RECORDS there: files the grader made empty for the kernel to fill (the probe's record of numbers, each
# capped by LIMITS['fsize']). Whatever else it writes stays in the cover and is gone with the kernel: nothing a
# submission's code writes is left in autograded/.
FOLDER = Cover('.', 128 << 20, 0o1777)  # path: cwd, whatever it is
FOLDER_ENTRIES = 1000
PROBE_RECORD = '_probe_out.npz'  # the out-of-process checks' record (course.grader.preprocessors)
RECORDS = (PROBE_RECORD,)

# Per kernel, all its processes together (a cgroup of its own, beneath the grader's, where the machine lets the grader
# make one: course.isolation.cgroups): memory (resident and in its RAM file systems, which count too) and processes and threads.
# Processes: below LIMITS['nproc'], which counts per user (a kernel's, as root; as a user, theirs, for all kernels).
# Memory: as much as one process's LIMITS['data'], which a process meets first unless it touches all it allocates.
TOTALS = {'memory': 4 << 30, 'pids': 192}


def folder_entries(folder):
    """The names in folder (a path, or /proc/self/fd/<n> of an open folder) that a kernel sees through FOLDER,
    read-only: its regular files and folders, never a link, fifo or device, and not RECORDS. ValueError past
    FOLDER_ENTRIES."""
    with os.scandir(folder) as it:
        names = sorted(e.name for e in it if e.name not in RECORDS
                       and (e.is_file(follow_symlinks=False) or e.is_dir(follow_symlinks=False)))
    if len(names) > FOLDER_ENTRIES:
        raise ValueError(f'the notebook folder holds {len(names)} files and folders, more than the {FOLDER_ENTRIES} a '
                         'kernel may see: grade a submission with fewer')
    return names


def record_entries(folder):
    """The RECORDS in folder, as regular files (the grader made them): the kernel may write those."""
    return [n for n in RECORDS if os.path.isfile(os.path.join(folder, n)) and not os.path.islink(os.path.join(folder, n))]
MPLCONFIGDIR = '/tmp/.config/matplotlib'  # matplotlib's cache, writable, in the private /tmp
WRITABLE = ('/tmp/.config', MPLCONFIGDIR)  # made 1777 inside the private /tmp

# What the kernel keeps from the grader's environment (nbgrader tells the notebook it is being graded); the rest is set
# by kernel_env().
KEEP_ENV = ('LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'MPLBACKEND', 'PYDEVD_DISABLE_FILE_VALIDATION', 'OMP_NUM_THREADS',
            'NBGRADER_EXECUTION', 'NBGRADER_VALIDATING')

# Always given to ipykernel: no history database in the student's folder.
KERNEL_ARGS = ('--HistoryManager.hist_file=:memory:',)


def kernel_env(environ, prefix=sys.prefix):
    """The kernel's whole environment: KEEP_ENV from environ, HOME and caches in /tmp, no secrets of the grader's.
    JPY_PARENT_PID=1: the kernel's parent is pid 1 of its namespace, so ipykernel neither polls it nor prints a banner."""
    env = {k: environ[k] for k in KEEP_ENV if k in environ}
    env.update(PATH=f'{Path(prefix) / "bin"}:/usr/bin:/bin', HOME='/tmp', TMPDIR='/tmp', XDG_CACHE_HOME='/tmp/.cache',
               MPLCONFIGDIR=MPLCONFIGDIR, PYTHONDONTWRITEBYTECODE='1', JPY_PARENT_PID='1',
               USER='student', LOGNAME='student')  # for getpass.getuser(): the kernel's uid has no /etc/passwd entry
    return env


def kernel_argv(connection_file, extra=(), python=sys.executable):
    """ipykernel's command line: the connection file, KERNEL_ARGS, then what jupyter_client passes on (nbgrader's
    Execute.extra_arguments). A warm kernel runs the same, as sys.argv, without the interpreter."""
    args = [*KERNEL_ARGS, *(a for a in extra if a not in KERNEL_ARGS)]
    return [python, '-m', 'ipykernel_launcher', '-f', str(connection_file), *args]


def exit_status(code):
    """A process's exit code as a shell reports it: the code, or 128 + the signal that killed it (subprocess and
    os.waitstatus_to_exitcode give -signal)."""
    return code if code >= 0 else 128 - code


def wait_status(status):
    """exit_status() of an os.wait() status."""
    return exit_status(os.waitstatus_to_exitcode(status))
