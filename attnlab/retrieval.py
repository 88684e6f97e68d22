"""Image retrieval with a frozen pre-trained CNN: Keras MobileNetV2 (ImageNet weights) turns each
Fashion-MNIST image into a 1280-number embedding, and a query's nearest neighbour by cosine
similarity should share its label — compared against raw pixels and chance.

Nothing is trained. The model is Keras's own `keras.applications.MobileNetV2`, built on the torch
backend with the verified ImageNet weights. `embed_images` then runs that model's weights as a
few torch convolutions, with every BatchNorm folded into the convolution before it, in-place
ReLU6 and channels-last tensors: the same function (cosine ≥ 0.9999 to Keras's `predict`), several
times faster on a CPU. `embed_images_keras` is the plain Keras way, kept as the reference.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from .assets import fetch, import_keras, read_idx
from .attention import scaled_dot_product_attention
from .checks import check_choice, check_int, check_number

__all__ = [
    "CLASS_NAMES", "import_keras", "load_fashion_mnist", "mobilenet_v2", "preprocess",
    "embed_images", "embed_images_keras", "pixel_features", "nearest_neighbours",
    "same_class_rates", "per_class_top1", "chance_top1", "perturb",
    "soft_knn", "hit_at_k",
]

CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
ALPHAS = (0.35, 0.5)  # the widths whose ImageNet weights attnlab.assets knows
INPUT_SIZE = 96       # 28×28 images are resized to 96×96: small enough for a CPU, big enough
                      # for MobileNetV2's five stride-2 stages (96 → 3 pixels)
EMBED_DIM = 1280


def load_fashion_mnist():
    """((x_train, y_train), (x_test, y_test)) as `keras.datasets.fashion_mnist.load_data()`
    returns them: uint8 images (N, 28, 28), uint8 labels (N,) — from the first verified local
    copy (`attnlab.assets` says where it looks), downloaded the way Keras does only when there
    is none anywhere (offline, that fails with an AssetError naming every place looked and the
    fixing command)."""
    def split(name):
        x = read_idx(fetch(f"fashion-mnist/{name}-images"))  # (N, 28, 28) uint8
        y = read_idx(fetch(f"fashion-mnist/{name}-labels"))  # (N,) uint8
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"Fashion-MNIST {name}: {x.shape[0]} images but {y.shape[0]} labels")
        return x, y

    return split("train"), split("t10k")


def _check_alpha(alpha) -> float:
    return check_choice("alpha", check_number("alpha", alpha), ALPHAS)


def _check_images(images) -> np.ndarray:
    if isinstance(images, torch.Tensor):
        images = images.numpy(force=True)
    if not isinstance(images, np.ndarray):
        raise TypeError(f"images must be a numpy array (N, H, W) of uint8, "
                        f"got {type(images).__name__}")
    if images.dtype != np.uint8:
        raise TypeError(f"images must have dtype uint8 (grey levels 0-255), got {images.dtype}; "
                        "convert with np.clip(x, 0, 255).astype(np.uint8)")
    if images.ndim != 3 or min(images.shape[1:], default=0) < 1:
        raise ValueError(f"images must have shape (N, H, W), e.g. (N, 28, 28), got {images.shape}"
                         + ("; for one image use images[None]" if images.ndim == 2 else ""))
    return images


def preprocess(images, size: int = INPUT_SIZE) -> torch.Tensor:
    """uint8 grey (N, H, W) -> float32 (N, 3, size, size) the way MobileNetV2 was trained on:
    bilinear resize (half-pixel centres, as Keras/TF resize), grey copied to R, G and B, and
    `preprocess_input` scaling of [0, 255] to [-1, 1]."""
    images, size = _check_images(images), check_int("size", size, minimum=1)
    x = torch.from_numpy(images).float()[:, None]                                  # (N, 1, H, W)
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)  # (N, 1, S, S)
    x = x / 127.5 - 1.0                                 # preprocess_input: x / 127.5 - 1
    return x.expand(-1, 3, -1, -1)                      # (N, 3, S, S) grey → RGB (a view)


def mobilenet_v2(alpha: float = 0.35):
    """Keras's MobileNetV2 without its classifier, global-average pooled (1280 outputs), for
    96×96 RGB input, with the verified ImageNet weights; built once per alpha.

    Those weights are the network's 224-pixel training: the shapes of the weights do not depend
    on the input size, so Keras loads them into the 96-pixel model unchanged.
    """
    return _mobilenet_v2(_check_alpha(alpha))


@functools.cache
def _mobilenet_v2(alpha: float):
    keras = import_keras()
    weights = fetch(f"mobilenet_v2_{alpha:g}")
    layout = keras.config.image_data_format()
    keras.config.set_image_data_format("channels_last")  # whatever ~/.keras/keras.json says
    try:
        return keras.applications.MobileNetV2(input_shape=(INPUT_SIZE, INPUT_SIZE, 3),
                                              alpha=alpha, include_top=False,
                                              weights=str(weights), pooling="avg")
    finally:
        keras.config.set_image_data_format(layout)


def embed_images_keras(images, alpha: float = 0.35, batch_size: int = 32) -> np.ndarray:
    """The plain Keras way, the reference `embed_images` is checked against: Keras resize,
    `preprocess_input`, `model.predict(batch_size=32)`. Returns float32 (N, 1280)."""
    images = _check_images(images)
    keras = import_keras()
    with warnings.catch_warnings():
        # Keras 3.x converts torch tensors with np.array(x), which NumPy 2 reports as deprecated
        warnings.filterwarnings("ignore", "__array__ implementation doesn't accept a copy keyword",
                                DeprecationWarning)
        return _predict_keras(keras, images, alpha, check_int("batch_size", batch_size, minimum=1))


def _predict_keras(keras, images, alpha, batch_size):
    x = keras.ops.image.resize(images[..., None].astype("float32"), (INPUT_SIZE, INPUT_SIZE),
                               interpolation="bilinear")                   # (N, 96, 96, 1)
    x = keras.ops.convert_to_numpy(keras.ops.repeat(x, 3, axis=-1))        # (N, 96, 96, 3)
    x = keras.applications.mobilenet_v2.preprocess_input(x)
    return mobilenet_v2(alpha).predict(x, batch_size=batch_size, verbose=0)


# ---------------------------------------------------------------------------------------------
# the fast path: the Keras model's weights as folded torch convolutions


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's 'same' padding (before, after): the extra pixel goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


@functools.cache
def _folded(alpha: float):
    """The Keras model as a list of steps (conv, residual) with BatchNorm folded in.

    BN(conv(x)) = γ (W*x − μ) / √(σ² + ε) + β  =  (s·W)*x + (β − s·μ),  s = γ / √(σ² + ε),
    so each Conv → BatchNorm pair becomes one convolution with a bias. Every weight of the Keras
    model is used exactly once (checked), so a change in Keras's graph fails loudly here.
    """
    keras = import_keras()
    model = _mobilenet_v2(alpha)
    names = {layer.name for layer in model.layers}
    used = set()

    def conv(name, bn, relu=True, pad=None):
        layer, norm = model.get_layer(name), model.get_layer(bn)
        # on the torch backend a Keras variable's .value is a torch tensor: no NumPy round trip
        (kernel,) = (v.value.detach().float() for v in layer.weights)
        gamma, beta, mean, var = (v.value.detach().float() for v in norm.weights)
        scale = gamma / torch.sqrt(var + norm.epsilon)                  # (C_out,)
        depthwise = isinstance(layer, keras.layers.DepthwiseConv2D)
        # Keras kernels are (kh, kw, C_in, C_out) — depthwise (kh, kw, C, 1); torch wants
        # (C_out, C_in / groups, kh, kw)
        w = kernel.permute((2, 3, 0, 1) if depthwise else (3, 2, 0, 1))
        w = (w * scale[:, None, None, None]).contiguous(memory_format=torch.channels_last)
        used.update({name, bn})
        return dict(weight=w, bias=beta - scale * mean, stride=layer.strides[0], relu=relu,
                    groups=w.shape[0] if depthwise else 1, kernel=w.shape[-1],
                    same=layer.padding == "same",
                    pad=model.get_layer(pad).padding if pad in names else None)  # ZeroPadding2D

    steps = [conv("Conv1", "bn_Conv1")]
    block = 0
    while True:
        prefix = "expanded_conv_" if block == 0 else f"block_{block}_"
        if f"{prefix}depthwise" not in names:
            break
        convs = [conv(f"{prefix}expand", f"{prefix}expand_BN")] if block else []  # block 0: none
        convs += [conv(f"{prefix}depthwise", f"{prefix}depthwise_BN", pad=f"{prefix}pad"),
                  conv(f"{prefix}project", f"{prefix}project_BN", relu=False)]  # linear bottleneck
        steps.append(dict(block=convs, residual=f"{prefix}add" in names))
        block += 1
    steps.append(conv("Conv_1", "Conv_1_bn"))
    unused = [layer.name for layer in model.layers if layer.weights and layer.name not in used]
    if unused:
        raise RuntimeError(f"Keras's MobileNetV2 has layers attnlab does not run: {unused}")
    return steps


def _conv(x: torch.Tensor, c: dict) -> torch.Tensor:
    """One folded convolution (+ ReLU6) with Keras's padding: explicit ZeroPadding2D, or
    'same' (TensorFlow's rule, the odd pixel after)."""
    if c["pad"] is not None:
        (top, bottom), (left, right) = c["pad"]
    elif c["same"]:
        top, bottom = _same_padding(x.shape[2], c["kernel"], c["stride"])
        left, right = _same_padding(x.shape[3], c["kernel"], c["stride"])
    else:
        top = bottom = left = right = 0
    padding = (top, left)
    if (top, left) != (bottom, right):          # uneven: pad by hand, then a 'valid' conv
        x, padding = F.pad(x, (left, right, top, bottom)), 0
    y = F.conv2d(x, c["weight"], c["bias"], c["stride"], padding, 1, c["groups"])  # (B, C', H', W')
    return F.hardtanh_(y, 0.0, 6.0) if c["relu"] else y                            # ReLU6, in place


def _forward(steps, x: torch.Tensor) -> torch.Tensor:
    for step in steps:
        if "block" in step:                     # inverted residual: expand, depthwise, project
            h = x
            for c in step["block"]:
                h = _conv(h, c)
            x = h.add_(x) if step["residual"] else h
        else:
            x = _conv(x, step)
    return x.mean(dim=(2, 3))                   # (B, 1280) global average pooling


def embed_images(images, alpha: float = 0.35, batch_size: int = 32) -> np.ndarray:
    """MobileNetV2 ImageNet embeddings of uint8 grey images (N, H, W) -> float32 (N, 1280).

    Images are resized to 96×96 bilinearly, copied to three channels and scaled as
    `preprocess_input` does; the Keras model's weights then run with BatchNorm folded, ReLU6 in
    place, channels-last tensors and no autograd (torch.inference_mode), 32 images at a time
    (larger batches measured slower: their activations no longer fit in the CPU's cache).
    """
    images = _check_images(images)
    steps = _folded(_check_alpha(alpha))
    batch_size = check_int("batch_size", batch_size, minimum=1)
    out = np.empty((len(images), EMBED_DIM), np.float32)
    with torch.inference_mode():
        for i in range(0, len(images), batch_size):
            x = preprocess(images[i:i + batch_size]).contiguous(memory_format=torch.channels_last)
            out[i:i + batch_size] = _forward(steps, x).numpy()             # (B, 1280)
    return out


# ---------------------------------------------------------------------------------------------
# retrieval and its scores


def pixel_features(images) -> np.ndarray:
    """The raw-pixel baseline: each image as one float vector of its grey levels (N, H·W)."""
    images = _check_images(images)
    return images.reshape(len(images), -1).astype(np.float32)


def _check_features(name, x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.numpy(force=True)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.number):
        raise TypeError(f"{name} must be a numeric array (N, D), got dtype {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D numeric array (N, D), got shape {x.shape}")
    return x.astype(np.float64)


def nearest_neighbours(queries, database, k: int = 1) -> np.ndarray:
    """Indices (N_q, k) of each query's k most cosine-similar database rows, most similar first.

    cos(q, d) = q·d / (|q| |d|); ties go to the lower index. Computed in float64 so that the
    ranking does not depend on the BLAS's summation order.
    """
    q, d = _check_features("queries", queries), _check_features("database", database)
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"queries and database must have the same width, "
                         f"got {q.shape[1]} and {d.shape[1]}")
    k = check_int("k", k, minimum=1, maximum=len(d))  # at most the database size
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)  # a zero row stays zero
    d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    similarity = q @ d.T                                                  # (N_q, N_d)
    return np.argsort(-similarity, axis=1, kind="stable")[:, :k]


