"""The exercises of notebook 07 (masks, decoders and generation), checked.

- `padding_and_causal` (implement): one bool mask for a padded batch in a decoder, True where
  query i may attend key j (key j real and j <= i), that broadcasts to the scores
  (B, H, T, T); a mask on the wrong side, the future instead of the past, `|` for `&` and a
  shape that lines the batch up with the heads are named in the ✗ line;
- `next_token_loss` (implement): the decoder's loss by teacher forcing, against
  `attnlab.generation.next_token_loss`; targets not shifted, shifted the wrong way, a sum where
  a mean belongs and `.item()` are named;
- `unmasked_generation` (predict): the share of the sorted digits that the model trained
  without the mask gets right when it writes them itself, guessed before it is measured;
- `top_p_filter` (implement): nucleus filtering of logits, against
  `attnlab.generation.filter_logits`; dropping the token that crosses p, leaving the logits in
  sorted order, 0 instead of -inf and cumulating logits instead of probabilities are named;
- `temperature_accuracy`, `temperature_diversity` (predict): what temperatures 0.1 and 10 do to
  the sorter's accuracy and to the number of different outputs per prompt;
- `decoder_block` (implement): the post-norm decoder block's forward (masked self-attention,
  cross-attention, feed-forward, each with its residual and LayerNorm), against
  `attnlab.blocks.DecoderBlock`; a missing residual, pre-norm, a missing mask and
  cross-attention that reads the wrong sequence are named;
- `survivors` (predict, in "Going further"): which of notebook 04's position encodings still
  solve a decoder's task at twice the training length.

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..attention import causal_mask as reference_mask
from ..attention_args import broadcast
from ..blocks import DecoderBlock
from ..generation import VOCAB, filter_logits, sort_task
from ..generation import next_token_loss as reference_loss
from ..models import DecoderOnly
from . import (
    _kind,
    check_function,
    check_prediction,
    exercise,
    prediction,
    tensor_problem,
)

# --- padding and causal, one mask ----------------------------------------------------------

HEADS = 3  # the scores' H in the check; no batch of the inputs has 1 or 3 rows


def _padding_and_causal(real: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool: True where query i may attend key j, i.e. key j is real and j <= i."""
    return real[:, None, None, :] & reference_mask(real.shape[1])  # (B, 1, T, T)


def _real_inputs() -> list[tuple[torch.Tensor]]:
    """`real` (B, T) bool batches with padding on the right, on the left, on both sides and
    none, so that some real queries have padding keys in their past; B is never 1 or HEADS
    and T never B or HEADS, so that a (B, T, T) mask cannot broadcast by luck."""
    rows = ([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1]],                            # B = 2, T = 5
            [[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [0, 1, 1, 1, 0, 0]])
    return [(torch.tensor(r, dtype=torch.bool),) for r in rows]


def _both_problem(got, expected: torch.Tensor, real: torch.Tensor) -> str | None:
    """What is wrong with `got` as the combined mask for `real`, naming the classic mistakes."""
    B, T = real.shape
    scores = (B, HEADS, T, T)
    if not isinstance(got, torch.Tensor):
        return tensor_problem(got, expected, name="your mask")
    if got.dtype != torch.bool:
        return f"your mask has dtype {got.dtype}, expected torch.bool (True: may attend)"
    if broadcast(got.shape, scores) != scores:
        return (f"your mask of shape {tuple(got.shape)} does not broadcast to (B, H, T, T) = "
                f"{scores}, the scores' shape: shapes line up from the right, so a mask's axes "
                "must end in (batch, heads, queries, keys), with size 1 where it does not vary")
    got = got.expand(scores)
    causal = reference_mask(T)                             # (T, T)
    keys, queries = real[:, None, None, :], real[:, None, :, None]  # (B, 1, 1, T), (B, 1, T, 1)
    mistakes = (
        (queries & causal, "the padding mask is on the query side (rows): it must hide padding "
                           "keys (columns), whichever query looks"),
        (keys & causal.T, "the causal part lets each query see the future, not the past (it is "
                          "transposed): rows are queries, columns keys"),
        (keys | causal, "the two masks are combined with |: a key may be attended only when it "
                        "is real and in the past, both at once"),
        (~(keys & causal), "your mask is True where attention is forbidden; this one is True "
                           "where query i may attend key j"),
        (queries & keys & causal, "your mask also hides the padding queries' rows: only padding "
                                  "keys (columns) are to be hidden"),
        (causal.expand(B, 1, T, T), "only the causal part: padding keys are still visible"),
        (keys.expand(B, 1, T, T), "only the padding part: every query still sees the future"),
    )
    if torch.equal(got, expected.expand(scores)):
        return None
    for wrong, problem in mistakes:
        if torch.equal(got, wrong.expand(scores)):
            return problem
    return f"your mask differs from the reference in {int((got != expected).sum())} of " \
           f"{got.numel()} entries (after broadcasting to {scores})"


