"""attnlab.lessons.retrieval and attnlab.pretrained.embeddings: Keras on torch, Fashion-MNIST as
Keras returns it, embeddings equal to the Keras model's and the same bits on every kernel path,
input checks, cosine nearest neighbours and their scores, moved images. Never downloads: the
downloader and socket connections fail the test."""
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import ROOT, need, raises_each, use_shared_assets

from attnlab.lessons import data, retrieval
from attnlab.plumbing import assets
from attnlab.pretrained import embeddings


@pytest.fixture(autouse=True)
def offline(no_network, monkeypatch):
    use_shared_assets(monkeypatch)


@pytest.fixture(scope="module")
def images():
    """A fixed mix of 24 test images (all classes), or synthetic ones if the data is absent."""
    try:
        (_, _), (x, y) = data.load_fashion_mnist()
        return x[:24]
    except assets.AssetError:
        return np.random.default_rng(0).integers(0, 256, (24, 28, 28), dtype=np.uint8)


# --- Keras on torch -------------------------------------------------------------------------

def test_import_keras_uses_torch():
    keras = assets.import_keras()
    assert keras.backend.backend() == "torch"


def test_import_keras_refuses_another_backend_before_import(monkeypatch):
    monkeypatch.delitem(sys.modules, "keras", raising=False)
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    with pytest.raises(RuntimeError, match="KERAS_BACKEND is 'jax', attnlab needs 'torch'"):
        assets.import_keras()


def test_import_keras_refuses_a_keras_already_on_another_backend(monkeypatch):
    keras = assets.import_keras()
    monkeypatch.setattr(keras.backend, "backend", lambda: "tensorflow")
    with pytest.raises(RuntimeError, match="already imported with the 'tensorflow' backend"):
        assets.import_keras()


# --- data -------------------------------------------------------------------------------------

def test_load_fashion_mnist_matches_keras_layout():
    need("fashion-mnist/train-images", "fashion-mnist/train-labels", "fashion-mnist/t10k-images",
         "fashion-mnist/t10k-labels")
    (x_train, y_train), (x_test, y_test) = data.load_fashion_mnist()
    assert x_train.shape == (60000, 28, 28) and x_test.shape == (10000, 28, 28)
    assert y_train.shape == (60000,) and y_test.shape == (10000,)
    assert x_train.dtype == x_test.dtype == y_train.dtype == y_test.dtype == np.uint8
    assert np.bincount(y_train).tolist() == [6000] * 10
    assert np.bincount(y_test).tolist() == [1000] * 10
    assert y_test[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]  # the published first labels


# --- embeddings -----------------------------------------------------------------------------

def test_embeddings_are_the_keras_models(images):
    for alpha in (0.35, 0.5):
        need(f"mobilenet_v2_{alpha:g}")
        ours = embeddings.embed_images(images, alpha=alpha)
        keras_way = embeddings.embed_images_keras(images, alpha=alpha)
        assert ours.shape == keras_way.shape == (len(images), 1280), alpha
        assert ours.dtype == np.float32, alpha
        norms = np.linalg.norm(ours, axis=1) * np.linalg.norm(keras_way, axis=1)
        cos = (ours * keras_way).sum(1) / norms
        assert cos.min() >= 0.99, alpha
        np.testing.assert_allclose(ours, keras_way, atol=2e-3, rtol=1e-3, err_msg=f"alpha {alpha}")


def test_embeddings_do_not_depend_on_batching(images):
    need("mobilenet_v2_0.35")
    one_batch = embeddings.embed_images(images)
    small = embeddings.embed_images(images, batch_size=5)
    # oneDNN picks its convolution algorithm by batch size: equal up to float rounding
    np.testing.assert_allclose(one_batch, small, atol=2e-4, rtol=1e-4)
    assert embeddings.embed_images(images[:0]).shape == (0, 1280)


def test_embeddings_shared_out_between_processes_are_the_same_bits(images, monkeypatch):
    need("mobilenet_v2_0.35")
    monkeypatch.setenv("ATTNLAB_WORKERS", "1")
    alone = embeddings.embed_images(images, batch_size=3)
    monkeypatch.setenv("ATTNLAB_WORKERS", "2")  # forks on Linux, one process elsewhere
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert np.array_equal(embeddings.embed_images(images, batch_size=3), alone)


def test_embeddings_are_distinct_and_finite(images):
    need("mobilenet_v2_0.35")
    emb = embeddings.embed_images(images[:8])
    assert np.isfinite(emb).all() and (emb >= 0).all()  # ReLU6 then an average
    assert len({row.tobytes() for row in emb}) == 8


