"""Generation: the one decoding loop of the series and what it draws tokens with.

`sample_next` picks one next token per row (greedy, temperature, top-k, top-p, after
`filter_logits`) and `generate` is the decoding loop around it, with a KV cache where the
model keeps one; `beam_search` and `sequence_logprob` compare decoding strategies;
`next_token_loss` and `token_losses` are the loss every next-token model of the series trains
on. Nothing here knows a task: notebook 08's sorter and reverser (`lessons.decoders`), notebook
10's attention-only models and SmolLM2 (`pretrained.llama`) all decode through it.
"""
from __future__ import annotations

import torch
from torch import nn

from ..plumbing.checks import check_int, check_number, check_tensor
from .hooks import eval_mode


def _check_filter(top_k, top_p) -> tuple[int | None, float | None]:
    if top_k is not None:
        top_k = check_int("top_k", top_k, minimum=1)
    if top_p is not None:
        top_p = check_number("top_p", top_p, minimum=0.0, maximum=1.0, exclusive_minimum=True)
    return top_k, top_p


def _check_logits(logits: torch.Tensor) -> None:
    check_tensor("logits", logits, floating=True)
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}")


def _filter(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """`filter_logits` without the checks (for callers that made them)."""
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)   the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))  # (B, V)
    if top_p is not None:
        probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)  # (B, V)
        before = probs.cumsum(dim=-1) - probs  # (B, V)   probability of the tokens ahead
        drop = (before >= top_p).scatter(-1, order, before >= top_p)  # back to token order
        logits = logits.masked_fill(drop, float("-inf"))  # (B, V)
    return logits


def filter_logits(logits: torch.Tensor, top_k: int | None = None,
                  top_p: float | None = None) -> torch.Tensor:
    """The logits (B, V) with every token that may not be drawn set to -inf, so that a softmax
    gives it probability exactly 0 and the kept tokens share all of it.

    `top_k` keeps the k highest logits of each row; `top_p` keeps the smallest set of most likely
    tokens whose probability (softmax of the logits given) reaches p: the nucleus, which always
    includes the token that crosses p. With both, top-k is applied first. Why filter: a
    model gives every token some probability, and over many steps the tail of unlikely tokens is
    drawn often enough to derail a text; cutting it keeps sampling's variety without its worst
    draws. `sample_next` calls this after dividing by the temperature.
    """
    _check_logits(logits)
    top_k, top_p = _check_filter(top_k, top_p)
    return _filter(logits, top_k, top_p)


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """One next token id per row of `logits` (B, V) -> (B,) int64.

    The logits are divided by `temperature` (below 1 sharpens the distribution, above 1
    flattens it; 0 means greedy: always the most likely token), then filtered by
    `filter_logits` (`top_k`, `top_p`). A token is drawn from what is left, renormalised.
    `top_k=1` is greedy as well.
    """
    _check_logits(logits)
    temperature = check_number("temperature", temperature, minimum=0.0)
    top_k, top_p = _check_filter(top_k, top_p)
    if temperature == 0.0 or top_k == 1:
        return logits.argmax(dim=-1)  # (B,)   greedy
    probs = torch.softmax(_filter(logits / temperature, top_k, top_p), dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B,)


def _next_logits(model: nn.Module, seq: torch.Tensor, memory: torch.Tensor | None):
    """Logits (B, T, V) of every position of `seq`, reading `memory` when there is one."""
    return model(seq) if memory is None else model.decode(seq, memory)


@torch.no_grad()
def generate(model: nn.Module, prompt: torch.Tensor, steps: int, *,
             source: torch.Tensor | None = None, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None, cache: bool | None = None,
             stop: int | None = None) -> torch.Tensor:
    """Extend `prompt` (B, T0) by up to `steps` tokens, one at a time, each fed back as input:
    the one generation loop of the series, for the sorter, the reverser and SmolLM2 alike.

    Each token comes from `sample_next` (temperature 0, the default, is greedy decoding). With
    `source` (an encoder-decoder's input), the source is encoded once and every step reads it
    through cross-attention. With a KV cache (`cache`: None uses one where the model keeps one,
    as `llama.Llama` does; False recomputes) the prompt goes through the model once, filling
    one cache per layer (09's `KVCache`), and every further step runs only the new token: the
    same tokens, less work. Stops early once every row has produced `stop`. Returns
    (B, T0 + n).
    """
    check_tensor("prompt", prompt, min_dim=2)
    steps = check_int("steps", steps, minimum=0)
    check_number("temperature", temperature, minimum=0.0)
    cached = hasattr(model, "new_caches")
    if cache and not cached:
        raise ValueError(f"cache=True needs a model that keeps a KV cache (llama.Llama); "
                         f"{type(model).__name__} recomputes: leave cache at None")
    cache = cached if cache is None else cache
    with eval_mode(model):
        memory = None if source is None else model.encode(source)  # (B, S, d_model)
        caches = model.new_caches(prompt.shape[0], prompt.shape[1] + steps) if cache else None
        seq, new = prompt, prompt
        done = torch.zeros(prompt.shape[0], dtype=torch.bool)  # (B,)
        for _ in range(steps):
            logits = (model.run(new, caches) if cache else _next_logits(model, seq, memory))
            token = sample_next(logits[:, -1], temperature, top_k, top_p, generator)  # (B,)
            seq = torch.cat([seq, token[:, None]], dim=1)  # (B, T + 1)
            new = token[:, None]  # (B, 1): with a cache, only the new token runs next
            if stop is not None:
                done |= token == stop
                if done.all():
                    break
    return seq


