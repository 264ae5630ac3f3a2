"""The item-response (Rasch) fit behind ``--prior``, checked against its defining equations."""

from __future__ import annotations

import json

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


class _Answers:
    """What the prior reads of a PKG: each edge's direct successes and failures."""

    def __init__(self, successes, failures):
        self.successes = np.asarray(successes)
        self.failures = np.asarray(failures)


def test_stacking_trusts_a_prior_that_predicts_unseen_answers_and_drops_one_that_does_not():
    # Four edges, difficulties ±4: the prior says edges 0, 1 are easy (σ(4) = 0.982) and
    # 2, 3 hard. One source of ability 0 (spread floored at 1).
    prior = ItemPrior("kg", np.array([-4.0, -4.0, 4.0, 4.0]), {"m": 0.0}, ["x"])
    other = np.array([0.6, 0.6, 0.4, 0.4])  # the run's own predictions
    flat = np.full(4, 0.5)  # what the run predicts from the other edges only
    # The new model got edges 0, 1 right and 2, 3 wrong, as the prior said: among 0, 0.05,
    # …, 1 the likelihood of those answers under w·σ(â − b) + (1 − w)·½ grows with w.
    agreeing = _Answers([1, 1, 0, 0], [0, 0, 1, 1])
    pred, w = prior.stacked(agreeing, other, flat)
    assert w == 1.0
    assert pred == pytest.approx(prior.predict(agreeing))
    # The opposite answers: the prior is wrong on every edge, the likelihood falls with w.
    opposite = _Answers([0, 0, 1, 1], [1, 1, 0, 0])
    pred, w = prior.stacked(opposite, other, flat)
    assert w == 0.0
    assert pred == pytest.approx(other)
    # One probed edge is not enough to judge: the prior alone.
    pred, w = prior.stacked(_Answers([1, 0, 0, 0], [0, 0, 0, 0]), other, flat)
    assert w == 1.0 and pred == pytest.approx(prior.predict(_Answers([1, 0, 0, 0], [0, 0, 0, 0])))


def test_stacking_weight_is_the_grid_maximum_of_the_held_out_likelihood():
    # Two probed edges, one right and one wrong. The prior predicts both at p1 (edges of
    # equal difficulty), the other side at ½: L(w) = m(1 − m) with m = w·p1 + (1 − w)/2,
    # largest at m = ½, i.e. w = 0, whatever p1 is.
    prior = ItemPrior("kg", np.array([-1.0, -1.0, 0.0]), {"m": 0.0}, ["x"])
    answers = _Answers([1, 0, 0], [0, 1, 0])
    _, w = prior.stacked(answers, np.full(3, 0.5), np.full(3, 0.5))
    assert w == 0.0
    # Four edges of difficulty −1, answered 2 right and 2 wrong; the other side says 0.2.
    # L(w) = 2 log m + 2 log(1 − m) with m = 0.2 + w·(p1 − 0.2) is symmetric about m = ½,
    # so the best grid w puts m nearest ½: p1 = σ(â + 1) = 0.62369 (â = −0.49476 solves
    # 2 − 4σ(a + 1) − a = 0), m(0.70) = 0.49658 and m(0.75) = 0.51777: w = 0.70.
    prior4 = ItemPrior("kg", np.full(4, -1.0), {"m": 0.0}, ["x"])
    answers = _Answers([1, 1, 0, 0], [0, 0, 1, 1])
    a = prior4.ability(answers.successes, answers.failures)
    assert 2 - 4 * expit(a + 1) - a == pytest.approx(0.0, abs=1e-9)
    assert expit(a + 1) == pytest.approx(0.62369, abs=1e-5)
    _, w = prior4.stacked(answers, np.full(4, 0.2), np.full(4, 0.2))
    assert w == pytest.approx(0.70)


def test_source_agreement_is_the_mean_pairwise_correlation_of_right_shares():
    from kgprobe.prior import source_agreement

    total = np.full((3, 4), 3.0)
    # Shares x = (1/3, 2/3, 0, 1) and y = (0, 2/3, 1/3, 1): deviations from ½ are
    # (−1/6, 1/6, −1/2, 1/2) and (−1/2, 1/6, −1/6, 1/2), Σ products 4/9, Σ squares 5/9 each: r = 0.8.
    right = np.array([[1, 2, 0, 3], [0, 2, 1, 3], [2, 1, 3, 0]], dtype=float)
    assert source_agreement(right[:2], total[:2]) == pytest.approx(0.8)
    # The third source is 1 − x: r = −1 with x and −0.8 with y, each counted 0: (0.8 + 0 + 0)/3.
    assert source_agreement(right, total) == 0.2667
    # One source: nothing to check the prior against.
    assert source_agreement(right[:1], total[:1]) == 1.0
    # A source right on every shared edge orders no difficulty: 0.
    assert source_agreement(np.array([[3, 3, 3, 3], [0, 2, 1, 3]], float), total[:2]) == 0.0
    # Only edges both answered count; fewer than 3 leaves no pair to score.
    sparse = np.array([[3, 3, 0, 0], [3, 3, 3, 3]], float)
    assert source_agreement(right[:2], sparse) == 1.0


def test_the_design_follows_the_prior_by_the_sources_agreement_and_it_round_trips():
    prior = ItemPrior("kg", np.array([-1.0, 0.5]), {"a": 0.0, "b": 1.0}, ["x", "y"], agreement=0.25)
    assert prior.design_share(0.5) == 0.125
    back = ItemPrior.from_json(prior.to_json())
    assert back.agreement == 0.25 and back.design_share(0.5) == 0.125
    # A prior stored before the agreement was measured shaped the design in full.
    old = json.loads(prior.to_json())
    del old["agreement"]
    assert ItemPrior.from_json(json.dumps(old)).design_share(0.5) == 0.5
