"""The real default model (SmolLM2-135M-Instruct): pinned log-likelihoods, shared-prefix
scoring equal to plain full-sequence scoring, BOS, generation, and the GGUF conversion."""

from __future__ import annotations

import json

import pytest

from kgprobe.errors import ModelError
from kgprobe.models import default_model as dm
from kgprobe.models.base import GenerateRequest, ScoreRequest

ZP_CONTEXT = "France Paris, Germany Berlin, Italy Rome, Spain"

# Reference values from a plain transformers forward of the whole sequence on the converted
# copy (AutoModelForCausalLM + log_softmax, written independently of kgprobe's backend:
# tokenize context and context+continuation, check the former is a prefix, read the
# continuation positions). They pin the model and the tokenizer, not the backend's code.
PINNED = {
    (ZP_CONTEXT, " Madrid"): [-2.211545944213867],
    (ZP_CONTEXT, " Lisbon"): [-6.016050338745117],
    ("The capital of Japan is", " Tokyo, the largest city"): [
        -0.35217827558517456, -1.5217804908752441, -2.7917165756225586, -2.3849010467529297, -0.47274595499038696,
    ],
}


@pytest.mark.slow
def test_pinned_log_likelihoods(smol, plain):
    requests = [ScoreRequest(c, o) for c, o in PINNED]
    results = smol.score(requests)
    for request, result in zip(requests, results):
        expected = PINNED[(request.context, request.continuation)]
        assert result.token_logprobs == pytest.approx(expected, abs=1e-4)
        ids, boundary = smol.encode(request.context, request.continuation)
        assert result.token_logprobs == pytest.approx(plain(smol.model, ids, boundary)[0], abs=1e-4)
    # " Tokyo" is the argmax after "The capital of Japan is"; "," after " Tokyo" is not
    # (the reference forward's argmax flags were [True, False, False, False, True]).
    assert results[2].is_greedy is False
    assert smol.score([ScoreRequest("The capital of Japan is", " Tokyo")])[0].is_greedy is True


@pytest.mark.slow
def test_shared_prefix_equals_full_sequence_on_zero_prompt(smol, plain):
    from kgprobe.bench.scoring import build_facts

    facts = build_facts(n_facts=2, n_options=4, n_examples=50, seed=1)
    requests = [ScoreRequest(f["context"], o) for f in facts for o in f["options"]]
    shared = smol.score(requests)
    for request, result in zip(requests, shared):
        ids, boundary = smol.encode(request.context, request.continuation)
        assert len(ids) > 250  # a real 50-example prompt
        assert result.token_logprobs == pytest.approx(plain(smol.model, ids, boundary)[0], abs=1e-4)


@pytest.mark.slow
def test_default_model_has_no_bos(smol):
    ids, boundary = smol.encode("Hello", " world")
    assert smol.add_bos is False and "bos=0" in smol.identity
    assert ids == smol.tokenizer("Hello world", add_special_tokens=False).input_ids
    assert ids[0] != smol.tokenizer.bos_token_id and boundary == 1
    marker = dm.read_marker(dm.converted_dir())
    assert marker["add_bos"] is False and marker["source_sha256"] == dm.GGUF_SHA256


@pytest.mark.slow
def test_generation_greedy_stop_and_chat(smol):
    out = smol.generate([
        GenerateRequest("The capital of France is", max_tokens=8),
        GenerateRequest("The capital of France is", max_tokens=8, stop=(".",)),
        GenerateRequest("What is the capital of France?", max_tokens=12, chat=True),
        GenerateRequest("Germany Berlin, Italy Rome, France", max_tokens=4, stop=(",",)),
    ])
    assert out[0].startswith(" Paris")
    assert out[1] == " Paris"
    assert "Paris" in out[2]
    assert "," not in out[3] and len(out[3]) > 0


def test_copy_status_states(tmp_path):
    import transformers

    copy = tmp_path / "m"
    assert dm.copy_status(copy) == "missing"
    copy.mkdir()
    assert dm.copy_status(copy) == "incomplete"  # an interrupted conversion leaves no marker
    (copy / dm.MARKER_FILE).write_text(json.dumps({"transformers_version": "4.46.3"}))
    expected = "ready" if transformers.__version__.startswith("4.") else "stale"
    assert dm.copy_status(copy) == expected
    (copy / dm.MARKER_FILE).write_text(json.dumps({"transformers_version": transformers.__version__}))
    assert dm.copy_status(copy) == "ready"


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("KGPROBE_CACHE_DIR", str(tmp_path / "k"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert dm.converted_dir() == tmp_path / "k" / "models" / "smollm2-135m-instruct"
    monkeypatch.delenv("KGPROBE_CACHE_DIR")
    assert dm.cache_dir() == tmp_path / "x" / "kgprobe"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert dm.cache_dir() == tmp_path / "h" / ".cache" / "kgprobe"


def test_corrupt_gguf_is_a_model_error(tmp_path):
    source = dm.find_default_gguf()
    broken = tmp_path / "broken.gguf"
    with open(source, "rb") as handle:
        broken.write_bytes(handle.read(1 << 20))  # a download cut after 1 MB
    with pytest.raises(ModelError, match="cannot read the GGUF"):
        dm.convert_gguf(broken, tmp_path / "out", name="broken", add_bos=False)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["broken.gguf"]  # no temp dir left behind


@pytest.mark.slow
def test_conversion_is_faithful_and_atomic(tmp_path, monkeypatch):
    """Convert into a fresh cache dir; the copy's logits equal the GGUF-loaded model's."""
    import torch
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("KGPROBE_CACHE_DIR", str(tmp_path))
    path, converted = dm.install_default()
    assert converted and path == tmp_path / "models" / "smollm2-135m-instruct"
    assert [p.name for p in (tmp_path / "models").iterdir() if p.name.startswith(".") is False] == [path.name]
    marker = dm.read_marker(path)
    assert marker["source_sha256"] == dm.GGUF_SHA256
    assert dm.install_default() == (path, False)  # idempotent, no second conversion

    gguf = dm.find_default_gguf()
    direct = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    copy = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    ids = torch.tensor([[33488, 7042, 28, 7476]])  # "France Paris, Spain"
    with torch.no_grad():
        assert torch.equal(direct(ids).logits, copy(ids).logits)
    # rope_theta survives the round trip (the 4.x/5.x trap): SmolLM2 uses 100000.
    rope = getattr(copy.config, "rope_parameters", None) or {"rope_theta": copy.config.rope_theta}
    assert rope["rope_theta"] == 100000.0


def test_loading_the_converted_copy_prints_nothing(capfd):
    # The engine and the API leave the terminal to their caller: no per-load progress bar,
    # and the caller's own transformers progress-bar setting is left as it was.
    from transformers.utils import logging

    from kgprobe.models.registry import load_model

    # The caller's setting: on (a CLI test run in this process earlier may have turned it
    # off, as `kgprobe run` does for its own process).
    logging.enable_progress_bar()
    model = load_model("default")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert logging.is_progress_bar_enabled()
    model.close()
