"""The untouched release fails every test, only for want of the work.

That the solution passes every test is proven elsewhere: make build executes it and stops at the first error, the
freshness test (test_generated) proves notebooks/ is that execution, and nbval executes it again. The release is executed
once: each of its test cells must fail with the stub's error, which is stronger than `nbgrader validate --invert` (every
test fails, for any reason); the browser test presses nbgrader's Validate in JupyterLab."""

from nbclient import NotebookClient

from course.cells import STUB_ERROR, read, role
from course.layout import ROOT


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
