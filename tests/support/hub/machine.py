"""A machine whose PID 1 is systemd, for the hub tests that need one (the hub's unit, SystemdSpawner's limits per user,
the idle culler, a hub restart that leaves users' servers running), on a host whose PID 1 is not systemd (CI's
machine, a container).

It is this host's own root filesystem seen through an overlay whose writes go to memory: accounts, homes, units and
everything systemd's boot does (tmpfiles, sysusers, the journal) stay in it and are gone when it stops; nothing reaches
the host's disk. It has its own PID, mount, cgroup, UTS and IPC namespaces and shares the host's network (a browser on
the host reaches its hub on 127.0.0.1). /sys is read-only in it and its capabilities exclude loading kernel modules and
setting the clock. Its /proc is a plain one, with nothing mounted over /proc/sys: the course's sandbox (bubblewrap, in
an instructor's hub server) mounts a fresh /proc in a user namespace of its own, which the kernel refuses where a mount
covers part of /proc (as a container's read-only /proc/sys does); so the units that would write the host's kernel
settings at boot (systemd-sysctl, binfmt) are masked, and the tests write none. Its cgroups are children of the test's
own (the host's memory accounting holds). Its /tmp and /run are its own. With net=True it has a network of its own too,
loopback only: the documented ports (8000, 443) are then the machine's, never the host's, and Machine.program() runs a
host program (the browser) in that network. systemd boots one target, course-machine.target: the journal and D-Bus,
nothing the host's image would start (no timers, no getty, no PostgreSQL).

    with Machine() as m:
        m.run(['systemctl', 'start', 'unit'])     # a command in it (as root; user= runs as a user)
        m.path('/etc/passwd')                      # the host's path of a file in it

This is a test rig, not a container manager (systemd-nspawn would be one; it is not installed here, and installing it
upgrades systemd). What it is checked for: tests/hub/test_service.py's
test_no_test_account_is_the_hosts (the accounts the docs make are the machine's, none the host's).
"""

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

CONTROLLERS = ('cpu', 'cpuacct', 'cpuset', 'memory', 'devices', 'freezer', 'blkio', 'pids')

# The user and group ids of the accounts made in the machine (its /etc/login.defs, which useradd reads): above the
# host's UID_MAX and GID_MAX (Debian's 60000) and below the subordinate ids useradd hands out (100000 on), so that no
# account of the machine has the id of one of the host's, and a host cleanup that kills a test user's processes by its
# id can never reach a process of the machine. Machine() refuses a host whose range reaches it.
IDS = range(70000, 80000)

# Units of the host's image that must not start in the machine: its timers (apt's daily upgrade), its services.
MASKED = ('timers.target', 'getty.target', 'postgresql.service', 'systemd-timesyncd.service', 'e2scrub_reap.service',
          'systemd-pstore.service', 'systemd-networkd.service', 'systemd-resolved.service', 'ssh.service', 'cron.service',
          'apt-daily.service', 'apt-daily-upgrade.service',
          # what would write the host's kernel settings (/proc/sys is not read-only in the machine: the docstring)
          'systemd-sysctl.service', 'systemd-binfmt.service', 'proc-sys-fs-binfmt_misc.automount',
          'proc-sys-fs-binfmt_misc.mount')

TARGET = """[Unit]
Description=The hub tests' machine: the journal and D-Bus
Requires=systemd-journald.service dbus.socket dbus.service systemd-user-sessions.service
After=systemd-journald.service dbus.service systemd-user-sessions.service
AllowIsolate=yes
"""

