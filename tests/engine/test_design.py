"""The run's design (kgprobe.sampling.design) and the estimators that rest on it, by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from kgprobe.compare import _difference
from kgprobe.estimators import DESIGN, TOO_FEW, design_estimate, hajek_estimate, probe_weights, round_spread
from kgprobe.sampling.design import (
    hunting_weights,
    lean_scores,
    projected_halfwidth,
    FLOOR,
    LEAN_PART,
    DesignPlan,
    draw_by_strata,
    rounds_to_come,
    run_minimum,
    stratified_probabilities,
    stratum_minimums,
)


def test_stratum_minimums_and_inclusion_probabilities_by_hand():
    # Five edges, predicate 0 holds four, predicate 1 one; two draws per round, four rounds
    # left, a run target of 4 draws per stratum: each needs (4 − 0)/4 = 1 draw this round,
    # capped at its size (1, 1), then scaled to half the round's draws: (0.5, 0.5).
    need = stratum_minimums(np.zeros(2), np.array([4, 1]), rounds_left=4, k=2, target=4)
    assert need.tolist() == [0.5, 0.5]
    # Uniform π = 2/5 = 0.4 each; predicate 1 holds 0.4 < 0.5, so its edge gets 0.5 and the
    # other four share the remaining 1.5: 0.375 each.
    labels = np.array([0, 0, 0, 0, 1])
    pi = stratified_probabilities(np.ones(5, bool), 2, [(labels, need)])
    assert pi == pytest.approx([0.375, 0.375, 0.375, 0.375, 0.5])
    # A stratum that already met its target needs nothing more; the other's 1 draw is half
    # of the round's 2, within the cap.
    assert stratum_minimums(np.array([4.0, 0.0]), np.array([4, 1]), rounds_left=4, k=2).tolist() == [0.0, 1.0]


def test_stratum_minimums_give_the_first_two_draws_quickly_and_spread_the_rest_over_the_run():
    # Target 4, the first 2 over the next two rounds, the rest over the 8 rounds left; k is
    # large, so the cap at half the round's draws does not bind. Counts 0, 1, 2, 3.5, 4:
    # quick part (2 − c)/2 = 1, 0.5, 0, 0, 0; the rest (4 − c)/8 = 0.5, 0.375, 0.25,
    # 0.0625, 0: the larger of the two.
    counts = np.array([0.0, 1.0, 2.0, 3.5, 4.0])
    sizes = np.full(5, 100)
    need = stratum_minimums(counts, sizes, rounds_left=8, k=100, target=4)
    assert need.tolist() == [1.0, 0.5, 0.25, 0.0625, 0.0]
    # The last round gives all that is left: the quick part over min(1, 2) = 1 round is
    # 2, 1, 0, 0, 0, the rest 4, 3, 2, 0.5, 0.
    assert stratum_minimums(counts, sizes, rounds_left=1, k=100, target=4).tolist() == [4.0, 3.0, 2.0, 0.5, 0.0]
    # A part's share of the minimums: a target of 1.2 and a quick part of 0.6 over 2
    # rounds left: max(0.6/2, 1.2/2) = 0.6.
    assert stratum_minimums(np.zeros(1), np.array([2]), rounds_left=2, k=3, target=1.2, first=0.6).tolist() == [0.6]


def test_rounds_to_come_count_this_round_by_the_budget_and_the_round_limit():
    # 96 queries in rounds of 32: 3 rounds; 97 need a fourth, short one; a round limit of
    # 2 rounds left comes first; with neither bound the rounds to come are not known.
    assert [rounds_to_come(q, 32) for q in (96, 95, 97, 1)] == [3, 3, 4, 1]
    assert rounds_to_come(96, 32, 2) == 2 and rounds_to_come(None, 32, 5) == 5
    assert rounds_to_come(None, 32) is None


def test_run_minimum_caps_what_the_small_strata_cost_by_hand():
    # 100 edges: predicates of 90, 5 and 5; 40 design draws. By proportion a 5-edge
    # predicate gets 40·5/100 = 2 draws, so a minimum m costs 2·(m − 2) extra draws, at
    # most 0.05·40 = 2: m = 3. A larger budget (80 draws: 4 each by proportion) costs
    # nothing at the full 4; an unknown budget keeps 4.
    predicates = np.array([90, 5, 5])
    one_group = np.array([100])
    assert run_minimum([predicates, one_group], 100, 40) == pytest.approx(3.0, abs=1e-9)
    assert run_minimum([predicates, one_group], 100, 80) == 4.0
    assert run_minimum([predicates, one_group], 100, None) == 4.0
    # A small subject group counts as well: groups of 95 and 5 edges make a third stratum
    # of 5 edges, so 3·(m − 2) ≤ 2 gives m = 2 + 2/3.
    assert run_minimum([predicates, np.array([95, 5])], 100, 40) == pytest.approx(8 / 3, abs=1e-9)
    # Twenty one-edge predicates: each asks min(m, 1) = 1 against 40/100 = 0.4 by
    # proportion, 12 extra draws whatever m is, more than 2: the least an interval needs.
    many = np.array([80] + [1] * 20)
    assert run_minimum([many, one_group], 100, 40) == 2.0
    # A plan that asks for fewer than two (here none) keeps its own target, however costly.
    assert run_minimum([many, one_group], 100, 40, target=0) == 0.0


def test_a_capped_plan_sets_its_minimum_from_the_kg_and_the_budget_and_older_rules_keep_four():
    predicate = np.array([0] * 90 + [1] * 5 + [2] * 5)
    group = np.zeros(100, int)
    active = np.ones(100, bool)
    assert DesignPlan("adaptive", predicate, group, active, draws=40).min_draws == pytest.approx(3.0, abs=1e-9)
    assert DesignPlan("adaptive", predicate, group, active).min_draws == 4.0
    for older in ("budget", "early"):
        assert DesignPlan("adaptive", predicate, group, active, pacing=older, draws=40).min_draws == 4.0
    # The floor of a round of 10 draws (floor share 0.35: 4 draws) in a run of 4 rounds
    # carries 4/10 of the minimum of 3: each small predicate needs max(0.8/2, 1.2/4) = 0.4
    # against 4·5/100 = 0.2 by proportion, so its five edges get 0.08 each and the other
    # 90 share the remaining 3.2.
    plan = DesignPlan("adaptive", predicate, group, active, draws=40)
    pi_f = plan.floor_probabilities(4, rounds_left=4, share=0.4)
    assert pi_f == pytest.approx([3.2 / 90] * 90 + [0.08] * 10)


def test_each_part_of_an_adaptive_round_carries_its_share_of_the_minimums():
    # 20 edges: predicate 0 holds 18, predicate 1 the last two; one subject group. A round
    # of 10 draws, floor share 0.3: 3 floor draws carry 3/10 of the minimum of 4 (1.2, of
    # which 0.6 quickly), the 7 lean draws 7/10 (2.8, 1.4 quickly); two rounds left.
    predicate = np.array([0] * 18 + [1] * 2)
    plan = DesignPlan("adaptive", predicate, np.zeros(20, int), np.ones(20, bool), floor_share=0.3)
    # Floor: predicate 1 needs max(0.6/2, 1.2/2) = 0.6 of the uniform 3/20 = 0.15 per edge
    # (0.3 in all), so its edges get 0.3 each; the other 18 share the remaining 2.4: 2/15.
    pi_f = plan.floor_probabilities(3, rounds_left=2, share=0.3)
    assert pi_f == pytest.approx([2 / 15] * 18 + [0.3, 0.3])
    # Lean, with edges 0, 1 and 18 in the floor: 17 edges left, predicate 1 holds one. It
    # needs max(1.4/2, 2.8/2) = 1.4, capped at its one edge: π = 1; the other 16 share 6.
    pi_l = plan.lean_probabilities(None, 7, exclude=np.array([0, 1, 18]), rounds_left=2, share=0.7)
    assert pi_l == pytest.approx([0.0, 0.0] + [0.375] * 16 + [0.0, 1.0])
    # Without a share (the default) the lean is the plain uniform design over the 17.
    assert plan.lean_probabilities(None, 7, exclude=np.array([0, 1, 18])) == pytest.approx(
        [0.0, 0.0] + [7 / 17] * 16 + [0.0, 7 / 17])
    # The counts of each part are kept apart: the floor's minimums never see lean draws,
    # so two models' runs with the same seed still draw the same floor.
    plan.record(np.array([18, 19, 5]), np.array([FLOOR, LEAN_PART, LEAN_PART]))
    assert plan.counts["predicate"].tolist() == [0.0, 1.0]
    assert plan.lean_counts["predicate"].tolist() == [1.0, 1.0]


def test_draw_by_strata_hits_each_edge_with_its_probability_and_fills_strata_to_floor_or_ceiling():
    pi = np.array([0.375, 0.375, 0.375, 0.375, 0.5])
    labels = np.array([0, 0, 0, 0, 1])
    rng = np.random.default_rng(0)
    hits = np.zeros(5)
    runs = 8000
    for _ in range(runs):
        drawn = draw_by_strata(pi, labels, rng)
        assert drawn.size == 2
        # Predicate 0 expects 1.5 draws: always 1 or 2, never 0.
        assert np.sum(labels[drawn] == 0) in (1, 2)
        hits[drawn] += 1
    # Binomial standard error at π = 0.5 over 8,000 draws: 0.0056; 4 of them allowed.
    assert hits / runs == pytest.approx(pi, abs=0.023)


def test_adaptive_design_estimate_is_unbiased_by_enumeration():
    # Four edges with known chances μ of a right answer and predictions ŷ. One round, a
    # floor draw of 1 (uniform, π = 1/4) and a lean draw of 1 among the three edges left,
    # with π from the plan. Enumerating every (floor, lean) pair and every pair of answers,
    # the expectation of the estimate is exactly mean μ.
    mu = np.array([0.9, 0.2, 0.6, 0.0])
    yhat = np.array([0.8, 0.5, 0.5, 0.1])
    plan = DesignPlan("adaptive", np.zeros(4, int), np.zeros(4, int), np.ones(4, bool), min_draws=0)
    pi_f = plan.floor_probabilities(1, rounds_left=1)
    assert pi_f == pytest.approx([0.25] * 4)
    expectation = 0.0
    for f in range(4):
        pi_l = plan.lean_probabilities(yhat, 1, exclude=np.array([f]))
        assert pi_l.sum() == pytest.approx(1.0) and pi_l[f] == 0.0
        for g in range(4):
            if pi_l[g] == 0:
                continue
            p_pair = pi_f[f] * pi_l[g]
            for yf, yg in itertools.product((0, 1), repeat=2):
                p_y = (mu[f] if yf else 1 - mu[f]) * (mu[g] if yg else 1 - mu[g])
                est = design_estimate([yf, yg], yhat[[f, g]], [pi_f[f], pi_l[g]], [0, 0], [yhat.mean()], n_group=4,
                                      parts=[FLOOR, LEAN_PART])
                expectation += p_pair * p_y * est.raw
    assert expectation == pytest.approx(mu.mean(), abs=1e-12)


def test_probe_weights_of_the_two_parts_by_hand():
    # A round with 1 floor draw (π = 0.25) and 1 lean draw (π = 0.5): the floor probe
    # weighs (1/2)/0.25 + 1/2 = 2.5, the lean one (1/2)/0.5 = 1; one-part rounds 1/π.
    w = probe_weights([0.25, 0.5, 0.4], [0, 0, 1], [FLOOR, LEAN_PART, FLOOR])
    assert w == pytest.approx([2.5, 1.0, 2.5])
    assert probe_weights([0.25, 0.5], [0, 0]) == pytest.approx([4.0, 2.0])


def test_hajek_estimate_and_korn_graubard_interval_by_hand():
    # Four design probes of one round (m = 4), π = 0.5, 0.25, 0.5, 0.5; the group holds the
    # first three. Weights a = m/π = 8, 16, 8: estimate (8 + 8)/32 = 0.5 — in [0, 1] however
    # the weights fall. Linearized scores a(y − 0.5) = 4, −8, 4 and 0 outside the group:
    # mean 0, sample variance 96/3 = 32, v = 4·32/32² = 0.125; Kish n = 32²/384 = 2.67, so
    # n* = 0.25/0.125 = 2; Clopper–Pearson for 1 of 2: [1 − √0.975, √0.975].
    est = hajek_estimate([1, 0, 1, 0], probe_weights([0.5, 0.25, 0.5, 0.5], [0] * 4), [0] * 4,
                         [True, True, True, False], n_group=7)
    assert (est.estimate, est.n, est.edges, est.basis) == (0.5, 3, 7, DESIGN)
    assert est.low == pytest.approx(1 - math.sqrt(0.975), abs=1e-9)
    assert est.high == pytest.approx(math.sqrt(0.975), abs=1e-9)
    # Two right answers at equal weights: estimate 1, Kish n = 2, Clopper–Pearson [√0.025, 1].
    est = hajek_estimate([1, 1, 0], [2.0, 2.0, 2.0], [0, 0, 0], [True, True, False], n_group=3)
    assert est.estimate == 1.0 and est.high == 1.0 and est.low == pytest.approx(math.sqrt(0.025), abs=1e-9)
    # One design probe: no number, no [0 %, 100 %].
    est = hajek_estimate([1, 0], [2.0, 2.0], [0, 0], [True, False], n_group=3)
    assert est.basis == TOO_FEW and est.n == 1 and math.isnan(est.estimate)
    assert est.as_dict()["estimate"] is None and "raw" not in est.as_dict()


def _two_round_table(means):
    """Round 0 (one part): P1's edge drawn with π 0.5 (wrong), P2's with π 0.5 (right).
    Round 1 (adaptive, one floor and one lean draw): P2's floor draw with π 0.9 (right),
    P1's lean draw with π 0.05 (right)."""
    from kgprobe.estimators import ProbeTable

    labels = {"predicate": np.array(["P1", "P2", "P2", "P1"], dtype=object)}
    return ProbeTable(np.array([False, True, True, True]), np.ones(4, bool), np.full(4, 0.5),
                      np.array([0.5, 0.5, 0.9, 0.05]), np.array([0, 0, 1, 1]), labels, means,
                      {"predicate": {"P1": 2, "P2": 8}}, part=np.array([FLOOR, FLOOR, FLOOR, LEAN_PART]))


