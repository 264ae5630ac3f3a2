"""Samplers: determinism under a seed, hand-checkable selections, the exact fast Thompson path."""

import numpy as np
import pytest

from kgprobe.errors import InputError
from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.sampling import SAMPLERS, make_sampler
from kgprobe.sampling.focus import focus_scores, top_level, top_share_values
from kgprobe.sampling.thompson import KGLensThompsonSampler as ThompsonSampler
from kgprobe.simulation.synthetic import skewed_graph


def ring(n=40, dead=(3, 7)):
    heads = np.arange(n)
    tails = (heads + 1) % n
    active = np.ones(n, dtype=bool)
    active[list(dead)] = False
    return ParameterizedKG(heads, tails, active)


def run_rounds(name, seed, rounds=5, n=6):
    pkg = ring()
    sampler = make_sampler(name)
    rng = np.random.default_rng(seed)
    answers = np.random.default_rng(99)
    picks = []
    for _ in range(rounds):
        sel = sampler.select(pkg, n, rng)
        picks.append((sel.edges.tolist(), sel.design.tolist()))
        pkg.update(sel.edges, answers.random(n) < 0.5)
    return picks


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_deterministic_under_seed(name):
    a, b, c = run_rounds(name, 1), run_rounds(name, 1), run_rounds(name, 2)
    assert a == b
    assert a != c
    for edges, design in a:
        assert len(set(edges)) == 6 and not {3, 7} & set(edges)  # distinct, never dead
        assert len(design) == 6


def test_brute_force_sweeps_every_edge_once_per_epoch():
    pkg = ring(n=12, dead=(0, 5))  # 10 active edges
    s = make_sampler("brute-force")
    rng = np.random.default_rng(0)
    rounds = [s.select(pkg, 4, rng).edges.tolist() for _ in range(5)]  # 20 picks = 2 epochs
    flat = sum(rounds, [])
    active = [1, 2, 3, 4, 6, 7, 8, 9, 10, 11]
    # Round 3 ends epoch 1 with 2 edges and starts epoch 2 with 2 others.
    assert sorted(flat[:10]) == active and sorted(flat[10:]) == active
    assert all(len(set(r)) == 4 for r in rounds)
    assert all(s.select(pkg, 4, rng).design.all() for _ in range(2))


def test_epsilon_zero_is_greedy_on_posterior_mean():
    pkg = ring()
    pkg.alpha[[10, 20, 30]] = [9.0, 5.0, 3.0]  # means 0.9, 0.833, 0.75; everything else 0.5
    sel = make_sampler("epsilon-greedy", epsilon=0.0).select(pkg, 3, np.random.default_rng(0))
    assert sel.edges.tolist() == [10, 20, 30] and not sel.design.any()


def test_design_fraction_counts():
    pkg = ring()
    s = ThompsonSampler(design_fraction=0.25)
    rng = np.random.default_rng(0)
    counts = [int(s.select(pkg, 8, rng).design.sum()) for _ in range(20)]
    assert set(counts) == {2}  # 0.25 * 8 = 2 exactly: no stochastic rounding needed
    s = ThompsonSampler(design_fraction=0.1)
    counts = [int(s.select(pkg, 8, rng).design.sum()) for _ in range(400)]
    assert set(counts) == {0, 1} and abs(np.mean(counts) - 0.8) < 0.08  # 0.8 = 0.1 * 8


def test_bad_batches_and_names():
    pkg = ring()  # 38 active edges
    for n in (0, -1, 39):
        with pytest.raises(InputError, match="batch size"):
            make_sampler("thompson").select(pkg, n, np.random.default_rng(0))
    with pytest.raises(InputError, match="unknown sampler"):
        make_sampler("annealing")
    with pytest.raises(InputError, match="epsilon"):
        make_sampler("epsilon-greedy", epsilon=1.5)
    with pytest.raises(InputError, match="does not take"):
        make_sampler("uniform", epsilon=0.1)


