"""Put a verified Tiny Shakespeare at input.txt: copy it from --from PATH, or download it from course.toml's URL.

  python -m course.authoring.data [--from PATH] [--dest PATH]   (make data)
"""

import argparse
import hashlib
import http.client
import shutil
import sys
import urllib.request
from pathlib import Path

from course.layout import ROOT
from course.settings import load

DATA = load().data  # course.toml's [data]: url, sha256


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fetch(dest, source=None, url=DATA.url, want=DATA.sha256):
    """Verify dest if it exists; else copy source (a path) or download url to dest.part, verify, and rename it to dest."""
    dest = Path(dest)
    if dest.exists():
        if sha256(dest) != want:
            sys.exit(f'error: {dest} exists but is not Tiny Shakespeare (wrong sha256); move it away and run make data again.')
        return 'verified'
    part = dest.with_name(dest.name + '.part')
    try:
        if source:
            shutil.copyfile(source, part)
        else:
            urllib.request.urlretrieve(url, part)
    except (OSError, http.client.HTTPException) as e:  # a missing file, no network, a refused or cut-off download
        part.unlink(missing_ok=True)
        where = source or url
        sys.exit(f'error: could not get Tiny Shakespeare from {where} ({e}); pass a local copy with DATA=path/to/input.txt.')
    if sha256(part) != want:
        part.unlink()
        sys.exit(f'error: {source or url} is not Tiny Shakespeare (wrong sha256, want {want}); nothing was written.')
    part.replace(dest)
    return f'copied from {source}' if source else f'downloaded from {url}'


if __name__ == '__main__':
    ap = argparse.ArgumentParser(prog='python -m course.authoring.data', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--from', dest='source', help='a local copy to copy instead of downloading')
    ap.add_argument('--dest', default=ROOT / 'input.txt')
    args = ap.parse_args()
    print(f'{args.dest}: Tiny Shakespeare, sha256 ok ({fetch(args.dest, args.source)})')
