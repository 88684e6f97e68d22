"""The project's own promises: the two locks pin what pyproject.toml asks for and keep the test
tools out of the students' lock; every notebook found in notebooks/ is complete (numbered in
order, paired and executed, with a student edition, a README row and an exercises module);
`import attnlab` is light; the public API exists (CONTRIBUTING.md, "Public API")."""
import importlib
import inspect
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jupytext
import torch
from helpers import ROOT
from packaging.requirements import Requirement

import attnlab
from attnlab import exercises

# The series is whatever notebooks/ holds: nothing here lists it by hand.
SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    """The normalised name of a requirement ("Foo_bar[x]>=1" -> foo-bar)."""
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)[1]
                  ).lower()


def pins(path: Path) -> dict[str, str]:
    """name -> version of every line of a lock file; a line that is not `name==version` fails."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[^\s;]+", line), (
            f"{path.name} must pin exact versions, found {line!r}: run `make lock`")
        name, version = line.split("==")
        found[_name(name)] = version
    return found


def test_the_students_lock_pins_what_they_run_and_no_test_tool():
    students = pins(ROOT / "requirements.txt")
    needed = PYPROJECT["project"]["dependencies"] + \
        PYPROJECT["project"]["optional-dependencies"]["classroom"]
    missing = [r for r in needed if _name(r) not in students]
    assert not missing, f"requirements.txt lacks {missing} from pyproject.toml: run `make lock`"
    outside = [f"{r.name}=={students[_name(r.name)]} is not {r}" for r in map(Requirement, needed)
               if not r.specifier.contains(students[_name(r.name)], prereleases=True)]
    assert not outside, f"requirements.txt pins outside pyproject.toml's ranges: {outside}"
    dev = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["dev"]}
    assert dev.isdisjoint(students), f"test tools in the students' lock: {dev & set(students)}"


def test_the_dev_lock_pins_the_test_tools_beside_the_students_lock():
    students, dev = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-dev.txt")
    tools = [r for r in PYPROJECT["project"]["optional-dependencies"]["dev"]
             if _name(r) not in dev]
    assert not tools, f"requirements-dev.txt lacks {tools}: run `make lock`"
    assert students.keys().isdisjoint(dev), (
        f"pinned in both locks: {sorted(students.keys() & dev.keys())}; run `make lock`")
    assert "transformers" not in students | dev  # the benchmarks' venv only


def test_the_series_is_numbered_from_01_without_gaps():
    numbers = [int(p.name[:2]) for p in SOURCES]
    assert numbers == list(range(1, len(numbers) + 1)), [p.name for p in SOURCES]
    assert [p.stem for p in NOTEBOOKS] == [p.stem for p in SOURCES], (
        "every notebooks/NN_name.py needs its NN_name.ipynb and back: run `make sync`")


def test_every_notebook_has_its_student_edition_readme_row_and_exercises():
    readme = (ROOT / "README.md").read_text()
    missing = []
    for py in SOURCES:
        nn = py.name[:2]
        if not (ROOT / "notebooks" / "student" / f"{py.stem}.ipynb").exists():
            missing.append(f"no student edition of {py.stem}: run `make student NB={nn}`")
        if not re.search(rf"^\| {nn} \| `{py.stem}` \|", readme, re.M):
            missing.append(f"README's notebook table has no row for {py.stem}")
        if not (ROOT / "attnlab" / "exercises" / f"ex{nn}.py").exists():
            missing.append(f"{py.stem} has no exercises module attnlab/exercises/ex{nn}.py")
    assert SOURCES and not missing, "\n".join(missing)


MAIN_LINE_WORDS = 1800  # issue 48: what a typical student reads in a 90-minute lab, beside code
MAIN_LINE_CHECKS = (3, 6)  # exercises on a main line: at least three, at most six
GOING_FURTHER = re.compile(r"## Going further\b")  # the heading of the optional closing part
CHECK_CALL = re.compile(r"\b(ex\d\d\.\w+)\(")


def main_line(source: Path) -> list:
    """The cells a student works through before the notebook's `## Going further` (all of them
    where there is none)."""
    cells = jupytext.read(source).cells
    end = next((i for i, c in enumerate(cells)
                if c.cell_type == "markdown" and GOING_FURTHER.match(c.source)), len(cells))
    return cells[:end]


def main_line_words(source: Path) -> int:
    """Words of prose a student reads on the main line, speaker notes left out."""
    return sum(len(cell.source.split()) for cell in main_line(source)
               if cell.cell_type == "markdown"
               and (cell.metadata.get("slideshow") or {}).get("slide_type") != "notes")


def main_line_checks(source: Path) -> list[str]:
    """The exercise checks the main line calls (`exNN.name(...)`), in order."""
    declared = exercises.checks()
    return [name for cell in main_line(source) if cell.cell_type == "code"
            for name in CHECK_CALL.findall(cell.source) if name in declared]


def test_every_main_line_fits_one_lab():
    """Issue 48: a notebook's main line is one 90-minute lab: at most 1,800 words of prose and
    three to six exercises; side studies sit in its closing "Going further" (optional, still
    executed)."""
    long = {p.stem: main_line_words(p) for p in SOURCES if main_line_words(p) > MAIN_LINE_WORDS}
    assert not long, f"main lines over {MAIN_LINE_WORDS} words: {long}"
    low, high = MAIN_LINE_CHECKS
    counts = {p.stem: len(main_line_checks(p)) for p in SOURCES}
    assert all(low <= n <= high for n in counts.values()), f"exercises per main line: {counts}"


def test_hints_sit_above_their_exercise():
    """Issue 28: one place for hints in every notebook, between the question and the cell the
    student writes in, so a student meets them before running, not below a ✗."""
    below = {p.stem: [i for i, cell in enumerate(cells) if i and cell.cell_type == "markdown"
                      and cell.source.startswith("<details><summary>Hint")
                      and cells[i - 1].cell_type == "code"]
             for p in SOURCES for cells in [jupytext.read(p).cells]}
    assert not {k: v for k, v in below.items() if v}, f"hint cells below their code: {below}"


def pair_problems(ipynb: Path) -> list[str]:
    """What is wrong with a notebook and its paired .py: out of sync, not one top-to-bottom
    run, an error or a warning stored."""
    py = ipynb.with_suffix(".py")
    if not py.exists():
        return [f"{ipynb.name} has no paired {py.name}; run `make sync`"]
    found = []
    from_py = [(c.cell_type, c.source.strip()) for c in jupytext.read(py).cells]
    from_nb = [(c.cell_type, c.source.strip()) for c in jupytext.read(ipynb).cells]
    if from_py != from_nb:
        found.append(f"{py.name} and {ipynb.name} differ; run `make sync`, then `make notebooks`")
    cells = json.loads(ipynb.read_text())["cells"]
    counts = [c["execution_count"] for c in cells if c["cell_type"] == "code" and c["source"]]
    if counts != list(range(1, len(counts) + 1)):
        found.append(f"{ipynb.name}: stored outputs must come from one top-to-bottom run; "
                     f"run `make notebooks NB={ipynb.name[:2]}`")
    open_code = [c["id"] for c in cells if "hide-input" in c["metadata"].get("tags", [])
                 and not c["metadata"].get("jupyter", {}).get("source_hidden")]
    if open_code:  # issue 28: code that only draws is collapsed in JupyterLab, as on the slides
        found.append(f"{ipynb.name}: hide-input cells {open_code} show their code in Jupyter; "
                     f"run `make notebooks NB={ipynb.name[:2]}`")
    outputs = [o for c in cells for o in c.get("outputs", [])]
    if any(o["output_type"] == "error" for o in outputs):
        found.append(f"{ipynb.name} stores an error output")
    if any(o.get("name") == "stderr" and re.search(r"Warning|Traceback", "".join(o["text"]))
           for o in outputs):
        found.append(f"{ipynb.name} stores a warning")
    return found


def test_every_notebook_pair_is_in_sync_and_executed_in_order():
    found = [problem for ipynb in NOTEBOOKS for problem in pair_problems(ipynb)]
    assert NOTEBOOKS and not found, "\n".join(found)


def test_import_never_loads_keras_or_a_network_client():
    """Keras must be imported only after attnlab has chosen its backend (assets.import_keras),
    and nothing may be fetched at import time. (attnlab's own modules import their light
    dependencies at the top, tokenizers and ipywidgets included: about 0.15 s in all.)"""
    code = ("import sys, attnlab; heavy = [m for m in ('keras', 'tensorflow', 'requests', "
            "'huggingface_hub') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"import attnlab pulled in {out.stdout.strip()}"


# The public API: code outside this repository calls these names with these arguments (the
# leading ones; more may follow with defaults). CONTRIBUTING.md's "Public API" lists the same.
PUBLIC_API = {
    "scaled_dot_product_attention": ["q", "k", "v", "mask"],
    "MultiHeadAttention": ["d_model", "n_heads"],
    "causal_mask": ["T"],
    "rotary": ["x"],
    "uniform_attention": ["model"],
    "attention_maps": ["model"],
    "sample_next": ["logits"],
    "lessons.classifier.train_classifier": [],
    "EncoderBlock": ["d_model", "n_heads", "d_ff"],
    "TinyTransformer": ["vocab_size"],
    "load_minilm": ["path"],
    "load_fashion_mnist": [],
    "embed_images": ["images", "alpha"],
    "SentimentApp": [],
    "pretrained.llama.load_smollm2": [],
}


def test_public_api_keeps_its_names_and_arguments():
    changed = []
    for name, expected in PUBLIC_API.items():
        module, _, attr = name.rpartition(".")
        owner = importlib.import_module(f"attnlab.{module}") if module else attnlab
        obj = getattr(owner, attr, None)
        if obj is None or (not module and attr not in attnlab.__all__):
            changed.append(f"attnlab.{name} is gone (or gone from attnlab.__all__)")
            continue
        params = list(inspect.signature(obj).parameters.values())
        if [p.name for p in params][:len(expected)] != expected:
            changed.append(f"attnlab.{name}{inspect.signature(obj)} does not start with {expected}")
        required = [p.name for p in params if p.default is p.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not set(required) <= set(expected):
            changed.append(f"attnlab.{name} now requires {required}")
    assert not changed, "\n".join(changed)


def test_contributing_lists_the_public_api_this_file_holds():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## Public API", 1)[1].split("\n## ", 1)[0]
    called = set(re.findall(r"`([A-Za-z_][\w.]*)\(", section))
    listed = {name for name in called if not name.startswith(("model", "tokenizer"))}  # returns
    assert listed == set(PUBLIC_API), (
        f"CONTRIBUTING.md lists {sorted(listed - set(PUBLIC_API))} that this test does not hold, "
        f"and misses {sorted(set(PUBLIC_API) - listed)}")


def test_multi_head_attention_has_the_documented_projections_and_forward():
    mha = attnlab.MultiHeadAttention(8, 2)
    assert all(isinstance(getattr(mha, n), torch.nn.Linear) for n in ("q", "k", "v", "out"))
    assert list(inspect.signature(mha.forward).parameters) == ["x", "mask", "context"]


def test_readme_opens_with_the_two_commands_and_the_makefile_has_every_target_it_names():
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make run" in first_block and "make test" in first_block
    makefile = (ROOT / "Makefile").read_text()
    named = set(re.findall(r"`make ([a-z-]+)", readme + (ROOT / "CONTRIBUTING.md").read_text()))
    missing = [t for t in sorted(named) if not re.search(rf"^{t}:", makefile, re.M)]
    assert not missing, f"README.md or CONTRIBUTING.md name make targets that are not: {missing}"
