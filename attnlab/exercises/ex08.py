"""The exercises of notebook 08 (masks, decoders and generation), checked.

- `padding_and_causal` (implement): one bool mask for a padded batch in a decoder, True where
  query i may attend key j (key j real and j <= i), that broadcasts to the scores
  (B, H, T, T);
- `next_token_loss` (implement): the decoder's loss by teacher forcing, against
  `attnlab.core.generation.next_token_loss`;
- `unmasked_generation` (predict): the share of the sorted digits that the model trained
  without the mask gets right when it writes them itself, guessed before it is measured;
- `top_p_filter` (implement): nucleus filtering of logits, against
  `attnlab.core.generation.filter_logits`;
- `temperature_accuracy`, `temperature_diversity` (predict): what temperatures 0.1 and 10 do to
  the sorter's accuracy and to the number of different outputs per prompt;
- `decoder_block` (implement): the post-norm decoder block's forward (masked self-attention,
  cross-attention, feed-forward, each with its residual and LayerNorm), against
  `attnlab.core.blocks.DecoderBlock`;
- `pre_norm_block` (implement): the same block pre-norm (x + part(LayerNorm(x)), the block of
  GPT-2 and Llama), against `attnlab.core.blocks.DecoderBlock(norm="pre")`;
- `survivors` (predict, in "Going further"): which of notebook 05's position encodings still
  solve a decoder's task at twice the training length.

Each implement check's mistakes are its classic wrong answers, written as a student writes them.
"""
from __future__ import annotations

import torch
from torch import nn

from ..core.attention import causal_mask
from ..core.attention_args import broadcast
from ..core.blocks import DecoderBlock
from ..core.generation import filter_logits
from ..core.generation import next_token_loss as reference_loss
from ..core.models import DecoderOnly
from ..lessons.decoders import VOCAB, sort_task
from . import (
    Implement,
    Like,
    Predict,
    When,
    _kind,
    alike,
    exercise,
    prediction,
    tensor_problem,
)

# --- padding and causal, one mask ----------------------------------------------------------

HEADS = 3  # the scores' H in the check; no batch of the inputs has 1 or 3 rows


