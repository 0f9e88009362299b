# ruff: noqa: F811  (the fixtures imported from hubserver are named as the tests' parameters)
"""The hub as a service for a class of 200, set up by docs/hub.md's commands in a machine of its own
(tests/support/hub/hubserver.py): what root runs and who may change it, the unit (journal, restart on failure), a restart that
leaves users' servers running, graders added and removed with no restart, the memory limit of a student's server, the
roster run twice, the install on a Node.js without npm and without upgrading Python, backups with their restore, and
last (it stops every idle server) the idle culler."""

import re

import pytest

from support.hub.hubserver import (  # noqa: F401  (fixtures)
    COURSE_ID,
    GRADER,
    INSTRUCTOR,
    ROSTER,
    STUDENTS,
    browser,
    fetched,
    hub,
    log_in,
    machine,
)

# What root runs or reads as configuration, and everything beside it that make hub installed.
ROOTS_FILES = ['/opt/transformer-hub', '/etc/transformer-hub', '/etc/systemd/system/transformer-hub.service',
               '/etc/systemd/system/transformer-hub-proxy.service', '/etc/profile.d/transformer-hub.sh',
               '/usr/local/sbin/transformer-hub', '/etc/nginx/sites-available/transformer-hub']


def formgrader_status(browser, hub, user):
    """The status of the formgrader's page for user, logged in anew (a fresh login reads their groups)."""
    context, page = log_in(browser, hub, user)
    try:
        return fetched(page, f'{hub.url}/services/{COURSE_ID}/formgrader/manage_assignments')[0]
    finally:
        context.close()


def server_pid(hub, user):
    return hub.main_pid(hub.server_unit(user))


def test_nothing_root_runs_is_writable_by_the_instructor(hub):
    found = hub.sh(f'find {" ".join(ROOTS_FILES)} -writable', user=INSTRUCTOR, check=False).stdout.split()
    parents = hub.sh('for p in / /opt /etc /etc/systemd /etc/systemd/system /etc/profile.d /usr /usr/local '
                     '/usr/local/sbin /etc/nginx /etc/nginx/sites-available; do [ -w "$p" ] && echo "$p"; done',
                     user=INSTRUCTOR, check=False).stdout.split()
    assert not found and not parents, f'{INSTRUCTOR} may change what root runs: {found + parents}'
    command = hub.m.path(f'/proc/{hub.main_pid()}/cmdline').read_bytes().split(b'\0')
    paths = [a.decode() for a in command if a.startswith(b'/')]
    assert paths and all(p.startswith(('/opt/transformer-hub/', '/etc/transformer-hub/')) for p in paths), paths
    secret = hub.sh('cat /etc/transformer-hub/proxy.env', user=INSTRUCTOR, check=False)
    assert secret.returncode != 0, 'the proxy token is readable by the instructor'


def test_the_hubs_log_is_in_the_journal(hub):
    assert 'JupyterHub is now running' in hub.journal(), hub.journal()[-2000:]


def test_the_unit_restarts_the_hub_after_it_is_killed(hub):
    before = hub.main_pid()
    hub.sh(f'kill -KILL {before}')
    after = hub.wait_ready(since_pid=before)
    restarts = int(hub.sh('systemctl show -p NRestarts --value transformer-hub').stdout)
    assert after != before and restarts >= 1, (before, after, restarts)


@pytest.fixture(scope='module')
def student_server(browser, hub):
    """A student logged in, their server running (its unit's main pid), their browser context still open."""
    context, page = log_in(browser, hub, STUDENTS[0])
    return {'context': context, 'page': page, 'pid': server_pid(hub, STUDENTS[0])}


def test_a_restart_of_the_hub_leaves_the_students_server_running(hub, student_server):
    before = hub.main_pid()
    hub.sh('systemctl restart transformer-hub')
    hub.wait_ready(since_pid=before)
    assert server_pid(hub, STUDENTS[0]) == student_server['pid'], 'the server was stopped by the restart'
    page = student_server['page']
    page.reload()
    page.locator('.jp-DirListing-content').wait_for()  # the same server answers through the hub's routes


