"""OpenAICompatibleModel against a local misbehaving server (``fault_server``, conftest).

The fault server's "tokenizer" splits words with their leading whitespace and gives each
token the log-prob -0.1 × its length, so every expected value below is computed by hand.
"""

from __future__ import annotations

import pytest

from kgprobe.errors import InputError, ModelError
from kgprobe.models.base import GenerateRequest, ScoreRequest
from kgprobe.models.openai_backend import OpenAICompatibleModel

SECRET = "sk-test-secret-4711"


def make(url, **kwargs) -> OpenAICompatibleModel:
    kwargs.setdefault("backoff", 0.01)
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("timeout", 5.0)
    return OpenAICompatibleModel("m", url, **kwargs)


def test_score_parses_echo_logprobs_by_character_offsets(faults):
    with make(faults.url("ok")) as model:
        results = model.score([
            # tokens "France" | " Paris": continuation = " Paris" -> -0.1 * 6 = -0.6; its word
            # has 5 letters, so it is the top token: greedy.
            ScoreRequest("France", " Paris"),
            # "France " + "Paris" is the same text; the token " Paris" straddles the boundary
            # (span 6..12, context ends at 7) and counts as continuation: the same -0.6.
            ScoreRequest("France ", "Paris"),
            # " Berlin," (-0.8) and " capital" (-0.8); "Berlin," has 7 letters: not greedy.
            ScoreRequest("Germany", " Berlin, capital"),
        ])
    assert [r.token_logprobs for r in results] == [
        pytest.approx((-0.6,)), pytest.approx((-0.6,)), pytest.approx((-0.8, -0.8))
    ]
    assert [r.is_greedy for r in results] == [True, True, False]
    # One request per score request, with echo, logprobs=1 and the joined text.
    bodies = [b for b in faults.bodies if b[0] == "ok"]
    assert sorted(b[2]["prompt"] for b in bodies) == ["France Paris", "France Paris", "Germany Berlin, capital"]
    assert all(b[2]["echo"] is True and b[2]["logprobs"] == 1 for b in bodies)


def test_generate_cuts_stop_strings_the_server_left_in(faults):
    with make(faults.url("ok")) as model:
        # The fault server answers " <last word>, more" and ignores stop strings.
        out = model.generate([GenerateRequest("The capital of France is", stop=(",",)),
                              GenerateRequest("Name one city", stop=())])
    assert out == [" is", " city, more"]
    assert [b[2]["stop"] for b in faults.bodies if "stop" in b[2]] == [[","]]


def test_401_names_the_variable_and_never_shows_the_key(faults, monkeypatch):
    monkeypatch.setenv("KGPROBE_TEST_KEY", SECRET)
    model = make(faults.url("auth"), api_key_env="KGPROBE_TEST_KEY")
    with pytest.raises(ModelError) as info:
        model.score([ScoreRequest("a", " b")])
    message = str(info.value)
    assert "401" in message and "KGPROBE_TEST_KEY" in message
    assert SECRET not in message
    assert SECRET not in model.identity and SECRET not in repr(model)
    # The key did reach the server (as a bearer token), and a 401 is not retried.
    assert faults.bodies[0][3]["authorization"] == f"Bearer {SECRET}"
    assert faults.counts["auth"] == 1
    model.close()


def test_404_names_the_model(faults):
    with make(faults.url("missing")) as model, pytest.raises(ModelError, match=r"404.*'m'") as info:
        model.generate([GenerateRequest("x")])
    assert "does not exist" in str(info.value)
    assert faults.counts["missing"] == 1  # not retried


def test_429_is_retried_with_backoff_then_succeeds(faults):
    with make(faults.url("r429x2"), max_retries=3) as model:
        out = model.generate([GenerateRequest("hello world")])
        assert out == [" world, more"]
        assert model.retries == 2
    assert faults.counts["r429x2"] == 3  # two 429s, then the answer