def _check_labels(name, labels, n) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {labels.shape}")
    return labels


def same_class_rates(query_labels, database_labels, neighbours) -> dict:
    """How often retrieved images share the query's label.

    `neighbours` (N_q, k) from `nearest_neighbours`. Returns {"top1": share of queries whose
    nearest neighbour has their label, f"top{k}": share of all k neighbours that have it
    (precision@k)}; for k = 1 only "top1".
    """
    neighbours = np.asarray(neighbours)
    if neighbours.ndim != 2 or neighbours.shape[1] < 1:
        raise ValueError(f"neighbours must have shape (N_q, k), got {neighbours.shape}")
    ql = _check_labels("query_labels", query_labels, len(neighbours))
    dl = np.asarray(database_labels)
    same = dl[neighbours] == ql[:, None]                                  # (N_q, k)
    rates = {"top1": float(same[:, 0].mean())}
    if same.shape[1] > 1:
        rates[f"top{same.shape[1]}"] = float(same.mean())
    return rates


def per_class_top1(query_labels, database_labels, neighbours,
                   n_classes: int = len(CLASS_NAMES)) -> np.ndarray:
    """Top-1 same-class rate for each query class (n_classes,); NaN for a class with no query."""
    n_classes = check_int("n_classes", n_classes, minimum=1)
    neighbours = np.asarray(neighbours)
    ql = _check_labels("query_labels", query_labels, len(neighbours))
    hit = np.asarray(database_labels)[neighbours[:, 0]] == ql
    return np.array([hit[ql == c].mean() if (ql == c).any() else np.nan for c in range(n_classes)])