def _padding_and_causal(real: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool: True where query i may attend key j, i.e. key j is real and j <= i."""
    return real[:, None, None, :] & causal_mask(real.shape[1])  # (B, 1, T, T)


def _real_inputs(seed: int | None = None) -> list[tuple[torch.Tensor]]:
    """`real` (B, T) bool batches with padding on the right, on the left, on both sides and
    none, so that some real queries have padding keys in their past; B is never 1 or HEADS
    and T never B or HEADS, so that a (B, T, T) mask cannot broadcast by luck. A grader's
    `seed` adds a batch (B = 4, T = 7) of random padding on both sides, unseen by the student."""
    rows = ([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1]],                            # B = 2, T = 5
            [[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [0, 1, 1, 1, 0, 0]])
    batches = [torch.tensor(r, dtype=torch.bool) for r in rows]
    if seed is not None:
        g = torch.Generator().manual_seed(seed)
        left, right = torch.randint(0, 3, (2, 4), generator=g)  # (4,) each: pads per side
        position = torch.arange(7)  # (T,)
        batches.append((position >= left[:, None]) & (position < 7 - right[:, None]))  # (4, 7)
    return [(real,) for real in batches]


def _scores(real: torch.Tensor) -> tuple[int, int, int, int]:
    B, T = real.shape
    return (B, HEADS, T, T)


def _mask_problem(got, expected: torch.Tensor, real: torch.Tensor) -> str | None:
    """The comparison of masks: bool, broadcasting to the scores, equal after it."""
    scores = _scores(real)
    if not isinstance(got, torch.Tensor):
        return f"your mask should be a torch.Tensor of shape {tuple(expected.shape)}, got " \
               f"{_kind(got)}"
    if got.dtype != torch.bool:
        return f"your mask has dtype {got.dtype}, expected torch.bool (True: may attend)"
    if broadcast(got.shape, scores) != scores:
        return (f"your mask of shape {tuple(got.shape)} does not broadcast to (B, H, T, T) = "
                f"{scores}, the scores' shape: shapes line up from the right, so a mask's axes "
                "must end in (batch, heads, queries, keys), with size 1 where it does not vary")
    got = got.expand(scores)
    if torch.equal(got, expected.expand(scores)):
        return None
    return f"your mask differs from the reference in {int((got != expected).sum())} of " \
           f"{got.numel()} entries (after broadcasting to {scores})"


def _keys(r):
    return r[:, None, None, :]  # (B, 1, 1, T)


def _causal(r):
    return causal_mask(r.shape[1])  # (T, T)


padding_and_causal = Implement(
    "padding_and_causal", _padding_and_causal, _real_inputs, compare=_mask_problem,
    view=lambda mask, real: mask.expand(_scores(real)),
    success="matches the reference on 2 padded batches, after broadcasting to (B, H, T, T)",
    mistakes=[
        Like(lambda r: r[:, None, :, None] & _causal(r),
             "the padding mask is on the query side (rows): it must hide padding keys "
             "(columns), whichever query looks"),
        Like(lambda r: _keys(r) & _causal(r).T,
             "the causal part lets each query see the future, not the past (it is transposed): "
             "rows are queries, columns keys"),
        Like(lambda r: _keys(r) | _causal(r),
             "the two masks are combined with |: a key may be attended only when it is real and "
             "in the past, both at once"),
        Like(lambda r: ~(_keys(r) & _causal(r)),
             "your mask is True where attention is forbidden; this one is True where query i "
             "may attend key j"),
        Like(lambda r: r[:, None, :, None] & _keys(r) & _causal(r),
             "your mask also hides the padding queries' rows: only padding keys (columns) are "
             "to be hidden"),
        Like(lambda r: _causal(r), "only the causal part: padding keys are still visible"),
        Like(lambda r: _keys(r), "only the padding part: every query still sees the future"),
    ],
    hint=("two conditions must both hold for query i and key j, one about the key alone and "
          "one about the pair (i, j); give each the axes it lives on.",
          "make the padding part a (B, 1, 1, T) tensor (batch, heads, queries, keys), the "
          "causal part a (T, T) one, and combine them so that both must be True; "
          "broadcasting does the rest."))


# --- the decoder's loss, by teacher forcing ------------------------------------------------------

def _loss_inputs(seed: int = 7) -> list[tuple[DecoderOnly, torch.Tensor]]:
    """(model, seqs): an untrained causal decoder (float64, no gradients needed) and two
    batches of sorting sequences (B, 14), drawn from `seed` (a grader's, else the notebook's)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DecoderOnly(VOCAB, 16, 2, 32, max_len=16, dtype=torch.float64).eval()
    model.requires_grad_(False)
    return [(model, sort_task(n, seed=10 * seed + n)) for n in (3, 8)]


def _ce(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                       reduction=reduction)


COPY = ("the targets are not shifted: each position is scored on the token it already reads as "
        "input. A model that sees its input learns to copy it and drives this loss to about 0 "
        "without learning anything (the leak of section 4): the target of position t is token "
        "t + 1")
OTHER_WAY = ("logits and targets are misaligned by one the other way: position t is scored on "
             "token t - 1 (or t + 2); the target of position t is token t + 1")


next_token_loss = Implement(
    "next_token_loss", reference_loss, _loss_inputs, what="your loss", atol=1e-12, rtol=1e-9,
    no_grad=True,
    success="your loss is attnlab's next_token_loss, on two batches of sequences",
    mistakes=[
        When(lambda got, *_: isinstance(got, float),
             "your loss is a Python number (.item()?): training calls loss.backward() on it, so "
             "return the tensor", example=lambda m, s: reference_loss(m, s).item()),
        Like(lambda m, s: _ce(m(s[:, :-1]), s[:, :-1]), COPY),
        Like(lambda m, s: _ce(m(s), s), COPY),
        Like(lambda m, s: _ce(m(s[:, 1:]), s[:, :-1]), OTHER_WAY),
        Like(lambda m, s: _ce(m(s)[:, 1:], s[:, :-1]), OTHER_WAY),
        Like(lambda m, s: _ce(m(s[:, :-2]), s[:, 2:]), OTHER_WAY),
        Like(lambda m, s: _ce(m(s[:, :-1]), s[:, 1:], "sum"),
             "your loss is the sum over every position of every sequence; the loss is their mean "
             "(fit's learning rate is set for a mean)"),
        Like(lambda m, s: _ce(m(s[:, :-1]), s[:, 1:], "sum") / len(s),
             "your loss sums over the positions of each sequence and averages over the "
             "sequences; average over every position of every sequence"),
        Like(lambda m, s: _ce(m(s[:, :-1]), s[:, 1:], "sum") / (s.shape[1] - 1),
             "your loss sums over the sequences; average over every position of every sequence"),
        Like(lambda m, s: _ce(m(s[:, :-1])[:, -1:], s[:, -1:]),
             "your loss scores only the last position; teacher forcing scores every position at "
             "once"),
        When(lambda got, expected, *_: alike(got, expected) and bool(torch.isfinite(got)),
             lambda got, expected, *_: f"your loss is {float(got):.4g}, the "
                                                   f"reference {float(expected):.4g}"),
    ],
    hint=("the model reads the sequence without its last token; each of its positions is "
          "scored on the token that follows it.",
          "inputs seqs[:, :-1], targets seqs[:, 1:]; cross_entropy wants (N, V) logits "
          "and (N,) targets, so flatten the batch and position axes together (or move "
          "the vocabulary axis to dimension 1)."))


# --- the leak, predicted ----------------------------------------------------------------------

unmasked_generation = Predict(
    "predict the unmasked model's generated accuracy", tolerance=0.15, example=0.42,
    lesson="Trained with the answer in view, it learned to copy the next token, not to sort; "
           "writing on its own, there is no next token to copy.")


# --- top-p (nucleus) filtering -------------------------------------------------------------------

def _logit_inputs(seed: int = 11) -> list[tuple[torch.Tensor, float]]:
    """(logits (B, V) float64, p): spread-out rows, and rows where one token alone reaches p,
    drawn from `seed` (a grader's, else the notebook's)."""
    g = torch.Generator().manual_seed(seed)
    spread = torch.randn(4, 12, generator=g, dtype=torch.float64) * 1.5  # (4, 12)
    peaked = torch.randn(3, 7, generator=g, dtype=torch.float64)  # (3, 7)
    peaked[:, 2] += 6.0  # token 2 alone holds more than 0.9
    return [(spread, 0.5), (spread, 0.9), (peaked, 0.8)]


def _nucleus(x: torch.Tensor, p: float, *, probs=True, descending=True, reach=True,
             back=True) -> torch.Tensor:
    """The nucleus as a student may write it: softmax (`probs`), sort, drop a token once the
    total before it reaches p (`reach`; else once the total with it passes p), scatter the
    flags `back` to token order (else the logits stay sorted)."""
    values, order = x.sort(dim=-1, descending=descending)  # (B, V)
    share = torch.softmax(values, dim=-1) if probs else values
    total = share.cumsum(dim=-1)  # (B, V)
    drop = (total - share >= p) if reach else (total > p)
    if not back:
        return values.masked_fill(drop, float("-inf"))
    return x.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))


