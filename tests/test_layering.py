"""The package's layering, as course/__init__.py's docstring records it: a module imports only from its own layer and
the layers listed before it. Read from the docstring (so the record and the check cannot drift apart) and checked on
every import of every module, at any depth (a function's lazy import counts as much as one at the top). And the docs'
tables of the tooling (docs/adding-a-step.md), which list those modules and, for each, the tests that test it: findable
by name, tests/test_<module>.py, or named there."""

import ast
import re
import sys
from pathlib import Path

import course
from course.isolation.warm import SERVER_FILES

PACKAGE = Path(course.__file__).parent
ROW = re.compile(r'^  (course(?:\.\w+)?)\s+([\w, ]+):', re.M)
SANDBOXED = {'course.isolation', 'course.isolation.policy', 'course.isolation.warm_server'}


def layers(doc=course.__doc__):
    """{'course': (0, ['cells', ...]), 'course.isolation': (1, [...]), ...} from the docstring's table."""
    return {name: (i, [m.strip() for m in mods.split(',')]) for i, (name, mods) in enumerate(ROW.findall(doc))}


def package_of(path):
    """'course' for course/x.py, 'course.<sub>' for course/<sub>/x.py."""
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    return '.'.join(parts[:-1]) if len(parts) > 1 else 'course'


def imported(source, package):
    """Every course module or package an import in source names (absolute, relative, lazy), with its line."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name.split('.')[0] == 'course')
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                up = package.split('.')[:len(package.split('.')) - node.level + 1]
                base = '.'.join(up + ([base] if base else []))
            if base.split('.')[0] == 'course':
                yield from ((f'{base}.{a.name}', node.lineno) for a in node.names)


def violations(source, package, table):
    """(line, what) for each import from a layer listed after the importing module's own."""
    own = table[package][0]
    subs = {name.split('.')[1]: rank for name, (rank, _) in table.items() if '.' in name}
    for name, line in imported(source, package):
        parts = name.split('.')
        rank = subs.get(parts[1], 0) if len(parts) > 1 else 0
        if rank > own:
            yield line, f'{package} imports {name}, from a layer listed after its own'


def test_the_docstring_lists_every_subpackage_and_module_where_it_is():
    table = layers()
    assert table, "course/__init__.py's docstring has no table of layers ('  course.x  a, b: what it does')"
    found = {}
    for path in PACKAGE.rglob('*.py'):
        if path.name != '__init__.py':
            found.setdefault(package_of(path), set()).add(path.stem)
    listed = {name: set(mods) for name, (_, mods) in table.items()}
    assert listed == found, (f'the layers in course/__init__.py list {listed}, but the package holds {found}: '
                             'list each module in the row of the subpackage that holds it')


def test_every_import_runs_down_the_layers():
    table = layers()
    bad = [f'{path.relative_to(PACKAGE.parent)}:{line}: {what}'
           for path in sorted(PACKAGE.rglob('*.py'))
           for line, what in violations(path.read_text(), package_of(path), table)]
    assert not bad, ('imports against the layering of course/__init__.py (move the code down a layer, or the module up):\n'
                     + '\n'.join(bad))


def test_the_check_catches_an_import_up_the_layers():
    """The check itself can fail: an authoring module importing the grader, at the top or inside a function, relatively
    or not, is caught; importing down, or within the layer, is not."""
    table = layers()
    up = ['from course.grader import workers', 'import course.reports.results',
          'def f():\n    from course.classroom.gradebook import url', 'from ..grader import claims']
    down = ['from course.layout import ROOT', 'from course import cells', 'from . import reproduced',
            'from course.authoring.demo import Variant']
    for source in up:
        assert list(violations(source, 'course.authoring', table)), f'not caught: {source!r}'
    for source in down:
        assert not list(violations(source, 'course.authoring', table)), f'caught, wrongly: {source!r}'


def test_what_the_warm_server_sandbox_holds_needs_nothing_else_of_the_package():
    """The sandbox holds course/__init__.py, course/isolation/__init__.py, policy.py and warm_server.py, and the venv:
    the two __init__ files import only the standard library (every process of the course imports them first), and the
    four import no other module of the package."""
    for name in SERVER_FILES:
        path = PACKAGE / name
        tree = ast.parse(path.read_text())
        if path.name == '__init__.py':
            top = {n.split('.')[0] for node in tree.body
                   for n in ([a.name for a in node.names] if isinstance(node, ast.Import) else
                             [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])}
            third = sorted(top - set(sys.stdlib_module_names) - {'course'})
            assert not third, f'course/{name} imports {third}: keep it to the standard library (the warm server imports it)'
        ours = sorted(n for n, _ in imported(path.read_text(), package_of(path)) if n not in SANDBOXED)
        assert not ours, f'course/{name} imports {ours}: the warm server\'s sandbox holds only {", ".join(SERVER_FILES)}'


def docs_rows(text=None):
    """(layer, [modules], [test files]) for each row of docs/adding-a-step.md's tables of the tooling, under each layer's
    heading (**`course.x`**): the modules of its first column, the test files (paths below tests/) of its last."""
    text = (PACKAGE.parent / 'docs' / 'adding-a-step.md').read_text() if text is None else text
    tooling = text.split('## The tooling, by role', 1)[1].split('\n## ', 1)[0]
    parts = re.split(r'^\*\*`(course(?:\.\w+)?)`\*\*', tooling, flags=re.M)[1:]
    for name, body in zip(parts[::2], parts[1::2], strict=True):
        for line in re.findall(r'^\|.*\|$', body, re.M):
            cells = [c.strip() for c in line.strip('|').split('|')]
            if cells[0] == 'module' or set(cells[0]) <= {'-'}:
                continue  # the heading and the rule under it
            yield name, re.findall(r'`(\w+)`', cells[0]), re.findall(r'`([\w/]+\.py)`', cells[-1]) if len(cells) > 2 else []