def test_500_exhausts_retries_with_a_clear_error(faults):
    with make(faults.url("e500"), max_retries=2) as model, pytest.raises(ModelError) as info:
        model.score([ScoreRequest("a", " b")])
    assert "3 attempts" in str(info.value) and "HTTP 500" in str(info.value)
    assert faults.counts["e500"] == 3


def test_malformed_json_is_a_model_error_not_a_traceback(faults):
    with make(faults.url("badjson")) as model, pytest.raises(ModelError, match="malformed"):
        model.score([ScoreRequest("a", " b")])
    assert faults.counts["badjson"] == 1


def test_server_down_is_retried_then_reported(down_url):
    with make(down_url, max_retries=1) as model, pytest.raises(ModelError, match="cannot connect"):
        model.generate([GenerateRequest("x")])


def test_timeout_is_retried_then_reported(faults):
    # The "hang" mode answers after 2 s; the client gives up after 0.3 s, twice.
    with make(faults.url("hang"), timeout=0.3, max_retries=1) as model, pytest.raises(ModelError, match="timeout"):
        model.generate([GenerateRequest("x")])


def test_a_dead_url_among_several_is_skipped(faults, down_url):
    with make(None, base_urls=[down_url, faults.url("ok")], max_retries=1) as model:
        out = model.generate([GenerateRequest(f"word{i}") for i in range(4)])
        # Round-robin: requests 0 and 2 start on the dead URL and move to the live one.
        assert out == [f" word{i}, more" for i in range(4)]
        assert model.retries == 2
    assert faults.counts["ok"] == 4


def test_concurrency_limit_is_respected(faults):
    # 6 requests of 0.2 s each with at most 2 in flight: the server never sees 3 at once,
    # and does see 2 (they overlap).
    with make(faults.url("slow"), max_concurrency=2) as model:
        out = model.generate([GenerateRequest(f"w{i}") for i in range(6)])
    assert out == [f" w{i}, more" for i in range(6)]
    assert faults.max_inflight["slow"] == 2


def test_endpoint_without_logprobs_cannot_score(faults):
    with make(faults.url("nologprobs")) as model, pytest.raises(ModelError, match="cannot score"):
        model.score([ScoreRequest("a", " b")])


def test_chat_only_endpoint_generates_but_refuses_to_score(faults):
    with make(faults.url("chatonly"), api="chat") as model:
        assert model.can_score is False
        with pytest.raises(ModelError, match="chat-only"):
            model.score([ScoreRequest("a", " b")])
        assert model.generate([GenerateRequest("Who are you?")]) == ["chat: Who are you?"]
    assert faults.counts["chatonly"] == 1  # the refused score never reached the server


def test_bad_input_is_refused_before_any_request(faults):
    with make(faults.url("ok")) as model:
        with pytest.raises(InputError, match="empty continuation"):
            model.score([ScoreRequest("a", "")])
        with pytest.raises(InputError, match="empty context"):
            model.score([ScoreRequest("", "Paris")])
        with pytest.raises(InputError, match="max_tokens"):
            model.generate([GenerateRequest("x", max_tokens=0)])
    with pytest.raises(InputError, match="http"):
        OpenAICompatibleModel("m", "127.0.0.1:8000/v1")
    with pytest.raises(InputError, match="base_url"):
        OpenAICompatibleModel("m")
    assert faults.counts == {}


def test_identity_names_the_model_not_the_servers_nor_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    model = OpenAICompatibleModel("smollm2", base_urls=["http://b:1/v1", "http://a:1/v1/"])
    # The same model name on other servers (or more of them) is the same model.
    assert model.identity == "openai-compatible:smollm2|api=completions|bos=server"
    assert OpenAICompatibleModel("smollm2", "http://c:2/v1").identity == model.identity
    assert OpenAICompatibleModel("x", "http://a:1/v1", label="pinned").identity == (
        "openai-compatible:pinned|api=completions|bos=server"
    )
    model.close()
