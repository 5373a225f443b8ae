"""Greedy decoding and beam search for autoregressive models, whatever the model.

The caller hands in `next_logp(tokens)`, which scores the token after each row of a batch of
prefixes: a model's logits at the last position, say `lambda t: model(t)[0][:, -1]`. Two hooks
shape the search: `legal` restricts the next token (a maze move into a wall, a Sokoban push
into a corner), and `done` ends a sequence early (the first invalid move, a solved board).
Greedy decoding grows all rows by one token per step in one batch, the shape of
annotated-transformer's `greedy_decode`; beam search keeps the best few sequences by their
total log-likelihood, so it can find a sequence whose first token greedy decoding passes over.

`beam_search` searches from one prefix and keeps its beams in Python lists: the rules, written
to be read. `beam_search_batch` runs the same rules from many prefixes at once, as tensor
operations over every live beam of every search, with the model called once per step; the
world it walks in is a `Walk`, which keeps its own state per row (`TokenWalk` builds one from
hooks like `beam_search`'s). A test holds the two to the same beams, ties included.

Scores are the model's own log-probabilities: `log_softmax` is applied to what `next_logp`
returns (so logits and log-probabilities both work) before illegal tokens are masked, so a
constraint changes what may be chosen, never what a choice is worth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import Protocol

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


# ----------------------------------------------------------------------------- many searches at once


class Walk(Protocol):
    """The live sequences of many searches at once, as `beam_search_batch` grows them: row i of
    whatever a method returns is the i-th live sequence, in the order the search last left
    them. A walk keeps what it needs per row (a board, a cache of the model's tokens) and
    reorders it when told; `TokenWalk` makes one from hooks that read token rows.

    next_logp() -> (rows, vocab) scores of the next token (logits or log-probabilities)
    legal() -> (rows, vocab) bool (the tokens a row may take next), or None for all of them
    keys() -> (rows, vocab) long: what each candidate (row extended by token) reaches, as an
        int in [0, 2**40); asked only when the search merges (`merge=True`)
    here() -> (rows,) long: what each row has reached (asked once, of the starts, to merge)
    advance(parent (rows',), token (rows',)) -> (rows',) bool: the rows become rows `parent`,
        each extended by its token; True where the new row is done (a solved board, say)
    keep(index (rows',)) -> None: the rows become rows `index`, in that order
    """

    def next_logp(self) -> torch.Tensor: ...

    def legal(self) -> torch.Tensor | None: ...

    def keys(self) -> torch.Tensor: ...

    def here(self) -> torch.Tensor: ...

    def advance(self, parent: torch.Tensor, token: torch.Tensor) -> torch.Tensor: ...

    def keep(self, index: torch.Tensor) -> None: ...


RowHook = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (tokens (n, t), origin (n,)) -> tensor


class TokenWalk:
    """A `Walk` from hooks on token rows, the batched twin of `beam_search`'s: each hook gets
    the rows' tokens (n, t) and `origin` (n,), the index of the start each row grew from.
    `next_logp` scores the token after each row; `legal` (n, vocab) bool, `done` (n,) bool and
    `key` (n,) long (ints in [0, 2**40)) mean what they mean in `beam_search`. It replays
    nothing and caches nothing: a world with state to keep per row writes its own `Walk`."""

    def __init__(self, starts: torch.Tensor, next_logp: RowHook, legal: RowHook | None = None,
                 done: RowHook | None = None, key: RowHook | None = None):
        self.tokens = _check_start(starts, 2)  # (n, t)
        self.origin = torch.arange(len(self.tokens), device=self.tokens.device)  # (n,)
        self._next_logp, self._legal, self._done, self._key = next_logp, legal, done, key
        self._vocab: int | None = None  # known once the rows have been scored

    def next_logp(self) -> torch.Tensor:
        scores = self._next_logp(self.tokens, self.origin)
        self._vocab = scores.shape[-1]  # for `keys`, which the search asks after the scores
        return scores

    def legal(self) -> torch.Tensor | None:
        return None if self._legal is None else self._legal(self.tokens, self.origin)

    def here(self) -> torch.Tensor:
        if self._key is None:
            raise ValueError("merging beams needs a key hook: TokenWalk(..., key=...)")
        return self._key(self.tokens, self.origin)

    def keys(self) -> torch.Tensor:
        if self._key is None or self._vocab is None:
            raise ValueError("keys come after next_logp, from a key hook: TokenWalk(..., key=...)")
        n, vocab = len(self.tokens), self._vocab
        grown = torch.cat([self.tokens.repeat_interleave(vocab, 0),
                           torch.arange(vocab, device=self.tokens.device).repeat(n)[:, None]], 1)  # (n * vocab, t + 1)
        return self._key(grown, self.origin.repeat_interleave(vocab)).view(n, vocab)

    def advance(self, parent: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        self.tokens = torch.cat([self.tokens[parent], token[:, None]], 1)  # (rows', t + 1)
        self.origin = self.origin[parent]
        if self._done is None:
            return torch.zeros(len(parent), dtype=torch.bool, device=parent.device)
        return self._done(self.tokens, self.origin)

    def keep(self, index: torch.Tensor) -> None:
        self.tokens, self.origin = self.tokens[index], self.origin[index]


KEY_BITS = 40  # a merged state's key is below 2**KEY_BITS; the start's index sits above it


def _best_before(codes: torch.Tensor, best: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """The best logp recorded for each of `query`'s (start, key) codes in the sorted table
    (`codes`, `best`), -inf where there is none."""
    if len(codes) == 0:
        return torch.full(query.shape, NEG_INF, device=query.device)
    at = torch.searchsorted(codes, query).clamp(max=len(codes) - 1)  # (q,)
    return torch.where(codes[at] == query, best[at], NEG_INF)


@torch.no_grad()
def beam_search_batch(
    walk: Walk,
    starts: torch.Tensor,
    *,
    width: int,
    max_len: int,
    stop: int | None = None,
    merge: bool = False,
    first: bool = False,
) -> list[list[Beam]]:
    """`beam_search` from each of the n prefixes in `starts` (n, t0) at once, with the same
    rules, so the same beams for each start: every live beam of every start is scored in one
    call of `walk.next_logp()` per step, and the ranking, merging and finishing are tensor
    operations over all of them. `merge=True` is `beam_search`'s `key`: the walk's `keys()`
    name the states candidates reach. Returns one list of beams per start, as `beam_search`
    would for it alone.

    Each start's candidates are ranked by a stable sort, so ties fall as in `beam_search`:
    the earlier beam, then the lower token id. The only difference can come from the model:
    scoring many rows in one batch may round a logit differently in its last bit than
    scoring a few."""
    tokens = _check_start(starts, 2)  # (n, t)
    if width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    n = len(tokens)
    _check_max_len(max_len, tokens.shape[1])
    if n >= 2 ** (63 - KEY_BITS):
        raise ValueError(f"at most {2 ** (63 - KEY_BITS) - 1:,} starts at once, got {n:,}")
    device = tokens.device
    origin = torch.arange(n, device=device)  # (rows,): the start each live row grew from
    logp = torch.zeros(n, device=device)  # (rows,)
    finished: list[dict[Hashable, Beam]] = [{} for _ in range(n)]
    stranded: dict[int, list[Beam]] = {}  # starts whose live beams all came to dead ends
    if merge:
        codes = (origin << KEY_BITS) | _check_keys(walk.here(), (n,))  # (m,) sorted: (start, key) reached
        codes, best = codes.sort()[0], torch.zeros(n, device=device)  # (m,): the best logp each was reached with
    while len(origin) and tokens.shape[1] < max_len:
        rows = len(origin)
        scores = walk.next_logp()
        if scores.dim() != 2 or scores.shape[0] != rows:
            raise ValueError(f"next_logp must return scores shaped (rows, vocab) with rows={rows}, "
                             f"got {tuple(scores.shape)}")
        step = torch.log_softmax(scores.float(), dim=-1)  # (rows, vocab)
        allowed = walk.legal()
        if allowed is not None:
            if allowed.dtype != torch.bool or allowed.shape != step.shape:
                raise ValueError(f"legal must return booleans shaped {tuple(step.shape)}, "
                                 f"got {allowed.dtype} {tuple(allowed.shape)}")
            step = step.masked_fill(~allowed, NEG_INF)
        total = (logp[:, None] + step).flatten()  # (rows * vocab,): candidate c is row c // vocab, token c % vocab
        vocab = step.shape[1]
        start_of = origin.repeat_interleave(vocab)  # (rows * vocab,)
        # rank each start's candidates, best first: sorting by score, then (stably) by start,
        # leaves ties in candidate order, as beam_search's one stable sort does
        order = torch.argsort(total, descending=True, stable=True)
        order = order[torch.argsort(start_of[order], stable=True)]  # (rows * vocab,)
        value, owner = total[order], start_of[order]
        ok = value > NEG_INF
        if merge:
            # (an illegal candidate's key may be anything: it is set to 0, which its start's
            # legal candidates, ranked before it, would reach first)
            keys = _check_keys(walk.keys(), step.shape, (total > NEG_INF).view(step.shape)).flatten()[order]
            code = (owner << KEY_BITS) | keys.where(ok, 0)  # (rows * vocab,)
            # a state's first candidate in rank order stands for it at this step (the others
            # are no likelier), and goes on only if no earlier step reached it as likely
            groups, group = torch.unique(code, return_inverse=True)
            place = torch.arange(len(code), device=device)
            first_place = torch.full((len(groups),), len(code), device=device).scatter_reduce(
                0, group, place, "amin")
            ok &= (first_place[group] == place) & (value > _best_before(codes, best, code))
        # the first `width` of each start
        count = ok.long().cumsum(0)  # (rows * vocab,)
        segment = torch.searchsorted(owner, owner)  # where each start's candidates begin
        kept = ok & (count - (count - ok.long())[segment] <= width)
        chosen = order[kept]  # (rows',): per start, best first; starts in order
        parent, token = chosen // vocab, chosen % vocab
        for s in sorted(set(origin.tolist()) - set(origin[parent].tolist())):
            if not finished[s]:  # nothing new to reach: the live beams as they stand are the answer
                stranded[s] = _beams(tokens, logp, origin == s, False)
        logp = total[chosen]
        if merge:
            new_codes = code[kept]
            codes, group = torch.unique(torch.cat([codes, new_codes]), return_inverse=True)
            best = torch.full((len(codes),), NEG_INF, device=device).scatter_reduce(
                0, group, torch.cat([best, value[kept]]), "amax")
        tokens = torch.cat([tokens[parent], token[:, None]], 1)  # (rows', t + 1)
        origin = origin[parent]
        done = walk.advance(parent, token)
        if done.dtype != torch.bool or done.shape != (len(parent),):
            raise ValueError(f"advance must return booleans shaped ({len(parent)},), got {done.dtype} {tuple(done.shape)}")
        if stop is not None:
            done = done | (token == stop)
        ended = done.nonzero().flatten().tolist()
        for i, (s, score) in zip(ended, zip(origin[ended].tolist(), logp[ended].tolist())):
            name = int(new_codes[i]) if merge else len(finished[s])
            finished[s][name] = Beam(tokens[i], score, True)
        still = ~done
        if first and ended:
            still &= ~torch.isin(origin, origin[ended])  # a start that found one stops searching
        index = still.nonzero().flatten()
        walk.keep(index)
        tokens, origin, logp = tokens[index], origin[index], logp[index]
    out = []
    for s in range(n):
        if finished[s]:
            out.append(sorted(finished[s].values(), key=lambda b: b.logp, reverse=True))
        elif s in stranded:
            out.append(stranded[s])
        else:  # cut off by max_len
            out.append(_beams(tokens, logp, origin == s, False))
    return out


def _beams(tokens: torch.Tensor, logp: torch.Tensor, rows: torch.Tensor, finished: bool) -> list[Beam]:
    """The beams in `rows` (a (rows,) bool mask), in row order."""
    return [Beam(t, score, finished) for t, score in zip(tokens[rows], logp[rows].tolist())]


def _check_keys(keys: torch.Tensor, shape: tuple, real: torch.Tensor | None = None) -> torch.Tensor:
    """A walk's keys, checked: long ints shaped `shape`, in [0, 2**KEY_BITS) where `real`."""
    if not isinstance(keys, torch.Tensor) or keys.dtype != torch.long or tuple(keys.shape) != tuple(shape):
        got = f"{keys.dtype} {tuple(keys.shape)}" if isinstance(keys, torch.Tensor) else type(keys).__name__
        raise ValueError(f"keys must be long ints shaped {tuple(shape)}, got {got}")
    inside = (keys >= 0) & (keys < 2**KEY_BITS)
    if not (inside if real is None else inside | ~real).all():
        raise ValueError(f"keys must lie in [0, 2**{KEY_BITS})")
    return keys