# Run as PID 1 of the new namespaces: the overlay root in a tmpfs, a /dev of its own, read-only /sys and /proc/sys,
# the cgroup hierarchies as this cgroup namespace sees them; then pivot into it and exec systemd.
INNER = r"""
set -eu
B=$1
mount -t tmpfs -o mode=755 course-machine "$B"
mkdir "$B/upper" "$B/work" "$B/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$B/upper,workdir=$B/work" "$B/root"
R=$B/root
mount -t tmpfs -o mode=755,nosuid dev "$R/dev"
for d in null zero full random urandom tty; do touch "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
mkdir -p "$R/dev/pts" "$R/dev/shm" "$R/dev/mqueue"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$R/dev/shm"
mount -t proc proc "$R/proc"  # nothing mounted over any of it: see the module's docstring
mount -t sysfs -o ro sysfs "$R/sys"
mount -t tmpfs -o mode=755 cgroup "$R/sys/fs/cgroup"
for h in $CONTROLLERS; do
  if grep -qw "$h" /proc/cgroups; then mkdir "$R/sys/fs/cgroup/$h"; mount -t cgroup -o "$h" cgroup "$R/sys/fs/cgroup/$h"; fi
done
mkdir "$R/sys/fs/cgroup/systemd"
mount -t cgroup -o none,name=systemd cgroup "$R/sys/fs/cgroup/systemd"
mkdir "$R/sys/fs/cgroup/unified"
mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup/unified"
mount -t tmpfs -o mode=755,nosuid,nodev run "$R/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmp "$R/tmp"
mount -t tmpfs -o mode=1777,nosuid,nodev vartmp "$R/var/tmp"
if [ -n "$NET" ]; then ip link set lo up; fi
for share in $SHARED; do mkdir -p "$R$share"; mount --bind "$share" "$R$share"; done
S=$R/etc/systemd/system
rm -rf "$S"/*.wants
printf '%s' "$TARGET" > "$S/course-machine.target"
for u in $MASKED; do ln -sf /dev/null "$S/$u"; done
rm -f "$R/etc/machine-id"; : > "$R/etc/machine-id"
sed -i -e "s/^UID_MIN.*/UID_MIN $FIRST_ID/" -e "s/^UID_MAX.*/UID_MAX $LAST_ID/" \
  -e "s/^GID_MIN.*/GID_MIN $FIRST_ID/" -e "s/^GID_MAX.*/GID_MAX $LAST_ID/" "$R/etc/login.defs"
echo course-machine > "$R/etc/hostname"
mkdir "$R/.host"
cd "$R"
pivot_root . .host
umount -l /.host
rmdir /.host
exec env -i container=course-test PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  setpriv --bounding-set=-sys_module,-sys_time,-sys_rawio,-mac_admin,-mac_override \
  /lib/systemd/systemd --unit=course-machine.target
"""


def why_not():
    """Why no machine can boot here (a line), or None."""
    if os.geteuid() != 0:
        return 'not root'
    missing = [t for t in ('unshare', 'nsenter', 'setpriv', 'systemctl') if not shutil.which(t)]
    if missing or not Path('/lib/systemd/systemd').exists():
        return f'needs systemd and util-linux ({", ".join(missing) or "/lib/systemd/systemd"} missing)'
    if 'overlay' not in Path('/proc/filesystems').read_text():
        return 'the kernel has no overlay filesystem'
    return None


def kill(pid):
    """SIGKILL pid if it is a machine's systemd (never another process that took its number), and wait for it."""
    with contextlib.suppress(psutil.NoSuchProcess, TypeError):
        process = psutil.Process(pid)
        if '--unit=course-machine.target' in process.cmdline():
            process.kill()
            process.wait(30)


def remove(base, cgroups, extra=()):
    """A stopped machine's cgroups (deepest first), folder and files beside it."""
    deadline = time.monotonic() + 30
    for folder in cgroups:
        for sub in sorted((p for p in [folder, *folder.rglob('*')] if p.is_dir()), key=lambda p: -len(p.parts)):
            while True:  # busy while the kernel still ends its last processes
                try:
                    sub.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
    shutil.rmtree(base, ignore_errors=True)
    for path in [*(base.parent.glob(base.name + '.*')), *extra]:
        path.unlink(missing_ok=True)


def sweep():
    """Stop and remove the machines a killed test run left (their owner's pid, in their folder's name, is gone)."""
    for pidfile in Path('/var/tmp').glob('course-machine-*.pid'):
        owner = pidfile.name.split('-')[2]
        if owner.isdigit() and psutil.pid_exists(int(owner)):
            continue
        with contextlib.suppress(ValueError, OSError):
            kill(int(pidfile.read_text()))
        base = pidfile.with_suffix('')
        name = base.name.rsplit('-', 1)[0]
        cgroups = [Path('/sys/fs/cgroup', h, p.lstrip('/'), name) for h, p in own_cgroups().items()]
        remove(base, [c for c in cgroups if c.exists()])


def host_ids(path='/etc/login.defs'):
    """{'UID_MAX': n, 'GID_MAX': n} of the host's login.defs (useradd's defaults where it sets none)."""
    found = {'UID_MAX': 60000, 'GID_MAX': 60000}
    for line in Path(path).read_text().splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in found and words[1].isdigit():
            found[words[0]] = int(words[1])
    return found


def own_cgroups():
    """{hierarchy: this process's cgroup path in it} for the hierarchies mounted under /sys/fs/cgroup."""
    out = {}
    for line in Path('/proc/self/cgroup').read_text().splitlines():
        _, names, path = line.split(':', 2)
        for name in (names.split(',') if names else ['unified']):
            name = name.removeprefix('name=')
            if Path('/sys/fs/cgroup', name).is_dir():
                out[name] = path
    return out