def test_model_is_channels_last_whatever_keras_json_says():
    need("mobilenet_v2_0.35")
    keras = assets.import_keras()
    before = keras.config.image_data_format()
    keras.config.set_image_data_format("channels_first")  # as a user's ~/.keras/keras.json may
    try:
        model = embeddings._mobilenet_v2.__wrapped__(0.35)  # a fresh build, not the cached one
        assert model.input_shape == (None, 96, 96, 3) and model.output_shape == (None, 1280)
        assert keras.config.image_data_format() == "channels_first", "the user's setting stays"
    finally:
        keras.config.set_image_data_format(before)


def test_embed_images_rejects_what_is_not_a_batch_of_grey_images():
    bad_images = [
        (np.zeros((2, 28, 28), np.float32), TypeError, "dtype uint8"),
        ([[[0]]], TypeError, "numpy array"),
        (np.zeros((28, 28), np.uint8), ValueError, r"for one image use images\[None\]"),
        (np.zeros((2, 28, 28, 3), np.uint8), ValueError, r"\(N, H, W\).*got \(2, 28, 28, 3\)"),
        (np.zeros((2, 0, 28), np.uint8), ValueError, r"\(N, H, W\).*got \(2, 0, 28\)"),
    ]
    raises_each([(lambda bad=bad: embeddings.embed_images(bad), error, message)
                 for bad, error, message in bad_images])


def test_embed_images_offers_only_the_widths_it_has_weights_for():
    with pytest.raises(ValueError, match="alpha must be one of 0.35, 0.5, got 0.75"):
        embeddings.embed_images(np.zeros((1, 28, 28), np.uint8), alpha=0.75)


def test_preprocess_scales_resizes_and_copies_grey():
    x = np.zeros((2, 28, 28), np.uint8)
    x[1] = 255
    x[0, :, 14:] = 255
    out = embeddings.preprocess(x)
    assert out.shape == (2, 3, 96, 96) and out.dtype == torch.float32
    assert torch.equal(out[:, 0], out[:, 1]) and torch.equal(out[:, 0], out[:, 2])
    assert out[0, 0, :, :40].eq(-1).all() and out[0, 0, :, 56:].eq(1).all() and out[1].eq(1).all()
    row = out[0, 0, 0]
    assert (row[1:] >= row[:-1]).all(), "bilinear: a monotone step stays monotone"


def test_resize_is_the_bilinear_resize_in_whole_numbers():
    for n_in, n_out in [(28, 96), (28, 28), (5, 12), (30, 7)]:
        weights = embeddings._bilinear_weights(n_in, n_out)             # (n_out, n_in)
        assert torch.equal(weights, weights.round()), (n_in, n_out)
        assert (weights.sum(1) == 2 * n_out).all(), (n_in, n_out)
        x = torch.rand(3, n_in, n_in, dtype=torch.float64) * 255          # (3, H, H)
        ours = weights @ x @ weights.T / (2 * n_out) ** 2
        theirs = F.interpolate(x[:, None], size=(n_out, n_out), mode="bilinear",
                               align_corners=False)[:, 0]
        torch.testing.assert_close(ours, theirs, atol=1e-9, rtol=1e-9,
                                   msg=lambda m, size=(n_in, n_out): f"{size}: {m}")


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_embeddings_are_the_same_bits_on_the_portable_kernels(images):
    """The resize and the pooling are written so that no kernel's summation order enters them:
    ATen's portable kernels give the same bits. The convolutions (oneDNN) need not: an Intel
    Xeon with AVX-512 gave other last bits. Notebook 06 does not depend on them, since its
    training is not chaotic (tests/test_sets.py, and make test-portable's one-ulp nudge)."""
    need("mobilenet_v2_0.35")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        here = embeddings.embed_images(images[:8])
    finally:
        torch.set_num_threads(threads)
    code = ("import sys, numpy as np, torch, attnlab; torch.set_num_threads(1); "
            "x = np.load(sys.argv[1]); np.save(sys.argv[1], attnlab.embed_images(x))")
    path = ROOT / "build" / "test-embed-portable.npy"
    path.parent.mkdir(exist_ok=True)
    np.save(path, images[:8])
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "KERAS_BACKEND": "torch"}
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=env, timeout=120)
    there = np.load(path)
    path.unlink()
    np.testing.assert_array_equal(here, there)


def test_embeddings_move_one_ulp_when_make_test_portable_asks(images, monkeypatch):
    need("mobilenet_v2_0.35")
    here = embeddings.embed_images(images[:2])
    monkeypatch.setenv("ATTNLAB_NUDGE_ULP", "1")
    np.testing.assert_array_equal(embeddings.embed_images(images[:2]), np.nextafter(here, np.inf))


def test_tensorflow_same_padding():
    assert embeddings._same_padding(96, 3, 2) == (0, 1)   # the extra pixel goes after
    assert embeddings._same_padding(95, 3, 2) == (1, 1)
    assert embeddings._same_padding(12, 3, 1) == (1, 1)
    assert embeddings._same_padding(12, 1, 1) == (0, 0)


