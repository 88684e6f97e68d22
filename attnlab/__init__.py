"""attnlab: the shared code of the attention notebook series.

The names below are the public API that code outside this repository calls (CONTRIBUTING.md
lists them with their shapes); everything else is free to change. Importing attnlab never
touches the network and never imports Keras: the assets and Keras are loaded on first use.
"""
from .core.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from .core.blocks import DecoderBlock, EncoderBlock, PositionalEncoding
from .core.generation import sample_next
from .core.hooks import attention_maps, run_with_maps
from .core.interventions import uniform_attention
from .core.models import TinyTransformer
from .core.rope import rotary
from .lessons.data import load_fashion_mnist
from .plumbing.repro import seed_everything, seed_of
from .pretrained.embeddings import embed_images
from .pretrained.minilm import load_minilm
from .views.app import SentimentApp

__version__ = "0.1.0"

__all__ = [
    "scaled_dot_product_attention", "MultiHeadAttention", "causal_mask", "rotary",
    "attention_maps", "run_with_maps", "uniform_attention", "sample_next", "EncoderBlock",
    "DecoderBlock", "PositionalEncoding",
    "TinyTransformer", "load_minilm", "load_fashion_mnist", "embed_images", "SentimentApp",
    "seed_everything", "seed_of",
]
