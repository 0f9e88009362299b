"""The docs' pictures (tests/docpictures.py): each exists, is linked from a docs page, and is no older than the files
whose look it shows: a commit that changed one of them and that the picture's own commit does not contain fails here,
naming both; `make pictures` refreshes them from the browser tests."""

import re
import subprocess

import pytest
from docpictures import PICTURES, ROOT


def git(*args):
    return subprocess.run(['git', '-C', str(ROOT), *args], capture_output=True, text=True)


def last_commit(path):
    return git('log', '-1', '--format=%H', '--', path).stdout.strip()


def linked_pictures():
    return {str((page.parent / link).resolve().relative_to(ROOT))
            for page in (ROOT / 'docs').glob('*.md')
            for link in re.findall(r'!\[[^\]]+\]\(([^)\s]+\.png)\)', page.read_text())}


def test_every_docs_picture_exists_and_is_shown_by_a_docs_page_with_alt_text():
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / 'docs').rglob('*.png')}
    assert on_disk == set(PICTURES), (f'docs pictures on disk {sorted(on_disk)}; tests/docpictures.py names '
                                      f'{sorted(PICTURES)}: add the new one there, or remove the old one')
    unlinked = set(PICTURES) - linked_pictures()
    assert not unlinked, f'no docs page shows {sorted(unlinked)} (with alt text: ![what it shows](path))'


@pytest.mark.parametrize('picture', sorted(PICTURES))
def test_docs_picture_is_no_older_than_what_it_shows(picture):
    if git('rev-parse', '--is-shallow-repository').stdout.strip() != 'false':
        pytest.skip('needs the git history (not a git checkout, or a shallow clone)')
    taken = last_commit(picture)
    assert taken, f'{picture} is not committed: run make pictures, then commit it'
    stale = [(path, commit[:10]) for path in PICTURES[picture][1]
             if (commit := last_commit(path)) and git('merge-base', '--is-ancestor', commit, taken).returncode != 0]
    assert not stale, (f'{picture} (commit {taken[:10]}) is older than what it shows: {stale} changed after it; '
                       'run make pictures and commit the pictures it writes')
