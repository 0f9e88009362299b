"""Damaged, broken and hostile submissions, generated from any step's release and solution, each with its expectation.

Every case is a function (name, release, perfect, fake) -> {file name: bytes or notebook} for submitted/<case>/<step>/,
with the status the grade table must show (a prefix; {solution} stands for the grade_id of the step's first solution
cell) and the autograded points it must get ('full', an exact number, or None where timing decides). fake: the step's
bank's FAKE (optional: code that defines the step's names with every shape right and every number wrong), or ''.

Cases about the submission (damage, repairs, tricks against the tests and the checks) run on every step; cases about the
grader and its sandbox (time limits, memory, processes), whose outcome does not depend on the step, run on the small
synthetic step of tests/support/synthetic.py (one function, two test cells with their checks, a hidden test, a written answer, a
shipped file): each makes the same claim there as on a real step, for a fraction of a real step's run.
"""

import copy
import functools
import json
from typing import Callable, NamedTuple

import nbformat

from course.cells import STUB_LINE, grade_id, role
from support import synthetic


class Case(NamedTuple):
    student: str
    make: Callable  # (name, release, perfect) -> {file name: bytes | notebook}
    status: object  # the grade table's status starts with this (or with one of these, a tuple, where timing decides)
    points: object  # 'full', the exact autograded points, or None (not fixed)
    needs_sandbox: bool = False  # only safe to run inside the sandbox
    # False: about the grader and its repairs, not the step: run on the synthetic step only. Every step gets the cases that
    # its own cells and checks decide: the damaged notebook whose repair must match its cells by content alone, the
    # unreadable ones (no kernel: cheap), and the two hostile notebooks that fake its tests in the kernel and its record.
    every_step: bool = True


def first(nb, kind):
    return next(c for c in nb.cells if role(c) == kind)


def with_code(code, top=False):
    """The perfect submission with code added to its first solution cell (at its top, or after it)."""
    def make(name, release, perfect, fake):
        nb = copy.deepcopy(perfect)
        cell = first(nb, 'solution')
        cell.source = f'{code}\n{cell.source}' if top else f'{cell.source}\n{code}'
        return {name: nb}
    return make


def blank_with_code(code, with_fake=False):
    """The untouched release (no work done) with code put in its first solution cell: a student who only attacks; with
    the step's fake (every shape right, every number wrong) after it, if with_fake."""
    def make(name, release, perfect, fake):
        nb = copy.deepcopy(release)
        cell = first(nb, 'solution')
        cell.source = f'{code}\n{fake if with_fake else ""}\n{cell.source}'
        return {name: nb}
    return make


def edit(fn):
    def make(name, release, perfect, fake):
        nb = copy.deepcopy(perfect)
        return fn(name, nb) or {name: nb}
    return make


def strip_metadata(name, nb):
    for cell in nb.cells:
        cell.metadata.pop('nbgrader', None)


def old_format_without_ids(name, nb):
    data = json.loads(nbformat.writes(nb))
    data['nbformat_minor'] = 4
    for cell in data['cells']:
        cell.pop('id', None)
    return {name: json.dumps(data).encode()}


def strip_metadata_and_ids(name, nb):
    strip_metadata(name, nb)
    return old_format_without_ids(name, nb)


def edit_locked_test(name, nb):
    cell = first(nb, 'test')
    cell.source = cell.source.split('\n')[0] + '\npass  # the student "fixed" the test'


def delete_test(name, nb):
    nb.cells.remove(first(nb, 'test'))


def duplicate_solution(name, nb):
    cell = first(nb, 'solution')
    stub = copy.deepcopy(cell)
    stub.source = STUB_LINE
    stub.id = 'copy-of-' + cell.id
    nb.cells.insert(nb.cells.index(cell), stub)


def solution_to_markdown(name, nb):
    cells = [c for c in nb.cells if role(c) == 'solution']
    i = nb.cells.index(cells[-1])
    md = nbformat.v4.new_markdown_cell(cells[-1].source, metadata=cells[-1].metadata)
    md.metadata['nbgrader']['cell_type'] = 'code'
    nb.cells[i] = md


def insert_and_reorder(name, nb):
    cells = [c for c in nb.cells if role(c) == 'solution']
    moved = cells[-1]
    nb.cells.remove(moved)
    nb.cells.append(moved)  # the last answer moved to the very end, after its tests
    nb.cells.insert(1, nbformat.v4.new_code_cell('my_notes = "scratch work"'))