def docs_table(text=None):
    """{'course': {'cells', ...}, 'course.isolation': {...}, ...}: the modules docs/adding-a-step.md's tables of the
    tooling list under each layer's heading, by the first column of each row."""
    table = {}
    for name, modules, _ in docs_rows(text):
        table.setdefault(name, set()).update(modules)
    return table


def test_the_docs_table_of_the_tooling_lists_the_modules_of_each_layer():
    """docs/adding-a-step.md's tables name, under each layer, the modules course/__init__.py's layering puts there: a
    module that moves, comes or goes is moved, added or removed in the docs too."""
    listed = {name: set(mods) for name, (_, mods) in layers().items()}
    documented = docs_table()
    differ = [f'{name}: the docs lack {sorted(listed.get(name, set()) - documented.get(name, set()))}, list '
              f'{sorted(documented.get(name, set()) - listed.get(name, set()))} the layer does not hold'
              for name in sorted(listed.keys() | documented.keys()) if listed.get(name) != documented.get(name)]
    assert not differ, ("docs/adding-a-step.md's tables of the tooling and the layers of course/__init__.py differ:\n"
                        + '\n'.join(differ))


TESTS = PACKAGE.parent / 'tests'


def own_tests(module, tests=TESTS):
    """A module's own test files, by its name: tests/test_<module>.py, tests/hub/test_<module>.py."""
    return [p for p in (f'test_{module}.py', f'hub/test_{module}.py') if (tests / p).is_file()]


def untested(rows, listed, tests=TESTS):
    """What is wrong with where the tests of listed ({layer: {module, ...}}) are named, by rows (docs_rows()): a module
    with no row, a row naming no test file, a named test file that does not exist, a module's own test file missing from
    its row."""
    named = {(layer, m): files for layer, modules, files in rows for m in modules}
    for layer in sorted(listed):
        for module in sorted(listed[layer]):
            where = f'{layer}.{module}'
            files = named.get((layer, module))
            if files is None:
                yield f'{where}: no row in the docs\' table of the tooling'
                continue
            if not files and not own_tests(module, tests):
                yield (f'{where}: its row names no test, and there is no tests/test_{module}.py: write that, or name the '
                       'tests that test it in the row\'s last column')
            for path in files:
                if not (tests / path).is_file():
                    yield f'{where}: its row names tests/{path}, which does not exist'
            for path in own_tests(module, tests):
                if path not in files:
                    yield f'{where}: tests/{path} tests it by name, but its row does not name it'


def test_each_modules_tests_are_findable_by_its_name_or_named_in_the_docs():
    """Every module of the package: tests/test_<module>.py, or the tests that test it named in its row of
    docs/adding-a-step.md's tables (the last column, which names its own test file too, where it has one)."""
    listed = {name: set(mods) for name, (_, mods) in layers().items()}
    bad = list(untested(list(docs_rows()), listed))
    assert not bad, ("where a module's tests are (docs/adding-a-step.md, the tables of the tooling, last column):\n"
                     + '\n'.join(bad))


def test_the_check_catches_a_module_without_tests_and_a_test_that_does_not_exist(tmp_path):
    """The check itself can fail: a new module with neither a test file of its name nor tests in its row; a row naming a
    test file that is not there; a module whose own test file its row leaves out; a module with no row at all."""
    (tmp_path / 'hub').mkdir()
    for name in ('test_a.py', 'test_b.py', 'hub/test_c.py'):
        (tmp_path / name).write_text('')
    text = """## The tooling, by role

**`course.x`**: a layer.

| module | job | tests |
|---|---|---|
| `a` | has its own test, named | `test_a.py` |
| `new` | a new module: no test of its name, none named | |
| `gone` | names a test that is not there | `test_gone.py`, `hub/test_c.py` |
| `b` | its own test file left out of its row | `test_a.py` |
| `c` | covered by the hub's | `hub/test_c.py` |
"""
    listed = {'course.x': {'a', 'new', 'gone', 'b', 'c', 'unlisted'}}
    bad = list(untested(list(docs_rows(text)), listed, tmp_path))
    assert bad == ['course.x.b: tests/test_b.py tests it by name, but its row does not name it',
                   'course.x.gone: its row names tests/test_gone.py, which does not exist',
                   'course.x.new: its row names no test, and there is no tests/test_new.py: write that, or name the tests '
                   "that test it in the row's last column",
                   "course.x.unlisted: no row in the docs' table of the tooling"], bad
    assert docs_table(text) == {'course.x': {'a', 'new', 'gone', 'b', 'c'}}


def test_tests_and_tests_hub_hold_only_tests_and_their_conftest():
    """What the tests share that is not a test lives in tests/support/ (tests/support/hub/ for tests/hub/): a module
    beside the tests that pytest does not collect reads as a test nobody runs."""
    stray = sorted(str(p.relative_to(TESTS)) for folder in (TESTS, TESTS / 'hub') for p in folder.glob('*.py')
                   if p.name != 'conftest.py' and not p.name.startswith('test_'))
    assert not stray, f'not tests, in tests/: {stray}: move them into tests/support/ (tests/support/hub/ for the hub\'s)'
