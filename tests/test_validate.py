"""nbgrader validate: the solution passes every test, and the untouched release fails every test, only for want of the work."""

from nbclient import NotebookClient

from course import runner
from course.cells import STUB_ERROR, read, role
from course.layout import ROOT


def validate(path, *flags):
    return runner.run('validate', *flags, str(path), check=False)


def test_source_and_solution_pass_nbgrader_validate(notebook):
    aid, name = notebook
    for path in (ROOT / 'source' / aid / name, ROOT / 'notebooks' / name):
        done = validate(path)
        assert 'Success! Your notebook passes all the tests.' in done.stdout, done.stdout + done.stderr


def test_untouched_release_fails_every_test_under_validate_invert(notebook):
    aid, name = notebook
    done = validate(ROOT / 'release' / aid / name, '--invert')
    assert 'Success! The notebook does not pass any tests.' in done.stdout, done.stdout + done.stderr


def test_untouched_release_fails_each_test_only_for_the_missing_work(notebook):
    """Every test cell of the release errors with the stub's NotImplementedError, not a NameError or a crash."""
    aid, name = notebook
    path = ROOT / 'release' / aid / name
    nb = read(path)
    NotebookClient(nb, timeout=120, kernel_name='python3', allow_errors=True,
                   resources={'metadata': {'path': str(path.parent)}}).execute()
    wrong = {}
    for cell in nb.cells:
        if role(cell) == 'test':
            errors = [o for o in cell.outputs if o.output_type == 'error']
            if not errors or f"{errors[0].ename}('{errors[0].evalue}')" != STUB_ERROR:
                wrong[cell.metadata.nbgrader.grade_id] = [(o.ename, o.evalue) for o in errors] or 'passed'
    assert not wrong, f'release test cells that do not fail with {STUB_ERROR}: {wrong}'
