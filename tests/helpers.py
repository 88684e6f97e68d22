"""Helpers the test files share, imported as `from helpers import ...`: pytest's default
`prepend` import mode puts tests/ (the rootdir of these files, which has no __init__.py) on
sys.path. Fixtures stay in conftest.py, where pytest finds them without an import."""
import base64
import os
import re
from pathlib import Path

import pytest
import torch

from attnlab.classroom.student import BEGIN, MARKER
from attnlab.plumbing import assets

ROOT = Path(__file__).resolve().parent.parent
SHARED_ASSETS = ROOT.parent / "shared" / "assets"  # the assets beside the repository, if any
TINY_PNG = base64.b64decode(  # a 1x1 transparent PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def raises_each(cases, error: type[Exception] | None = None) -> None:
    """Each case (call, error, pattern), or (call, pattern) with one `error` for all: `call()`
    raises `error` with a message in which the regular expression `pattern` is found. One test
    walks a whole table of the ways one function refuses its arguments, and a failure still
    names the case by its pattern."""
    for case in cases:
        call, expected, pattern = case if error is None else (case[0], error, case[1])
        try:
            call()
        except expected as e:
            assert re.search(pattern, str(e)), (
                f"{type(e).__name__}: {str(e)!r} does not match {pattern!r}")
        else:
            pytest.fail(f"did not raise {expected.__name__} matching {pattern!r}")


def rand(*shape, seed=0) -> torch.Tensor:
    """Standard-normal numbers of `shape`, the same for the same seed."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def copy_into_torch_mha(ours, ref: torch.nn.MultiheadAttention | None = None):
    """`ref` (or a new torch.nn.MultiheadAttention of our layer's size) with our q, k, v and out
    projections copied in, to compare attnlab's attention with PyTorch's."""
    if ref is None:
        ref = torch.nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q.weight, ours.k.weight, ours.v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q.bias, ours.k.bias, ours.v.bias]))
        ref.out_proj.weight.copy_(ours.out.weight)
        ref.out_proj.bias.copy_(ours.out.bias)
    return ref


def use_shared_assets(monkeypatch) -> None:
    """Look for assets in the repository's sibling folder shared/assets, where there is one and
    $ATTNLAB_ASSETS does not say otherwise."""
    if "ATTNLAB_ASSETS" not in os.environ and SHARED_ASSETS.is_dir():
        monkeypatch.setenv("ATTNLAB_ASSETS", str(SHARED_ASSETS))


def need(*names: str) -> None:
    """Skip (saying why) when this machine lacks one of the assets `names`; CI has them all."""
    for name in names:
        try:
            assets.require(name)
        except assets.AssetError as e:
            pytest.skip(f"asset missing here: {str(e).splitlines()[0]}")


def solution_lines(nb) -> list[tuple[int, str]]:
    """(cell index, line) of every line strictly inside a solution region of notebook `nb`: what
    neither the student edition nor a slide may show."""
    found: list[tuple[int, str]] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        inside = False
        for line in cell.source.split("\n"):
            match = MARKER.match(line)
            if match:
                inside = match["marker"] == BEGIN
            elif inside:
                found.append((index, line))
    return found


# As on Windows: no `resource`, no process groups, no SIGALRM, in a fresh Python and in every
# process it starts (a sitecustomize on PYTHONPATH takes them away); and an ASCII locale without
# UTF-8 mode (Windows' cp1252 fails the same way on ✓).
WINDOWS_LIKE = """
import os, signal, sys
sys.modules["resource"] = None
for name in ("killpg", "setsid", "getpgid"):
    if hasattr(os, name):
        delattr(os, name)
for name in ("setitimer", "getitimer", "SIGALRM"):
    if hasattr(signal, name):
        delattr(signal, name)
"""


def ascii_windows_like(tmp_path: Path) -> dict:
    """An environment for a subprocess that runs as on Windows under an ASCII locale (above);
    its sitecustomize is written into `tmp_path`/site."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(WINDOWS_LIKE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIO"))}
    return {**env, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
            "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), env.get("PYTHONPATH", "")])}