def _logits_problem(got, expected: torch.Tensor, x, p) -> str | None:
    """The comparison of filtered logits, whose dropped entries are -inf on both sides."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape \
            or got.dtype != expected.dtype:
        return tensor_problem(got, expected, name="your logits tensor")
    if torch.equal(torch.isinf(got), torch.isinf(expected)) \
            and torch.allclose(got, expected, rtol=1e-12, atol=0.0):
        return None
    return "your kept logits differ from the logits given"


def _tokens_kept(got, expected, *_) -> str:
    kept, should = int(torch.isfinite(got).sum()), int(torch.isfinite(expected).sum())
    return f"your function keeps {kept} tokens where the nucleus holds {should}" \
        if kept != should else "your kept logits differ from the logits given"


top_p_filter = Implement(
    "top_p_filter", lambda logits, p: filter_logits(logits, top_p=p), _logit_inputs,
    refuse=(filter_logits,), compare=_logits_problem, atol=0.0, rtol=1e-12,
    changed="your function changed the logits it was given (in place): work on a copy "
            "(masked_fill returns a new tensor)",
    success="matches attnlab's filter_logits(top_p=p) on 3 batches of logits",
    mistakes=[
        When(lambda got, expected, *_: alike(got, expected) and bool(torch.isnan(got).any()),
             "your logits contain NaN",
             example=lambda x, p: x * float("nan")),
        Like(lambda x, p: x, "your function returns the logits unchanged: every token is kept"),
        Like(lambda x, p: _nucleus(x, p, reach=False),
             "your nucleus stops before the token that crosses p: it is the smallest set whose "
             "probability REACHES p, so it includes that token"),
        Like(lambda x, p: _nucleus(x, p, back=False),
             "your logits come back in sorted order: each must stay at its token's place "
             "(scatter back with the sort's indices)"),
        Like(lambda x, p: torch.where(torch.isinf(_nucleus(x, p)), 0.0, x),
             "a dropped token gets logit 0, and e^0 is not 0: it can still be drawn; set it to "
             "-inf"),
        Like(lambda x, p: _nucleus(x, p, probs=False),
             "your running sum adds up logits; the nucleus adds up probabilities (softmax "
             "first)"),
        Like(lambda x, p: _nucleus(x, p, descending=False),
             "your nucleus starts from the least likely tokens: sort in descending order"),
        When(lambda got, expected, *_: alike(got, expected)
             and bool(((got >= 0) & (got <= 1)).all()),
             "your result looks like probabilities; return the logits, dropped ones at -inf",
             example=lambda x, p: torch.softmax(_nucleus(x, p), -1)),
        When(lambda got, expected, *_: alike(got, expected), _tokens_kept),
    ],
    hint=("sort each row's probabilities from the most likely down and keep tokens until "
          "the running total reaches p, the one that reaches it included.",
          "softmax, then sort descending (keep the indices); the probability of the tokens "
          "before each one is cumsum - probs; drop a token when that is already >= p; put "
          "the drop flags back in token order with scatter and masked_fill the logits."))


# --- temperature: accuracy and diversity, predicted -------------------------------------------

temperature_accuracy = Predict(
    "accuracy at temperatures 0.1 and 10", tolerance=0.15, example=[1.0, 0.16],
    lesson="Dividing the logits by 0.1 makes the likeliest token all but certain: sampling "
           "becomes greedy. Dividing by 10 flattens them towards 1/12 each: the digits are "
           "drawn almost at random.")

temperature_diversity = Predict(
    "different outputs at temperatures 0.1 and 10", tolerance=2.0, digits=2,
    example=[1.0, 10.0],
    lesson="At 0.1 almost every sample is the greedy output; at 10 almost every token is a "
           "fresh draw, so no two samples of six digits agree.")


# --- the decoder block, written out -----------------------------------------------------------

def _block_inputs(norm: str = "post", seed: int = 5) -> list[tuple]:
    """(block, x, context, mask): a block with cross-attention (context S != T, so that a
    swapped query and context shows in the shape) and one without, float64, no gradients,
    drawn from `seed` (a grader's, else the notebook's)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        blocks = [DecoderBlock(16, 2, 32, cross=cross, norm=norm).double().eval()
                  for cross in (True, False)]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, 16, generator=g, dtype=torch.float64)  # (B, T, d_model)
    context = torch.randn(2, 4, 16, generator=g, dtype=torch.float64)  # (B, S, d_model)
    real = torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=torch.bool)  # (B, T)
    padded = real[:, None, None, :] & causal_mask(5)  # (B, 1, T, T)
    for b in blocks:
        b.requires_grad_(False)
    return [(blocks[0], x, context, causal_mask(5)), (blocks[0], x, context, padded),
            (blocks[1], x, None, causal_mask(5))]


