"""``kgprobe bench compare``: does ``kgprobe compare``'s KG difference cover, and how wide is it?

Two recorded sweeps of the same edges (``--truth A B``; default: the committed default
model's and Gemma-3-270m's), or one sweep's first half of passes against its second
(``--split-passes``: one model measured twice, as two checkpoints that answer alike would
be), are replayed as runs at the run defaults with the same seed, ``--runs`` seeds, as two
``kgprobe run --seed S`` calls would be (:mod:`kgprobe.simulation.coverage`). Each pair of
runs goes through the functions ``compare`` uses (:mod:`kgprobe.compare`) three ways:

* ``paired`` — as ``compare`` pairs them: floor draws by edge, lean draws by their point of
  the shared systematic sample (:func:`kgprobe.compare.draw_pairs`);
* ``floor_only`` — the floor draws paired, the lean draws' variances added;
* ``unpaired`` — the two runs' variances added;

each with its ``coverage`` of the true difference (the two sweeps' shares of right answers)
and mean ``ci_halfwidth``; ``exact_halfwidth`` is 1.96 times the spread of the replays'
differences, what an exact variance would give. ``predicates``: every predicate's
difference, paired (MOVER with the two estimates' correlation over the paired draws) and
unpaired (MOVER alone): the least and the mean of the predicates' coverages, and their
mean half-width.
"""

from __future__ import annotations

import json
import time


def register(subparsers) -> None:
    parser = subparsers.add_parser("compare", help="coverage and width of compare's KG difference on replays")
    parser.add_argument("--truth", nargs="+", default=None, metavar="SWEEP",
                        help="two recorded sweeps of the same edges (names or paths), or one with --split-passes; "
                        "default: default gemma3-270m")
    parser.add_argument("--split-passes", action="store_true",
                        help="compare the sweep's first half of passes with its second half")
    parser.add_argument("--graph", default=None, metavar="KG",
                        help="the KG the sweeps were recorded on (default: the sweeps' own, which must be embedded)")
    parser.add_argument("--runs", type=int, default=200, help="seeded pairs of replayed runs")
    parser.add_argument("--seed", type=int, default=0, help="first replay seed")
    parser.set_defaults(func=handle)


def split_passes(sweep):
    """(first half, second half) of a sweep's passes, margins kept: one model's two sweeps."""
    from kgprobe.sweep import pass_slice

    half = sweep.passes // 2
    return pass_slice(sweep, 0, half), pass_slice(sweep, half, 2 * half)


def replayed_differences(sweep_a, sweep_b, *, runs: int = 200, seed: int = 0, graph=None) -> tuple[float, list[dict]]:
    """The true KG difference A − B and, per replay seed, ``compare``'s difference three ways.

    Each row: ``paired`` (whether the runs' floors coincide), and the difference dicts of
    :func:`kgprobe.compare.kg_difference` for ``paired`` (all shared draws), ``floor_only``
    and ``unpaired``.
    """
    import numpy as np

    from kgprobe.compare import (draw_pairs, floor_part, informative_pairs, kg_difference, lean_ranks,
                                 predicate_difference)
    from kgprobe.estimators import design_scores, group_estimates, kg_estimate
    from kgprobe.simulation.coverage import replay_setup, simulate_default_run
    from kgprobe.simulation.replay import sweep_graph

    sides = []
    for sweep in (sweep_a, sweep_b):
        kg, sweep = sweep_graph(sweep, graph)
        sides.append((sweep, replay_setup(sweep, kg)))
    rows = []
    for r in range(seed, seed + runs):
        tables = [simulate_default_run(setup, sweep, seed=r) for sweep, setup in sides]
        ea, eb = (kg_estimate(t).as_dict() for t in tables)
        # The replays' lean generators are default_rng([seed, round, 3]) (the engine's
        # round_rng(seed, round + 1, 3)); their active edges are the sweep's.
        ranks = [lean_ranks(t, setup["active"], lambda t_, r=r: np.random.default_rng([r, t_, 3]))
                 for t, (_, setup) in zip(tables, sides)]
        za, zb = design_scores(tables[0]), design_scores(tables[1])
        pairs = informative_pairs(za, zb, draw_pairs(*tables, *ranks))
        ga, gb = (group_estimates(t, "predicate") for t in tables)
        preds = {p: (predicate_difference(*tables, ga[p].as_dict(), gb[p].as_dict(), p, pairs=pairs),
                     predicate_difference(*tables, ga[p].as_dict(), gb[p].as_dict(), p))
                 for p in sorted(ga.keys() & gb.keys())}
        rows.append({"paired": pairs is not None,
                     "all": kg_difference(ea, eb, za, zb, pairs=pairs),
                     "floor_only": kg_difference(ea, eb, za, zb, pairs=floor_part(pairs)),
                     "unpaired": kg_difference(ea, eb),
                     "predicates": preds})
    truths = [setup["truth"] for _, setup in sides]
    truth = truths[0]["kg"] - truths[1]["kg"]
    for row in rows:
        row["predicate_truth"] = {p: truths[0]["predicate"][p] - truths[1]["predicate"][p] for p in row["predicates"]}
    return truth, rows


