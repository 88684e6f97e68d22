"""Grade submitted student notebooks by judging their answers (`make grade SUBMISSIONS=dir`).

Every check of the series prints one line that starts with its mark: `✓` right, `✗` not yet,
`○` not attempted, `✎` a prediction given (see `attnlab.exercises`). That line is the student's
feedback, never the grade: a cell can print it. The grade follows one rule, the one nbgrader's
locked test cells follow too (`attnlab.exercises.grading`): the answer key (`answer_key`, read
from the full edition: which cell calls which check on which variable) says where each check
is; after that cell, the grader runs a cell of its own, written at grading time and absent from
the submission, that judges the variable the check was given afresh: on inputs drawn from a
seed drawn now, with attnlab's reference refusing to stand in for the student's function.
Printed lines and the kernel's record of past checks earn nothing. So a blank notebook earns
nothing, a notebook that prints ✓ lines earns nothing, and no grade depends on a stored output
a student could edit.

This is the grader to trust (nbgrader's autograde uses it too, through the course's config:
`attnlab.classroom.nbgrade`). Every check is judged in this process, which no answer cell can
reach or overwrite (`OwnJudge`). For an implement check (an `Implement`, or a hand-written one
through its split: `grading.split`) the seed, the inputs, the reference and the comparison are
all here; the kernel gets the inputs as data, only calls the student's function on them, and
hands the results back as data. For an explore or predict check the kernel hands back the answer
and the values the check is given, as data, and the check's own rule runs here. A hand-written
implement check without a split (none at present: see `grading.out_of_kernel`) would be judged
in the kernel by `grading.judge`, from a seed of its own, its verdict coming back as display
data tagged with a nonce of this run; such a grading cell gives one verdict, on its own check,
and none that takes the name of a check this process decides.

Each submission runs in a process of its own, in a fresh kernel, in a temporary folder that
holds a copy of it, with a time limit and a memory limit: one that loops forever, exhausts
memory, deletes the files around it or is not a notebook at all costs its own row and nothing
else. Submissions run side by side, as many at once as there are cores and as the memory
limit fits into the machine's memory (`--jobs` sets it). The result is a CSV, one row per check
line (student, notebook, exercise, mark, meaning, message) and one row per submission that could
not run, in the order of the submissions; a summary per student; and, for the instructor, per
check how many students stand at ✓, ✗, ○ and ✎ and the named mistakes most often hit (the ✗
messages), as a Markdown table and a picture beside the CSV (`grades-by-check.md`, `.png`).
Each exercise counts once per submission, by its verdict. What is left to a determined student:
only results that are right on inputs the kernel has not seen, and values the explore and
predict checks' rules accept, earn the point (`grading` says which route around the refusal of
attnlab's own function remains, and that the measurements an explore check is given are the
notebook's own, computed in its kernel).

    python -m attnlab.classroom.grade SUBMISSIONS [--out build/grades.csv] [--timeout 900]
                                      [--memory-gb 6] [--jobs N]

SUBMISSIONS holds `student/NN_name.ipynb` files (one folder per student) or `student.ipynb`.
"""
from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from ..exercises import checks, grading
from ..exercises.grading import MIME
from . import series
from .runner import KERNEL_ARGUMENTS
from .series import KERNELSPEC

MARKS = {"✓": "right", "✗": "not yet", "○": "not attempted", "✎": "prediction given"}
# Grades are students' data: by default they go to build/, which git ignores (as it ignores a
# grades.csv anywhere in the repository, for `--out grades.csv`); run elsewhere, they go there.
DEFAULT_OUT = Path("build") / "grades.csv"
# Seconds to wait for a cell's output after the cell finished. nbclient's 4 s drops a late
# verdict (a point lost) on a busy grading machine, and nbgrader's then fails the submission.
IOPUB_TIMEOUT_S = 60
FIELDS = ("student", "notebook", "exercise", "mark", "meaning", "message", "status")