def _post_norm(block, x, context, mask, *, residual=True, cross=True, cross_first=False):
    """The block written out, as a student may: each part LayerNorm(x + part(x))."""
    def part(h, out, norm):
        return norm(h + out if residual else out)

    def self_part(h):
        return part(h, block.self_attn(h, mask)[0], block.norm1)

    def cross_part(h):
        if context is None or not cross:
            return h
        return part(h, block.cross_attn(h, context=context)[0], block.norm2)
    h = self_part(cross_part(x)) if cross_first else cross_part(self_part(x))
    return part(h, block.ff(h), block.norm3)


def _pre_norm(block, x, context, mask, *, residual=True, last_norm=False):
    """The pre-norm block written out, as a student may: each part x + part(LayerNorm(x))."""
    def part(h, out):
        return h + out if residual else out
    x = part(x, block.self_attn(block.norm1(x), mask)[0])
    if context is not None:
        x = part(x, block.cross_attn(block.norm2(x), context=context)[0])
    x = part(x, block.ff(block.norm3(x)))
    return block.norm3(x) if last_norm else x


#: the first mistake of both block checks: the tuple of a MultiHeadAttention call handed back
_RETURNS_A_TUPLE = When(
    lambda got, *_: isinstance(got, tuple),
    lambda got, *_: f"your function returns {_kind(got)}; return only the new x (B, T, d_model): "
                    "MultiHeadAttention returns (output, weights), so unpack it first",
    example=lambda b, x, c, m: b.self_attn(x, m))

