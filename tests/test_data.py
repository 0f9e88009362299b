"""course.authoring.data (make data): Tiny Shakespeare is copied or downloaded, always sha256-checked; a bad file
never lands or is lost."""

import subprocess
import sys

import pytest

from course.layout import ROOT

SHARED = ROOT / 'input.txt'  # put in place by make data, from DATA= or the download


def fetch(*args):
    return subprocess.run([sys.executable, '-m', 'course.authoring.data', *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True)


def test_a_good_copy_is_copied_and_verified(tmp_path):
    done = fetch('--from', SHARED, '--dest', tmp_path / 'input.txt')
    assert done.returncode == 0 and 'copied from' in done.stdout, done.stderr
    assert (tmp_path / 'input.txt').read_bytes() == SHARED.read_bytes()
    again = fetch('--dest', tmp_path / 'input.txt')
    assert again.returncode == 0 and '(verified)' in again.stdout


def test_a_wrong_checksum_is_an_error_and_writes_nothing(tmp_path):
    bad = tmp_path / 'bad.txt'
    bad.write_text('To be, or not to be\n')
    done = fetch('--from', bad, '--dest', tmp_path / 'input.txt')
    assert done.returncode == 1 and 'wrong sha256' in done.stderr and 'nothing was written' in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ['bad.txt']


@pytest.mark.parametrize('case', ['missing source', 'bad existing file'])
def test_a_missing_or_bad_file_is_a_one_line_error_that_keeps_what_was_there(tmp_path, case):
    dest = tmp_path / 'input.txt'
    if case == 'bad existing file':
        dest.write_text('my own notes\n')
        done = fetch('--from', SHARED, '--dest', dest)
        assert dest.read_text() == 'my own notes\n'
    else:
        done = fetch('--from', tmp_path / 'nowhere.txt', '--dest', dest)
        assert not dest.exists()
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert str(dest if case == 'bad existing file' else tmp_path / 'nowhere.txt') in done.stderr
