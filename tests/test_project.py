"""The project's own promises: the lock and environment.yml agree, every notebook pair is in
sync and was executed top to bottom, `import attnlab` is light, the public API exists."""
import json
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def pins(lines):
    out = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==")
            out[re.sub(r"[-_.]+", "-", name.lower())] = version.strip()
    return out


def test_lock_pins_everything_exactly():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    reqs = [l.strip() for l in lines if l.strip() and not l.strip().startswith("#")]
    loose = [r for r in reqs if "==" not in r]
    assert not loose, f"requirements.txt must pin exact versions, found: {loose}"
    for needed in ("torch", "keras", "numpy", "matplotlib", "ipywidgets", "jupytext", "nbval", "jupyterlab", "pytest"):
        assert needed in pins(reqs), f"{needed} missing from the lock"
    assert pins(reqs)["torch"].startswith("2.13.0")


def test_environment_yml_mirrors_the_lock():
    lock = pins((ROOT / "requirements.txt").read_text().splitlines())
    env_text = (ROOT / "environment.yml").read_text()
    env = pins(l.strip().lstrip("- ") for l in env_text.splitlines())
    assert env == lock, (
        f"environment.yml and requirements.txt disagree: only in env {set(env.items()) - set(lock.items())}, "
        f"only in lock {set(lock.items()) - set(env.items())}; run `make lock`"
    )
    assert re.search(r"^\s*-\s*python=3\.11\s*$", env_text, re.M), "environment.yml must ask for python=3.11"


def test_there_are_seven_notebooks_in_order():
    names = [p.stem for p in NOTEBOOKS]
    assert [n[:2] for n in names] == [f"{i:02d}" for i in range(1, len(names) + 1)], names
    assert len(names) >= 2


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_pair_in_sync_and_executed_in_order(ipynb):
    py = ipynb.with_suffix(".py")
    assert py.exists(), f"{ipynb.name} has no paired {py.name}; run `make sync`"
    from_py = [(c.cell_type, c.source.strip()) for c in jupytext.read(py).cells]
    from_nb = [(c.cell_type, c.source.strip()) for c in jupytext.read(ipynb).cells]
    assert from_py == from_nb, f"{py.name} and {ipynb.name} differ; run `make sync`, then `make notebooks`"
    cells = json.loads(ipynb.read_text())["cells"]
    counts = [c["execution_count"] for c in cells if c["cell_type"] == "code" and c["source"]]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{ipynb.name}: stored outputs must come from one top-to-bottom run; run `make notebooks NB={ipynb.name[:2]}`")
    for c in cells:
        for o in c.get("outputs", []):
            assert o["output_type"] != "error", f"{ipynb.name} stores an error output"
            if o.get("name") == "stderr":
                assert not re.search(r"Warning|Traceback", "".join(o["text"])), f"{ipynb.name} stores a warning"


def test_import_is_light_and_offline():
    code = ("import sys, attnlab; heavy = [m for m in ('keras', 'tokenizers', 'safetensors', 'ipywidgets', "
            "'requests', 'huggingface_hub') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"import attnlab pulled in {out.stdout.strip()}"


def test_public_api_names_exist():
    import attnlab

    for name in ("scaled_dot_product_attention", "MultiHeadAttention", "EncoderBlock", "TinyTransformer",
                 "load_minilm", "load_fashion_mnist", "embed_images", "SentimentApp"):
        assert callable(getattr(attnlab, name)), name


def test_readme_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make run" in first_block and "make test" in first_block
    makefile = (ROOT / "Makefile").read_text()
    for target in ("setup", "run", "test", "lab", "notebooks", "sync", "slides", "html", "fetch"):
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no `{target}` target"
