"""Training tiny decoders on synthetic digit tasks, generating from them, and measuring them
(notebook 07).

Two tasks whose answers are known, so every claim about a decoder can be measured:

- `sort_task`: BOS, six random digits, SEP, the same digits sorted. A decoder-only model learns it
  as next-token prediction. The random digits cannot be predicted from the past (each costs
  ln 10 nats of loss, `loss_floor`); the sorted half can, exactly. A model that sees the future
  (no causal mask) copies the next token instead and reaches a loss below that floor: the leak.
- `reverse_task`: a source of six digits and the target "the same digits reversed", for an
  encoder-decoder; its cross-attention should read source position S-1-i for target step i
  (`alignment_share`).

`sample_next` picks one next token per row (greedy, temperature, top-k, top-p) and `generate`
is the decoding loop around it. The models train with `attnlab.train.fit`, in float64
(`attnlab.models.draw_float64`): at this size it takes about 1.5× the time of float32, and the
values notebook 07 prints come out the same with PyTorch's AVX2 and portable
(ATEN_CPU_CAPABILITY=default) kernels.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .checks import check_bool, check_int, check_number, check_tensor
from .models import DecoderOnly, EncoderDecoder, eval_mode
from .probes import future_share
from .train import fit, recipe

DIGITS = 10  # token ids 0..9 are the digits themselves
BOS, SEP = DIGITS, DIGITS + 1  # beginning of sequence; the separator before the answer
VOCAB = DIGITS + 2
LENGTH = 6  # digits per sequence
NAMES = {BOS: "BOS", SEP: "SEP"}
DTYPE = torch.float64
# The recipes of notebook 07: model size, Adam's learning rate, minibatch size and steps.
SORT_RECIPE = {"d_model": 32, "n_heads": 2, "d_ff": 64,
               "lr": 1e-2, "batch_size": 64, "steps": 300}
REVERSE_RECIPE = {"d_model": 32, "n_heads": 1, "d_ff": 64,
                  "lr": 1e-2, "batch_size": 64, "steps": 200}


def _digits(n: int, seed: int) -> torch.Tensor:
    n, seed = check_int("n", n, minimum=1), check_int("seed", seed)
    return torch.randint(0, DIGITS, (n, LENGTH), generator=torch.Generator().manual_seed(seed))


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


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """One next token id per row of `logits` (B, V) -> (B,) int64.

    The logits are divided by `temperature` (below 1 sharpens the distribution, above 1
    flattens it; 0 means greedy: always the most likely token); `top_k` keeps only the k most
    likely tokens; `top_p` keeps the smallest set of most likely tokens whose probability
    reaches p (nucleus sampling). A token is then drawn from what is left, renormalised.
    `top_k=1` is greedy as well.
    """
    check_tensor("logits", logits, floating=True)
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}")
    temperature = check_number("temperature", temperature, minimum=0.0)
    if top_k is not None:
        top_k = check_int("top_k", top_k, minimum=1)
    if top_p is not None:
        top_p = check_number("top_p", top_p, minimum=0.0, maximum=1.0, exclusive_minimum=True)
    if temperature == 0.0 or top_k == 1:
        return logits.argmax(dim=-1)  # (B,)   greedy
    logits = logits / temperature  # (B, V)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)   the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)  # (B, V)
        before = probs.cumsum(dim=-1) - probs  # (B, V)   probability of the tokens ahead
        drop = (before >= top_p).scatter(-1, order, before >= top_p)  # back to token order
        logits = logits.masked_fill(drop, float("-inf"))
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B,)


@torch.no_grad()
def generate(model: nn.Module, prompt: torch.Tensor, steps: int, *,
             source: torch.Tensor | None = None, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Extend `prompt` (B, T0) by `steps` tokens, one at a time, each fed back as input.

    Each token comes from `sample_next` (temperature 0, the default, is greedy decoding). With
    `source` (an encoder-decoder's input), the source is encoded once and every step reads it
    through cross-attention. Returns (B, T0 + steps).
    """
    check_tensor("prompt", prompt, min_dim=2)
    steps = check_int("steps", steps, minimum=0)
    with eval_mode(model):
        memory = None if source is None else model.encode(source)  # (B, S, d_model)
        seq = prompt
        for _ in range(steps):
            logits = (model(seq) if memory is None else model.decode(seq, memory))[:, -1]  # (B, V)
            token = sample_next(logits, temperature, top_k, top_p, generator)  # (B,)
            seq = torch.cat([seq, token[:, None]], dim=1)  # (B, T + 1)
    return seq


