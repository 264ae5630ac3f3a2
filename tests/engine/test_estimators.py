"""The design-based estimators on hand-made examples: exact unbiasedness by enumerating the design.

Every test enumerates every sample the design can draw and every outcome the model can
give, weights each by its probability, and checks that the estimator's expectation is
the truth exactly (to float round-off) — not by simulation.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from kgprobe.compare import _difference, holm
from kgprobe.estimators import DESIGN, MODEL, design_estimate, model_interval

# Four active edges: chance of a right answer μ_j; accuracy A = 0.65.
MU = np.array([0.9, 0.5, 0.2, 1.0])
A = 0.65


def _outcomes(edges):
    """Every outcome vector of ``edges`` with its probability under MU."""
    for ys in itertools.product((0, 1), repeat=len(edges)):
        p = math.prod(MU[e] if y else 1 - MU[e] for e, y in zip(edges, ys))
        yield np.array(ys, dtype=float), p


def test_difference_estimator_is_exactly_unbiased_under_simple_random_sampling():
    # ``raw`` is the estimate before clipping to [0, 1] (clipping is for display).
    # One round, 2 of 4 edges without replacement (π = 1/2), arbitrary predictions.
    yhat = np.array([0.7, 0.4, 0.6, 0.5])
    expectation = 0.0
    for sample in itertools.combinations(range(4), 2):
        for y, p in _outcomes(sample):
            s = list(sample)
            est = design_estimate(y, yhat[s], np.full(2, 0.5), [0, 0], [yhat.mean()], n_group=4)
            expectation += p / 6 * est.raw
    assert expectation == pytest.approx(A, abs=1e-12)


def test_horvitz_thompson_difference_is_exactly_unbiased_with_unequal_probabilities():
    # A fixed-size design with unequal inclusion probabilities: π = (0.7, 0.6, 0.4, 0.3).
    design = {(0, 1): 0.4, (0, 2): 0.3, (1, 3): 0.2, (2, 3): 0.1}
    pi = np.zeros(4)
    for s, p in design.items():
        pi[list(s)] += p
    assert pi == pytest.approx([0.7, 0.6, 0.4, 0.3])
    yhat = np.array([0.3, 0.9, 0.1, 0.5])
    kg = grp = 0.0
    for sample, ps in design.items():
        s = list(sample)
        for y, p in _outcomes(sample):
            kg += ps * p * design_estimate(y, yhat[s], pi[s], [0, 0], [yhat.mean()], n_group=4).raw
            # The group {0, 1} (accuracy 0.7): mean prediction over the group, its own N_G.
            in_g = np.isin(s, [0, 1])
            grp += ps * p * design_estimate(y, yhat[s], pi[s], [0, 0], [yhat[:2].mean()], n_group=2,
                                            in_group=in_g, mean_var=[0.2], n_total=4, group=True).raw
    assert kg == pytest.approx(A, abs=1e-12)
    assert grp == pytest.approx(0.7, abs=1e-12)


def test_unbiased_when_the_predictions_adapt_to_earlier_answers():
    # Two rounds, one uniform draw each from the first three edges (μ = 0.9, 0.5, 0.2;
    # A = 1.6/3). Round 2 predicts from round 1's answer: the edge answered gets ŷ = y,
    # the others 0.2 + 0.6·y. The predictions depend on the data, yet the expectation is A.
    mu3 = MU[:3]
    truth = mu3.mean()
    expectation = 0.0
    for e1, e2 in itertools.product(range(3), repeat=2):
        for y1 in (0, 1):
            p1 = mu3[e1] if y1 else 1 - mu3[e1]
            yhat1 = np.full(3, 0.5)
            yhat2 = np.full(3, 0.2 + 0.6 * y1)
            yhat2[e1] = y1
            for y2 in (0, 1):
                p2 = mu3[e2] if y2 else 1 - mu3[e2]
                est = design_estimate([y1, y2], [yhat1[e1], yhat2[e2]], [1 / 3, 1 / 3], [0, 1],
                                      [yhat1.mean(), yhat2.mean()], n_group=3)
                expectation += p1 * p2 / 9 * est.raw
    assert expectation == pytest.approx(truth, abs=1e-12)


def test_kg_interval_by_hand():
    # N = 10, one round of 4 uniform draws (π = 0.4), mean prediction 0.6.
    # residuals y − ŷ = 0.5, −0.5, 0.2, 0.2 -> z = 1.1, 0.1, 0.8, 0.8; mean 0.7;
    # sample variance (0.16 + 0.36 + 0.01 + 0.01) / 3 = 0.18; se = sqrt(0.18 / 4) = 0.212132.
    # Wilson at the effective size n* = 0.7 · 0.3 / 0.045 = 4.666667 (q² = 3.841459):
    # divisor 1 + q²/n* = 1.823170; centre (0.7 + q²/(2n*)) / 1.823170 = 0.609699;
    # half q·sqrt(0.21/n* + q²/(4n*²)) / 1.823170 = 0.320890 -> [0.288809, 0.930589]
    # (the normal interval would be [0.284229, 1.115771], clipped to 1).
    est = design_estimate([1, 0, 1, 1], [0.5, 0.5, 0.8, 0.8], [0.4] * 4, [0] * 4, [0.6], n_group=10)
    assert (est.estimate, est.n, est.basis) == (pytest.approx(0.7), 4, DESIGN)
    assert est.se == pytest.approx(0.212132, abs=1e-6)
    assert est.low == pytest.approx(0.288809, abs=1e-6) and est.high == pytest.approx(0.930589, abs=1e-6)
    # Both bounds solve Wilson's score equation (0.7 − A)² = q²·A(1 − A)/n*.
    q2 = 1.959964 ** 2
    for bound in (est.low, est.high):
        assert (0.7 - bound) ** 2 == pytest.approx(q2 * bound * (1 - bound) / (0.21 / 0.045), abs=1e-5)


def test_kg_interval_at_the_boundary_keeps_the_truth_in_reach():
    # Every design probe right, but the predictions' corrections leave the unbiased value
    # above 1: z = 0.9 + (1 − ŷ)·m/(N·π) with N = 10, π = 0.4, m = 4, so (1 − ŷ) = 0.25,
    # 0.25, 0, 0 give z = 1.15, 1.15, 0.9, 0.9; mean 1.025, se = sqrt(0.020833/4) = 0.072169.
    # The normal interval [0.883551, 1.166449] clipped to [0.883551, 1]; here the lower end
    # is Wilson's at n = 4 probes, p = 1: 4 / (4 + q²) = 0.510142, and the upper end is 1.
    est = design_estimate([1, 1, 1, 1], [0.75, 0.75, 1.0, 1.0], [0.4] * 4, [0] * 4, [0.9], n_group=10)
    assert est.raw == pytest.approx(1.025) and est.estimate == 1.0
    assert est.low == pytest.approx(4 / (4 + 1.959964 ** 2), abs=1e-6) and est.high == 1.0
    # With one wrong answer the interval is Wilson's at n* = p(1 − p)/se²:
    # z = 0.8 + (0.1, 0.1, 0.1, −0.1) = 0.9, 0.9, 0.9, 0.7; mean 0.85; sample variance
    # (3 · 0.0025 + 0.0225) / 3 = 0.01; se = sqrt(0.01 / 4) = 0.05; n* = 0.85 · 0.15 / 0.0025 = 51.
    est = design_estimate([1, 1, 1, 0], [0.9, 0.9, 0.9, 0.1], [0.4] * 4, [0] * 4, [0.8], n_group=10)
    p, n = 0.85, 51.0
    q2 = 1.959964 ** 2
    d = 1 + q2 / n
    centre, half = (p + q2 / (2 * n)) / d, 1.959964 * math.sqrt(p * (1 - p) / n + q2 / (4 * n * n)) / d
    assert est.se == pytest.approx(0.05) and est.low == pytest.approx(centre - half, abs=1e-6)
    assert est.high == pytest.approx(centre + half, abs=1e-6)
    # By hand: divisor 1.075323, centre 0.825484, half 0.097632 -> [0.727852, 0.923116].
    assert (est.low, est.high) == (pytest.approx(0.727852, abs=1e-5), pytest.approx(0.923116, abs=1e-5))


def test_effective_wilson_by_hand():
    from kgprobe.metrics import effective_wilson

    q = 1.959964
    # p = 0.5, se = 0.05: n* = 100; symmetric, half = q·sqrt(0.0025 + q²/40000)/(1 + q²/100)
    # = 1.959964 · 0.050951 / 1.038415 = 0.096166.
    low, high = effective_wilson(0.5, 0.05, 256, q)
    assert low == pytest.approx(0.5 - 0.096166, abs=1e-5) and high == pytest.approx(0.5 + 0.096166, abs=1e-5)
    # 256 design probes all right: [256 / (256 + q²), 1] = [0.985216, 1].
    assert effective_wilson(0.998, 0.002, 256, q, all_right=True) == (pytest.approx(0.985216, abs=1e-6), 1.0)
    assert effective_wilson(0.003, 0.002, 256, q, all_wrong=True) == (0.0, pytest.approx(1 - 0.985216, abs=1e-6))
    # No standard error (a single design probe): no information, [0, 1].
    assert effective_wilson(0.7, math.inf, 1, q) == (0.0, 1.0)


def test_group_interval_by_hand_student_t_and_variance_floor():
    # The same probes; the group holds the first three (N_G = 5 of N = 10), mean prediction
    # 0.5 over it, mean predicted variance 0.24. Each in-group residual is scaled by
    # m / (N_G π) = 4 / 2 = 2: z = 0.5 + (1.0, −1.0, 0.4, 0) = 1.5, −0.5, 0.9, 0.5; mean 0.6;
    # sample variance (0.81 + 1.21 + 0.09 + 0.01) / 3 = 0.706667 > floor 0.24 · 10/5 = 0.48;
    # se = sqrt(0.706667 / 4) = 0.420317; t quantile with 3 − 1 = 2 df: 4.302653;
    # half-width 1.808476 -> [0, 1] after clipping.
    est = design_estimate([1, 0, 1, 1], [0.5, 0.5, 0.8, 0.8], [0.4] * 4, [0] * 4, [0.5], n_group=5,
                          in_group=[True, True, True, False], mean_var=[0.24], n_total=10, group=True)
    assert est.estimate == pytest.approx(0.6) and est.n == 3 and est.df == 2
    assert est.se == pytest.approx(0.420317, abs=1e-6)
    assert (est.low, est.high) == (0.0, 1.0)
    # With the in-group residuals all zero the sample variance (z = 0.5, 0.5, 0.5, 0.5) is 0,
    # and the floor 0.48 sets the width: se = sqrt(0.48 / 4) = 0.346410.
    est = design_estimate([1, 0, 1, 1], [1.0, 0.0, 1.0, 0.8], [0.4] * 4, [0] * 4, [0.5], n_group=5,
                          in_group=[True, True, True, False], mean_var=[0.24], n_total=10, group=True)
    assert est.estimate == pytest.approx(0.5) and est.se == pytest.approx(math.sqrt(0.12), abs=1e-9)


def test_model_based_interval_is_labelled_and_jeffreys():
    # Jeffreys' interval for 0 of 3: posterior Beta(0.5, 3.5); the lower end is 0 by
    # convention (no success), the upper end the 97.5 % quantile: the regularized
    # incomplete beta function there is 0.975.
    from scipy.special import betainc

    est = model_interval(0, 3, n_group=12)
    assert est.basis == MODEL and est.estimate == 0.0 and est.low == 0.0 and est.edges == 12
    assert betainc(0.5, 3.5, est.high) == pytest.approx(0.975, abs=1e-9)
    # 2 of 4: both ends are quantiles (2.5 % and 97.5 %) of Beta(2.5, 2.5), symmetric about ½.
    est = model_interval(2, 2, n_group=4)
    assert est.estimate == 0.5 and est.low + est.high == pytest.approx(1.0)
    assert betainc(2.5, 2.5, est.low) == pytest.approx(0.025, abs=1e-9)


def test_holm_adjustment_by_hand():
    # Sorted 0.01, 0.03, 0.04 -> 3·0.01 = 0.03, 2·0.03 = 0.06, max(0.06, 1·0.04) = 0.06.
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_paired_difference_by_hand():
    # Per-probe differences d = 0, 0, 1, 0: mean 0.25, variance 0.25, se = sqrt(0.25/4) = 0.25,
    # 95 % interval 0.25 ± 0.489991; two-sided p = 2·(1 − Φ(1)) = 0.317311.
    a = {"estimate": 0.75, "low": 0.3, "high": 1.0, "se": 0.2, "df": math.inf, "basis": DESIGN}
    b = {"estimate": 0.5, "low": 0.1, "high": 0.9, "se": 0.25, "df": math.inf, "basis": DESIGN}
    every = (np.arange(4), np.arange(4), 4)  # index pairs, all four of them the floor's
    d = _difference(a, b, np.array([1.0, 0, 1, 1]), np.array([1.0, 0, 0, 1]), group=False, pairs=every)
    assert d["test"] == "paired" and d["difference"] == pytest.approx(0.25)
    assert d["low"] == pytest.approx(0.25 - 0.489991, abs=1e-6) and d["p"] == pytest.approx(0.317311, abs=1e-6)
    # Unpaired runs: se² = 0.2² + 0.25² = 0.1025.
    d = _difference(a, b, group=False)
    assert d["test"] == "unpaired" and d["se"] == pytest.approx(math.sqrt(0.1025))
    # A model-based estimate is not tested.
    assert _difference(a, {**b, "basis": MODEL}, group=False) is None


class _HandSweep:
    """A recorded sweep made by hand: K answers per edge drawn with known θ (the Sweep fields a replay uses)."""

    def __init__(self, kg, edges, correct):
        self.kg, self.edges, self.correct = kg.name, edges, correct
        self.passes = correct.shape[1]


def test_replay_study_the_estimate_is_centred_on_the_truth_and_the_interval_covers():
    from kgprobe.simulation.coverage import replay_coverage
    from kgprobe.simulation.theta import theta_for_kg
    from kgprobe.sources.embedded import load_embedded_kg

    kg = load_embedded_kg("countries")
    rng = np.random.default_rng(0)
    edges = np.sort(rng.choice(np.flatnonzero(kg.active), 200, replace=False))
    theta = theta_for_kg(kg, seed=1)[edges]
    sweep = _HandSweep(kg, edges, rng.random((200, 10)) >= theta[:, None])
    truth = float(sweep.correct.mean())
    out = replay_coverage(sweep, kg=kg, sampler="thompson", design_fraction=0.5, budget=128, batch=32, runs=60)
    assert out["truth"] == pytest.approx(truth, abs=1e-4)
    est = out["ht-difference"]
    # 60 independent runs: their mean lies within 3 standard errors (rmse / √60) of the truth,
    # and a 95 % interval covering in fewer than 85 % of 60 runs would be a < 1 % event.
    assert abs(est["mean_estimate"] - truth) <= 3 * est["rmse"] / math.sqrt(60)
    assert est["coverage"] >= 0.85
    assert set(out["predicate_coverage"]["per_label"]) == {kg.predicate_id(int(p)) for p in
                                                           np.unique(kg.predicate_of[edges])}


def test_systematic_design_draws_each_edge_with_its_inclusion_probability_exactly():
    from kgprobe.sampling.design_draws import draw_systematic, inclusion_probabilities

    # Weights 1:2:3:4 for 2 draws: π = 2·w/10 = 0.2, 0.4, 0.6, 0.8. With weights 1:1:1:7
    # the last would get 1.4: it is capped at 1 and the other draw shared 1/3 each.
    assert inclusion_probabilities(np.array([1.0, 2, 3, 4]), 2) == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert inclusion_probabilities(np.array([1.0, 1, 1, 7, 0]), 2) == pytest.approx([1 / 3] * 3 + [1, 0])
    # Exact: for a fixed order the draw is a step function of the start u; integrate over
    # u's breakpoints for every one of the 4! orders.
    pi = np.array([0.2, 0.4, 0.6, 0.8])
    freq = np.zeros(4)
    for order in itertools.permutations(range(4)):
        cum = np.cumsum(pi[list(order)])
        cuts = np.unique(np.round(np.concatenate([[0.0, 1.0], np.mod(cum, 1.0)]), 12))
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            u = (lo + hi) / 2
            points = u + np.arange(2)
            picked = [order[j] for j in range(4) if np.any((points > (cum[j] - pi[order[j]])) & (points <= cum[j]))]
            assert len(picked) == 2
            freq[picked] += (hi - lo) / 24
    assert freq == pytest.approx(pi, abs=1e-12)
    # The implementation draws exactly 2 distinct edges.
    rng = np.random.default_rng(0)
    draws = [draw_systematic(pi, rng) for _ in range(200)]
    assert all(d.size == 2 and np.unique(d).size == 2 for d in draws)


class _FourEdges:
    """The pieces of a PKG the design functions read: four edges, the last one dead."""

    active = np.array([True, True, True, False])
    num_active = 3


def test_prior_design_weights_by_hand():
    from kgprobe.sampling.design_draws import design_weights, prior_design_weights, round_design_weights

    pkg = _FourEdges()
    # Prior chances p = 0.5, 0.9, 1.0 (and a dead edge): spreads sqrt(p(1 − p)) = 0.5, 0.3, 0;
    # share ½: w = ½ / 3 + ½ · spread / 0.8.
    w = prior_design_weights(pkg, np.array([0.5, 0.9, 1.0, 0.5]), 0.5)
    assert w == pytest.approx([1 / 6 + 0.3125, 1 / 6 + 0.1875, 1 / 6, 0.0])
    assert w.sum() == pytest.approx(1.0)
    assert prior_design_weights(pkg, np.array([0.5, 0.9, 1.0, 0.5]), 0.0) is None
    # Every edge certain: nothing to lean on, the design stays uniform.
    assert prior_design_weights(pkg, np.array([1.0, 0.0, 1.0, 0.5]), 0.5) == pytest.approx([1 / 3] * 3 + [0])
    # A tilt leans from the prior design: (1 − ½)·w + ½ · θ̂ / Σθ̂ with θ̂ = 1 − p̂ = (0, 0, 1).
    tilted = design_weights(pkg, np.array([0.0, 0.0, 1.0, 0.0]), 0.5, base=w)
    assert tilted == pytest.approx([0.5 * w[0], 0.5 * w[1], 0.5 * w[2] + 0.5, 0.0])
    # The round's weights: the base as it is without a tilt, uniform for the uniform sampler.
    right = np.array([1.0, 1.0, 0.0, 1.0])
    assert round_design_weights(pkg, right, sampler="focus", tilt=0.0, base=w) is w
    assert round_design_weights(pkg, right, sampler="uniform", tilt=0.5, base=w) is None
    assert round_design_weights(pkg, right, sampler="focus", tilt=0.5, base=w) == pytest.approx(tilted)


def test_prior_weighted_systematic_design_keeps_the_estimate_exactly_unbiased():
    from kgprobe.sampling.design_draws import inclusion_probabilities, prior_design_weights

    class Pkg:
        active = np.ones(4, bool)
        num_active = 4

    # A prior off the truth (μ = 0.9, 0.5, 0.2, 1.0), far off on edge 2: any prior keeps
    # the estimate unbiased; it is used both as the design and as the predictions.
    p = np.array([0.8, 0.5, 0.6, 0.99])
    pi = inclusion_probabilities(prior_design_weights(Pkg(), p, 0.5), 2)
    # The joint design of the systematic draw: for each of the 4! orders, the samples the
    # start u picks, weighted by the length of u's interval (exact, as above).
    design: dict[tuple, float] = {}
    for order in itertools.permutations(range(4)):
        cum = np.cumsum(pi[list(order)])
        cuts = np.unique(np.round(np.concatenate([[0.0, 1.0], np.mod(cum, 1.0)]), 12))
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            points = (lo + hi) / 2 + np.arange(2)
            picked = tuple(sorted(order[j] for j in range(4)
                                  if np.any((points > (cum[j] - pi[order[j]])) & (points <= cum[j]))))
            design[picked] = design.get(picked, 0.0) + (hi - lo) / 24
    drawn = np.zeros(4)
    for s, ps in design.items():
        drawn[list(s)] += ps
    assert drawn == pytest.approx(pi, abs=1e-12)
    expectation = 0.0
    for sample, ps in design.items():
        s = list(sample)
        for y, py in _outcomes(sample):
            expectation += ps * py * design_estimate(y, p[s], pi[s], [0, 0], [p.mean()], n_group=4).raw
    assert expectation == pytest.approx(A, abs=1e-12)


def test_cell_predictions_by_hand():
    from kgprobe.predictions import cell_predictions, predicted_right, sampler_predictions
    from kgprobe.kg.parameterized import ParameterizedKG

    # Five edges: predicate 0 with objects 10, 10, 11, 11 (two cells of two), predicate 1
    # with object 12. Answers: edge 0 right twice, edge 1 wrong, edge 2 right.
    pkg = ParameterizedKG(np.arange(5), np.array([10, 10, 11, 11, 12]), np.ones(5, bool),
                          propagation_weight=0.0, predicates=np.array([0, 0, 0, 0, 1]))
    pkg.update(np.array([0, 1, 2]), np.array([True, False, True]))
    pkg.update(np.array([0]), np.array([True]))
    # Overall share (3 + 1)/(4 + 2) = 2/3; predicate 0: (3 + 2·2/3)/(4 + 2) = 13/18,
    # predicate 1 (no answers): 2/3. Cell shares without the edge's own answers, shrunk to
    # the predicate's at strength 2: edge 0 (cell mate 0 right of 1) (0 + 2·13/18)/3 = 13/27;
    # edge 1 (2 of 2) (2 + 13/9)/4 = 31/36; edge 2 (none) 13/18; edge 3 (1 of 1) 22/27;
    # edge 4 2/3. Then the edge's own answers at strength 2: (2·loo + s)/(2 + s + f).
    pred, loo = cell_predictions(pkg)
    assert loo == pytest.approx([13 / 27, 31 / 36, 13 / 18, 22 / 27, 2 / 3], abs=1e-12)
    assert pred == pytest.approx([(26 / 27 + 2) / 4, (31 / 18) / 3, (13 / 9 + 1) / 3, 22 / 27, 2 / 3], abs=1e-12)
    assert predicted_right(pkg) == pytest.approx(0.5 * (sampler_predictions(pkg) + pred), abs=1e-12)
