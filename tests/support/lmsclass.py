"""LMS bulk downloads for tests/test_lms.py, named as each LMS documents its naming: Canvas's "Download Submissions"
(<lastnamefirstname>_[LATE_]<user id>_<attachment id>_<file name>, every file at the top) and Moodle's "Download all
submissions" (<Full Name>_<participant id>_assignsubmission_file_/<file name>), holding what a Colab class sends."""

import csv
import struct
import zipfile
from typing import NamedTuple

import nbformat

from course.authoring.demo import solved
from course.cells import read
from course.layout import ROOT, notebooks, steps

STEP = steps()[0]
NOTEBOOK = notebooks(STEP)[0]
STEM = NOTEBOOK.removesuffix('.ipynb')


class Person(NamedTuple):
    id: str
    first: str
    last: str
    lms_id: str


ALICE, BOB, CAROL, DAVE, ERIN, FRANK = (
    Person('alice', 'Alice', 'Ashby', '101'), Person('bob', 'Bob', 'Brown', '102'), Person('carol', 'Carol', 'Chen', '103'),
    Person('dave', 'Dave', 'Diaz', '104'), Person('erin', 'Erin', 'Eze', '105'), Person('frank', 'Frank', 'Fox', '106'))
ROSTER = (ALICE, BOB, CAROL, DAVE, ERIN, FRANK)
MALLORY = Person('mallory', 'Mallory', 'Moss', '999')  # sends work, is not on the roster


def write_roster(path, people=ROSTER):
    with open(path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['id', 'first_name', 'last_name', 'email', 'lms_id'])
        for p in people:
            w.writerow([p.id, p.first, p.last, f'{p.id}@example.edu', p.lms_id])
    return path


def notebook(who, kind='release'):
    """A notebook's bytes: the release or the solved notebook, marked with who sent it (metadata), to tell files apart."""
    nb = solved(STEP, NOTEBOOK) if kind == 'solved' else read(ROOT / 'release' / STEP / NOTEBOOK)
    nb.metadata['sent_by'] = who
    return nbformat.writes(nb).encode()


def canvas(p, attachment, name, late=False):
    return f'{(p.last + p.first).lower()}_{"LATE_" if late else ""}{p.lms_id}_{attachment}_{name}'


def moodle(p, name):
    return f'{p.first} {p.last}_{p.lms_id}_assignsubmission_file_/{name}'


def write_zip(path, entries):
    """A zip of {name: bytes} (stored, as LMSs write notebooks)."""
    with zipfile.ZipFile(path, 'w') as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def canvas_download(path):
    """A Canvas download of the class: Alice's Colab copy on time; Bob twice (the later upload, attachment 500, wins);
    Carol late (Canvas's LATE mark), with spaces for underscores; Dave a PDF only; Frank an Untitled notebook; Mallory,
    not on the roster; Erin nothing."""
    return write_zip(path, {
        canvas(ALICE, 311, f'Copy of {NOTEBOOK}'): notebook('alice'),
        canvas(BOB, 400, NOTEBOOK): notebook('bob-old'),
        canvas(BOB, 500, f'{STEM} (1).ipynb'): notebook('bob-new'),
        canvas(CAROL, 420, f'{STEM.replace("_", " ")}.ipynb', late=True): notebook('carol'),
        canvas(DAVE, 430, 'my notes.pdf'): b'%PDF-1.4\n%stray\n',
        canvas(FRANK, 440, 'Untitled0.ipynb'): notebook('frank'),
        canvas(MALLORY, 450, NOTEBOOK): notebook('mallory'),
    })


def moodle_download(path, bob_twice=True):
    """The same class from Moodle: folders per student; Bob's two files (no times in the download), Carol late only by
    the instructor's times."""
    entries = {
        moodle(ALICE, f'Copy of {NOTEBOOK}'): notebook('alice'),
        moodle(CAROL, f'{STEM.replace("_", " ")}.ipynb'): notebook('carol'),
        moodle(DAVE, 'my notes.pdf'): b'%PDF-1.4\n%stray\n',
        moodle(FRANK, 'Untitled0.ipynb'): notebook('frank'),
        moodle(MALLORY, NOTEBOOK): notebook('mallory'),
        moodle(BOB, f'{STEM} (1).ipynb'): notebook('bob-new'),
    }
    if bob_twice:
        entries[moodle(BOB, NOTEBOOK)] = notebook('bob-old')
    return write_zip(path, entries)


def claims_size(path, name, size):
    """Rewrite the zip at path so that its entry name claims size bytes (central directory and local header), without
    writing them: what a zip bomb's directory says."""
    data = bytearray(path.read_bytes())
    encoded = name.encode()
    for sig, size_at, name_at in ((b'PK\x01\x02', 24, 46), (b'PK\x03\x04', 22, 30)):
        at = data.find(sig)
        while at >= 0 and data[at + name_at:at + name_at + len(encoded)] != encoded:
            at = data.find(sig, at + 1)
        assert at >= 0, f'no {sig} header for {name}'
        struct.pack_into('<I', data, at + size_at, size)
    path.write_bytes(bytes(data))
    return path


def symlink_entry(path, name, target):
    """Add to the zip at path an entry that is a symlink (Unix mode in its external attributes) to target."""
    info = zipfile.ZipInfo(name)
    info.external_attr = (0o120777 << 16)
    with zipfile.ZipFile(path, 'a') as z:
        z.writestr(info, target)
    return path
