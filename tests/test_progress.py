"""The live progress of make grade (course.grader.progress): on a terminal one tqdm line; elsewhere plain lines, sparse (a tenth
of the class, or 30 s, whichever comes first, counted on submissions done, never on a timer), with the statuses so far.
The fake clock below is the events' own time: no test waits."""

import io

from course.grader.progress import Progress

STATUSES = ['graded'] * 90 + ['timeout'] * 7 + ['kernel died'] * 3


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def run(statuses, seconds_each, tty=False, total=None):
    out, clock = io.StringIO(), Clock()
    shown = Progress(total or len(statuses), out, tty=tty, clock=clock)
    for status in statuses:
        clock.now += seconds_each
        shown.add(status)
    shown.close()
    return out.getvalue()


def test_not_a_terminal_a_plain_line_per_tenth_of_the_class_with_the_statuses_so_far():
    lines = run(STATUSES, 1).splitlines()
    assert len(lines) == 10, lines  # 100 submissions in 100 s: one line per 10, none by the 30 s rule
    assert lines[0].startswith('grading 10/100 (10%), 1.00 submissions/s, 01:30 left, 00:10 so far: 10 graded'), lines[0]
    assert lines[-1] == ('grading 100/100 (100%), 1.00 submissions/s, 00:00 left, 01:40 so far: '
                         '90 graded, 7 timeout, 3 kernel died')


def test_not_a_terminal_a_slow_class_gets_a_line_at_the_first_submission_30_s_after_the_last():
    # the first 25 of a class of 1,000, 12 s each: a tenth would take 20 min; a line every third submission (36 s)
    lines = run(STATUSES[:20] + STATUSES[-5:], 12, total=1000).splitlines()
    times = [line.split(' so far')[0].rsplit(' ', 1)[1] for line in lines]
    assert times == ['00:36', '01:12', '01:48', '02:24', '03:00', '03:36', '04:12', '04:48'], lines
    assert lines[-1].startswith('grading 24/1000 (2%), 0.08 submissions/s, 3:15:12 left'), lines[-1]
    assert lines[-1].endswith(': 20 graded, 2 timeout, 2 kernel died'), lines[-1]


def test_on_a_terminal_one_live_line_with_rate_eta_and_statuses():
    text = run(STATUSES, 1, tty=True)
    assert '\n' not in text.rstrip('\n') and text.count('\r') >= 2, repr(text[:300])  # one line, redrawn in place
    last = text.rstrip('\n').split('\r')[-1]
    assert '100/100' in last and 'submission/s' in last and '90 graded, 7 timeout, 3 kernel died' in last, last