@exercise("implement")
def padding_and_causal(fn):
    """Your `fn(real)` -> a bool mask that broadcasts to the scores (B, H, T, T), True where
    query i may attend key j: key j is real (`real` (B, T) bool) and j <= i.

    Returns `fn` when it is right on every batch, else the reference, which returns
    (B, 1, T, T).
    """
    inputs = _real_inputs()
    return check_function(
        fn, _padding_and_causal, inputs, name="padding_and_causal", compare=_both_problem,
        success=f"matches the reference on {len(inputs)} padded batches, after broadcasting to "
                "(B, H, T, T)",
        hint=("two conditions must both hold for query i and key j, one about the key alone and "
              "one about the pair (i, j); give each the axes it lives on.",
              "make the padding part a (B, 1, 1, T) tensor (batch, heads, queries, keys), the "
              "causal part a (T, T) one, and combine them so that both must be True; "
              "broadcasting does the rest."))


# --- the decoder's loss, by teacher forcing ------------------------------------------------------

def _loss_inputs() -> list[tuple[DecoderOnly, torch.Tensor]]:
    """(model, seqs): an untrained causal decoder (float64, no gradients needed) and two
    batches of sorting sequences (B, 14)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = DecoderOnly(VOCAB, 16, 2, 32, max_len=16, dtype=torch.float64).eval()
    model.requires_grad_(False)
    return [(model, sort_task(n, seed=70 + n)) for n in (3, 8)]


def _ce(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                       reduction=reduction)


def _loss_mistakes(model: DecoderOnly, seqs: torch.Tensor) -> list[tuple[torch.Tensor, str]]:
    """The classic wrong losses for (model, seqs), each with what to say about it."""
    B, T = seqs.shape
    logits = model(seqs[:, :-1])  # (B, T - 1, V)   what the reference reads
    right = _ce(logits, seqs[:, 1:])
    copy = ("the targets are not shifted: each position is scored on the token it already reads "
            "as input. A model that sees its input learns to copy it and drives this loss to "
            "about 0 without learning anything (the leak of section 4): the target of position "
            "t is token t + 1")
    other_way = ("logits and targets are misaligned by one the other way: position t is scored "
                 "on token t - 1 (or t + 2); the target of position t is token t + 1")
    return [
        (_ce(logits, seqs[:, :-1]), copy),
        (_ce(model(seqs), seqs), copy),
        (_ce(model(seqs[:, 1:]), seqs[:, :-1]), other_way),
        (_ce(model(seqs)[:, 1:], seqs[:, :-1]), other_way),
        (_ce(model(seqs[:, :-2]), seqs[:, 2:]), other_way),
        (right * B * (T - 1), "your loss is the sum over every position of every sequence; "
                              "the loss is their mean (fit's learning rate is set for a mean)"),
        (right * (T - 1), "your loss sums over the positions of each sequence and averages over "
                          "the sequences; average over every position of every sequence"),
        (right * B, "your loss sums over the sequences; average over every position of every "
                    "sequence"),
        (_ce(logits[:, -1:], seqs[:, -1:]), "your loss scores only the last position; teacher "
                                            "forcing scores every position at once"),
    ]


def _loss_problem(got, expected: torch.Tensor, model: DecoderOnly,
                  seqs: torch.Tensor) -> str | None:
    if isinstance(got, float):
        return ("your loss is a Python number (.item()?): training calls loss.backward() on "
                "it, so return the tensor")
    problem = tensor_problem(got, expected, name="your loss", atol=1e-10, rtol=1e-9)
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != expected.shape \
            or got.dtype != expected.dtype or not bool(torch.isfinite(got)):
        return problem
    for wrong, mistake in _loss_mistakes(model, seqs):
        if math.isclose(float(got), float(wrong), rel_tol=1e-9, abs_tol=1e-12):
            return mistake
    return f"your loss is {float(got):.4g}, the reference {float(expected):.4g}"


@exercise("implement")
def next_token_loss(fn):
    """Your `fn(model, seqs)` -> the mean next-token cross-entropy by teacher forcing (a scalar
    tensor), against `attnlab.generation.next_token_loss` on an untrained decoder.

    Returns `fn` when it is right, else the reference.
    """
    inputs = _loss_inputs()
    with torch.no_grad():
        return check_function(
            fn, reference_loss, inputs, name="next_token_loss", compare=_loss_problem,
            success="your loss is attnlab's next_token_loss, on two batches of sequences",
            hint=("the model reads the sequence without its last token; each of its positions is "
                  "scored on the token that follows it.",
                  "inputs seqs[:, :-1], targets seqs[:, 1:]; cross_entropy wants (N, V) logits "
                  "and (N,) targets, so flatten the batch and position axes together (or move "
                  "the vocabulary axis to dimension 1)."))


# --- the leak, predicted ----------------------------------------------------------------------

@exercise("predict", args=(0.42,))
def unmasked_generation(guess, measured):
    """Your guess for the unmasked model's generated accuracy against the measured one (±0.15)."""
    return check_prediction(
        guess, measured, name="predict the unmasked model's generated accuracy", tolerance=0.15,
        lesson="Trained with the answer in view, it learned to copy the next token, not to sort; "
               "writing on its own, there is no next token to copy.")