def test_focus_score_by_hand():
    # Beta(2, 1): mean p = 2/3, a+b = 3, P(θ > 1/2) = 1 - 0.5**2 = 0.75,
    # variance of the posterior-mean update = p(1-p)/(a+b+1)^2 = (2/9)/16.
    assert focus_scores(np.array([2.0]), np.array([1.0]))[0] == pytest.approx(0.75 * (2 / 9) / 16)
    # Beta(1, 1): p = 1/2, P(θ > 1/2) = 1/2, update variance = (1/4)/9.
    assert focus_scores(np.array([1.0]), np.array([1.0]))[0] == pytest.approx(0.5 * 0.25 / 9)


def test_top_share_value_by_hand():
    # Beta(1, 1), level ½: L = E[(θ − ½)² 1{θ ≥ ½}] = ∫_½^1 (θ − ½)² dθ = 1/24.
    # After a wrong answer Beta(2, 1) (density 2θ, mean 2/3): L = ∫_½^1 2θ(θ − 2/3)² dθ = 7/288;
    # after a right one Beta(1, 2) (density 2(1 − θ), mean 1/3): L = ∫_½^1 2(1 − θ)(θ − 1/3)² dθ = 1/32.
    # Each with probability ½: value = 1/24 − (7/288 + 1/32)/2 = 1/72.
    a, b = np.array([1.0]), np.array([1.0])
    assert top_share_values(a, b, 0.5)[0] == pytest.approx(1 / 72)
    # Level 0: the whole posterior variance, whose expected drop is the focus score's
    # update variance p(1 − p)/(a + b + 1)² = (1/4)/9.
    assert top_share_values(a, b, 0.0)[0] == pytest.approx(1 / 36)


def test_top_level_by_hand():
    # Beta(1, 1) edges: P(θ ≥ t) = 1 − t, so the level of the top quarter is ¾.
    assert top_level(np.ones(4), np.ones(4), 0.25) == pytest.approx(0.75, abs=1e-8)
    # Beta(1, 1) and Beta(2, 1): mean of (1 − t) and (1 − t²) = ½  ->  t² + t − 1 = 0, t = (√5 − 1)/2.
    assert top_level(np.array([1.0, 2.0]), np.array([1.0, 1.0]), 0.5) == pytest.approx((5 ** 0.5 - 1) / 2, abs=1e-8)
    # The same pair standing for 3 and 1 edges: (3(1 − t) + (1 − t²))/4 = ½  ->  t² + 3t − 2 = 0.
    assert top_level(np.array([1.0, 2.0]), np.array([1.0, 1.0]), 0.5, weights=np.array([3, 1])) == \
        pytest.approx((17 ** 0.5 - 3) / 2, abs=1e-8)


def test_focus_takes_value_picks_first_then_focus_scores():
    # Disjoint edges, no propagation; the pooled fit is fixed (K = 2, c = 4) and never refitted.
    heads = np.arange(5) * 2
    pkg = ParameterizedKG(heads, heads + 1, np.ones(5, bool), predicates=np.zeros(5))
    # Edge 0 wrong twice, 1 right once, 2 wrong once, 3 right twice and wrong once; 4 unasked.
    pkg.update(np.array([0, 1, 2, 3]), np.array([False, True, False, True]))
    pkg.update(np.array([0, 3]), np.array([False, True]))
    pkg.update(np.array([3]), np.array([False]))
    s = make_sampler("focus", design_fraction=0.0, top_share=0.25, value_share=0.5)
    s.load_state_dict({"strength": 2.0, "pseudo_count": 4.0, "fitted_at": 10**9, "rounds": 0})
    a, b = s.posterior(pkg)
    level = top_level(a, b, 0.25)
    value, score = top_share_values(a, b, level), focus_scores(a, b)
    sel = s.select(pkg, 4, np.random.default_rng(0))
    by_value = np.argsort(-value, kind="stable")[:2]
    assert sel.edges[:2].tolist() == by_value.tolist()
    score[by_value] = -1.0
    assert sel.edges[2:].tolist() == np.argsort(-score, kind="stable")[:2].tolist()
    assert not sel.design.any()
    # value_share 0: the focus score alone.
    s0 = make_sampler("focus", design_fraction=0.0, value_share=0.0)
    s0.load_state_dict({"strength": 2.0, "pseudo_count": 4.0, "fitted_at": 10**9, "rounds": 0})
    assert s0.select(pkg, 4, np.random.default_rng(0)).edges.tolist() == \
        np.argsort(-focus_scores(a, b), kind="stable")[:4].tolist()


