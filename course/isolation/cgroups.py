"""A cgroup per grading kernel, for policy.TOTALS (the memory and the processes of all its processes together), made
beneath the cgroup the grader runs in, never elsewhere, and removed once the kernel is gone.

The launcher, outside the sandbox, makes it (Cgroup.make()); the kernel's first process joins it before it starts
anything: a cold kernel's bwrap as it is spawned, a warm kernel's K0 by writing to the cgroup.procs files the launcher
opened and handed to the kernel server (the kernel checks the opener's rights, not K0's). Needs a cgroup the grader may
write below: as root, cgroup v1's memory and pids hierarchies, or cgroup v2 with both controllers enabled below the
grader's own cgroup; elsewhere (a plain user, without a delegated cgroup) make() returns None and the totals are not
capped (docs/security.md).
"""

import contextlib
import os
import sys
import time
from pathlib import Path

import psutil

from course.isolation import policy

CONTROLLERS = ('memory', 'pids')
PREFIX = 'course-kernel-'


def mounts():
    """{controller: mount point} of the cgroup hierarchies, v1 by controller name, v2 as ''."""
    found = {}
    with open('/proc/self/mountinfo') as f:
        for line in f:
            left, _, right = line.partition(' - ')
            fstype, _, options = right.split()[:3]
            point = left.split()[4]
            if fstype == 'cgroup2':
                found.setdefault('', point)
            elif fstype == 'cgroup':
                for option in options.split(','):
                    if option in CONTROLLERS:
                        found.setdefault(option, point)
    return found


def own():
    """{controller: this process's cgroup path} from /proc/self/cgroup (v2's as '')."""
    paths = {}
    with open('/proc/self/cgroup') as f:
        for line in f:
            _, names, path = line.rstrip('\n').split(':', 2)
            for name in names.split(',') if names else ['']:
                paths[name] = path
    return paths


def places():
    """[(folder of the grader's cgroup, {file: value})] for a new child cgroup, one per hierarchy: v1's memory and pids
    if mounted, else v2 if it enables both below the grader's cgroup; [] if neither."""
    where, paths = mounts(), own()
    limits = {'memory': {'memory.limit_in_bytes': policy.TOTALS['memory']}, 'pids': {'pids.max': policy.TOTALS['pids']}}
    if all(c in where and c in paths for c in CONTROLLERS):
        return [(Path(where[c]) / paths[c].lstrip('/'), limits[c]) for c in CONTROLLERS]
    if '' in where and '' in paths:
        parent = Path(where['']) / paths[''].lstrip('/')
        with contextlib.suppress(OSError):
            if set(CONTROLLERS) <= set((parent / 'cgroup.subtree_control').read_text().split()):
                return [(parent, {'memory.max': policy.TOTALS['memory'], 'memory.swap.max': 0,
                                  'pids.max': policy.TOTALS['pids']})]
    return []


def sweep(found=None):
    """Remove the kernels' cgroups whose launcher is gone: it was killed before it could (jupyter_client SIGKILLs a
    launcher whose kernel takes more than seconds to end, after a fork bomb, say). Each is empty by then: the kernel's
    processes died with its namespace. Every make() sweeps, and so does course.grader.workers once a batch is graded. found:
    places(), if the caller has it already."""
    for parent, _ in places() if found is None else found:
        for stale in parent.glob(f'{PREFIX}*'):
            key = stale.name[len(PREFIX):]
            if key.isdigit() and not psutil.pid_exists(int(key)):
                with contextlib.suppress(OSError):
                    stale.rmdir()


class Cgroup:
    """The cgroups (one per hierarchy) of one kernel, named PREFIX + a unique key (the launcher's pid)."""

    def __init__(self, folders):
        self.folders = folders

    @classmethod
    def make(cls, key):
        """Make the kernel's cgroups with policy.TOTALS set, or return None if this grader may not (nothing is left)."""
        made = []
        try:
            found = places()  # /proc read once per kernel, for the sweep and the new cgroups
            sweep(found)
            for parent, values in found:
                folder = parent / f'{PREFIX}{key}'
                with contextlib.suppress(OSError):
                    folder.rmdir()
                folder.mkdir()
                made.append(folder)
                for name, value in values.items():
                    if (folder / name).exists():  # memory.swap.max: only with swap accounting
                        (folder / name).write_text(str(value))
        except OSError:
            cls(made).remove()
            return None
        return cls(made) if made else None

    def open_procs(self):
        """Open cgroup.procs of each cgroup for writing: a process that writes '0' there joins."""
        return [os.open(folder / 'cgroup.procs', os.O_WRONLY | os.O_CLOEXEC) for folder in self.folders]

    def join(self):
        """Move the calling process into the cgroups (what it starts next starts there)."""
        for fd in self.open_procs():
            try:
                os.write(fd, b'0')
            finally:
                os.close(fd)

    def remove(self, cap=60):
        """Remove the cgroups, once the kernel is gone: a cgroup is busy while processes of the kernel are still in it,
        ending (after a fork bomb, hundreds, slowly on a loaded machine). Waits for each of them to end (psutil, through
        a pidfd), then removes it; gives up only after cap seconds, leaving it for the next sweep(), and says so on
        stderr (the kernel's log)."""
        deadline = time.monotonic() + cap
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        print(f'cgroups: {folder} still busy after {cap} s: left for the next sweep', file=sys.stderr)
                        break
                    if not wait_empty([folder], left):
                        continue
                    time.sleep(0.01)  # empty, not yet released by the kernel: once more, shortly


def processes(folder):
    """The pids in a cgroup (cgroup.procs), [] if it is gone."""
    try:
        return [int(pid) for pid in (folder / 'cgroup.procs').read_text().split()]
    except OSError:
        return []


def wait_empty(folders, cap):
    """Wait until no process is left in the cgroups at folders, waiting for each one listed to end (psutil: a pidfd, not
    a timer), for at most cap seconds; whether they had emptied by then. Busy cgroups come back as not yet empty."""
    deadline = time.monotonic() + cap
    while pids := [pid for folder in folders for pid in processes(folder)]:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        procs = []
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                procs.append(psutil.Process(pid))
        psutil.wait_procs(procs, timeout=left)
    return True