def test_a_grader_added_by_the_roster_reaches_the_formgrader_with_no_restart(browser, hub, student_server):
    hub_pid = hub.main_pid()
    hub.m.path('/root/roster2.csv').write_text(ROSTER + 'ta2,grader,Tom Second\n')
    added = hub.sh('transformer-hub accounts /root/roster2.csv').stdout
    assert 'ta2: account created (grader)' in added, added
    assert formgrader_status(browser, hub, 'ta2') == 200
    hub.m.path('/root/roster3.csv').write_text(ROSTER + 'ta2,student,Tom Second\n')
    moved = hub.sh('transformer-hub accounts /root/roster3.csv').stdout
    assert 'ta2: added to transformer-students, removed from transformer-graders' in moved, moved
    assert formgrader_status(browser, hub, 'ta2') == 403
    assert hub.main_pid() == hub_pid, 'the hub restarted'
    assert server_pid(hub, STUDENTS[0]) == student_server['pid'], "a student's server stopped"


def test_a_kernel_past_its_memory_limit_is_killed_and_the_server_goes_on(hub, student_server):
    """A student's kernel allocates 3 GiB, past the server's 2G (COURSE_HUB_MEMORY): the kernel dies (JupyterLab says
    so and restarts it), the server and everyone else's go on."""
    page = student_server['page']
    page.locator('.lm-MenuBar-itemLabel', has_text=re.compile('^File$')).click()
    page.locator('.lm-Menu-itemLabel', has_text=re.compile('^New$')).click()
    page.locator('.lm-Menu-itemLabel', has_text=re.compile('^Notebook$')).last.click()
    select = page.locator('.jp-Dialog', has_text='Select Kernel')
    idle = page.get_by_text('Python 3 (ipykernel) | Idle')
    select.or_(idle).first.wait_for()
    if select.is_visible():
        select.get_by_role('button', name='Select').click()
    idle.wait_for()
    page.locator('.jp-Notebook .jp-Cell .cm-content').first.click()
    page.keyboard.type("hog = b'x' * (3 * 2**30)")
    page.keyboard.press('Shift+Enter')
    died = page.locator('.jp-Dialog', has_text=re.compile('appears to have died|Kernel Restarting'))
    died.wait_for()
    text = died.inner_text()
    assert server_pid(hub, STUDENTS[0]) == student_server['pid'] and hub.unit_active(hub.server_unit(STUDENTS[0]))
    assert hub.health(hub.url) is not None, 'the hub stopped answering'
    assert 'died' in text or 'Restarting' in text, text


def test_the_roster_run_again_changes_nothing(hub):
    shadow = hub.m.path('/etc/shadow').read_text()
    files = set(hub.m.path('/root').glob('transformer-hub-passwords-*.csv'))
    again = hub.sh('transformer-hub accounts /root/roster.csv').stdout
    assert 'created' not in again and 'added' not in again and 'initial passwords' not in again, again
    assert hub.m.path('/etc/shadow').read_text() == shadow, 'a password changed'
    assert set(hub.m.path('/root').glob('transformer-hub-passwords-*.csv')) == files


def test_the_roster_names_a_bad_line_and_changes_nothing(hub):
    hub.m.path('/root/bad.csv').write_text('username,role,name\nzoe,student,Z\n9lives,student,N\n')
    done = hub.sh('transformer-hub accounts /root/bad.csv', check=False)
    assert done.returncode != 0 and "bad.csv:3: '9lives' is not a Unix user name" in done.stderr, done.stderr
    assert 'zoe:' not in hub.m.path('/etc/passwd').read_text()


def test_make_hub_with_a_nodejs_that_has_no_npm_says_what_to_do(hub):
    hub.sh('mv /usr/bin/npm /usr/bin/npm.away')  # (the machine's overlay: the host's npm is untouched)
    try:
        done = hub.sh('cd /usr/local/src/transformer-hub && make hub', check=False)
    finally:
        hub.sh('mv /usr/bin/npm.away /usr/bin/npm')
    assert done.returncode != 0 and 'without npm: install npm from where that Node.js came from' in done.stderr, (
        done.stdout[-1000:] + done.stderr[-1000:])


def test_make_hub_installs_a_missing_venv_module_without_upgrading_python(hub):
    """python3.11's venv module missing: make hub asks apt for python3.11-venv at the installed python3.11's version,
    with --no-upgrade (an apt-get that records what it is asked stands in for Debian's: no network here)."""
    version = hub.sh("dpkg-query -W -f='${Version}' python3.11").stdout
    hub.sh('mv /usr/lib/python3.11/ensurepip /usr/lib/python3.11/ensurepip.away && '
           "printf '#!/bin/sh\\necho \"$@\" >> /root/apt-get.args\\n' > /usr/local/sbin/apt-get && "
           'chmod 0755 /usr/local/sbin/apt-get')
    try:
        hub.sh('cd /usr/local/src/transformer-hub && make hub', check=False)
        asked = hub.m.path('/root/apt-get.args').read_text()
    finally:
        hub.sh('rm -f /usr/local/sbin/apt-get && mv /usr/lib/python3.11/ensurepip.away /usr/lib/python3.11/ensurepip')
    assert f'install python3.11-venv={version}' in asked and '--no-upgrade' in asked, asked
    assert not re.search(r'\bpython3\.11(\s|$)', asked), asked


