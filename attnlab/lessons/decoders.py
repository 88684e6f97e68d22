"""Notebook 08's decoders: two synthetic digit tasks, the tiny models trained on them, and
what the notebook measures of them.

Two tasks whose answers are known, so every claim about a decoder can be measured:

- `sort_task`: BOS, six random digits, SEP, the same digits sorted. A decoder-only model learns it
  as next-token prediction. The random digits cannot be predicted from the past (each costs
  ln 10 nats of loss, `loss_floor`); the sorted half can, exactly. A model that sees the future
  (no causal mask) copies the next token instead and reaches a loss below that floor: the leak.
- `reverse_task`: a source of six digits and the target "the same digits reversed", for an
  encoder-decoder; its cross-attention should read source position S-1-i for target step i
  (`measures.alignment_share`).

The models train with `core.training.train` on `core.generation.next_token_loss`, in float64
(`core.models.draw_float64`): at this size it takes about 1.5× the time of float32, and the
values notebook 08 prints come out the same with PyTorch's AVX2 and portable
(ATEN_CPU_CAPABILITY=default) kernels. Generation itself (`generate`, `sample_next`) is the
core's, shared with every other decoder of the series.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..core.generation import generate, next_token_loss
from ..core.hooks import run_with_maps
from ..core.measures import future_share
from ..core.models import DecoderOnly, EncoderDecoder
from ..core.recipes import REVERSER, SORTER
from ..core.training import train
from ..plumbing.checks import check_bool, check_int
from ..plumbing.repro import seed_of

DIGITS = 10  # token ids 0..9 are the digits themselves
BOS, SEP = DIGITS, DIGITS + 1  # beginning of sequence; the separator before the answer
VOCAB = DIGITS + 2
LENGTH = 6  # digits per sequence
NAMES = {BOS: "BOS", SEP: "SEP"}
DTYPE = torch.float64


def _digits(n: int, seed: int) -> torch.Tensor:
    n, seed = check_int("n", n, minimum=1), check_int("seed", seed)
    draws = torch.Generator().manual_seed(seed_of(seed))
    return torch.randint(0, DIGITS, (n, LENGTH), generator=draws)


def sort_task(n: int, seed: int = 0) -> torch.Tensor:
    """n sequences (n, 2 * LENGTH + 2): BOS, LENGTH random digits, SEP, the digits sorted."""
    x = _digits(n, seed)  # (n, L)
    bos, sep = torch.full((n, 1), BOS), torch.full((n, 1), SEP)
    return torch.cat([bos, x, sep, x.sort(dim=-1).values], dim=1)  # (n, 2L + 2)


def reverse_task(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """n pairs: the source digits (n, LENGTH) and the target BOS + the digits reversed
    (n, LENGTH + 1). The decoder reads target[:, :-1] and predicts target[:, 1:]."""
    x = _digits(n, seed)  # (n, L)
    return x, torch.cat([torch.full((n, 1), BOS), x.flip(-1)], dim=1)  # (n, L), (n, L + 1)


def show(ids) -> str:
    """A sequence of token ids as text: digits, BOS and SEP."""
    return " ".join(NAMES.get(int(i), str(int(i))) for i in ids)


def loss_floor() -> float:
    """The lowest mean next-token loss any model that cannot see the future can reach on
    `sort_task`: LENGTH of its 2 * LENGTH + 1 targets are uniform random digits (ln 10 nats
    each), the rest (SEP and the sorted digits) follow from the past exactly (0 nats)."""
    return LENGTH * math.log(DIGITS) / (2 * LENGTH + 1)


def train_sorter(causal: bool = True, seed: int = 0, **overrides) -> tuple[DecoderOnly, list]:
    """A `DecoderOnly` trained on `sort_task` by `recipes.SORTER` (keyword overrides allowed),
    with or without the causal mask. Every step draws new sequences. Returns (model, losses)."""
    check_bool("causal", causal)
    r = SORTER.but(**overrides)
    data = sort_task(r.steps * r.batch_size, seed=seed + 1)  # (steps * B, 2L + 2)
    return train(r, lambda: DecoderOnly(VOCAB, r.d_model, r.n_heads, r.d_ff,
                                        max_len=2 * LENGTH + 2, causal=causal, dtype=DTYPE),
                 next_token_loss, data, seed=seed)


@torch.no_grad()
def evaluate_sorter(model: DecoderOnly, seqs: torch.Tensor) -> dict:
    """What notebook 08 measures of a sorter on held-out `sort_task` sequences:

    - `loss`: mean next-token loss over all 2L + 1 targets (teacher forcing: the true sequence
      is the input, as in training); `loss_random`: its mean over the L random digits (ln 10
      for a model that cannot see the future and predicts them well); `loss_rest`: over SEP and
      the sorted digits, which follow from the past (0 at best);
    - `teacher_forced`: accuracy of the sorted half's tokens under teacher forcing;
    - `generated`: accuracy of the sorted half when the model writes it itself from the prompt
      (BOS, digits, SEP), greedily, one token at a time;
    - `future`: the share of attention weight that queries put on later positions (mean over
      blocks, heads, queries and sequences).
    """
    logits, maps = run_with_maps(model, seqs[:, :-1])  # (B, 2L + 1, V), [(B, H, T, T)]
    per_token = nn.functional.cross_entropy(logits.transpose(1, 2), seqs[:, 1:],
                                            reduction="none")  # (B, 2L + 1)
    answer = seqs[:, LENGTH + 2:]  # (B, L)   the sorted digits
    teacher_forced = (logits[:, LENGTH + 1:].argmax(-1) == answer).double().mean()
    written = generate(model, seqs[:, :LENGTH + 2], LENGTH)[:, LENGTH + 2:]  # (B, L)
    return {"loss": float(per_token.mean()), "loss_random": float(per_token[:, :LENGTH].mean()),
            "loss_rest": float(per_token[:, LENGTH:].mean()),
            "teacher_forced": float(teacher_forced),
            "generated": float((written == answer).double().mean()),
            "future": sum(future_share(w) for w in maps) / len(maps)}


def train_reverser(seed: int = 0, **overrides) -> tuple[EncoderDecoder, list[float]]:
    """An `EncoderDecoder` trained on `reverse_task` by `recipes.REVERSER` (keyword overrides
    allowed); returns (model, losses)."""
    r = REVERSER.but(**overrides)
    src, tgt = reverse_task(r.steps * r.batch_size, seed=seed + 1)  # (steps * B, L), (.., L + 1)

    def loss_fn(model, batch):  # teacher forcing: read target[:, :-1], predict target[:, 1:]
        src_b, tgt_b = batch
        logits = model(src_b, tgt_b[:, :-1])  # (B, L, V)
        return nn.functional.cross_entropy(logits.flatten(0, 1), tgt_b[:, 1:].flatten())

    return train(r, lambda: EncoderDecoder(DIGITS, VOCAB, r.d_model, r.n_heads, r.d_ff,
                                           max_len=LENGTH + 1, dtype=DTYPE),
                 loss_fn, (src, tgt), seed=seed)
