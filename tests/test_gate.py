"""course.gate: what a submission may be, checked before anything reads it. Each class of file, name and size a student
controls, on a folder of its own (the graded class runs the same cases end to end: tests/support/corpus.py's LINKED and NAMED)."""

import os
import subprocess
import sys

import pytest

from course import gate
from course.layout import ROOT


def tree(folder, files):
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


@pytest.fixture
def sub(tmp_path):
    """submitted/alice/stepA holding a notebook, a data file and a folder."""
    return tree(tmp_path / 'submitted' / 'alice' / 'stepA',
                {'stepA.ipynb': b'{}', 'notes.txt': b'mine', 'data/more.csv': b'1,2', '.ipynb_checkpoints/x.ipynb': b'{}',
                 'stepA (1).ipynb': b'{}'})


def check(sub):
    return gate.check(sub.parent.parent, 'alice', 'stepA')


def test_regular_files_and_folders_with_plain_names_pass(sub):
    assert check(sub) is None


@pytest.mark.parametrize('where', ['notes.txt', 'data/more.csv', '.ipynb_checkpoints/x.ipynb', 'stepA.ipynb'])
def test_a_link_anywhere_is_refused_by_its_name_whatever_it_points_at(sub, where):
    target = sub / where
    target.unlink()
    target.symlink_to(ROOT / 'source')  # a folder, the instructor's
    assert check(sub) == ('refused', f'symbolic link: {where}')
    target.unlink()
    target.symlink_to(sub / 'nothing-there')  # dangling
    assert check(sub) == ('refused', f'symbolic link: {where}')


def test_the_step_or_the_student_folder_being_a_link_is_refused(sub, tmp_path):
    other = tree(tmp_path / 'elsewhere' / 'stepA', {'stepA.ipynb': b'{}'})
    (sub.parent.parent / 'bob').mkdir()
    (sub.parent.parent / 'bob' / 'stepA').symlink_to(other)
    assert gate.check(sub.parent.parent, 'bob', 'stepA') == ('refused', 'symbolic link: bob/stepA')
    (sub.parent.parent / 'carol').symlink_to(other.parent)
    assert gate.check(sub.parent.parent, 'carol', 'stepA') == ('refused', 'symbolic link: carol')


def test_fifos_hard_links_and_folders_named_like_notebooks_are_refused(sub, tmp_path):
    os.mkfifo(sub / 'pipe')  # read, it would block the grader for ever
    assert check(sub) == ('refused', 'fifo: pipe')
    (sub / 'pipe').unlink()
    outside = tmp_path / 'instructor-secret.txt'
    outside.write_text('secret')
    os.link(outside, sub / 'copy.txt')  # the same file as one outside: not the student's own copy
    assert check(sub) == ('refused', 'hard link: copy.txt')
    (sub / 'copy.txt').unlink()
    (sub / 'other.ipynb').mkdir()
    assert check(sub) == ('refused', 'a folder named like a notebook: other.ipynb')


@pytest.mark.parametrize('name', ['*.ipynb', 'a[1].txt', 'x?.txt', 'new\nline.txt', '\x1b]0;pwned\x07.txt', '-rf',
                                  'r\u202eevil.txt', 'caf\u00e9.txt', 'nbgrader_config.py', 'gradebook.db'])
def test_a_name_that_is_a_pattern_prints_as_something_else_or_is_reserved_is_refused_and_shown_safely(sub, name):
    (sub / name).write_bytes(b'x')
    verdict = check(sub)
    assert verdict == ('refused', f'file name: {gate.printable(name)}'), verdict
    assert verdict.detail.isprintable(), verdict


@pytest.mark.parametrize('student', ['honest*', '*', 'a[b', 'x\ny', '\x1b[2J', '-rf', '', '.hidden', 'a' * 65, 'b\u202ea'])
def test_a_student_id_that_is_not_a_plain_name_is_refused_and_printed_safely(student):
    verdict = gate.check_id(student)
    assert verdict and verdict.status == 'refused' and verdict.detail.isprintable(), verdict


@pytest.mark.parametrize('student', ['alice', 'honest_1', 'a.b-c', 'A9'])
def test_a_plain_student_id_passes(student):
    assert gate.check_id(student) is None


def test_printable_keeps_text_and_makes_every_control_character_visible():
    assert gate.printable('Zoë (1).ipynb') == 'Zoë (1).ipynb'
    assert gate.printable('a\nb\x1b[31m\u202e\u200b') == 'a\\nb\\x1b[31m\\u202e\\u200b'


def test_sizes_are_those_of_what_is_read_and_a_link_to_a_huge_file_costs_nothing(sub, tmp_path):
    """A sparse 768 MiB file: as the submission's notebook, over budget by its fstat size, never read; as a link, refused
    as a link. A process checking both holds no more memory than one checking a small submission."""
    huge = tmp_path / 'huge.bin'
    with open(huge, 'wb') as f:
        f.truncate(768 << 20)
    (sub / 'stepA.ipynb').unlink()
    (sub / 'stepA.ipynb').symlink_to(huge)
    assert check(sub) == ('refused', 'symbolic link: stepA.ipynb')
    (sub / 'stepA.ipynb').unlink()
    os.link(huge, sub / 'stepA.ipynb')
    os.unlink(huge)  # the only name left: a regular file of 768 MiB (sparse)
    assert check(sub) == ('over budget', f'stepA.ipynb is {768 << 20:,} bytes, over the {gate.MAX_FILE:,} the grader reads')
    with pytest.raises(gate.Refused):
        gate.read_file(sub / 'stepA.ipynb')
    code = ('import resource, sys; from course import gate; from pathlib import Path; p = Path(sys.argv[1]); '
            'v = gate.check(p.parent.parent, p.parent.name, p.name); '
            'print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)')
    small = tree(tmp_path / 'submitted' / 'bob' / 'stepA', {'stepA.ipynb': b'{}'})
    peak = [int(subprocess.run([sys.executable, '-c', code, str(p)], capture_output=True, text=True, cwd=ROOT,
                               check=True).stdout) for p in (sub, small)]
    assert peak[0] - peak[1] < 8 << 10, f'KiB: {peak}'  # within 8 MiB of checking a two-byte notebook


