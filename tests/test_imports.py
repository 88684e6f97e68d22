"""The package's import graph, read from the source: no import cycles between attnlab's modules
(imports inside functions count, and so does the package's lazy name map), and no lesson module
imports the classroom tooling's libraries."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attnlab"
CLASSROOM_ONLY = ("nbclient", "nbconvert", "nbformat", "jupytext", "jinja2")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(module: str, level: int, target: str | None) -> str:
    """The absolute name of `from <level dots><target> import ...` written in `module`."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]  # a plain module's relative imports start from its package
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imports(module: str) -> list[tuple[str, int]]:
    """(absolute module name, line) for every import in `module`, wherever it is written:
    import statements at any depth, `import_module("...")` with a literal name, and for the
    package itself every target of its lazy map `_LAZY` (imported on first attribute use)."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node.level, node.module)
            found.append((source, node.lineno))
            # `from . import assets` imports the submodule attnlab.assets
            found += [(f"{source}.{alias.name}", node.lineno) for alias in node.names
                      if f"{source}.{alias.name}" in MODULES]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and getattr(node.func, "id", getattr(node.func, "attr", "")) == "import_module"):
            found.append((_resolve(module, 0, node.args[0].value), node.lineno))
        elif (module == "attnlab" and isinstance(node, ast.Assign)
              and any(getattr(t, "id", "") == "_LAZY" for t in node.targets)):
            lazy = ast.literal_eval(node.value)
            found += [(f"attnlab.{target}", node.lineno) for target in lazy.values()]
    return found


def _graph() -> dict[str, set[str]]:
    """attnlab module -> the attnlab modules it imports. A module importing its own parent
    package is left out: Python imports a package before any of its submodules anyway."""
    graph = {}
    for module in MODULES:
        targets = set()
        for name, _ in _imports(module):
            # `import attnlab.x.y` needs attnlab.x.y; a name that is no module is an attribute
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                targets.add(name)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search, each as the path that closes it."""
    cycles, state = [], {}  # state: 1 = on the current path, 2 = done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_the_graph_sees_lazy_and_function_level_imports():
    graph = _graph()
    assert "attnlab.sentiment" in graph["attnlab"]  # through the lazy map, for SentimentApp
    assert "attnlab.assets" in graph["attnlab.retrieval"]
    assert {"attnlab.attention", "attnlab.repro"} <= graph["attnlab"]


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


@pytest.mark.parametrize("module", [m for m in MODULES if not m.startswith("attnlab.classroom")])
def test_lesson_modules_do_not_import_classroom_tooling(module):
    tooling = [(name, line) for name, line in _imports(module)
               if name.split(".")[0] in CLASSROOM_ONLY or name.startswith("attnlab.classroom")]
    assert tooling == [], f"{MODULES[module]} imports classroom tooling: {tooling}"
