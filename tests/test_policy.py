"""course.isolation.policy is the one statement of the isolation policy: the bubblewrap command line carries every item of it
(tests/test_sandbox.py checks, on both kernel kinds, what a kernel actually gets)."""

from pathlib import Path

from course.isolation import policy, sandbox


def test_bwrap_argv_applies_every_item_of_the_policy(tmp_path):
    cwd, conn = tmp_path / 'autograded' / 'alice' / 'hw', tmp_path / 'sandbox' / 'runtime' / 'kernel.json'
    cwd.mkdir(parents=True)
    for name in ('work.ipynb', policy.PROBE_RECORD):
        (cwd / name).touch()
    (cwd / 'link').symlink_to('/etc')
    argv = sandbox.bwrap_argv(cwd, conn, policy.kernel_argv(conn, ['--extra']))
    joined = ' '.join(argv)
    i = argv.index(str(cwd), argv.index('--tmpfs') + 1)  # the notebook's folder: policy.FOLDER, then its entries
    assert argv[i - 5:i] == ['--perms', f'{policy.FOLDER.mode:o}', '--size', str(policy.FOLDER.size), '--tmpfs'], argv[i - 5:i]
    work, record = str(cwd / 'work.ipynb'), str(cwd / policy.PROBE_RECORD)
    assert argv[i + 1:i + 7] == ['--ro-bind', work, work, '--bind', record, record], argv[i + 1:i + 7]  # not the link
    for ns in policy.NAMESPACES:
        assert f'--unshare-{ns}' in joined, ns
    assert argv[argv.index('--hostname') + 1] == policy.HOSTNAME
    for cover in policy.COVERS:
        i = argv.index(cover.path, argv.index('--tmpfs') - 1)
        assert argv[i - 1] == '--tmpfs' and argv[i - 2] == str(cover.size) and argv[i - 4] == f'{cover.mode:o}', argv[i - 4:i + 1]
    start = argv.index('prlimit') + 1
    assert argv[start:argv.index('--', start)] == [f'--{k}={v}' for k, v in policy.LIMITS.items()]
    missing = [k for k, v in policy.kernel_env({}).items() if f'--setenv {k} {v}' not in joined]
    assert not missing, f'kernel_env not applied: {missing}'
    assert argv[-len(policy.kernel_argv(conn, ['--extra'])):] == policy.kernel_argv(conn, ['--extra'])


def test_kernel_argv_passes_extra_arguments_once():
    argv = policy.kernel_argv(Path('/c.json'), ['--HistoryManager.hist_file=:memory:', '--x=1'])
    assert argv[1:5] == ['-m', 'ipykernel_launcher', '-f', '/c.json']
    assert argv.count('--HistoryManager.hist_file=:memory:') == 1 and argv[-1] == '--x=1'


def test_exit_status_is_reported_as_a_shell_does():
    assert policy.exit_status(3) == 3 and policy.exit_status(-9) == 137