def next_token_loss(model: nn.Module, seqs: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting seqs[:, t + 1] from seqs[:, :t + 1], every t at once."""
    logits = model(seqs[:, :-1])  # (B, T - 1, V)
    return nn.functional.cross_entropy(logits.flatten(0, 1), seqs[:, 1:].flatten())


def train_sorter(causal: bool = True, seed: int = 0, **overrides) -> tuple[DecoderOnly, list]:
    """A `DecoderOnly` trained on `sort_task` by SORT_RECIPE (keyword overrides allowed), with
    or without the causal mask. Every step draws new sequences. Returns (model, losses)."""
    check_bool("causal", causal)
    r = recipe(SORT_RECIPE, overrides)
    data = sort_task(r["steps"] * r["batch_size"], seed=seed + 1)  # (steps * B, 2L + 2)
    with torch.random.fork_rng(devices=[]):  # seed the weights without touching the caller's RNG
        torch.manual_seed(seed)
        model = DecoderOnly(VOCAB, r["d_model"], r["n_heads"], r["d_ff"], max_len=2 * LENGTH + 2,
                            causal=causal, dtype=DTYPE)
    losses = fit(model, data.split(r["batch_size"]), next_token_loss, lr=r["lr"],
                 decay_steps=r["steps"])
    return model, losses


@torch.no_grad()
def evaluate_sorter(model: DecoderOnly, seqs: torch.Tensor) -> dict:
    """What notebook 07 measures of a sorter on held-out `sort_task` sequences:

    - `loss`: mean next-token loss over all 2L + 1 targets (teacher forcing: the true sequence
      is the input, as in training);
    - `teacher_forced`: accuracy of the sorted half's tokens under teacher forcing;
    - `generated`: accuracy of the sorted half when the model writes it itself from the prompt
      (BOS, digits, SEP), greedily, one token at a time;
    - `future`: the share of attention weight that queries put on later positions (mean over
      blocks, heads, queries and sequences).
    """
    with eval_mode(model):
        logits, maps = model.run(seqs[:, :-1])  # (B, 2L + 1, V), [(B, H, T, T)]
    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), seqs[:, 1:].reshape(-1))
    answer = seqs[:, LENGTH + 2:]  # (B, L)   the sorted digits
    teacher_forced = (logits[:, LENGTH + 1:].argmax(-1) == answer).double().mean()
    written = generate(model, seqs[:, :LENGTH + 2], LENGTH)[:, LENGTH + 2:]  # (B, L)
    return {"loss": float(loss), "teacher_forced": float(teacher_forced),
            "generated": float((written == answer).double().mean()),
            "future": sum(future_share(w) for w in maps) / len(maps)}


def train_reverser(seed: int = 0, **overrides) -> tuple[EncoderDecoder, list[float]]:
    """An `EncoderDecoder` trained on `reverse_task` by REVERSE_RECIPE; returns (model, losses)."""
    r = recipe(REVERSE_RECIPE, overrides)
    src, tgt = reverse_task(r["steps"] * r["batch_size"], seed=seed + 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = EncoderDecoder(DIGITS, VOCAB, r["d_model"], r["n_heads"], r["d_ff"],
                               max_len=LENGTH + 1, dtype=DTYPE)

    def loss_fn(model, batch):  # teacher forcing: read target[:, :-1], predict target[:, 1:]
        src_b, tgt_b = batch
        logits = model(src_b, tgt_b[:, :-1])  # (B, L, V)
        return nn.functional.cross_entropy(logits.flatten(0, 1), tgt_b[:, 1:].flatten())

    batches = zip(src.split(r["batch_size"]), tgt.split(r["batch_size"]))
    return model, fit(model, batches, loss_fn, lr=r["lr"], decay_steps=r["steps"])