# --- top-p (nucleus) filtering -------------------------------------------------------------------

def _top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    return filter_logits(logits, top_p=p)  # (B, V)


def _logit_inputs() -> list[tuple[torch.Tensor, float]]:
    """(logits (B, V) float64, p): spread-out rows, and rows where one token alone reaches p."""
    g = torch.Generator().manual_seed(11)
    spread = torch.randn(4, 12, generator=g, dtype=torch.float64) * 1.5  # (4, 12)
    peaked = torch.randn(3, 7, generator=g, dtype=torch.float64)  # (3, 7)
    peaked[:, 2] += 6.0  # token 2 alone holds more than 0.9
    return [(spread, 0.5), (spread, 0.9), (peaked, 0.8)]


def _sorted_filter(logits: torch.Tensor, p: float, by_logits: bool = False,
                   descending: bool = True, reach: bool = True) -> torch.Tensor:
    """Variants of the nucleus, for naming mistakes: the logits in sorted order with the rest
    at -inf; cumulating `by_logits`; sorted ascending; keeping tokens only while the running
    sum stays below p (`reach=False`)."""
    values, order = logits.sort(dim=-1, descending=descending)  # (B, V)
    probs = values if by_logits else torch.softmax(values, dim=-1)
    total = probs.cumsum(dim=-1)  # (B, V)
    drop = (total - probs >= p) if reach else (total > p)
    return values.masked_fill(drop, float("-inf")), order, drop


def _top_p_mistakes(logits: torch.Tensor, p: float) -> list[tuple[torch.Tensor, str]]:
    def back(variant):  # the variant's sorted result back in token order
        values, order, drop = variant
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    right = filter_logits(logits, top_p=p)
    return [
        (back(_sorted_filter(logits, p, reach=False)),
         "your nucleus stops before the token that crosses p: it is the smallest set whose "
         "probability REACHES p, so it includes that token"),
        (_sorted_filter(logits, p)[0], "your logits come back in sorted order: each must stay at "
                                       "its token's place (scatter back with the sort's indices)"),
        (torch.where(torch.isinf(right), 0.0, right),
         "a dropped token gets logit 0, and e^0 is not 0: it can still be drawn; set it to -inf"),
        (back(_sorted_filter(logits, p, by_logits=True)),
         "your running sum adds up logits; the nucleus adds up probabilities (softmax first)"),
        (back(_sorted_filter(logits, p, descending=False)),
         "your nucleus starts from the least likely tokens: sort in descending order"),
    ]


