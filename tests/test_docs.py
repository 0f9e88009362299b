"""The docs' pictures (tests/support/docpictures.py): each exists, is linked from a docs page, and is no older than the files
whose look it shows: a file whose content is not what docs/pictures/pictures.json recorded when the picture was taken
fails here, naming both; `make pictures` refreshes the pictures and the record from the browser tests."""

import json
import re

import pytest

from support.docpictures import MANIFEST, PICTURES, ROOT, digest, manifest


def linked_pictures():
    return {str((page.parent / link).resolve().relative_to(ROOT))
            for page in (ROOT / 'docs').glob('*.md')
            for link in re.findall(r'!\[[^\]]+\]\(([^)\s]+\.png)\)', page.read_text())}


def test_every_docs_picture_exists_and_is_shown_by_a_docs_page_with_alt_text():
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / 'docs').rglob('*.png')}
    assert on_disk == set(PICTURES), (f'docs pictures on disk {sorted(on_disk)}; tests/support/docpictures.py names '
                                      f'{sorted(PICTURES)}: add the new one there, or remove the old one')
    unlinked = set(PICTURES) - linked_pictures()
    assert not unlinked, f'no docs page shows {sorted(unlinked)} (with alt text: ![what it shows](path))'


@pytest.mark.parametrize('picture', sorted(PICTURES))
def test_docs_picture_is_no_older_than_what_it_shows(picture):
    assert MANIFEST.is_file(), f'{MANIFEST.relative_to(ROOT)} is missing: run make pictures, then commit what it writes'
    taken = json.loads(MANIFEST.read_text()).get(picture)
    assert taken, f'{MANIFEST.relative_to(ROOT)} has no record of {picture}: run make pictures, then commit what it writes'
    assert taken['picture'] == digest(picture), (f'{picture} is not the picture {MANIFEST.relative_to(ROOT)} records: '
                                                 'run make pictures rather than editing either by hand')
    now = manifest([picture])[picture]['shows']
    stale = sorted(path for path in set(now) | set(taken['shows']) if now.get(path) != taken['shows'].get(path))
    assert not stale, (f'{picture} is older than what it shows: {stale} changed after it was taken; '
                       'run make pictures and commit the pictures it writes')
