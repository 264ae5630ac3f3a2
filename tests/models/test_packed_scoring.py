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


def _predicting_prefixes(sequences):
    """Trie nodes with a child (proper prefixes): the ones whose output predicts a token or
    whose keys a later token needs. A leaf (a sequence's last token that no other sequence
    extends) predicts nothing, so the packed path does not run it."""
    return len({tuple(s[:n]) for s in sequences for n in range(1, len(s))})


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
    assert tiny64.tokens_run == _predicting_prefixes(sequences) < _distinct_prefixes(sequences)


@pytest.mark.parametrize("split", [True, False])
def test_chains_then_trees_equal_the_plain_forward(tiny64, plain, monkeypatch, split):
    # Every chain long enough for the two-pass layout (causal chains, then trees over the
    # cached keys), or none: both give the plain forward's log-probs and greedy flags.
    from kgprobe.models import hf_scoring

    monkeypatch.setattr(hf_scoring, "SPLIT_MIN_CHAIN", 1)
    monkeypatch.setattr(tiny64, "split_chains", split)
    requests = _requests()
    results = tiny64.score(requests)
    for request, result in zip(requests, results):
        ids, boundary = tiny64.encode(request.context, request.continuation)
        expected, greedy = plain(tiny64.model, ids, boundary)
        assert result.token_logprobs == pytest.approx(expected, abs=2e-5)
        assert result.is_greedy == all(greedy)


def test_sliced_output_layer_equals_the_full_logits(tiny64):
    # The log-sum-exp over vocabulary slices equals the full one; the argmax is found only
    # where a wanted token lies in the slice holding the maximum, so every greedy flag
    # (argmax == wanted token) equals the full argmax's, for wanted tokens that are the
    # argmax, share its slice, or lie elsewhere.
    import torch

    from kgprobe.models.hf_backend import SLICE as _SLICE

    hidden = torch.randn(40, 64, generator=torch.Generator().manual_seed(1)) * 3
    with torch.inference_mode():
        logits = hidden @ tiny64.model.get_output_embeddings().weight.T
        top = logits.argmax(dim=1)
        rows = torch.arange(40).repeat_interleave(3)
        tokens = torch.stack([top, (top + 1) % _SLICE + top // _SLICE * _SLICE, (top + 7 * _SLICE) % 49152], 1)
        tokens = tokens.reshape(-1)
        lse, index = tiny64._position_stats(hidden, (rows, tokens))
    assert lse.tolist() == pytest.approx(torch.logsumexp(logits, dim=1).tolist(), abs=1e-5)
    assert ((index[rows] == tokens) == (top[rows] == tokens)).all()
    assert (index == top).all()  # every row wants its argmax here
