"""A local HTML page opened in headless Chromium (Debian's, via Playwright) as a reader would open it, with a record of
everything it did: console messages (a script's output, a Content-Security-Policy refusal), dialogs, requests, and what
its DOM holds once loaded; and a full-page screenshot. Also the JupyterLab journeys' shared helpers (the Head exercise of
the reference step, typed into the notebook), for tests/test_browser.py and tests/hub/test_hub.py."""

import os
import re
from pathlib import Path

import pytest

from course.cells import MARKER, read, role
from course.layout import ROOT, notebooks
from support import REFERENCE_STEP

CHROMIUM = '/usr/bin/chromium'
# Headless, and quiet: without the background-networking flags Chromium calls home, which this closed network refuses.
CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                 '--disable-background-networking', '--disable-component-update', '--disable-sync',
                 # offline, as the tests' machines are, but at once: no name but loopback resolves (an external image of a
                 # page, the Colab badge, fails now instead of waiting on a resolver or a connection that may never answer)
                 '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost']

# What the loaded page holds: any script element, any element with an event-handler attribute, every image, a global a
# hostile script would set, the text a reader sees, and all its text (closed <details> too).
DOM_FACTS = """() => ({
  scripts: document.querySelectorAll('script').length,
  handlers: [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].filter(a => a.name.startsWith('on'))
                                                               .map(a => e.tagName + ' ' + a.name)),
  images: [...document.images].map(i => ({src: i.src.slice(0, 22), alt: i.alt, width: i.naturalWidth})),
  pwned: window.pwned === undefined ? null : String(window.pwned),
  text: document.body.innerText,
  all_text: document.body.textContent,
})"""


def chromium():
    """Debian's chromium, or the calling test skipped, saying why (`make system` installs it as root: set-up, not a
    test's job)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"needs Debian's chromium at {CHROMIUM}: as root, `make system` (apt-get install chromium)")
    return CHROMIUM


def open_page(path, shot, full_page=True):
    """Open the file at path, screenshot it to shot (the whole page, or its first 1600 pixels: a long page takes Chromium
    minutes on a busy machine); return {'console', 'dialogs', 'requests', **DOM_FACTS}."""
    from playwright.sync_api import sync_playwright

    seen = {'console': [], 'dialogs': [], 'requests': []}
    Path(shot).parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={'width': 1200, 'height': 900 if full_page else 1600})
            page.set_default_timeout(300_000)  # a loaded machine is slow, not wrong
            page.on('console', lambda m: seen['console'].append(f'{m.type}: {m.text}'))
            page.on('dialog', lambda d: (seen['dialogs'].append(d.message), d.dismiss()))
            page.on('request', lambda r: seen['requests'].append(r.url[:80]))
            page.goto(Path(path).resolve().as_uri(), wait_until='load')
            seen.update(page.evaluate(DOM_FACTS))
            page.screenshot(path=shot, full_page=full_page)
        finally:
            browser.close()
    seen['requests'] = [u for u in seen['requests'] if u != Path(path).resolve().as_uri()[:80]]
    return seen


# The JupyterLab journeys (tests/test_browser.py, tests/hub/test_hub.py): the step they are scripted on, its first exercise
# (Head), and typing the source's solution into it.
STUB = 'NotImplementedError: replace this line with your code'
AID = REFERENCE_STEP  # the journeys are scripted on the step the docs' pictures show
NAME = notebooks(AID)[0]
NOTEBOOK = NAME.removesuffix('.ipynb')
RELEASE = read(ROOT / 'release' / AID / NAME).cells
HEAD = next(i for i, c in enumerate(RELEASE) if role(c) == 'solution')  # the first exercise: the Head class
NEXT = next(i for i, c in enumerate(RELEASE) if i > HEAD and role(c) == 'solution')  # the exercise after it
HEAD_TESTS = [i for i, c in enumerate(RELEASE[:NEXT]) if role(c) == 'test']  # run before the next exercise
TESTS = [i for i, c in enumerate(RELEASE) if role(c) == 'test']
LOCKED = HEAD_TESTS[0]
SOURCE = next(c.source for c in read(ROOT / 'source' / AID / NAME).cells if c.id == RELEASE[HEAD].id)
SOLUTION = MARKER.sub('', SOURCE)  # the Head cell as the student should end up with it
SOLVED = re.findall(r'^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION', SOURCE, re.M | re.S)  # what they type



def painted_screenshot(page, path):
    """Screenshot page (or a tab) to path once the browser has painted what it last laid out."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    page.evaluate('() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))')
    page.screenshot(path=path)


def shooter(folder):
    """shoot(page, name): a journey's screenshot of page, once painted, to folder/<name>.png."""
    return lambda page, name: painted_screenshot(page, Path(folder) / f'{name}.png')


def menu(page, top, item):
    page.locator('.lm-MenuBar-itemLabel', has_text=re.compile(f'^{top}$')).click()
    page.locator('.lm-Menu-itemLabel', has_text=re.compile(f'^{re.escape(item)}$')).click()


def cell(page, i):
    return page.locator(f'.jp-Notebook .jp-Cell[data-windowed-list-index="{i}"]')


def type_lines(page, text):
    """Type text key by key; after each Enter, select CodeMirror's auto-indent so the line's own indentation replaces it."""
    for n, line in enumerate(text.split('\n')):
        if n:
            page.keyboard.press('Enter')
            page.keyboard.press('Shift+Home')
        page.keyboard.type(line)


def fill_in(page, i):
    """In cell i, replace each stub (# YOUR CODE HERE and the raise below it) by the source's solution, typed, last one first."""
    lines = RELEASE[i].source.split('\n')
    stubs = [n for n, line in enumerate(lines) if line.strip() == '# YOUR CODE HERE']
    cell(page, i).locator('.cm-content').click()
    for n, body in reversed(list(zip(stubs, SOLVED, strict=True))):
        page.keyboard.press('Control+Home')
        for _ in range(n - 1):
            page.keyboard.press('ArrowDown')
        page.keyboard.press('End')  # select from the end of the line above the stub to the end of the raise line
        page.keyboard.press('Shift+ArrowDown')
        page.keyboard.press('Shift+ArrowDown')
        page.keyboard.press('Shift+End')
        type_lines(page, '\n' + body.rstrip('\n'))