def cell_checks(cell) -> list[tuple[str, str, str]]:
    """(mark, exercise name, message) of every check line in one executed cell's outputs, in
    order. A check line is `<mark> <name>: <message>`; a ✗'s message goes on over indented
    lines and ends where its `Hint:` starts (`attnlab.exercises.say`). Other printed lines are
    not checks."""
    if cell.cell_type != "code":
        return []
    printed = "".join("".join(o.get("text", "")) for o in cell.get("outputs", [])
                      if o.get("output_type") == "stream")  # a check prints its line
    found: list[list[str]] = []
    hint = False
    for line in printed.splitlines():
        mark, _, rest = line.partition(" ")
        if mark in MARKS and ": " in rest:
            name, message = rest.split(": ", 1)
            found.append([mark, name, message])
            hint = False
        elif found and found[-1][0] == "✗" and line.startswith("  ") and not hint:
            hint = line.strip().startswith("Hint:")
            if not hint:
                found[-1][2] += " " + line.strip()
    return [tuple(f) for f in found]


def check_lines(nb) -> list[tuple[str, str, str]]:
    """`cell_checks` of every cell of an executed notebook, in order."""
    return [found for cell in nb.cells for found in cell_checks(cell)]


def answer_key(full) -> list[dict]:
    """Where the full-edition notebook `full` (a path or a notebook) calls its checks: per
    call, in order, {"cell": cell id, "check": "exNN.function", "answer": the source of its
    first argument, "args": the source of the others}. Both graders judge these: the variable
    a check is given, not what it printed."""
    nb = full if hasattr(full, "cells") else nbformat.read(full, as_version=4)
    known = checks()
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.args:
                name = f"{node.func.value.id}.{node.func.attr}"
                if name in known:
                    found.append({"cell": cell.id, "check": name,
                                  "answer": ast.unparse(node.args[0]),
                                  "args": ", ".join(ast.unparse(a) for a in node.args[1:])})
    return sorted(found, key=lambda f: [c.id for c in nb.cells].index(f["cell"]))


def key_for(nb, name: str, folder: Path | None = None) -> list[dict]:
    """The answer key of the series notebook a submission is: the one its file is named after
    (`01_attention_by_hand.ipynb`), else the one it shares most cell ids with (cells keep the
    full edition's ids in both the student edition and nbgrader's release); [] for none."""
    folder = series.notebook_dir(folder)
    stems = series.notebook_stems(directory=folder)
    stem = Path(name).stem
    if stem not in stems:
        ids = {cell.get("id") for cell in nb.cells}
        shared = {s: len(ids & {c.id for c in nbformat.read(folder / f"{s}.ipynb", 4).cells})
                  for s in stems}
        stem = max(shared, key=shared.get) if shared and max(shared.values()) else None
    return answer_key(folder / f"{stem}.ipynb") if stem else []


GRADING_CELL = """from attnlab.exercises import grading as _attnlab_grading
_attnlab_grading.report({nonce!r}, {check!r}, lambda: ({answer}), lambda: ({args}{comma}),
                        seed={seed})"""
ANSWER_CELL = """from attnlab.exercises import grading as _attnlab_grading
_attnlab_grading.answer({check!r}, lambda: ({answer}), {inputs!r}, {outputs!r})"""
MEASURE_CELL = """from attnlab.exercises import grading as _attnlab_grading
_attnlab_grading.measure({check!r}, lambda: ({answer}), lambda: ({args}{comma}), {outputs!r})"""


