"""What must never reach a student, as the leak tests look for it: the lines of a source notebook's hidden tests that it
shows nowhere else (hidden_lines), and a page's text as a reader sees it (page_text). Used by tests/test_generated.py
(the release), tests/test_grading.py and tests/test_submissions.py (the feedback pages of a graded class)."""

import html
import re

from course.cells import read
from course.layout import ROOT

REGION = re.compile(r'^[ \t]*### BEGIN (SOLUTION|HIDDEN TESTS)[ \t]*\n(.*?)^[ \t]*### END \1', re.M | re.S)


def hidden_lines(step, name, root=ROOT):
    """The lines of the hidden tests of a source notebook whose code appears nowhere else in it: not in a visible cell,
    nor in a solution (a student may write it), comments aside. What must never leak."""
    cells = read(root / 'source' / step / name).cells
    elsewhere = [REGION.sub('', c.source) for c in cells]
    elsewhere += [body for c in cells for kind, body in REGION.findall(c.source) if kind == 'SOLUTION']
    shown = {code_of(line).strip() for text in elsewhere for line in lines(text)}
    hidden = set().union(*(lines(body) for c in cells for kind, body in REGION.findall(c.source) if kind == 'HIDDEN TESTS'))
    # long enough to tell, and not inside a line students see (Step 6's hidden `train_data, val_data = saved` is a part of
    # its visible `data, train_data, val_data = saved`: finding it in a page proves nothing)
    return sorted(line for line in hidden if code_of(line).strip() not in shown and len(line) > 20
                  and not any(code_of(line).strip() in seen for seen in shown))


def lines(text):
    """The stripped lines of text that say something (not blank, not bare punctuation)."""
    return {line.strip() for line in text.splitlines() if re.search(r'\w', line)}


def code_of(line):
    """A line without its comment: everything from the first # that is not inside a string literal."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and line[i - 1] != '\\':
                quote = None
        elif ch in '"\'':
            quote = ch
        elif ch == '#':
            return line[:i]
    return line


def page_text(path):
    """A feedback page's text as a reader sees it: tags (the syntax highlighting splits every line) removed, entities
    decoded; so that a leaked line would appear verbatim."""
    return html.unescape(re.sub(r'<[^>]+>', '', path.read_text()))
