"""Image embeddings from a frozen pre-trained CNN: Keras MobileNetV2 (ImageNet weights) turns
each Fashion-MNIST image into 1280 numbers (notebook 06), and `pixel_features` is the raw-pixel
baseline.

Nothing is trained. The model is Keras's own `keras.applications.MobileNetV2`, built on the torch
backend with the verified ImageNet weights. `embed_images` then runs that model's weights as a
few torch convolutions, with every BatchNorm folded into the convolution before it, in-place
ReLU6 and channels-last tensors: the same function (cosine ≥ 0.9999 to Keras's `predict`), several
times faster on a CPU (`make bench` measures it). `embed_images_keras` is the plain Keras way,
kept as the reference.
"""
from __future__ import annotations

import functools
import random
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from ..plumbing.assets import fetch, import_keras
from ..plumbing.checks import check_choice, check_int, check_number
from ..plumbing.parallel import parallel_map, workers
from ..plumbing.repro import nudge, seed_of

ALPHAS = (0.35, 0.5)  # the widths whose ImageNet weights attnlab.plumbing.assets knows
INPUT_SIZE = 96       # 28×28 images are resized to 96×96: small enough for a CPU, big enough
                      # for MobileNetV2's five stride-2 stages (96 → 3 pixels)
EMBED_DIM = 1280


def _check_alpha(alpha) -> float:
    return check_choice("alpha", check_number("alpha", alpha), ALPHAS)


def _real_seed(seed) -> int | None:
    """None (the ImageNet weights) or the seed the random weights are really drawn with."""
    return None if seed is None else seed_of(check_int("seed", seed, minimum=0))


def check_images(images) -> np.ndarray:
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


