import math

import pytest
import torch

from toylib.decode import TokenWalk, beam_search, beam_search_batch, greedy_decode

# A bigram "model": the next token's probabilities depend on the last token only. Greedy
# decoding takes A (0.6), whose continuations are all poor (0.3 each); beam search finds B
# (0.4) then Y (0.9), the likelier sequence: 0.4 * 0.9 * 0.8 = 0.288 against 0.6 * 0.3 = 0.18.
BOS, A, B, X, Y, Z, STOP = range(7)
TABLE = torch.zeros(7, 7)
TABLE[BOS, [A, B]] = torch.tensor([0.6, 0.4])
TABLE[A, [X, Y, Z, STOP]] = torch.tensor([0.3, 0.3, 0.3, 0.1])
TABLE[B, [Y, STOP]] = torch.tensor([0.9, 0.1])
TABLE[X, STOP] = 1.0
TABLE[Y, [Z, STOP]] = torch.tensor([0.8, 0.2])
TABLE[Z, STOP] = 1.0
TABLE[STOP, [A, B]] = torch.tensor([0.5, 0.5])  # were decoding to go on after STOP, it would show


def bigram(tokens: torch.Tensor) -> torch.Tensor:
    return TABLE[tokens[:, -1]].log()  # (n, vocab)


def log(*probs: float) -> float:
    return sum(math.log(p) for p in probs)


def seq(*tokens: int) -> list[int]:
    return list(tokens)


# ----------------------------------------------------------------------------- greedy


def test_greedy_takes_the_likeliest_token_each_step_and_misses_the_best_sequence():
    out = greedy_decode(bigram, torch.tensor([[BOS]]), max_len=10, stop=STOP)
    assert out.tokens.tolist() == [seq(BOS, A, X, STOP)]  # X, Y, Z tie after A: the lowest id wins
    assert out.lengths.tolist() == [4] and out.finished.tolist() == [True]
    assert out.logp.item() == pytest.approx(log(0.6, 0.3, 1.0))


def test_greedy_rows_that_stop_early_are_padded_and_keep_their_logp():
    start = torch.tensor([[BOS, A], [BOS, B]])
    out = greedy_decode(bigram, start, max_len=10, stop=STOP, pad=BOS)
    assert out.tokens.tolist() == [seq(BOS, A, X, STOP, BOS), seq(BOS, B, Y, Z, STOP)]
    assert out.lengths.tolist() == [4, 5] and out.finished.tolist() == [True, True]
    assert out.logp.tolist() == pytest.approx([log(0.3, 1.0), log(0.9, 0.8, 1.0)])
    # the default pad is the stop token
    assert greedy_decode(bigram, start, max_len=10, stop=STOP).tokens[0, -1].item() == STOP


def test_greedy_done_ends_a_row_and_max_len_cuts_the_others():
    def reached_y(tokens):
        return tokens[:, -1] == Y

    out = greedy_decode(bigram, torch.tensor([[BOS, A], [BOS, B]]), max_len=4, done=reached_y, pad=BOS)
    assert out.tokens.tolist() == [seq(BOS, A, X, STOP), seq(BOS, B, Y, BOS)]
    assert out.lengths.tolist() == [4, 3] and out.finished.tolist() == [False, True]
    assert out.logp.tolist() == pytest.approx([log(0.3, 1.0), log(0.9)])


def test_greedy_obeys_the_legal_hook_and_scores_with_the_models_probabilities():
    def no_a(tokens):
        allowed = torch.ones(len(tokens), 7, dtype=torch.bool)
        allowed[:, A] = False
        return allowed

    out = greedy_decode(bigram, torch.tensor([[BOS]]), max_len=10, stop=STOP, legal=no_a)
    assert out.tokens.tolist() == [seq(BOS, B, Y, Z, STOP)]
    assert out.logp.item() == pytest.approx(log(0.4, 0.9, 0.8, 1.0))  # 0.4, not renormalised to 1


def test_greedy_a_row_with_no_legal_token_is_finished_where_it_is():
    def nothing_after_b(tokens):
        return (tokens[:, -1] != B)[:, None].expand(len(tokens), 7)

    out = greedy_decode(bigram, torch.tensor([[BOS, A], [BOS, B]]), max_len=5, stop=STOP, legal=nothing_after_b)
    assert out.tokens.tolist() == [seq(BOS, A, X, STOP), seq(BOS, B, STOP, STOP)]
    assert out.lengths.tolist() == [4, 2] and out.finished.tolist() == [True, True]
    assert out.logp.tolist() == pytest.approx([log(0.3, 1.0), 0.0])


def test_greedy_accepts_logits_as_well_as_log_probabilities():
    logits = lambda tokens: bigram(tokens) + 5.0  # noqa: E731  (a constant shift: same distribution)
    out = greedy_decode(logits, torch.tensor([[BOS]]), max_len=10, stop=STOP)
    assert out.logp.item() == pytest.approx(log(0.6, 0.3, 1.0))


# ----------------------------------------------------------------------------- beam search


