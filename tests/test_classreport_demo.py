"""The class report that `make grade` writes (course.reports.classreport), as written by the graded class's run of
course.grader.grade (conftest's `graded`: the demo class of every step, the synthetic one's too, with the damaged,
broken and hostile corpus): each of the bank's mistakes is a top failure message of the cells meant to catch it, and
the page, opened in Chromium, shows its figures, runs nothing and loads nothing. Collected through
tests/test_grading.py, on the worker that grades the class once."""

import base64
import io
import json
import re

import pytest
from bs4 import BeautifulSoup
from PIL import Image

from course.authoring.demo import sampled
from course.layout import ROOT, autograded_points, steps
from course.reports import results
from course.reports.classreport import normalise, took_part
from support.browserpage import open_page

STEPS = steps()
GRADED_MISTAKES = [(step, v) for step in STEPS for v in sampled(step) if v.caught_by]
SHOT = ROOT / 'test-artifacts' / 'classreport' / 'demo-class.png'


def page(graded):
    return (graded.course / 'reports' / 'index.html').read_text()


def failure_groups(html):
    """{(step, grade_id): [(count, pattern)]} of the page's 'What the class got wrong', in the page's order."""
    soup = BeautifulSoup(html, 'html.parser')
    out = {}
    for block in soup.select('div.failures'):
        step, gid = block['id'].removesuffix('-failures').split('-', 1)
        out[(step, gid)] = [(int(re.search(r'\((\d+) of \d+\)', g.select_one('.share').get_text())[1]),
                             g.find('code').get_text()) for g in block.select('div.group')]
    return out


@pytest.mark.parametrize('step, mistake', GRADED_MISTAKES, ids=[f'{s}-{m.student}' for s, m in GRADED_MISTAKES])
def test_class_report_shows_each_mistake_as_a_top_failure_message_of_the_cells_meant_to_catch_it(graded, step, mistake):
    """For each cell of caught_by, the mistake's message, as grading recorded it, is among the most frequent messages the
    page lists for that cell, counted with every other student whose message there is the same but for its numbers."""
    record = json.loads((graded.course / 'results' / step / f'{mistake.student}.json').read_text())
    groups = failure_groups(page(graded))
    for gid in mistake.caught_by:
        message = record['failures'].get(gid)
        assert message, f'{mistake.student} lost points in {gid}, and grading recorded no failure message: {record["failures"]}'
        listed = groups.get((step, gid), [])
        counts = [count for count, pattern in listed if pattern == normalise(message).replace('#', '…')]
        same = [s for s in students(graded, step) if normalise(failures(graded, step, s).get(gid, '')) == normalise(message)]
        assert counts == [len(same)], f'{step} {gid}: {normalise(message)!r} ({len(same)} students) not listed as such: {listed}'


def students(graded, step):
    """The students whose submission of step the report's statistics count (course.reports.classreport.took_part)."""
    return [s for st, s in graded.rows if st == step and took_part({'record': results.load(step, s, graded.course)})]


def failures(graded, step, student):
    return results.load(step, student, graded.course)['failures']


def test_class_report_lists_every_step_and_graded_cell(graded):
    html = page(graded)
    soup = BeautifulSoup(html, 'html.parser')
    for step in steps(graded.course):  # the synthetic step's too (tests/support/synthetic.py: the grader's own cases)
        section = soup.find(id=step).find_parent('section')
        cells = [row.find_all('td')[1].get_text() for row in section.find('table').find_all('tr')[1:]]
        assert cells == list(autograded_points(step, graded.course)), f'{step}: the report lists cells {cells}'


def test_class_report_opens_in_chromium_with_its_figures_and_runs_nothing(graded):
    """Opened from disk in Chromium: no console message (a refusal by the Content-Security-Policy would log one), no
    dialog, no request, no script; three figures per step, each a PNG inlined as data: with alt text, decoded, and not
    one colour; a screenshot of its top is saved to test-artifacts/classreport/."""
    seen = open_page(graded.course / 'reports' / 'index.html', SHOT, full_page=False)
    assert not seen['console'] and not seen['dialogs'] and not seen['requests'], seen
    assert seen['scripts'] == 0 and not seen['handlers'] and seen['pwned'] is None, seen
    assert len(seen['images']) == 3 * len(steps(graded.course)), seen['images']
    for img in seen['images']:
        assert img['src'] == 'data:image/png;base64,' and img['width'] > 100 and len(img['alt']) > 40, img
    for data in re.findall(r'data:image/png;base64,([A-Za-z0-9+/=]+)', page(graded)):
        image = Image.open(io.BytesIO(base64.b64decode(data)))
        assert image.format == 'PNG', image.format
        image = image.convert('RGB')
        assert len(image.getcolors(image.width * image.height)) > 3, 'a figure of one colour or nearly'
    shot = Image.open(SHOT).convert('RGB')
    assert max(shot.getcolors(shot.width * shot.height))[0] < 0.9 * shot.width * shot.height, 'the screenshot is blank'
    assert all(step in seen['text'] for step in steps(graded.course)), seen['text'][:1000]