def _top_p_problem(originals: dict):
    def compare(got, expected, logits, p) -> str | None:
        original = originals[id(logits)]
        if not torch.equal(logits, original):
            return ("your function changed the logits it was given (in place): work on a copy "
                    "(masked_fill returns a new tensor)")
        expected = filter_logits(original, top_p=p)
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape \
                or got.dtype != expected.dtype:
            return tensor_problem(got, expected, name="your logits")
        if torch.isnan(got).any():
            return "your logits contain NaN"
        if torch.equal(torch.isinf(got), torch.isinf(expected)) \
                and torch.allclose(got, expected, rtol=1e-12, atol=0.0):
            return None
        if torch.equal(got, original):
            return "your function returns the logits unchanged: every token is kept"
        for wrong, mistake in _top_p_mistakes(original, p):
            if torch.equal(got, wrong):
                return mistake
        if ((got >= 0) & (got <= 1)).all():
            return "your result looks like probabilities; return the logits, dropped ones at -inf"
        kept, should = int(torch.isfinite(got).sum()), int(torch.isfinite(expected).sum())
        return f"your function keeps {kept} tokens where the nucleus holds {should}" \
            if kept != should else "your kept logits differ from the logits given"
    return compare


@exercise("implement")
def top_p_filter(fn):
    """Your `fn(logits, p)` -> the logits (B, V) with every token outside the nucleus at -inf,
    against `attnlab.generation.filter_logits(logits, top_p=p)`.

    Returns `fn` when it is right on every input, else the reference.
    """
    inputs = _logit_inputs()
    originals = {id(logits): logits.clone() for logits, _ in inputs}
    return check_function(
        fn, _top_p, inputs, name="top_p_filter",
        compare=_top_p_problem(originals),
        success=f"matches attnlab's filter_logits(top_p=p) on {len(inputs)} batches of logits",
        hint=("sort each row's probabilities from the most likely down and keep tokens until "
              "the running total reaches p, the one that reaches it included.",
              "softmax, then sort descending (keep the indices); the probability of the tokens "
              "before each one is cumsum - probs; drop a token when that is already >= p; put "
              "the drop flags back in token order with scatter and masked_fill the logits."))


# --- temperature: accuracy and diversity, predicted -------------------------------------------

@exercise("predict", args=([1.0, 0.16],))
def temperature_accuracy(guess, measured):
    """Your guesses [at temperature 0.1, at 10] for the share of sorted digits the sampled
    sorter gets right, against the measured ones (±0.15 each)."""
    return check_prediction(
        guess, measured, name="accuracy at temperatures 0.1 and 10", tolerance=0.15,
        lesson="Dividing the logits by 0.1 makes the likeliest token all but certain: sampling "
               "becomes greedy. Dividing by 10 flattens them towards 1/12 each: the digits are "
               "drawn almost at random.")


@exercise("predict", args=([1.0, 10.0],))
def temperature_diversity(guess, measured):
    """Your guesses [at temperature 0.1, at 10] for the number of different outputs among 10
    samples of one prompt, against the measured means (±2 each)."""
    return check_prediction(
        guess, measured, name="different outputs at temperatures 0.1 and 10", tolerance=2.0,
        digits=2,
        lesson="At 0.1 almost every sample is the greedy output; at 10 almost every token is a "
               "fresh draw, so no two samples of six digits agree.")


# --- the decoder block, written out -----------------------------------------------------------

