"""The project's own promises: the lock and environment.yml agree, every notebook pair is in
sync and was executed top to bottom, `import attnlab` is light, the public API exists."""
import json
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# The series, in order (DESIGN.md, "The notebooks, in order"): a lost, renamed or extra notebook
# fails.
SERIES = ["01_attention_by_hand", "02_why_scale", "03_training_an_encoder", "04_position_ablation",
          "05_pretrained_cnn_retrieval", "06_pretrained_transformer", "07_masks_decoders",
          "08_attention_cost"]


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
    reqs = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    loose = [r for r in reqs if "==" not in r]
    assert not loose, f"requirements.txt must pin exact versions, found: {loose}"
    for needed in ("torch", "keras", "numpy", "matplotlib", "ipywidgets", "jupytext", "nbval",
                   "jupyterlab", "pytest"):
        assert needed in pins(reqs), f"{needed} missing from the lock"
    assert pins(reqs)["torch"].startswith("2.13.0")


def test_environment_yml_mirrors_the_lock():
    lock = pins((ROOT / "requirements.txt").read_text().splitlines())
    env_text = (ROOT / "environment.yml").read_text()
    env = pins(line.strip().lstrip("- ") for line in env_text.splitlines())
    assert env == lock, (
        "environment.yml and requirements.txt disagree: "
        f"only in env {set(env.items()) - set(lock.items())}, "
        f"only in lock {set(lock.items()) - set(env.items())}; run `make lock`"
    )
    assert re.search(r"^\s*-\s*python=3\.11\s*$", env_text, re.M), (
        "environment.yml must ask for python=3.11")


def test_the_series_is_the_eight_notebooks_in_order():
    assert [p.stem for p in NOTEBOOKS] == SERIES
    assert sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py")) == SERIES


def test_every_notebook_has_a_student_edition_and_a_readme_row():
    students = sorted(p.stem for p in (ROOT / "notebooks" / "student").glob("[0-9][0-9]_*.ipynb"))
    assert students == SERIES, "run `make student` to write notebooks/student/"
    readme = (ROOT / "README.md").read_text()
    for name in SERIES:
        assert f"`{name}`" in readme, f"README's notebook table has no row for {name}"


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_pair_in_sync_and_executed_in_order(ipynb):
    py = ipynb.with_suffix(".py")
    assert py.exists(), f"{ipynb.name} has no paired {py.name}; run `make sync`"
    from_py = [(c.cell_type, c.source.strip()) for c in jupytext.read(py).cells]
    from_nb = [(c.cell_type, c.source.strip()) for c in jupytext.read(ipynb).cells]
    assert from_py == from_nb, (
        f"{py.name} and {ipynb.name} differ; run `make sync`, then `make notebooks`")
    cells = json.loads(ipynb.read_text())["cells"]
    counts = [c["execution_count"] for c in cells if c["cell_type"] == "code" and c["source"]]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{ipynb.name}: stored outputs must come from one top-to-bottom run; "
        f"run `make notebooks NB={ipynb.name[:2]}`")
    for c in cells:
        for o in c.get("outputs", []):
            assert o["output_type"] != "error", f"{ipynb.name} stores an error output"
            if o.get("name") == "stderr":
                assert not re.search(r"Warning|Traceback", "".join(o["text"])), (
                    f"{ipynb.name} stores a warning")


def test_import_is_light_and_offline():
    code = ("import sys, attnlab; heavy = [m for m in ('keras', 'tokenizers', 'safetensors', "
            "'ipywidgets', 'requests', 'huggingface_hub') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"import attnlab pulled in {out.stdout.strip()}"


# DESIGN.md's public API: code outside this repository calls these names with these arguments.
PUBLIC_API = {
    "scaled_dot_product_attention": ["q", "k", "v", "mask"],
    "MultiHeadAttention": ["d_model", "n_heads"],
    "causal_mask": ["T"],
    "EncoderBlock": ["d_model", "n_heads", "d_ff"],
    "TinyTransformer": ["vocab_size"],
    "load_minilm": ["path"],
    "load_fashion_mnist": [],
    "embed_images": ["images", "alpha"],
    "SentimentApp": [],
}


@pytest.mark.parametrize("name", list(PUBLIC_API))
def test_public_api_keeps_its_names_and_arguments(name):
    import inspect

    import attnlab

    obj = getattr(attnlab, name)
    params = list(inspect.signature(obj).parameters.values())
    names = [p.name for p in params]
    assert names[:len(PUBLIC_API[name])] == PUBLIC_API[name], (
        f"attnlab.{name}{inspect.signature(obj)}")
    required = [p.name for p in params
                if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert set(required) <= set(PUBLIC_API[name]), f"attnlab.{name} now requires {required}"
    assert name in attnlab.__all__


def test_multi_head_attention_has_the_documented_projections_and_forward():
    import inspect

    import attnlab

    mha = attnlab.MultiHeadAttention(8, 2)
    assert all(isinstance(getattr(mha, n), torch.nn.Linear) for n in ("q", "k", "v", "out"))
    assert list(inspect.signature(mha.forward).parameters) == ["x", "mask", "context"]


def test_readme_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make run" in first_block and "make test" in first_block
    makefile = (ROOT / "Makefile").read_text()
    for target in ("setup", "run", "test", "test-portable", "lint", "lab", "notebooks", "student",
                   "sync", "slides", "html", "fetch"):
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no `{target}` target"
