"""Benchmark grading (not a test): seconds per submission for a class, and ratios measured in the same run.

  python -m course.grader.benchmark                  the demo class, graded by python -m course.grader.grade (default --jobs)
  python -m course.grader.benchmark --size 60 --plain --serial   (make bench) a class of 60: the demo class repeated (perfect,
        blank, mistakes, alternatives), 3 slow ones (a cell sleeps 5 s); also timed: plain serial nbgrader, and
        course.grader.grade --jobs 1. Each command is compared with plain nbgrader doing the same work (autograde alone, or
        autograde and feedback), and its grades with plain nbgrader's.
"""

import argparse
import copy
import getpass
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import psutil
from nbgrader.api import Gradebook, MissingEntry

from course import runner
from course.authoring.demo import DEMO_MARK, demo_class, solved, write_class
from course.cells import role
from course.classroom import gradebook
from course.layout import AUTOGRADED, FEEDBACK, GRADEBOOK, LOGS, ROOT, copy_course, notebooks, steps, submitted_path


def slow(nb):
    """nb with a cell that sleeps 5 s after its first solution cell."""
    nb = copy.deepcopy(nb)
    first = next(i for i, c in enumerate(nb.cells) if role(c) == 'solution')
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell('import time\ntime.sleep(5)'))
    return nb


def make_class(size, selected=None):
    """The demo class of the steps selected (default: all); with size, repeated up to size students, a few of them slow
    (a cell that sleeps 5 s)."""
    cls = demo_class(selected)
    if not size:
        return cls
    base, out = list(cls.items()), {}
    for i in range(size):
        student, work = base[i % len(base)]
        out[f'{student}_{i}'] = work
    for i in range(0, size, 20):  # one slow submission in every 20
        out[f'slow_{i}'] = {aid: {name: slow(solved(aid, name)) for name in notebooks(aid)} for aid in selected or steps()}
        del out[next(iter(k for k in out if not k.startswith('slow_')))]
    return out


def stamp():
    """When, on what code, on what machine, as whom and with which Python the figures below were measured."""
    commit = subprocess.run(['git', 'describe', '--always', '--dirty'], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(':', 1)[1].strip() for line in Path('/proc/cpuinfo').read_text().splitlines()
                if line.startswith('model name')), platform.processor())
    load = ', '.join(f'{x:.1f}' for x in os.getloadavg())
    who = 'root' if os.geteuid() == 0 else f'user {getpass.getuser()} (not root: warm kernels in user namespaces)'
    return (f'measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit or "?"}, {platform.node()}: '
            f'{os.cpu_count()} x {cpu}, {psutil.virtual_memory().total / 2**30:.0f} GiB, load average before {load}; '
            f'as {who}, Python {platform.python_version()} ({sys.executable})')


def timed(cmd, cwd):
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=runner.env(cwd))
    if done.returncode:
        sys.exit(f'benchmark: {" ".join(map(str, cmd))} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}')
    return time.perf_counter() - start


def grades(course, cls):
    """{(assignment, student): {test cell: score}} from the course's gradebook (None for a submission it lacks)."""
    with Gradebook(f"sqlite:///{course / GRADEBOOK}") as gb:
        out = {}
        for student, work in cls.items():
            for aid in work:
                try:
                    sub = gb.find_submission(aid, student)
                except MissingEntry:
                    out[(aid, student)] = None
                    continue
                out[(aid, student)] = {g.name: g.score for nb in sub.notebooks for g in nb.grades if g.cell_type == 'code'}
        return out


def reset(course):
    for name in (AUTOGRADED, FEEDBACK, LOGS):
        shutil.rmtree(course / name, ignore_errors=True)
    (course / GRADEBOOK).unlink(missing_ok=True)


def main():
    ap = argparse.ArgumentParser(prog='python -m course.grader.benchmark', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--size', type=int, action='append',
                    help='students in the class (repeatable: one class per size; default: the demo class as it is)')
    ap.add_argument('--step', action='append', dest='steps', metavar='ID', choices=steps(),
                    help='only this step (repeatable; default: every step, each student submitting each)')
    ap.add_argument('--plain', action='store_true',
                    help='also time plain serial `nbgrader autograde`, then `nbgrader generate_feedback`, on the same class')
    ap.add_argument('--serial', action='store_true', help='also time course.grader.grade --jobs 1')
    ap.add_argument('--cold', action='store_true',
                    help='also time course.grader.grade --cold (a kernel started from scratch each)')
    args = ap.parse_args()
    # Each class's gradebook is a SQLite file of its own copy of the course (reset between runs), whatever the course's
    # setting (course.classroom.gradebook): a shared PostgreSQL database would mix the classes and their timings.
    os.environ[gradebook.ENV] = gradebook.SQLITE
    print(stamp())
    for size in args.size or [0]:
        bench(size, args)