def test_a_predicate_weighs_each_round_by_the_draws_it_expected_there_by_hand():
    from kgprobe.estimators import group_estimates, group_probe_weights

    # Expected draws (e_F, e_L) per round: P1 1.0 and 0 in round 0, 0.1 and 0.1 in round 1.
    means = [{"predicate": {"P1": (0.5, 0.25, 1.0, 0.0), "P2": (0.5, 0.25, 1.0, 0.0)}},
             {"predicate": {"P1": (0.5, 0.25, 0.1, 0.1), "P2": (0.5, 0.25, 0.9, 0.9)}}]
    table = _two_round_table(means)
    # P1: round 0's floor probe 1.0/0.5 + 0 = 2, round 1's lean probe 0.1/0.05 = 2: the
    # estimate is the plain share 1/2. Scores a(y − ½) = −1, 1 and 0, 0: s² = 2/3,
    # v = 4·(2/3)/4² = 1/6, n* = ¼/(1/6) = 1.5 (Kish's is 4²/8 = 2), df 0.5.
    assert group_probe_weights(table, "predicate", "P1")[[0, 3]] == pytest.approx([2.0, 2.0])
    est = group_estimates(table, "predicate")["P1"]
    assert est.estimate == pytest.approx(0.5) and est.df == pytest.approx(0.5)
    # P2: 1.0/0.5 = 2 and 0.9/0.9 + 0.9 = 1.9.
    assert group_probe_weights(table, "predicate", "P2")[[1, 2]] == pytest.approx([2.0, 1.9])
    # Without the expected draws (files written before them) each round weighs its design
    # draws, m = 2: the lean draw 2·(½)/0.05 = 20 against 2·(1/0.5) = 4, and P1's
    # estimate is 20/24 — the rare draw of round 1 outweighs round 0's five times.
    old = _two_round_table([{k: {g: v[:2] for g, v in m.items()} for k, m in r.items()} for r in means])
    assert group_probe_weights(old, "predicate", "P1")[[0, 3]] == pytest.approx([4.0, 20.0])
    assert group_estimates(old, "predicate")["P1"].estimate == pytest.approx(20 / 24)
    # An old run resumed by this version has them for its later rounds only: every round
    # is weighed the old way, not two scales mixed.
    resumed = _two_round_table([old.round_means[0], means[1]])
    assert group_probe_weights(resumed, "predicate", "P1")[[0, 3]] == pytest.approx([4.0, 20.0])