def renamed_other_kernel(name, nb):
    nb.metadata['kernelspec'] = {'name': 'python3-colab', 'display_name': 'Python 3 (Colab)', 'language': 'python'}
    return {name.replace('.ipynb', ' (1).ipynb'): nb}


def raw(data):
    return lambda name, release, perfect, fake: {name: data}


MARK = 'course-grading-test-marker'  # in the command line of processes a case leaves behind

DAMAGED = [
    Case('damaged_metadata_stripped', edit(strip_metadata), 'graded (', 'full', every_step=False),
    Case('damaged_metadata_and_ids_stripped', edit(strip_metadata_and_ids), 'graded (', 'full'),
    Case('damaged_locked_test_edited', edit(edit_locked_test), 'graded (1 repair)', 'full', every_step=False),
    Case('damaged_test_cell_deleted', edit(delete_test), 'graded (1 repair)', 'full', every_step=False),
    Case('damaged_solution_duplicated', edit(duplicate_solution), 'graded (1 repair)', 'full', every_step=False),
    Case('damaged_answer_turned_markdown', edit(solution_to_markdown), 'graded (1 repair)', 'full', every_step=False),
    Case('damaged_cells_inserted_reordered', edit(insert_and_reorder), 'graded (1 repair)', 'full', every_step=False),
    Case('damaged_old_format_without_ids', edit(old_format_without_ids), 'graded (1 repair)', 'full', every_step=False),
    Case('damaged_renamed_other_kernel', edit(renamed_other_kernel), 'graded (2 repairs)', 'full', every_step=False),
]

FILL_THE_FOLDER = '''
try:
    for i in range(200):
        with open(f'fill-{i}.bin', 'wb') as f:
            f.write(bytes(16 << 20))
except OSError as e:
    print('stopped after', i * 16, 'MiB:', e.strerror)
'''

BROKEN = [
    Case('broken_malformed_json', raw(b'{"cells": [{"cell_type": "code", "sour'), 'unreadable (', 0),
    Case('broken_empty_file', raw(b''), 'unreadable (empty file)', 0),
    Case('broken_missing_notebook', lambda name, r, p, f: {'README.txt': b'I forgot to attach it'}, 'needs attention (no ', 0),
    Case('broken_kernel_exit', with_code('import os\nos._exit(1)', top=True), 'kernel died', 0, every_step=False),
    Case('broken_segfault', with_code('import ctypes\nctypes.string_at(0)', top=True), 'kernel died', 0, every_step=False),
    # interrupted, then the notebook goes on. The loops wait instead of spinning: each meets the class's cell timeout
    # (60 s) as a spinning loop would, without taking a core of the 2-core test machine from the rest of the class for
    # it; the sandbox's tests (tests/test_sandbox.py) interrupt, and kill, loops that spin
    Case('broken_infinite_loop', with_code('import time\nwhile True:\n    time.sleep(1)'), 'timeout (in cell {solution})',
         'full', every_step=False),
    Case('broken_ignores_sigint',
         with_code('import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(1)'),
         'timeout', 0, every_step=False),
    # the memory bomb gets MemoryError at the sandbox's 4 GiB limit; the rest of the notebook runs on. bytes(n) asks for
    # the memory without touching it (calloc): the limit counts it all the same, in no time even on a loaded machine
    Case('broken_memory_bomb', with_code('hog = [bytes(2**28) for _ in range(10**4)]'), 'graded', 'full', True, False),
    Case('broken_20MB_line', with_code("print('x' * 20_000_000)"), 'graded', 'full', every_step=False),
    Case('broken_200k_lines', with_code("print('\\n'.join(map(str, range(200_000))))"), 'graded', 'full', every_step=False),
    # the fork bomb stops at the sandbox's process cap and its cell times out, or its kernel dies first (the kernel's
    # memory cap, under a 60 s cell limit); whether the interrupt gets through, and so how many later cells still find a
    # free process slot, depends on timing: its status is one of two, and its points are not fixed
    Case('broken_fork_bomb', with_code('import os\nwhile True:\n    os.fork()', top=True), ('timeout', 'kernel died'), None,
         True, False),
    # writes into its folder until it cannot (at most 3.2 GB, were there no cap): its folder's cover stops it at
    # policy.FOLDER's size, the notebook goes on, and none of it is left in autograded/ (tests/test_submissions.py)
    Case('hostile_fills_its_folder', with_code(FILL_THE_FOLDER), 'graded', 'full', True, False),
    Case('broken_child_left_running',
         with_code(f"import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 1000 # {MARK}'], start_new_session=True)"),
         'graded', 'full', every_step=False),
]

