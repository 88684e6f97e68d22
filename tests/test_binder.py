"""The Binder / JupyterHub image: repo2docker turns binder/ into a Dockerfile (no Docker daemon
needed for --no-build), and that Dockerfile must do what a classroom image needs."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

pytestmark = pytest.mark.integration  # make test-all (CI), not make test

BINDER = ROOT / "binder"


def lock(path: Path) -> dict[str, str]:
    return dict(line.split("==", 1) for line in path.read_text().split("\n")
                if line and not line.startswith(("#", "-")) and "==" in line)


@pytest.fixture(scope="module")
def dockerfile() -> str:
    repo2docker = Path(sys.executable).parent / "repo2docker"
    if not repo2docker.exists():
        repo2docker = shutil.which("repo2docker")
    assert repo2docker, "repo2docker is a test tool (requirements-dev.txt): make dev"
    done = subprocess.run([str(repo2docker), "--no-build", "--debug", str(ROOT)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr  # --debug writes the Dockerfile to the log


def test_the_image_is_python_3_11_from_binder(dockerfile):
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    assert "Building conda environment for python=3.11" in dockerfile  # repo2docker's log
    assert "environment.yml" not in dockerfile  # binder/ wins over the root files


def test_the_lock_and_cpu_torch_then_postbuild_then_start(dockerfile):
    steps = [line.strip() for line in dockerfile.splitlines()
             if re.match(r"\s*(RUN|ENV)\b", line)]
    install = steps.index('RUN ${KERNEL_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r '
                          '"binder/requirements.txt"')
    post = steps.index("RUN ./binder/postBuild")
    start = steps.index('ENV R2D_ENTRYPOINT="${REPO_DIR}/binder/start"')
    assert install < post < start
    requirements = (BINDER / "requirements.txt").read_text().split("\n")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in requirements
    assert "-r ../requirements.txt" in requirements  # the students' lock, as it is
    extra = lock(BINDER / "requirements.txt")
    assert extra.keys().isdisjoint(lock(ROOT / "requirements.txt")), "pinned twice"
    assert set(extra) == {"notebook", "nbgitpuller"}


def test_postbuild_installs_attnlab_and_its_assets_outside_home_and_checks_them():
    post = (BINDER / "postBuild").read_text()
    start = (BINDER / "start").read_text()
    keras_home = 'export KERAS_HOME="${NB_PYTHON_PREFIX}/share/attnlab-keras"'
    assert keras_home in post and keras_home in start  # the same place at build and in class
    commands = [line for line in post.splitlines() if line and not line.startswith(("#", "export"))]
    assert commands == [
        "set -euo pipefail",
        "python -m pip install --no-cache-dir --no-deps --require-hashes -r "
        "requirements-assets.txt",
        "python -m pip install --no-cache-dir --no-deps --no-build-isolation .",
        "python -m attnlab kernel  # a cell run before the imports names the cell to run first",
        "python -m attnlab fetch",
        "python -m attnlab doctor",  # last: a missing or bad asset fails the build
    ]
    assert start.rstrip().endswith('exec "$@"')
    for script in ("postBuild", "start"):
        assert (BINDER / script).stat().st_mode & 0o111, f"binder/{script} must be executable"
