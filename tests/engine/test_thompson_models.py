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
