"""The Makefile's set-up: a Python the course cannot use is refused at once, in one line that says what was
found and what to install, before any venv or pip install starts."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from packaging.specifiers import SpecifierSet

from course.layout import ROOT

# A stand-in for another Python: this one, reporting the version given on its command line to the code it runs with -c.
FAKE = '''#!/bin/sh
exec "{python}" -c '
import sys, collections
V = collections.namedtuple("version_info", "major minor micro releaselevel serial")
sys.version_info = V({major}, {minor}, 0, "final", 0)
code = sys.argv[2]
sys.argv = ["-c", *sys.argv[3:]]
exec(compile(code, "<string>", "exec"))
' "$@"
'''


@pytest.mark.parametrize('version', [(3, 12), (3, 10)])
def test_another_python_is_refused_before_any_venv_with_one_line(tmp_path, version):
    if not shutil.which('make'):
        pytest.skip('no make on PATH')
    for name in ('Makefile', 'requirements.txt'):
        shutil.copy(ROOT / name, tmp_path / name)
    fake = tmp_path / 'python-other'
    fake.write_text(FAKE.format(python=sys.executable, major=version[0], minor=version[1]))
    fake.chmod(0o755)
    done = subprocess.run(['make', '-s', f'PYTHON={fake}', '.venv/.installed'], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    errors = [line for line in done.stderr.splitlines() if line.startswith('error:')]
    assert done.returncode != 0 and len(errors) == 1, (
        f'expected make to stop with one error line for Python {version}; exit {done.returncode}, stderr:\n{done.stderr}')
    line = errors[0]
    assert f'{version[0]}.{version[1]}.0' in line and 'Python 3.11' in line and 'PYTHON=' in line, (
        f'the line should say what was found ({version[0]}.{version[1]}.0), what is needed (Python 3.11) and how to '
        f'pick one (PYTHON=...); got: {line}')
    # before any venv or pip work (what made it take seconds): no venv was made. Not timed: a loaded machine is slow.
    assert not (tmp_path / '.venv').exists(), 'a refused Python must not leave a venv behind'


def phony_verbs(makefile):
    """The Makefile's verbs: the targets .PHONY names (continued lines joined)."""
    text = makefile.read_text().replace('\\\n', ' ')
    return next(line.split(':', 1)[1].split() for line in text.splitlines() if line.startswith('.PHONY:'))


def test_make_help_lists_every_verb_with_its_description():
    """`make help` (and a bare `make`) prints each verb of .PHONY with its ## description from the Makefile, one a line."""
    if not shutil.which('make'):
        pytest.skip('no make on PATH')
    verbs = phony_verbs(ROOT / 'Makefile')
    for args in (['help'], []):
        done = subprocess.run(['make', '-s', *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        listed = {line.split()[1]: line.split(None, 2)[2] for line in done.stdout.splitlines() if line.startswith('  make ')}
        assert set(listed) == set(verbs), f'make {" ".join(args)} lists {sorted(listed)}; the verbs are {sorted(verbs)}'
        assert all(len(text) > 15 for text in listed.values()), listed
    assert 'back up the class' in listed['backup'], listed['backup']


def test_the_instructors_install_takes_the_cpu_build_of_torch(tmp_path):
    """The Makefile installs torch alone first, from PyTorch's CPU index, then requirements.txt: pip itself, offline,
    offered torch 2.13.0 (PyPI's: on Linux, the CUDA build) and 2.13.0+cpu for that command, takes the CPU build; and
    2.13.0+cpu satisfies requirements.txt's pin, so the second command keeps it. TORCH_INDEX picks another index."""
    if not shutil.which('make'):
        pytest.skip('no make on PATH')
    for name in ('Makefile', 'requirements.txt'):
        shutil.copy(ROOT / name, tmp_path / name)
    plan = subprocess.run(['make', '-n', f'PYTHON={sys.executable}', '.venv/.installed'], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60).stdout.splitlines()
    pip = [line for line in plan if ' install ' in line and '/pip ' in line]
    assert len(pip) == 2 and '--extra-index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"' in pip[0] \
        and '--no-deps' in pip[0] and pip[1].endswith('-r requirements.txt'), pip
    cuda = subprocess.run(['make', '-n', f'PYTHON={sys.executable}', 'TORCH_INDEX=https://download.pytorch.org/whl/cu128',
                           '.venv/.installed'], cwd=tmp_path, capture_output=True, text=True, timeout=60).stdout
    assert '--extra-index-url https://download.pytorch.org/whl/cu128 "torch==2.13.0"' in cuda
    pin = next(line.split('#')[0].strip() for line in (ROOT / 'requirements.txt').read_text().splitlines()
               if line.startswith('torch=='))
    assert SpecifierSet(pin.removeprefix('torch')).contains('2.13.0+cpu'), f'{pin} would not keep 2.13.0+cpu installed'
    wheels = tmp_path / 'wheels'
    wheels.mkdir()
    for version in ('2.13.0', '2.13.0+cpu'):
        info = f'torch-{version}.dist-info'
        with zipfile.ZipFile(wheels / f'torch-{version}-py3-none-any.whl', 'w') as z:
            z.writestr(f'{info}/METADATA', f'Metadata-Version: 2.1\nName: torch\nVersion: {version}\n')
            z.writestr(f'{info}/WHEEL', 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
            z.writestr(f'{info}/RECORD', '')
    # the Makefile's command, with the index it names replaced by the local folder standing in for it (no network)
    command = pip[0].split('--extra-index-url')[1].split()[1].strip('"')
    env = {k: v for k, v in os.environ.items() if not k.startswith('PIP_')} | {'PIP_CONFIG_FILE': os.devnull}
    done = subprocess.run([sys.executable, '-m', 'pip', 'install', '--dry-run', '--no-deps', '--ignore-installed',
                           '--no-index', '--find-links', str(wheels), '--report', str(tmp_path / 'report.json'), '--quiet',
                           command], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    chosen = [i['metadata']['version'] for i in json.loads((tmp_path / 'report.json').read_text())['install']]
    assert chosen == ['2.13.0+cpu'], chosen
