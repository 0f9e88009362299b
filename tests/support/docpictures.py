"""The docs' pictures are screenshots the browser tests take: `make pictures` runs those tests and copies each shot below
from test-artifacts/ into docs/pictures/. Each picture names the files whose look it shows, and docs/pictures/pictures.json
records, when the pictures are taken, the content hash of each picture and of each file it shows; tests/test_docs.py
fails when one of those files no longer has the content it had then (the picture is older than what it shows). By
content, not by commit: a picture taken again that comes out the same, byte for byte, is still current.

  PYTHONPATH=tests python -m support.docpictures     copy the shots of the last browser run into docs/pictures/
"""

import hashlib
import json
import shutil
import sys
from pathlib import Path

from course.layout import notebooks
from support import REFERENCE_STEP

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / 'docs' / 'pictures' / 'pictures.json'
STEP, NAME = REFERENCE_STEP, notebooks(REFERENCE_STEP)[0]  # the step the journeys that take them are scripted on
# docs picture: (the screenshot it is copied from, the files whose look it shows)
PICTURES = {
    'docs/pictures/student-run-all.png': (
        'test-artifacts/browser/04-student-run-all.png',
        (f'release/{STEP}/{NAME}', 'requirements.txt')),
    'docs/pictures/formgrader-submissions.png': (
        'test-artifacts/browser/07-formgrader-submissions.png',
        (f'source/{STEP}/{NAME}', 'nbgrader_config.py', 'requirements.txt')),
    'docs/pictures/feedback-mistake.png': (
        'test-artifacts/browser/11-feedback-demo-mistake.png',
        (f'source/{STEP}/{NAME}', f'source/{STEP}/instructor/bank.py', 'course/reports/feedback.py',
         'nbgrader_config.py')),
    'docs/pictures/class-report.png': (
        'test-artifacts/browser/13-class-report.png',
        ('course/reports/classreport.py', f'source/{STEP}/{NAME}')),
}
# Each step's first screen, as a student opens its release in JupyterLab (tests/test_browser.py's first_screens).
PICTURES.update({f'docs/pictures/first-screen-{release.parent.name}.png': (
    f'test-artifacts/browser/00-first-screen-{release.parent.name}.png', (str(release.relative_to(ROOT)),))
    for release in (sorted((ROOT / 'release' / step.name).glob('*.ipynb'))[0] for step in sorted((ROOT / 'source').iterdir())
                    if any(step.glob('*.ipynb')))})


def main():
    missing = [shot for shot, _ in PICTURES.values() if not (ROOT / shot).exists()]
    if missing:
        sys.exit(f'error: {missing[0]} missing: run the browser tests first (make pictures runs them, then this)')
    for picture, (shot, _) in PICTURES.items():
        (ROOT / picture).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / shot, ROOT / picture)
        print(f'{picture} <- {shot}')
    MANIFEST.write_text(json.dumps(manifest(), indent=1, sort_keys=True) + '\n')
    print(f'{MANIFEST.relative_to(ROOT)}: what each picture shows, as it was when taken')


def digest(path):
    """The sha256 of a file's bytes."""
    return hashlib.sha256((ROOT / path).read_bytes()).hexdigest()


def manifest(pictures=PICTURES):
    """{picture: {'picture': its sha256, 'shows': {path: sha256}}} for the pictures (default: all) and the files they
    show, as they are."""
    return {picture: {'picture': digest(picture), 'shows': {path: digest(path) for path in PICTURES[picture][1]}}
            for picture in pictures}


if __name__ == '__main__':
    main()