PATCH_TORCH = '''
import builtins
import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.all = lambda self, *a, **k: torch.tensor(True)
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
builtins.abs = lambda x: 0
'''
TRY_EXCEPT_EVERY_CELL = '''
def _swallow(lines):
    return ['try:\\n'] + ['    ' + line for line in lines] + ['\\n', 'except BaseException:\\n', '    pass\\n']
get_ipython().input_transformers_post.append(_swallow)
'''
SILENCE_TRACEBACKS = '''
from IPython.core.interactiveshell import InteractiveShell
InteractiveShell.showtraceback = lambda *a, **k: None
InteractiveShell.showsyntaxerror = lambda *a, **k: None
'''
FORGE_PROBE = '''
import numpy as np
np.savez = lambda *a, **k: None
np.savez('_probe_out.npz')
with open('_probe_out.npz', 'wb') as f:
    f.write(b'PK not really a record')
'''
TOUCH_THE_COURSE = '''
import glob, os, sqlite3, socket
for path in ('../../../pwned.txt', '../../pwned.txt', '/tmp/pwned-by-student.txt'):
    try:
        open(path, 'w').write('pwned')
    except OSError as e:
        print('write refused:', path, e)
try:
    sqlite3.connect('../../../gradebook.db').execute('create table pwned (x)')
except Exception as e:
    print('gradebook refused:', e)
for path in glob.glob('../../../source/*/*.ipynb') + glob.glob('../../../submitted/*/*/*.ipynb'):
    print('read:', path, open(path).read()[:3000])
try:
    socket.create_connection(('127.0.0.1', PORT), timeout=2)
    print('network reached')
except OSError as e:
    print('network refused:', e)
'''


def touch_the_course(port):
    """TOUCH_THE_COURSE aimed at a real listener on the host's loopback (tests/conftest.py's listener)."""
    return TOUCH_THE_COURSE.replace('PORT', str(port))
LOCK_GRADEBOOK = f'''
import subprocess
subprocess.Popen(['python3', '-c', """
import sqlite3, time  # {MARK}
db = sqlite3.connect('../../../gradebook.db', isolation_level=None)
db.execute('begin exclusive')
time.sleep(1000)
"""], start_new_session=True)
'''



def zip_of(entries):
    """A zip file, written by hand: {name: (raw deflate stream, crc32, declared size)}: what it declares is whatever the
    caller says, as a forger's would be."""
    import struct

    body, directory = b'', b''
    for name, (data, crc, size) in entries.items():
        fields = struct.pack('<HHHHHIII', 20, 0, 8, 0, 0x21, crc, len(data), size)  # version, flags, deflate, dos time
        directory += b'PK\x01\x02' + struct.pack('<H', 20) + fields + struct.pack('<HHHHHII', len(name), 0, 0, 0, 0, 0, len(body))
        directory += name.encode()
        body += b'PK\x03\x04' + fields + struct.pack('<HH', len(name), 0) + name.encode() + data
    end = struct.pack('<HHHHIIH', 0, 0, len(entries), len(entries), len(directory), len(body), 0)
    return body + directory + b'PK\x05\x06' + end