def test_beam_search_finds_the_likelier_sequence_that_greedy_misses():
    beams = beam_search(bigram, torch.tensor([BOS]), width=2, max_len=10, stop=STOP)
    assert [b.tokens.tolist() for b in beams] == [seq(BOS, B, Y, Z, STOP), seq(BOS, A, X, STOP)]
    assert [b.logp for b in beams] == pytest.approx([log(0.4, 0.9, 0.8, 1.0), log(0.6, 0.3, 1.0)])
    assert all(b.finished for b in beams)


def test_beam_search_of_width_one_is_greedy():
    greedy = greedy_decode(bigram, torch.tensor([[BOS]]), max_len=10, stop=STOP)
    (beam,) = beam_search(bigram, torch.tensor([BOS]), width=1, max_len=10, stop=STOP)
    assert beam.tokens.tolist() == greedy.tokens[0].tolist() and beam.logp == pytest.approx(greedy.logp.item())


def test_beam_search_first_returns_at_the_first_finished_beam():
    # at step 3, A X STOP (0.18) finishes while B Y Z (0.288) is still live
    beams = beam_search(bigram, torch.tensor([BOS]), width=2, max_len=10, stop=STOP, first=True)
    assert [b.tokens.tolist() for b in beams] == [seq(BOS, A, X, STOP)]


def test_beam_search_returns_the_live_beams_when_none_finished():
    beams = beam_search(bigram, torch.tensor([BOS]), width=3, max_len=3, stop=STOP)
    assert [b.tokens.tolist() for b in beams] == [seq(BOS, B, Y), seq(BOS, A, X), seq(BOS, A, Y)]
    assert [b.logp for b in beams] == pytest.approx([log(0.4, 0.9), log(0.6, 0.3), log(0.6, 0.3)])
    assert not any(b.finished for b in beams)


def test_beam_search_never_takes_an_illegal_token():
    def no_y(tokens):
        allowed = torch.ones(len(tokens), 7, dtype=torch.bool)
        allowed[:, Y] = False
        return allowed

    beams = beam_search(bigram, torch.tensor([BOS]), width=3, max_len=10, stop=STOP, legal=no_y)
    assert beams and all(Y not in b.tokens.tolist() for b in beams)
    assert beams[0].tokens.tolist() == seq(BOS, A, X, STOP)


def test_beam_search_done_finishes_a_beam():
    beams = beam_search(bigram, torch.tensor([BOS]), width=2, max_len=10, done=lambda t: t[:, -1] == Y)
    assert beams[0].tokens.tolist() == seq(BOS, B, Y) and beams[0].finished
    assert beams[0].logp == pytest.approx(log(0.4, 0.9))


def test_beam_search_merges_candidates_with_the_same_key():
    # B Y (0.36) and A Y (0.18) both end in Y: keyed by the last token, only B Y is kept,
    # and the third place goes to A Z
    last = lambda tokens: tokens[-1].item()  # noqa: E731
    beams = beam_search(bigram, torch.tensor([BOS]), width=3, max_len=3, stop=STOP, key=last)
    assert [b.tokens.tolist() for b in beams] == [seq(BOS, B, Y), seq(BOS, A, X), seq(BOS, A, Z)]


def test_beam_search_drops_a_key_reached_earlier_with_a_better_score():
    # a loop: a -> b (0.8), b -> a (0.6). After step 1, "a" was reached with 0.7; at step 2
    # "b a" (0.3 * 0.6 = 0.18) reaches it again, worse, and gives way to "a end" (0.14)
    bos, a, b, end = range(4)
    table = torch.tensor([[0, 0.7, 0.3, 0], [0, 0, 0.8, 0.2], [0, 0.6, 0, 0.4], [0.25] * 4])
    model = lambda tokens: table[tokens[:, -1]].log()  # noqa: E731
    plain = beam_search(model, torch.tensor([bos]), width=2, max_len=3)
    assert [x.tokens.tolist() for x in plain] == [seq(bos, a, b), seq(bos, b, a)]
    merged = beam_search(model, torch.tensor([bos]), width=2, max_len=3, key=lambda t: t[-1].item())
    assert [x.tokens.tolist() for x in merged] == [seq(bos, a, b), seq(bos, a, end)]
    assert [x.logp for x in merged] == pytest.approx([log(0.7, 0.8), log(0.7, 0.2)])


