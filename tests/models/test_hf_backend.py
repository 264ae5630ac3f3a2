"""transformers backend on the tiny random model: tokenization boundary, BOS, shared-prefix
scoring against a plain full-sequence forward, greedy flag, batching, errors."""

from __future__ import annotations

import pytest

from kgprobe.errors import InputError, ModelError
from kgprobe.models.base import GenerateRequest, ScoreRequest
from kgprobe.models.hf_backend import TransformersModel
from kgprobe.models.testing import tiny_model

ZP_CONTEXT = "France Paris, Germany Berlin, Italy Rome, Spain"
OPTIONS = [" Madrid", " Paris", " Lisbon", " Madrid, Spain", " Mad", " Buenos Aires", " Rome"]


def _ids(tok, text):
    return tok(text, add_special_tokens=False).input_ids


def test_boundary_uses_offsets_not_separate_tokenization(tiny):
    tok = tiny.tokenizer
    # "France Paris, Spain Madrid" tokenizes as France| Paris|,| Spain| Madrid (checked by hand
    # with the tokenizer); the context is the first 4 tokens, so scoring starts at index 4.
    ids, boundary = tiny.encode("France Paris, Spain", " Madrid")
    assert ids == _ids(tok, "France Paris, Spain Madrid")
    assert boundary == 4
    assert tok.decode(ids[boundary:]) == " Madrid"
    # "New Yor" + "k": " York" is one token spanning the boundary (" Yor" | "k"). It holds
    # continuation text, so it is scored; tokenizing apart would give " Yor" + "k".
    ids, boundary = tiny.encode("New Yor", "k")
    assert ids == _ids(tok, "New York") and len(ids) == 2
    assert boundary == 1


def test_bos_policy_is_explicit():
    with_bos = tiny_model(seed=0, add_bos=True)
    without = tiny_model(seed=0, add_bos=False)
    tok = with_bos.tokenizer
    ids, boundary = with_bos.encode("Hello", " world")
    assert ids[0] == tok.bos_token_id == 1
    assert ids[1:] == _ids(tok, "Hello world") and boundary == 2
    ids, boundary = without.encode("Hello", " world")
    assert ids == _ids(tok, "Hello world") and boundary == 1
    # Empty context and no BOS: the first token is conditioned on EOS (id 2 in SmolLM2).
    ids, boundary = without.encode("", "Hello")
    assert ids == [tok.eos_token_id, 19556] and boundary == 1
    assert "bos=1" in with_bos.identity and "bos=0" in without.identity


def test_score_matches_plain_forward(tiny, plain):
    requests = [ScoreRequest(ZP_CONTEXT, o) for o in OPTIONS] + [
        ScoreRequest("Japan", " Tokyo"),
        ScoreRequest("", "Hello there"),
        ScoreRequest(ZP_CONTEXT + " Madrid, Japan", " Tokyo"),
    ]
    results = tiny.score(requests)
    for request, result in zip(requests, results):
        ids, boundary = tiny.encode(request.context, request.continuation)
        expected, greedy = plain(tiny.model, ids, boundary)
        assert result.num_tokens == len(ids) - boundary
        assert result.token_logprobs == pytest.approx(expected, abs=1e-5)
        assert result.is_greedy == all(greedy)
        assert result.logprob == pytest.approx(sum(expected), abs=1e-5)


def test_shared_prefix_runs_each_token_once(tiny):
    # One context, options whose first tokens all differ: the minimum work is the context
    # once plus each option's own tokens but its last (a leaf predicts nothing), and that
    # is exactly what is run.
    options = [" Madrid", " Lisbon", " Berlin is big"]
    model = tiny_model(seed=0)
    context_tokens = len(_ids(model.tokenizer, ZP_CONTEXT))
    option_tokens = [len(model.encode(ZP_CONTEXT, o)[0]) - context_tokens for o in options]
    assert option_tokens == [1, 1, 3]  # " Berlin| is| big"
    model.score([ScoreRequest(ZP_CONTEXT, o) for o in options])
    assert model.tokens_run == context_tokens + 2  # " Berlin", " is"; not the leaves Madrid, Lisbon, big


def test_two_level_sharing_zero_prompt_shape(plain):
    # Two facts after one shared example prefix, each fact's subject shared by its options:
    # prefix once + each subject once + each option's tokens but its last (a leaf).
    model = tiny_model(seed=0)
    tok = model.tokenizer
    prefix = "France Paris, Germany Berlin, Italy Rome,"
    facts = {" Spain": [" Madrid", " Lisbon"], " Japan": [" Tokyo", " Kyoto", " Osaka"]}
    requests = [ScoreRequest(prefix + s, o) for s, opts in facts.items() for o in opts]
    results = model.score(requests)
    n_prefix = len(_ids(tok, prefix))
    n_subjects = sum(len(_ids(tok, s)) for s in facts)  # " Spain", " Japan": 1 token each
    n_options = sum(len(_ids(tok, o)) for opts in facts.values() for o in opts)
    assert (n_prefix, n_subjects) == (len(_ids(tok, prefix)), 2)
    assert model.tokens_run == n_prefix + n_subjects + n_options - 5  # 5 options, 5 leaves
    for request, result in zip(requests, results):
        ids, boundary = model.encode(request.context, request.continuation)
        assert result.token_logprobs == pytest.approx(plain(model.model, ids, boundary)[0], abs=1e-5)