def test_for_the_whole_kg_the_expected_draws_give_the_kg_estimates_weights():
    # One group holding every edge expects the round's own draws: (2, 0), then (1, 1).
    from kgprobe.estimators import group_probe_weights

    means = [{"predicate": {"all": (0.5, 0.25, 2.0, 0.0)}}, {"predicate": {"all": (0.5, 0.25, 1.0, 1.0)}}]
    table = _two_round_table(means)
    table.labels = {"predicate": np.array(["all"] * 4, dtype=object)}
    m_t = np.array([2.0, 2.0, 2.0, 2.0])
    assert group_probe_weights(table, "predicate", "all") == pytest.approx(m_t * table.design_weights())
    assert group_probe_weights(table, "predicate", "all") == pytest.approx([4.0, 4.0, 1 / 0.9 + 1, 20.0])


def test_differences_are_cut_to_what_is_possible():
    # Predicates: MOVER from each side's interval. A = 1.0 [0.4, 1.0], B = 0.0 [0, 0.6]:
    # below = hypot(0.6, 0.6) = 0.848528 -> low 0.151472; above = hypot(0, 0) = 0 -> high 1.
    a = {"estimate": 1.0, "low": 0.4, "high": 1.0, "se": 0.1, "basis": DESIGN}
    b = {"estimate": 0.0, "low": 0.0, "high": 0.6, "se": 0.1, "basis": DESIGN}
    d = _difference(a, b, group=True)
    assert d["low"] == pytest.approx(1 - 0.848528, abs=1e-6) and d["high"] == 1.0 and d["test"] == "unpaired"
    # KG, unpaired: 0.8 ± 1.959964·sqrt(0.18) = [−0.0315, 1.6315] would pass +100 points;
    # the two intervals [0.8, 1.0] and [0, 0.2] allow only [0.6, 1.0].
    a = {"estimate": 0.9, "low": 0.8, "high": 1.0, "se": 0.3, "basis": DESIGN}
    b = {"estimate": 0.1, "low": 0.0, "high": 0.2, "se": 0.3, "basis": DESIGN}
    d = _difference(a, b, group=False)
    assert (d["low"], d["high"]) == (pytest.approx(0.6), 1.0)
    assert d["variance"] == "sum of the two runs' variances"