@functools.lru_cache(maxsize=None)
def record_bomb(entries=8, mib=256):
    """A probe record of a few MB that declares entries arrays of mib MiB of float64 zeros each, every byte of them
    really there once decompressed (its CRCs hold): deflate blocks of 1 MiB of zeros, each flushed so that it can be
    repeated."""
    import io
    import zlib

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {'descr': '<f8', 'fortran_order': False, 'shape': (((mib << 20) - 128) // 8,)})
    header = header.getvalue()
    assert len(header) == 128
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(header + bytes((1 << 20) - 128)) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(bytes(1 << 20)) + deflate.flush(zlib.Z_FULL_FLUSH)
    data = first + block * (mib - 1) + deflate.flush()
    crc = zlib.crc32(header + bytes((1 << 20) - 128))
    for _ in range(mib - 1):
        crc = zlib.crc32(bytes(1 << 20), crc)
    return zip_of({f'head.out{i}.npy': (data, crc, mib << 20) for i in range(entries)})


def many_entries(n=20_000):
    """A probe record of n tiny arrays (a few MB): each entry is cheap, their count is not."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, **{f'head.k{i}': np.zeros(1, np.uint8) for i in range(n)})
    return buf.getvalue()


# The student's code puts its own file in place of the probe's record: the probe's np.savez is made a no-op first.
PLANT_RECORD = """
import numpy as np, shutil
np.savez = np.savez_compressed = lambda *a, **k: None
shutil.copy('planted.bin', '_probe_out.npz')
"""


def plants(record):
    """The perfect submission, and a file its code puts in place of the probe's record (record(): its bytes)."""
    def make(name, release, perfect, fake):
        return {**with_code(PLANT_RECORD)(name, release, perfect, fake), 'planted.bin': record()}
    return make


def deep_nested(depth=100_000):
    """The perfect notebook with depth nested objects in its first cell's metadata: JSON, but not one a parser recurses
    through."""
    def make(name, release, perfect, fake):
        text = nbformat.writes(perfect)
        at = text.index('"metadata": {') + len('"metadata": {')
        return {name: (text[:at] + '"deep": ' + '{"a": ' * depth + '1' + '}' * depth + ', ' + text[at:]).encode()}
    return make


def outputs_of(mib=50):
    """The perfect notebook saved with mib MiB of outputs in its first code cell (a student who printed a lot and saved)."""
    def make(name, release, perfect, fake):
        nb = copy.deepcopy(perfect)
        cell = next(c for c in nb.cells if c.cell_type == 'code')
        line = 'x' * 99 + '\n'
        cell.outputs = [nbformat.v4.new_output('stream', name='stdout', text=line * 10_486) for _ in range(mib)]
        return {name: nb}
    return make


BUDGET = [
    # What the grader reads that a student's code wrote, or the student submitted, costs what its budget allows.
    # A record that declares 2 GiB in 2 MB, and one of 20,000 entries: refused before anything is decompressed, so the
    # checks fail (every test cell of the synthetic step has one: no points) and the status says why
    Case('hostile_record_bomb', plants(record_bomb), 'over budget (the probe record declares', 0, every_step=False),
    Case('hostile_record_many_entries', plants(many_entries), 'over budget (the probe record declares', 0, every_step=False),
    # JSON nested 100,000 deep: unreadable at once (Python's parser stops at its recursion limit)
    Case('broken_deep_nested_notebook', deep_nested(), 'unreadable (nested too deep)', 0, every_step=False),
    # saved with 50 MiB of outputs (under the 64 MiB budget): read, its outputs cleared, graded as usual
    Case('broken_50MB_of_saved_outputs', outputs_of(50), 'graded', 'full', every_step=False),
    # prints 48 MiB while graded: past 32 MiB the outputs are dropped as they arrive; the checks are untouched
    Case('broken_48MB_of_outputs_printed', with_code("for _ in range(48):\n    print('x' * (1 << 20))"),
         'over budget (its outputs passed', 'full', every_step=False),
]


# What a submission is (course.gate): each case's folder holds something other than regular files and folders with
# plain names, or more than the grader reads. Refused before anything reads it, whatever the work in it: no repair, no
# kernel, no copy, no feedback page, 0 points, and a status naming the file. Cheap (nothing runs), so on every step.

class Link(NamedTuple):
    """A symbolic link to target (relative to the link's folder; {step} and {name} filled in)."""
    target: str


class HardLink(NamedTuple):
    """A second name of the file at target (relative to the link's folder)."""
    target: str


class Fifo(NamedTuple):
    """A named pipe: whoever opens it to read waits for ever."""


class Sparse(NamedTuple):
    """A regular file of size bytes that takes no disk (a hole)."""
    size: int


def files(extra, perfect_too=True):
    """The perfect submission (if perfect_too) and the files extra ({path: bytes, notebook or one of the kinds above})."""
    def make(name, release, perfect, fake):
        return {**({name: copy.deepcopy(perfect)} if perfect_too else {}), **extra}
    return make


NOTEBOOK = '{name}'  # a key: the step's notebook
COURSE = '../../..'  # from submitted/<student>/<step>/ to the course root
LINKED = [
    # the issue's: graded full marks with no work, and the repair wrote through the link into source/
    Case('hostile_notebook_is_a_link_to_the_source', files({NOTEBOOK: Link(f'{COURSE}/source/{{step}}/{{name}}')}, False),
         'refused (symbolic link: {name})', 0),
    Case('hostile_links_to_the_checks', files({'notes.txt': Link(f'{COURSE}/source/{{step}}/instructor/checks.py')}),
         'refused (symbolic link: notes.txt)', 0),
    Case('hostile_links_to_the_gradebook', files({'data/gradebook.bin': Link(f'../{COURSE}/gradebook.db')}),
         'refused (symbolic link: data/gradebook.bin)', 0),
    Case('hostile_links_to_another_students_work', files({'helper.py': Link('../../perfect/{step}/{name}')}, False),
         'refused (symbolic link: helper.py)', 0),
    Case('hostile_links_to_a_folder', files({'course': Link(COURSE)}), 'refused (symbolic link: course)', 0),
    Case('hostile_dangling_link', files({'gone.txt': Link('/nonexistent/secret')}), 'refused (symbolic link: gone.txt)', 0),
    # read, /dev/zero never ends; the 768 MiB file beside the submission (in the student's folder, not the step's) took
    # 6.7 GiB of the grading process when it was followed
    Case('hostile_notebook_links_to_dev_zero', files({NOTEBOOK: Link('/dev/zero')}, False),
         'refused (symbolic link: {name})', 0),
    Case('hostile_notebook_links_to_a_huge_sparse_file',
         files({'../huge.bin': Sparse(768 << 20), NOTEBOOK: Link('../huge.bin')}, False), 'refused (symbolic link: {name})', 0),
    Case('hostile_step_folder_is_a_link', files({'': Link('../perfect/{step}')}, False),
         'refused (symbolic link: hostile_step_folder_is_a_link/{step})', 0),
    # opened to be read, it would hang the grader: the class would never finish
    Case('hostile_notebook_is_a_fifo', files({NOTEBOOK: Fifo()}, False), 'refused (fifo: {name})', 0),
    Case('hostile_hard_link_to_the_source', files({NOTEBOOK: HardLink(f'{COURSE}/source/{{step}}/{{name}}')}, False),
         'refused (hard link: {name})', 0),
]

NAMED = [
    # a student id read as a pattern: 'perfect*' made its job delete and regrade the perfect student's work; '*' the class
    Case('perfect*', files({}), "refused (student id 'perfect*'", 0),
    Case('*', files({}), "refused (student id '*'", 0),
    Case('a[b]', files({}), "refused (student id 'a[b]'", 0),
    # printed raw, a newline forged a row of the grade table, an escape code set the instructor's terminal's title
    Case('evil\nperfect  graded  27 of 27', files({}), "refused (student id 'evil\\nperfect", 0),
    Case('evil\x1b]0;pwned\x07\x1b[2J', files({}), "refused (student id 'evil\\x1b]0;pwned\\x07\\x1b[2J'", 0),
    Case('hostile_file_name_is_a_pattern', files({'*.ipynb': b'{}'}), 'refused (file name: *.ipynb)', 0),
    Case('hostile_file_name_has_a_newline', files({'notes\nperfect graded.txt': b'x'}),
         'refused (file name: notes\\nperfect graded.txt)', 0),
    Case('hostile_file_name_has_escape_codes', files({'\x1b[2Jnotes.txt': b'x'}), 'refused (file name: \\x1b[2Jnotes.txt)', 0),
    Case('hostile_ships_a_course_config', files({'nbgrader_config.py': b'c = get_config()\n'}),
         'refused (file name: nbgrader_config.py)', 0),
    Case('hostile_folder_named_like_the_notebook', files({'{name}/x.txt': b'x'}, False),
         'refused (a folder named like a notebook: {name})', 0),
]

SIZED = [
    # sizes are those of what would be read (fstat of the opened file), never of a link; nothing is read past them
    Case('hostile_sparse_data_file', files({'data.bin': Sparse(768 << 20)}),
         f'over budget (data.bin is {768 << 20:,} bytes, over the', 0),
    Case('hostile_many_files', files({f'f/{i}.txt': b'' for i in range(1200)}),
         'over budget (more than 1,000 files and folders)', 0, every_step=False),
    Case('hostile_deep_folders', files({'/'.join('d' * 12) + '/x.txt': b''}),
         'refused (folders nested over 8 deep: d/d/d/d/d/d/d/d/d)', 0, every_step=False),
]

# Hidden tests printed by the student's own code, into any output of any cell: every one is graded as the honest work it
# holds (full marks) and its feedback page carries no hidden line (tests/test_submissions.py reads every page).
PRINT_EACH_CELL = """
def _show(info):
    print(info.raw_cell)
get_ipython().events.register('pre_run_cell', _show)
"""
HTML_OF_EACH_CELL = """
import html as _html
from IPython.display import HTML, display
get_ipython().events.register('post_run_cell',
                              lambda result: display(HTML('<pre>' + _html.escape(result.info.raw_cell) + '</pre>')))
"""
TRANSFORMER_PRINTS = """
def _echo(lines):
    print(repr(''.join(lines)))
    return lines
get_ipython().input_transformers_post.append(_echo)
"""
STASH = """
_seen = []
get_ipython().events.register('pre_run_cell', lambda info: _seen.append(info.raw_cell))
"""


def at_end(code, setup=''):
    """The perfect submission with setup at the top of its first solution cell and a cell of the student's own, code,
    after every other cell: it runs after every test."""
    def make(name, release, perfect, fake):
        nb = copy.deepcopy(perfect)
        cell = first(nb, 'solution')
        cell.source = f'{setup}\n{cell.source}'
        nb.cells.append(nbformat.v4.new_code_cell(code))
        return {name: nb}
    return make


LEAKS = [
    Case('hostile_hook_prints_each_cell', with_code(PRINT_EACH_CELL, top=True), 'graded', 'full'),
    Case('hostile_hook_shows_each_cell_as_html', with_code(HTML_OF_EACH_CELL, top=True), 'graded', 'full', every_step=False),
    Case('hostile_transformer_prints_repr', with_code(TRANSFORMER_PRINTS, top=True), 'graded', 'full', every_step=False),
    Case('hostile_prints_the_history_last', at_end("print(_ih)\nimport sys\nprint('\\n'.join(In), file=sys.stderr)"),
         'graded', 'full', every_step=False),
    Case('hostile_raises_with_the_stash_last', at_end("raise RuntimeError('\\n'.join(_seen))", STASH), 'graded', 'full',
         every_step=False),
    Case('hostile_wraps_the_stash_last', at_end("import textwrap\nfor s in _seen:\n    print(textwrap.fill(s, 23))", STASH),
         'graded', 'full', every_step=False),
    # nbgrader's ClearHiddenTests read the marker in a student's cell as an unclosed region: no feedback page, status graded
    Case('hostile_prints_the_hidden_test_marker', with_code("print('### BEGIN HIDDEN TESTS')"), 'graded', 'full',
         every_step=False),
]


ESCAPED = [
    # escape codes written to the kernel's real stderr (the submission's log) and to its captured one (an output)
    Case('hostile_escape_codes_on_stderr',
         with_code("import os, sys\nos.write(2, b'\\x1b]0;pwned\\x07\\x1b[2J')\nprint('\\x1b[2J', file=sys.stderr)"),
         'graded', 'full', every_step=False),
]


def hostile(port):
    """The hostile cases; the network attempt aims at port, where a real listener waits."""
    return [
        Case('hostile_fake_patched_torch', blank_with_code(PATCH_TORCH, with_fake=True), 'graded', 0),
        Case('hostile_try_except_every_cell', blank_with_code(TRY_EXCEPT_EVERY_CELL), 'graded', 0, every_step=False),
        Case('hostile_silenced_tracebacks', blank_with_code(SILENCE_TRACEBACKS, with_fake=True), 'graded', 0, every_step=False),
        Case('hostile_forged_probe_record', blank_with_code(TRY_EXCEPT_EVERY_CELL + FORGE_PROBE), 'graded', 0),
        Case('hostile_touches_the_course', blank_with_code(touch_the_course(port)), 'graded', 0, True, False),
        Case('hostile_locks_the_gradebook', blank_with_code(LOCK_GRADEBOOK), 'graded', 0, True, False),
    ]


def cases(port=9):
    """Every case (the hostile network attempt aimed at port)."""
    return DAMAGED + BROKEN + BUDGET + hostile(port) + LINKED + NAMED + SIZED + LEAKS + ESCAPED


def placed(cases, steps):
    """[(step, case)]: each case that every step gets on each of steps, the grader's own on the synthetic step alone."""
    return [(step, c) for c in cases for step in (steps if c.every_step else [synthetic.STEP])]


def expected_status(case, release, step='', name=''):
    """The status prefixes (a tuple) one of which a case must get on step, whose release notebook is release, named name."""
    statuses = case.status if isinstance(case.status, tuple) else (case.status,)
    fields = {'solution': grade_id(first(release, 'solution')), 'step': step, 'name': name}
    return tuple(s.format(**fields) if '{' in s and 'student id' not in s else s for s in statuses)