def test_small_batches_give_same_scores(tiny):
    requests = [ScoreRequest(ZP_CONTEXT, o) for o in OPTIONS] + [ScoreRequest("Japan", " Tokyo")]
    reference = tiny.score(requests)
    small = tiny_model(seed=0, batch_size=1, batch_tokens=24)
    for a, b in zip(reference, small.score(requests)):
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-5)


def test_greedy_flag(tiny, plain):
    tok = tiny.tokenizer
    ids = _ids(tok, ZP_CONTEXT)
    _, _ = plain(tiny.model, ids, len(ids))  # warm
    import torch

    with torch.no_grad():
        top = int(tiny.model(torch.tensor([ids])).logits[0, -1].argmax())
    top_text = tok.decode([top])
    other = tok.decode([top + 1])
    # The argmax token's text must tokenize back to itself after the context for the test to
    # be meaningful; random weights make that likely, check it explicitly.
    if tiny.encode(ZP_CONTEXT, top_text)[0][len(ids):] != [top]:
        pytest.skip(f"argmax token {top_text!r} does not round-trip through the tokenizer")
    greedy, not_greedy = tiny.score([ScoreRequest(ZP_CONTEXT, top_text), ScoreRequest(ZP_CONTEXT, other)])
    assert greedy.is_greedy is True
    assert not_greedy.is_greedy is False


def test_empty_continuation_is_refused(tiny):
    with pytest.raises(InputError, match="empty continuation"):
        tiny.score([ScoreRequest("France", " Paris"), ScoreRequest("France", "")])


def test_too_long_context_is_refused_not_truncated():
    model = tiny_model(seed=0, max_position_embeddings=64)
    long_context = ", ".join(["France Paris"] * 40)  # 3 tokens per pair: ~120 tokens > 64
    with pytest.raises(InputError, match="model window of 64 tokens"):
        model.score([ScoreRequest(long_context, " Madrid")])
    with pytest.raises(InputError, match="window of 64"):
        model.generate([GenerateRequest(long_context, max_tokens=4)])
    # 60 tokens of prompt + 8 new tokens also exceeds 64.
    prompt = ", ".join(["France Paris"] * 20)
    assert len(_ids(model.tokenizer, prompt)) == 59
    with pytest.raises(InputError, match="max_tokens=8"):
        model.generate([GenerateRequest(prompt, max_tokens=8)])


def test_generate_greedy_matches_manual_argmax_and_stops(tiny):
    import torch

    tok = tiny.tokenizer
    prompt = "The capital of France is"
    ids = _ids(tok, prompt)
    # Independent greedy decode: repeated full forwards, argmax each step.
    manual = list(ids)
    with torch.no_grad():
        for _ in range(6):
            manual.append(int(tiny.model(torch.tensor([manual])).logits[0, -1].argmax()))
    expected = tok.decode(manual[len(ids):], skip_special_tokens=True)
    out = tiny.generate([GenerateRequest(prompt, max_tokens=6), GenerateRequest("Hi", max_tokens=6)])
    assert out[0] == expected
    if len(expected) > 2:
        stop = expected[2:4]
        cut = tiny.generate([GenerateRequest(prompt, max_tokens=6, stop=(stop,))])[0]
        assert cut == expected[: expected.find(stop)]


def test_sampled_generation_is_seeded(tiny):
    request = GenerateRequest("Once upon a time", max_tokens=8, temperature=1.0, seed=7)
    first = tiny.generate([request])
    assert tiny.generate([request]) == first


def test_missing_model_directory(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        TransformersModel(str(tmp_path / "no-such-model"))


def test_directory_without_config(tmp_path):
    with pytest.raises(ModelError, match="no config.json"):
        TransformersModel(str(tmp_path))


def test_corrupt_weight_file(tiny, tmp_path):
    tiny.model.save_pretrained(str(tmp_path))
    tiny.tokenizer.save_pretrained(str(tmp_path))
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 3])  # a truncated download
    with pytest.raises(ModelError, match="cannot load model"):
        TransformersModel(str(tmp_path))


def test_saved_directory_loads_and_scores_identically(tiny, tmp_path):
    tiny.model.save_pretrained(str(tmp_path))
    tiny.tokenizer.save_pretrained(str(tmp_path))
    loaded = TransformersModel(str(tmp_path), add_bos=False, device="cpu")
    requests = [ScoreRequest(ZP_CONTEXT, o) for o in OPTIONS[:3]]
    for a, b in zip(tiny.score(requests), loaded.score(requests)):
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-6)