def _bilinear_weights(n_in: int, n_out: int) -> torch.Tensor:
    """(n_out, n_in) float64 matrix of the bilinear resize with half-pixel centres (Keras, TF and
    `F.interpolate(align_corners=False)` upsample this way), in whole units of 1/(2 n_out).

    Output pixel d reads input position src = (n_in (2d + 1) - n_out) / (2 n_out), clamped to
    [0, n_in - 1], from its two neighbours. Kept as integers so that resizing integer images is
    exact arithmetic (see `preprocess`)."""
    denominator = 2 * n_out
    numerator = (n_in * (2 * torch.arange(n_out, dtype=torch.int64) + 1) - n_out).clamp(min=0)
    low = (numerator // denominator).clamp(max=n_in - 1)             # (n_out,) left neighbour
    frac = torch.where(numerator // denominator >= n_in - 1, 0, numerator % denominator)
    high = (low + 1).clamp(max=n_in - 1)                               # (n_out,) right neighbour
    rows = torch.arange(n_out)
    weights = torch.zeros(n_out, n_in, dtype=torch.float64)            # (n_out, n_in)
    weights.index_put_((rows, low), (denominator - frac).double(), accumulate=True)
    weights.index_put_((rows, high), frac.double(), accumulate=True)
    return weights


def preprocess(images, size: int = INPUT_SIZE) -> torch.Tensor:
    """uint8 grey (N, H, W) -> float32 (N, 3, size, size) the way MobileNetV2 was trained on:
    bilinear resize (half-pixel centres, as Keras/TF resize), grey copied to R, G and B, and
    `preprocess_input` scaling of [0, 255] to [-1, 1].

    The resize is done as whole-number arithmetic in float64 (integer weights times integer grey
    levels: every sum is exact, whatever order a CPU adds in), then one division: the result is
    the same bits on every CPU, which `F.interpolate` in float32 is not (its vectorised and
    scalar kernels round differently). A model trained on these embeddings would otherwise see
    other inputs on another CPU, and training amplifies a last-bit difference into another model.
    """
    images, size = check_images(images), check_int("size", size, minimum=1)
    x = torch.from_numpy(images).double()                                          # (N, H, W)
    rows = _bilinear_weights(images.shape[1], size)                               # (S, H)
    cols = _bilinear_weights(images.shape[2], size)                               # (S, W)
    x = rows @ x @ cols.T                         # (N, S, S) whole numbers: (2S)² × grey level
    x = x / (4 * size * size * 127.5) - 1.0       # preprocess_input: grey / 127.5 - 1
    return x.float()[:, None].expand(-1, 3, -1, -1)                                # (N, 3, S, S)


def mobilenet_v2(alpha: float = 0.35, seed: int | None = None):
    """Keras's MobileNetV2 without its classifier, global-average pooled (1280 outputs), for
    96×96 RGB input, with the verified ImageNet weights; built once per alpha.

    Those weights are the network's 224-pixel training: the shapes of the weights do not depend
    on the input size, so Keras loads them into the 96-pixel model unchanged.

    `seed` (an int): the same architecture with random weights instead (`weights=None`, Keras's
    own initialisers, every BatchNorm at its identity start), drawn from `seed_of(seed)`, so
    ATTNLAB_SEED moves them: the control that tells what the pre-training gives from what the
    architecture gives by itself (notebook 06). Building it leaves every global RNG as it was.
    """
    return _mobilenet_v2(_check_alpha(alpha), _real_seed(seed))


@functools.cache
def _mobilenet_v2(alpha: float, real_seed: int | None = None):
    keras = import_keras()
    weights = None if real_seed is not None else str(fetch(f"mobilenet_v2_{alpha:g}"))
    layout, state = keras.config.image_data_format(), random.getstate()
    keras.config.set_image_data_format("channels_last")  # whatever ~/.keras/keras.json says
    try:
        # an unseeded Keras initialiser takes its seed from Python's `random`, and nothing else:
        # seeding it alone fixes every weight (torch's CPU uniform draw is serial, the same
        # numbers on every CPU) and leaves NumPy's and torch's global generators untouched
        if real_seed is not None:
            random.seed(real_seed)
        return keras.applications.MobileNetV2(input_shape=(INPUT_SIZE, INPUT_SIZE, 3),
                                              alpha=alpha, include_top=False,
                                              weights=weights, pooling="avg")
    finally:
        random.setstate(state)
        keras.config.set_image_data_format(layout)


def embed_images_keras(images, alpha: float = 0.35, batch_size: int = 32) -> np.ndarray:
    """The plain Keras way, the reference `embed_images` is checked against: Keras resize,
    `preprocess_input`, `model.predict(batch_size=32)`. Returns float32 (N, 1280)."""
    images = check_images(images)
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
def _folded(alpha: float, real_seed: int | None = None):
    """The Keras model as a list of steps (conv, residual) with BatchNorm folded in.

    BN(conv(x)) = γ (W*x − μ) / √(σ² + ε) + β  =  (s·W)*x + (β − s·μ),  s = γ / √(σ² + ε),
    so each Conv → BatchNorm pair becomes one convolution with a bias. Every weight of the Keras
    model is used exactly once (checked), so a change in Keras's graph fails loudly here.
    """
    keras = import_keras()
    model = _mobilenet_v2(alpha, real_seed)
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
    # global average pooling, summed position by position in one fixed order: a reduction kernel
    # adds in an order that depends on the CPU's vector width, and so would the last bits
    total = x[:, :, 0, 0]
    for i, j in [(i, j) for i in range(x.shape[2]) for j in range(x.shape[3])][1:]:
        total = total + x[:, :, i, j]           # (B, 1280)
    return total / (x.shape[2] * x.shape[3])    # (B, 1280)


def embed_images(images, alpha: float = 0.35, batch_size: int = 32, *,
                 seed: int | None = None) -> np.ndarray:
    """MobileNetV2 ImageNet embeddings of uint8 grey images (N, H, W) -> float32 (N, 1280);
    with `seed`, the embeddings of the same network with random weights (`mobilenet_v2`).

    Images are resized to 96×96 bilinearly, copied to three channels and scaled as
    `preprocess_input` does; the Keras model's weights then run with BatchNorm folded, ReLU6 in
    place, channels-last tensors and no autograd (torch.inference_mode), 32 images at a time
    (larger batches measured slower: their activations no longer fit in the CPU's cache).

    The resize and the pooling are written so that no kernel's summation order enters them
    (the same bits with ATEN_CPU_CAPABILITY=default; tests/test_retrieval.py). The convolutions
    are oneDNN's, whose last bits differ between CPUs (AVX2 and AVX-512 do); notebook 06 does
    not depend on them, because its set model's training is not chaotic (`attnlab.lessons.sets`),
    and `make test-portable` moves every embedding by one ulp to prove it
    (`attnlab.plumbing.repro.nudge`).
    """
    images = check_images(images)
    steps = _folded(_check_alpha(alpha), _real_seed(seed))
    batch_size = check_int("batch_size", batch_size, minimum=1)

    def embed(starts: range) -> np.ndarray:  # the batches that begin at `starts`: (n, 1280)
        with torch.inference_mode():
            return np.concatenate([_forward(steps, preprocess(images[i:i + batch_size])
                                            .contiguous(memory_format=torch.channels_last)).numpy()
                                   for i in starts])

    # Each batch is computed alone, so the batches can be shared out between processes
    # (parallel_map) and give the same bits: a 2-core machine embeds twice as fast.
    starts = range(0, len(images), batch_size)
    share = max(1, -(-len(starts) // workers(len(starts))))  # batches per process
    parts = parallel_map(embed, [starts[i:i + share] for i in range(0, len(starts), share)])
    out = np.concatenate(parts) if parts else np.empty((0, EMBED_DIM), np.float32)  # (N, 1280)
    return nudge(out)  # as computed, unless make test-portable moves it by one ulp


def pixel_features(images) -> np.ndarray:
    """The raw-pixel baseline: each image as one float vector of its grey levels (N, H·W)."""
    images = check_images(images)
    return images.reshape(len(images), -1).astype(np.float32)