# --- retrieval and scores ---------------------------------------------------------------------

def test_nearest_neighbours_by_cosine():
    db = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [10.0, 0.0]])
    q = np.array([[2.0, 0.1], [0.0, 3.0], [1.0, 0.9]])
    nn = retrieval.nearest_neighbours(q, db, k=2)
    assert nn.tolist() == [[0, 3], [1, 2], [2, 0]]  # a tie (rows 0, 3 parallel) keeps index order
    assert retrieval.nearest_neighbours(q, db).tolist() == [[0], [1], [2]]  # k=1: the same rule
    assert retrieval.nearest_neighbours(q * 7.5, db).tolist() == [[0], [1], [2]]  # scale-free
    assert retrieval.nearest_neighbours(torch.tensor(q), db).shape == (3, 1)


def test_nearest_neighbours_rejects_what_does_not_fit_the_database():
    queries, database = np.ones((2, 2)), np.ones((4, 2))
    raises_each([
        (lambda: retrieval.nearest_neighbours(queries, database, k=5), ValueError,
         "k must be an int >= 1 and <= 4, got 5"),  # 4 database rows
        (lambda: retrieval.nearest_neighbours(queries, np.ones((4, 3))), ValueError,
         "same width, got 2 and 3"),
        (lambda: retrieval.nearest_neighbours(np.ones(2), database), ValueError,
         "queries must be a 2-D numeric array"),
        (lambda: retrieval.nearest_neighbours(np.array([["a", "b"]]), database), TypeError,
         "queries must be a numeric array"),
    ])


def test_same_class_rates_top1_and_precision_at_k():
    db_labels = np.array([0, 0, 1, 1, 2])
    q_labels = np.array([0, 1, 2, 2])
    nn = np.array([[0, 2], [0, 3], [4, 0], [1, 2]])
    rates = retrieval.same_class_rates(q_labels, db_labels, nn)
    assert rates == {"top1": 0.5, "top2": 3 / 8}
    assert retrieval.same_class_rates(q_labels, db_labels, nn[:, :1]) == {"top1": 0.5}
    with pytest.raises(ValueError, match="query_labels must have shape \\(4,\\)"):
        retrieval.same_class_rates(q_labels[:3], db_labels, nn)


def test_chance_top1():
    # P(query class) * P(database class): 2/3 * 1/2 + 1/3 * 1/2
    assert retrieval.chance_top1(np.array([0, 0, 1]), np.array([0, 0, 1, 1])) == pytest.approx(0.5)
    assert retrieval.chance_top1(np.arange(10), np.repeat(np.arange(10), 3)) == pytest.approx(0.1)


def test_pixel_features():
    x = np.arange(2 * 4 * 3, dtype=np.uint8).reshape(2, 4, 3)
    f = embeddings.pixel_features(x)
    assert f.shape == (2, 12) and f.dtype == np.float32 and f[1, 0] == 12


# --- moved images ---------------------------------------------------------------------------

def test_shift_moves_the_item_and_fills_with_black():
    x = np.zeros((40, 5, 5), np.uint8)
    x[:, 2, 2] = 200
    out = retrieval.shift(x, 2, seed=3)
    positions = {tuple(np.argwhere(img)[0]) for img in out}
    assert positions == {(0, 2), (4, 2), (2, 0), (2, 4)}  # all four directions occur
    assert (out.sum(axis=(1, 2)) == 200).all()
    np.testing.assert_array_equal(out, retrieval.shift(x, 2, seed=3))  # seeded
    np.testing.assert_array_equal(retrieval.shift(x, 0), x)
    assert not retrieval.shift(x, 3).any()  # moved out of the frame: all black
    assert not retrieval.shift(x, 9).any()


# --- the official download, the last place looked ---------------------------------------------

