"""In-context learning and induction heads (notebook 10): the repeat task, an attention-only
decoder, its training and its measurements.

The task (`repeat_task`): random tokens in which a segment of random length is repeated right
after itself, starting at a random place. The first copy cannot be predicted; each token of the
second copy after its first can, exactly, by anyone who looks up the previous occurrence of the
current token and copies the token that followed it. That look-up needs two attention steps
composed (Elhage et al. 2021; Olsson et al. 2022): a head that writes into each position which
token came before it (a previous-token head), and a later head whose query "my token" matches
the key "the token before me was yours" (an induction head). One layer cannot compose them.
The distance back to the first copy (the segment's length) changes from sequence to sequence,
so no fixed position helps: with a fixed distance a one-layer model copies by position alone
("read the token 7 places back") and teaches nothing.

The model (`core.models.AttentionOnly`, told this task's VOCAB and LENGTH): token and learned
position embeddings, attention-only layers (`x + attention(x, causal mask)`, no feed-forward layer,
no LayerNorm) and an unembedding, so that everything it computes goes through attention.
`train_induction` trains it with the one training loop, `attnlab.core.training.fit`, in float64
(`draw_float64`): the step at which the loss drops and the losses it reaches then come out the same
with PyTorch's AVX2/AVX-512 and portable kernels (checked to 1e-15). It keeps the loss of every step
split into repeated and random tokens, and a copy of the weights every `CHECKPOINT_EVERY` steps
(`Induction.at(step)`), for "before the drop" measurements. Its results are cached by their
arguments, so a check that re-runs a student's experiment costs nothing.

The sizes are chosen for time: float64 costs ~2.3x float32 here. With 32 tokens, repeats of
6-16 and the usual initial scales, the drop comes after ~1,500 steps; 24 tokens, repeats of
6-12 (the same share of repeated tokens, ~1/3) and embeddings that start at std 0.5 bring it to
~250 steps; 500 steps of both models then take ~11 s on one thread (2-core AMD EPYC).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn

from ..core.generation import token_losses
from ..core.models import AttentionOnly, eval_mode
from ..core.recipes import INDUCTION, InductionRecipe
from ..core.training import train
from ..plumbing.checks import check_int
from ..plumbing.parallel import remember
from ..plumbing.repro import seed_of

VOCAB = 32  # token ids 0..31, all of them random tokens: no BOS, no separator
LENGTH = 24  # tokens per sequence
REPEAT = (6, 12)  # the repeated segment's length is drawn from this range (both ends included)
DTYPE = torch.float64
CHECKPOINT_EVERY = 50  # Induction.checkpoints: the weights at steps 0, 50, 100, ... and the last
TEST_SEED, N_TEST = 10_000, 500  # the test sequences: repeat_task(N_TEST, seed=TEST_SEED)
DROP_LEVEL = 2.0  # nats: the loss on repeated tokens between the plateau (~3) and the end (~1)


@dataclass(frozen=True)
class Repeats:
    """A batch of the repeat task: `tokens` (n, T) and, per sequence, where the repeated
    segment starts (`start`) and how long it is (`size`). The first copy is
    tokens[start:start + size], the second copy right after it."""

    tokens: torch.Tensor  # (n, T) int64
    start: torch.Tensor  # (n,)
    size: torch.Tensor  # (n,)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def repeated(self) -> torch.Tensor:
        """(n, T - 1) bool over the next-token predictions (position t predicts token t + 1):
        True where token t + 1 is in the second copy after its first token, the tokens an
        induction head can copy. Every other target is a random token (the second copy's first
        token too: nothing before it says the repeat begins)."""
        target = torch.arange(1, self.tokens.shape[1], device=self.tokens.device)  # (T - 1,)
        begin = (self.start + self.size)[:, None]  # (n, 1)   the second copy's first position
        return (target > begin) & (target < begin + self.size[:, None])  # (n, T - 1)


def _check_repeat(repeat, length: int) -> tuple[int, int]:
    if (not isinstance(repeat, tuple) or len(repeat) != 2
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in repeat)
            or not 1 <= repeat[0] <= repeat[1] <= length // 2):
        raise ValueError(f"repeat must be a pair of ints (shortest, longest) with 1 <= shortest "
                         f"<= longest <= length // 2 = {length // 2}, got {repeat!r}")
    return repeat


def repeat_task(n: int, seed: int = 0, *, repeat: tuple[int, int] = REPEAT,
                length: int = LENGTH, vocab: int = VOCAB) -> Repeats:
    """n sequences of `length` random tokens (ids 0..vocab-1) in each of which a segment of
    random length (from `repeat`, both ends included) is repeated right after itself, the first
    copy starting at a random position (so the whole repeat fits). Reproducible from `seed`."""
    n, seed = check_int("n", n, minimum=1), check_int("seed", seed, minimum=0)
    length, vocab = check_int("length", length, minimum=2), check_int("vocab", vocab, minimum=2)
    _check_repeat(repeat, length)
    g = torch.Generator().manual_seed(seed_of(seed))
    tokens = torch.randint(0, vocab, (n, length), generator=g)  # (n, T)
    size = torch.randint(repeat[0], repeat[1] + 1, (n,), generator=g)  # (n,)
    room = length - 2 * size + 1  # (n,)   how many places the repeat can start at
    start = (torch.rand(n, generator=g, dtype=torch.float64) * room).long()  # (n,)
    pos = torch.arange(length)  # (T,)
    second = (pos >= (start + size)[:, None]) & (pos < (start + 2 * size)[:, None])  # (n, T)
    copied = tokens.gather(1, (pos - size[:, None]).clamp(min=0))  # (n, T)   token size earlier
    return Repeats(torch.where(second, copied, tokens), start, size)


def show(batch: Repeats, i: int) -> str:
    """Sequence i of a batch as text, each copy of its repeated segment in brackets."""
    if not isinstance(batch, Repeats):
        raise TypeError(f"batch must be a Repeats (from repeat_task), got {type(batch).__name__}")
    i = check_int("i", i, minimum=0, maximum=len(batch) - 1)
    words = [f"{t:2d}" for t in batch.tokens[i].tolist()]
    start, size = int(batch.start[i]), int(batch.size[i])
    for first in (start, start + size):  # the two copies
        words[first] = "[" + words[first]
        words[first + size - 1] += "]"
    return " ".join(words)


@torch.no_grad()
def evaluate(model: nn.Module, batch: Repeats) -> dict:
    """Mean loss (nats) on the repeated tokens and on the random ones, and by position:
    `by_position` (T - 1, 2) holds, for each target position, the mean loss of its repeated
    and of its random tokens (NaN where there are none)."""
    if not isinstance(batch, Repeats):
        raise TypeError(f"batch must be a Repeats (from repeat_task), got {type(batch).__name__}")
    with eval_mode(model):
        losses = token_losses(model, batch.tokens)  # (B, T - 1)
    rep = batch.repeated  # (B, T - 1)
    kinds = torch.stack([rep, ~rep], dim=-1).to(losses.dtype)  # (B, T - 1, 2)
    by_position = (losses[..., None] * kinds).sum(0) / kinds.sum(0)  # (T - 1, 2)   0/0: NaN
    return {"repeated": float(losses[rep].mean()), "random": float(losses[~rep].mean()),
            "by_position": by_position}



def evaluate_by_length(model: nn.Module, lengths=range(2, REPEAT[1] + 1)) -> list[dict]:
    """`evaluate` on N_TEST test sequences whose repeat is exactly n tokens long, for each n in
    `lengths`: how the copying fares on repeats shorter (or longer) than those it was trained
    on. A length of 1 has no token the copying can predict (the second copy's first token is
    never predictable), so lengths start at 2."""
    lengths = [check_int("each length", n, minimum=2, maximum=LENGTH // 2) for n in lengths]
    return [evaluate(model, repeat_task(N_TEST, seed=TEST_SEED, repeat=(n, n))) for n in lengths]

@dataclass
class Induction:
    """What `train_induction` returns: the trained model (eval mode), the recipe, and per
    training step the loss on all tokens (`losses`), on the repeated ones (`repeated`) and on
    the random ones (`random`), each taken on that step's training batch; `checkpoints` maps a
    step to a copy of the weights before that step (0, CHECKPOINT_EVERY, ..., and the end)."""

    model: AttentionOnly
    recipe: InductionRecipe
    losses: list[float]
    repeated: list[float]
    random: list[float]
    checkpoints: dict[int, dict] = field(repr=False)

    def at(self, step: int) -> AttentionOnly:
        """A copy of the model as it was before training step `step` (a checkpoint's step)."""
        if step not in self.checkpoints:
            raise ValueError(f"step must be one of the checkpoints {sorted(self.checkpoints)}, "
                             f"got {step!r}")
        model = copy.deepcopy(self.model)
        model.load_state_dict(self.checkpoints[step])
        return model


_CACHE: dict[tuple, Induction] = remember({})  # filled by trainings in parallel_map's children too


def train_induction(n_layers: int = 2, seed: int = 0, *, repeat: tuple[int, int] = REPEAT,
                    **overrides) -> Induction:
    """An `AttentionOnly` model with `n_layers` layers trained on `repeat_task` by INDUCTION
    (keyword overrides allowed), in float64, every step on new sequences. `seed` seeds the
    weights and the data (the caller's random state is left alone).

    The result is cached by the arguments: asking again returns the same object (the same
    model: do not train it further or change it in place).
    """
    n_layers = check_int("n_layers", n_layers, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    repeat = _check_repeat(repeat, LENGTH)
    r = INDUCTION.but(**overrides)
    key = (n_layers, seed_of(seed), repeat, r)  # the seed drawn with
    if key in _CACHE:
        return _CACHE[key]
    data = repeat_task(r.steps * r.batch_size, seed=seed + 1, repeat=repeat, length=LENGTH)
    repeated, random, checkpoints = [], [], {}

    def loss_fn(model, batch):
        tokens, rep = batch  # (B, T), (B, T - 1)   rep: the token is in the repeat
        if len(repeated) % CHECKPOINT_EVERY == 0:  # the weights before this step
            checkpoints[len(repeated)] = copy.deepcopy(model.state_dict())
        losses = token_losses(model, tokens)  # (B, T - 1)
        repeated.append(float(losses.detach()[rep].mean()))
        random.append(float(losses.detach()[~rep].mean()))
        return losses.mean()

    model, losses = train(r, lambda: AttentionOnly(VOCAB, LENGTH, r.d_model, r.n_heads, n_layers,
                                                   r.embed_std, dtype=DTYPE),
                          loss_fn, (data.tokens, data.repeated), seed=seed)
    checkpoints[r.steps] = copy.deepcopy(model.state_dict())
    result = Induction(model, r, losses, repeated, random, checkpoints)
    _CACHE[key] = result
    return result


def smooth(values, window: int = 25) -> torch.Tensor:
    """The mean of each `window` consecutive values (a trailing moving average), (len - window
    + 1,): a training curve with its step-to-step noise averaged out."""
    window = check_int("window", window, minimum=1)
    x = torch.as_tensor(values, dtype=torch.float64)
    return x.unfold(0, window, 1).mean(-1)


def drop_step(run: Induction, level: float = DROP_LEVEL, window: int = 25) -> int | None:
    """The training step at which the loss on repeated tokens, averaged over the last `window`
    steps, first falls below `level` nats (None if it never does): when the model starts to
    copy. The plateau before it sits near 3 nats, the end near 1."""
    if not isinstance(run, Induction):
        raise TypeError(f"run must be what train_induction returns, got {type(run).__name__}")
    below = (smooth(run.repeated, window) < level).nonzero()
    return None if len(below) == 0 else int(below[0]) + window - 1