def test_paired_predicate_difference_by_hand():
    # MOVER with the two estimates' correlation r: A = 0.75 [0.3, 1.0], B = 0.5 [0.1, 0.9].
    # r = ½: below = sqrt(0.45² + 0.4² − 2·½·0.45·0.4) = sqrt(0.1825) = 0.427200,
    # above = sqrt(0.25² + 0.4² − 2·½·0.25·0.4) = sqrt(0.1225) = 0.35: [−0.177200, 0.6].
    # r = 0 is the unpaired MOVER: sqrt(0.3625) = 0.602080, sqrt(0.2225) = 0.471699.
    # A negative r counts as 0: pairing never widens an interval.
    a = {"estimate": 0.75, "low": 0.3, "high": 1.0, "se": 0.2, "basis": DESIGN}
    b = {"estimate": 0.5, "low": 0.1, "high": 0.9, "se": 0.25, "basis": DESIGN}
    d = _difference(a, b, group=True, correlation=0.5)
    assert (d["low"], d["high"]) == (pytest.approx(0.25 - 0.427200, abs=1e-6), pytest.approx(0.6))
    assert d["test"] == "paired" and "correlation" in d["variance"]
    for r in (0.0, -0.4):
        d = _difference(a, b, group=True, correlation=r)
        assert (d["low"], d["high"]) == (pytest.approx(0.25 - 0.602080, abs=1e-6),
                                         pytest.approx(0.25 + 0.471699, abs=1e-6))