def chance_top1(query_labels, database_labels) -> float:
    """Top-1 rate of a neighbour drawn at random from the database: Σ_c P_query(c) · P_db(c)."""
    ql, dl = np.asarray(query_labels), np.asarray(database_labels)
    classes = np.union1d(ql, dl)
    return float(sum((ql == c).mean() * (dl == c).mean() for c in classes))


def perturb(images, kind: str, amount: float, seed: int = 0) -> np.ndarray:
    """Damaged copies of uint8 images (N, H, W), for robustness curves; amount 0 = unchanged.

    - "shift": move each image `amount` pixels up, down, left or right (random direction per
      image), filling with black — the background of Fashion-MNIST.
    - "noise": add Gaussian noise of standard deviation `amount` grey levels, clipped to 0-255.
    - "invert": blend towards the negative, (1 − a)·x + a·(255 − x): a = 0.5 is flat grey,
      a = 1 the full negative.
    """
    images = _check_images(images)
    check_choice("kind", kind, ("shift", "noise", "invert"))
    amount = check_number("amount", amount, minimum=0, maximum=1 if kind == "invert" else None)
    rng = np.random.default_rng(check_int("seed", seed))
    if kind == "shift":
        if amount != int(amount):
            raise ValueError(f"amount must be a whole number of pixels for 'shift', got {amount!r}")
        d, (height, width) = int(amount), images.shape[1:]
        direction = rng.integers(0, 4, len(images))
        out = np.zeros_like(images)
        for k, (dy, dx) in enumerate(((-min(d, height), 0), (min(d, height), 0),
                                      (0, -min(d, width)), (0, min(d, width)))):
            rows = slice(max(dy, 0), height + min(dy, 0)), slice(max(-dy, 0), height - max(dy, 0))
            cols = slice(max(dx, 0), width + min(dx, 0)), slice(max(-dx, 0), width - max(dx, 0))
            chosen = direction == k
            out[chosen, rows[0], cols[0]] = images[chosen, rows[1], cols[1]]
        return out
    x = images.astype(np.float64)
    if kind == "noise":
        x = x + rng.normal(0.0, amount, x.shape)
    else:
        x = (1 - amount) * x + amount * (255.0 - x)
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# retrieval read as attention (notebook 05, section "Retrieval is attention")


