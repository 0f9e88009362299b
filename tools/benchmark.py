"""Benchmark grading (not a test): seconds per submission for a class, and ratios measured in the same run.

  python tools/benchmark.py                  the demo class, graded by tools/grade.py (default --jobs)
  python tools/benchmark.py --size 60 --plain --serial   a class of 60 (the demo class repeated, a few slow ones),
                                             also plain serial nbgrader and tools/grade.py --jobs 1
"""

import argparse
import copy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import nbformat

from course import assignments, copy_course, nbgrader, nbgrader_env, notebooks, role
from grade import DEMO_MARK, demo_class, solved, write_class


def slow(nb):
    """nb with a cell that sleeps 5 s after its first solution cell."""
    nb = copy.deepcopy(nb)
    first = next(i for i, c in enumerate(nb.cells) if role(c) == 'solution')
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell('import time\ntime.sleep(5)'))
    return nb


def make_class(size):
    """The demo class; with size, repeated up to size students, a few of them slow (a cell that sleeps 5 s)."""
    cls = demo_class()
    if not size:
        return cls
    base, out = list(cls.items()), {}
    for i in range(size):
        student, work = base[i % len(base)]
        out[f'{student}_{i}'] = work
    for i in range(0, size, 20):  # one slow submission in every 20
        out[f'slow_{i}'] = {aid: {name: slow(solved(aid, name)) for name in notebooks(aid)} for aid in assignments()}
        del out[next(iter(k for k in out if not k.startswith('slow_')))]
    return out


def timed(cmd, cwd):
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env=nbgrader_env())
    return time.perf_counter() - start


def reset(course):
    for name in ('autograded', 'feedback', '.build/logs'):
        shutil.rmtree(course / name, ignore_errors=True)
    (course / 'gradebook.db').unlink(missing_ok=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--size', type=int, default=0, help='students in the class (default: the demo class as it is)')
    ap.add_argument('--plain', action='store_true', help='also time plain serial `nbgrader autograde` on the same class')
    ap.add_argument('--serial', action='store_true', help='also time tools/grade.py --jobs 1')
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        course = copy_course(tmp)
        cls = make_class(args.size)
        write_class(cls, course / 'submitted')
        n = len(cls)
        floor = statistics.median(timed([sys.executable, '-c', 'import torch, matplotlib.pyplot'], course) for _ in range(3))
        runs = {}
        if args.plain:
            reset(course)
            nbgrader('generate_assignment', *assignments(), '--force', '--CourseDirectory.release_directory=.build/release',
                     cwd=course)
            runs['plain nbgrader autograde (serial)'] = timed([sys.executable, '-m', 'nbgrader', 'autograde', *assignments(),
                                                               '--force'], course)
        for jobs in ((1, None) if args.serial else (None,)):
            reset(course)
            (course / 'submitted' / DEMO_MARK).unlink(missing_ok=True)
            cmd = [sys.executable, 'tools/grade.py', *(['--jobs', str(jobs)] if jobs else [])]
            runs[f'tools/grade.py --jobs {jobs or "default"}'] = timed(cmd, course)
    print(f'{n} submissions; floor (python -c "import torch, matplotlib.pyplot") = {floor:.2f} s, median of 3')
    print(f"{'command':<36} {'total s':>8} {'s/submission':>13} {'/ floor':>8} {'speed-up vs first':>18}")
    first = next(iter(runs.values()))
    for name, total in runs.items():
        print(f'{name:<36} {total:>8.1f} {total / n:>13.2f} {total / n / floor:>8.2f} {first / total:>17.2f}x')


if __name__ == '__main__':
    main()
