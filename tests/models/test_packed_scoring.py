"""Prefix-tree packed scoring equals the plain full-sequence forward, on the ZP-LKE shapes
of real runs (tab between subject and object, newline between facts): each fact with its
own examples, facts sharing one example block, options sharing first tokens."""

from __future__ import annotations

import pytest

from kgprobe.models.base import ScoreRequest

FACTS = [("France", "Paris"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Japan", "Tokyo"), ("Chile", "Santiago")]
OPTIONS = ["Paris", "San Marino", "San José", "Santiago", "Buenos Aires", "Rome", "Ro"]


def _context(examples, subject):
    return "".join(f"{s}\t{o}\n" for s, o in examples) + subject


def _requests():
    own = [ScoreRequest(_context([f for f in FACTS if f[0] != s][:k], s), "\t" + o)
           for k, (s, _) in enumerate(FACTS, start=1) for o in OPTIONS]
    shared = [ScoreRequest(_context(FACTS[:3], s), "\t" + o) for s in ("Peru", "Chad") for o in OPTIONS]
    return own + shared


def _distinct_prefixes(sequences):
    """Nodes of the token trie, counted independently of the planner."""
    return len({tuple(s[:n]) for s in sequences for n in range(1, len(s) + 1)})


@pytest.fixture(scope="module")
def tiny64():
    from kgprobe.models.registry import load_model

    return load_model("tiny-random", device="cpu")


def test_tiny_random_is_the_documented_network(tiny64):
    config = tiny64.model.config
    assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size) == (2, 64, 256)
    assert config.vocab_size == 49152 and str(tiny64.dtype) == "torch.float32"
    assert tiny64.device.type == "cpu"


def test_packed_equals_plain_forward_on_the_tiny_model(tiny64, plain):
    requests = _requests()
    results = tiny64.score(requests)
    for request, result in zip(requests, results):
        ids, boundary = tiny64.encode(request.context, request.continuation)
        expected, greedy = plain(tiny64.model, ids, boundary)
        assert result.token_logprobs == pytest.approx(expected, abs=2e-5)
        assert result.is_greedy == all(greedy)


def test_each_distinct_token_prefix_runs_once(tiny64):
    # Two contexts sharing an example block (one family: the block runs once as its
    # prefix) and one starting with another token (its own family); options sharing
    # first tokens ("San ...") share tree nodes. So the count is the trie's.
    contexts = [_context(FACTS[:3], "Peru"), _context(FACTS[:3], "Chad"), _context(FACTS[3:4], "Chile")]
    requests = [ScoreRequest(c, "\t" + o) for c in contexts for o in OPTIONS]
    sequences = [tiny64.encode(r.context, r.continuation)[0] for r in requests]
    assert len({s[0] for s in sequences}) == 2  # "France", "Japan"
    tiny64.tokens_run = tiny64.tokens_padded = 0
    tiny64.score(requests)
    assert tiny64.tokens_run == _distinct_prefixes(sequences)


def test_packed_equals_the_old_scoring_path(tiny64):
    from kgprobe.bench.baseline_scoring import BaselineScorer

    requests = _requests()
    for new, old in zip(tiny64.score(requests), BaselineScorer(tiny64).score(requests)):
        assert new.token_logprobs == pytest.approx(old.token_logprobs, abs=2e-5)
        assert new.is_greedy == old.is_greedy


@pytest.mark.slow
def test_packed_equals_plain_forward_on_the_default_model(smol, plain):
    requests = _requests()[:: 3]
    results = smol.score(requests)
    for request, result in zip(requests, results):
        ids, boundary = smol.encode(request.context, request.continuation)
        expected, greedy = plain(smol.model, ids, boundary)
        assert result.token_logprobs == pytest.approx(expected, abs=1e-4)
        assert result.is_greedy == all(greedy)
