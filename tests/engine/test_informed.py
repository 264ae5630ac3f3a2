"""The informed references of the efficiency study (kgprobe.simulation.informed): samplers told θ*."""

import numpy as np
import pytest

from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.simulation.informed import INFORMED_TOP_K, SCREEN_THEN_INFORMED, informed_specs


def _pkg():
    # A path of six edges, edge 5 inactive, one predicate.
    heads, tails = np.arange(6), np.arange(1, 7)
    active = np.array([True, True, True, True, True, False])
    return ParameterizedKG(heads, tails, active, prior=(1.0, 1.0), propagation_weight=0.0,
                           predicates=np.zeros(6, dtype=np.int32))


def test_the_top_k_is_the_study_s_top_k_ties_in_edge_order_inactive_edges_left_out():
    theta = np.array([0.5, 1.0, 0.5, 1.0, 0.0, 1.0])  # edge 5 is inactive
    informed, screen = informed_specs(theta, _pkg().active, 3)
    assert (informed.label, screen.label) == (INFORMED_TOP_K, SCREEN_THEN_INFORMED)
    assert informed.top == screen.top == (1, 3, 0)
    assert (informed.screen, screen.screen) == (False, True)


def test_informed_probes_only_the_top_k_least_answered_first():
    pkg = _pkg()
    sampler = informed_specs(np.array([0.5, 1.0, 0.5, 1.0, 0.0, 1.0]), pkg.active, 3)[0].make()
    rng = np.random.default_rng(0)
    assert sorted(sampler.select(pkg, 3, rng).edges.tolist()) == [0, 1, 3]
    pkg.update(np.array([1, 3]), np.array([False, False]))
    pkg.update(np.array([1]), np.array([False]))
    # answers so far: edge 1 twice, edge 3 once, edge 0 never
    assert sampler.select(pkg, 1, rng).edges.tolist() == [0]
    assert sorted(sampler.select(pkg, 2, rng).edges.tolist()) == [0, 3]
    # A round larger than k is filled with the other active edges (never the inactive 5).
    picked = sampler.select(pkg, 5, rng)
    assert sorted(picked.edges.tolist()) == [0, 1, 2, 3, 4] and not picked.design.any()


def test_screen_once_answers_every_active_edge_before_the_top_k():
    pkg = _pkg()
    sampler = informed_specs(np.array([0.5, 1.0, 0.5, 1.0, 0.0, 1.0]), pkg.active, 2)[1].make()
    rng = np.random.default_rng(1)
    # Round 1: the first three of a random order of the five unanswered active edges
    # (default_rng(1).permutation(5) starts 4, 0, 1).
    first = sampler.select(pkg, 3, rng).edges
    assert first.tolist() == [4, 0, 1]
    pkg.update(first, np.ones(3, dtype=bool))
    # Round 2: the two still unanswered (2 and 3, one of them in the top k), then the
    # top k's other edge, 1.
    second = sampler.select(pkg, 3, rng).edges.tolist()
    assert sorted(second[:2]) == [2, 3] and second[2] == 1
    pkg.update(np.array(second), np.ones(3, dtype=bool))
    # Every edge answered: only the top k from now on.
    assert sorted(sampler.select(pkg, 2, rng).edges.tolist()) == [1, 3]


