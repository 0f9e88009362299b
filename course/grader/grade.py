"""Autograde every submission in submitted/ with nbgrader, write feedback/, results/ and grades.csv, print the grade table,
and write the class report (reports/index.html, course.reports.classreport).

  python -m course.grader.grade                       grade the class in submitted/<student>/<step>/   (make grade)
  python -m course.grader.grade --demo                grade a small demo class (course.authoring.demo.small_class) in
                                                      the demo's own course, demo/   (make demo)
  python -m course.grader.grade --demo --kill-matrix  the demo class with each step's whole bank, and its kill matrix
                                                      (make mutants)
  python -m course.grader.grade --step step4 ...      only these steps

Only the steps with a submission in submitted/ are prepared and graded; the others keep what the gradebook has.

Each submission is graded by nbgrader autograde in a long-lived worker, --jobs at a time, its notebook run in a sandboxed
kernel: warm by default as root (course.isolation.warm), --cold for one started from scratch (course.isolation.sandbox).
"""

import argparse
import os
import sys

from traitlets.config import Config

from course import runner
from course.authoring import demo
from course.classroom import lms
from course.grader import workers
from course.grader.killmatrix import step_kill_matrix
from course.grader.workers import KernelKind
from course.isolation import sandbox
from course.isolation.policy import LIMITS
from course.layout import ROOT, autograded_points, feedback_path, is_demo, steps, submitted_path
from course.reports import classreport
from course.reports.gradetable import step_block, total_block


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.grader.grade', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--demo', action='store_true',
                    help='grade a demo class generated from source/ instead of submitted/: per step, a perfect, a blank and '
                         'a late submission and a few typical mistakes (with --kill-matrix: the whole bank)')
    ap.add_argument('--kill-matrix', action='store_true',
                    help="print each step's kill matrix (with --demo: the demo class holds each step's whole bank)")
    ap.add_argument('--sample', action='store_true',
                    help="with --demo: each step's bank sampled, a mistake per graded function and one alternative "
                         '(course.authoring.demo.sampled; what make test grades)')
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
    if args.demo and not is_demo(ROOT):
        # the demo class is graded in the demo's own course (course.authoring.demo.course: demo/), by its own copy of
        # this command: nothing of it reaches this course's class or gradebook
        here = demo.course(ROOT)
        os.chdir(here)
        os.execve(sys.executable, [sys.executable, '-m', 'course.grader.grade',
                                   *(sys.argv[1:] if argv is None else argv)], runner.env(here))
    selected = args.steps or steps()
    # Fail closed: a real class is graded in the sandbox or not at all, unless --no-sandbox says otherwise. Checked before
    # anything starts (no worker, no kernel, no results, the gradebook untouched). The demo class is ours (course.authoring.demo
    # writes it only into an empty submitted/ or over an earlier demo class), so --demo grades it without, and says so.
    kind = workers.kernel_kind(args.no_sandbox, args.cold)
    if kind == KernelKind.UNSANDBOXED and args.no_sandbox:
        print('warning: --no-sandbox: grading WITHOUT a sandbox: student code can read and write the whole course',
              file=sys.stderr)
    elif kind == KernelKind.UNSANDBOXED and args.demo:
        print(sandbox.DEMO_UNSANDBOXED, file=sys.stderr)
    elif kind == KernelKind.UNSANDBOXED:
        sys.exit(sandbox.UNAVAILABLE)
    runner.worker_context()  # the workers' template imports nbgrader and torch while this process prepares the class
    if kind == KernelKind.COLD and not args.cold:
        print('note: no warm kernels here (they need user namespaces inside the sandbox); each kernel starts cold, '
              'in a sandbox of its own', file=sys.stderr)
    settings, duedates = Config(), {}
    if args.demo:
        small = not (args.sample or args.kill_matrix)  # make demo: a small class; make mutants, make test: the bank
        cls = (demo.small_class(selected) if small else demo.demo_class(selected, sample=args.sample))
        demo.write_class(cls, submitted_path())
        if small:  # the late student loses its points, by the course's late rule (nbgrader_config.py)
            duedates = dict.fromkeys(selected, demo.DUE)
    if args.cell_timeout:
        settings.Execute.timeout = args.cell_timeout
    submitted = workers.submitted_steps(selected)
    if not submitted:
        sys.exit(f'error: no submission of {", ".join(selected)} in {submitted_path()}: put the class in '
                 'submitted/<student>/<step>/, or run make demo.')
    if skipped := [s for s in selected if s not in submitted]:
        print(f'no submission of {", ".join(skipped)}: not graded', file=sys.stderr)
    selected = submitted
    print(f'grading with {kind} kernels, {max(1, args.jobs)} submissions at a time', file=sys.stderr)
    table = workers.grade_class(selected, kind, settings, args.timeout, args.jobs, not args.no_feedback, duedates=duedates)
    for step in selected:
        rows = [r for r in table if r['step'] == step]
        # the demo's students each submit one step: their rows of the other steps say nothing
        shown = [r for r in rows if not (args.demo and r['status'] == 'not submitted')]
        print('\n'.join(step_block(step, shown, autograded_points(step))))
        if args.kill_matrix:
            print('\n' + '\n'.join(step_kill_matrix(step, rows)))
        print()
    print('\n'.join(total_block(table)))
    if not workers.memory_capped(kind):
        print(f'\nnote: these kernels ran without a memory cap of their own ({uncapped(kind)}): the processes a '
              f'submission starts may together hold more than the {LIMITS["data"] >> 30} GiB each one may, up to what '
              'the machine has (docs/security.md)')
    print('\nwrote grades.csv (a row per student and step), grades-cells.csv, grades-total.csv, results/<step>/<student>.json, '
          + ('' if args.no_feedback else 'feedback/<student>/<step>/, ') + 'and .build/logs/<step>/<student>.log')
    report = classreport.write().relative_to(ROOT.parent if args.demo else ROOT)  # the demo's: demo/reports/...
    rebuild = 'cd demo && ../.venv/bin/python -m course.reports.classreport' if args.demo else 'make report'
    print(f'wrote the class report, {report} ({rebuild} rebuilds it)')
    print(lms.where_to_upload(ROOT), end='')  # what goes back to the LMS, and where (course.classroom.lms platforms)
    if args.demo:
        print(where_to_look(table, report))


def uncapped(kind):
    """Why kernels of kind run without a memory cap, in a few words."""
    if kind == KernelKind.UNSANDBOXED:
        return 'no sandbox'
    return 'this account may not make cgroups: as root, or with a delegated cgroup, each kernel gets one'


def where_to_look(table, report):
    """make demo's last lines: where to look at what it did, in the demo's own course (ROOT here: demo/)."""
    page = next((p for r in table if r['student_id'] != 'perfect' and r['status'].startswith('graded')
                 for p in sorted(feedback_path(r['student_id'], r['step']).glob('*.html'))), None)
    here = ROOT.name
    return '\n'.join([
        f'\nwhere to look (the demo class is graded in a course of its own, {here}/: make clean removes it):',
        f'  the grade table    above, and {here}/grades.csv (a row per student and step), {here}/grades-total.csv',
        f'  a feedback page    {page.relative_to(ROOT.parent) if page else f"{here}/feedback/<student>/<step>/<notebook>.html"}'
        '  (what a student opens: what to fix first)',
        f'  the class report   {report}  (what the class got wrong, per step)',
        f'  the formgrader     cd {here} && ../.venv/bin/jupyter lab, then Nbgrader > Formgrader (the written answers to grade)',
    ])


if __name__ == '__main__':
    main()
