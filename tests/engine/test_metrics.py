"""Knowledge metrics, convergence and the design-based accuracy estimate on hand-built tables."""

import math

import numpy as np
import pytest

from kgprobe.errors import InputError
from kgprobe.metrics import (
    ConvergenceMonitor,
    KnowledgeMetrics,
    grouped_metrics,
    kg_accuracy_estimate,
    knowledge_metrics,
    wilson_interval,
)

# Per edge: m successes, n failures.
#   e0 3/1  win              e1 0/2  zero-sense
#   e2 2/2  tie: no win      e3 1/0  win, all-sense
#   e4 0/0  never probed: excluded from every rate
M = np.array([3, 0, 2, 1, 0])
N = np.array([1, 2, 2, 0, 0])


def test_rates_over_probed_edges():
    km = knowledge_metrics(M, N)
    assert km == KnowledgeMetrics(win_rate=2 / 4, zero_sense_rate=1 / 4, all_sense_rate=1 / 4, probed_edges=4)


def test_nothing_probed_gives_nan_not_zero():
    km = knowledge_metrics(np.zeros(3, int), np.zeros(3, int))
    assert km.probed_edges == 0 and math.isnan(km.win_rate)


def test_grouped():
    groups = np.array(["capital", "capital", "currency", "currency", "language"])
    out = grouped_metrics(M, N, groups)
    # capital: e0 win, e1 zero-sense. currency: e2 tie, e3 win + all-sense. language: unprobed.
    assert out["capital"] == KnowledgeMetrics(0.5, 0.5, 0.0, 2)
    assert out["currency"] == KnowledgeMetrics(0.5, 0.0, 0.5, 2)
    assert set(out) == {"capital", "currency"}
    with pytest.raises(InputError, match="labels"):
        grouped_metrics(M, N, ["a"])


def test_negative_counts_rejected():
    with pytest.raises(InputError, match="negative"):
        knowledge_metrics(np.array([1, -1]), np.array([0, 0]))


def km(w, z, a):
    return KnowledgeMetrics(w, z, a, 10)


def test_convergence_window_and_tolerance():
    mon = ConvergenceMonitor(window=2, tolerance=0.01)
    # Needs window + 1 = 3 snapshots whose spread is <= 0.01 in every rate.
    assert mon.update(km(0.50, 0.20, 0.30)) is False
    assert mon.update(km(0.505, 0.20, 0.30)) is False  # only 2 snapshots
    assert mon.update(km(0.52, 0.20, 0.30)) is False  # win spread 0.02 > 0.01
    assert mon.update(km(0.515, 0.205, 0.30)) is False  # window {0.505, 0.52, 0.515}: 0.015
    assert mon.update(km(0.512, 0.205, 0.301)) is True  # {0.52, 0.515, 0.512}: 0.008
    state = mon.state_dict()
    again = ConvergenceMonitor()
    again.load_state_dict(state)
    assert again.converged and again.update(km(0.60, 0.2, 0.3)) is False
    assert mon.update(km(float("nan"), 0.2, 0.3)) is False  # NaN resets the window


@pytest.mark.parametrize("kwargs", [dict(window=0), dict(tolerance=-0.1), dict(tolerance=float("nan"))])
def test_convergence_bad_settings(kwargs):
    with pytest.raises(InputError):
        ConvergenceMonitor(**kwargs)


def test_wilson_by_hand():
    # 8 of 10, z = 1.959964, z² = 3.841459: denominator 1 + z²/10 = 1.3841459,
    # centre (0.8 + z²/20) / 1.3841459 = 0.99207295 / 1.3841459 = 0.716740,
    # half-width z·sqrt(0.016 + z²/400) / 1.3841459 = 1.959964 · 0.160011 / 1.3841459 = 0.226578
    # -> (0.490162, 0.943318), the textbook Wilson interval for 8/10.
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.490162, abs=2e-6) and high == pytest.approx(0.943318, abs=2e-6)


def test_accuracy_estimate_uses_design_probes_only():
    correct = np.array([1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1], bool)
    design = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1], bool)
    design[2] = True  # design probes: e2 wrong + 6 right = 6/7
    est = kg_accuracy_estimate(correct, design)
    assert est.estimate == pytest.approx(6 / 7) and est.n == 7 and est.method == "design-wilson"
    assert (est.low, est.high) == pytest.approx(wilson_interval(6, 7))
    none = kg_accuracy_estimate(correct, np.zeros(12, bool))
    assert none.method == "no-design-probes" and math.isnan(none.estimate)


def test_difference_estimator_by_hand():
    # Round 0: mean prediction 0.5; design probes (y=1, ŷ=0.5) and (y=0, ŷ=0.5) -> z = 1.0, 0.0.
    # Round 1: mean prediction 0.8; design probe (y=1, ŷ=0.9) -> z = 0.8 + 0.1 = 0.9.
    # A non-design probe (y=0, ŷ=0.2) is ignored.
    # mean z = 1.9/3 = 0.63333; sd (ddof 1) = sqrt(0.60667/2) = 0.55076; se = 0.55076/sqrt(3)
    # = 0.31798. Wilson at n* = 0.63333 · 0.36667 / 0.31798² = 2.29670: divisor
    # 1 + q²/n* = 2.67260, centre (0.63333 + q²/(2n*)) / 2.67260 = 0.54989, half
    # q·sqrt(p(1 − p)/n* + q²/(4n*²)) / 2.67260 = 0.39025 -> (0.15964, 0.94014); the normal
    # interval would be (0.01010, 1.25656), clipped to 1.
    correct = np.array([1, 0, 1, 0], bool)
    design = np.array([1, 1, 1, 0], bool)
    est = kg_accuracy_estimate(correct, design, predicted=[0.5, 0.5, 0.9, 0.2], rounds=[0, 0, 1, 1],
                               mean_predicted=[0.5, 0.8])
    assert est.method == "design-difference" and est.n == 3
    assert est.estimate == pytest.approx(1.9 / 3)
    assert est.low == pytest.approx(0.15964, abs=1e-4) and est.high == pytest.approx(0.94014, abs=1e-4)
    with pytest.raises(InputError, match="together"):
        kg_accuracy_estimate(correct, design, predicted=[0.5] * 4)