def test_hajek_scores_carry_the_estimates_variance_by_hand():
    # The hand example above as a one-round table: a = 8, 16, 8 in the group, scores
    # a(y − ½)/Σa = 4/32, −8/32, 4/32 and 0: M·s²(u) = 4·(96/3)/32² = 0.125, the estimate's v.
    from kgprobe.estimators import ProbeTable, hajek_scores

    labels = {"predicate": np.array(["P1", "P1", "P1", "P2"], dtype=object)}
    table = ProbeTable(np.array([True, False, True, False]), np.ones(4, bool), np.full(4, 0.5),
                       np.array([0.5, 0.25, 0.5, 0.5]), np.zeros(4, np.int64), labels,
                       [{"predicate": {}}], {"predicate": {"P1": 7, "P2": 1}})
    u = hajek_scores(table, "predicate", "P1")
    assert u == pytest.approx([0.125, -0.25, 0.125, 0.0])
    assert 4 * u.var(ddof=1) == pytest.approx(0.125)
    assert hajek_scores(table, "predicate", "P3") is None


def test_every_small_predicate_gets_an_interval_that_holds_on_a_skewed_replay():
    # One predicate with 666 edges, six with 11, 7, 5, 3, 2 and 2 (answers drawn from the
    # calibrated θ*), 256 queries in rounds of 32, 40 replays. A uniform design reaches a
    # 2-edge predicate in a 696-edge graph about once in 256·2/696 ≈ 0.7 draws, so most runs
    # have no interval there; the stratified minimums give every predicate one every run.
    from kgprobe.simulation.coverage import replay_coverage, skewed_sweep

    sweep = skewed_sweep(seed=0)
    counts = np.bincount(sweep_predicates(sweep))
    assert sorted(counts[counts > 0].tolist()) == [2, 2, 3, 5, 7, 11, 666]
    common = dict(sampler="focus", design_fraction=1.0, budget=256, batch=32, runs=40)
    uniform = replay_coverage(sweep, design="uniform", **common)
    adaptive = replay_coverage(sweep, design="adaptive", **common)
    assert max(uniform["predicate_coverage"]["no_interval_share"].values()) > 0.5
    for kind in ("predicate_coverage", "group_coverage"):
        assert set(adaptive[kind]["no_interval_share"].values()) == {0.0}
        assert adaptive[kind]["min"] >= 0.85
    assert adaptive["group_estimates_outside_unit"] == 0


