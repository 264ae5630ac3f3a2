"""Margin focus (kgprobe.sampling.margin): the latent margin model, the PKG's margin counts,
the replayed margins, and the picks, on numbers checked by hand."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from kgprobe.errors import InputError
from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.sampling import make_sampler
from kgprobe.sampling.margin import (DEFAULT_WITHIN_SD, MIN_BETWEEN_VAR, MIN_WITHIN_VAR, margin_error_rates,
                                     margin_level, margin_variances, top_error_drops, top_probabilities)


def _pkg(n=8):
    heads, tails = np.arange(n), np.arange(1, n + 1)
    return ParameterizedKG(heads, tails, np.ones(n, dtype=bool), propagation_weight=0.0,
                           predicates=np.zeros(n, dtype=np.int32))


def test_within_variance_waits_for_twenty_repeat_degrees_of_freedom():
    # 19 edges answered twice with margins x and x + 2 (variance 2 each, one degree of
    # freedom each): 19 < 20, so the default; a twentieth such edge: exactly 2.
    x = np.arange(20.0)
    count, total, squares = np.full(20, 2), 2 * x + 2, x ** 2 + (x + 2) ** 2
    s2, _ = margin_variances(count[:19], total[:19], squares[:19])
    assert s2 == DEFAULT_WITHIN_SD ** 2
    s2, tau2 = margin_variances(count, total, squares)
    assert s2 == pytest.approx(2.0, abs=1e-12)
    # The edges' means are x + 1, variance (20² − 1)/12 = 33.25, less s²·mean(1/n) = 2·½.
    assert tau2 == pytest.approx(33.25 - 1.0, abs=1e-9)


def test_variances_keep_their_floors():
    # Repeats that all agree (a model scoring every phrasing alike): s² would be 0.
    s2, tau2 = margin_variances(np.full(20, 2), np.full(20, 2.0), np.full(20, 2.0))
    assert s2 == MIN_WITHIN_VAR
    assert tau2 == MIN_BETWEEN_VAR  # every mean is 1: no spread between edges


def test_top_probability_by_hand():
    # Prior error ½: μ0 = 0. No margin: M ~ N(0, τ²), and θ ≥ ½ ⇔ M ≤ 0: probability ½.
    p = top_probabilities(np.array([0.5]), np.array([0]), np.array([0.0]), 1.0, 1.0, 0.5)
    assert p[0] == pytest.approx(0.5, abs=1e-12)
    # One margin of 2 with s² = τ² = 1: M | m ~ N(1, ½), so P(M ≤ 0) = Φ(−1/√½) = Φ(−√2).
    p = top_probabilities(np.array([0.5]), np.array([1]), np.array([2.0]), 1.0, 1.0, 0.5)
    assert p[0] == pytest.approx(norm.cdf(-math.sqrt(2.0)), abs=1e-12)
    assert p[0] == pytest.approx(0.0786496, abs=1e-7)
    # Level 0.8 with s² = 4: θ ≥ 0.8 ⇔ M ≤ −2·Φ⁻¹(0.8) = −1.6832; prior error Φ(−1) with
    # s² + τ² = 8 puts μ0 at √8 (the prior predicts a wrong answer with chance Φ(−1)).
    mu0 = math.sqrt(8.0)
    p = top_probabilities(np.array([norm.cdf(-1.0)]), np.array([0]), np.array([0.0]), 4.0, 4.0, 0.8)
    assert p[0] == pytest.approx(norm.cdf((-2.0 * norm.ppf(0.8) - mu0) / 2.0), abs=1e-9)


def test_margin_error_rate_by_hand():
    # Prior error ½ (μ0 = 0), one margin of 2, s² = τ² = 1: M | m ~ N(1, ½), and the next
    # answer is wrong with chance E[Φ(−M)] = Φ(−1 / sqrt(1 + ½)) = Φ(−0.8165) = 0.2071.
    r = margin_error_rates(np.array([0.5]), np.array([1]), np.array([2.0]), 1.0, 1.0)
    assert r[0] == pytest.approx(norm.cdf(-1.0 / math.sqrt(1.5)), abs=1e-12)
    assert r[0] == pytest.approx(0.20710, abs=1e-5)
    # No margin: the prior's own chance of a wrong answer, whatever s² and τ².
    r = margin_error_rates(np.array([norm.cdf(-1.0), 0.3]), np.array([0, 0]), np.array([0.0, 0.0]), 4.0, 4.0)
    assert r == pytest.approx([norm.cdf(-1.0), 0.3], abs=1e-12)


def test_top_error_drop_by_hand():
    # Prior error ½ (μ0 = 0), s² = τ² = 1, 10⁶ margins summing to 0: M is 0 up to a variance
    # of 10⁻⁶, so θ = Φ(0) = ½ for sure. An estimate of 0.2 worth 3 answers: one more answer
    # cuts the squared error by ((2·3 + 1)(½ − 0.2)² − ½·½)/(3 + 1)² = (0.63 − 0.25)/16.
    args = (np.array([0.5]), np.array([10 ** 6]), np.array([0.0]), 1.0, 1.0)
    drop = top_error_drops(*args, 0.4, np.array([0.2]), np.array([3.0]))
    assert drop[0] == pytest.approx(0.38 / 16, abs=1e-5)
    # θ = ½ is under a level of 0.6: the edge is not among the hardest, and counts nothing.
    assert top_error_drops(*args, 0.6, np.array([0.2]), np.array([3.0]))[0] == pytest.approx(0.0, abs=1e-12)
    # An estimate already at θ worth 3 answers: one more answer only adds its noise, ¼/16.
    assert top_error_drops(*args, 0.4, np.array([0.5]), np.array([3.0]))[0] == pytest.approx(-0.25 / 16, abs=1e-5)


def test_top_error_drop_is_the_integral_over_the_margin_posterior():
    from scipy.integrate import quad

    # One margin of 0.3 (right, by a hair) under a prior error of 0.3, s² = 2, τ² = 3; the
    # estimate 0.15 worth 1.5 answers, the level 0.6. The same expectation by adaptive
    # quadrature over the normal posterior of M (mean and variance as in the module docstring).
    s2, tau2, level, est, c = 2.0, 3.0, 0.6, 0.15, 1.5
    mu0 = -math.sqrt(s2 + tau2) * norm.ppf(0.3)
    var = 1 / (1 / tau2 + 1 / s2)
    mean = var * (mu0 / tau2 + 0.3 / s2)

    def integrand(m):
        theta = norm.cdf(-m / math.sqrt(s2))
        drop = ((2 * c + 1) * (theta - est) ** 2 - theta * (1 - theta)) / (c + 1) ** 2
        return norm.pdf(m, mean, math.sqrt(var)) * drop * (theta >= level)

    cut = -math.sqrt(s2) * norm.ppf(level)  # θ ≥ level  ⇔  M ≤ cut
    exact, _ = quad(integrand, mean - 12 * math.sqrt(var), cut)
    drop = top_error_drops(np.array([0.3]), np.array([1]), np.array([0.3]), s2, tau2, level, np.array([est]),
                           np.array([c]))
    assert drop[0] == pytest.approx(exact, rel=1e-4)
    assert exact == pytest.approx(0.03506, abs=1e-5)


def test_the_estimate_moves_focus_s_prior_mean_to_what_the_margins_predict():
    """Six edges answered right once each: focus estimates every one alike. margin-focus
    moves the K prior pseudo-answers from the predicate's rate to the margin model's.

    By hand (focus's starting fit, K = 2 and c = 4, before any refit): the global error
    rate (0 + 1)/(6 + 2) = 1/8, the predicate's (0 + 2/8)/(6 + 2) = 1/32, so focus gives
    (2/32 + 0)/(2 + 1) = 0.020833 each. The margins: s² the default 1.5² = 2.25 (no
    repeats), τ² their variance 8.1458 less 2.25 = 5.8958, μ0 = −sqrt(8.1458)·Φ⁻¹(1/32)
    = 5.3164. The margin 0.2: v = 1/(1/5.8958 + 1/2.25) = 1.6285, mean
    v·(5.3164/5.8958 + 0.2/2.25) = 1.6133, rate Φ(−1.6133/sqrt(2.25 + 1.6285)) = 0.2063,
    estimate 2·0.2063/3 = 0.1376.
    """
    pkg = _pkg(6)
    margins = np.array([6.0, 0.2, 4.0, 0.5, 8.0, 2.0])
    pkg.update(np.arange(6), np.ones(6, dtype=bool), margins)
    focus = make_sampler("focus").estimate(pkg)
    assert focus == pytest.approx(np.full(6, 2 / 32 / 3), abs=1e-12)
    est = make_sampler("margin-focus").estimate(pkg)
    assert est[1] == pytest.approx(0.13757, abs=1e-5)
    # The thinner the margin, the higher the estimate; a confident right answer goes below focus's.
    assert np.argsort(-est).tolist() == [1, 3, 5, 2, 0, 4]
    assert est[4] == pytest.approx(7.6e-5, abs=1e-6)
    # Verdicts still decide as answers grow: two wrong answers by a hair on edge 1 take it
    # above ½ although the margins say little.
    for _ in range(2):
        pkg.update(np.array([1]), np.array([False]), np.array([-0.1]))
    assert make_sampler("margin-focus").estimate(pkg)[1] > 0.5


def test_without_margins_the_estimate_is_focus_s():
    pkg = _pkg(6)
    pkg.update(np.arange(6), np.array([True, False, True, True, False, True]))
    assert np.array_equal(make_sampler("margin-focus").estimate(pkg), make_sampler("focus").estimate(pkg))


def test_the_level_puts_the_top_share_above_it():
    prior, count, total = np.full(4, 0.5), np.array([1, 1, 1, 1]), np.array([-3.0, -1.0, 1.0, 3.0])
    t = margin_level(lambda lv: top_probabilities(prior, count, total, 1.0, 4.0, lv), 0.25)
    assert np.mean(top_probabilities(prior, count, total, 1.0, 4.0, t)) == pytest.approx(0.25, abs=1e-6)


def test_the_pkg_keeps_margin_counts_only_when_given_and_restores_them():
    pkg = _pkg()
    pkg.update(np.array([0, 1]), np.array([True, False]))
    assert pkg.margin_count is None and "margin_count" not in pkg.state_dict()
    pkg.update(np.array([0, 1, 2]), np.array([True, False, True]), np.array([1.5, -2.0, np.nan]))
    pkg.update(np.array([0]), np.array([True]), np.array([0.5]))
    assert pkg.margin_count[:3].tolist() == [2, 1, 0]
    assert pkg.margin_sum[:3].tolist() == [2.0, -2.0, 0.0]
    assert pkg.margin_squares[:3].tolist() == [2.5, 4.0, 0.0]
    # The verdicts alone move the counts: the margins change nothing else.
    assert pkg.successes[:3].tolist() == [3, 0, 1] and pkg.failures[:3].tolist() == [0, 2, 0]
    other = _pkg()
    other.load_state_dict(pkg.state_dict())
    assert np.array_equal(other.margin_sum, pkg.margin_sum) and np.array_equal(other.margin_count, pkg.margin_count)
    # A state written before margins existed (or by a run that passed none) has none.
    state = {k: v for k, v in pkg.state_dict().items() if not k.startswith("margin_")}
    other.load_state_dict(state)
    assert other.margin_count is None
    # A margin array of the wrong size, or one of the three missing, is refused before
    # anything is restored: the PKG keeps the state it had.
    before = {k: v.copy() for k, v in other.state_dict().items()}  # restored above, without margins
    bad = {**pkg.state_dict(), "margin_sum": np.zeros(3)}
    with pytest.raises(InputError, match="'margin_sum' has shape"):
        other.load_state_dict(bad)
    partial = {k: v for k, v in pkg.state_dict().items() if k != "margin_squares"}
    with pytest.raises(InputError, match="not all of"):
        other.load_state_dict(partial)
    after = other.state_dict()
    assert other.margin_count is None and after.keys() == before.keys()
    assert all(np.array_equal(after[k], before[k]) for k in before)
    with pytest.raises(InputError, match="one margin"):
        pkg.update(np.array([0, 1]), np.array([True, True]), np.array([1.0]))
    with pytest.raises(InputError, match="finite"):
        pkg.update(np.array([0]), np.array([True]), np.array([np.inf]))


def test_without_margins_the_picks_are_focus_s():
    a, b = _pkg(), _pkg()
    focus, margin = make_sampler("focus"), make_sampler("margin-focus")
    for r in range(3):
        pa = focus.select(a, 3, np.random.default_rng(r))
        pb = margin.select(b, 3, np.random.default_rng(r))
        assert pa.edges.tolist() == pb.edges.tolist() and pa.design.tolist() == pb.design.tolist()
        verdicts = np.array([True, False, True])
        a.update(pa.edges, verdicts)
        b.update(pb.edges, verdicts)


def test_a_right_answer_by_a_hair_is_asked_again_before_a_confident_one():
    """Six edges, each answered once, all right: the same counts, so the same pooled
    posterior and the same count-variance term for every one. Only the margins differ,
    and the sampler (design draws off) asks the edges with the thinnest margins first."""
    pkg = _pkg(6)
    margins = np.array([6.0, 0.2, 4.0, 0.5, 8.0, 2.0])
    pkg.update(np.arange(6), np.ones(6, dtype=bool), margins)
    sampler = make_sampler("margin-focus", design_fraction=0.0)
    picks = sampler.select(pkg, 3, np.random.default_rng(0))
    assert picks.edges.tolist() == [1, 3, 5] and not picks.design.any()
    # focus, blind to the margins, ranks them all alike (its picks are ties broken at random).
    focus = make_sampler("focus", design_fraction=0.0)
    assert sorted(focus.select(pkg, 6, np.random.default_rng(0)).edges.tolist()) == list(range(6))


def test_a_top_edge_an_answer_may_hide_is_asked_before_a_known_blind_spot():
    """Edge 0 answered wrong twice (margins −2), edge 1 right once by 0.5, six more right
    once with margins 3 to 8. The count-variance term alone would ask edge 0 again, whose
    rate two wrong answers already put high; the margin model's view of the error adds
    that edge 1, if it is among the hardest, is estimated near 0, and asks it first."""
    from kgprobe.sampling.margin import margin_level

    pkg = _pkg(8)
    for _ in range(2):
        pkg.update(np.array([0]), np.array([False]), np.array([-2.0]))
    pkg.update(np.arange(1, 8), np.ones(7, dtype=bool), np.array([0.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]))
    sampler = make_sampler("margin-focus", design_fraction=0.0)
    assert sampler.select(pkg, 1, np.random.default_rng(0)).edges.tolist() == [1]
    a, b = sampler.posterior(pkg)
    count, total = pkg.margin_count, pkg.margin_sum
    s2, tau2 = margin_variances(count, total, pkg.margin_squares)
    prior = sampler.posterior.prior_mean(pkg)
    level = margin_level(lambda t: top_probabilities(prior, count, total, s2, tau2, t), sampler.top_share)
    top = top_probabilities(prior, count, total, s2, tau2, level)
    p = a / (a + b)
    first = top * p * (1 - p) / (a + b + 1) ** 2
    second = top_error_drops(prior, count, total, s2, tau2, level, sampler.estimate(pkg), a + b)
    assert first[0] > first[1] and int(np.argmax(first)) == 0
    assert second[1] > 4 * second[0] and int(np.argmax(first + second)) == 1
    # Every probe a design draw (a run's default): the design alone, nothing ranked.
    design_only = make_sampler("margin-focus", design_fraction=1.0).select(pkg, 3, np.random.default_rng(0))
    assert design_only.design.all() and design_only.edges.size == 3


def test_the_replay_hands_out_the_margin_of_the_pass_it_hands_out():
    from kgprobe.simulation.replay import ReplayOracle
    from kgprobe.sweep import Sweep

    gold = np.array([[-1.0, -2.0, -0.5], [-3.0, -0.25, -4.0]], dtype=np.float32)
    wrong = np.array([[-2.0, -1.0, -1.5], [-1.0, -2.25, -3.0]], dtype=np.float32)
    sweep = Sweep(kg="t", kg_hash="h", method="zp-lke", probe_options={}, model="m", passes=3, seed=0,
                  edges=np.array([0, 1]),
                  correct=gold > wrong, gold_logprob=gold, best_wrong_logprob=wrong, made_by="test")
    oracle = ReplayOracle(sweep, seed=3)
    for _ in range(3):
        right = oracle.answer(np.array([1, 0]))
        # Each margin is the one of the pass whose verdict came with it.
        assert np.array_equal(right, oracle.last_margins > 0)
        for row, m in zip((1, 0), oracle.last_margins):
            assert m in (gold[row] - wrong[row]).tolist()
    # Every pass handed out once: the three margins of each edge, each once.
    oracle = ReplayOracle(sweep, seed=3)
    seen = []
    for _ in range(3):
        oracle.answer(np.array([0, 1]))
        seen.append(oracle.last_margins.tolist())
    assert sorted(s[0] for s in seen) == sorted((gold[0] - wrong[0]).tolist())
    assert sorted(s[1] for s in seen) == sorted((gold[1] - wrong[1]).tolist())


def test_a_replayed_run_gives_a_margin_reader_the_recorded_margins_as_the_engine_does():
    """simulate_run (the coverage replays) hands margin-focus each answer's recorded margin.

    Under the default design every probe is a design draw whose lean follows the sampler's
    estimate, so the margins show in the predictions from the second round on; without
    log-probs in the sweep margin-focus is focus, probe for probe.
    """
    import dataclasses

    from kgprobe.simulation.coverage import replay_setup, simulate_run
    from kgprobe.sweep import load_sweep

    sweep = load_sweep("default")
    common = dict(sampler_options={"design_fraction": 1.0}, budget=64, batch=32, seed=0, design="adaptive")
    setup = replay_setup(sweep)
    focus = simulate_run(setup, sweep, sampler="focus", **common)
    margin = simulate_run(setup, sweep, sampler="margin-focus", **common)
    first = focus.round == 0
    assert np.array_equal(focus.edge[first], margin.edge[first])
    assert np.array_equal(focus.predicted[first], margin.predicted[first])
    assert not np.array_equal(focus.predicted[~first], margin.predicted[~first])
    bare = dataclasses.replace(sweep, gold_logprob=None, best_wrong_logprob=None)
    setup = replay_setup(bare)
    plain = simulate_run(setup, bare, sampler="margin-focus", **common)
    assert np.array_equal(plain.edge, focus.edge) and np.array_equal(plain.predicted, focus.predicted)