def test_beam_search_keeps_one_finished_beam_per_key():
    # keyed by the last token, every finished beam has the key STOP: A X STOP finishes first
    # (0.18), then B Y Z STOP (0.288) replaces it
    last = lambda tokens: tokens[-1].item()  # noqa: E731
    beams = beam_search(bigram, torch.tensor([BOS]), width=2, max_len=10, stop=STOP, key=last)
    assert [b.tokens.tolist() for b in beams] == [seq(BOS, B, Y, Z, STOP)]


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: greedy_decode(bigram, torch.tensor([BOS]), max_len=5), r"shaped \(n, t0\)"),
        (lambda: greedy_decode(bigram, torch.tensor([[0.0]]), max_len=5), "integer token ids"),
        (lambda: greedy_decode(bigram, torch.zeros(2, 0, dtype=torch.long), max_len=5), "at least one token"),
        (lambda: greedy_decode(bigram, torch.tensor([[BOS, A]]), max_len=1), r"max_len \(1\) is shorter"),
        (lambda: greedy_decode(lambda t: TABLE[t], torch.tensor([[BOS]]), max_len=5), r"next_logp must return"),
        (lambda: greedy_decode(bigram, torch.tensor([[BOS]]), max_len=5, legal=lambda t: t), "legal must return"),
        (lambda: greedy_decode(bigram, torch.tensor([[BOS]]), max_len=5, done=lambda t: t), "done must return"),
        (lambda: beam_search(bigram, torch.tensor([[BOS]]), width=2, max_len=5), r"shaped \(t0,\)"),
        (lambda: beam_search(bigram, torch.tensor([BOS]), width=0, max_len=5), "width must be at least 1"),
        (lambda: beam_search(bigram, torch.tensor([BOS, A]), width=2, max_len=1), r"max_len \(1\) is shorter"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----------------------------------------------------------------------------- many searches at once

# A world of many starts with ties everywhere: the next token's logits are small integers
# drawn from a hash of the start, the step and the last two tokens; some tokens are illegal;
# a row is done by another hash; and states (for merging) are the tokens' sum modulo 7, so
# that many sequences reach the same one.
VOCAB = 5


def _mix(tokens: torch.Tensor, origin: torch.Tensor) -> torch.Tensor:
    last2 = tokens[:, -2] if tokens.shape[1] > 1 else torch.zeros_like(origin)
    return origin * 31 + tokens[:, -1] * 17 + last2 * 7 + tokens.shape[1] * 3  # (n,)


def world_logits(tokens, origin):
    h = _mix(tokens, origin)[:, None] * 13 + torch.arange(VOCAB) * 11  # (n, vocab)
    return (h % 3).float()  # 0, 1 or 2: ties within a row, and between beams


def world_legal(tokens, origin):
    h = _mix(tokens, origin)[:, None] + torch.arange(VOCAB) * 5
    return h % 3 != 0


def world_done(tokens, origin):
    return (_mix(tokens, origin) * 7 + tokens.sum(1)) % 23 == 0


def world_key(tokens, origin):
    return tokens[:, 1:].sum(1) % 7 + 10 * (tokens.shape[1] % 2)


def _for_one(hook, s):
    return lambda tokens: hook(tokens, torch.full((len(tokens),), s))


@pytest.mark.parametrize("width", [1, 3, 8])
@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("first", [False, True])
@pytest.mark.parametrize("stop", [None, 0])
def test_batched_search_finds_the_same_beams_as_searching_each_start_alone(width, merge, first, stop):
    starts = torch.stack([torch.arange(60) % VOCAB, torch.arange(60) // VOCAB % VOCAB], 1)  # (60, 2)
    walk = TokenWalk(starts, world_logits, world_legal, world_done, world_key if merge else None)
    together = beam_search_batch(walk, starts, width=width, max_len=9, stop=stop, merge=merge, first=first)
    assert len(together) == len(starts)
    kinds = set()
    for s, found in enumerate(together):
        alone = beam_search(_for_one(world_logits, s), starts[s], width=width, max_len=9, stop=stop,
                            legal=_for_one(world_legal, s), done=_for_one(world_done, s),
                            key=(lambda t, s=s: int(world_key(t[None], torch.tensor([s])))) if merge else None,
                            first=first)
        assert [b.tokens.tolist() for b in found] == [b.tokens.tolist() for b in alone]
        assert [b.logp for b in found] == [b.logp for b in alone]
        assert [b.finished for b in found] == [b.finished for b in alone]
        kinds.add((alone[0].finished, len(alone[0].tokens)))
    assert len(kinds) >= 2  # the starts end in more than one way: finished, cut off or stranded, at several lengths


def test_batched_search_refuses_bad_walks_and_bad_starts():
    starts = torch.zeros(3, 1, dtype=torch.long)

    def walk(**hooks):
        return TokenWalk(starts, **{"next_logp": world_logits, **hooks})

    with pytest.raises(ValueError, match="width"):
        beam_search_batch(walk(), starts, width=0, max_len=4)
    with pytest.raises(ValueError, match="start"):
        beam_search_batch(walk(), torch.zeros(3), width=2, max_len=4)
    with pytest.raises(ValueError, match="next_logp"):
        beam_search_batch(walk(next_logp=lambda t, o: torch.zeros(len(t) + 1, VOCAB)), starts, width=2, max_len=4)
    with pytest.raises(ValueError, match="legal"):
        beam_search_batch(walk(legal=lambda t, o: torch.ones(len(t), VOCAB)), starts, width=2, max_len=4)
    with pytest.raises(ValueError, match="keys"):
        beam_search_batch(walk(key=lambda t, o: -torch.ones(len(t), dtype=torch.long)), starts, width=2, max_len=4,
                          merge=True)
    with pytest.raises(ValueError, match="keys"):
        beam_search_batch(walk(key=lambda t, o: torch.ones(len(t))), starts, width=2, max_len=4, merge=True)
    with pytest.raises(ValueError, match="key hook"):
        beam_search_batch(walk(), starts, width=2, max_len=4, merge=True)