def test_too_many_files_too_deep_or_too_much_in_all_is_over_budget_or_refused(sub):
    assert gate.check(sub.parent.parent, 'alice', 'stepA', max_entries=3) == (
        'over budget', 'more than 3 files and folders')
    assert gate.check(sub.parent.parent, 'alice', 'stepA', max_total=5).status == 'over budget'
    tree(sub, {'a/b/c/d.txt': b'x'})
    assert gate.check(sub.parent.parent, 'alice', 'stepA', max_depth=2) == ('refused', 'folders nested over 2 deep: a/b/c')


def test_copy_takes_regular_files_only_never_through_a_link_and_leaves_the_verdict_for_check(sub, tmp_path):
    dest = tmp_path / 'collected' / 'alice' / 'stepA'
    copied = gate.copy(sub, dest, ignore=['.ipynb_checkpoints'])
    assert copied.verdict is None and copied.latest > 0
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob('*')) == [
        'data', 'data/more.csv', 'notes.txt', 'stepA (1).ipynb', 'stepA.ipynb']
    assert (dest / 'notes.txt').read_bytes() == b'mine'
    (sub / 'notes.txt').unlink()
    (sub / 'notes.txt').symlink_to(ROOT / 'nbgrader_config.py')
    again = tmp_path / 'again' / 'alice' / 'stepA'
    copied = gate.copy(sub, again)
    assert copied.verdict == ('refused', 'symbolic link: notes.txt')
    assert sorted(p.name for p in again.iterdir()) == [gate.MARK]  # nothing of the link's target
    assert gate.check(again.parent.parent, 'alice', 'stepA') == ('refused', 'symbolic link: notes.txt')


def test_a_file_swapped_for_a_link_while_walked_is_refused_not_followed(sub, monkeypatch):
    """The race on the hub's inbound: the student replaces a file checked as regular by a link before it is opened.
    Simulated by a walk that sees the link as the regular file it was (lstat answered before the swap): the open, with
    O_NOFOLLOW, refuses it."""
    (sub / 'notes.txt').unlink()
    (sub / 'notes.txt').symlink_to(ROOT / 'nbgrader_config.py')
    before = os.stat(sub / 'data' / 'more.csv')
    real = os.stat

    def stale(name, *a, **k):
        return before if name == 'notes.txt' else real(name, *a, **k)

    monkeypatch.setattr(gate.os, 'stat', stale)
    assert check(sub) == ('refused', 'symbolic link: notes.txt')


def test_plain_nbgrader_autograde_is_held_to_the_gate_too(tmp_path):
    """`nbgrader autograde` run by hand (not make grade): course.grader.preprocessors.GateSubmission, first in its first
    pass, refuses a submission holding a link, before any kernel; nbgrader removes what it had copied."""
    import shutil

    from course import runner
    from course.layout import copy_course, notebooks, steps

    course = copy_course(tmp_path / 'course')
    step = steps()[0]
    name = notebooks(step)[0]
    folder = course / 'submitted' / 'alice' / step
    folder.mkdir(parents=True)
    shutil.copy(course / 'release' / step / name, folder / name)
    (folder / 'notes.txt').symlink_to(course / 'source' / step / 'instructor' / 'checks.py')
    runner.run('generate_assignment', step, '--force', '--CourseDirectory.release_directory=.build/release', cwd=course)
    done = runner.run('autograde', step, '--force', check=False, cwd=course)
    assert done.returncode and 'symbolic link: notes.txt' in done.stdout + done.stderr, done.stdout + done.stderr
    assert not (course / 'autograded' / 'alice' / step).exists()


def test_the_hubs_collect_keeps_a_forged_hand_in_time_honest(tmp_path):
    """OwnerCheckedCollect.do_copy (the hub's collect): a timestamp.txt that claims a time long before its files were
    last changed (their ctime, which no account can set back) is replaced by that ctime; an honest one is kept."""
    import datetime

    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import parse_utc

    from course.classroom.exchange_collect import OwnerCheckedCollect

    collect = OwnerCheckedCollect(coursedir=CourseDirectory(root=str(tmp_path)))
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    for name, claimed in (('forged', '2020-01-01 00:00:00.000000 UTC'), ('honest', f'{now:%Y-%m-%d %H:%M:%S.%f} UTC')):
        src = tree(tmp_path / 'inbound' / name, {'nb.ipynb': b'{}', 'timestamp.txt': claimed.encode()})
        collect.do_copy(src, tmp_path / 'submitted' / name)
        kept = parse_utc((tmp_path / 'submitted' / name / 'timestamp.txt').read_text())
        assert abs((kept - now).total_seconds()) < 60, (name, kept)
        assert (name == 'honest') == (kept == parse_utc(claimed)), (name, kept)
