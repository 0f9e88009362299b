"""Every step runs on Colab as Colab really is: in a kernel of Colab's own package set (colab-profile.txt: IPython 7.34,
ipykernel 6.17, matplotlib 3.10, numpy 2.1; the course's torch and Python stand in where Colab's cannot be had here),
from a folder holding nothing but the notebook, as a notebook opened from its badge: the data, and Step 6's checkpoint,
are downloaded (from a local server standing in for the real URLs) and checked.

- every executed solution (notebooks/), top to bottom, on a CPU runtime, printing what the committed notebook prints:
  nbval in a Colab kernel, with torch's kernels forced to the plain (default) vector path on one thread, so that the
  same run shows that no printed number depends on the CPU's vector unit (AVX-512, AVX2 or none);
- every student release, as the student repository publishes it (make publish, self-paced so that every step is in it:
  its links name the student repository), with its solutions filled in as the demo class's perfect student fills them
  (course.authoring.demo), top to bottom, every visible test passing, on a GPU runtime as a notebook sees one
  (torch.cuda.is_available() is True); then, in the same kernel, every test cell run again and the rest of the
  notebook after it, as a student does: no name of the notebook rebound by a test, nothing raising;
- every student release with only its first task written, as Run All leaves it (Runtime > Restart session and run all):
  no cell fails, the first task's tests pass, and every cell that needs a task not written yet says which and waits.
"""

import dataclasses
import os
import subprocess
import sys
from datetime import datetime, timezone

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from test_lesson import PENDING

from conftest import NOTEBOOKS
from course.authoring.demo import solved, tasks
from course.authoring.publish import publish
from course.cells import role
from course.layout import ROOT
from course.settings import load
from support.bindings import bound_names

SHIPPED = {step: sorted(p.name for p in (ROOT / 'release' / step).iterdir() if p.suffix != '.ipynb') for step, _ in NOTEBOOKS}


def run_as_on_colab(nb, tmp_path, server, monkeypatch, km, then=None):
    """Run nb top to bottom in km's kernel, alone in a folder four levels deep, then then(client, cells) in the same
    kernel if given; return the folder. A cell's error fails the test, naming the cell and the error."""
    folder = tmp_path / 'a' / 'b' / 'c' / 'd'
    folder.mkdir(parents=True)
    monkeypatch.setenv('TINY_SHAKESPEARE_URL', f'{server}/good.txt')
    monkeypatch.setenv('STEP6_CHECKPOINT_URL', f'{server}/step6_gpt.pt')
    monkeypatch.delenv('NBGRADER_EXECUTION', raising=False)
    client = NotebookClient(nb, km=km, timeout=300, startup_timeout=600, resources={'metadata': {'path': str(folder)}})
    cells = list(nb.cells)
    try:
        with client.setup_kernel():
            for i, cell in enumerate(cells):
                client.execute_cell(cell, i)
            if then:
                then(client, cells)
        failed = None
    except CellExecutionError as e:
        failed = e
    if failed:
        cell = next((c for c in nb.cells if any(o.get('output_type') == 'error' for o in c.get('outputs', []))), None)
        pytest.fail(f'cell {cell and cell.id} raised {failed.ename}: {failed.evalue} (on Colab\'s package set)', pytrace=False)
    return folder


def rerun_the_tests_then_the_rest(client, cells):
    """The student's way, after a whole run: every test cell run again, then the rest of the notebook from the first
    test on. Every name the notebook's own cells bound still holds the same object after the tests (a test cell that
    rebinds `model` would leave the student's later cells using the test's), and nothing raises."""
    nb = client.nb
    mine = sorted(set().union(*(bound_names(c.source) for c in cells if c.cell_type == 'code' and role(c) != 'test')))
    snapshot = nbformat.v4.new_code_cell(f'_ids_before = {{k: id(globals()[k]) for k in {mine!r} if k in globals()}}')
    compare = nbformat.v4.new_code_cell(
        "_moved = sorted(k for k, i in _ids_before.items() if k in globals() and id(globals()[k]) != i)\n"
        "assert not _moved, f'the test cells rebound {_moved}: give the test cells names of their own'")
    nb.cells += [snapshot, compare]  # nbclient stores each cell's outputs at its index
    client.execute_cell(snapshot, len(cells))
    for i, cell in enumerate(cells):
        if role(cell) == 'test':
            client.execute_cell(cell, i)
    client.execute_cell(compare, len(cells) + 1)
    first_test = next(i for i, c in enumerate(cells) if role(c) == 'test')
    for i, cell in enumerate(cells[first_test:], first_test):
        if cell.cell_type == 'code' and role(cell) != 'test':
            client.execute_cell(cell, i)
    del nb.cells[len(cells):]


