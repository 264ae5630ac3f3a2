"""Recorded sweeps and their replay: file format, stratified edges, seeded draws, the new Thompson."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from kgprobe.errors import InputError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.sampling.evidence import EvidencePosterior, source_offsets
from kgprobe.sampling.thompson import weak_draw_top_n
from kgprobe.simulation.replay import ReplayOracle, scaled
from kgprobe.sweep import Sweep, SweepMismatchWarning, load_sweep, save_sweep, stratified_edges


def sweep_of(correct, edges=None, **kw):
    correct = np.asarray(correct, dtype=bool)
    e, k = correct.shape
    fields = dict(kg="toy", kg_hash="h", method="zp-lke", probe_options={}, model="m", passes=k, seed=0,
                  edges=np.arange(e) if edges is None else edges, correct=correct, gold_logprob=None,
                  best_wrong_logprob=None, made_by="test")
    fields.update(kw)
    return Sweep(**fields)


# -- the replay oracle ------------------------------------------------------------------


def test_replay_hands_out_each_recorded_answer_once_then_draws_with_replacement():
    # edge 10 answered [right, wrong, wrong], edge 20 always right, edge 30 always wrong
    sweep = sweep_of([[1, 0, 0], [1, 1, 1], [0, 0, 0]], edges=np.array([10, 20, 30]))
    oracle = ReplayOracle(sweep, seed=5)
    first = [bool(oracle.answer(np.array([10]))[0]) for _ in range(3)]
    assert sorted(first) == [False, False, True]  # exactly its three recorded answers
    assert oracle.replacement_draws == 0
    # the fourth probe of edge 10 is a draw with replacement, counted
    oracle.answer(np.array([10]))
    assert oracle.replacement_draws == 1
    # constant edges answer the same forever; an edge twice in one call uses two answers
    assert oracle.answer(np.array([20, 30, 20])).tolist() == [True, False, True]
    assert oracle.used.tolist() == [4, 2, 1] and oracle.draws == 7 and oracle.replacement_draws == 1
    with pytest.raises(InputError, match="edge 11 is not in the replayed sweep"):
        oracle.answer(np.array([11]))


def test_replay_order_is_seeded_and_fresh_per_seed():
    sweep = sweep_of([[1, 0, 0, 0, 1, 0, 1, 0]])  # one edge, 8 passes, 3 right
    def sequence(seed):
        oracle = ReplayOracle(sweep, seed=seed)
        return [bool(oracle.answer(np.array([0]))[0]) for _ in range(8)]

    assert sequence(3) == sequence(3)
    orders = {tuple(sequence(s)) for s in range(20)}
    assert len(orders) > 5  # a fresh order per replay seed
    assert all(sum(o) == 3 for o in orders)  # always the 8 recorded answers, reordered


def test_scaled_top_k_and_batch():
    assert scaled(600, 3246) == 600 and scaled(200, 3246) == 200 and scaled(64, 3246) == 64
    assert scaled(600, 1000) == 185  # 600·1000/3246 = 184.8
    assert scaled(64, 20) == 1  # never below one


# -- the sweep file ---------------------------------------------------------------------


def test_sweep_file_round_trip_and_theta(tmp_path):
    gold = np.array([[-1.0, -2.0], [-0.5, np.nan]])
    wrong = np.array([[-3.0, -1.5], [-4.0, np.nan]])
    sweep = sweep_of([[1, 0], [1, 1]], edges=np.array([4, 9]), gold_logprob=gold, best_wrong_logprob=wrong,
                     keys=np.array([["Q1", "P1", "Q2"], ["Q3", "P1", "Q4"]]))
    path = tmp_path / "s.npz"
    save_sweep(sweep, path)
    back = load_sweep(str(path))
    assert back.edges.tolist() == [4, 9] and back.correct.tolist() == [[True, False], [True, True]]
    assert back.theta().tolist() == [0.5, 0.0] and back.accuracy() == 0.75
    np.testing.assert_array_equal(back.margin(), np.array([[2.0, -0.5], [3.5, np.nan]]))
    assert back.keys.tolist() == [["Q1", "P1", "Q2"], ["Q3", "P1", "Q4"]] and back.made_by == "test"
    with pytest.raises(InputError, match="no sweep 'nonexistent'"):
        load_sweep("nonexistent")
    (tmp_path / "bad.npz").write_text("not a sweep")
    with pytest.raises(InputError, match="is not a sweep file"):
        load_sweep(str(tmp_path / "bad.npz"))


def small_kg(name="toy"):
    # predicate P1: 6 edges, P2: 3 edges, P3: 1 edge
    ents = [Entity(f"Q{i}", f"E{i}") for i in range(20)]
    triples = [Triple(f"Q{i}", "P1", f"Q{i + 10}") for i in range(6)]
    triples += [Triple(f"Q{i}", "P2", f"Q{i + 4}") for i in range(6, 9)]
    triples += [Triple("Q9", "P3", "Q19")]
    return KnowledgeGraph(ents, [Predicate(p, p) for p in ("P1", "P2", "P3")], triples, name=name)


def test_stratified_edges_allocate_by_predicate_share():
    kg = small_kg()
    everything = np.arange(10)
    # n = 5 of sizes (6, 3, 1): quotas 3, 1.5, 0.5 -> floors 3, 1, 0 -> at least one each -> 3, 1, 1
    picked = stratified_edges(kg, everything, 5, seed=0)
    assert np.bincount(kg.predicate_of[picked], minlength=3).tolist() == [3, 1, 1]
    # n = 2 (< 3 predicates): quotas 1.2, 0.6, 0.2 -> floors 1, 0, 0 -> the largest remainder (P2) gets one
    picked = stratified_edges(kg, everything, 2, seed=0)
    assert np.bincount(kg.predicate_of[picked], minlength=3).tolist() == [1, 1, 0]
    assert stratified_edges(kg, everything, 5, seed=0).tolist() == stratified_edges(kg, everything, 5, seed=0).tolist()
    assert stratified_edges(kg, everything, 10, seed=3).tolist() == list(range(10))
    with pytest.raises(InputError, match="--edges must be an integer from 1 to the 10 edges"):
        stratified_edges(kg, everything, 11, seed=0)


def test_sweep_finds_its_edges_by_ids():
    kg = small_kg()
    from kgprobe.store import kg_fingerprint

    sweep = sweep_of([[1], [0]], edges=np.array([2, 7]), kg="toy", kg_hash=kg_fingerprint(kg),
                     keys=np.array([["Q2", "P1", "Q12"], ["Q7", "P2", "Q11"]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sweep.edges_in(kg).tolist() == [2, 7]
    with pytest.warns(SweepMismatchWarning, match="differs from the one the sweep was recorded on"):
        sweep_of([[1]], edges=np.array([2]), kg="toy", kg_hash="other",
                 keys=np.array([["Q2", "P1", "Q12"]])).edges_in(kg)
    with pytest.raises(InputError, match="recorded on the KG 'toy', not 'other'"):
        sweep.edges_in(small_kg("other"))
    with pytest.raises(InputError, match=r"edge \(Q2, P9, Q12\) is not in the KG"):
        sweep_of([[1]], edges=np.array([2]), keys=np.array([["Q2", "P9", "Q12"]])).edges_in(kg)


# -- kgprobe's Thompson sampler -----------------------------------------------------------


def path_pkg():
    # path 0-1-2-3: e0 = (0, 1), e1 = (1, 2), e2 = (2, 3); one predicate; e0 answered wrong once
    pkg = ParameterizedKG(np.array([0, 1, 2]), np.array([1, 2, 3]), np.ones(3, bool), predicates=np.zeros(3))
    pkg.update(np.array([0]), np.array([False]))
    return pkg


def test_evidence_prior_is_leave_one_out_by_hand():
    pkg = path_pkg()
    z, lg = source_offsets(pkg)
    # global g = (1 + 1) / (1 + 2) = 2/3. A source with the one failure: (1 + 2g) / (1 + 2) = 7/9,
    # offset logit(7/9) - logit(2/3) = ln(7/2) - ln(2) = ln(7/4). A source without probes: g, offset 0.
    assert lg == pytest.approx(math.log(2))
    l = math.log(7 / 4)
    np.testing.assert_allclose(z[0], [0, l, l], atol=1e-12)  # predicate: e0's own answer is not its prior
    np.testing.assert_allclose(z[1], [0, l, 0], atol=1e-12)  # subject node: e1 starts at node 1 (e0's end)
    np.testing.assert_allclose(z[2], [0, 0, 0], atol=1e-12)  # object node: nobody else was probed there
    post = EvidencePosterior()
    # K = 2, b = 0, every weight 1, no "always right/wrong" atoms (π₀ = π₁ = e^-12 / (1 + 2e^-12))
    post.params = np.array([math.log(2.0), 0.0, 1.0, 1.0, 1.0, -12.0, -12.0])
    # e0: μ = 2/3, θ̂ = (2·2/3 + 1) / 3 = 7/9; e1: odds 2·(7/4)² = 6.125, μ = 6.125/7.125;
    # e2: odds 2·7/4 = 3.5, μ = 7/9 (no own answers: θ̂ = μ)
    np.testing.assert_allclose(post.estimate(pkg), [7 / 9, 6.125 / 7.125, 7 / 9], rtol=1e-4)
    # With atoms π₀ = π₁ = 1/4 (l₀ = l₁ = 0 -> e^0 / (1 + 2)) = 1/3 each, Beta part 1/3:
    # e0 (one wrong answer): the "always right" atom is out; weights π₁·1 = 1/3 and
    # π_B·E[θ] = 1/3 · 2/3 (the Beta's marginal likelihood of one failure is μ = 2/3), so
    # θ̂ = (1/3 · 1 + 2/9 · 7/9) / (1/3 + 2/9) = (1/3 + 14/81) / (5/9) = 41/45.
    post.params[5:] = 0.0
    assert post.estimate(pkg)[0] == pytest.approx(41 / 45)


def test_evidence_fit_learns_no_pooling_from_unrelated_errors():
    # A path of 200 edges, one predicate, each answered 4 times: alternately always right and
    # always wrong, so an edge's neighbours (and its predicate) predict the opposite of its own
    # answers: the fit puts the edges on the "always right" / "always wrong" atoms, and no
    # neighbour average moves an estimate.
    n = 200
    pkg = ParameterizedKG(np.arange(n), np.arange(1, n + 1), np.ones(n, bool), propagation_weight=0.0,
                          predicates=np.zeros(n))
    right = np.arange(n) % 2 == 0
    for _ in range(4):
        pkg.update(np.arange(n), right)
    post = EvidencePosterior()
    post.fit(pkg)
    est = post.estimate(pkg)
    assert est[right].max() < 0.02 and est[~right].min() > 0.98
    np.testing.assert_allclose(est[right], est[right][0], rtol=1e-6)  # no neighbour average


def test_weak_draw_prefers_uncertain_blind_spots():
    # B = Beta(20, 2) and A = Beta(1e4, 1) are surely drawn weak (θ̃ > 1/2); B's estimate can still
    # move (update variance p(1-p)/(a+b+1)² ≈ 1.6e-4), A's cannot (≈ 1e-12), so B comes first.
    # C = Beta(1, 1e4) is surely not weak: last.
    a = np.array([1e4, 20.0, 1.0])
    b = np.array([1.0, 2.0, 1e4])
    order = weak_draw_top_n(a, b, np.array([5, 6, 7]), 3, np.random.default_rng(0))
    assert order.tolist() == [6, 5, 7]
    assert weak_draw_top_n(a, b, np.array([5, 6, 7]), 1, np.random.default_rng(1)).tolist() == [6]


def test_a_sweep_is_mapped_onto_a_kg_by_keys_and_content_hash():
    from kgprobe.simulation.replay import sweep_on_kg
    from kgprobe.store import kg_fingerprint

    kg = small_kg()
    keys = np.array([["Q2", "P1", "Q12"], ["Q7", "P2", "Q11"]])
    sweep = sweep_of([[1, 1], [0, 1]], edges=np.array([2, 7]), kg_hash=kg_fingerprint(kg), keys=keys)
    # The same edges in reverse order (a rebuilt KG: another hash, same name): edge Q2-P1 is
    # now index 7, Q7-P2 index 2, so the rows swap to keep edges ascending.
    ents = [Entity(f"Q{i}", f"E{i}") for i in range(20)]
    reversed_kg = KnowledgeGraph(ents, [Predicate(p, p) for p in ("P1", "P2", "P3")],
                                 list(reversed(list(kg.triples()))), name="toy")
    with pytest.warns(SweepMismatchWarning):
        mapped = sweep_on_kg(reversed_kg, sweep)
    assert mapped.edges.tolist() == [2, 7]
    assert mapped.correct.tolist() == [[False, True], [True, True]]
    assert mapped.keys.tolist() == [["Q7", "P2", "Q11"], ["Q2", "P1", "Q12"]]
    assert mapped.theta().tolist() == [0.5, 0.0]
    # Another name and another hash: exit 2 naming both.
    with pytest.raises(InputError, match=r"recorded on the KG 'toy' \(content hash .*\), but the graph given is "
                                         r"'other'"):
        sweep_on_kg(small_kg("other"), sweep)
