"""Tokenize-once encoding (BatchEncoder) gives exactly the ids and boundary of pair
tokenization (context + continuation tokenized together), with the default tokenizer."""

from __future__ import annotations

import random

import pytest

from kgprobe.models.base import ScoreRequest
from kgprobe.models.testing import default_tokenizer
from kgprobe.models.tokens import BatchEncoder, encode_pair

EOS = 2  # SmolLM2's <|im_end|>: the start token when there is no BOS

# (context, continuation, ids, boundary): ids read off by decoding each one by hand.
CASES = [
    # ZP-LKE with tab between subject and object, newline between facts.
    ("Italy\tRome\nFrance", "\tParis", [46831, 197, 46292, 198, 33488, 197, 38634], 5),
    ("Italy\tRome\nFrance\t", "Paris", [46831, 197, 46292, 198, 33488, 197, 38634], 6),
    # No leading space, and a merge across the boundary: " France" straddles it and is scored.
    ("Rome, Fran", "ce", [46292, 28, 4649], 2),
    # Newline then newline: two tokens here; the second one starts the continuation.
    ("a\n", "\nb", [81, 198, 198, 82], 2),
    # Tab at the end of the context, space-led option.
    ("x\t", " Paris", [104, 197, 7042], 2),
    # Empty context: conditioned on the start token.
    ("", "Paris", [EOS, 38634], 1),
    # A special token in the context goes through pair tokenization.
    ("<|im_start|>user\nFrance", "\tParis", [1, 4093, 198, 33488, 197, 38634], 4),
    ("Spain Madrid, France", " Paris", [49028, 28030, 28, 4649, 7042], 4),
]


@pytest.fixture(scope="module")
def tok():
    return default_tokenizer()


def test_the_default_tokenizer_takes_the_tokenize_once_path(tok):
    assert BatchEncoder(tok, add_bos=False, start=EOS).splits_safely


@pytest.mark.parametrize("context,continuation,ids,boundary", CASES)
def test_hand_checked_boundaries(tok, context, continuation, ids, boundary):
    got = BatchEncoder(tok, add_bos=False, start=EOS).encode([ScoreRequest(context, continuation)])[0]
    assert (got.ids, got.boundary) == (ids, boundary)
    pair = encode_pair(tok, context, continuation, add_bos=False, start=EOS)
    assert (pair.ids, pair.boundary) == (ids, boundary)


def test_bos_models_get_bos_first_and_the_boundary_moves_by_one(tok):
    got = BatchEncoder(tok, add_bos=True, start=EOS).encode([ScoreRequest("Rome, Fran", "ce")])[0]
    assert got.ids == [1, 46292, 28, 4649] and got.boundary == 3
    # The head shared by every request with this context: BOS + "Rome".
    assert got.shared == 2


def test_every_option_of_a_context_shares_its_head(tok):
    context = "Italy\tRome\nSpain\tMadrid\nFrance"
    encoded = BatchEncoder(tok, add_bos=False, start=EOS).encode(
        [ScoreRequest(context, "\t" + o) for o in ("Paris", "Lyon", "Nice")])
    heads = {tuple(e.ids[: e.shared]) for e in encoded}
    # Italy \t Rome \n Spain \t Mad rid: up to the context's second-to-last pre-token ("\n").
    assert len(heads) == 1 and encoded[0].shared == 8
    assert encoded[0].ids[:8] == [46831, 197, 46292, 198, 49028, 197, 24405, 4298]


@pytest.mark.parametrize("add_bos", [False, True])
def test_random_tricky_pairs_equal_pair_tokenization(tok, add_bos):
    pieces = ["a", "b", " ", "  ", "\t", "\n", "\n\n", "Fran", "ce", " Paris", "1", "23", "456", "'s", "'",
              "<|im_", "start|>", "<|im_start|>", "é", "日本", ",", ", ", ".", " San", " José", "x\t", "\ty",
              "\r\n", "!!", "O'", "Neill"]
    rng = random.Random(7)
    requests = []
    for _ in range(300):
        context = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        for _ in range(rng.randint(1, 3)):
            requests.append(ScoreRequest(context, "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))))
    got = BatchEncoder(tok, add_bos=add_bos, start=EOS).encode(requests)
    for request, enc in zip(requests, got):
        pair = encode_pair(tok, request.context, request.continuation, add_bos=add_bos, start=EOS)
        assert (enc.ids, enc.boundary) == (pair.ids, pair.boundary), request


def test_a_tokenizer_of_another_kind_uses_batched_pair_tokenization():
    tok = default_tokenizer()
    encoder = BatchEncoder(tok, add_bos=False, start=EOS)
    encoder.splits_safely = False  # as for a SentencePiece or normalizing tokenizer
    requests = [ScoreRequest(c, o) for c, o, _, _ in CASES]
    for (context, continuation, ids, boundary), enc in zip(CASES, encoder.encode(requests)):
        assert (enc.ids, enc.boundary) == (ids, boundary)
        assert enc.shared == 0


@pytest.mark.parametrize("normalizer,takes_the_fast_path", [
    # transformers 5.17's GGUF conversion writes this empty sequence where later releases
    # write no normalizer: it changes nothing, so the fast path stays.
    ("empty sequence", True),
    # A real normalizer could change text across the cut: pair tokenization instead.
    ("NFC", False),
])
def test_an_empty_normalizer_keeps_the_tokenize_once_path(tok, normalizer, takes_the_fast_path):
    import copy

    from tokenizers import normalizers

    variant = copy.deepcopy(tok)
    variant.backend_tokenizer.normalizer = {"empty sequence": normalizers.Sequence([]),
                                            "NFC": normalizers.NFC()}[normalizer]
    encoder = BatchEncoder(variant, add_bos=False, start=EOS)
    assert encoder.splits_safely is takes_the_fast_path
    requests = [ScoreRequest(c, o) for c, o, _, _ in CASES]
    for (context, continuation, ids, boundary), enc in zip(CASES, encoder.encode(requests)):
        assert (enc.ids, enc.boundary) == (ids, boundary)
