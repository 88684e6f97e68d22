"""attnlab: the shared code of the attention notebook series.

The attention building blocks are imported eagerly; everything heavier (Keras, the pre-trained
encoder, widgets) is imported on first use, so `import attnlab` stays fast and never touches
the network.
"""
from importlib import import_module

from .attention import (
    EncoderBlock,
    MultiHeadAttention,
    PositionalEncoding,
    causal_mask,
    scaled_dot_product_attention,
)
from .decoder import DecoderBlock
from .repro import seed_everything

__version__ = "0.1.0"

# public name -> module that defines it, imported when the name is first used
_LAZY = {
    "TinyTransformer": "models",
    "load_minilm": "minilm",
    "load_fashion_mnist": "retrieval",
    "embed_images": "retrieval",
    "SentimentApp": "sentiment",
}

__all__ = [
    "scaled_dot_product_attention", "MultiHeadAttention", "EncoderBlock", "PositionalEncoding",
    "causal_mask", "DecoderBlock", "seed_everything", *_LAZY,
]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
