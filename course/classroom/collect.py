"""Collect a class's submissions from an LMS bulk download into submitted/<student>/<step>/ (docs/lms.md).

  python -m course.classroom.collect --lms canvas --zip submissions.zip            (make collect LMS=canvas ZIP=submissions.zip)
  python -m course.classroom.collect --lms moodle --zip step2.zip --due '2026-12-01 23:59+00:00' --times times.csv

nbgrader's zip_collect does the work, with course.classroom.lms's plugins: each file goes to its student through the roster and to
its step through its name; every file not collected is listed, one line each. Then `make grade`.
"""

import argparse
import sys

from course.classroom import lms
from course.layout import ROOT, steps


def main(argv=None, root=ROOT):
    ap = argparse.ArgumentParser(prog='python -m course.classroom.collect', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--lms', required=True, choices=sorted(lms.downloads()), help='the LMS the download comes from')
    ap.add_argument('--zip', required=True, help='the bulk download ("Download Submissions" in Canvas, "Download all '
                                                 'submissions" in Moodle)')
    ap.add_argument('--roster', default=str(root / 'roster.csv'),
                    help='the roster CSV: id, first_name, last_name, email, lms_id (default: roster.csv); or Canvas\'s '
                         'gradebook export as it is (docs/lms.md)')
    ap.add_argument('--due', help="the step's due date, ISO 8601 with its offset (2026-12-01 23:59+00:00; without one, "
                                  "UTC); kept in the gradebook "
                                  "(nbgrader's late penalty compares each submission's time with it). Default: the "
                                  "gradebook's, else course.toml's [schedule] due date")
    ap.add_argument('--times', help='a CSV (file, timestamp) of the time each file was submitted, where the download '
                                    'carries none (Moodle) or only a late mark (Canvas)')
    ap.add_argument('--step', choices=steps(root), help='the step the download is for (default: from the files\' names)')
    args = ap.parse_args(argv)
    try:
        lines = lms.collect(args.zip, args.lms, args.roster, args.times, args.due, args.step, root)
    except lms.Refused as e:
        sys.exit(f'error: {e}')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
