"""Execute the notebooks headlessly, each in a fresh kernel, in series order.

`make run` uses this to run the whole series and write the executed notebooks as HTML pages
into build/, with the same builder and template as `make html` (`site.build`); `make notebooks`
uses it with --inplace to refresh the stored outputs that strict nbval compares. Outputs are
only ever produced here, by execution, never edited by hand. Every kernel started here loads
`attnlab.classroom.figures`, so each figure's PNG records its smallest font size.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from . import figures, series, site
from .series import KERNELSPEC, notebook_paths

# The kernel listens on localhost only; its log level keeps its "running over TCP without
# encryption" notice out of every line of `make run`, while errors still show.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR",
                    f"--InteractiveShellApp.extra_extensions={figures.__name__}"]


def _load(ipynb: Path):
    """The notebook to execute: the .py source when it is newer (or the .ipynb is missing).

    A cell read from the .py keeps the id of the stored cell with the same type and source, so
    re-recording a notebook does not renumber cells an edit did not touch (the student edition
    and its comparison refer to cells by id)."""
    py = ipynb.with_suffix(".py")
    if py.exists() and (not ipynb.exists() or py.stat().st_mtime > ipynb.stat().st_mtime):
        nb = jupytext.read(py)
        if ipynb.exists():  # keep the pairing metadata and the ids of the existing notebook
            old = jupytext.read(ipynb)
            nb.metadata = {**old.metadata, **nb.metadata}
            ids = {}
            for cell in old.cells:
                ids.setdefault((cell.cell_type, cell.source), cell.id)
            taken = set()
            for cell in nb.cells:
                known = ids.get((cell.cell_type, cell.source))
                if known is not None and known not in taken:
                    cell.id = known
                taken.add(cell.id)
    else:
        nb = jupytext.read(ipynb)
    nb.metadata.setdefault("kernelspec", KERNELSPEC)
    return nb


def execute(ipynb: Path, timeout: int = 600, nb=None):
    """Run one notebook top to bottom in a fresh kernel; returns (notebook, seconds, error).

    `nb` is the notebook to run (default: what `ipynb` and its paired .py hold); the kernel
    starts in `ipynb`'s folder, as nbval's does, so both see the same working directory.
    """
    nb = _load(ipynb) if nb is None else nb
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            extra_arguments=KERNEL_ARGUMENTS,
                            resources={"metadata": {"path": str(Path(ipynb).parent)}})
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except CellExecutionError as e:
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()  # drop the traceback's colours
        error = message.splitlines()[-1] if message else repr(e)
    except Exception as e:  # a dead kernel or a timeout: report it in the table, go on
        error = f"{type(e).__name__}: {e}"
    return nb, time.perf_counter() - start, error


def report(rows: list[tuple[str, str | None, float]]) -> None:
    """Print the table of (notebook, error or None, seconds), then each failure's message."""
    width = max([len(r[0]) for r in rows] + [8])
    print(f"\n{'notebook':<{width}}  {'status':<6}  {'seconds':>7}")
    for name, error, seconds in rows:
        print(f"{name:<{width}}  {'ok' if error is None else 'FAILED':<6}  {seconds:7.1f}")
    for name, error, _ in rows:
        if error is not None:
            print(f"\n{name} failed: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab.classroom.runner",
                                     description=__doc__)
    parser.add_argument("names", nargs="*", help="notebook names or NN prefixes (default: all)")
    parser.add_argument("--inplace", action="store_true",
                        help="store the executed outputs in the .ipynb")
    parser.add_argument("--html", metavar="DIR", type=Path,
                        help="write the executed notebooks as the site's pages into DIR")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    series.add_argument(parser)
    args = parser.parse_args(argv)

    rows, executed = [], {}
    for ipynb in notebook_paths(args.names, args.notebooks):
        print(f"running {ipynb.name} ...", flush=True)
        nb, seconds, error = execute(ipynb, args.timeout)
        if error is None:
            executed[ipynb] = nb
            if args.inplace:
                for cell in nb.cells:  # nbclient's timestamps would change on every recording
                    cell.metadata.pop("execution", None)
                nbformat.write(series.collapse_hidden_inputs(nb), ipynb)
        rows.append((ipynb.name, error, seconds))

    report(rows)
    if args.html and executed:
        try:
            site.vendored()
            maths = ""
        except RuntimeError as e:  # `make run` needs no Node.js: the pages show TeX instead
            maths = f"; equations show as TeX: {e}"
        try:
            pages = site.build("html", list(executed), args.html, executed=executed,
                               require_vendored=False)
        except (RuntimeError, ValueError) as e:
            print(f"\nno HTML written: {e}", file=sys.stderr)
            return 1
        print(f"\n{len(pages)} executed notebooks written as HTML into {args.html}/{maths}")
    return 1 if any(error is not None for _, error, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