def test_the_pattern_study_reports_the_references_beside_the_samplers_whose_ratios_they_leave_alone():
    """``bench efficiency``'s pattern study: the informed references run on the same θ* draws
    after the samplers, so every sampler's curve is the one it has without them."""
    from types import SimpleNamespace

    from kgprobe.bench.efficiency import json_ratio, _pattern_ratios
    from kgprobe.simulation.patterns import PATTERNS, pattern_theta
    from kgprobe.simulation.study import DEFAULT_SPECS, run_study
    from kgprobe.simulation.synthetic import skewed_graph
    from kgprobe.sweep import load_sweep

    heads, tails, active = skewed_graph(300, seed=4)
    predicates = np.random.default_rng(0).integers(0, 4, heads.size)
    kg = SimpleNamespace(predicate_of=predicates, active=active)
    graph = SimpleNamespace(heads=heads, tails=tails)
    args = SimpleNamespace(batch=16, epochs=5.0, margin_donor_sweep=None)  # verdicts only
    ratios, informed = _pattern_ratios(kg, graph, [0], args, k=20)
    assert set(ratios) == set(informed) == set(PATTERNS)
    labels = {"brute-force", "thompson", "focus", "pooled-thompson", "kglens-thompson+prop"}
    for pattern in PATTERNS:
        assert set(ratios[pattern]) == labels
        assert set(informed[pattern]) == {INFORMED_TOP_K, SCREEN_THEN_INFORMED}
    samplers = [s for s in DEFAULT_SPECS if s.label in labels]
    # The samplers alone, on the u-shaped draw of seed 0: the same ratios to the last digit.
    theta = pattern_theta("u-shaped", heads, tails, predicates, active, seed=0)
    alone = run_study(heads, tails, active, theta, predicates=predicates, specs=samplers, batch=16, epochs=5.0,
                      seeds=[0], top_k=(20,)).ratios(epochs=4.5, k=20)
    assert ratios["u-shaped"] == {lab: json_ratio(r) for lab, r in alone.items()}
    # The references' own figures are as the study measures them on the same draw.
    refs = run_study(heads, tails, active, theta, predicates=predicates,
                     specs=samplers + informed_specs(theta, active, 20),
                     batch=16, epochs=5.0, seeds=[0], top_k=(20,)).ratios(epochs=4.5, k=20)
    assert informed["u-shaped"] == {lab: json_ratio(refs[lab]) for lab in (INFORMED_TOP_K, SCREEN_THEN_INFORMED)}
    # With margins borrowed from the default sweep, margin-focus joins after the references:
    # the verdicts are the same stream, so every figure of a sampler that reads no margins
    # is the one above, to the digit (thompson reads them, in its own place).
    donors = SimpleNamespace(batch=16, epochs=5.0, margin_donor_sweep=load_sweep("default"))
    with_margins, informed_too = _pattern_ratios(kg, graph, [0], donors, k=20)
    assert informed_too == informed
    for pattern in PATTERNS:
        assert set(with_margins[pattern]) == labels | {"margin-focus"}
        assert ({lab: r for lab, r in with_margins[pattern].items() if lab not in ("margin-focus", "thompson")}
                == {lab: r for lab, r in ratios[pattern].items() if lab != "thompson"})
    assert with_margins["u-shaped"]["margin-focus"] != ratios["u-shaped"]["focus"]  # it read the margins
    assert any(with_margins[p]["thompson"] != ratios[p]["thompson"] for p in PATTERNS)  # so did thompson


def test_the_references_estimate_with_focus_s_posterior_fitted_to_the_answers():
    """Fitted as ``focus`` fits it: edge 1 wrong three times and edge 4 right three times are
    answers of facts known or not, so the beta-binomial likelihood picks the least prior
    strength of the grid, K = 0.05 (P(three alike) = (K/2 + 1)(K/2 + 2) / (2(K + 1)(K + 2))
    falls with K). With one predicate and no propagation the prior mean is the predicate's
    error rate, (3 + 2·g)/(6 + 2) = 0.5 with g = (3 + 1)/(6 + 2), so edge 1's estimate is
    (0.05·0.5 + 3)/(0.05 + 3). Unfitted (strength 2) it would be (2·0.5 + 3)/(2 + 3) = 0.8."""
    for screen in (False, True):
        pkg = _pkg()
        sampler = informed_specs(np.array([0.5, 1.0, 0.5, 1.0, 0.0, 1.0]), pkg.active, 2)[int(screen)].make()
        for _ in range(3):
            pkg.update(np.array([1, 4]), np.array([False, True]))
        sampler.select(pkg, 2, np.random.default_rng(0))
        assert sampler.estimate(pkg)[1] == pytest.approx(3.025 / 3.05, abs=1e-12)
        assert sampler.estimate(pkg)[4] == pytest.approx(0.025 / 3.05, abs=1e-12)
