"""The progress of a grading run, while it runs: submissions done out of the total, the rate, the time left, and the
statuses so far (course.reports.results: graded, blank, timeout, kernel died...).

On a terminal it is one live line (tqdm). Anywhere else (a log file, CI, a pipe) it is plain lines, sparse: one when a
tenth more of the class is done or, if that takes longer, at the first submission done `seconds` (30) after the last
line, and one at the end. Lines are written as submissions finish, never by a timer.
"""

import sys
import threading
import time
from collections import Counter

from tqdm import tqdm


class Progress:
    """add(status) once per submission graded, from any thread; close() at the end."""

    def __init__(self, total, stream=None, tty=None, step=0.1, seconds=30, clock=time.monotonic):
        self.total, self.stream, self.clock = total, stream or sys.stderr, clock
        self.tty = self.stream.isatty() if tty is None else tty
        self.counts, self.done, self.lock = Counter(), 0, threading.Lock()
        self.start = self.last = clock()
        self.step, self.seconds = max(1, round(total * step)), seconds
        self.next = self.step  # the count at which the next plain line is due
        self.bar = tqdm(total=total, file=self.stream, unit='submission', desc='grading', dynamic_ncols=True,
                        smoothing=0.1) if self.tty and total else None

    def statuses(self):
        """'10 graded, 1 timeout, 1 kernel died': the statuses so far, the most frequent first."""
        return ', '.join(f'{n} {status}' for status, n in self.counts.most_common())

    def line(self):
        """The plain line: 'grading 12/60 (20%), 0.8 submissions/s, 0:57 left: 10 graded, 1 timeout, 1 kernel died'."""
        elapsed = max(self.clock() - self.start, 1e-9)
        rate = self.done / elapsed
        left = tqdm.format_interval((self.total - self.done) / rate) if rate else '?'
        return (f'grading {self.done}/{self.total} ({self.done / self.total:.0%}), {rate:.2f} submissions/s, '
                f'{left} left, {tqdm.format_interval(elapsed)} so far: {self.statuses()}')

    def add(self, status):
        """One more submission done, with this status (None: not decided, counted as 'unknown')."""
        with self.lock:
            self.done += 1
            self.counts[status or 'unknown'] += 1
            if self.bar is not None:
                self.bar.set_postfix_str(self.statuses(), refresh=False)
                self.bar.update(1)
                return
            now = self.clock()
            if self.done >= self.next or now - self.last >= self.seconds or self.done == self.total:
                print(self.line(), file=self.stream, flush=True)
                self.last = now
                self.next = (self.done // self.step + 1) * self.step

    def close(self):
        if self.bar is not None:
            self.bar.close()
