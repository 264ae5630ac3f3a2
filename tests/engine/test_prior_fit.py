"""The item-response (Rasch) fit behind ``--prior``, checked against its defining equations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from kgprobe.prior import ItemPrior, fit_rasch


def test_rasch_fit_solves_the_penalized_likelihood_equations():
    # Two models, three edges; model 1 is stronger. Counts right / total:
    right = np.array([[8.0, 5, 1], [10, 9, 4]])
    total = np.array([[10.0, 10, 10], [10, 10, 10]])
    a, b = fit_rasch(right, total, difficulty_sd=3.0)
    p = expit(a[:, None] - b[None, :])
    # Minimizing −log L + Σ b_j² / (2τ²): ∂/∂a_m = −Σ_j (r − t·p) = 0 and
    # ∂/∂b_j = Σ_m (r − t·p) + b_j / τ² = 0.
    assert (right - total * p).sum(axis=1) == pytest.approx([0, 0], abs=1e-4)
    assert (right - total * p).sum(axis=0) + b / 9.0 == pytest.approx([0, 0, 0], abs=1e-4)
    assert a[1] > a[0] and b[0] < b[1] < b[2]


def test_symmetric_counts_give_opposite_difficulties_around_ability_zero():
    # One model, edges answered 3/4 and 1/4: by symmetry a = 0 and b_1 = −b_2, with
    # b_1 = −τ² (3 − 4 σ(−b_1)) (the edge equation); τ = 1 gives b_1 = −0.50524:
    # σ(0.50524) = 1 / (1 + 0.60340) = 0.62367, and 3 − 4 · 0.62367 = 0.50532 ≈ −b_1.
    a, b = fit_rasch(np.array([[3.0, 1.0]]), np.array([[4.0, 4.0]]), difficulty_sd=1.0)
    lo, hi = -3.0, 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if mid + (3 - 4 * expit(-mid)) > 0:
            hi = mid
        else:
            lo = mid
    assert a[0] == pytest.approx(0.0, abs=1e-5)
    assert b == pytest.approx([lo, -lo], abs=1e-4)
    assert lo == pytest.approx(-0.50524, abs=1e-4)


def test_new_model_ability_and_predictions():
    # Difficulties 0 and 1, source abilities 0 and 2 (mean 1, spread 1). The new model
    # answered edge 0 right 3 times, wrong once: the penalized ML ability solves
    # 3 − 4 σ(a) − (a − 1) / 1² = 0.
    prior = ItemPrior("kg", np.array([0.0, 1.0, np.nan]), {"m0": 0.0, "m1": 2.0}, ["x", "y"])
    a = prior.ability(np.array([3, 0, 0]), np.array([1, 0, 0]))
    assert 3 - 4 * expit(a) - (a - 1.0) == pytest.approx(0.0, abs=1e-9)
    # Edge 2 was never probed by a source: it gets the mean difficulty ½.
    assert prior.filled_difficulty()[2] == 0.5

    class State:  # what predict reads of a PKG
        successes = np.array([3, 0, 0])
        failures = np.array([1, 0, 0])

    p = expit(a - np.array([0.0, 1.0, 0.5]))
    # Edge 0 mixes σ(a − b) at strength 4 with its own 3 of 4: (4 p + 3) / 8.
    assert prior.predict(State()) == pytest.approx([(4 * p[0] + 3) / 8, p[1], p[2]])
    assert ItemPrior.from_json(prior.to_json()).abilities == prior.abilities
