"""Autograde every submission in submitted/ with nbgrader, write feedback/, results/ and grades.csv, print the grade table,
and write the class report (reports/index.html, course.classreport).

  python -m course.grade                       grade the class in submitted/<student>/<step>/   (make grade)
  python -m course.grade --demo                first put the demo class (course.demo) in submitted/   (make demo)
  python -m course.grade --demo --kill-matrix  also print each step's kill matrix   (make mutants)
  python -m course.grade --step step4 ...      only these steps

Each submission is graded by nbgrader autograde in a long-lived worker, --jobs at a time, its notebook run in a sandboxed
kernel: warm by default as root (course.warm), --cold for one started from scratch (course.sandbox).
"""

import argparse
import os
import sys
from types import SimpleNamespace

from traitlets.config import Config

from course import classreport, demo, grading, runner, sandbox
from course.killmatrix import kill_matrix, missing
from course.layout import ROOT, autograded_points, steps
from course.report import step_block, total_block


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.grade', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--demo', action='store_true', help='grade a demo class generated from source/ instead of submitted/')
    ap.add_argument('--kill-matrix', action='store_true', help="print each step's kill matrix (with --demo)")
    ap.add_argument('--sample', action='store_true',
                    help="with --demo: each step's bank sampled, a mistake per graded function and one alternative "
                         '(course.demo.sampled; what make test grades)')
    ap.add_argument('--jobs', type=int, default=os.cpu_count() + 2,
                    help='submissions graded at once (default: the cores + 2, so the cores work while a job waits on its kernel)')
    ap.add_argument('--timeout', type=int, default=180, help='seconds one submission may take in all (default 180)')
    ap.add_argument('--cell-timeout', type=int, help="seconds one cell may take (default: nbgrader_config.py's Execute.timeout)")
    ap.add_argument('--cold', action='store_true', help='start each kernel from scratch, in a sandbox of its own (slower)')
    ap.add_argument('--no-feedback', action='store_true',
                    help='skip generate_feedback (a re-grade; after manual grading: nbgrader generate_feedback --force)')
    ap.add_argument('--no-sandbox', action='store_true',
                    help='run student code unsandboxed (trusted code only); without it, grading a real class where no '
                         'sandbox works stops before any student code runs')
    ap.add_argument('--step', action='append', dest='steps', metavar='ID', choices=steps(),
                    help='grade only this step of source/ (repeatable; default: every one)')
    args = ap.parse_args(argv)
    selected = args.steps or steps()
    # Fail closed: a real class is graded in the sandbox or not at all, unless --no-sandbox says otherwise. Checked before
    # anything starts (no worker, no kernel, no results, the gradebook untouched). The demo class is ours (course.demo
    # writes it only into an empty submitted/ or over an earlier demo class), so --demo grades it without, and says so.
    kind = grading.kernel_kind(args.no_sandbox, args.cold)
    if kind == 'unsandboxed' and args.no_sandbox:
        print('warning: --no-sandbox: grading WITHOUT a sandbox: student code can read and write the whole course',
              file=sys.stderr)
    elif kind == 'unsandboxed' and args.demo:
        print(sandbox.DEMO_UNSANDBOXED, file=sys.stderr)
    elif kind == 'unsandboxed':
        sys.exit(sandbox.UNAVAILABLE)
    runner.worker_context()  # the workers' template imports nbgrader and torch while this process prepares the class
    if kind == 'cold' and not args.cold:
        print('note: no warm kernels here (they need user namespaces inside the sandbox); each kernel starts cold, '
              'in a sandbox of its own', file=sys.stderr)
    if args.demo:
        demo.write_class(demo.demo_class(selected, sample=args.sample), ROOT / 'submitted')
    settings = Config()
    if args.cell_timeout:
        settings.Execute.timeout = args.cell_timeout
    print(f'grading with {kind} kernels, {max(1, args.jobs)} submissions at a time', file=sys.stderr)
    table = grading.grade_class(selected, kind, settings, args.timeout, args.jobs, not args.no_feedback)
    for step in selected:
        rows = [r for r in table if r['step'] == step]
        print('\n'.join(step_block(step, rows, autograded_points(step))))
        if args.kill_matrix:
            bank = demo.bank(step)
            by_student = {r['student_id']: r for r in rows}
            if bank is not None and missing(bank, by_student):  # a sample of the bank (make test), if that is what was graded
                graded = [v for v in demo.sampled(step) if v.student in by_student]
                if graded:
                    full, bank = bank, SimpleNamespace(MUTANTS=[v for v in graded if v.caught_by],
                                                       ALTERNATIVES=[v for v in graded if not v.caught_by])
                    print(f'\n{step}: the kill matrix of a sample of its bank, {len(bank.MUTANTS)} of {len(full.MUTANTS)} '
                          f'mistakes and {len(bank.ALTERNATIVES)} of {len(full.ALTERNATIVES)} alternatives (make mutants: all)')
            if bank is None:
                print(f'\n{step}: no kill matrix: source/{step}/instructor/bank.py is missing')
            elif missing(bank, by_student):
                print(f'\n{step}: no kill matrix: the class is not the demo class (make mutants grades it)')
            else:
                print(f'\n{step} kill matrix: ' + '\n'.join(kill_matrix(bank, by_student, autograded_points(step))[0]))
        print()
    print('\n'.join(total_block(table)))
    print('\nwrote grades.csv (a row per student and step), grades-cells.csv, grades-total.csv, results/<step>/<student>.json, '
          + ('' if args.no_feedback else 'feedback/<student>/<step>/, ') + 'and .build/logs/<step>/<student>.log')
    print(f'wrote the class report, {classreport.write().relative_to(ROOT)} (python -m course.report rebuilds it)')


if __name__ == '__main__':
    main()