def sweep_predicates(sweep):
    from kgprobe.sources.embedded import load_embedded_kg

    return np.asarray(load_embedded_kg("countries").predicate_of)[sweep.edges]


def test_a_round_that_draws_every_edge_draws_each_with_certainty():
    # Four edges, a batch of four: ceil(0.35·4) = 2 floor draws (π = 2/4 each), then the
    # lean must take both edges left, each with π = 1.
    plan = DesignPlan("adaptive", np.zeros(4, int), np.zeros(4, int), np.ones(4, bool), min_draws=0)
    design = plan.round(np.array([0.9, 0.1, 0.5, 0.5]), np.random.default_rng(0), np.random.default_rng(1))
    edges = design.draw(4)
    assert edges.tolist() == [0, 1, 2, 3]
    parts = design.parts(edges)
    assert (parts == FLOOR).sum() == 2
    assert design.inclusion(edges)[parts == FLOOR] == pytest.approx([0.5, 0.5])
    assert design.inclusion(edges)[parts == LEAN_PART] == pytest.approx([1.0, 1.0])


def test_weak_share_frontier_by_hand():
    from kgprobe.simulation.coverage import weak_share_frontier

    z = 1.959963984540054
    # Two edges always right, two always wrong: weak edges' share b = 1/2. A weak share of
    # 3/4 re-asks known-weak edges with f = (3/4 − 1/2)/(1 − 1/2) = 1/2 of the 4 probes, leaving
    # n₁ = 2 fresh edges. μ = (1, 1, 0, 0): S² = 1/3 (ddof 1), no Bernoulli noise, so the
    # variance is (1 − 2/4)·(1/3)/2 = 1/12 and the half-width z·sqrt(1/12) = 0.5658.
    out = weak_share_frontier(np.array([0.0, 0.0, 1.0, 1.0]), 4, weak_share=0.75, halfwidth=0.6)
    assert out["weak_edge_share"] == 0.5
    assert out["ci_halfwidth_needed"] == round(z * math.sqrt(1 / 12), 4) == 0.5658
    # At a half-width of 0.6: n₁ = (1/3)/((0.6/z)² + (1/3)/4) = 1.8827 fresh edges, so a weak
    # share of 1/2 + (1 − 1.8827/4)·1/2 = 0.7647.
    least = (1 / 3) / ((0.6 / z) ** 2 + (1 / 3) / 4)
    assert out["weak_share_reachable"] == round(0.5 + (1 - least / 4) * 0.5, 3) == 0.765
    # θ = (½, ½, 0, 1): b = 1/4 and β̄ = (¼ + ¼)/4 = 1/8. Four fresh probes count every edge
    # once: only the answers' noise is left, 1/8/4, half-width z·sqrt(1/32) = 0.3465; no
    # weak share reaches ±6 points.
    out = weak_share_frontier(np.array([0.5, 0.5, 0.0, 1.0]), 4, weak_share=0.25)
    assert out["ci_halfwidth_needed"] == 0.3465 and out["weak_share_reachable"] is None