def test_pooled_posterior_by_hand():
    # Path 0-1-2-3: e0=(0,1), e1=(1,2), e2=(2,3); one predicate.
    pkg = ParameterizedKG(np.array([0, 1, 2]), np.array([1, 2, 3]), np.ones(3, bool), predicates=np.zeros(3))
    pkg.update(np.array([0]), np.array([False]))  # e0 wrong once
    s = make_sampler("pooled-thompson")
    s.posterior.strength, s.posterior.pseudo_count = 2.0, 4.0  # K, c fixed by hand
    # global g = (1 + 1) / (1 + 2) = 2/3; predicate π = (1 + 2g) / (1 + 2) = (7/3)/3 = 7/9.
    # e0: no neighbour signal  -> μ = π = 7/9; θ̂ = (2·7/9 + 1) / (2 + 1) = (23/9)/3 = 23/27
    # e1: one failed neighbour -> μ = (1 + 4·7/9) / (1 + 4) = (37/9)/5 = 37/45; θ̂ = μ
    # e2: no neighbour signal  -> θ̂ = π = 7/9
    np.testing.assert_allclose(s.estimate(pkg), [23 / 27, 37 / 45, 7 / 9])


def _top1_frequency(sampler, pkg, trials, seed):
    rng = np.random.default_rng(seed)
    return np.mean([sampler.select(pkg, 1, rng).edges[0] == 0 for _ in range(trials)])


def test_threshold_thompson_is_exact():
    # 1000 edges; edge 0 ~ Beta(1000, 1), the rest Beta(1, 1).
    # P(edge 0 wins top-1) = ∫ 1000 x^999 · x^999 dx = 1000 / 1999 ≈ 0.50025.
    heads = np.arange(1000) * 2
    pkg = ParameterizedKG(heads, heads + 1, np.ones(1000, bool))  # disjoint edges
    pkg.alpha[0] = 1000.0
    trials = 800  # sd of the frequency ≈ 0.018; the bound below is ~4 sd
    fast = _top1_frequency(ThompsonSampler(direct_limit=0, design_fraction=0.0), pkg, trials, 0)
    direct = _top1_frequency(ThompsonSampler(design_fraction=0.0), pkg, trials, 1)
    assert abs(fast - 1000 / 1999) < 0.07
    assert abs(direct - 1000 / 1999) < 0.07


def test_threshold_path_on_a_skewed_graph_after_propagation():
    heads, tails, active = skewed_graph(50_000, seed=3)
    pkg = ParameterizedKG(heads, tails, active)
    s = ThompsonSampler(direct_limit=0, design_fraction=0.1)
    rng = np.random.default_rng(0)
    for _ in range(5):
        sel = s.select(pkg, 64, rng)
        assert len(set(sel.edges.tolist())) == 64 and pkg.active[sel.edges].all()
        pkg.update(sel.edges, rng.random(64) < 0.5)
    # A bin-cached copy and a fresh pkg with the same state select identically.
    fresh = ParameterizedKG(heads, tails, active)
    fresh.load_state_dict(pkg.state_dict())
    a = s.select(pkg, 64, np.random.default_rng(5)).edges
    b = s.select(fresh, 64, np.random.default_rng(5)).edges
    assert a.tolist() == b.tolist()


def test_design_draws_are_uniform_over_active_edges():
    from kgprobe.sampling.design_draws import draw_design

    heads = np.arange(100) * 2
    active = np.zeros(100, bool)
    active[::2] = True  # 50 active edges; k = 2 takes the O(k) rejection path (2·16 < 50)
    pkg = ParameterizedKG(heads, heads + 1, active)
    rng = np.random.default_rng(0)
    picks = np.concatenate([draw_design(pkg, 2, rng) for _ in range(5000)])
    counts = np.bincount(picks, minlength=100)
    assert counts[1::2].sum() == 0  # never a dead edge
    # 10,000 picks over 50 edges: 200 each, sd ≈ 14; 70 is 5 sd.
    assert np.abs(counts[::2] - 200).max() < 70
    assert all(len(set(draw_design(pkg, 2, rng).tolist())) == 2 for _ in range(200))