def test_a_backup_restores_the_gradebook_and_the_hubs_state(hub):
    env = f'export HOME=/home/{INSTRUCTOR} PATH=/opt/transformer-hub/bin:$PATH && cd ~/{COURSE_ID} && '
    hub.sh(env + 'nbgrader db student add zed --last-name Z --first-name Zed', user=INSTRUCTOR)
    made = hub.sh('transformer-hub backup --to /root/backups').stdout
    archive = re.search(r'backup: (\S+)', made).group(1)
    hub.sh(env + 'nbgrader db student remove zed --force && nbgrader db student add yan', user=INSTRUCTOR)
    hub.m.path('/var/lib/transformer-hub/jupyterhub_cookie_secret').write_text('changed\n')
    before = hub.main_pid()
    restored = hub.sh(f'transformer-hub restore {archive}').stdout
    hub.wait_ready(since_pid=before)
    students = hub.sh(env + 'nbgrader db student list', user=INSTRUCTOR)
    listed = students.stdout + students.stderr
    assert 'zed (' in listed and 'yan (' not in listed, listed
    assert hub.m.path('/var/lib/transformer-hub/jupyterhub_cookie_secret').read_text() != 'changed\n', restored
    assert 'the hub restarted' in restored and 'jupyterhub.sqlite' in restored, restored
    mode = hub.sh(f'stat -c %U:%a /home/{INSTRUCTOR}/{COURSE_ID}/gradebook.db').stdout.strip()
    assert mode.startswith(f'{INSTRUCTOR}:'), mode


def test_the_idle_culler_stops_an_idle_server(browser, hub, student_server):
    """Last: a 20-second idle timeout (hub.env, and a restart that leaves servers running); a student who logged in and
    left has their server stopped."""
    hub.sh("sed -i 's/^COURSE_HUB_CULL_IDLE=.*/COURSE_HUB_CULL_IDLE=20\\nCOURSE_HUB_CULL_EVERY=5/' "
           '/etc/transformer-hub/hub.env')
    before = hub.main_pid()
    hub.sh('systemctl restart transformer-hub')
    hub.wait_ready(since_pid=before)
    student_server['context'].close()
    context, _ = log_in(browser, hub, STUDENTS[1])
    context.close()  # and leaves
    unit = hub.server_unit(STUDENTS[1])
    hub.wait_for(f'{unit} stopped by the idle culler', lambda: not hub.unit_active(unit), timeout=180)
    assert re.search(rf'Culling server {STUDENTS[1]}\b', hub.journal()), hub.journal()[-2000:]


def test_no_test_account_is_the_hosts(hub):
    """Every account the docs made is the machine's: the host has none of them, and their user and group ids lie in
    machine.IDS, above any id the host gives its accounts, so that no host account shares one (a host cleanup that
    kills a test user's processes by id never reaches the machine's)."""
    import grp
    import pwd

    from support.hub import machine

    names = {line.split(',')[0] for line in ROSTER.splitlines()[1:]} | {INSTRUCTOR}
    host = {p.pw_name for p in pwd.getpwall()}
    assert not names & host, f'accounts of the tests on the host: {names & host}'
    assert all(f'\n{n}:' in '\n' + hub.m.path('/etc/passwd').read_text() for n in names), 'the machine has them'
    ids = {}
    for table in ('passwd', 'group'):
        for line in hub.m.path(f'/etc/{table}').read_text().splitlines():
            name, _, number = line.split(':')[:3]
            if name in names:
                ids[f'{table} {name}'] = int(number)
    outside = {k: i for k, i in ids.items() if i not in machine.IDS}
    assert len(ids) == 2 * len(names) and not outside, (
        f'ids outside machine.IDS ({machine.IDS.start}-{machine.IDS.stop - 1}): {outside}; found {ids}')
    shared = set(ids.values()) & ({p.pw_uid for p in pwd.getpwall()} | {g.gr_gid for g in grp.getgrall()})
    assert not shared, f'ids of the machine\'s accounts that a host account or group has too: {sorted(shared)}'