def test_projected_halfwidth_by_hand():
    # Uniform lean over four edges at v = ¼ each: a lean draw's score variance is
    # 4 · ¼ / (16 · ¼) = ¼, the floor's ¼ too; 100 draws: 1.96 · sqrt(¼ / 100) = 0.0979982.
    assert projected_halfwidth(np.full(4, 0.25), np.full(4, 0.25), 0.35, 100) == pytest.approx(0.0979982, abs=1e-7)
    # w = (0.4, 0.3, 0.2, 0.1), v = (0.25, 0.21, 0.16, 0.09): the lean's
    # (0.625 + 0.7 + 0.8 + 0.9) / 16 = 0.1890625, the floor's v̄ = 0.1775;
    # (0.35 · 0.1775 + 0.65 · 0.1890625) / 100 = 0.00185015625 -> 1.959964 · 0.0430134 = 0.0843048.
    w, v = np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.25, 0.21, 0.16, 0.09])
    assert projected_halfwidth(w, v, 0.35, 100) == pytest.approx(0.0843048, abs=1e-7)


def test_projected_halfwidth_counts_the_rounds_played_by_hand():
    # The same uniform lean (¼ per draw) in a run of 100 design draws of which 50 are
    # played with Σ m_t·s²_t = 30, the predictions' errors having doubled their variance:
    # (30 + 2 · ¼ · 50) / 100² = 0.0055 -> 1.959964 · 0.0741620 = 0.1453548.
    assert projected_halfwidth(np.full(4, 0.25), np.full(4, 0.25), 0.35, 100, 30.0, 50, 2.0) == \
        pytest.approx(0.1453548, abs=1e-7)
    # Nothing played yet: the projection of every round drawing like this one.
    assert projected_halfwidth(np.full(4, 0.25), np.full(4, 0.25), 0.35, 100, 0.0, 0, 1.0) == \
        projected_halfwidth(np.full(4, 0.25), np.full(4, 0.25), 0.35, 100)


def test_round_spread_by_hand():
    # Two floor probes (π ¼), one lean probe (π ½), one sampler's choice, N = 8 active edges.
    # ω: floor (2/3)/¼ + 1/3 = 3, lean (1/3)/½ = 2/3; m·ω/N = 9/8 and 1/4.
    # Scored residuals (1 − 0.5)·9/8 = 0.5625, (0 − 0.8)·9/8 = −0.9, (1 − 0.2)/4 = 0.2: their
    # variance (ddof 1) 0.580052 times m = 3 is 1.740156; the predictions expected
    # (0.25 + 0.16)·(9/8)² + 0.16/16 = 0.528906.
    realized, expected, m = round_spread(np.array([1, 0, 1, 1]), np.array([0.5, 0.8, 0.2, 0.9]),
                                         np.array([0.25, 0.25, 0.5, np.nan]), np.array([1, 1, 2, 0]), 8)
    assert realized == pytest.approx(1.74015625) and expected == pytest.approx(0.52890625) and m == 3
    # The same scores are the z of the KG estimate, whose martingale variance sums m·s².
    z = design_estimate(np.array([1.0, 0.0, 1.0]), np.array([0.5, 0.8, 0.2]), np.array([0.25, 0.25, 0.5]),
                        np.zeros(3, int), np.array([0.6]), n_group=8, parts=np.array([1, 1, 2]), martingale=True)
    assert z.se == pytest.approx(math.sqrt(1.74015625 / 9))
    assert round_spread(np.array([1]), np.array([0.5]), np.array([np.nan]), np.array([0]), 8) == (0.0, 0.0, 0)


def test_a_lean_target_hunts_by_what_the_rounds_played_cost():
    # One round of 16 design draws recorded before the lean of the next. Its predictions
    # expected Σ v·(mω/N)² = 2.4. The run's own control projects the rest of the run at
    # what its rounds cost: a round twice as noisy as expected (4.8) leaves no room at a
    # target the projection alone meets with a hunting share of ½; a quiet one (0.8) counts
    # at its cost with the predictions' variance for the rest (never deflated), more room.
    yhat = np.array([0.95, 0.9, 0.9, 0.2, 0.9, 0.85, 0.9, 0.95])

    def share(control, spread):
        plan = DesignPlan("adaptive", np.zeros(8, int), np.zeros(8, int), np.ones(8, bool), min_draws=0, draws=64,
                          lean_target=0.09, lean_control=control)
        if spread is not None:
            plan.record(np.array([0]), np.array([1]), spread)
        plan.lean_probabilities(yhat, 3, exclude=np.array([0, 1]))
        return plan.hunt_shares[0], plan._spent_so_far()

    assert share("projected", (4.8, 2.4, 16)) == (0.5, (0.0, 0.0, 1.0))  # run files before the control
    assert share("realized", None) == (0.5, (0.0, 0.0, 1.0))
    assert share("realized", (4.8, 2.4, 16)) == (0.0, (4.8, 16.0, 2.0))
    assert share("realized", (0.8, 2.4, 16)) == (0.625, (0.8, 16.0, 1.0))
    with pytest.raises(ValueError, match="lean-target control"):
        DesignPlan("adaptive", np.zeros(8, int), np.zeros(8, int), np.ones(8, bool), lean_control="loose")


