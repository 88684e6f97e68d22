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

`generate` is the greedy (or sampled) decoding loop. The models train in float64: at this size
it takes about 1.5× the time of float32 (measured: 4.2 s against 2.5 s for 400 sorter steps on
one loaded thread), and with PyTorch's AVX2 and portable (ATEN_CPU_CAPABILITY=default) kernels
the values notebook 07 prints agreed to 4 significant digits or more before rounding, the
counts behind its accuracies exactly.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .attention import causal_mask
from .checks import check_bool, check_int, check_number, check_tensor
from .decoder import DecoderOnly, EncoderDecoder

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


@torch.no_grad()
def generate(model: nn.Module, prompt: torch.Tensor, steps: int, *,
             source: torch.Tensor | None = None, temperature: float = 0.0,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Extend `prompt` (B, T0) by `steps` tokens, one at a time, each fed back as input.

    temperature 0 is greedy decoding (always the most likely token); above 0 each token is drawn
    from softmax(logits / temperature). With `source` (an encoder-decoder's input), the source
    is encoded once and every step reads it through cross-attention. Returns (B, T0 + steps).
    """
    check_tensor("prompt", prompt, min_dim=2)
    steps = check_int("steps", steps, minimum=0)
    temperature = check_number("temperature", temperature, minimum=0.0)
    was_training = model.training
    model.eval()
    memory = None if source is None else model.encode(source)  # (B, S, d_model)
    seq = prompt
    for _ in range(steps):
        logits = (model(seq) if memory is None else model.decode(seq, memory))[:, -1]  # (B, V)
        if temperature == 0.0:
            next_token = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        else:
            probs = torch.softmax(logits / temperature, dim=-1)  # (B, V)
            next_token = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        seq = torch.cat([seq, next_token], dim=1)  # (B, T + 1)
    model.train(was_training)
    return seq


def _fit(model: nn.Module, loss_fn, n_steps: int, lr: float) -> list[float]:
    """Adam on `loss_fn(step)` for n_steps, the learning rate falling linearly from lr to 0 (the
    last steps settle instead of jumping about); returns the loss of every step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)  # one kernel per step
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / n_steps)
    losses = []
    model.train()
    for step in range(n_steps):
        loss = loss_fn(step)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses


def next_token_loss(model: nn.Module, seqs: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting seqs[:, t + 1] from seqs[:, :t + 1], every t at once."""
    logits = model(seqs[:, :-1])  # (B, T - 1, V)
    return nn.functional.cross_entropy(logits.flatten(0, 1), seqs[:, 1:].flatten())


def train_sorter(causal: bool = True, seed: int = 0, **recipe) -> tuple[DecoderOnly, list[float]]:
    """A `DecoderOnly` trained on `sort_task` by SORT_RECIPE (keyword overrides allowed), with
    or without the causal mask. Every step draws new sequences. Returns (model, losses)."""
    check_bool("causal", causal)
    r = _recipe(SORT_RECIPE, recipe)
    data = sort_task(r["steps"] * r["batch_size"], seed=seed + 1)  # (steps * B, 2L + 2)
    with torch.random.fork_rng(devices=[]):  # seed the weights without touching the caller's RNG
        torch.manual_seed(seed)
        model = DecoderOnly(VOCAB, r["d_model"], r["n_heads"], r["d_ff"], max_len=2 * LENGTH + 2,
                            causal=causal).to(DTYPE)
    batches = data.split(r["batch_size"])
    losses = _fit(model, lambda step: next_token_loss(model, batches[step]), r["steps"], r["lr"])
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
    logits, maps = model(seqs[:, :-1], return_attention=True)  # (B, 2L + 1, V), [(B, H, T, T)]
    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), seqs[:, 1:].reshape(-1))
    answer = seqs[:, LENGTH + 2:]  # (B, L)   the sorted digits
    teacher_forced = (logits[:, LENGTH + 1:].argmax(-1) == answer).double().mean()
    written = generate(model, seqs[:, :LENGTH + 2], LENGTH)[:, LENGTH + 2:]  # (B, L)
    return {"loss": float(loss), "teacher_forced": float(teacher_forced),
            "generated": float((written == answer).double().mean()),
            "future": sum(future_share(w) for w in maps) / len(maps)}


def future_share(weights: torch.Tensor) -> float:
    """Mean share of each query's attention on keys after it, for weights (..., T, T)."""
    T = weights.shape[-1]
    future = ~causal_mask(T)  # (T, T)   True above the diagonal
    return float((weights * future).sum(-1).mean())


def train_reverser(seed: int = 0, **recipe) -> tuple[EncoderDecoder, list[float]]:
    """An `EncoderDecoder` trained on `reverse_task` by REVERSE_RECIPE; returns (model, losses)."""
    r = _recipe(REVERSE_RECIPE, recipe)
    src, tgt = reverse_task(r["steps"] * r["batch_size"], seed=seed + 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = EncoderDecoder(DIGITS, VOCAB, r["d_model"], r["n_heads"], r["d_ff"],
                               max_len=LENGTH + 1).to(DTYPE)
    src_b, tgt_b = src.split(r["batch_size"]), tgt.split(r["batch_size"])

    def loss_fn(step):
        logits = model(src_b[step], tgt_b[step][:, :-1])  # (B, L, V)
        return nn.functional.cross_entropy(logits.flatten(0, 1), tgt_b[step][:, 1:].flatten())

    return model, _fit(model, loss_fn, r["steps"], r["lr"])


@torch.no_grad()
def alignment_share(cross_weights: torch.Tensor) -> float:
    """Mean cross-attention weight that target step i puts on source position S - 1 - i (the
    digit it must write when reversing), for weights (B, H, T, S) with T = S."""
    check_tensor("cross_weights", cross_weights, min_dim=2)
    T, S = cross_weights.shape[-2:]
    if T != S:
        raise ValueError(f"cross_weights must be square in its last two dimensions (T = S), "
                         f"got shape {tuple(cross_weights.shape)}")
    steps = torch.arange(T)
    return float(cross_weights[..., steps, S - 1 - steps].mean())


def _recipe(defaults: dict, overrides: dict) -> dict:
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise TypeError(f"unknown recipe keys {sorted(unknown)}; "
                        f"expected some of {sorted(defaults)}")
    r = {**defaults, **overrides}
    for name in ("d_model", "n_heads", "d_ff", "batch_size", "steps"):
        check_int(name, r[name], minimum=1)
    check_number("lr", r["lr"], minimum=0.0, exclusive_minimum=True)
    return r
