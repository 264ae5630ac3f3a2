"""Pieces of ``kgprobe bench methods`` that are pure arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from kgprobe.bench.methods import _summary, pearson, sample_facts


def test_pearson_needs_three_models():
    assert pearson([0.2, 0.4], [0.5, 0.3]) is None
    # y = 1 - x exactly -> r = -1
    assert pearson([0.1, 0.2, 0.4], [0.9, 0.8, 0.6]) == pytest.approx(-1.0)
    assert pearson([0.1, 0.1, 0.1], [0.9, 0.8, 0.6]) is None  # no spread, r undefined


def test_summary_of_rows():
    # (predicate, edge, correct, chance): 2 of 4 right, chance (0.5 + 0.5 + 0.25 + 0.25) / 4
    rows = [("P", 0, True, 0.5), ("P", 1, False, 0.5), ("P", 2, True, 0.25), ("P", 3, False, 0.25)]
    assert _summary(rows) == {"accuracy": 0.5, "chance": 0.375, "n": 4}
    assert _summary([]) == {"accuracy": None, "chance": None, "n": 0}


def test_sample_facts_takes_active_edges_per_predicate(tiny_kg):
    facts = sample_facts(tiny_kg, 3, np.random.default_rng(0))
    assert set(facts) == {"P36", "P37"}
    assert facts["P36"] == [0, 1]  # only two capital facts
    assert len(facts["P37"]) == 3 and set(facts["P37"]) <= {2, 3, 4, 5, 6, 7}


def _model_entry(accuracies: dict, monitor, valid=3, facts=11, belief=None):
    overall = {m: {"accuracy": a, "chance": 0.0, "n": 11} for m, a in accuracies.items()}
    return {
        "table": {"overall": overall},
        "monitor": {"monitor": monitor, "num_valid": valid, "num_facts": facts},
        "belief": belief,
        "mean_accuracy": round(sum(accuracies.values()) / len(accuracies), 4),
    }


def test_correlations_across_models_skip_models_without_monitor():
    from kgprobe.bench.methods import METHODS, correlations

    # Mean accuracies 0.2, 0.4, 0.6 against MONITOR 0.9, 0.6, 0.3: exactly linear, r = -1.
    # zp-lke accuracies 0.2, 0.3, 0.7 against the same: mean x = 0.6, mean y = 0.4,
    # dx = (0.3, 0, -0.3), dy = (-0.2, -0.1, 0.3): r = (-0.06 - 0.09) / sqrt(0.18 * 0.14)
    # = -0.15 / 0.158745 = -0.944911.
    per_model = {
        "a": _model_entry({m: 0.2 for m in METHODS}, 0.9),
        "b": _model_entry({m: 0.4 for m in METHODS}, 0.6),
        "c": _model_entry({m: 0.6 for m in METHODS}, 0.3),
        "no-anchor": _model_entry({m: 0.5 for m in METHODS}, None, valid=0),
    }
    per_model["a"]["table"]["overall"]["zp-lke"]["accuracy"] = 0.2
    per_model["b"]["table"]["overall"]["zp-lke"]["accuracy"] = 0.3
    per_model["c"]["table"]["overall"]["zp-lke"]["accuracy"] = 0.7
    corr = correlations(per_model)
    assert corr["models"] == ["a", "b", "c"]
    assert corr["by_method"]["zp-lke"] == pytest.approx(-0.944911, abs=1e-6)
    assert corr["by_method"]["hgp"] == pytest.approx(-1.0)
    # "mean_accuracy" is the stored per-model mean (0.2, 0.4, 0.6 here): r = -1, p = 0.
    assert corr["mean_accuracy"] == pytest.approx(-1.0)
    assert corr["mean_accuracy_p_value"] == pytest.approx(0.0, abs=1e-6)
    del per_model["c"]
    assert correlations(per_model)["mean_accuracy"] is None  # two models with MONITOR left


def test_model_table_rows():
    from kgprobe.bench.methods import METHODS, format_model_table

    belief = {"accuracy_mean": 0.25, "accuracy_sd": 0.05, "consistency": 0.5}
    per_model = {
        "m1": _model_entry({m: 0.5 for m in METHODS}, 0.4388, belief=belief),
        "m2": _model_entry({m: 0.25 for m in METHODS}, None, valid=0),
    }
    lines = format_model_table(per_model).splitlines()
    assert lines[2] == "| m1 | 0.50 | 0.50 | 0.50 | 0.50 | 0.50 | 0.50 | 0.50 | 0.439 (3/11) | 0.25 ± 0.05, 0.50 |"
    assert lines[3] == "| m2 | 0.25 | 0.25 | 0.25 | 0.25 | 0.25 | 0.25 | 0.25 | — (0/11) | — |"


def test_overall_summary_has_a_wilson_interval():
    # 1 right of 4: Wilson 95 % with z = 1.959964: centre (0.25 + z²/8) / (1 + z²/4) = 0.4951,
    # half-width z·sqrt(0.25·0.75/4 + z²/64) / (1 + z²/4) = 0.4496 -> [0.0456, 0.6994].
    rows = [("P", 0, True, 0.5), ("P", 1, False, 0.5), ("P", 2, False, 0.5), ("P", 3, False, 0.5)]
    assert _summary(rows, interval=True) == {"accuracy": 0.25, "chance": 0.5, "n": 4, "ci95": [0.0456, 0.6994]}
    assert _summary([], interval=True)["ci95"] is None


def test_paired_comparison_is_an_exact_mcnemar_test():
    from kgprobe.bench.methods import paired_comparison

    # Facts 0-9 judged by both; 10 only by a. Discordant: a alone right on 1, 2, 3, 4, 5 (5),
    # b alone on 6 (1). p = 2 * P(Bin(6, 1/2) <= 1) = 2 * (1 + 6) / 64 = 0.21875.
    a = {e: e <= 5 for e in range(11)}
    b = {e: e in (0, 6) for e in range(10)}
    assert paired_comparison(a, b) == {"n": 10, "a_only": 5, "b_only": 1, "p_value": 0.2188}
    # No discordant fact: no evidence either way, p = 1.
    assert paired_comparison({1: True}, {1: True}) == {"n": 1, "a_only": 0, "b_only": 0, "p_value": 1.0}
    # 7 to 0: p = 2 / 128 = 0.015625.
    assert paired_comparison({e: True for e in range(7)}, {e: False for e in range(7)})["p_value"] == 0.0156


def test_pearson_p_value_with_three_models():
    from kgprobe.bench.methods import pearson_p_value

    # One degree of freedom: t = r / sqrt(1 - r^2) follows a Cauchy law, so
    # p = 1 - 2 atan(|t|) / pi. r = -0.944911: t = -2.886751, p = 0.212296.
    assert pearson_p_value(-0.944911182523068, 3) == pytest.approx(0.212296, abs=1e-6)
    # Four points, r = 0.5: t = 0.5 * sqrt(2 / 0.75) = 0.816497 on 2 df;
    # p = 1 - |t| / sqrt(2 + t^2) = 1 - 0.816497 / 1.632993 = 0.5.
    assert pearson_p_value(0.5, 4) == pytest.approx(0.5, abs=1e-9)
