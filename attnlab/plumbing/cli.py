"""`python -m attnlab ...`: the asset commands an instructor runs before class.

    python -m attnlab fetch [NAME ...]  download what is missing, verify all (exit 0 = all ok)
    python -m attnlab doctor            one line per asset: status, where found (exit 0 = all ok)
    python -m attnlab kernel            this environment's kernels name the cell to run first
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import assets


def _where(probes: list[assets.Probe]) -> str:
    """Where the verified copy is, plus any copy passed over on the way (a damaged file in a place
    looked at first is worth knowing about even when a later one is fine)."""
    found = probes[-1]
    skipped = [f"{p.place}: {p.status}" for p in probes[:-1]
               if p.status.startswith(("truncated", "corrupted", "unreadable"))]
    return str(found.path) + (f"  (passed over {'; '.join(skipped)})" if skipped else "")


def doctor(out=None) -> int:
    """Print one line per asset — name, status, where — and return 0 only if every asset is
    present with a matching sha256. Never downloads."""
    out = out or sys.stdout
    width = max(map(len, assets.ASSETS))
    failed = 0
    for name, asset in assets.ASSETS.items():
        probes = assets.locate(name)
        if probes and probes[-1].ok:
            print(f"{name:<{width}}  ok       {_where(probes)}", file=out)
            continue
        failed += 1
        bad = [p for p in probes if p.status not in ("absent", "not set", "not installed")]
        status = "BAD" if bad else "missing"
        looked = "; ".join(f"{p.place}{' ' + str(p.path) if p.path else ''}: {p.status}"
                           for p in probes)
        print(f"{name:<{width}}  {status:<7}  looked in {looked} -> fix: {asset.fix}", file=out)
    return 1 if failed else 0


def fetch(names: list[str] | None = None, out=None) -> int:
    """Download every missing asset (or only `names`) from its official place, verify all, and
    return 0 only if every one ends up verified."""
    out = out or sys.stdout
    names = names or list(assets.ASSETS)
    unknown = [n for n in names if n not in assets.ASSETS]
    if unknown:
        print(f"unknown asset(s) {unknown}; known: {', '.join(assets.ASSETS)}", file=sys.stderr)
        return 2
    width = max(map(len, names))
    failed = 0
    for name in names:
        try:
            path = assets.require(name)
            print(f"{name:<{width}}  ok          {path}", file=out, flush=True)
        except assets.AssetError:
            print(f"{name:<{width}}  fetching ...", file=out, flush=True)
            try:
                path = assets.fetch(name)
                print(f"{name:<{width}}  downloaded  {path}", file=out, flush=True)
            except assets.AssetError as e:
                failed += 1
                print(f"{name:<{width}}  FAILED      {e}", file=out, flush=True)
    return 1 if failed else 0


EXTENSION = "attnlab.exercises.order"
KERNEL_LINE = (f"c.InteractiveShellApp.extensions.append({EXTENSION!r})"
               "  # python -m attnlab kernel\n")


def kernel(prefix: str | None = None, out=None) -> int:
    """Make every IPython kernel of this environment (`sys.prefix`) load `attnlab.exercises.order`,
    so that a cell run before a notebook's imports, after a restart, says which cell to run
    first instead of a bare NameError. IPython reads `<prefix>/etc/ipython/` for every kernel of
    the environment; the line is added to the config file there, which is created if missing and
    otherwise kept as it is (a second run adds nothing). Returns 0, or 1 where it cannot write."""
    out = out or sys.stdout
    config = Path(prefix or sys.prefix) / "etc" / "ipython" / "ipython_kernel_config.py"
    try:
        text = config.read_text(encoding="utf-8") if config.exists() else ""
        if EXTENSION in text:
            print(f"already set in {config}", file=out)
            return 0
        config.parent.mkdir(parents=True, exist_ok=True)
        with config.open("a", encoding="utf-8") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + KERNEL_LINE)
    except OSError as e:
        print(f"could not write {config}: {e.strerror or e}. Run it in an environment you can "
              f"write to (a venv or conda environment of your own)", file=sys.stderr)
        return 1
    print(f"kernels of {Path(prefix or sys.prefix)} now load {EXTENSION} ({config})", file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab", description="attnlab commands.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = commands.add_parser("fetch", help="download what is missing and verify every asset "
                                          "(before class)")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"only these assets (default all: {', '.join(assets.ASSETS)})")
    commands.add_parser("doctor", help="one line per asset: present and sha256-verified? "
                                       "(never downloads)")
    commands.add_parser("kernel", help="make this environment's kernels name the cell to run "
                                       "first when a cell runs before a notebook's imports")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        return fetch(args.names)
    if args.command == "doctor":
        return doctor()
    if args.command == "kernel":
        return kernel()
    parser.print_help()
    return 2