@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """No local copy of Fashion-MNIST anywhere: every place looked points at empty folders."""
    need("fashion-mnist/train-images", "fashion-mnist/train-labels",
         "fashion-mnist/t10k-images", "fashion-mnist/t10k-labels")
    real = {name: assets.require(f"fashion-mnist/{name}") for name in
            ("train-images", "train-labels", "t10k-images", "t10k-labels")}
    monkeypatch.delenv("ATTNLAB_DATA", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setattr(assets, "DEBIAN_DATA_DIR", tmp_path / "debian")
    return real


def test_a_missing_data_set_is_downloaded_as_the_last_resort(nowhere, tmp_path, monkeypatch):
    downloaded = []

    def download(asset):  # stands in for keras.utils.get_file: the same bytes, into Keras's cache
        downloaded.append(asset.name)
        file = nowhere[asset.name.split("/")[1]].name
        target = tmp_path / "keras" / "datasets" / "fashion-mnist" / file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(nowhere[asset.name.split("/")[1]].read_bytes())
        return target

    monkeypatch.setattr(assets, "_download", download)
    (x, y), (xt, yt) = data.load_fashion_mnist()
    assert x.shape == (60000, 28, 28) and xt.shape == (10000, 28, 28)
    assert sorted(downloaded) == sorted(f"fashion-mnist/{n}" for n in nowhere)
    data.load_fashion_mnist()  # now found in the Keras cache: nothing downloaded again
    assert len(downloaded) == 4


def test_offline_without_the_data_the_error_names_everything(nowhere, monkeypatch):

    def offline(asset):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(assets, "_download", offline)
    with pytest.raises(assets.AssetError) as info:
        data.load_fashion_mnist()
    message = str(info.value)
    for expected in ("fashion-mnist/train-images", "$ATTNLAB_DATA: not set", "Keras cache",
                     "Debian package dataset-fashion-mnist", "download failed: OSError",
                     "python -m attnlab fetch", "apt-get install dataset-fashion-mnist"):
        assert expected in message, f"{expected!r} missing from:\n{message}"


# --- the random-weights control ----------------------------------------------------------------

def test_random_weights_are_drawn_from_the_series_seed_and_leave_the_global_rngs(images,
                                                                                monkeypatch):
    assets.import_keras()              # importing Keras draws from Python's random by itself
    state, torch_state = random.getstate(), torch.get_rng_state()
    first = embeddings.embed_images(images[:4], seed=0)
    assert random.getstate() == state and torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(first, embeddings.embed_images(images[:4], seed=0))
    # random-weights embeddings are tiny (no BatchNorm statistics to rescale them): compare
    # relatively
    assert not np.allclose(first, embeddings.embed_images(images[:4], seed=1), atol=0)
    monkeypatch.setenv("ATTNLAB_SEED", "1")                     # seed_of moves the draw
    assert not np.allclose(first, embeddings.embed_images(images[:4], seed=0), atol=0)
    with pytest.raises(ValueError, match="seed"):
        embeddings.embed_images(images[:4], seed=-1)


def test_random_weights_are_not_the_imagenet_weights(images):
    need("mobilenet_v2_0.35")
    trained, untrained = embeddings.embed_images(images), embeddings.embed_images(images, seed=0)
    assert untrained.shape == trained.shape == (len(images), 1280)
    assert np.isfinite(untrained).all() and not np.allclose(trained, untrained, atol=0)
    assert (untrained.std(0) > 0).any(), "distinct images give distinct embeddings"


def test_top1_centred_and_moved_is_per_query():
    database = np.eye(3)                                  # one item per class 0, 1, 2
    queries = np.array([[1.0, 0.1, 0], [0, 1.0, 0.2]])    # nearest: 0, 1
    moved = np.array([[0, 0, 1.0], [0.1, 1.0, 0]])        # nearest: 2, 1
    r = retrieval.top1_centred_and_moved(queries, moved, database, [0, 1], [0, 1, 2])
    assert r["centred"].tolist() == [1.0, 1.0] and r["moved"].tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="moved must hold"):
        retrieval.top1_centred_and_moved(queries, moved[:1], database, [0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="query_labels"):
        retrieval.top1_centred_and_moved(queries, moved, database, [0], [0, 1, 2])


def test_a_near_tie_counts_half_whatever_its_last_bits():
    database = np.array([[1.0, 0.0], [0.0, 1.0]])         # class 0, class 1
    for eps in (3e-7, -3e-7, 0.0):                         # a tie moved by the last bits
        query = np.array([[1.0 + eps, 1.0]])
        assert retrieval.top1_scores(query, database, [0], [0, 1]).tolist() == [0.5]
    far = retrieval.top1_scores(np.array([[1.0, 0.9], [0.9, 1.0]]), database, [0, 0], [0, 1])
    assert far.tolist() == [1.0, 0.0]


def test_random_weights_control_runs_each_seed(images, monkeypatch):
    calls = []

    def fake_embed(x, alpha, seed):                       # pixels, shifted by the seed
        calls.append((len(x), alpha, seed))
        return x.reshape(len(x), -1).astype(np.float64) + seed

    monkeypatch.setattr(retrieval, "embed_images", fake_embed)
    y = np.arange(len(images)) % 10
    moved = retrieval.shift(images[:6], 3, seed=1)
    out = retrieval.random_weights_control(images[:6], moved, images, y[:6], y, seeds=(0, 2))
    assert list(out) == [0, 2] and out[0]["centred"].all(), "each query finds itself"
    assert sorted({seed for _, _, seed in calls}) == [0, 2] and len(calls) == 6
    with pytest.raises(ValueError, match="seeds"):
        retrieval.random_weights_control(images[:6], moved, images, y[:6], y, seeds=())