def test_hunting_weights_spend_the_target_on_edges_predicted_wrong():
    p = np.array([0.9, 0.5, 0.1, 0.5])
    scores = lean_scores(p)
    today = 0.1 * 0.25 + 0.9 * scores / scores.sum()
    # No room (a target below even today's projection): today's lean, share 0.
    w, share = hunting_weights(p, scores, 0.9, 0.35, 100, target=0.01)
    assert share == 0.0 and w == pytest.approx(today)
    # All the room: the hunting score (1 − ŷ)² = (0.01, 0.25, 0.81, 0.25) / 1.32 in full.
    w, share = hunting_weights(p, scores, 0.9, 0.35, 100, target=1.0)
    assert share == 1.0
    assert w == pytest.approx(0.1 * 0.25 + 0.9 * np.array([0.01, 0.25, 0.81, 0.25]) / 1.32)
    assert w.sum() == pytest.approx(1.0)
    # In between: the largest step of 1/8 whose projection is within the target.
    hunt = np.array([0.01, 0.25, 0.81, 0.25]) / 1.32
    v = p * (1 - p)
    half = [projected_halfwidth(0.1 * 0.25 + 0.9 * ((1 - c) * scores / scores.sum() + c * hunt), v, 0.35, 100)
            for c in np.arange(9) / 8]
    assert all(a < b for a, b in zip(half, half[1:]))  # a harder hunt projects wider here
    w, share = hunting_weights(p, scores, 0.9, 0.35, 100, target=half[3] + 1e-9)
    assert share == 0.375 and w[2] > today[2]


def test_a_lean_target_leaves_the_floor_and_keeps_known_probabilities():
    # The same round with and without a target: the floor is the same; the lean's π sum
    # to its draws, and with room the edge predicted most wrong is drawn more often.
    yhat = np.array([0.95, 0.9, 0.9, 0.2, 0.9, 0.85, 0.9, 0.95])
    plans = [DesignPlan("adaptive", np.zeros(8, int), np.zeros(8, int), np.ones(8, bool), min_draws=0, draws=64,
                        lean_target=t) for t in (None, 0.5)]
    floors = [p.floor_probabilities(2, rounds_left=1) for p in plans]
    assert floors[0] == pytest.approx(floors[1])
    lean = [p.lean_probabilities(yhat, 3, exclude=np.array([0, 1])) for p in plans]
    assert lean[0].sum() == pytest.approx(3.0) and lean[1].sum() == pytest.approx(3.0)
    assert lean[1][3] > lean[0][3] and plans[1].hunt_shares == [1.0] and plans[0].hunt_shares == []


def test_a_lean_target_without_room_is_todays_lean_minimums_included():
    # Two small predicates (2 and 3 edges) beside a large one: the stratum minimums boost
    # them in the lean. A target no projection meets leaves the lean exactly as without
    # one, minimums and all.
    predicate = np.array([0] * 20 + [1] * 2 + [2] * 3)
    yhat = np.linspace(0.3, 0.95, 25)
    plans = [DesignPlan("adaptive", predicate, np.zeros(25, int), np.ones(25, bool), draws=64, lean_target=t)
             for t in (None, 1e-6)]
    pis = [p.lean_probabilities(yhat, 6, exclude=np.array([0, 1]), rounds_left=2, share=0.65) for p in plans]
    assert pis[1] == pytest.approx(pis[0]) and plans[1].hunt_shares == [0.0]
    # The small predicates got more than their size's share of the 6 draws (5/23 · 6 = 1.3).
    assert pis[0][20:].sum() > 1.5
