"""The probes end to end on the real default model (SmolLM2-135M-Instruct). Slow."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from kgprobe.probes import make_probe
from kgprobe.probes.belief import run_belief
from kgprobe.probes.common import ProbeWarning
from kgprobe.probes.kglens import KGLensProbe, LLMJudge, LLMQuestionGenerator
from kgprobe.probes.monitor import run_monitor

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model():
    import torch

    from kgprobe.models.registry import load_model

    torch.set_num_threads(1)
    m = load_model("default")
    yield m
    m.close()


@pytest.fixture(scope="module")
def countries():
    from kgprobe.sources.embedded import load_embedded_kg

    return load_embedded_kg("countries")


def edge_of(kg, subject_label, predicate):
    for j in kg.edges_of_predicate(predicate):
        t = kg.triple(int(j))
        if kg.label(t.subject) == subject_label:
            return int(j)
    raise AssertionError(f"no {predicate} edge for {subject_label}")


def run(kg, model, probe, edge, seed=0):
    task = probe.render(kg, edge, np.random.default_rng(seed))
    scores = model.score(task.score_requests) if task.score_requests else []
    gens = model.generate(task.generate_requests) if task.generate_requests else []
    return task, probe.verify(kg, task, scores, gens)


def test_zp_lke_knows_the_official_language_of_italy(countries, model):
    # Checked by hand on this model with the tab/newline prompt (seeds 0 and 1): with 50
    # language examples "Italian" gets 0.916 / 0.917 of the mass among 100 languages
    # (log-prob -0.27 / -0.41) and is the greedy continuation.
    edge = edge_of(countries, "Italy", "P37")
    task, verdict = run(countries, model, make_probe("zp-lke"), edge)
    assert len({r.context for r in task.score_requests}) == 1 and len(task.score_requests) == 100
    assert verdict.correct and verdict.answer == "Italian" and verdict.detail["gold_prob"] > 0.5
    _, gen = run(countries, model, make_probe("zp-lke-gen"), edge, seed=1)
    assert gen.correct and gen.answer == "Italian"


def test_kglens_wh_and_yes_no_on_a_known_fact(countries, model):
    # The fourth probe of the edge asks "Where is the seat of government of France?" (the
    # fourth P36 template); checked by hand: the model answers "The seat of government of
    # France is Paris."
    edge = edge_of(countries, "France", "P36")
    probe = make_probe("wh", use_alias=False)
    task = probe.render_attempt(countries, edge, np.random.default_rng(0), 3)
    verdict = probe.verify(countries, task, [], model.generate(task.generate_requests))
    assert task.payload["type"] == "wh" and task.question == "Where is the seat of government of France?"
    assert "Paris" in verdict.answer and verdict.correct
    yn = make_probe("yes-no-logprob")
    task, verdict = run(countries, model, yn, edge, seed=1)
    assert 0.0 < verdict.detail["p_yes"] < 1.0 and verdict.answer in ("Yes", "No")


def test_monitor_and_belief_run(countries, model):
    edges = [edge_of(countries, c, "P36") for c in ("France", "Germany", "Italy", "Japan")]
    result = run_monitor(countries, model, edges, rng=np.random.default_rng(0))
    assert result.num_facts == 4
    assert result.num_valid + result.num_invalid_anchor + result.num_no_negatives == 4
    for fact in result.facts:
        if fact.valid:
            assert 0 <= fact.pfd <= 1 and 0 <= fact.ird <= 1 and 0 < fact.anchor_prob <= 1
    belief = run_belief(countries, model, edges[:2], setting="template", max_names=1, num_resamples=200,
                        rng=np.random.default_rng(0))
    # 8 cloze templates of P36 × 1 subject name × 2 facts
    assert belief.num_prompts == 16 and belief.num_facts == 2
    assert 0 <= belief.accuracy_mean <= 1 and 0 <= belief.consistency <= 1
    assert belief.coverage.average <= belief.coverage.maximum <= belief.coverage.oracle


def test_llm_questions_are_cached(countries, model, tmp_path):
    cache = tmp_path / "questions.json"
    generator = LLMQuestionGenerator(model, cache)
    probe = KGLensProbe("wh", questions=generator)
    edge = edge_of(countries, "Germany", "P36")
    first = probe.render(countries, edge, np.random.default_rng(0)).question
    assert generator.generated == 1 and first.endswith("?") and "Berlin" not in first
    again = LLMQuestionGenerator(model, cache)  # a new run reads the cache file
    second = KGLensProbe("wh", questions=again).render(countries, edge, np.random.default_rng(0)).question
    assert second == first and again.generated == 0
    assert len(json.loads(cache.read_text())) == 1
    judge = LLMJudge(model)
    assert judge.judge("What is the capital of Germany?", ["Berlin"], "Berlin is the capital.") in (True, False, None)


def test_every_probe_name_runs(countries, model):
    edge = edge_of(countries, "Italy", "P37")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProbeWarning)
        for name in ("zp-lke", "zp-lke-gen", "hgp", "hgp-gen", "yes-no", "yes-no-logprob", "wh", "easy", "hard"):
            task, verdict = run(countries, model, make_probe(name), edge)
            assert isinstance(verdict.correct, bool) and task.num_queries >= 1


def test_a_margin_focus_run_keeps_each_answer_s_margin_and_resumes_with_them(countries, model, tmp_path):
    """``margin-focus`` on the real model: the engine passes every ZP-LKE answer's margin (its
    verdict's gold log-prob minus the best wrong one) to the PKG, the run file keeps them in
    its states, and a run resumed after round 2 ends where an unbroken one does."""
    import kgprobe

    settings = dict(method="zp-lke", sampler="margin-focus", batch_size=8, budget=32, seed=3, lazy=True,
                    probe_options={"num_examples": 5, "num_distractors": 4}, convergence=False)
    unbroken = kgprobe.probe(countries, model, store=tmp_path / "a.kgrun", **settings).finish()
    probes = unbroken.store.probes()
    assert len(probes) == 32
    count = np.zeros(countries.num_edges, dtype=int)
    total = np.zeros(countries.num_edges)
    for p in probes:
        margin = p.detail["gold_logprob"] - p.detail["best_wrong_logprob"]
        assert (margin > 0) == p.correct
        count[p.edge] += 1
        total[p.edge] += margin
    assert np.array_equal(unbroken.pkg.margin_count, count)
    assert np.allclose(unbroken.pkg.margin_sum, total, rtol=0, atol=1e-9)
    run = kgprobe.probe(countries, model, store=tmp_path / "b.kgrun", **settings)
    for summary in run.rounds():
        if summary.round == 2:
            break
    run.close()
    resumed = kgprobe.resume(tmp_path / "b.kgrun", model)
    assert resumed.is_finished
    assert [(p.edge, p.correct) for p in resumed.store.probes()] == [(p.edge, p.correct) for p in probes]
    assert np.array_equal(resumed.pkg.margin_sum, unbroken.pkg.margin_sum)
