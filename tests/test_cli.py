"""`python -m attnlab doctor` and `fetch`: one line per asset, exit codes, downloads only of
what is missing (downloads replaced by local stand-ins; the network is never touched)."""
import hashlib
import os
import subprocess
import sys

import pytest
from helpers import use_shared_assets
from traitlets.config.loader import PyFileConfigLoader

from attnlab.plumbing import assets, cli
from attnlab.plumbing.assets import Asset

A, B = b"first file" * 100, b"second file" * 100
FAKE = {a.name: a for a in (
    Asset("mobilenet_v2_0.35", "mobilenet", "a.h5", hashlib.sha256(A).hexdigest(), len(A),
          "test a", "test", "https://example.invalid/a.h5"),
    Asset("mobilenet_v2_0.5", "mobilenet", "b.h5", hashlib.sha256(B).hexdigest(), len(B),
          "test b", "test", "https://example.invalid/b.h5"),
)}


@pytest.fixture
def home(tmp_path, monkeypatch, no_network):
    """A registry of two small assets; $ATTNLAB_ASSETS and the Keras cache are temporary
    folders; any download or network connection fails the test unless a test allows it."""
    for var in ("ATTNLAB_ASSETS", "ATTNLAB_DATA", "ATTNLAB_MINILM", "ATTNLAB_SMOLLM2"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "assets").mkdir()
    monkeypatch.setenv("ATTNLAB_ASSETS", str(tmp_path / "assets"))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setattr(assets, "ASSETS", FAKE)
    return tmp_path


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out.splitlines(), out.err


def test_doctor_all_present(home, capsys):
    (home / "assets" / "a.h5").write_bytes(A)
    (home / "assets" / "b.h5").write_bytes(B)
    code, lines, err = run(capsys, "doctor")
    assert code == 0 and err == ""
    assert len(lines) == 2
    assert lines[0].split() == ["mobilenet_v2_0.35", "ok", str(home / "assets" / "a.h5")]
    assert lines[1].split() == ["mobilenet_v2_0.5", "ok", str(home / "assets" / "b.h5")]


def test_doctor_missing_and_damaged(home, capsys):
    (home / "assets" / "a.h5").write_bytes(A[:-1] + b"!")
    code, lines, _ = run(capsys, "doctor")
    assert code == 1 and len(lines) == 2
    name, status, *rest = lines[0].split()
    assert (name, status) == ("mobilenet_v2_0.35", "BAD") and "corrupted" in lines[0]
    assert lines[1].split()[:2] == ["mobilenet_v2_0.5", "missing"]
    for line in lines:
        assert "Keras cache" in line and "fix: python -m attnlab fetch" in line


def test_doctor_mentions_a_copy_passed_over(home, capsys):
    (home / "assets" / "a.h5").write_bytes(A[:10])
    (home / "keras" / "models").mkdir(parents=True)
    (home / "keras" / "models" / "a.h5").write_bytes(A)
    (home / "assets" / "b.h5").write_bytes(B)
    code, lines, _ = run(capsys, "doctor")
    assert code == 0
    assert lines[0].split()[:2] == ["mobilenet_v2_0.35", "ok"]
    assert str(home / "keras" / "models" / "a.h5") in lines[0]
    assert "passed over $ATTNLAB_ASSETS: truncated" in lines[0]


def test_fetch_downloads_only_what_is_missing(home, capsys, monkeypatch):
    (home / "assets" / "a.h5").write_bytes(A)
    downloaded = []

    def download(asset):
        downloaded.append(asset.name)
        target = home / "keras" / "models" / asset.filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(B)
        return target

    monkeypatch.setattr(assets, "_download", download)
    code, lines, _ = run(capsys, "fetch")
    assert code == 0 and downloaded == ["mobilenet_v2_0.5"]
    assert lines[0].split()[:2] == ["mobilenet_v2_0.35", "ok"]
    b_h5 = str(home / "keras" / "models" / "b.h5")
    assert lines[-1].split() == ["mobilenet_v2_0.5", "downloaded", b_h5]
    code, lines, _ = run(capsys, "fetch")  # now all there: nothing more downloaded
    assert code == 0 and downloaded == ["mobilenet_v2_0.5"]


def test_fetch_offline_fails_with_exit_1(home, capsys, monkeypatch):
    (home / "assets" / "a.h5").write_bytes(A)

    def download(asset):
        raise OSError("no route to host")

    monkeypatch.setattr(assets, "_download", download)
    code, lines, _ = run(capsys, "fetch", "mobilenet_v2_0.5")
    text = "\n".join(lines)
    assert code == 1 and "FAILED" in text and "no route to host" in text
    assert "'mobilenet_v2_0.5'" in text


def test_fetch_unknown_name(home, capsys):
    code, lines, err = run(capsys, "fetch", "resnet50")
    assert code == 2 and "resnet50" in err and "mobilenet_v2_0.35" in err


def test_no_command_prints_help(capsys):
    code, lines, _ = run(capsys)
    assert code == 2 and any("doctor" in line for line in lines)


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_python_m_attnlab_doctor_runs(tmp_path, monkeypatch):
    """The real registry, in a subprocess: one line per asset, and the exit code agrees."""
    use_shared_assets(monkeypatch)
    env = {**os.environ, "KERAS_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "attnlab", "doctor"], capture_output=True,
                          text=True, env=env, timeout=120)
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(assets.ASSETS)
    all_ok = all(line.split()[1] == "ok" for line in lines)
    assert done.returncode == (0 if all_ok else 1), done.stdout + done.stderr
    assert done.stderr == ""


def test_kernel_makes_every_kernel_load_the_order_help(tmp_path, capsys):
    """`python -m attnlab kernel` adds one line to the environment's kernel config: IPython then
    loads attnlab.exercises.order in every kernel; a user's own settings there are kept, and a
    second run adds nothing."""
    config = tmp_path / "etc" / "ipython" / "ipython_kernel_config.py"
    config.parent.mkdir(parents=True)
    config.write_text("c.IPKernelApp.matplotlib = 'inline'", encoding="utf-8")  # the user's own
    assert cli.kernel(prefix=str(tmp_path)) == 0 and cli.kernel(prefix=str(tmp_path)) == 0
    assert "already set" in capsys.readouterr().out
    loaded = PyFileConfigLoader(config.name, str(config.parent)).load_config()
    assert loaded.IPKernelApp.matplotlib == "inline"
    assert loaded.InteractiveShellApp.extensions.get_value([]) == ["attnlab.exercises.order"]
    assert config.read_text(encoding="utf-8").count("attnlab.exercises.order") == 1


def test_kernel_says_where_it_cannot_write(tmp_path, capsys):
    blocked = tmp_path / "etc"
    blocked.write_text("a file where a folder should be", encoding="utf-8")
    assert cli.kernel(prefix=str(tmp_path)) == 1
    assert "could not write" in capsys.readouterr().err
