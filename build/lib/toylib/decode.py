"""Greedy decoding and beam search for autoregressive models, whatever the model.

The caller hands in `next_logp(tokens)`, which scores the token after each row of a batch of
prefixes: a model's logits at the last position, say `lambda t: model(t)[0][:, -1]`. Two hooks
shape the search: `legal` restricts the next token (a maze move into a wall, a Sokoban push
into a corner), and `done` ends a sequence early (the first invalid move, a solved board).
Greedy decoding grows all rows by one token per step in one batch, the shape of
annotated-transformer's `greedy_decode`; beam search keeps the best few sequences by their
total log-likelihood, so it can find a sequence whose first token greedy decoding passes over.

Scores are the model's own log-probabilities: `log_softmax` is applied to what `next_logp`
returns (so logits and log-probabilities both work) before illegal tokens are masked, so a
constraint changes what may be chosen, never what a choice is worth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable

import torch

NextLogp = Callable[[torch.Tensor], torch.Tensor]  # tokens (n, t) -> scores (n, vocab)
Hook = Callable[[torch.Tensor], torch.Tensor]  # tokens (n, t) -> (n, vocab) or (n,) booleans

NEG_INF = float("-inf")


@dataclasses.dataclass(frozen=True, eq=False)
class Decoded:
    """The result of `greedy_decode`, one row per prefix; rows that ended early are padded."""

    tokens: torch.Tensor  # (n, T) long: prefix, decoded tokens, then padding
    lengths: torch.Tensor  # (n,) long: tokens up to and including the one that ended the row, prefix included
    logp: torch.Tensor  # (n,) float: sum of the decoded tokens' log-probabilities (the prefix is not scored)
    finished: torch.Tensor  # (n,) bool: ended by `stop`, `done` or a lack of legal tokens, not by max_len


@dataclasses.dataclass(frozen=True, eq=False)
class Beam:
    """One sequence found by `beam_search`."""

    tokens: torch.Tensor  # (t,) long: the prefix and the tokens decoded after it
    logp: float  # sum of the decoded tokens' log-probabilities
    finished: bool  # ended by `stop` or `done`, rather than cut off by max_len or a dead end


def _check_start(start: torch.Tensor, dim: int) -> torch.Tensor:
    """`start` as a LongTensor shaped (n, t0) (dim=2) or (t0,) (dim=1), with t0 >= 1."""
    shape = "(n, t0)" if dim == 2 else "(t0,)"
    if not isinstance(start, torch.Tensor) or start.dim() != dim:
        got = tuple(start.shape) if isinstance(start, torch.Tensor) else type(start).__name__
        raise ValueError(f"start must be a tensor of token ids shaped {shape}, got {got}")
    if start.is_floating_point() or start.is_complex() or start.dtype == torch.bool:
        raise ValueError(f"start must hold integer token ids, got dtype {start.dtype}")
    if start.shape[-1] < 1:
        raise ValueError("start must hold at least one token per prefix (a start-of-sequence token, say)")
    return start.long()


def _check_max_len(max_len: int, prefix_len: int) -> None:
    if max_len < prefix_len:
        raise ValueError(f"max_len ({max_len}) is shorter than the prefix ({prefix_len} tokens); it counts the prefix")


def _next_scores(next_logp: NextLogp, tokens: torch.Tensor, legal: Hook | None) -> torch.Tensor:
    """Log-probabilities of the next token after each row of `tokens`, (n, vocab), with -inf
    where `legal` forbids a token."""
    n = tokens.shape[0]
    scores = next_logp(tokens)
    if scores.dim() != 2 or scores.shape[0] != n:
        raise ValueError(f"next_logp must return scores shaped (n, vocab) with n={n}, got {tuple(scores.shape)}")
    logp = torch.log_softmax(scores.float(), dim=-1)  # (n, vocab)
    if legal is None:
        return logp
    allowed = legal(tokens)
    if allowed.dtype != torch.bool or allowed.shape != logp.shape:
        got = f"{allowed.dtype} {tuple(allowed.shape)}"
        raise ValueError(f"legal must return booleans shaped {tuple(logp.shape)}, got {got}")
    return logp.masked_fill(~allowed, NEG_INF)


def _ended(tokens: torch.Tensor, stop: int | None, done: Hook | None) -> torch.Tensor:
    """(n,) bool: rows whose last token is `stop`, or for which `done` says so."""
    if stop is None:
        ended = torch.zeros(len(tokens), dtype=torch.bool, device=tokens.device)
    else:
        ended = tokens[:, -1] == stop
    if done is None:
        return ended
    flags = done(tokens)
    if flags.dtype != torch.bool or flags.shape != (len(tokens),):
        raise ValueError(f"done must return booleans shaped ({len(tokens)},), got {flags.dtype} {tuple(flags.shape)}")
    return ended | flags


@torch.no_grad()
def greedy_decode(
    next_logp: NextLogp,
    start: torch.Tensor,
    *,
    max_len: int,
    stop: int | None = None,
    legal: Hook | None = None,
    done: Hook | None = None,
    pad: int | None = None,
) -> Decoded:
    """Decode the n prefixes in `start` (n, t0) together, appending the most likely token to
    each row until every row has ended or the rows are `max_len` long (prefix included).

    A row ends after emitting `stop`, or when `done(tokens)` (checked after every appended
    token, never on the prefix) is true for it, or when `legal` leaves it no token at all; an
    ended row counts as finished, and from then on gets `pad` (default `stop`, or 0) appended
    and adds nothing to its logp. Ties go to the lowest token id. The hooks see every row,
    ended ones included, and their answers for ended rows are ignored.
    """
    tokens = _check_start(start, 2)
    n, t0 = tokens.shape
    _check_max_len(max_len, t0)
    pad = pad if pad is not None else (stop if stop is not None else 0)
    logp = torch.zeros(n, device=tokens.device)  # (n,)
    lengths = torch.full((n,), t0, device=tokens.device)  # (n,)
    finished = torch.zeros(n, dtype=torch.bool, device=tokens.device)  # (n,)
    while tokens.shape[1] < max_len and not finished.all():
        scores = _next_scores(next_logp, tokens, legal)  # (n, vocab)
        best = scores.argmax(dim=-1)  # (n,)
        best_logp = scores.gather(1, best[:, None]).squeeze(1)  # (n,)
        finished |= best_logp == NEG_INF  # no legal token: the row ends where it is
        live = ~finished
        tokens = torch.cat([tokens, torch.where(live, best, pad)[:, None]], dim=1)  # (n, t + 1)
        logp += torch.where(live, best_logp, 0.0)
        lengths += live.long()
        finished |= live & _ended(tokens, stop, done)
    return Decoded(tokens, lengths, logp, finished)


@torch.no_grad()
def beam_search(
    next_logp: NextLogp,
    start: torch.Tensor,
    *,
    width: int,
    max_len: int,
    stop: int | None = None,
    legal: Hook | None = None,
    done: Hook | None = None,
    key: Callable[[torch.Tensor], Hashable] | None = None,
    first: bool = False,
) -> list[Beam]:
    """Beam search from one prefix `start` (t0,): at every step each live beam is extended by
    every legal token, and the `width` candidates with the highest total log-likelihood are
    kept (ties: the earlier beam, then the lower token id). A kept candidate ending in `stop`,
    or for which `done` is true, is finished and leaves the live set, so the live set shrinks
    as beams finish; the search ends when it is empty, at `max_len` (prefix included), or,
    with `first=True`, at the first step in which any beam finishes.

    `key(tokens)` names what a sequence has reached (a Sokoban board, say): a candidate is
    dropped when its key was already reached, at this step or an earlier one, by a kept
    candidate with a better or equal logp, and only the best finished beam per key is kept.
    (The start's key counts too, with logp 0.)

    Returns the finished beams, best first; if none finished, the live beams, best first. A
    beam with no legal token (or, with `key`, none leading anywhere new) is a dead end and is
    dropped, unless every live beam is one: then the search stops and returns those, unfinished.
    """
    prefix = _check_start(start, 1)
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    _check_max_len(max_len, len(prefix))
    live = prefix[None]  # (k, t): the live beams, best first
    live_logp = torch.zeros(1, device=prefix.device)  # (k,)
    finished: dict[Hashable, Beam] = {}  # by key, or by arrival order when there is no key
    best_at: dict[Hashable, float] = {} if key is None else {key(prefix): 0.0}
    while len(live) and live.shape[1] < max_len:
        total = live_logp[:, None] + _next_scores(next_logp, live, legal)  # (k, vocab)
        vocab = total.shape[1]
        flat = total.flatten().tolist()  # candidate i extends beam i // vocab by token i % vocab
        ranked = torch.argsort(total.flatten(), descending=True, stable=True).tolist()
        kept, scores, keys = [], [], []
        for i in ranked:
            if len(kept) == width or flat[i] == NEG_INF:
                break
            beam, token = divmod(i, vocab)
            candidate = torch.cat([live[beam], live.new_tensor([token])])  # (t + 1,)
            if key is not None:
                k = key(candidate)
                if best_at.get(k, NEG_INF) >= flat[i]:
                    continue  # this state was already reached at least as likely
                best_at[k] = flat[i]
                keys.append(k)
            kept.append(candidate)
            scores.append(flat[i])
        if not kept:
            break  # every live beam is a dead end: they are the answer as they stand
        candidates = torch.stack(kept)  # (k', t + 1)
        ended = _ended(candidates, stop, done).tolist()
        for j, is_done in enumerate(ended):
            if is_done:
                finished[keys[j] if key is not None else len(finished)] = Beam(candidates[j], scores[j], True)
        still = [j for j, is_done in enumerate(ended) if not is_done]
        live, live_logp = candidates[still], live_logp.new_tensor([scores[j] for j in still])
        if first and finished:
            break
    if finished:
        return sorted(finished.values(), key=lambda b: b.logp, reverse=True)
    return [Beam(tokens, logp, False) for tokens, logp in zip(live, live_logp.tolist())]