def line(name, kind, total, n, floor, plain):
    """A command's row of the table: total seconds for n submissions, per submission, per floor, and (with plain, {kind:
    plain nbgrader's seconds}) the ratio to plain nbgrader doing the same kind of work."""
    return (f'{name:<40} {kind:<14} {total:>8.1f} {total / n:>13.2f} {total / n / floor:>8.2f}'
            + (f' {plain[kind] / total:>20.2f}x' if plain else ''))


def bench(size, args):
    """Time and compare the plan's commands on one class of size students (0: the demo class)."""
    selected = args.steps or steps()
    # (name, what it does: 'autograde' alone or 'with feedback', argv or None for a plain nbgrader run)
    plan = [('course.grader.grade --no-feedback --jobs 1', 'autograde', ['--no-feedback', '--jobs', '1'])] * args.serial
    plan += [('course.grader.grade --no-feedback', 'autograde', ['--no-feedback'])]
    plan += [('course.grader.grade --cold', 'with feedback', ['--cold'])] * args.cold
    plan += [('course.grader.grade (make grade)', 'with feedback', [])]
    with tempfile.TemporaryDirectory() as tmp:
        course = copy_course(tmp)
        cls = make_class(size, selected)
        write_class(cls, submitted_path(root=course))
        (submitted_path(root=course) / DEMO_MARK).unlink()
        n = sum(len(work) for work in cls.values())  # submissions
        floor = statistics.median(timed([sys.executable, '-c', 'import torch, matplotlib.pyplot'], course) for _ in range(3))
        runs, results, plain = {}, {}, {}
        if args.plain:
            reset(course)
            for aid in selected:
                runner.run('generate_assignment', aid, '--force', '--CourseDirectory.release_directory=.build/release',
                           cwd=course)
            plain['autograde'] = sum(timed([sys.executable, '-m', 'nbgrader', 'autograde', aid, '--force'], course)
                                     for aid in selected)
            results['plain nbgrader'] = grades(course, cls)
            plain['with feedback'] = plain['autograde'] + sum(
                timed([sys.executable, '-m', 'nbgrader', 'generate_feedback', aid, '--force'], course) for aid in selected)
            runs['plain serial nbgrader autograde'] = 'autograde', plain['autograde']
            runs['plain serial ... + generate_feedback'] = 'with feedback', plain['with feedback']
        for name, kind, flags in plan:
            reset(course)
            # the whole command as an instructor runs it (make grade: no --step), from its start to its last line: it
            # prepares the steps that have submissions (the class's), grades, exports, and writes the class report
            runs[name] = kind, timed([sys.executable, '-m', 'course.grader.grade', *flags], course)
            results[name] = grades(course, cls)
    print(f'\n{n} submissions ({len(cls)} students x {", ".join(selected)}), {os.cpu_count()} cores, '
          f'default jobs {os.cpu_count() + 2}; floor (python -c "import torch, matplotlib.pyplot") = {floor:.2f} s, median of 3')
    print(f"{'command':<40} {'does':<14} {'total s':>8} {'s/submission':>13} {'/ floor':>8}"
          + f" {'vs plain (same work)':>21}" * bool(plain))
    for name, (kind, total) in runs.items():
        print(line(name, kind, total, n, floor, plain))
    first = next(iter(results.values()))
    for name, got in list(results.items())[1:]:
        differ = [key for key in first if got[key] != first[key]]
        print(f'{name}: grades identical to {next(iter(results))}\'s for {len(first) - len(differ)}/{len(first)} submissions'
              + (f' (not: {", ".join(s for _, s in differ)})' if differ else ''))
    if args.serial:
        one, default = runs['course.grader.grade --no-feedback --jobs 1'][1], runs['course.grader.grade --no-feedback'][1]
        print(f'default jobs vs --jobs 1 (both --no-feedback): {one / default:.2f}x')
    if plain:  # plain nbgrader's autograde and generate_feedback, each per step, against the whole of make grade
        ratio = plain['with feedback'] / runs['course.grader.grade (make grade)'][1]
        print(f'make grade vs plain serial nbgrader, feedback included: {ratio:.2f}x '
              f'({"at least" if ratio >= 4 else "below"} the 4x floor; {ratio / 5:.0%} of the 5x aim)')


if __name__ == '__main__':
    main()
