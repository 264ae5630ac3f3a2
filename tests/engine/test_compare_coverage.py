"""``kgprobe compare``'s KG difference on replayed real answers: paired, and it covers.

Two models' recorded sweeps of the same 500 edges (the committed default-model and
Gemma-3-270m sweeps) are replayed as runs at the run defaults with the same seed, as two
``kgprobe run`` calls with ``--seed`` would be; each pair of runs goes through the
functions ``compare`` uses (:func:`kgprobe.compare.draw_pairs`,
:func:`kgprobe.compare._difference`; the loop is ``kgprobe bench compare``'s,
:func:`kgprobe.bench.compare.replayed_differences`). The truth is the difference of the two sweeps'
accuracies.
"""

from __future__ import annotations

import numpy as np
import pytest

from kgprobe.bench.compare import replayed_differences, split_passes
from kgprobe.compare import _difference, floor_pairs
from kgprobe.estimators import kg_estimate
from kgprobe.simulation.coverage import replay_setup, simulate_default_run
from kgprobe.simulation.replay import sweep_graph
from kgprobe.sweep import load_sweep

from .conftest import turned_right

RUNS = 200


def _replayed_differences(sweep_a, sweep_b, runs=RUNS):
    """The truth and, per seed: paired?, compare's difference, unpaired, floor-only."""
    truth, rows = replayed_differences(sweep_a, sweep_b, runs=runs)
    return truth, [(r["paired"], r["all"], r["unpaired"], r["floor_only"]) for r in rows]


def _predicate_coverage(sweep_a, sweep_b, runs=RUNS):
    """Per predicate, paired and unpaired: (least coverage over predicates, mean half-width)."""
    from kgprobe.bench.compare import predicate_summary

    _, rows = replayed_differences(sweep_a, sweep_b, runs=runs)
    return [(s["min_coverage"], s["ci_halfwidth"]) for s in (predicate_summary(rows, 0), predicate_summary(rows, 1))]


@pytest.mark.parametrize("pair", ["two models", "one model twice"])
def test_paired_predicate_differences_cover_with_narrower_intervals(pair):
    a = load_sweep("default")
    sweeps = (a, load_sweep("gemma3-270m")) if pair == "two models" else split_passes(a)
    (paired_min, paired_half), (unpaired_min, unpaired_half) = _predicate_coverage(*sweeps)
    # Every one of the 11 predicates covers its true difference in at least 93 % of the 200
    # runs (0.94 both); the correlation takes 12 % and 20 % off MOVER's half-widths
    # (25.5 against 28.9 points; 23.5 against 29.5).
    assert paired_min >= 0.93 and unpaired_min >= 0.93
    assert paired_half < 0.9 * unpaired_half


def _coverage(truth, diffs):
    return float(np.mean([d["low"] <= truth <= d["high"] for d in diffs]))


def _halfwidth(diffs):
    return float(np.mean([(d["high"] - d["low"]) / 2 for d in diffs]))


def test_two_models_with_the_same_seed_compare_paired_and_the_interval_covers():
    a, b = load_sweep("default"), load_sweep("gemma3-270m")
    assert np.array_equal(a.edges, b.edges)
    truth, out = _replayed_differences(a, b)
    # 0.5139 − 0.6150: the two sweeps' shares of right answers.
    assert truth == pytest.approx(a.accuracy() - b.accuracy()) and truth == pytest.approx(-0.1011, abs=1e-4)
    assert all(paired for paired, *_ in out)
    assert all(d["test"] == "paired" for _, d, *_ in out)
    paired = [d for _, d, _, _ in out]
    unpaired = [u for _, _, u, _ in out]
    floor_only = [f for *_, f in out]
    assert _coverage(truth, paired) >= 0.94
    # Pairing removes the edges' common difficulty: a narrower interval; the lean draws
    # paired by point narrow it further than the floor alone (7.12 against 7.44 points).
    assert _halfwidth(paired) < _halfwidth(floor_only) < _halfwidth(unpaired)


def test_two_sweeps_of_one_model_compare_paired_by_point_with_a_narrower_interval_that_covers():
    # The default model's first ten passes against its last ten: two "checkpoints" that
    # answer alike, the case where the runs lean alike and pairing the lean pays most.
    base = load_sweep("default")
    a, b = split_passes(base)
    truth, out = _replayed_differences(a, b)
    assert truth == pytest.approx(a.accuracy() - b.accuracy()) and truth == pytest.approx(0.0110, abs=1e-4)
    paired = [d for _, d, _, _ in out]
    assert all(d["test"] == "paired" for d in paired)
    assert _coverage(truth, paired) >= 0.93
    # 6.56 points against 7.27 with the floor alone paired and 8.22 unpaired.
    assert _halfwidth(paired) < 0.93 * _halfwidth([f for *_, f in out])


def test_two_strong_models_compare_with_coverage_near_the_boundary():
    # The default sweep with wrong answers turned right at random (seeded): 97.5 % and 92.5 %
    # right on the same edges, the case where normal intervals on each side undercover.
    base = load_sweep("default")
    rng = np.random.default_rng(1)
    sweeps = [turned_right(base, p, rng) for p in (0.95, 0.85)]
    truth, out = _replayed_differences(*sweeps)
    assert truth == pytest.approx(sweeps[0].accuracy() - sweeps[1].accuracy())
    assert all(paired for paired, *_ in out)
    assert _coverage(truth, [d for _, d, *_ in out]) >= 0.93


def test_runs_with_other_seeds_compare_unpaired_and_predicate_differences_cover():
    # Seeds r and r + 10,000: the floors differ, so the KG difference is unpaired (the two
    # runs' variances added); predicate differences are MOVER from each side's
    # Korn–Graubard interval in either case.
    from kgprobe.estimators import group_estimates

    sides = []
    for name in ("default", "gemma3-270m"):
        kg, sweep = sweep_graph(load_sweep(name), None)
        sides.append((sweep, replay_setup(sweep, kg)))
    truth_a, truth_b = sides[0][1]["truth"], sides[1][1]["truth"]
    truth_pred = {p: truth_a["predicate"][p] - truth_b["predicate"][p] for p in truth_a["predicate"]}
    truth_kg = truth_a["kg"] - truth_b["kg"]
    kg_covered, pred_covered = [], {}
    for r in range(RUNS):
        tables = [simulate_default_run(setup, sweep, seed=seed) for (sweep, setup), seed in zip(sides, (r, r + 10_000))]
        assert floor_pairs(*tables) is None
        ea, eb = (kg_estimate(t).as_dict() for t in tables)
        diff = _difference(ea, eb, group=False)
        assert diff["test"] == "unpaired"
        kg_covered.append(diff["low"] <= truth_kg <= diff["high"])
        ga, gb = (group_estimates(t, "predicate") for t in tables)
        for p in ga.keys() & gb.keys():
            x = _difference(ga[p].as_dict(), gb[p].as_dict(), group=True)
            if x is not None:
                pred_covered.setdefault(p, []).append(x["low"] <= truth_pred[p] <= x["high"])
    assert np.mean(kg_covered) >= 0.94
    assert len(pred_covered) == 11 and min(np.mean(v) for v in pred_covered.values()) >= 0.93
