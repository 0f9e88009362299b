"""The package's layering, as course/__init__.py's docstring records it: a module imports only from its own layer and
the layers listed before it. Read from the docstring (so the record and the check cannot drift apart) and checked on
every import of every module, at any depth (a function's lazy import counts as much as one at the top)."""

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
    up = ['from course.grader import grading', 'import course.reports.results',
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
