"""Colab readiness: the release runs from a folder holding nothing but itself, as a Colab upload does, in a kernel of
Colab's own package set (the `colab` fixture: colab-profile.txt, course/authoring/colab.py), not the course's.

The data cell's real download path runs against a local HTTP server on 127.0.0.1 (TINY_SHAKESPEARE_URL points it there):
a corrupted file or an unreachable URL stops with a one-line error and leaves nothing behind. tests/test_colab_runtime.py
runs every notebook top to bottom there, from a folder holding nothing but the notebook: a good download lands as
input.txt, byte for byte, and no partial file is left (its check_downloads_and_figures).
"""

import shutil

import pytest
from nbclient import NotebookClient

from conftest import NOTEBOOKS, free_port
from course.cells import read
from course.layout import ROOT

# The notebooks whose data cell (id 'data') fetches Tiny Shakespeare.
WITH_DATA = [(a, n) for a, n in NOTEBOOKS if any(c.id == 'data' for c in read(ROOT / 'release' / a / n).cells)]
with_data = pytest.mark.parametrize('notebook', WITH_DATA, ids=[f'{a}/{n}' for a, n in WITH_DATA])


def fresh_folder(tmp_path, aid, name):
    """A folder four levels deep in tmp_path (as deep as the data cell looks up), holding only the release notebook."""
    folder = tmp_path / 'a' / 'b' / 'c' / 'd'
    folder.mkdir(parents=True)
    shutil.copy(ROOT / 'release' / aid / name, folder / name)
    return folder


def run_data_cell(folder, name, url, monkeypatch, colab, ids=('data',)):
    """Run the cells with these ids of the notebook in folder, in a Colab kernel, the data cell downloading from url;
    return the data cell."""
    monkeypatch.setenv('TINY_SHAKESPEARE_URL', url)
    nb = read(folder / name)
    nb.cells = [c for c in nb.cells if c.id in ids]
    NotebookClient(nb, km=colab(), timeout=120, startup_timeout=600, allow_errors=True,
                   resources={'metadata': {'path': str(folder)}}).execute()
    return next(c for c in nb.cells if c.id == 'data')


def error(cell):
    return next((o for o in cell.outputs if o.output_type == 'error'), None)


@with_data
def test_data_cell_rejects_a_corrupted_download_and_saves_nothing(notebook, tmp_path, server, monkeypatch, colab):
    aid, name = notebook
    folder = fresh_folder(tmp_path, aid, name)
    err = error(run_data_cell(folder, name, f'{server}/corrupted.txt', monkeypatch, colab))
    assert err and err.ename == 'RuntimeError' and 'wrong sha256' in err.evalue and 'nothing was saved' in err.evalue, err
    assert '\n' not in err.evalue, f'expected a one-line message; got:\n{err.evalue}'
    assert sorted(p.name for p in folder.iterdir()) == [name], 'a corrupted download left a file behind'


@with_data
def test_data_cell_says_how_to_provide_the_file_when_the_url_is_unreachable(notebook, tmp_path, monkeypatch, colab):
    aid, name = notebook
    folder = fresh_folder(tmp_path, aid, name)
    url = f'http://127.0.0.1:{free_port()}/input.txt'  # nothing listens there
    err = error(run_data_cell(folder, name, url, monkeypatch, colab))
    assert err and err.ename == 'RuntimeError' and 'could not download' in err.evalue, err
    assert 'next to this notebook as input.txt' in err.evalue, err.evalue
    assert '\n' not in err.evalue, f'expected a one-line message; got:\n{err.evalue}'
    assert sorted(p.name for p in folder.iterdir()) == [name], 'a failed download left a file behind'


# Standard-library modules that Python 3.12 (Colab's past runtime) or 3.13 (Colab's) removed (PEP 594, PEP 632): the Colab
# tests run on the course's Python 3.11, where they still import, so a notebook that used one would pass here and fail there.
REMOVED = {'aifc', 'asynchat', 'asyncore', 'audioop', 'cgi', 'cgitb', 'chunk', 'crypt', 'distutils', 'imghdr', 'imp',
           'lib2to3', 'mailcap', 'msilib', 'nis', 'nntplib', 'ossaudiodev', 'pipes', 'smtpd', 'sndhdr', 'spwd', 'sunau',
           'telnetlib', 'uu', 'xdrlib'}


def test_notebooks_import_nothing_that_colabs_python_removed(notebook):
    import ast

    aid, name = notebook
    used = set()
    for cell in read(ROOT / 'source' / aid / name).cells:
        if cell.cell_type == 'code':
            code = '\n'.join(line for line in cell.source.splitlines() if not line.lstrip().startswith(('%', '!')))
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Import):
                    used |= {a.name.split('.')[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    used.add(node.module.split('.')[0])
    assert not used & REMOVED, f'{name} imports {sorted(used & REMOVED)}, which Colab\'s Python 3.13 no longer has'