def check_downloads_and_figures(nb, folder, step):
    assert (folder / 'input.txt').is_file(), 'expected the data cell to download input.txt next to the notebook'
    assert (folder / 'input.txt').read_bytes() == (ROOT / 'input.txt').read_bytes(), (
        'expected input.txt to be the served Tiny Shakespeare byte for byte; it differs: check how the data cell writes '
        'its download (the .part file and the rename after the sha256 check)')
    partial = [p.name for p in folder.iterdir() if p.suffix == '.part']
    assert not partial, f'a finished download left {partial} behind'
    for name in SHIPPED[step]:  # Step 6's checkpoint: it ships in release/, which a notebook opened on Colab does not have
        assert (folder / name).is_file(), f'expected {name} (shipped with the step) to be downloaded next to the notebook'
    images = [o for c in nb.cells if c.cell_type == 'code' for o in c.outputs if 'image/png' in o.get('data', {})]
    no_alt = [o for o in images if not o.get('metadata', {}).get('image/png', {}).get('alt')]
    assert not no_alt, f'{len(no_alt)} of {len(images)} figures have no alt text'


def test_solutions_print_on_colab_what_the_notebooks_say_whatever_the_cpu(colab):
    """nbval re-runs notebooks/ in Colab's kernel and compares every output with the committed one. Rounding noise (a max
    |diff| of 1e-7) differs between AVX-512, AVX2 and plain code paths, so a notebook must print the bound it checks,
    not the noise: the run forces torch's plain path and one thread, where the suite's own nbval uses this CPU's best."""
    env = {**os.environ, 'JUPYTER_PATH': str(colab.jupyter_path), 'ATEN_CPU_CAPABILITY': 'default', 'OMP_NUM_THREADS': '1'}
    done = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:xdist', '-o', 'addopts=', '--nbval',
                           '--nbval-kernel-name', 'colab', '--nbval-kernel-startup-timeout', '600', '-p', 'no:cacheprovider',
                           'notebooks'],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, ('a solution fails, or prints something else, on Colab\'s package set with the plain '
                                  'vector path (print the bound a test asserts, not the measured noise):\n'
                                  + done.stdout[-6000:])


@pytest.fixture(scope='module')
def student_repository(tmp_path_factory):
    """The student repository with every step in it: course.toml's, made self-paced (its dates left out), named as a
    course would name it (make publish refuses the placeholder course.toml ships with)."""
    s = load()
    config = dataclasses.replace(s, schedule={}, publish=dataclasses.replace(s.publish, github='example-school/students'))
    out = tmp_path_factory.mktemp('student')
    publish(out, datetime(2000, 1, 1, tzinfo=timezone.utc), config=config)
    return out


@pytest.mark.parametrize('notebook', NOTEBOOKS, ids=[f'{a}/{n}' for a, n in NOTEBOOKS])
def test_release_filled_in_passes_its_visible_tests_on_a_colab_gpu_runtime(notebook, tmp_path, server, monkeypatch, colab,
                                                                           student_repository):
    """The student's release with the perfect student's solutions, run top to bottom as on Colab's GPU runtime: every
    visible test passes, the downloads and figures are right; then, as a student does, every test cell is run again and
    the rest of the notebook after it (rerun_the_tests_then_the_rest)."""
    step, name = notebook
    nb = solved(step, name, release=student_repository / step / name)
    nb.cells.append(nbformat.v4.new_code_cell('import torch\nprint(torch.cuda.is_available())'))
    folder = run_as_on_colab(nb, tmp_path, server, monkeypatch, colab(gpu=True), then=rerun_the_tests_then_the_rest)
    assert nb.cells[-1].outputs[0].text.strip() == 'True', 'the kernel should claim a GPU, as a Colab GPU runtime does'
    check_downloads_and_figures(nb, folder, step)


WAITS = 'This cell waits for your task'  # what a cell that needs a task not written yet prints (the set-up's WaitForTasks)


PARTLY_DONE = [pytest.param((a, n), id=f'{a}/{n}', marks=[pytest.mark.xfail(strict=True, reason=PENDING[a])]
                            if a in PENDING else []) for a, n in NOTEBOOKS]


@pytest.mark.parametrize('notebook', PARTLY_DONE)
def test_run_all_with_only_the_first_task_written_passes_its_tests_and_waits_for_the_rest(notebook, tmp_path, server, monkeypatch,
                                                                                        colab, student_repository):
    """A student who has written the first task and presses Run All: the notebook runs to its end, with no error, the
    first task's tests pass (they print, and do not wait), and the second task's first test, like every cell that needs a
    task not written yet, prints which task it waits for."""
    step, name = notebook
    release = student_repository / step / name
    (first, first_tests), (second, second_tests) = tasks(nbformat.read(release, as_version=4).cells)[:2]
    nb = solved(step, name, release=release, only=first)
    run_as_on_colab(nb, tmp_path, server, monkeypatch, colab())  # fails on a cell's error, naming it
    text = [''.join(o.get('text', '') for o in c.get('outputs', [])) for c in nb.cells]
    passed = [nb.cells[i].id for i in first_tests if text[i] and WAITS not in text[i]]
    assert passed == [nb.cells[i].id for i in first_tests], (
        f'with {first} written, its tests should run and pass; these did not: '
        + '; '.join(f'{nb.cells[i].id}: {text[i][-300:]!r}' for i in first_tests if nb.cells[i].id not in passed))
    i = second_tests[0]  # the second task's first test (a later section may test the first task again: Step 3's)
    assert WAITS in text[i], (
        f'with {second} not written, its first test {nb.cells[i].id} should say it waits; it printed {text[i][-300:]!r}')