decoder_block = Implement(
    "decoder_block", lambda block, x, context, mask: block(x, context, mask=mask),
    _block_inputs, what="your x", atol=1e-12, rtol=0.0, no_grad=True,
    refuse=(DecoderBlock.forward,),
    success="your block is attnlab's DecoderBlock, with and without cross-attention",
    mistakes=[
        _RETURNS_A_TUPLE,
        When(lambda got, expected, block, x, context, mask: context is not None
             and tuple(got.shape) == tuple(context.shape) != tuple(x.shape),
             "your result has the context's shape (B, S, d_model): in cross-attention the "
             "queries come from x (the target), the keys and values from context",
             example=lambda b, x, c, m: x if c is None else b.cross_attn(c, context=x)[0]),
        Like(lambda b, x, c, m: _post_norm(b, x, c, m, residual=False),
             "the residual connections are missing: each part's output is added to its input "
             "before the LayerNorm"),
        Like(_pre_norm, "this is pre-norm (x + part(LayerNorm(x))); this block is post-norm: "
                        "LayerNorm(x + part(x))"),
        Like(lambda b, x, c, m: _post_norm(b, x, c, None),
             "your self-attention has no mask: every position reads the future (pass the mask "
             "to self_attn)"),
        Like(lambda b, x, c, m: _post_norm(b, x, c, m, cross=False),
             "the cross-attention is missing: with a context, the middle part reads it (queries "
             "from x, keys and values from context)"),
        Like(lambda b, x, c, m: _post_norm(b, x, c, m, cross_first=True),
             "cross-attention comes before self-attention here: the block first reads its own "
             "past, then the context"),
    ],
    hint=("three parts in a row, each LayerNorm(x + part(x)): masked self-attention, "
          "cross-attention (only when there is a context), feed-forward.",
          "block.self_attn(x, mask) and block.cross_attn(x, context=context) return "
          "(output, weights); the LayerNorms are block.norm1, norm2, norm3 in that "
          "order, the feed-forward block.ff."))

pre_norm_block = Implement(
    "pre_norm_block", lambda block, x, context, mask: block(x, context, mask=mask),
    lambda seed=5: _block_inputs("pre", seed), what="your x", atol=1e-12, rtol=0.0, no_grad=True,
    refuse=(DecoderBlock.forward,),
    success="your block is attnlab's pre-norm DecoderBlock, with and without cross-attention",
    mistakes=[
        _RETURNS_A_TUPLE,
        Like(_post_norm, "this is post-norm, LayerNorm(x + part(x)); pre-norm normalises only "
                         "what each part reads: x + part(LayerNorm(x))"),
        Like(lambda b, x, c, m: _pre_norm(b, x, c, m, residual=False),
             "the residual connections are missing: each part's output is added to the x it "
             "read from, x + part(LayerNorm(x))"),
        Like(lambda b, x, c, m: _pre_norm(b, x, c, m, last_norm=True),
             "your last line normalises the sum: in pre-norm nothing normalises x itself, each "
             "part only adds to it"),
        Like(lambda b, x, c, m: _pre_norm(b, x, None, m) if c is not None else x,
             "the cross-attention is missing: with a context, the middle part reads it (queries "
             "from LayerNorm2(x), keys and values from context)"),
    ],
    hint=("the same three parts in the same order, but each reads a normalised copy: "
          "x = x + part(LayerNorm(x)).",
          "x = x + block.self_attn(block.norm1(x), mask)[0]; with a context, "
          "x = x + block.cross_attn(block.norm2(x), context=context)[0]; then "
          "x + block.ff(block.norm3(x))."))


# --- Going further: past the training length ----------------------------------------------------

ENCODINGS = ("learned", "sinusoidal", "rotary", "none")  # notebook 05's four

SURVIVORS_LESSON = (
    "A rotary score depends only on the distance m - n, and 'two back' is one distance at every "
    "length; the sinusoidal vectors past the training length never occurred in training; a "
    "learned table has no row for them at all.")


def _names(guess) -> tuple[set | None, str | None]:
    """(the set of encoding names in a guess, None) or (None, what is wrong with it)."""
    if isinstance(guess, str) and guess in ENCODINGS:
        return {guess}, None  # one name alone is a set of one
    if isinstance(guess, str) or not isinstance(guess, (set, frozenset, list, tuple)):
        return None, f"expected a set of encoding names, got {_kind(guess)}"
    unknown = [n for n in guess if not isinstance(n, str) or n not in ENCODINGS]
    if unknown:
        return None, f"{unknown[0]!r} is not one of the encodings {ENCODINGS}"
    return set(guess), None


@exercise("predict", args=({"rotary"},))
def survivors(guess, measured):
    """Predict: the set of encodings whose decoders still solve the task (a test accuracy of at
    least 0.9 in every run) at the positions past the training length."""
    measured = set(measured)

    def read(guess):
        names, problem = _names(guess)
        return (None, problem) if problem else (frozenset(names), None)

    return prediction(
        guess, name="which encodings survive twice the length", read=read,
        describe=lambda names: f"you predicted {{{', '.join(sorted(names))}}}; measured "
                               f"{{{', '.join(sorted(measured))}}}",
        lesson=SURVIVORS_LESSON,
        todo="no prediction yet; write your guess in the cell above before running.",
        write=f"Write a set of names from {ENCODINGS}, such as {{'learned', 'none'}}, or set() "
              "for none of them.")
