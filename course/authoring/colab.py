"""Colab as it really is: a profile of the packages a Colab student's notebook imports or runs under, pinned to Colab's
published versions (colab-profile.txt), and a virtualenv built from it, whose kernel the tests run the notebooks in.

  python -m course.authoring.colab update ../shared/colab/pip-freeze.txt
      rewrite colab-profile.txt from Colab's `pip freeze`
  python -m course.authoring.colab venv
      build (or reuse) the profile's virtualenv, print its python

The profile is a requirements file of exact pins, each with a comment saying where its version came from: Colab's list,
a stand-in where Colab's build cannot be had here (torch), or pip's choice for a package Colab's list does not have. It
is built with this machine's Python 3.11: Colab's 3.13 cannot be had here (the header says so).
"""

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from course.layout import ROOT

PROFILE = ROOT / 'colab-profile.txt'
VENV = ROOT / '.build' / 'colab-venv'
# What a notebook of this course imports (torch, matplotlib, numpy through both, IPython.display) and the kernel it runs
# in (ipykernel, and the jupyter_client and traitlets it talks through); pip adds what they depend on.
ROOTS = ('torch', 'matplotlib', 'numpy', 'ipython', 'ipykernel', 'jupyter_client', 'traitlets')
# Where Colab's version cannot be used here: the version used instead (None: pip's choice) and why.
STAND_INS = {
    'torch': ('2.13.0', "Colab's is 2.11.0+cpu for Python 3.13, from download.pytorch.org, which this machine cannot "
                        "reach; the course's own CPU build (requirements.txt) stands in"),
    'setuptools': (None, 'Colab has 75.2.0, but torch 2.13.0 (the stand-in) requires setuptools >= 77.0.3'),
}
PIN = re.compile(r'^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$')


def canonical(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def read_freeze(path):
    """{canonical name: (name, version)} of the `name==version` lines of a pip freeze (direct URLs, `name @ url`, aside)."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        m = PIN.match(line.strip())
        if m:
            pins[canonical(m[1])] = (m[1], m[2])
    return pins


def colab_python(freeze):
    """Colab's Python version, from os-info.txt next to its pip freeze ('Python 3.13.15'), or None."""
    info = Path(freeze).with_name('os-info.txt')
    found = re.search(r'^Python (\S+)$', info.read_text(), re.M) if info.exists() else None
    return found and found[1]


def resolve(pins):
    """[(name, version)] that pip installs for ROOTS under these pins (a dry run: nothing is installed)."""
    with tempfile.TemporaryDirectory() as tmp:
        constraints, report = Path(tmp) / 'constraints.txt', Path(tmp) / 'report.json'
        constraints.write_text(''.join(f'{name}=={version}\n' for name, version in pins.values()))
        done = subprocess.run([sys.executable, '-m', 'pip', 'install', '--dry-run', '--ignore-installed', '--quiet',
                               '--disable-pip-version-check', '--report', str(report), '-c', str(constraints), *ROOTS],
                              capture_output=True, text=True)
        if done.returncode:
            sys.exit(f'error: pip cannot resolve {" ".join(ROOTS)} under Colab\'s versions:\n{done.stderr.strip()}')
        installs = json.loads(report.read_text())['install']
    return sorted(((i['metadata']['name'], i['metadata']['version'].split('+')[0]) for i in installs),
                  key=lambda p: canonical(p[0]))


def update(freeze, origin, profile=PROFILE):
    """Rewrite the profile from Colab's pip freeze: ROOTS and what they depend on, at Colab's versions where it has them."""
    colab = read_freeze(freeze)
    pins = {k: v for k, v in colab.items() if k not in STAND_INS}
    pins.update({k: (k, version) for k, (version, _) in STAND_INS.items() if version})
    here = '.'.join(map(str, sys.version_info[:2]))
    digest = hashlib.sha256(Path(freeze).read_bytes()).hexdigest()
    lines = ["# Colab's runtime, as the course's Colab tests install it (tests/test_colab.py). Generated: do not edit;",
             '# update with `python -m course.authoring.colab update PATH/pip-freeze.txt --origin "..."`',
             '# (course/authoring/colab.py).',
             f'# Versions from: {origin} (pip-freeze.txt, sha256 {digest[:16]}...).',
             f'# Python: Colab has {colab_python(freeze) or "(os-info.txt not found)"}; built here with the machine\'s '
             f'Python {here}, as Colab\'s cannot be had here.',
             f'# The packages a notebook imports or runs under ({", ".join(ROOTS)}) and everything they depend on.']
    for name, version in resolve(pins):
        key = canonical(name)
        if key in STAND_INS:
            why = f'stand-in: {STAND_INS[key][1]}'
        elif key in colab:
            why = 'Colab'
        else:
            why = "not in Colab's list: pip's choice"
        lines.append(f'{name}=={version}  # {why}')
    profile.write_text('\n'.join(lines) + '\n')
    return profile


def venv(path=VENV, profile=PROFILE):
    """The python of a virtualenv at path with exactly the profile installed: reused when it was built from this profile
    by this Python, else built anew (a lock keeps two test workers from building it at once)."""
    from filelock import FileLock

    path = Path(path)
    stamp = hashlib.sha256(profile.read_bytes() + sys.version.encode()).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f'{path}.lock'):
        if (path / '.profile').exists() and (path / '.profile').read_text() == stamp:
            return path / 'bin' / 'python'
        subprocess.run([sys.executable, '-m', 'venv', '--clear', str(path)], check=True)
        # --no-compile: each module is compiled when first imported, not all of torch's at install (half the time)
        done = subprocess.run([path / 'bin' / 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-compile',
                               '-r', str(profile)], capture_output=True, text=True)
        if done.returncode:
            sys.exit(f'error: could not install {profile.name} into {path}:\n{done.stderr.strip()}')
        (path / '.profile').write_text(stamp)
    return path / 'bin' / 'python'


def kernelspec(python, folder, name='colab', exec_lines=()):
    """A kernelspec folder (folder/kernels/name/kernel.json) for an ipykernel run by python; exec_lines run first."""
    spec = folder / 'kernels' / name
    spec.mkdir(parents=True, exist_ok=True)
    argv = [str(python), '-m', 'ipykernel_launcher', '-f', '{connection_file}']
    if exec_lines:
        argv.append(f'--IPKernelApp.exec_lines={json.dumps(list(exec_lines))}')
    (spec / 'kernel.json').write_text(json.dumps({'argv': argv, 'display_name': f'Colab profile ({name})',
                                                  'language': 'python'}))
    return folder


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python -m course.authoring.colab', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='verb', required=True)
    up = sub.add_parser('update', help="rewrite colab-profile.txt from Colab's pip freeze")
    up.add_argument('freeze', help="Colab's pip-freeze.txt (from googlecolab/backend-info; os-info.txt beside it)")
    up.add_argument('--origin', default='googlecolab/backend-info, commit a724079 (2026-08-19)',
                    help='where the freeze comes from, as the profile header should say')
    sub.add_parser('venv', help="build (or reuse) the profile's virtualenv in .build/colab-venv and print its python")
    args = ap.parse_args(argv)
    if args.verb == 'update':
        if not Path(args.freeze).is_file():
            sys.exit(f'error: {args.freeze} not found: pass the path of Colab\'s pip-freeze.txt')
        print(f'wrote {update(args.freeze, args.origin)}')
    else:
        print(venv())


if __name__ == '__main__':
    main()
