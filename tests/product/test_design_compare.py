"""Runs under the adaptive design: two models with one seed share the floor and compare paired there."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kgprobe
from kgprobe.compare import accuracy_differences
from kgprobe.errors import InputError
from kgprobe.sampling.design import FLOOR, LEAN_PART
from kgprobe.simulation.model import SimulatedModel
from kgprobe.simulation.theta import theta_for_kg


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, countries):
    tmp = tmp_path_factory.mktemp("design")
    runs = []
    for seed, name in ((1, "a"), (2, "b")):
        model = SimulatedModel(countries, theta_for_kg(countries, seed=seed), seed=seed)
        runs.append(kgprobe.probe(countries, model, budget=128, batch_size=32, seed=0, store=tmp / f"{name}.kgrun",
                                  progress=False, report=False))
    yield runs
    for r in runs:
        r.close()


def test_two_models_with_one_seed_share_the_floor_and_lean_their_own_way(two_runs):
    a, b = (r.store.probe_arrays() for r in two_runs)
    # Every probe is a design draw; ceil(0.35 · 32) = 12 floor draws a round, 4 rounds.
    assert (a["part"] > 0).all() and (b["part"] > 0).all()
    floor_a, floor_b = a["part"] == FLOOR, b["part"] == FLOOR
    assert int(floor_a.sum()) == int(floor_b.sum()) == 48
    assert np.array_equal(a["edge"][floor_a], b["edge"][floor_b])
    assert np.array_equal(a["round"][floor_a], b["round"][floor_b])
    # The lean parts follow each model's own answers: after round 1 they differ.
    lean_a = set(a["edge"][(a["part"] == LEAN_PART) & (a["round"] > 1)].tolist())
    lean_b = set(b["edge"][(b["part"] == LEAN_PART) & (b["round"] > 1)].tolist())
    assert lean_a != lean_b


def test_each_round_records_its_expected_floor_and_lean_draws_per_group(two_runs):
    # Each predicate's and group's recorded means gain (e_F, e_L): the sums of the floor's
    # and the lean's π over its edges. π sums to the part's draws, so over the predicates
    # (or the groups) they add up to 12 floor and 20 lean draws a round; a predicate's
    # ratio estimate weighs each probe by them (kgprobe.estimators.group_probe_weights).
    from kgprobe.estimators import group_probe_weights, table_from_store

    store = two_runs[0].store
    preds = store.round_predictions()
    assert sorted(preds) == [1, 2, 3, 4]
    for r, means in preds.items():
        for kind in ("predicate", "group"):
            assert all(len(v) == 4 for v in means[kind].values())
            assert sum(v[2] for v in means[kind].values()) == pytest.approx(12.0)
            assert sum(v[3] for v in means[kind].values()) == pytest.approx(20.0)
    # A probe's weight is e_F/π + e_L in the floor and e_L/π in the lean, from its own
    # round's entry: checked on the first floor and the first lean probe of a predicate.
    table = table_from_store(store)
    d = table.design
    pred = table.labels["predicate"][d]
    name = str(pred[0])
    a = group_probe_weights(table, "predicate", name)
    rnd, part, pi = table.round[d], table.part[d], table.inclusion[d]
    for code in (FLOOR, LEAN_PART):
        hit = np.flatnonzero((pred == name) & (part == code))
        if hit.size:
            i = int(hit[0])
            e_f, e_l = preds[int(rnd[i]) + 1]["predicate"][name][2:]
            assert a[i] == pytest.approx(e_f / pi[i] + e_l if code == FLOOR else e_l / pi[i])


LEAN_PAIRED = ("per-draw score differences, floor draws paired by edge and lean draws by systematic point "
               "(with-replacement, martingale CLT)")


@pytest.fixture(scope="module")
def twin(tmp_path_factory, countries):
    """Run "a" played again: the same simulated model, seed and settings."""
    model = SimulatedModel(countries, theta_for_kg(countries, seed=1), seed=1)
    run = kgprobe.probe(countries, model, budget=128, batch_size=32, seed=0,
                        store=tmp_path_factory.mktemp("twin") / "twin.kgrun", progress=False, report=False)
    yield run
    run.close()


def test_the_lean_draws_pair_by_point_as_the_engine_drew_them(two_runs, twin):
    from kgprobe.compare import draw_pairs, run_lean_ranks
    from kgprobe.estimators import table_from_store

    a, b = two_runs
    ta, tb, tt = (table_from_store(r.store) for r in (a, b, twin))
    ranks = {name: run_lean_ranks(run, t) for name, run, t in (("a", a, ta), ("b", b, tb), ("twin", twin, tt))}
    # The twin drew what run a drew; rebuilt from the run file alone (seed, rounds, active
    # edges, floor draws), its i-th lean point of each round is a's: every pair is one edge.
    ia, ib, n_floor = draw_pairs(ta, tt, ranks["a"], ranks["twin"])
    assert (ia.size, n_floor) == (128, 48)
    assert np.array_equal(ta.edge[ta.design][ia], tt.edge[tt.design][ib])
    # Two models: all 128 draws pair (48 floor by edge, 80 lean by point), each lean pair
    # within one round.
    ia, ib, n_floor = draw_pairs(ta, tb, ranks["a"], ranks["b"])
    assert (ia.size, n_floor) == (128, 48) and sorted(ia.tolist()) == list(range(128))
    assert np.array_equal(ta.round[ta.design][ia], tb.round[tb.design][ib])
    # Floor draws carry no rank; every lean draw one of 0..19 (20 lean draws a round).
    part = ta.part[ta.design]
    assert (ranks["a"][part == FLOOR] == -1).all() and set(ranks["a"][part == LEAN_PART].tolist()) == set(range(20))


def test_compare_of_a_run_and_its_twin_keeps_an_interval(two_runs, twin):
    # Every pair scores alike, so the pairs hold no spread: the lean draws count unpaired
    # and the difference keeps the interval of the floor-paired test.
    kg = next(r for r in accuracy_differences([two_runs[0], twin], ["a", "twin"])["differences"]
              if r["scope"] == "KG")
    assert (kg["difference"], kg["p"]) == (0.0, 1.0)
    assert kg["test"] == "paired on the shared floor, unpaired on the rest" and kg["high"] > 0.0 > kg["low"]


def test_compare_is_paired_and_every_interval_is_possible(two_runs):
    diffs = accuracy_differences(two_runs, ["a", "b"])["differences"]
    kg = next(r for r in diffs if r["scope"] == "KG")
    assert kg["paired"] and kg["test"] == "paired"
    assert kg["variance"] == LEAN_PAIRED
    est = [r.estimates()["kg"] for r in two_runs]
    assert kg["difference"] == pytest.approx(est[0]["estimate"] - est[1]["estimate"])
    for row in diffs:
        if row["tested"]:
            assert -1.0 <= row["low"] <= row["difference"] <= row["high"] <= 1.0
    for row in (r for r in diffs if r["scope"] == "predicate" and r["tested"]):
        # MOVER with the correlation of the two estimates over the paired draws.
        assert row["test"] == "paired" and row["variance"] == (
            "MOVER from each side's Korn-Graubard interval, with the two estimates' correlation over the paired draws")
        ea, eb = (r.estimates()["by_predicate"][row["predicate"]] for r in two_runs)
        assert row["low"] >= ea["low"] - eb["high"] - 1e-12 and row["high"] <= ea["high"] - eb["low"] + 1e-12


def test_compare_table_names_the_paired_test_and_its_variance_line_spells_it_out(two_runs, capsys):
    import re

    from kgprobe.cli import main

    diffs = accuracy_differences(two_runs, ["a", "b"])["differences"]
    kg = next(r for r in diffs if r["scope"] == "KG")
    capsys.readouterr()
    assert main(["compare", str(two_runs[0].path), str(two_runs[1].path)]) == 0
    text = capsys.readouterr().out
    # The KG row on one line: difference and interval in points, the short test name, p.
    interval = re.escape(f"{kg['difference'] * 100:+.1f} [{kg['low'] * 100:+.1f}, {kg['high'] * 100:+.1f}]")
    p_holm = re.escape(f"{kg['p_holm']:.3g}")
    row = rf"\n KG\s+{interval}( \*)?\s+paired\s+{p_holm}\s"
    assert re.search(row, text), row
    caption = " ".join(text[text.index("variance — "):].split())
    assert f"paired (KG): {LEAN_PAIRED}" in caption


def test_old_names_of_the_design_share_still_work_with_a_warning(tmp_path, countries, sim_model):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = kgprobe.probe(countries, sim_model, budget=32, batch_size=32, seed=0, store=tmp_path / "old.kgrun",
                            audit_fraction=0.25, sampler="thompson", progress=False, report=False)
    assert any(issubclass(w.category, DeprecationWarning) and "design_fraction" in str(w.message) for w in caught)
    # A quarter of 32: 8 design draws, the rest the sampler's.
    assert int((run.store.probe_arrays()["part"] > 0).sum()) == 8
    run.close()


def test_the_old_command_line_flag_still_works_with_a_warning(capsys):
    from kgprobe.cli import build_parser

    args = build_parser().parse_args(["run", "--audit-fraction", "0.5", "--design", "stratified"])
    assert args.design_fraction == 0.5 and args.design == "stratified"
    assert "--audit-fraction is now --design-fraction" in capsys.readouterr().err


def test_a_run_file_that_names_the_design_share_audit_fraction_reads_and_resumes_unchanged(tmp_path, countries,
                                                                                           sim_model):
    import json

    from kgprobe.protocol import protocol_differences
    from kgprobe.store import RunStore

    # The uniform design: the stratified and adaptive designs pace their stratum minimums by
    # the budget, so a first round played under a budget of 32 may draw otherwise than one
    # under 64, and this test is about the option's name only.
    settings = dict(budget=64, batch_size=32, seed=0, sampler="thompson", design_fraction=0.25, design="uniform",
                    progress=False, report=False)
    reference = kgprobe.probe(countries, sim_model, store=tmp_path / "ref.kgrun", **settings)
    kgprobe.probe(countries, sim_model, store=tmp_path / "old.kgrun", **{**settings, "budget": 32}).close()
    # What a run file written before the rename holds: the sampler option under its old name
    # (the probes table's design column kept its on-disk name, so nothing else differs).
    store = RunStore.open(tmp_path / "old.kgrun", writable=True)
    for key in ("config", "protocol"):
        recorded = json.loads(store.meta(key))
        recorded["sampler_options"] = {("audit_fraction" if k == "design_fraction" else k): v
                                       for k, v in recorded["sampler_options"].items()}
        store.set_meta(key, json.dumps(recorded))
    store.close()

    old = kgprobe.resume(tmp_path / "old.kgrun", sim_model, budget=64, progress=False)
    assert old.protocol["sampler_options"]["design_fraction"] == 0.25
    assert "audit_fraction" not in old.protocol["sampler_options"]
    assert protocol_differences(reference.protocol, old.protocol) == []
    # A quarter of 32 is 8 design draws a round; the resumed round draws what the unbroken run drew.
    assert [(p.round, p.edge, p.design, p.correct) for p in old.store.probes()] == \
        [(p.round, p.edge, p.design, p.correct) for p in reference.store.probes()]
    assert int((old.store.probe_arrays()["part"] > 0).sum()) == 16
    old.close()
    reference.close()


def test_the_old_sampler_option_name_still_works_with_a_warning():
    from kgprobe.sampling import make_sampler
    from kgprobe.settings import resolve_run_settings

    with pytest.warns(FutureWarning, match="'audit_fraction' is now 'design_fraction'"):
        settings = resolve_run_settings(("--sampler-option", {"sampler": "thompson",
                                                              "sampler_options": {"audit_fraction": 0.5}}))
    assert settings["sampler_options"]["design_fraction"] == 0.5 and "audit_fraction" not in settings["sampler_options"]
    with pytest.warns(FutureWarning, match="'audit_fraction' is now 'design_fraction'"):
        assert make_sampler("thompson", audit_fraction=0.25).design_fraction == 0.25
    with pytest.raises(InputError, match="give only 'design_fraction'"):
        make_sampler("thompson", audit_fraction=0.25, design_fraction=0.5)


def test_a_focus_run_recorded_before_the_top_share_value_resumes_as_it_was_played(tmp_path, countries, sim_model):
    """Runs record every sampler option; one without ``value_share`` predates the rule, and
    resuming it with today's default (half the sampler's picks by value) would change its picks."""
    import json

    from kgprobe.store import RunStore

    settings = dict(batch_size=32, seed=0, sampler="focus", design_fraction=0.5, progress=False, report=False)
    # Every run plays 32 queries and is then extended to 96: the design's stratum minimums
    # are paced by the budget, so the same history is needed for the same draws.
    for name, options in (("then", {"value_share": 0.0}), ("today", {})):
        kgprobe.probe(countries, sim_model, store=tmp_path / f"{name}.kgrun", budget=32, sampler_options=options,
                      **settings).close()
    played_then = kgprobe.resume(tmp_path / "then.kgrun", sim_model, budget=96, progress=False)
    today = kgprobe.resume(tmp_path / "today.kgrun", sim_model, budget=96, progress=False)
    kgprobe.probe(countries, sim_model, store=tmp_path / "old.kgrun", budget=32, sampler_options={"value_share": 0.0},
                  **settings).close()
    # What a run file written before the rule holds: neither option.
    store = RunStore.open(tmp_path / "old.kgrun", writable=True)
    for key in ("config", "protocol"):
        recorded = json.loads(store.meta(key))
        assert recorded["sampler_options"]["value_share"] == 0.0
        del recorded["sampler_options"]["value_share"], recorded["sampler_options"]["top_share"]
        store.set_meta(key, json.dumps(recorded))
    store.close()

    old = kgprobe.resume(tmp_path / "old.kgrun", sim_model, budget=96, progress=False)
    assert old.protocol["sampler_options"]["value_share"] == 0.0
    # Today's default picks other edges from the same start, so the old run resumed with it would differ.
    picks = {name: [(p.round, p.edge) for p in run.store.probes()] for name, run in
             (("then", played_then), ("today", today), ("old", old))}
    assert picks["old"] == picks["then"] != picks["today"]
    for run in (played_then, today, old):
        run.close()


def test_the_floor_spreads_the_stratum_minimums_over_the_rounds_the_budget_leaves(tmp_path, countries):
    # A KG of 674 edges: the 666 shared borders, 3 capitals, 5 official languages (one
    # subject group). 96 queries in rounds of 32: 3 rounds, 12 floor draws each.
    # The run's minimum (run_minimum): by proportion the small predicates get 96·3/674 =
    # 0.4273 and 96·5/674 = 0.7122 draws; below 3 a minimum m costs 2m − 1.1395 extra
    # draws, at most 0.05·96 = 4.8: m = 2.9697. Each floor carries 12/32 of it (1.1136)
    # and of the first two draws (0.75). Round 1 has 3 rounds left, so a small predicate
    # needs max(0.75/2, 1.1136/3) = 0.375 floor draws; its proportional share is
    # 12·3/674 ≈ 0.05. Each round's stored floor π is recomputed from the recorded floor
    # draws of the rounds before it.
    kg, model = _borders_and_a_few(countries)
    run = kgprobe.probe(kg, model, budget=96, batch_size=32, seed=0, store=tmp_path / "r.kgrun",
                        progress=False, report=False)
    probes = run.store.probe_arrays()
    run.close()
    labels, plan = _plan(kg, "capped", draws=96)
    assert plan.min_draws == pytest.approx(2.9697, abs=1e-4)
    names = list(labels["predicate"][1])
    small = [names.index("P36"), names.index("P37")]
    for r, rounds_left in ((1, 3), (2, 2), (3, 1)):
        this = probes["round"] == r
        floor = this & (probes["part"] == FLOOR)
        assert int(floor.sum()) == 12
        pi_f = plan.floor_probabilities(12, rounds_left, share=12 / 32)
        assert probes["inclusion"][floor] == pytest.approx(pi_f[probes["edge"][floor]], rel=1e-9)
        if r == 1:
            per_predicate = np.bincount(labels["predicate"][0], weights=pi_f, minlength=len(names))
            assert per_predicate[small] == pytest.approx([0.375, 0.375])
        plan.record(probes["edge"][this], probes["part"][this])
    # By the end each small predicate has had its 1.11 floor draws in expectation: 0 or 1
    # in round 1, then what it lacked over the two rounds left, then all the rest.
    assert (plan.counts["predicate"][small] >= 1).all()
    # A round limit below the budget's rounds bounds the run: with --max-rounds 2 the run
    # has 64 draws in two rounds, and the first round has two rounds left, not three. By
    # proportion 64·3/674 = 0.2849 and 0.4748 draws; 2m − 0.7597 ≤ 0.05·64 = 3.2 would
    # need m < 2, so the minimum is the 2 an interval needs, 0.75 of it in the floor:
    # max(0.75/2, 0.75/2) = 0.375 in round 1.
    run = kgprobe.probe(kg, model, budget=96, max_rounds=2, batch_size=32, seed=0, store=tmp_path / "m.kgrun",
                        progress=False, report=False)
    probes = run.store.probe_arrays()
    run.close()
    assert probes["round"].max() == 2
    _, fresh = _plan(kg, "capped", draws=64)
    assert fresh.min_draws == 2.0
    floor = (probes["round"] == 1) & (probes["part"] == FLOOR)
    pi_f = fresh.floor_probabilities(12, 2, share=12 / 32)
    assert probes["inclusion"][floor] == pytest.approx(pi_f[probes["edge"][floor]], rel=1e-9)
    per_predicate = np.bincount(labels["predicate"][0], weights=pi_f, minlength=len(names))
    assert per_predicate[small] == pytest.approx([0.375, 0.375])
    # Under the rule of run files written before the cap (``budget``) the minimum stays 4
    # whatever it costs: 1.5 in the floor, max(0.75/2, 1.5/3) = 0.5 in a round with three left.
    _, older = _plan(kg, "budget", draws=96)
    pi_f = older.floor_probabilities(12, 3, share=12 / 32)
    per_predicate = np.bincount(labels["predicate"][0], weights=pi_f, minlength=len(names))
    assert older.min_draws == 4.0 and per_predicate[small] == pytest.approx([0.5, 0.5])


def _borders_and_a_few(countries):
    edges = np.concatenate([countries.edges_of_predicate("P47", active_only=True),
                            countries.edges_of_predicate("P36", active_only=True)[:3],
                            countries.edges_of_predicate("P37", active_only=True)[:5]])
    kg = countries.subgraph(edges, name="borders-and-a-few")
    return kg, SimulatedModel(kg, theta_for_kg(kg, seed=4), seed=4)


def _plan(kg, pacing, draws=None):
    from kgprobe.estimators import group_labels
    from kgprobe.sampling.design import DesignPlan

    labels = group_labels(kg)
    return labels, DesignPlan("adaptive", labels["predicate"][0], labels["group"][0], kg.active, pacing=pacing,
                              draws=draws)


def test_a_run_file_recorded_before_the_budget_pacing_resumes_with_the_rule_it_was_played_with(tmp_path, countries):
    # Such a file has no design_pacing: its minimums came within two rounds, all in the
    # floor. Round 1 is played today, the key is removed, and rounds 2 and 3 must follow
    # the old rule: a small predicate's floor π sums to what it lacked over two rounds,
    # where today's rule (the rest over the two rounds left, 12/32 of it in the floor)
    # would give less.
    import json

    from kgprobe.store import RunStore

    kg, model = _borders_and_a_few(countries)
    kgprobe.probe(kg, model, budget=32, batch_size=32, seed=0, store=tmp_path / "r.kgrun", progress=False,
                  report=False).close()
    store = RunStore.open(tmp_path / "r.kgrun", writable=True)
    recorded = json.loads(store.meta("config"))
    assert recorded.pop("design_pacing") == "capped"
    store.set_meta("config", json.dumps(recorded))
    store.close()
    run = kgprobe.resume(tmp_path / "r.kgrun", model, budget=96, progress=False)
    assert run.config.design_pacing == "early"
    probes = run.store.probe_arrays()
    run.close()
    labels, early = _plan(kg, "early")
    _, today = _plan(kg, "budget")
    first = probes["round"] == 1
    early.record(probes["edge"][first], probes["part"][first])
    today.record(probes["edge"][first], probes["part"][first])
    floor = (probes["round"] == 2) & (probes["part"] == FLOOR)
    pi_early = early.floor_probabilities(12, 2, share=1.0)
    assert probes["inclusion"][floor] == pytest.approx(pi_early[probes["edge"][floor]], rel=1e-9)
    small = list(labels["predicate"][1]).index("P36")
    lacked = 4 - early.counts["predicate"][small]
    on_small = labels["predicate"][0] == small
    assert pi_early[on_small].sum() == pytest.approx(lacked / 2)
    assert today.floor_probabilities(12, 2, share=12 / 32)[on_small].sum() < lacked / 2


def test_a_lean_target_keeps_the_shared_floor_and_is_recorded(tmp_path, countries, two_runs):
    # Run "a" again with --lean-target: its floor is run a's edge for edge (compare still
    # pairs there), its lean follows the target, and the run file keeps the setting. At 128
    # queries simple random sampling projects about ±8.7 points, so ±12 leaves room to hunt.
    model = SimulatedModel(countries, theta_for_kg(countries, seed=1), seed=1)
    run = kgprobe.probe(countries, model, budget=128, batch_size=32, seed=0, store=tmp_path / "hunt.kgrun",
                        progress=False, report=False, lean_target=0.12)
    assert run.config.lean_target == 0.12 and two_runs[0].config.lean_target is None
    a, h = two_runs[0].store.probe_arrays(), run.store.probe_arrays()
    assert np.array_equal(a["edge"][a["part"] == FLOOR], h["edge"][h["part"] == FLOOR])
    lean = h["part"] == LEAN_PART
    assert int(lean.sum()) == 80 and ((h["inclusion"][lean] > 0) & (h["inclusion"][lean] <= 1)).all()
    assert set(h["edge"][lean].tolist()) != set(a["edge"][a["part"] == LEAN_PART].tolist())
    run.close()
    reopened = kgprobe.open_run(tmp_path / "hunt.kgrun")
    assert reopened.config.lean_target == 0.12
    reopened.close()
