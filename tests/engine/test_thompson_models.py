"""kgprobe's Thompson: the grid NPMLE prior and the prequential weighing of its two models (hand-checked)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.sampling import make_sampler
from kgprobe.sampling.npmle import GridPosterior


def three_point(weights=(1 / 3, 1 / 3, 1 / 3), smoothing=1.0):
    g = GridPosterior(points=3, smoothing=smoothing)  # grid {0, 1/2, 1}
    g.weights = np.array(weights, dtype=np.float64)
    return g


def test_grid_posterior_mean_by_hand():
    g = three_point()
    # (1 wrong): likelihoods (0, 1/2, 1) -> posterior (0, 1/3, 2/3), mean 1/2·1/3 + 2/3 = 5/6.
    # (1 wrong, 1 right): (0, 1/4, 0) -> all on 1/2. No answers: the prior mean 1/2.
    # (2 wrong): (0, 1/4, 1) -> (0, 1/5, 4/5), mean 1/10 + 4/5 = 9/10.
    np.testing.assert_allclose(g.mean(np.array([1, 1, 0, 2]), np.array([0, 1, 0, 0])), [5 / 6, 0.5, 0.5, 0.9])
    np.testing.assert_allclose(g.posterior(np.array([1]), np.array([0]))[0], [0, 1 / 3, 2 / 3])


def test_grid_em_step_by_hand():
    # Edges (1 wrong), (1 wrong), (1 right), one unprobed (ignored); uniform start.
    # Posteriors: (0, 1/3, 2/3) twice and (2/3, 1/3, 0): column sums (2/3, 1, 4/3).
    f, s = np.array([1, 1, 0, 0]), np.array([0, 0, 1, 0])
    g = three_point(smoothing=0.0)
    g.fit_counts(f, s, steps=1)
    np.testing.assert_allclose(g.weights, [2 / 9, 1 / 3, 4 / 9])
    # With the Dirichlet smoothing of one pseudo-edge spread over the 3 points:
    # (sums + 1/3) / (3 + 1) = (1/4, 1/3, 5/12).
    g = three_point(smoothing=1.0)
    g.fit_counts(f, s, steps=1)
    np.testing.assert_allclose(g.weights, [1 / 4, 1 / 3, 5 / 12])


def test_grid_em_finds_known_or_not_atoms():
    # 60 edges always wrong, 40 always right, 5 answers each: the fit puts its mass on 0 and 1.
    f = np.r_[np.full(60, 5), np.zeros(40)]
    s = np.r_[np.zeros(60), np.full(40, 5)]
    g = GridPosterior(smoothing=0.0)
    g.fit_counts(f, s)
    assert g.weights[-1] == pytest.approx(0.6, abs=1e-3) and g.weights[0] == pytest.approx(0.4, abs=1e-3)


def two_edges():
    # path 0-1-2, one predicate, nothing probed yet
    return ParameterizedKG(np.array([0, 1]), np.array([1, 2]), np.ones(2, bool), predicates=np.zeros(2))


def primed_thompson():
    smp = make_sampler("thompson", design_fraction=0.0)
    # evidence: K = 2, b = 0, no pooling weights, atoms e^-12 (negligible) -> prior mean = global rate
    smp.posterior.params = np.array([math.log(2.0), 0.0, 0.0, 0.0, 0.0, -12.0, -12.0])
    smp.grid = three_point(weights=(0.25, 0.0, 0.75))
    return smp


def test_prequential_scores_and_weighted_estimate_by_hand():
    pkg = two_edges()
    smp = primed_thompson()
    sel = smp.select(pkg, 2, np.random.default_rng(0))  # no answers yet: no refit
    assert sorted(sel.edges.tolist()) == [0, 1]
    # Both models predicted before the answers: evidence 1/2 (global rate (0+1)/(0+2)), grid 3/4.
    order = np.argsort(sel.edges)
    pkg.update(sel.edges[order], np.array([False, True]))  # edge 0 wrong, edge 1 right
    est = smp.estimate(pkg)
    # scores: evidence log(1/2) + log(1/2) = log(1/4); grid log(3/4) + log(1/4) = log(3/16)
    np.testing.assert_allclose(smp.scores, [math.log(1 / 4), math.log(3 / 16)])
    # weights ∝ (1/4, 3/16) = (4/7, 3/7)
    np.testing.assert_allclose(smp.model_weights(), [4 / 7, 3 / 7])
    # evidence now: g = (1+1)/(2+2) = 1/2, μ = 1/2 -> edge 0 (1 + 1)/3 = 2/3, edge 1 1/3;
    # grid: edge 0 all on 1, edge 1 all on 0 -> weighted 4/7·2/3 + 3/7 = 17/21 and 4/7·1/3 = 4/21
    np.testing.assert_allclose(est, [17 / 21, 4 / 21], rtol=1e-4)  # the e^-12 atoms move it by ~1e-5
    # scoring happens once: a second estimate leaves the scores alone
    smp.estimate(pkg)
    np.testing.assert_allclose(smp.scores, [math.log(1 / 4), math.log(3 / 16)])


def test_pending_predictions_survive_a_checkpoint():
    pkg = two_edges()
    a = primed_thompson()
    sel = a.select(pkg, 2, np.random.default_rng(0))
    b = make_sampler("thompson", design_fraction=0.0)
    b.load_state_dict(a.state_dict())
    order = np.argsort(sel.edges)
    pkg.update(sel.edges[order], np.array([False, True]))
    np.testing.assert_allclose(b.estimate(pkg), a.estimate(pkg))
    np.testing.assert_allclose(b.scores, a.scores)
    # an old checkpoint (evidence state only) loads with even model weights
    c = make_sampler("thompson")
    c.load_state_dict({"params": a.posterior.params, "fitted_at": 0})
    np.testing.assert_allclose(c.model_weights(), [0.5, 0.5])


def six_answered_right_with_margins(margins):
    pkg = ParameterizedKG(np.arange(6), np.arange(1, 7), np.ones(6, bool), predicates=np.zeros(6))
    pkg.update(np.arange(6), np.ones(6, dtype=bool), np.asarray(margins, dtype=np.float64))
    return pkg


def test_margins_move_the_evidence_prior_as_in_margin_focus():
    """Six edges answered right once, with margins 6, 0.2, 4, 0.5, 8, 2.

    By hand (primed_thompson: K = 2, no pooling, atoms e^-12; grid (¼, 0, ¾) on {0, ½, 1};
    no answer scored yet, so even model weights): the global rate (0 + 1)/(6 + 2) = 1/8 is
    every edge's prior mean. The margin model: s² the default 1.5² = 2.25 (no repeats),
    τ² = 8.1458 − 2.25 = 5.8958, μ0 = −sqrt(8.1458)·Φ⁻¹(1/8) = 3.2832. The margin 0.2:
    v = 1/(1/5.8958 + 1/2.25) = 1.6285, mean v·(3.2832/5.8958 + 0.2/2.25) = 1.0516, rate
    Φ(−1.0516/sqrt(2.25 + 1.6285)) = 0.29668; the Beta part's mean moves by rate − 1/8 to
    the rate itself, so the evidence model gives 2·0.29668/3 = 0.19779 after one right
    answer, the estimate where margins are read (margin_estimate); the grid gives 0, so
    the weighted mean of the two (margin_estimate=False) is 0.29668/3 = 0.098892. Without
    margins: (2/8)/3/2 = 1/24. The atoms' e^-12 make the prior predictive error
    1/8 + 4.6e-6 (π₁ = 6.14e-6, π_Beta = 1 − 1.23e-5), which moves the Beta mean 4.6e-6
    less: seen only where the rate is small, edge 4 (margin 8): 2·(0.00033617 −
    0.0000046)/3 = 0.00022105, weighted 0.00011052.
    """
    margins = [6.0, 0.2, 4.0, 0.5, 8.0, 2.0]
    est = primed_thompson().estimate(six_answered_right_with_margins(margins))
    assert est[1] == pytest.approx(0.19779, abs=1e-5)
    assert est[4] == pytest.approx(0.00022105, abs=1e-8)
    assert np.argsort(-est).tolist() == [1, 3, 5, 2, 0, 4]  # the thinner the margin, the higher
    weighted = primed_thompson()
    weighted.margin_estimate = False
    est = weighted.estimate(six_answered_right_with_margins(margins))
    assert est[1] == pytest.approx(0.098892, abs=1e-5)
    assert est[4] == pytest.approx(0.00011052, abs=1e-8)
    plain = primed_thompson()
    plain.margins = False
    np.testing.assert_allclose(plain.estimate(six_answered_right_with_margins(margins)), np.full(6, 1 / 24),
                               rtol=1e-4)
    # Under five edges with a margin the margins are not read.
    pkg = ParameterizedKG(np.arange(6), np.arange(1, 7), np.ones(6, bool), predicates=np.zeros(6))
    pkg.update(np.arange(4), np.ones(4, dtype=bool), np.array(margins[:4]))
    pkg.update(np.arange(4, 6), np.ones(2, dtype=bool))
    np.testing.assert_allclose(primed_thompson().estimate(pkg), np.full(6, 1 / 24), rtol=1e-4)


def test_a_margin_thin_right_answer_is_drawn_weak_more_often():
    # The same six edges: edge 1 (right by 0.2) is drawn high more often than edge 4
    # (right by 8), so it is picked first more often; without margins they are alike.
    pkg = six_answered_right_with_margins([6.0, 0.2, 4.0, 0.5, 8.0, 2.0])

    def first_picks(margins: bool) -> np.ndarray:
        hits = np.zeros(6)
        for seed in range(400):
            smp = primed_thompson()
            smp.grid = three_point(weights=(0.3, 0.2, 0.5))  # every point possible: no 0/0 after a wrong answer
            smp.margins = margins
            smp.posterior.maybe_fit = lambda pkg: None  # keep the hand-set fit
            smp.grid.maybe_fit = lambda pkg: None
            hits[smp.select(pkg, 1, np.random.default_rng(seed)).edges[0]] += 1
        return hits

    with_margins, without = first_picks(True), first_picks(False)
    # Seeds 0–399: (45, 104, 47, 87, 43, 74) against (75, 69, 67, 62, 61, 66). The grid
    # model (weight ½) reads no margins, so its half of the draws stays even.
    assert with_margins.argmax() == 1 and with_margins[1] > 2 * with_margins[4]
    assert with_margins[3] > with_margins[[0, 2, 4]].max()
    assert without.max() - without.min() < 30


def test_a_thompson_run_recorded_before_margins_resumes_without_them():
    from kgprobe.engine import EngineConfig

    old = EngineConfig.from_dict({"sampler": "thompson", "sampler_options": {"design_fraction": 0.1}})
    assert old.sampler_options == {"design_fraction": 0.1, "margins": False, "margin_estimate": False}
    assert make_sampler("thompson", **old.sampler_options).margins is False
    assert make_sampler("thompson").margins is True
    # A run recorded after thompson read the margins, before its estimate did: the weighted
    # estimate it was played with (the design leans on the estimate, so the picks would move).
    later = EngineConfig.from_dict({"sampler": "thompson",
                                    "sampler_options": {"design_fraction": 0.1, "margins": True}})
    assert later.sampler_options == {"design_fraction": 0.1, "margins": True, "margin_estimate": False}
    assert make_sampler("thompson").margin_estimate is True