class OwnJudge:
    """The grader's side of one submission's run: the verdict on every declared implement
    check and every explore and predict check (`grading.out_of_kernel`), decided in this
    process, never in the kernel. (An explore or predict check's cell, `MEASURE_CELL`, ships
    the answer and the check's values instead, and `after` runs the check's rule on them:
    `grading.measure`, `grading.measured`.)

    Its grading cell (`ANSWER_CELL`) only calls the student's function in the kernel. Right
    before that cell runs, `before` draws the inputs from this judge's seed (which, unlike the
    seed of the cells judged in the kernel, never leaves this process), computes the
    references and writes the inputs, as data, to a file in the submission's folder; right
    after, `after` reads what the kernel wrote back, as data, and judges it here
    (`grading.prepare`, `grading.returned`). Written and read around its own cell, the files
    outlive no cell of the student's. The cells it judges are known by identity, not by
    anything in the notebook, which the student wrote.

    It also keeps the kernel's verdicts in their place (`verdicts`): the grading cells judged
    in the kernel are known by identity too (`kernel_cells`), each gives one verdict, on its
    own check, and none under the name of a check this judge decides (`names`)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.seed = secrets.randbits(31)
        self.cells: dict[int, dict] = {}  # id(cell) -> {"check", "inputs", "outputs"}
        self.lines: dict[int, tuple[str, str, str]] = {}  # id(cell) -> its verdict
        self.prepared: dict[int, grading.Prepared] = {}
        self.names: set[str] = set()  # the names the checks decided here show
        self.kernel_cells: dict[int, str] = {}  # id(cell) -> the check it judges in the kernel

    def cell(self, entry: dict):
        """The grading cell of the answer key's `entry`, whose check this judge decides."""
        token = secrets.token_hex(8)
        files = {"inputs": str(self.folder / f"attnlab-grade-{token}-in.pt"),
                 "outputs": str(self.folder / f"attnlab-grade-{token}-out.pt")}
        if grading.shipped_values(entry["check"]):
            cell = nbformat.v4.new_code_cell(MEASURE_CELL.format(
                comma="," if entry["args"] else "", outputs=files["outputs"], **entry))
        else:
            cell = nbformat.v4.new_code_cell(ANSWER_CELL.format(check=entry["check"],
                                                                answer=entry["answer"], **files))
        self.cells[id(cell)] = {"check": entry["check"], **files}
        named = getattr(grading.split(entry["check"]), "name", None)  # the others': `after`
        if named is not None:
            self.names.add(named)
        return cell

    def before(self, cell, **_):
        """nbclient's hook before a cell runs: the inputs of this judge's cells."""
        entry = self.cells.get(id(cell))
        if entry is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)  # a cell may have removed it
            Path(entry["outputs"]).unlink(missing_ok=True)
            if grading.shipped_values(entry["check"]):
                return  # values from the kernel, judged in `after`: no inputs to make
            self.prepared[id(cell)] = grading.prepare(entry["check"], self.seed,
                                                      Path(entry["inputs"]))
        except Exception as e:  # noqa: BLE001 - the grader's own failure: this row, not the run
            self.lines[id(cell)] = ("✗", grading.split(entry["check"]).name,
                                    f"the grader could not make this check's inputs "
                                    f"({type(e).__name__}: {e})"[:200])

    def after(self, cell, **_):
        """nbclient's hook after a cell ran: the verdict on what this judge's cell wrote."""
        entry = self.cells.get(id(cell))
        if entry is not None and grading.shipped_values(entry["check"]) \
                and id(cell) not in self.lines:
            self.lines[id(cell)] = grading.measured(entry["check"], Path(entry["outputs"]),
                                                    self.seed)
            self.names.add(self.lines[id(cell)][1])
            Path(entry["outputs"]).unlink(missing_ok=True)
        elif entry is not None and id(cell) in self.prepared:
            self.lines[id(cell)] = grading.returned(self.prepared.pop(id(cell)),
                                                    Path(entry["outputs"]))
            for done in (entry["inputs"], entry["outputs"]):
                Path(done).unlink(missing_ok=True)


def with_grading_cells(nb, key: list[dict], nonce: str, seed: int, own: OwnJudge | None = None):
    """`nb` with, after each cell of the answer key, one grading cell per check it calls (at the
    end where the submission lost that cell): the grader's own cells, written now. With `own`,
    the declared implement checks get `own`'s cells; the others (all of them without `own`)
    are judged in the kernel, from `seed`."""
    cells, placed = [], set()

    def grading_cells(cell_id):
        for entry in key:
            if entry["cell"] == cell_id:
                placed.add(id(entry))
                if own is not None and grading.out_of_kernel(entry["check"]):
                    yield own.cell(entry)
                    continue
                cell = nbformat.v4.new_code_cell(GRADING_CELL.format(
                    nonce=nonce, seed=seed, comma="," if entry["args"] else "", **entry))
                if own is not None:
                    own.kernel_cells[id(cell)] = entry["check"]
                yield cell
    for cell in nb.cells:
        cells.append(cell)
        cells += list(grading_cells(cell.get("id")))
    for entry in key:
        if id(entry) not in placed:
            cells += list(grading_cells(entry["cell"]))
    nb.cells = cells
    return nb