def test_cuda_device_is_refused_without_gpu(tiny):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present; this checks the no-GPU error")
    with pytest.raises(ModelError, match="no CUDA GPU"):
        tiny_model(seed=0, device="cuda")


def test_cuda_scoring_matches_cpu(tiny):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine: the CUDA path cannot run here")
    gpu = tiny_model(seed=0, device="cuda", dtype="float32")
    requests = [ScoreRequest(ZP_CONTEXT, o) for o in OPTIONS]
    for a, b in zip(tiny.score(requests), gpu.score(requests)):
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-4)


def test_each_request_stops_on_its_own_strings(tiny):
    # Batched greedy requests with different stop strings: one request's stop string must
    # not cut another's output. The tiny model's greedy text for this prompt repeats " is".
    prompt = "The capital of France is"
    full = tiny.generate([GenerateRequest(prompt, max_tokens=6)])[0]
    assert full.count(" is") >= 2
    out = tiny.generate([
        GenerateRequest(prompt, max_tokens=6, stop=("s ",)),
        GenerateRequest(prompt, max_tokens=6, stop=("never appears",)),
    ])
    assert out == [full[: full.find("s ")], full]


def test_two_relation_prefixes_in_one_batch(plain):
    # An engine round mixes relations: each relation's example prefix is run once, not
    # once per fact. Expected work = both prefixes + each subject + each option (by hand:
    # every subject/option below is a single token after its prefix).
    model = tiny_model(seed=0)
    tok = model.tokenizer
    capitals = "France Paris, Germany Berlin, Italy Rome, Poland Warsaw, Austria Vienna,"
    currencies = "Japan yen, Mexico peso, India rupee, Russia ruble, Brazil real, Sweden krona,"
    requests = [
        ScoreRequest(capitals + " Spain", " Madrid"), ScoreRequest(currencies + " China", " dollar"),
        ScoreRequest(capitals + " Spain", " Lisbon"), ScoreRequest(currencies + " China", " euro"),
        ScoreRequest(capitals + " Japan", " Tokyo"),
    ]
    n_caps, n_curr = len(_ids(tok, capitals)), len(_ids(tok, currencies))
    assert (n_caps, n_curr) == (15, 24)
    singles = [" Spain", " China", " Japan", " Madrid", " Lisbon", " dollar", " euro", " Tokyo"]
    assert all(len(_ids(tok, w)) == 1 for w in singles)
    results = model.score(requests)
    assert model.tokens_run == n_caps + n_curr + 3  # 3 subjects; the 5 one-token options are leaves
    for request, result in zip(requests, results):
        ids, boundary = model.encode(request.context, request.continuation)
        assert result.token_logprobs == pytest.approx(plain(model.model, ids, boundary)[0], abs=1e-5)


def test_sliding_window_model_shares_prefix_only_inside_its_window(plain):
    # A Gemma-3 with an 8-token sliding window. Inside the window the window masks nothing,
    # so the shared-prefix path applies and must equal the plain forward; a longer sequence
    # would be cut by the window, so that family is scored whole, also equal to plain.
    model = tiny_model(seed=3, sliding_window=8)
    assert model.sliding_window == 8
    tok = model.tokenizer
    short_context = "France Paris, Spain"  # 4 tokens; + option < 8
    short = [ScoreRequest(short_context, o) for o in (" Madrid", " Lisbon", " Berlin is big")]
    results = model.score(short)
    assert model.tokens_run == len(_ids(tok, short_context)) + 2  # context once; " Berlin", " is" (no leaves)
    for request, result in zip(short, results):
        ids, boundary = model.encode(request.context, request.continuation)
        assert result.token_logprobs == pytest.approx(plain(model.model, ids, boundary)[0], abs=1e-5)

    model.tokens_run = 0
    long = [ScoreRequest(ZP_CONTEXT, o) for o in (" Madrid", " Lisbon")]  # 11 context tokens > 8
    results = model.score(long)
    lengths = [len(model.encode(r.context, r.continuation)[0]) for r in long]
    assert min(lengths) > 8
    assert model.tokens_run == sum(lengths)  # every sequence on its own
    for request, result in zip(long, results):
        ids, boundary = model.encode(request.context, request.continuation)
        expected = plain(model.model, ids, boundary)[0]
        assert result.token_logprobs == pytest.approx(expected, abs=1e-5)
    # The window matters at this length: the same weights without it score differently.
    full = tiny_model(seed=3, sliding_window=64)
    assert full.score(long)[0].token_logprobs != pytest.approx(results[0].token_logprobs, abs=1e-3)


def test_models_without_sliding_layers_have_no_window(tiny):
    assert tiny.sliding_window is None
