"""A stand-in for the npm packages the slides and the site copy (web/package-lock.json's versions,
the same file layout, placeholder JavaScript), so that builds in tests never need npm."""
from __future__ import annotations

import json
from pathlib import Path

from attnlab.classroom import site


def placeholder_modules(folder: Path) -> Path:
    """node_modules under `folder` with the locked versions and the files the builds copy."""
    modules = folder / "node_modules"
    lock = json.loads((site.WEB / "package-lock.json").read_text())
    for key, meta in lock["packages"].items():
        if key.startswith("node_modules/"):
            package = modules / key.removeprefix("node_modules/")
            package.mkdir(parents=True)
            (package / "package.json").write_text(json.dumps({"version": meta["version"]}))
            (package / "LICENSE").write_text("licence text")
    for rel in ("reveal.js/dist/reveal.js", "reveal.js/dist/reveal.css",
                "reveal.js/dist/theme/white.css",
                "reveal.js/plugin/notes/notes.js", "mathjax/es5/tex-svg-full.js"):
        (modules / rel).parent.mkdir(parents=True, exist_ok=True)
        (modules / rel).write_text("/* placeholder */")
    return modules
