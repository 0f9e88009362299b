"""The grading run's loose ends, on the small synthetic step (tests/support/synthetic.py) alone: what a submission's status says
when the grader's probe, run on the student's code after the notebook, runs past the cell limit; a time limit met on a
busy machine; an old result record without `failures` read by the class report; and the formgrader's MathJax, served by
the course's own Jupyter server instead of a CDN."""

import json
import shutil
import subprocess
import sys

import pytest

from conftest import can_sandbox
from course import runner
from course.authoring.demo import edited, solved
from course.cells import read
from course.layout import copy_course, result_path, steps
from course.reports import classreport, results
from support import synthetic
from support.corpus import with_code

# add() hangs on the grader's numbers only (standard normals: long reprs), never on the test cells' (1, 2, -5.5, 5.5...):
# the notebook runs through, and only the probe, which calls add() on the grader's inputs, meets the cell limit
HANGS_IN_THE_PROBE = ('add', 'return a + b',
                      'import time\n    while len(repr(a)) > 6:\n        time.sleep(0.1)\n    return a + b')
LOOPS = 'import time\nwhile True:\n    time.sleep(0.1)'  # waits, rather than spins: the limit is met all the same


@pytest.fixture(scope='module')
def graded(tmp_path_factory):
    """A course of the synthetic step alone, built, and its small class graded with a 5 s cell limit."""
    root = copy_course(tmp_path_factory.mktemp('looseends'))
    for step in steps():
        shutil.rmtree(root / 'source' / step)
        shutil.rmtree(root / 'release' / step, ignore_errors=True)
    synthetic.add_to(root)
    synthetic.unschedule(root)
    env = runner.env(root)
    done = subprocess.run([sys.executable, '-m', 'course.authoring.build'], cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    step, name = synthetic.STEP, synthetic.NAME
    perfect = solved(step, name, root)
    release = read(root / 'release' / step / name)
    cls = {'perfect': perfect, 'subtracts': edited(perfect, (('add', 'return a + b', 'return a - b'),)),
           'slow_probe': edited(perfect, (HANGS_IN_THE_PROBE,)),
           'loops': with_code(LOOPS)(name, release, perfect, '')[name]}
    for student, nb in cls.items():
        (root / 'submitted' / student / step).mkdir(parents=True)
        (root / 'submitted' / student / step / name).write_text(json.dumps(nb))
    unsandboxed = () if can_sandbox() else ('--no-sandbox',)
    done = subprocess.run([sys.executable, '-m', 'course.grader.grade', '--cell-timeout=5', '--timeout=300', *unsandboxed],
                          cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root, done.stdout


def record(root, student):
    return results.load(synthetic.STEP, student, root)


def test_a_probe_that_times_out_says_so_in_the_status(graded):
    root, out = graded
    r = record(root, 'slow_probe')
    assert r['status'] == 'timeout' and "grader's checks" in r['detail'], (
        f"the probe ran past the cell limit, so the checks it did not reach failed: the status must say so, got "
        f"{results.label(r)!r}")
    assert r['probe'] == 'CellTimeoutError' and 'probe' in r['timeouts'], r
    assert record(root, 'perfect')['status'] == 'graded', 'a submission whose probe finishes is graded as before'


def test_a_cell_timeout_records_how_busy_the_machine_was(graded):
    root, _ = graded
    r = record(root, 'loops')
    assert r['status'] == 'timeout' and r['detail'].startswith('in cell add'), results.label(r)
    seen = r.get('timeouts', {}).get('add')
    assert seen, f'the record says how busy the machine was when cell add met its limit: {r}'
    assert seen['cores'] >= 1 and seen['load'] >= 0, seen
    # the status says "busy" exactly when the machine had more runnable processes than cores at the timeout
    assert ('busy machine' in r['detail']) == (seen['load'] > seen['cores']), (seen, r['detail'])


@pytest.mark.parametrize('where, record_fields', [
    ('add', {'cells': {'add': 'CellTimeoutError'}}),
    ('probe', {'probe': 'CellTimeoutError'}),
    ('submission', {'stopped': 'timeout', 'seconds': {'limit': 180}}),
])
def test_a_time_limit_met_on_a_busy_machine_is_not_charged_silently(where, record_fields):
    base = {**results.new(synthetic.STEP, 'amy', 'warm'), 'graded': True, **record_fields}
    busy = {**base, 'timeouts': {where: {'load': 7.5, 'cores': 2}}}
    quiet = {**base, 'timeouts': {where: {'load': 1.2, 'cores': 2}}}
    status, detail = results.status(busy)
    assert status == 'timeout' and 'busy machine (load 7.5 on 2 cores)' in detail and 'regrade' in detail, detail
    assert 'busy' not in results.status(quiet)[1], results.status(quiet)


def test_an_old_record_without_failures_still_feeds_the_class_report(graded):
    root, _ = graded
    path = result_path(synthetic.STEP, 'subtracts', root)
    old = json.loads(path.read_text())
    assert old['failures'], 'the mistake fails some test cells'
    for key in ('failures', 'removed', 'memory', 'probe', 'timeouts'):  # what records written before them lack
        old.pop(key, None)
    path.write_text(json.dumps(old))
    migrated = record(root, 'subtracts')
    assert 'expected 3, got -1' in migrated.get('failures', {}).get('add_small_cases', ''), migrated
    page = classreport.write(root).read_text()
    assert 'expected 3, got -1' in page, 'the old record\'s failures, read back from its autograded notebook, are in the report'


def test_formgrader_pages_load_mathjax_from_the_jupyter_server_not_a_cdn():
    """nbconvert's mathjax() macro, as nbgrader's formgrade template calls it (no URL: cdnjs), goes through the formgrader's
    transform: the page loads the copy jupyter_server_mathjax serves, and its policy names no other host."""
    from pathlib import Path
    from types import SimpleNamespace

    import jinja2
    import jupyter_server_mathjax
    from nbconvert.exporters import HTMLExporter

    from course.reports.active_content import _transform_class

    loader = jinja2.FileSystemLoader([str(Path(p) / 'base') for p in HTMLExporter().template_paths
                                      if (Path(p) / 'base' / 'mathjax.html.j2').exists()] + HTMLExporter().template_paths)
    head = jinja2.Environment(loader=loader).from_string("{% from 'mathjax.html.j2' import mathjax %}{{ mathjax() }}").render()
    assert 'cdnjs.cloudflare.com' in head, head[:300]
    student = '<p>see https://cdnjs.cloudflare.com/ajax/libs/mathjax/ as text</p>'
    page = f'<html><head>{head}</head><body>{student}</body></html>'.encode()
    url = '/base/static/jupyter_server_mathjax/MathJax.js'
    transform = _transform_class('/base/', {'mathjax_url': url})(SimpleNamespace(path='/base/formgrader/submissions/abc'))
    headers = {'Content-Length': str(len(page))}
    _, headers, served = transform.transform_first_chunk(200, headers, page, True)
    text = served.decode()
    assert f'<script src="{url}?config=' in text and 'cdnjs' not in text.split('</head>')[0], text[:400]
    config = text.split(f'<script src="{url}?config=', 1)[1].split('"', 1)[0]
    assert student in text, 'the body (a submission) is left as it was'
    assert headers['Content-Length'] == str(len(served))
    assert 'cdnjs' not in headers['Content-Security-Policy'], headers['Content-Security-Policy']
    static = Path(jupyter_server_mathjax.__file__).parent / 'static'
    for part in ('MathJax.js', *(f'config/{c}.js' for c in config.split(','))):
        assert (static / part).is_file(), f'jupyter_server_mathjax serves no {part}'
