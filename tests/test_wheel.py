"""attnlab as an image or a student installs it: built into a wheel, installed into a fresh venv
beside the lock's packages, and a student notebook run from an empty folder outside the
repository (a JupyterHub user's home after nbgitpuller)."""
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT

pytestmark = pytest.mark.integration  # make test-all (CI), not make test


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(out), str(ROOT)], check=True,
                   cwd=out, timeout=300)
    (built,) = out.glob("attnlab-*.whl")
    return built


def test_the_wheel_holds_the_package_and_nothing_of_the_repository(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "attnlab/__init__.py" in names and "attnlab/classroom/runner.py" in names
    assert "attnlab/views/diagrams/encoder_block.svg" in names  # package data: the pictures
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "benchmarks/"))]


def test_the_sdist_holds_the_package_and_none_of_the_tests(tmp_path):
    """setuptools puts tests/test_*.py into an sdist by default, without the conftest.py, the
    notebooks and the assets they need: MANIFEST.in keeps them in the repository."""
    built = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta;"
                            " print(build_meta.build_sdist(sys.argv[1]))", str(tmp_path)],
                           capture_output=True, text=True, check=True, cwd=ROOT, timeout=300)
    with tarfile.open(tmp_path / built.stdout.strip().splitlines()[-1]) as sdist:
        names = [name.split("/", 1)[1] for name in sdist.getnames() if "/" in name]
    assert "attnlab/__init__.py" in names and "attnlab/views/diagrams/encoder_block.svg" in names
    assert {"LICENSE", "README.md", "pyproject.toml"} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "benchmarks/"))]


def test_a_student_notebook_runs_from_an_empty_folder_on_the_installed_wheel(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    # The lock's packages: this venv's site-packages, added by a .pth file (installing torch and
    # the rest again would take minutes). A .pth line adds a folder but runs none of the .pth
    # files in it, so the repository's editable attnlab stays out: only the wheel provides it.
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "lock.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", str(wheel)], check=True, timeout=300)

    course = tmp_path / "course"  # what nbgitpuller leaves in a user's home
    course.mkdir()
    student = ROOT / "notebooks" / "student" / "01_attention_by_hand.ipynb"
    (course / student.name).write_bytes(student.read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "VIRTUAL_ENV"))}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    where = subprocess.run([str(python), "-c", "import attnlab; print(attnlab.__file__)"],
                           capture_output=True, text=True, check=True, cwd=course, env=env)
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout  # the wheel's copy
    done = subprocess.run([str(python), "-m", "attnlab.classroom.runner", "--notebooks",
                           str(course), "--inplace", "01"], capture_output=True, text=True,
                          cwd=course, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"^01_attention_by_hand\.ipynb\s+ok\s", done.stdout, re.M), done.stdout
    executed = json.loads((course / student.name).read_text())
    errors = [o for c in executed["cells"] for o in c.get("outputs", [])
              if o["output_type"] == "error"]
    assert not errors and any(c.get("outputs") for c in executed["cells"])
    assert sorted(p.name for p in course.iterdir()) == [student.name]  # nothing else written