@torch.no_grad()
def sequence_logprob(model: nn.Module, seqs: torch.Tensor, start: int, *,
                     source: torch.Tensor | None = None) -> torch.Tensor:
    """log p(seqs[:, start:] | seqs[:, :start]) under `model`, one number per row (B,): the sum
    of the log-probabilities of the tokens from position `start` on, each given all before it
    (teacher forcing, one pass). Greedy decoding, beam search and sampling are compared by it:
    it is what beam search maximises."""
    check_tensor("seqs", seqs, min_dim=2)
    start = check_int("start", start, minimum=1, maximum=seqs.shape[1])
    with eval_mode(model):
        memory = None if source is None else model.encode(source)  # (B, S, d_model)
        logp = torch.log_softmax(_next_logits(model, seqs[:, :-1], memory), dim=-1)  # (B, T-1, V)
    token_logp = logp.gather(-1, seqs[:, 1:, None])[..., 0]  # (B, T - 1)   log p(seqs[:, t + 1])
    return token_logp[:, start - 1:].sum(-1)  # (B,)


@torch.no_grad()
def beam_search(model: nn.Module, prompt: torch.Tensor, steps: int, beam_width: int, *,
                source: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Extend `prompt` (B, T0) by `steps` tokens, keeping the `beam_width` most likely partial
    sequences (by the sum of their tokens' log-probabilities) at every step instead of greedy
    decoding's one.

    Returns the sequences (B, beam_width, T0 + steps), best first, and their log-probabilities
    (B, beam_width) of the written part (as `sequence_logprob` computes them). beam_width 1 is
    greedy decoding. Beam search looks further than greedy but is still a heuristic: a sequence
    whose first tokens are unlikely can fall out of the beam before its later tokens would have
    made up for it, so it does not promise the most likely sequence, nor even one at least as
    likely as greedy's (it usually is).
    """
    check_tensor("prompt", prompt, min_dim=2)
    steps = check_int("steps", steps, minimum=0)
    W = beam_width = check_int("beam_width", beam_width, minimum=1)
    B = prompt.shape[0]
    with eval_mode(model):
        memory = None if source is None else model.encode(source)  # (B, S, d_model)
        if memory is not None:
            memory = memory.repeat_interleave(W, dim=0)  # (B * W, S, d_model)   one per beam
        seqs = prompt.repeat_interleave(W, dim=0)  # (B * W, T0)
        dtype = next(model.parameters()).dtype
        scores = torch.full((B, W), float("-inf"), dtype=dtype, device=prompt.device)  # (B, W)
        scores[:, 0] = 0.0  # one beam to start with: the others are copies of it
        for _ in range(steps):
            logp = torch.log_softmax(_next_logits(model, seqs, memory)[:, -1], dim=-1)  # (B*W, V)
            V = logp.shape[-1]
            total = scores[:, :, None] + logp.view(B, W, V)  # (B, W, V)   every extension
            scores, best = total.view(B, W * V).topk(W, dim=-1)  # (B, W)   the W most likely
            beam, token = best // V, best % V  # (B, W)   which beam it extends, with which token
            rows = (beam + torch.arange(B, device=prompt.device)[:, None] * W).flatten()  # (B*W,)
            seqs = torch.cat([seqs[rows], token.flatten()[:, None]], dim=1)  # (B * W, T + 1)
    return seqs.view(B, W, -1), scores  # (B, W, T0 + steps), (B, W)


def distinct_outputs(samples: torch.Tensor) -> torch.Tensor:
    """How many different sequences each prompt got: samples (N, S, L), S outputs for each of N
    prompts -> (N,) counts between 1 and S. A measure of a decoder's diversity."""
    check_tensor("samples", samples, min_dim=3)
    return torch.tensor([len(torch.unique(s, dim=0)) for s in samples], device=samples.device)


def next_token_loss(model: nn.Module, seqs: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting seqs[:, t + 1] from seqs[:, :t + 1], every t at once:
    the loss every next-token model of the series trains on."""
    logits = model(seqs[:, :-1])  # (B, T - 1, V)
    return nn.functional.cross_entropy(logits.flatten(0, 1), seqs[:, 1:].flatten())


def token_losses(model: nn.Module, seqs: torch.Tensor) -> torch.Tensor:
    """`next_token_loss` position by position, not averaged: (B, T - 1), position t predicting
    token t + 1 from tokens 0..t (what notebook 10 splits into repeated and random tokens)."""
    logits = model(seqs[:, :-1])  # (B, T - 1, V)
    return nn.functional.cross_entropy(logits.transpose(1, 2), seqs[:, 1:],
                                       reduction="none")  # (B, T - 1)