def verdicts(nb, nonce: str, own: OwnJudge | None = None) -> list[tuple[str, str, str]]:
    """(mark, exercise, message) of every grading cell of an executed notebook, in order: only
    the display data tagged with this run's `nonce` counts. With `own`: the verdicts `own`
    decided, and of the others only each kernel-judged grading cell's first, on its own check
    and not under a name of `own`'s (a cell that forges display data can claim no other)."""
    found = []
    for cell in nb.cells:
        if own is not None and id(cell) in own.lines:
            found.append(own.lines[id(cell)])
            continue
        if own is not None and id(cell) not in own.kernel_cells:
            continue
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {}).get(MIME)
            if isinstance(data, dict) and data.get("nonce") == nonce \
                    and data.get("mark") in MARKS:
                if own is not None and (data.get("check") != own.kernel_cells[id(cell)]
                                        or str(data["name"]) in own.names):
                    continue
                found.append((data["mark"], str(data["name"]), str(data["message"])))
                if own is not None:
                    break
    return found


def run_one(path: Path, timeout: int) -> dict:
    """Execute one submission, with the grader's cells after each check cell, in a fresh
    kernel in a temporary folder of its own; returns {"status": ..., "checks": [(mark,
    exercise, message), ...]}: the grading cells' verdicts. Runs inside the limited process."""
    try:
        nb = nbformat.read(path, as_version=4)
    except (json.JSONDecodeError, UnicodeDecodeError, nbformat.reader.NotJSONError) as e:
        return {"status": f"not a notebook: {type(e).__name__}", "checks": []}
    except Exception as e:  # noqa: BLE001 - a malformed file is the student's row, not a crash
        return {"status": f"not a notebook: {type(e).__name__}: {e}"[:200], "checks": []}
    nb.metadata["kernelspec"] = KERNELSPEC  # whatever kernel it names, ours runs it
    nonce = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="attnlab-grade-", ignore_cleanup_errors=True) as folder:
        shutil.copy(path, Path(folder) / path.name)
        own = OwnJudge(Path(folder))
        nb = with_grading_cells(nb, key_for(nb, path.name), nonce, secrets.randbits(31), own)
        client = NotebookClient(nb, timeout=timeout, allow_errors=True, kernel_name="python3",
                                iopub_timeout=IOPUB_TIMEOUT_S,
                                extra_arguments=KERNEL_ARGUMENTS,
                                on_cell_execute=own.before, on_cell_executed=own.after,
                                resources={"metadata": {"path": folder}})
        try:
            client.execute()
            status = "ok"
        except Exception as e:  # noqa: BLE001 - a dead kernel or a cell past its time limit
            status = f"stopped: {type(e).__name__}"
    errors = sum(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
    if status == "ok" and errors:
        status = f"ok, {errors} cell{'s' if errors != 1 else ''} raised"
    return {"status": status, "checks": verdicts(nb, nonce, own)}


def limit_memory(gigabytes: float) -> str | None:
    """Limit this process's memory (and the kernel's it starts, which inherits it) where the
    platform allows; else a note that says it was not applied (Windows has no `resource`, and
    macOS refuses RLIMIT_AS). Called in the child process that grades one submission."""
    size = int(gigabytes * 2**30)
    try:
        import resource  # noqa: PLC0415 - POSIX only: Windows must still grade

        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    except (ImportError, AttributeError, ValueError, OSError) as e:
        return f"the memory limit ({gigabytes:g} GB) is not applied on this system ({e})"
    return None


def grade_one(path: Path, timeout: int, memory_gb: float) -> dict:
    """`run_one` in a child process (in a process group of its own, with the memory limit
    where the platform has one), stopped with its kernel after `timeout` seconds in all plus a
    minute for starting. Text between the two processes is UTF-8 whatever the locale."""
    command = [sys.executable, "-m", f"{__package__}.grade", "--one", str(path),  # also when
               "--timeout", str(timeout), "--memory-gb", str(memory_gb)]       # run as __main__
    group = ({"start_new_session": True} if os.name == "posix"
             else {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)})
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             encoding="utf-8", errors="replace",
                             env={**os.environ, "PYTHONIOENCODING": "utf-8"}, **group)
    try:
        stdout, stderr = child.communicate(timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        if hasattr(os, "killpg"):
            os.killpg(child.pid, signal.SIGKILL)  # the child and the kernel it started
        else:  # Windows: the kernel watches its parent (ipykernel's parent poller) and ends
            child.kill()  # with it
        child.communicate()
        return {"status": f"stopped: ran past {timeout + 60} s", "checks": []}
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": f"stopped: {last}"[:200], "checks": []}
    return json.loads(lines[-1])


def submissions(folder: Path) -> list[tuple[str, Path]]:
    """(student, path) of every .ipynb under `folder`: `student/NN_name.ipynb` or
    `student.ipynb`, in order."""
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        relative = path.relative_to(folder)
        found.append((relative.parts[0] if len(relative.parts) > 1 else path.stem, path))
    return found


def default_jobs(memory_gb: float) -> int:
    """How many submissions run at once: one per core, as many as their memory limit fits
    (where the system says how much memory it has: not Windows)."""
    cores = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, ValueError, OSError):
        return cores
    return max(1, min(cores, int(memory // memory_gb)))


def grade(folder: Path, out: Path, timeout: int = 900, memory_gb: float = 6.0,
          jobs: int | None = None) -> list[dict]:
    """Grade every submission under `folder` into the CSV `out`, `jobs` at once (default
    `default_jobs`); returns its rows, in the order of the submissions."""
    if jobs is not None and (not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a whole number of at least 1, got {jobs!r}")
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder of submissions")
    found = submissions(folder)
    if not found:
        raise FileNotFoundError(f"{folder} holds no .ipynb submission")
    def run(path):
        print(f"grading {path.relative_to(folder)} ...", flush=True)
        return grade_one(path, timeout, memory_gb)  # a child process: threads suffice

    with ThreadPoolExecutor(max_workers=jobs or default_jobs(memory_gb)) as pool:
        results = list(pool.map(run, [path for _, path in found]))
    for note in dict.fromkeys(r["note"] for r in results if r.get("note")):
        print(f"note: {note}", flush=True)
    rows = []
    for (student, path), result in zip(found, results):
        base = {"student": student, "notebook": path.name, "status": result["status"]}
        if not result["checks"]:
            rows.append({**base, "exercise": "", "mark": "", "meaning": "", "message": ""})
        for mark, exercise, message in result["checks"]:
            rows.append({**base, "exercise": exercise, "mark": mark, "meaning": MARKS[mark],
                         "message": message})
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def standing(rows: list[dict]) -> dict[tuple[str, str, str], dict]:
    """The verdict that stands for each (student, notebook, exercise): its last one. Each
    check is judged once per submission; a row given twice counts once."""
    return {(r["student"], r["notebook"], r["exercise"]): r for r in rows if r["mark"]}


def summary(rows: list[dict]) -> str:
    """One line per student and notebook: right answers, predictions given, checks, status
    (each exercise once, by the verdict that stands)."""
    lines = [f"{'student':<16} {'notebook':<34} {'✓':>3} {'✎':>3} {'checks':>6}  status"]
    stands = standing(rows)
    status = {(r["student"], r["notebook"]): r["status"] for r in rows}  # in submission order
    for (student, notebook), state in status.items():
        marks = [r["mark"] for (s, n, _), r in stands.items() if (s, n) == (student, notebook)]
        lines.append(f"{student:<16} {notebook:<34} {marks.count('✓'):>3} {marks.count('✎'):>3} "
                     f"{len(marks):>6}  {state}")
    return "\n".join(lines)


_GIVEN = re.compile(r"^given [^:]*: ")  # check_function's "given a (3, 4) tensor, ...: " prefix


def mistake(message: str) -> str:
    """A ✗ message as a named mistake to count: without the inputs it was given, its first
    sentence, digits as #, so that one mistake on different inputs counts as one."""
    text = _GIVEN.sub("", message.strip())
    text = re.split(r"(?<=[a-z)])\. ", text, maxsplit=1)[0].rstrip(".")
    return re.sub(r"\d+(\.\d+)?", "#", text)


def class_report(rows: list[dict], top: int = 3) -> list[dict]:
    """Per notebook and check, what an instructor re-teaches from: how many students stand at
    ✓, ✗, ○ and ✎, and the `top` named mistakes of the ✗s, most frequent first (each a
    (mistake, students) pair). Each student counts once per check, by the verdict that stands."""
    by_check: dict[tuple[str, str], dict] = {}
    for (_, notebook, exercise), row in standing(rows).items():
        entry = by_check.setdefault((notebook, exercise), {
            "notebook": notebook, "check": exercise, **{m: 0 for m in MARKS}, "mistakes": {}})
        entry[row["mark"]] += 1
        if row["mark"] == "✗":
            named = mistake(row.get("message", ""))
            entry["mistakes"][named] = entry["mistakes"].get(named, 0) + 1
    report = []
    for entry in sorted(by_check.values(), key=lambda e: e["notebook"]):  # checks in order
        ranked = sorted(entry["mistakes"].items(), key=lambda kv: (-kv[1], kv[0]))
        report.append({**entry, "mistakes": ranked[:top]})
    return report


def report_markdown(report: list[dict], students: int) -> str:
    """`class_report` as a Markdown table the instructor keeps (nothing leaves the machine)."""
    lines = [f"# The class, check by check ({students} student{'s' if students != 1 else ''})",
             "", "Each student counts once per check, by the grader's verdict (judged afresh, "
             "not read from what the notebook printed). ✗: not yet right; ○: not attempted; "
             "✎: a prediction made.", "",
             "| notebook | check | ✓ | ✗ | ○ | ✎ | most frequent mistakes (students) |",
             "|---|---|---:|---:|---:|---:|---|"]
    for e in report:
        named = "; ".join(f"{m.replace('|', '/')} ({n})" for m, n in e["mistakes"]) or ""
        lines.append(f"| {e['notebook']} | {e['check']} | {e['✓']} | {e['✗']} | {e['○']} | "
                     f"{e['✎']} | {named} |")
    return "\n".join(lines) + "\n"


def draw_report(report: list[dict], path: Path) -> None:
    """Per check, the students at ✓, ✗, ○ and ✎ as one stacked bar (Okabe-Ito colours, each
    mark also hatched differently, so the picture survives colour blindness), saved as PNG."""
    import matplotlib  # noqa: PLC0415 - only the report draws
    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415
    style = {"✓": ("#0072B2", ""), "✗": ("#D55E00", "//"), "○": ("#BBBBBB", ".."),
             "✎": ("#009E73", "xx")}
    labels = [f"{e['notebook'][:2]} {e['check']}" for e in report]
    fig = Figure(figsize=(8, 0.4 * len(report) + 1.2))
    ax = fig.subplots()
    left = [0] * len(report)
    for mark, (color, hatch) in style.items():
        counts = [e[mark] for e in report]
        ax.barh(labels, counts, left=left, color=color, hatch=hatch, edgecolor="white",
                label=f"{mark} {MARKS[mark]}")
        left = [a + b for a, b in zip(left, counts)]
    ax.invert_yaxis()
    ax.set_xlabel("students")
    ax.set_title("each check: where the class stands")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab.classroom.grade",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", nargs="?", type=Path, help="the folder of submissions")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"the CSV written (default {DEFAULT_OUT.as_posix()}, which git "
                             f"ignores), the per-check table and picture beside it")
    parser.add_argument("--timeout", type=int, default=900,
                        help="seconds a submission may run (default 900)")
    parser.add_argument("--memory-gb", type=float, default=6.0,
                        help="memory a submission may take (default 6)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="submissions run at once (default: one per core, as memory allows)")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):  # a console that cannot show ✓ shows ? instead
        sys.stdout.reconfigure(errors="replace")
    if args.one is not None:
        note = limit_memory(args.memory_gb)
        print(json.dumps({**run_one(args.one, args.timeout), **({"note": note} if note else {})}))
        return 0
    if args.submissions is None:
        parser.error("give the folder of submissions: make grade SUBMISSIONS=dir")
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        rows = grade(args.submissions, args.out, args.timeout, args.memory_gb, args.jobs)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(summary(rows))
    report = class_report(rows)
    written = [args.out]
    if report:  # per check, for the instructor: a table and a picture beside the CSV
        table = args.out.with_name(f"{args.out.stem}-by-check.md")
        table.write_text(report_markdown(report, len({r["student"] for r in rows})),
                         encoding="utf-8")
        picture = table.with_suffix(".png")
        draw_report(report, picture)
        written += [table, picture]
    print(f"\n{len(rows)} rows written to {args.out}; per check: "
          + (", ".join(map(str, written[1:])) or "no check ran"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
