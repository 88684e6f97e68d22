"""Which of a notebook's asserts hold for seeds nobody recorded, and by how much?

A notebook's `remove-cell` asserts guard what its prose says of trained models; a bound set at
the edge of the seeds someone happened to run is a claim about those seeds only. This runs the
full edition under ATTNLAB_SEED = each of --seeds, with every assert of a `remove-cell` cell
turned into a record (the condition is evaluated, the run goes on), and prints per assert how
many seeds it held for and which failed. `make replicate` stops at the first failure; this
shows all of them at once, so a bound can be set from 20 or more seeds (issue 48).

    python benchmarks/asserts_over_seeds.py 03 [--seeds 0-19] [--jobs 2] [--timeout 900]
                                                [--show EXPR ...]

--show prints, per seed, the value of each expression in that seed's kernel after the run (for
example --show 'accuracy - uniform_accuracy'), so a bound is set from the measured values, not
only from which seeds passed it.

Each seed runs in its own kernel; --jobs kernels at once (each on one torch thread, as the
notebooks are). A cell that raises for another reason is reported as such.
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from attnlab.classroom import series  # noqa: E402
from attnlab.classroom.runner import KERNEL_ARGUMENTS  # noqa: E402

RECORD = "_soft_asserts"
PRELUDE = f"""
{RECORD} = []
def _soft_assert(test, message, where):
    try:
        held, error = bool(test()), None
    except Exception as e:  # noqa: BLE001
        held, error = False, f"{{type(e).__name__}}: {{e}}"
    {RECORD}.append((where, None if message is None else str(message), held, error))
"""


class _Soften(ast.NodeTransformer):
    """`assert test, message` -> `_soft_assert(lambda: test, message, "cell c line n")`."""

    def __init__(self, cell: int):
        self.cell = cell

    def visit_Assert(self, node: ast.Assert) -> ast.Expr:
        where = ast.Constant(f"cell {self.cell} line {node.lineno}")
        call = ast.Call(ast.Name("_soft_assert", ast.Load()),
                        [ast.Lambda(ast.arguments([], [], None, [], [], None, []), node.test),
                         node.msg or ast.Constant(None), where], [])
        return ast.copy_location(ast.Expr(call), node)


def softened(nb, show: list[str]):
    """The notebook with its remove-cell asserts recorded instead of raised, outputs cleared,
    and a last cell that prints the records and the --show expressions as one JSON line."""
    nb = copy.deepcopy(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        if "remove-cell" in cell.metadata.get("tags", []):
            tree = ast.fix_missing_locations(_Soften(i).visit(ast.parse(cell.source)))
            cell.source = ast.unparse(tree)
    nb.cells.insert(0, nbformat.v4.new_code_cell(PRELUDE))
    shown = "{" + ", ".join(f"{e!r}: _shown(lambda: {e})" for e in show) + "}"
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json\n"
        "def _shown(f):\n"
        "    try:\n        return repr(f())\n"
        "    except Exception as e:  # noqa: BLE001\n        return f'{type(e).__name__}: {e}'\n"
        f"print(json.dumps({{'records': {RECORD}, 'shown': {shown}}}))"))
    return nb


def run(path: Path, seed: int, timeout: int, show: list[str]) -> dict:
    nb = softened(nbformat.read(path, as_version=4), show)
    client = NotebookClient(nb, timeout=timeout, allow_errors=True, kernel_name="python3",
                            extra_arguments=KERNEL_ARGUMENTS,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(env={**os.environ, "ATTNLAB_SEED": str(seed)})  # this kernel's series seed
    errors = [(i, o["ename"], o["evalue"][:120]) for i, c in enumerate(nb.cells)
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    last = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []))
    found = json.loads(last) if last.strip() else {"records": [], "shown": {}}
    return {"seed": seed, **found, "errors": errors}


def seeds(text: str) -> list[int]:
    found = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        found += list(range(int(low), int(high or low) + 1))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", help="a notebook's NN prefix or name")
    parser.add_argument("--seeds", default="0-19", help="e.g. 0-19 or 11,13,21 (default 0-19)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument("--show", action="append", default=[], metavar="EXPR",
                        help="an expression to print per seed after the run (repeatable)")
    args = parser.parse_args(argv)
    (path,) = series.notebook_paths([args.notebook])
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda s: run(path, s, args.timeout, args.show),
                                seeds(args.seeds)))
    table: dict[str, dict] = {}
    for result in results:
        for where, message, held, error in result["records"]:
            entry = table.setdefault(where, {"message": message, "held": set(), "failed": {}})
            if held:
                entry["held"].add(result["seed"])
            else:
                entry["failed"][result["seed"]] = error or "false"
        for cell, name, value in result["errors"]:
            print(f"seed {result['seed']}: cell {cell} raised {name}: {value}")
    n = len(results)
    print(f"{path.name}: {len(table)} asserts over {n} seeds")
    for where, entry in table.items():
        failed = set(entry["failed"])  # a seed fails if the assert failed once (in a loop: any)
        ok = n - len(failed)
        mark = "ok " if not failed else "NO "
        print(f"{mark} {where:<20} held in {ok:>2}/{n}  {entry['message'] or ''}"
              + (f"  failed for seeds {sorted(failed)}" if failed else ""))
    for expr in args.show:
        print(f"\n{expr}:")
        for result in results:
            print(f"  seed {result['seed']:>3}: {result['shown'].get(expr, '(not run)')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
