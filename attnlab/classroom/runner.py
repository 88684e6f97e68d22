"""Execute the notebooks headlessly, each in a fresh kernel, in series order.

`make run` uses this to run the whole series and write executed HTML to build/;
`make notebooks` uses it with --inplace to refresh the stored outputs that strict nbval
compares. Outputs are only ever produced here, by execution, never edited by hand.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def notebook_stems(names: list[str] | None = None) -> list[str]:
    """The series' notebook names (NN_name) in order; `names` filters by NN prefix or name.

    Only notebooks/ itself is listed: the student edition in notebooks/student/ is generated
    from these (`make student`) and is never run, synced or built into slides from here.
    """
    stems = sorted({p.stem for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.py")}
                   | {p.stem for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb")})
    if names:
        wanted = [Path(n).stem for n in names]
        unknown = [w for w in wanted if not any(s.startswith(w) for s in stems)]
        if unknown:
            raise SystemExit(f"no notebook matches {unknown}; known: {stems}")
        stems = [s for s in stems if any(s.startswith(w) for w in wanted)]
    return stems


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The solution edition's .ipynb paths in series order (see `notebook_stems`)."""
    return [NOTEBOOK_DIR / f"{s}.ipynb" for s in notebook_stems(names)]


def _load(ipynb: Path):
    """The notebook to execute: the .py source when it is newer (or the .ipynb is missing)."""
    import jupytext

    py = ipynb.with_suffix(".py")
    if py.exists() and (not ipynb.exists() or py.stat().st_mtime > ipynb.stat().st_mtime):
        nb = jupytext.read(py)
        if ipynb.exists():  # keep the pairing metadata of the existing notebook
            old = jupytext.read(ipynb)
            nb.metadata = {**old.metadata, **nb.metadata}
    else:
        nb = jupytext.read(ipynb)
    nb.metadata.setdefault("kernelspec", KERNELSPEC)
    return nb


def execute(ipynb: Path, timeout: int = 600, nb=None):
    """Run one notebook top to bottom in a fresh kernel; returns (notebook, seconds, error).

    `nb` is the notebook to run (default: what `ipynb` and its paired .py hold); the kernel
    starts in `ipynb`'s folder, as nbval's does, so both see the same working directory.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = _load(ipynb) if nb is None else nb
    # The kernel listens on localhost only; its log level keeps its "running over TCP without
    # encryption" notice out of every line of `make run`, while errors still show.
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            extra_arguments=["--IPKernelApp.log_level=ERROR"],
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
    parser.add_argument("--html", metavar="DIR",
                        help="write each executed notebook as HTML into DIR")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    args = parser.parse_args(argv)

    import nbformat

    rows, failed = [], 0
    for ipynb in notebook_paths(args.names):
        print(f"running {ipynb.name} ...", flush=True)
        nb, seconds, error = execute(ipynb, args.timeout)
        if args.inplace and error is None:
            nbformat.write(nb, ipynb)
        if args.html:
            from nbconvert import HTMLExporter

            out = Path(args.html)
            out.mkdir(parents=True, exist_ok=True)
            body, _ = HTMLExporter().from_notebook_node(nb)
            (out / f"{ipynb.stem}.html").write_text(body, encoding="utf-8")
        failed += error is not None
        rows.append((ipynb.name, error, seconds))

    report(rows)
    if args.html:
        print(f"\nexecuted HTML written to {args.html}/")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
