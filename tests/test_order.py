"""A cell run out of order says which cell to run first (issue 28), in a real kernel."""
import nbformat
import pytest
from helpers import ROOT
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attnlab.exercises import order


def test_first_maker_finds_the_cell_that_binds_a_name_at_its_top_level():
    cells = [{"cell_type": "markdown", "source": "## Training\nsome prose"},
             {"cell_type": "code", "source": "%matplotlib inline\ndef helper():\n    model = 1"},
             {"cell_type": "code", "source": "for step in range(3):\n    model, loss = 1, 2"},
             {"cell_type": "code", "source": "import numpy as np\nfrom torch import nn"}]
    assert order.first_maker("model", cells) == (3, "Training", "for step in range(3):")
    assert order.first_maker("np", cells)[0] == 4 and order.first_maker("nn", cells)[0] == 4
    assert order.first_maker("helper", cells)[0] == 2  # as JupyterLab numbers cells
    assert order.first_maker("PAD", cells) is None  # a typo keeps Python's own traceback


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_a_kernel_names_the_cell_to_run_first_and_the_cell_still_fails(tmp_path, monkeypatch):
    nb = new_notebook(cells=[
        new_code_cell("import attnlab.exercises"),
        new_code_cell("print(model)"),  # run before the cell that makes it
        new_markdown_cell("## Training"),
        new_code_cell("model = 'trained'"),
        new_code_cell("print(PADD)"),  # a name no cell makes
    ])
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))  # what Jupyter sets for the kernel
    NotebookClient(nb, timeout=60, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    (early,) = nb.cells[1].outputs
    assert early.output_type == "error" and early.ename == "NameError"
    shown = "\n".join(early.traceback)
    assert "`model` is not defined yet" in shown
    assert 'cell 4 of 5 (JupyterLab counts prose cells too), under "Training"' in shown
    assert "model = 'trained'" in shown and "Run All Above" in shown
    assert "Traceback" not in shown and len(early.traceback) == 1
    (typo,) = nb.cells[4].outputs
    assert typo.ename == "NameError" and "PADD" in typo.evalue
    assert "not defined yet" not in "\n".join(typo.traceback)  # Python's own message


def test_a_cell_run_before_the_import_cell_after_a_restart_gets_the_same_message(
        tmp_path, monkeypatch):
    """Issue 48: after a restart nothing has imported attnlab yet; the kernels of the
    environment `make setup` built load the handler as an IPython extension at start."""
    nb = new_notebook(cells=[
        new_code_cell("print(ex03)"),  # the student's first cell after a restart
        new_markdown_cell("## Set-up"),
        new_code_cell("from attnlab.exercises import ex03"),
    ])
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    NotebookClient(nb, timeout=60, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    (early,) = nb.cells[0].outputs
    shown = "\n".join(early.traceback)
    assert "`ex03` is not defined yet" in shown and "cell 3 of 3" in shown, shown
    assert "Traceback" not in shown


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_running_03s_training_cell_again_trains_the_same_model_not_more_of_it():
    """Issue 28: a student who runs the training cell twice must see the same curve twice,
    the one the prose beside it describes, not a model trained for twice the epochs."""
    notebook = ROOT / "notebooks" / "03_training_an_encoder.ipynb"
    full = nbformat.read(notebook, as_version=4)
    code = [c for c in full.cells if c.cell_type == "code"
            and "remove-cell" not in c.metadata.get("tags", [])]
    training = next(i for i, c in enumerate(code) if "optimizer.step()" in c.source)
    cells = [new_code_cell(c.source) for c in code[:training + 1]]
    cells.append(new_code_cell(code[training].source))  # the same cell, run again
    nb = new_notebook(cells=cells, metadata=full.metadata)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(notebook.parent)}}).execute()
    first, again = ("".join(o.get("text", "") for o in c.outputs) for c in nb.cells[-2:])
    assert "test accuracy by epoch" in first and again == first
