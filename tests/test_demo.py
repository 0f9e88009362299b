"""make demo's small class (course.authoring.demo.small_class): per step, the perfect, blank and late submissions and a few of
the bank's typical mistakes, written as nbgrader reads a late one (timestamp.txt after the demo's due date)."""

from datetime import datetime

from course.authoring.demo import DUE, LATE, TYPICAL, bank, sampled, small_class, write_class
from course.layout import notebooks, steps


def test_the_small_class_has_perfect_blank_late_and_a_few_typical_mistakes_per_step():
    cls = small_class()
    for step in steps():
        students = {s for s, work in cls.items() if step in work}
        mistakes = {v.student for v in sampled(step) if v.caught_by}
        assert {'perfect', 'blank', LATE} <= students, (step, students)
        chosen = students - {'perfect', 'blank', LATE}
        assert chosen <= mistakes and len(chosen) == min(TYPICAL, len(mistakes)), (step, chosen)
        assert all(v.caught_by for v in getattr(bank(step), 'MUTANTS', []) if v.student in chosen)
        assert cls[LATE][step] == cls['perfect'][step] and set(cls[LATE][step]) == set(notebooks(step))
    assert sum(len(work) for work in cls.values()) <= len(steps()) * (3 + TYPICAL), 'a small class, not the bank'


def test_the_late_submission_is_stamped_after_the_due_date(tmp_path):
    step = steps()[0]
    write_class(small_class([step]), tmp_path / 'submitted')
    stamp = (tmp_path / 'submitted' / LATE / step / 'timestamp.txt').read_text().strip()
    assert datetime.strptime(stamp, '%Y-%m-%d %H:%M:%S %Z').replace(tzinfo=DUE.tzinfo) > DUE, stamp
    assert not (tmp_path / 'submitted' / 'perfect' / step / 'timestamp.txt').exists()
