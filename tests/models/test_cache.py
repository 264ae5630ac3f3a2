"""Response cache: hits and misses, sampled generations not cached, no partial entries,
two processes on one file."""

from __future__ import annotations

import multiprocessing
import sqlite3

import pytest

from kgprobe.models.base import GenerateRequest, LanguageModel, ScoreRequest, ScoreResult
from kgprobe.models.cache import CachedModel, request_key


class CountingModel(LanguageModel):
    """A deterministic backend that records every request it receives; optionally fails.

    The score of a continuation is minus its length, so a cached answer is checkable
    by hand.
    """

    def __init__(self, fail_on: str | None = None):
        self.seen: list = []
        self.fail_on = fail_on

    @property
    def identity(self) -> str:
        return "counting-v1"

    def score(self, requests):
        self.seen.extend(requests)
        if any(r.continuation == self.fail_on for r in requests):
            raise RuntimeError("backend failed mid-batch")
        return [ScoreResult((-float(len(r.continuation)),), len(r.continuation) == 1) for r in requests]

    def generate(self, requests):
        self.seen.extend(requests)
        return [f"{r.prompt}!{len(self.seen)}" for r in requests]


def _rows(path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def test_score_hits_and_misses(tmp_path):
    backend = CountingModel()
    cached = CachedModel(backend, tmp_path / "cache.sqlite")
    first = cached.score([ScoreRequest("c", " ab"), ScoreRequest("c", "x"), ScoreRequest("c", " ab")])
    # Three requests, two distinct: the repeat inside the batch is sent once.
    assert len(backend.seen) == 2 and (cached.hits, cached.misses) == (1, 2)
    assert [r.token_logprobs for r in first] == [(-3.0,), (-1.0,), (-3.0,)]
    assert [r.is_greedy for r in first] == [False, True, False]
    again = cached.score([ScoreRequest("c", "x", edge=5), ScoreRequest("c", " new")])
    assert len(backend.seen) == 3  # only " new" reached the backend; edge is not in the key
    assert again[0] == first[1] and again[1].token_logprobs == (-4.0,)
    assert _rows(tmp_path / "cache.sqlite") == 3


def test_identity_is_part_of_the_key(tmp_path):
    request = ScoreRequest("c", " ab")
    assert request_key("model-a", request) != request_key("model-b", request)
    assert request_key("model-a", request) == request_key("model-a", ScoreRequest("c", " ab", edge=9))


def test_greedy_generation_cached_sampled_not(tmp_path):
    backend = CountingModel()
    cached = CachedModel(backend, tmp_path / "cache.sqlite")
    greedy = GenerateRequest("q", max_tokens=4)
    sampled = GenerateRequest("q", max_tokens=4, temperature=0.8, seed=1)
    assert cached.generate([greedy]) == ["q!1"]
    assert cached.generate([greedy]) == ["q!1"]  # from the cache
    assert cached.generate([sampled]) == ["q!2"]
    assert cached.generate([sampled]) == ["q!3"]  # sampled: always fresh
    assert len(backend.seen) == 3
    assert _rows(tmp_path / "cache.sqlite") == 1


def test_failed_backend_leaves_no_partial_entry(tmp_path):
    backend = CountingModel(fail_on="boom")
    cached = CachedModel(backend, tmp_path / "cache.sqlite")
    with pytest.raises(RuntimeError, match="mid-batch"):
        cached.score([ScoreRequest("c", "ok"), ScoreRequest("c", "boom")])
    assert _rows(tmp_path / "cache.sqlite") == 0
    # The good request is not remembered either: the next call sends it again.
    backend.fail_on = None
    cached.score([ScoreRequest("c", "ok")])
    assert [r.continuation for r in backend.seen] == ["ok", "boom", "ok"]


def test_cache_persists_across_instances(tmp_path):
    path = tmp_path / "cache.sqlite"
    CachedModel(CountingModel(), path).score([ScoreRequest("c", "abc")])
    backend = CountingModel()
    result = CachedModel(backend, path).score([ScoreRequest("c", "abc")])
    assert backend.seen == [] and result[0].token_logprobs == (-3.0,)


def _worker(path: str, offset: int, out) -> None:
    cached = CachedModel(CountingModel(), path)
    for i in range(30):
        cached.score([ScoreRequest("ctx", "x" * (1 + i + offset))])
    out.put(len(cached.model.seen))


def test_two_processes_share_one_file(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, offset, out)) for offset in (0, 15)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    # Lengths 1..30 and 16..45 were asked, overlapping on 16..30: 45 distinct keys,
    # each stored once however the two writers interleaved.
    assert _rows(path) == 45
    backend = CountingModel()
    results = CachedModel(backend, path).score([ScoreRequest("ctx", "x" * n) for n in range(1, 46)])
    assert backend.seen == [] and [r.token_logprobs[0] for r in results] == [-float(n) for n in range(1, 46)]


def test_cached_real_model_scores_unchanged(tiny, tmp_path):
    cached = CachedModel(tiny, tmp_path / "cache.sqlite")
    requests = [ScoreRequest("France Paris, Spain", " Madrid"), ScoreRequest("Japan", " Tokyo")]
    direct = tiny.score(requests)
    assert cached.score(requests) == direct
    assert cached.score(requests) == direct and cached.hits == 2