def summary(truth: float, diffs: list[dict | None]) -> dict:
    """Coverage of ``truth`` and mean half-width over the tested differences, and the tests used."""
    import numpy as np

    tested = [d for d in diffs if d is not None]
    if not tested:
        return {"coverage": None, "ci_halfwidth": None, "tested": 0, "tests": []}
    return {"coverage": round(float(np.mean([d["low"] <= truth <= d["high"] for d in tested])), 3),
            "ci_halfwidth": round(float(np.mean([(d["high"] - d["low"]) / 2 for d in tested])), 4),
            "tested": len(tested), "tests": sorted({d["test"] for d in tested})}


def predicate_summary(rows: list[dict], which: int) -> dict:
    """Per predicate the share of runs whose difference interval held its truth (``which``:
    0 paired, 1 unpaired), their least and mean, and the mean half-width over predicates."""
    import numpy as np

    covered: dict[str, list[bool]] = {}
    half: dict[str, list[float]] = {}
    for row in rows:
        for p, diffs in row["predicates"].items():
            d = diffs[which]
            if d is None:
                continue
            covered.setdefault(p, []).append(d["low"] <= row["predicate_truth"][p] <= d["high"])
            half.setdefault(p, []).append((d["high"] - d["low"]) / 2)
    if not covered:
        return {"predicates": 0}
    cov = {p: float(np.mean(v)) for p, v in covered.items()}
    worst = min(cov, key=cov.get)
    return {"predicates": len(cov), "min_coverage": round(cov[worst], 3), "least_covered": worst,
            "mean_coverage": round(float(np.mean(list(cov.values()))), 3),
            "ci_halfwidth": round(float(np.mean([np.mean(v) for v in half.values()])), 4)}


def handle(args) -> int:
    import numpy as np
    from scipy.stats import norm

    from kgprobe.errors import InputError
    from kgprobe.sweep import load_sweep

    t0 = time.perf_counter()
    names = args.truth or (["default"] if args.split_passes else ["default", "gemma3-270m"])
    want = 1 if args.split_passes else 2
    if len(names) != want:
        raise InputError(f"--truth takes {want} sweep{'s' if want > 1 else ''}"
                         f"{' with --split-passes' if args.split_passes else ''}, got {len(names)}")
    if args.runs < 2:
        raise InputError("--runs must be at least 2 (the exact half-width needs a spread)")
    sweeps = [load_sweep(n) for n in names]
    if args.split_passes:
        if sweeps[0].passes < 2:
            raise InputError(f"{names[0]} has {sweeps[0].passes} pass; --split-passes needs at least 2")
        sweeps = list(split_passes(sweeps[0]))
    elif not np.array_equal(np.sort(sweeps[0].edges), np.sort(sweeps[1].edges)):
        raise InputError(f"{names[0]} and {names[1]} hold different edges; compare pairs runs over the same active "
                         "edges: give two sweeps of one edge set")
    truth, rows = replayed_differences(*sweeps, runs=args.runs, seed=args.seed, graph=args.graph)
    diffs = np.array([r["unpaired"]["difference"] for r in rows])
    out = {
        "bench": "compare",
        "sweeps": names,
        "split_passes": bool(args.split_passes),
        "runs": args.runs,
        "seed": args.seed,
        "truth": round(truth, 4),
        "paired_share": round(float(np.mean([r["paired"] for r in rows])), 3),
        "paired": summary(truth, [r["all"] for r in rows]),
        "floor_only": summary(truth, [r["floor_only"] for r in rows]),
        "unpaired": summary(truth, [r["unpaired"] for r in rows]),
        "exact_halfwidth": round(float(norm.ppf(0.975)) * float(diffs.std(ddof=1)), 4),
        "predicates": {"paired": predicate_summary(rows, 0), "unpaired": predicate_summary(rows, 1)},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))
    return 0
