"""BELIEF and MONITOR formulas on hand-computed numbers, and their prompt construction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kgprobe.models.base import ScoreResult
from kgprobe.probes.belief import (
    INSTRUCTION,
    accuracy_fluctuation,
    answers_agree,
    build_prompts,
    consistency,
    coverage,
    demonstrations,
    overconfidence,
    render_prompt,
)
from kgprobe.probes.monitor import MonitorFact, fact_distances, monitor_score, monitor_task, summarize


def sr(*probs, greedy=True):
    return ScoreResult(tuple(math.log(p) for p in probs), greedy)


# -- BELIEF --------------------------------------------------------------------------------


def test_accuracy_fluctuation_by_hand():
    # fact 1 always right, fact 2 always wrong, fact 3 right under one of two prompts:
    # each resample's accuracy is 2/3 or 1/3 with probability ½ -> mean ½, range ⅓, SD ⅙.
    mean, spread, sd = accuracy_fluctuation([[1, 1], [0, 0], [1, 0]], 20_000, np.random.default_rng(0))
    assert mean == pytest.approx(0.5, abs=0.01)
    assert spread == pytest.approx(1 / 3)
    assert sd == pytest.approx(1 / 6, abs=0.002)
    # one prompt per fact: no fluctuation at all
    assert accuracy_fluctuation([[1], [0], [1], [1]], 50, np.random.default_rng(0)) == (0.75, 0.0, 0.0)


def test_consistency_by_hand():
    # fact A: (Paris, paris.) agree, (Paris, Lyon) and (paris., Lyon) do not -> 1/3
    # fact B: "Berlin" occurs in "the city of Berlin" -> 1; fact C has one prompt: ignored
    value = consistency([["Paris", "paris.", "Lyon"], ["Berlin", "the city of Berlin"], ["Rome"]])
    assert value == pytest.approx((1 / 3 + 1) / 2)
    assert answers_agree("New York", "new york city") and not answers_agree("York", "Yorkshire")
    assert not answers_agree("", "")


def test_overconfidence_by_hand():
    # 10 prompts, one per bin: Σ (1/10)(conf − acc) = mean(conf) − mean(acc) = 0.5 − 0.3
    conf = [0.95, 0.85, 0.75, 0.65, 0.55, 0.45, 0.35, 0.25, 0.15, 0.05]
    acc = [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    assert overconfidence(conf, acc) == pytest.approx(0.2)
    # underconfident model: negative
    assert overconfidence([0.1, 0.2], [True, True]) == pytest.approx(-0.85)


def test_coverage_by_hand():
    records = [
        # fact 1 (P36): right only with template 0 and its first subject name
        (1, "P36", 0, True), (1, "P36", 0, False), (1, "P36", 1, False), (1, "P36", 1, False),
        # fact 2 (P36): right only with template 1
        (2, "P36", 0, False), (2, "P36", 1, True),
        # fact 3 (P37): never right
        (3, "P37", 0, False), (3, "P37", 1, False),
    ]
    cov = coverage(records)
    assert cov.average == pytest.approx(2 / 8)
    # P36: template 0 -> {fact1}, template 1 -> {fact2}: best ½ over 2 facts; P37: 0 over 1 fact
    assert cov.maximum == pytest.approx((0.5 * 2 + 0 * 1) / 3)
    assert cov.oracle == pytest.approx(2 / 3)


def test_belief_prompts(tiny_kg):
    zero = build_prompts(tiny_kg, [0], setting="zero-shot", rng=np.random.default_rng(0))
    # P36 has 4 hgp + 4 wh templates -> 8 cloze prompts, × 2 names of France
    assert len(zero) == 16
    assert zero[0].text == f"{INSTRUCTION}\nQ: The capital of France is [MASK].\nA:"
    assert zero[1].text == f"{INSTRUCTION}\nQ: The capital of French Republic is [MASK].\nA:"
    assert render_prompt("X is [MASK].", [("Y is [MASK].", "y")]) == f"{INSTRUCTION}\nQ: Y is [MASK].\nA: y.\nQ: X is [MASK].\nA:"
    # X-template for France's capital: the only other capital fact is Germany's, same template
    demos = demonstrations(tiny_kg, 0, 3, "template", 4, np.random.default_rng(0))
    assert demos == [("The seat of government of Germany is [MASK].", "Berlin")]
    # X-relation never shows the target (s, p); X-random may draw from any predicate
    for seed in range(20):
        rel = demonstrations(tiny_kg, 3, 0, "relation", 4, np.random.default_rng(seed))
        assert all("Switzerland" not in q for q, _ in rel) and len(rel) == 2  # France and Germany languages
        rnd = demonstrations(tiny_kg, 0, 0, "random", 4, np.random.default_rng(seed))
        assert len(rnd) == 4 and all(not (q.startswith("The capital of France") or "France's capital" in q) for q, _ in rnd)


# -- MONITOR ---------------------------------------------------------------------------------


def test_monitor_by_hand():
    # anchor [0.8, 0.6]; framings [0.4, 0.6] and [0.8, 0.2] -> PFD = mean(0.2, 0.2) = 0.2
    # negatives [0.2, 0.6] and [0.8, 0.6] -> IRD = mean(0.3, 0.0) = 0.15
    fact = fact_distances(0, sr(0.8, 0.6), [sr(0.4, 0.6), sr(0.8, 0.2)], [sr(0.2, 0.6), sr(0.8, 0.6)])
    assert fact.valid and fact.pfd == pytest.approx(0.2) and fact.ird == pytest.approx(0.15)
    assert fact.anchor_prob == pytest.approx(0.7)
    # sqrt((0.04 + 0.0225 + 0.03) / 3) / 0.7 = 0.1755942 / 0.7
    assert monitor_score([fact]) == pytest.approx(0.2508489, abs=1e-6)
    # a second fact: anchor [0.5], framing [0.5], negative [0.1] -> PFD 0, IRD 0.4
    second = fact_distances(1, sr(0.5), [sr(0.5)], [sr(0.1)])
    # (0.1755942 + sqrt(0.16 / 3)) / (0.7 + 0.5) = (0.1755942 + 0.2309401) / 1.2
    assert monitor_score([fact, second]) == pytest.approx(0.3387786, abs=1e-6)


def test_monitor_skips_and_counts_invalid_anchors():
    invalid = fact_distances(2, sr(0.3, 0.2, greedy=False), [sr(0.3, 0.2)], [sr(0.3, 0.2)])
    assert not invalid.valid and invalid.reason == "invalid anchor"
    valid = fact_distances(0, sr(0.8, 0.6), [sr(0.4, 0.6), sr(0.8, 0.2)], [sr(0.2, 0.6), sr(0.8, 0.6)])
    no_neg = fact_distances(3, sr(0.9), [sr(0.9)], [])
    result = summarize([valid, invalid, no_neg])
    assert result.num_facts == 3 and result.num_valid == 1
    assert result.num_invalid_anchor == 1 and result.num_no_negatives == 1
    assert result.score == pytest.approx(0.2508489, abs=1e-6)
    assert math.isnan(monitor_score([MonitorFact(0, False, "invalid anchor")]))


def test_monitor_drops_framings_with_another_token_count():
    # the 1-token framing cannot be compared per token with a 2-token anchor
    fact = fact_distances(0, sr(0.8, 0.6), [sr(0.4, 0.6), sr(0.5)], [sr(0.8, 0.6)])
    assert fact.valid and fact.pfd == pytest.approx(0.2) and fact.ird == 0.0 and fact.dropped_framings == 1


def test_monitor_requests(tiny_kg):
    task = monitor_task(tiny_kg, 0, np.random.default_rng(0), num_framings=7, num_negatives=5)
    contexts = [r.context for r in task.requests]
    assert contexts[0] == "Paris.\nQ: What is the capital of France?\nA:"
    # 3 other wh-templates then 4 HGP prefixes = 7 framings
    assert contexts[1:8] == [
        "Q: Which city is the capital of France?\nA:",
        "Q: What is the capital city of France?\nA:",
        "Q: Where is the seat of government of France?\nA:",
        "The capital of France is",
        "The capital city of France is",
        "France's capital is",
        "The seat of government of France is",
    ]
    # C − T of France's capital is {Berlin}: one negative context
    assert contexts[8:] == ["Berlin.\nQ: What is the capital of France?\nA:"] and task.num_negatives == 1
    assert {r.continuation for r in task.requests} == {" Paris"}
