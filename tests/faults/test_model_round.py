"""Defect 6: a round against a server that leaves requests unanswered ends at its
deadline, and the answered requests of a failed round are kept for the resume."""

from __future__ import annotations

import pytest

import kgprobe
from kgprobe.errors import ModelError, PartialBatchError
from kgprobe.models.base import ScoreRequest
from kgprobe.models.openai_backend import OpenAICompatibleModel
from kgprobe.store import RunStore

from .conftest import SETTINGS


def model(server, mode, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("max_retries", 0)
    return OpenAICompatibleModel("m", server.url(mode, "/v1"), label="fake", **kw)


def test_the_round_deadline_ends_a_round_and_keeps_its_answers(fake_openai):
    requests = [ScoreRequest(f"Question {i}:", f" answer {i}") for i in range(8)]
    with model(fake_openai, "hangevery2", timeout=60, round_timeout=2, max_concurrency=8) as m:
        with pytest.raises(PartialBatchError, match=r"deadline of 2 s passed with \d of 8 requests answered") as info:
            m.score(requests)
    answered = info.value.answered
    assert 1 <= len(answered) <= 7
    with model(fake_openai, "ok") as m:
        full = m.score(requests)
    for index, result in answered.items():
        assert result == full[index]


def test_round_timeout_must_be_positive():
    with pytest.raises(Exception, match="round_timeout must be a number of seconds > 0"):
        OpenAICompatibleModel("m", "http://127.0.0.1:9/v1", round_timeout=True)


def test_a_failed_round_keeps_its_answers_and_the_resume_asks_only_for_the_rest(tmp_path, countries, fake_openai):
    settings = dict(SETTINGS, budget=16 * 2)
    path = tmp_path / "kept.kgrun"
    reference = kgprobe.probe(countries, model(fake_openai, "ok", max_concurrency=1), store=tmp_path / "ref.kgrun",
                              **settings)
    ref_probes = [(p.round, p.pos, p.edge, p.correct, p.answer) for p in reference.store.probes()]
    reference.close()
    # failfrom70: 64 requests of round 1 are answered, the first 6 of round 2, then every
    # request fails for good (400, not retried).
    start = fake_openai.counts.get("failfrom70", 0)
    assert start == 0
    failing = kgprobe.probe(countries, model(fake_openai, "failfrom70", max_concurrency=1), store=path, lazy=True,
                            **settings)
    with pytest.raises(ModelError, match=r"6 of 64 score answers of round 2 are kept in the run file"):
        failing.finish()
    failing.close()
    with RunStore.open(path, verify=False) as store:
        assert store.last_round() == 1
    before = fake_openai.counts.get("ok", 0)
    resumed = kgprobe.resume(path, model(fake_openai, "ok", max_concurrency=1))
    asked = fake_openai.counts["ok"] - before
    probes = [(p.round, p.pos, p.edge, p.correct, p.answer) for p in resumed.store.probes()]
    resumed.close()
    assert asked == 64 - 6  # the kept answers were not paid for twice
    assert probes == ref_probes
