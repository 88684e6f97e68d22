"""The series' notebooks: where they are and their names in order.

The one place the tooling (runner, student edition, slides and site, tests) learns which
notebooks exist: every NN_name.py or NN_name.ipynb of the notebooks folder, in NN order. Nothing
lists them by hand, so adding a notebook is adding its files.

The notebooks folder is the one a tool is given (`--notebooks DIR`), else this checkout's
notebooks/ when attnlab runs from a clone, else the current directory: an installed attnlab has
no checkout, so an instructor runs the tools in the folder that holds the notebooks.
"""
from __future__ import annotations

from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"  # in a clone of the repository
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
HIDE_INPUT = "hide-input"  # the tag of a cell whose code only draws or lays out what it shows


def collapse_hidden_inputs(nb):
    """Collapse the code of every `hide-input` cell in JupyterLab and Notebook 7 (cell metadata
    `jupyter.source_hidden`), as the slides and the site hide it: a student sees the figure, not
    the plotting code, and can still open it. Both editions are written through this."""
    for cell in nb.cells:
        if cell.cell_type == "code" and HIDE_INPUT in cell.metadata.get("tags", []):
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
    return nb


def notebook_dir(directory: str | Path | None = None) -> Path:
    """The notebooks folder: `directory`, else the checkout's notebooks/, else the current
    directory (see the module's docstring)."""
    if directory is not None:
        return Path(directory)
    return NOTEBOOK_DIR if NOTEBOOK_DIR.is_dir() else Path.cwd()


def notebook_stems(names: list[str] | None = None,
                   directory: str | Path | None = None) -> list[str]:
    """The series' notebook names (NN_name) in order; `names` filters by NN prefix or name.

    Only the notebooks folder itself is listed: the student edition in its student/ is
    generated from these (`make student`) and is never run, synced or built into slides from
    here. A folder with no notebook at all is refused with what to do: a tool that found
    nothing would otherwise report success over nothing.
    """
    folder = notebook_dir(directory)
    stems = sorted({p.stem for p in folder.glob("[0-9][0-9]_*.py")}
                   | {p.stem for p in folder.glob("[0-9][0-9]_*.ipynb")})
    if not stems:
        raise SystemExit(f"no notebooks (NN_name.ipynb or NN_name.py) in {folder.resolve()}: "
                         f"pass --notebooks DIR, the folder that holds them, or run from it")
    if names:
        wanted = [Path(n).stem for n in names]
        unknown = [w for w in wanted if not any(s.startswith(w) for s in stems)]
        if unknown:
            raise SystemExit(f"no notebook matches {unknown}; known: {stems}")
        stems = [s for s in stems if any(s.startswith(w) for w in wanted)]
    return stems


def notebook_paths(names: list[str] | None = None,
                   directory: str | Path | None = None) -> list[Path]:
    """The full edition's .ipynb paths in series order (see `notebook_stems`)."""
    folder = notebook_dir(directory)
    return [folder / f"{s}.ipynb" for s in notebook_stems(names, folder)]


def add_argument(parser) -> None:
    """The tools' shared `--notebooks DIR` option."""
    parser.add_argument("--notebooks", metavar="DIR", type=Path,
                        help="the folder that holds the notebooks (default: the checkout's "
                             "notebooks/, or the current directory)")
