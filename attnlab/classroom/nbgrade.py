"""nbgrader's autograde with `make grade`'s judge: the points come from the grader's process.

nbgrader scores a locked test cell by its outputs after it ran in the student's kernel: full
points unless it shows an error (`nbgrader.utils.determine_grade`). Run as it is, the test cell
(`grading.require`) judges in that kernel, which any answer cell can rewrite. The course's
nbgrader_config.py (`attnlab.classroom.course`) therefore puts `OwnJudgeExecute` in place of
nbgrader's Execute among autograde's preprocessors. It executes the submission as Execute does,
but each locked test cell that calls `grading.require` (its source is the instructor's:
nbgrader's OverwriteCells put it back before this runs) runs `make grade`'s grading cell for its
check instead (`grade.OwnJudge`: the kernel only calls the student's function on inputs it is
sent, or ships the answer and the check's values, as data), and the verdict is decided in this
process. Then the cell gets its source back and, as its only output, nothing where the verdict
earns the point (✓, or ✎ for a prediction) and an AssertionError that says the verdict where it
does not, whatever the kernel printed or raised there. nbgrader's SaveAutoGrades, which runs
after it, scores those outputs: what this process decided.

Imported by nbgrader only (`c.Autograde.autograde_preprocessors`), where nbgrader is installed.
"""
from __future__ import annotations

import ast
import tempfile
from pathlib import Path

from nbformat import NotebookNode
from nbgrader.preprocessors import Execute

from ..exercises import checks, grading
from .grade import OwnJudge


def required(source: str) -> dict | None:
    """The answer-key entry ({"check", "answer", "args"}) of a test cell that calls
    `grading.require(name, lambda: (answer), lambda: (args))`, else None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "require" and len(node.args) >= 2 \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in checks() \
                and all(isinstance(a, ast.Lambda) for a in node.args[1:]):
            args = node.args[2].body if len(node.args) > 2 else None
            shown = "" if args is None else ast.unparse(args)
            if isinstance(args, ast.Tuple):
                shown = ", ".join(ast.unparse(a) for a in args.elts)
            return {"check": node.args[0].value, "answer": ast.unparse(node.args[1].body),
                    "args": shown}
    return None


class OwnJudgeExecute(Execute):
    """nbgrader's Execute, with each locked `require` test cell judged by `grade.OwnJudge` in
    this process (see the module's docstring)."""

    def preprocess(self, nb, resources=None, km=None):
        tests = [(cell, entry) for cell in nb.cells
                 if cell.cell_type == "code" and cell.get("metadata", {}).get("nbgrader", {})
                 .get("grade") and (entry := required(cell.source)) is not None]
        with tempfile.TemporaryDirectory(prefix="attnlab-nbgrade-",
                                         ignore_cleanup_errors=True) as folder:
            self._own = own = OwnJudge(Path(folder))
            sources = {}
            for cell, entry in tests:
                made = own.cell(entry)
                own.cells[id(cell)] = own.cells.pop(id(made))
                sources[id(cell)] = cell.source
                cell.source = made.source
            try:
                nb, resources = super().preprocess(nb, resources, km)
            finally:
                for cell, _ in tests:
                    cell.source = sources[id(cell)]
                    cell.outputs = _outputs(own.lines.get(id(cell)))
                self._own = None
        return nb, resources

    def on_cell_execute(self, **kwargs):
        if getattr(self, "_own", None) is not None:
            self._own.before(**kwargs)

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        if getattr(self, "_own", None) is not None:
            self._own.after(**kwargs)


def _outputs(line: tuple[str, str, str] | None) -> list:
    """A test cell's outputs for the verdict `line`: none where it earns the point, else one
    error that says it (no verdict: the cell did not run)."""
    if line is not None and line[0] in grading.GRADED:
        return []
    text = "this check was not graded (its cell did not run)" if line is None else \
        f"{line[0]} {line[1]}: {line[2]}"
    return [NotebookNode(output_type="error", ename="AssertionError", evalue=text,
                         traceback=[f"AssertionError: {text}"])]
