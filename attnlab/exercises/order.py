"""A cell run out of order: the NameError says which cell to run first.

After a kernel restart, or in a notebook opened halfway down, a student runs a cell whose
names an earlier cell makes: Python answers with a traceback and `NameError: name 'model' is not
defined`, which reads like a mistake in their code. Where the kernel knows its notebook (Jupyter
sets `JPY_SESSION_NAME` to the notebook's path, VS Code `__vsc_ipynb_file__`) and a code cell of
that notebook makes the name at its top level (an assignment, a `def`, a `class`, an import, a
`for` or `with` target), the error is one short message instead: the name is not made yet, the
cell that makes it (its section heading and first line), and how to run the cells above. Any
other NameError (a typo, a name no cell makes) keeps Python's own traceback.

`install()` (called when `attnlab.exercises` is imported, which every notebook does) registers
the handler with IPython; outside IPython it does nothing. A cell run before the import cell,
the first thing a student does after a restart, would miss it, so this module is also an IPython
extension that `make setup` names in the environment's kernel config
(`.venv/etc/ipython/ipython_kernel_config.py`): every kernel of that environment has the handler
from its first cell. The cell still fails, so Run All stops there as before.
"""
from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

from IPython import get_ipython  # ipywidgets' dependency, and so attnlab's

_NAME = re.compile(r"name '(?P<name>\w+)' is not defined")


def _bound_at_top(tree: ast.Module) -> set[str]:
    """The names a cell's top level binds (not those inside its functions or classes)."""
    names: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            continue  # their names are their own
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def first_maker(name: str, cells: list[dict]) -> tuple[int, str, str] | None:
    """(cell number from 1, counting every cell as JupyterLab's "Cell 13/51" does, the section
    heading above it, its first line) of the first code cell in `cells` (a notebook's cells, as
    in its JSON) whose top level makes `name`; None if no cell does."""
    heading = ""
    for number, cell in enumerate(cells, 1):
        source = "".join(cell.get("source", ""))
        if cell.get("cell_type") == "markdown":
            found = re.search(r"^#{1,3} +(.+)$", source, re.MULTILINE)
            heading = found.group(1).strip() if found else heading
            continue
        if cell.get("cell_type") != "code":
            continue
        code = "\n".join(line for line in source.split("\n")
                         if not line.lstrip().startswith(("%", "!")))  # IPython magics
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        if name in _bound_at_top(tree):
            first = next((line.strip() for line in source.split("\n") if line.strip()), "")
            return number, heading, first
    return None


def notebook_cells(namespace: dict) -> list[dict] | None:
    """The cells of the notebook this kernel runs, read from its file; None where the kernel
    does not know its notebook or cannot read it."""
    path = os.environ.get("JPY_SESSION_NAME") or namespace.get("__vsc_ipynb_file__") \
        or namespace.get("__session__")
    if not path or not str(path).endswith(".ipynb"):
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        return None


def explain(error: NameError, namespace: dict) -> str | None:
    """The message for a NameError whose name a cell of this notebook makes, else None."""
    found = _NAME.search(str(error))
    cells = notebook_cells(namespace) if found else None
    made = first_maker(found["name"], cells) if cells else None
    if made is None:
        return None
    number, heading, first = made
    where = f'under "{heading}", ' if heading else ""
    return (f"`{found['name']}` is not defined yet: the cell that makes it has not run in this "
            f"kernel (after a restart, or a notebook opened halfway).\n"
            f"It is made by cell {number} of {len(cells)} (JupyterLab counts prose cells too), "
            f"{where}the one that starts `{first[:70]}`.\n"
            f"Run the cells above this one first: Run > Run All Above Selected Cell.")


def _handler(shell, etype, value, tb, tb_offset=None):
    message = explain(value, shell.user_ns)
    if message is None:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return None
    shell._showtraceback(etype, NameError(message.split("\n")[0]), [f"NameError: {message}"])
    return None


def install(shell=None) -> None:
    """Register the handler with `shell`, or with the running IPython if any (see the module's
    docstring)."""
    shell = shell or get_ipython()
    if shell is not None:
        shell.set_custom_exc((NameError,), _handler)


load_ipython_extension = install  # IPython calls it with the shell when the kernel starts