class Machine:
    """A systemd machine (module docstring). shared: host folders bound into it at the same path, read-write."""

    def __init__(self, shared=(), net=False, timeout=180):
        highest = max(host_ids().values())
        assert highest < IDS.start, (f'this host makes accounts with ids up to {highest} (/etc/login.defs): machine.IDS '
                                     f'({IDS.start}-{IDS.stop - 1}) must start above them')
        sweep()
        self.name = f'course-machine-{os.getpid()}-{time.monotonic_ns() % 10**6}'
        self.base = Path(tempfile.mkdtemp(prefix=f'{self.name}-', dir='/var/tmp'))
        self.cgroups, self.wrappers = [], []
        for hierarchy, path in own_cgroups().items():
            folder = Path('/sys/fs/cgroup', hierarchy, path.lstrip('/'), self.name)
            folder.mkdir()
            self.cgroups.append(folder)
            if hierarchy == 'cpuset':  # a new cpuset starts empty: give it its parent's
                for f in ('cpuset.cpus', 'cpuset.mems'):
                    (folder / f).write_text((folder.parent / f).read_text())
        script = self.base.with_suffix('.sh')
        script.write_text(INNER)
        env = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'CONTROLLERS': ' '.join(CONTROLLERS), 'TARGET': TARGET,
               'FIRST_ID': str(IDS.start), 'LAST_ID': str(IDS.stop - 1),
               'MASKED': ' '.join(MASKED), 'SHARED': ' '.join(str(Path(s)) for s in shared), 'NET': 'yes' if net else ''}
        self.log = open(self.base.with_suffix('.log'), 'w')
        cgroups = ' '.join(str(c / 'cgroup.procs') for c in self.cgroups)
        self.launcher = subprocess.Popen(
            ['sh', '-c', f'for f in {cgroups}; do echo $$ > "$f"; done; exec unshare --pid --fork --mount --cgroup '
                         f'--uts --ipc {"--net " if net else ""}--propagation private bash {script} {self.base}'],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.pid = self._init_pid(timeout)
            self.base.with_suffix('.pid').write_text(str(self.pid))
            self._wait_running(timeout)
        except BaseException:
            self.stop()
            raise

    def _init_pid(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(psutil.NoSuchProcess):
                children = psutil.Process(self.launcher.pid).children()
                if children:
                    return children[0].pid
            assert self.launcher.poll() is None, f'the machine did not start:\n{self.log_text()}'
            assert time.monotonic() < deadline, f'the machine did not start in {timeout} s:\n{self.log_text()}'
            time.sleep(0.05)

    def _wait_running(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            done = self.run(['systemctl', 'is-system-running'], check=False, timeout=30)
            state = done.stdout.strip()
            if state in ('running', 'degraded'):
                return
            assert self.launcher.poll() is None, f'the machine stopped while booting:\n{self.log_text()}'
            assert time.monotonic() < deadline, f'the machine is {state!r} after {timeout} s:\n{self.log_text()}'
            time.sleep(0.2)

    def log_text(self):
        return self.base.with_suffix('.log').read_text(errors='replace')[-3000:]

    def run(self, argv, user=None, check=True, timeout=300, input=None, env=None):
        """argv in the machine (as root, or as user with runuser and a login-like environment); CompletedProcess."""
        argv = [str(a) for a in argv]
        if user:
            argv = ['runuser', '-u', user, '--', *argv]
        cmd = ['nsenter', '-t', str(self.pid), '-m', '-p', '-C', '-u', '-i', '-n', '--',
               'env', '-i', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'LANG=C.UTF-8',
               *(f'{k}={v}' for k, v in (env or {}).items()), *argv]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
        if check and done.returncode:
            raise AssertionError(f'{" ".join(argv)} exited {done.returncode} in the machine:\n{done.stdout[-3000:]}'
                                 f'\n{done.stderr[-3000:]}')
        return done

    def program(self, path):
        """A host executable that runs path (a host program) in the machine's network namespace only: a browser
        on the host that reaches the machine's 127.0.0.1 (with net=True, the host's loopback is not the machine's)."""
        wrapper = self.base.with_suffix(f'.{Path(path).name}')
        wrapper.write_text(f'#!/bin/sh\nexec nsenter -t {self.pid} -n -- {path} "$@"\n')
        wrapper.chmod(0o755)
        self.wrappers.append(wrapper)
        return wrapper

    def path(self, inside):
        """The host's path of a file in the machine (through its PID 1's root)."""
        return Path(f'/proc/{self.pid}/root') / str(inside).lstrip('/')

    def stop(self, timeout=60):
        """Power it off (systemd stops every unit), or kill its PID 1; then remove its cgroups and folder."""
        if self.launcher.poll() is None and getattr(self, 'pid', None):
            self.run(['systemctl', 'poweroff', '--no-block'], check=False, timeout=30)
            try:
                self.launcher.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        kill(getattr(self, 'pid', None))  # PID 1 of the namespace (its own session): the kernel ends all in it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.launcher.pid, 9)
        self.launcher.wait()
        self.log.close()
        remove(self.base, self.cgroups, self.wrappers)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
