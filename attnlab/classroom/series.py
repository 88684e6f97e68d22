"""The series' notebooks: where they are and their names in order.

The one place the tooling (runner, student edition, slides and site, tests) learns which
notebooks exist: every notebooks/NN_name.py or NN_name.ipynb, in NN order. Nothing lists them by
hand, so adding notebook 09 is adding its files.
"""
from __future__ import annotations

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
    """The full edition's .ipynb paths in series order (see `notebook_stems`)."""
    return [NOTEBOOK_DIR / f"{s}.ipynb" for s in notebook_stems(names)]
