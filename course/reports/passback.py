"""An LTI class's grades and roster back and forth with its LMS, by LTI Advantage (course.classroom.lms_lti13, docs/lti.md).

  python -m course.reports.passback             the roster (NRPS), then every changed score (AGS)   (make passback)
  python -m course.reports.passback --roster    the roster only                                     (make roster)
  python -m course.reports.passback --key       make the tool's key pair, print its public JWK      (make lti-key)

Each line printed says what was done for whom; the exit status is 1 when a score could not be posted (it was not
recorded as posted: run it again).
"""

import argparse
import json
import sys

from course.classroom import lms, lms_lti13
from course.layout import ROOT


def main(argv=None, root=ROOT):
    ap = argparse.ArgumentParser(prog='python -m course.reports.passback', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--roster', action='store_true', help='only fill the gradebook\'s students from the LMS (NRPS)')
    ap.add_argument('--key', action='store_true',
                    help="make the tool's key pair at [lti] private_key (kept if there) and print its public JWK, for "
                         "the LMS's registration of the tool")
    ap.add_argument('--step', action='append', dest='steps', metavar='ID', help='post only this step (repeatable)')
    ap.add_argument('--no-roster', action='store_true', help='post without asking the LMS for the roster first')
    args = ap.parse_args(argv)
    try:
        if args.key:
            jwk = lms_lti13.new_key(root)
            print(f'the tool\'s public key, as Canvas takes it (Developer Key: Public JWK):\n{json.dumps(jwk, indent=2)}\n\n'
                  f'as Moodle takes it (Public key type: RSA key):\n{lms_lti13.public_pem(root)}')
            return 0
        lines, failed = run(root, roster=not args.no_roster, scores=not args.roster, steps=args.steps)
    except (lms.Refused, lms_lti13.Failed) as e:
        sys.exit(f'error: {e}')
    print('\n'.join(lines))
    return 1 if failed else 0


def run(root=ROOT, roster=True, scores=True, steps=None, **services):
    """The roster, then the scores, as main() does; (report lines, number of scores that failed)."""
    from nbgrader.api import Gradebook

    from course import runner
    from course.reports.export import rows

    cfg = lms_lti13.settings(root)
    services = lms_lti13.Services(cfg, **services)
    c = runner.config(root=root)
    lines, failed = [], 0
    with Gradebook(c.CourseDirectory.db_url, c.CourseDirectory.course_id) as gb:
        if roster:
            lines += lms_lti13.sync_roster(gb, services, cfg['issuer'])
        if scores:
            more, failed = lms_lti13.passback(gb, rows(gb, root), services, cfg['issuer'], steps)
            lines += more
    return lines, failed


if __name__ == '__main__':
    sys.exit(main())
