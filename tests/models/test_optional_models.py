"""Optional larger models (installed with `kgprobe models install NAME`); each test skips
with the install command when its model is not installed. CI does not download them."""

from __future__ import annotations

import pytest

from kgprobe.models.base import ScoreRequest
from kgprobe.models.default_model import converted_dir, copy_status

ZP_CONTEXT = "France Paris, Germany Berlin, Italy Rome, Spain"


def _require(name: str):
    if copy_status(converted_dir(name)) != "ready":
        pytest.skip(f"{name} is not installed (run `kgprobe models install {name}`)")
    from kgprobe.models.registry import load_model

    return load_model(name)


@pytest.mark.slow
def test_gemma_uses_bos_and_scores_like_a_plain_forward(plain):
    model = _require("gemma3-270m")
    # Gemma was trained with BOS (GGUF: tokenizer.ggml.add_bos_token = True); its id is 2.
    ids, boundary = model.encode("Hello", " world")
    assert model.add_bos is True and ids[0] == 2 == model.tokenizer.bos_token_id
    assert ids[1:] == model.tokenizer("Hello world", add_special_tokens=False).input_ids
    requests = [ScoreRequest(ZP_CONTEXT, o) for o in (" Madrid", " Lisbon", " Madrid, Spain")]
    results = model.score(requests)
    # These sequences fit Gemma's 512-token sliding window, so the context ran once.
    assert model.sliding_window == 512
    lengths = [len(model.encode(r.context, r.continuation)[0]) for r in requests]
    context = len(model.encode(ZP_CONTEXT, " Madrid")[0]) - 1
    # The context once, then each distinct token prefix after it that predicts a token (an
    # option's last token is a leaf: not run).
    sequences = [model.encode(r.context, r.continuation)[0] for r in requests]
    predicting = {tuple(s[:n]) for s in sequences for n in range(context + 1, len(s))}
    assert model.tokens_run == context + len(predicting) < context + sum(n - context for n in lengths)
    for request, result in zip(requests, results):
        ids, boundary = model.encode(request.context, request.continuation)
        assert result.token_logprobs == pytest.approx(plain(model.model, ids, boundary)[0], abs=1e-4)


@pytest.mark.slow
def test_qwen_coder_shared_prefix_equals_plain_forward(plain):
    model = _require("qwen2.5-coder-0.5b-instruct")
    # Qwen2.5 is trained without BOS (GGUF: add_bos_token = False).
    assert model.add_bos is False
    requests = [ScoreRequest(ZP_CONTEXT, o) for o in (" Madrid", " Lisbon", " Madrid, Spain")]
    for request, result in zip(requests, model.score(requests)):
        ids, boundary = model.encode(request.context, request.continuation)
        # float32 through 24 layers: the packed path (one log-sum-exp per predicting
        # position, over vocabulary slices) sums in another order than a plain forward;
        # measured max |Δ| 1.1e-4 here, far inside the 1e-3 exactness bar of bench scoring.
        assert result.token_logprobs == pytest.approx(plain(model.model, ids, boundary)[0], abs=2e-4)
