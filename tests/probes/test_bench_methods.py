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