def _block_inputs() -> list[tuple]:
    """(block, x, context, mask): a block with cross-attention (context S != T, so that a
    swapped query and context shows in the shape) and one without, float64, no gradients."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        blocks = [DecoderBlock(16, 2, 32, cross=cross).double().eval() for cross in (True, False)]
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 5, 16, generator=g, dtype=torch.float64)  # (B, T, d_model)
    context = torch.randn(2, 4, 16, generator=g, dtype=torch.float64)  # (B, S, d_model)
    real = torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=torch.bool)  # (B, T)
    padded = real[:, None, None, :] & reference_mask(5)  # (B, 1, T, T)
    for b in blocks:
        b.requires_grad_(False)
    return [(blocks[0], x, context, reference_mask(5)), (blocks[0], x, context, padded),
            (blocks[1], x, None, reference_mask(5))]


def _decoder_block(block: DecoderBlock, x, context, mask) -> torch.Tensor:
    return block(x, context, mask=mask)[0]  # (B, T, d_model)


def _block_mistakes(block: DecoderBlock, x, context, mask) -> list[tuple[torch.Tensor, str]]:
    def post(self_mask=mask, residual=True, cross_first=False, cross=True):
        def part(h, out, norm):
            return norm(h + out if residual else out)

        def self_part(h):
            return part(h, block.self_attn(h, self_mask)[0], block.norm1)

        def cross_part(h):
            if context is None or not cross:
                return h
            return part(h, block.cross_attn(h, context=context)[0], block.norm2)
        h = cross_part(self_part(x)) if not cross_first else self_part(cross_part(x))
        return part(h, block.ff(h), block.norm3)

    pre = x + block.self_attn(block.norm1(x), mask)[0]
    if context is not None:
        pre = pre + block.cross_attn(block.norm2(pre), context=context)[0]
    pre = pre + block.ff(block.norm3(pre))
    mistakes = [
        (post(residual=False), "the residual connections are missing: each part's output is "
                               "added to its input before the LayerNorm"),
        (pre, "this is pre-norm (x + part(LayerNorm(x))); this block is post-norm: "
              "LayerNorm(x + part(x))"),
        (post(self_mask=None), "your self-attention has no mask: every position reads the "
                               "future (pass the mask to self_attn)"),
    ]
    if context is not None:
        mistakes += [
            (post(cross=False), "the cross-attention is missing: with a context, the middle "
                                "part reads it (queries from x, keys and values from context)"),
            (post(cross_first=True), "cross-attention comes before self-attention here: the "
                                     "block first reads its own past, then the context"),
        ]
    return mistakes


def _block_problem(got, expected, block, x, context, mask) -> str | None:
    if isinstance(got, tuple):
        return (f"your function returns {_kind(got)}; return only the new x (B, T, d_model): "
                "MultiHeadAttention returns (output, weights), so unpack it first")
    if isinstance(got, torch.Tensor) and context is not None \
            and tuple(got.shape) == tuple(context.shape) != tuple(x.shape):
        return ("your result has the context's shape (B, S, d_model): in cross-attention the "
                "queries come from x (the target), the keys and values from context")
    problem = tensor_problem(got, expected, name="your x", atol=1e-12, rtol=0.0)
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return problem
    for wrong, mistake in _block_mistakes(block, x, context, mask):
        if torch.allclose(got, wrong, atol=1e-12, rtol=0.0):
            return mistake
    return problem


@exercise("implement")
def decoder_block(fn):
    """Your `fn(block, x, context, mask)` -> x (B, T, d_model) after one post-norm decoder block
    (`context` None: a block without cross-attention), against `DecoderBlock.forward`, in
    float64 to 1e-12.

    Returns `fn` when it is right on every input, else the reference.
    """
    inputs = _block_inputs()
    with torch.no_grad():
        return check_function(
            fn, _decoder_block, inputs, name="decoder_block", compare=_block_problem,
            success="your block is attnlab's DecoderBlock, with and without cross-attention",
            hint=("three parts in a row, each LayerNorm(x + part(x)): masked self-attention, "
                  "cross-attention (only when there is a context), feed-forward.",
                  "block.self_attn(x, mask) and block.cross_attn(x, context=context) return "
                  "(output, weights); the LayerNorms are block.norm1, norm2, norm3 in that "
                  "order, the feed-forward block.ff."))


# --- Going further: past the training length ----------------------------------------------------

ENCODINGS = ("learned", "sinusoidal", "rotary", "none")  # notebook 04's four

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