def soft_knn(queries, database, labels, tau: float, n_classes: int = len(CLASS_NAMES)):
    """A soft k-nearest-neighbour classifier written as attention; returns (class probabilities
    (N_q, n_classes), weights (N_q, N_d)), both float64.

    The queries attend over the database: the keys are the L2-normalised database rows, so each
    score q·k is a cosine; the values are one-hot labels, so the output is each class's share of
    the weight. softmax(cos / τ) is Nadaraya–Watson kernel regression with the kernel
    exp(cos / τ). As τ → 0 all the weight goes to the most similar item (1-NN); as τ → ∞ every
    item weighs the same and each query gets the database's class frequencies. Float64, like
    `nearest_neighbours`, so the result does not depend on the BLAS's summation order.
    """
    q = torch.from_numpy(_check_features("queries", queries))     # (N_q, D) float64
    d = torch.from_numpy(_check_features("database", database))   # (N_d, D) float64
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"queries and database must have the same width, "
                         f"got {q.shape[1]} and {d.shape[1]}")
    n_classes = check_int("n_classes", n_classes, minimum=1)
    tau = check_number("tau", tau, minimum=0.0, exclusive_minimum=True)
    labels = _check_labels("labels", labels.numpy(force=True) if isinstance(labels, torch.Tensor)
                           else labels, len(d))
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"labels must be integer class indices, got dtype {labels.dtype}")
    if len(labels) and not 0 <= labels.min() <= labels.max() < n_classes:
        raise ValueError(f"labels must lie in [0, {n_classes - 1}] (n_classes={n_classes}), "
                         f"got values from {labels.min()} to {labels.max()}")
    keys = F.normalize(d, dim=1)                                            # (N_d, D) unit rows
    values = F.one_hot(torch.from_numpy(labels).long(), n_classes).double()  # (N_d, C)
    return scaled_dot_product_attention(F.normalize(q, dim=1), keys, values, scale=1.0 / tau)


def hit_at_k(query_labels, neighbour_labels) -> torch.Tensor:
    """hit@k, a float32 scalar tensor: the share of queries with at least one of their k
    retrieved items in their own class (metric-learning papers call it Recall@k).

    Precision@k (`same_class_rates`' f"top{k}") counts all k items; hit@k asks whether a user
    scanning the k results finds one right item. `neighbour_labels` (N_q, k) are the labels of
    each query's retrieved items, e.g. `database_labels[nearest_neighbours(q, d, k)]`.
    """
    ql = torch.as_tensor(np.asarray(query_labels))             # (N_q,)
    nl = torch.as_tensor(np.asarray(neighbour_labels))         # (N_q, k)
    if ql.dim() != 1 or nl.dim() != 2 or nl.shape[0] != ql.shape[0] or nl.shape[1] < 1:
        raise ValueError(f"query_labels must have shape (N_q,) and neighbour_labels (N_q, k), "
                         f"got {tuple(ql.shape)} and {tuple(nl.shape)}")
    return (nl == ql[:, None]).any(dim=1).float().mean()       # ()
