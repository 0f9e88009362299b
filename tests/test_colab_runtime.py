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
  (torch.cuda.is_available() is True).
"""

import os
import subprocess
import sys
from datetime import datetime, timezone

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from conftest import NOTEBOOKS
from course.authoring.demo import solved
from course.authoring.publish import publish
from course.layout import ROOT, settings

SHIPPED = {step: sorted(p.name for p in (ROOT / 'release' / step).iterdir() if p.suffix != '.ipynb') for step, _ in NOTEBOOKS}


def run_as_on_colab(nb, tmp_path, server, monkeypatch, km):
    """Run nb top to bottom in km's kernel, alone in a folder four levels deep; return the folder. A cell's error fails
    the test, naming the cell and the error."""
    folder = tmp_path / 'a' / 'b' / 'c' / 'd'
    folder.mkdir(parents=True)
    monkeypatch.setenv('TINY_SHAKESPEARE_URL', f'{server}/good.txt')
    monkeypatch.setenv('STEP6_CHECKPOINT_URL', f'{server}/step6_gpt.pt')
    monkeypatch.delenv('NBGRADER_EXECUTION', raising=False)
    try:
        NotebookClient(nb, km=km, timeout=300, resources={'metadata': {'path': str(folder)}}).execute()
        failed = None
    except CellExecutionError as e:
        failed = e
    if failed:
        cell = next((c for c in nb.cells if any(o.get('output_type') == 'error' for o in c.get('outputs', []))), None)
        pytest.fail(f'cell {cell and cell.id} raised {failed.ename}: {failed.evalue} (on Colab\'s package set)', pytrace=False)
    return folder


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
                           '--nbval-kernel-name', 'colab', '-p', 'no:cacheprovider', 'notebooks'],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, ('a solution fails, or prints something else, on Colab\'s package set with the plain '
                                  'vector path (print the bound a test asserts, not the measured noise):\n'
                                  + done.stdout[-6000:])


@pytest.fixture(scope='module')
def student_repository(tmp_path_factory):
    """The student repository with every step in it: course.toml's, made self-paced (its dates left out)."""
    config = {**settings(ROOT), 'schedule': {}}
    out = tmp_path_factory.mktemp('student')
    publish(out, datetime(2000, 1, 1, tzinfo=timezone.utc), config=config)
    return out


@pytest.mark.parametrize('notebook', NOTEBOOKS, ids=[f'{a}/{n}' for a, n in NOTEBOOKS])
def test_release_filled_in_passes_its_visible_tests_on_a_colab_gpu_runtime(notebook, tmp_path, server, monkeypatch, colab,
                                                                           student_repository):
    step, name = notebook
    nb = solved(step, name, release=student_repository / step / name)
    nb.cells.append(nbformat.v4.new_code_cell('import torch\nprint(torch.cuda.is_available())'))
    folder = run_as_on_colab(nb, tmp_path, server, monkeypatch, colab(gpu=True))
    assert nb.cells[-1].outputs[0].text.strip() == 'True', 'the kernel should claim a GPU, as a Colab GPU runtime does'
    check_downloads_and_figures(nb, folder, step)
