"""``kgprobe bench design``: the run-default design on every committed sweep, against the uniform one.

A run's promises, hunt blind spots and give an interval to trust, have to hold on every
graph and model, not on the one a setting was chosen on. This benchmark replays each
committed sweep (the embedded KG's and those of user-built KGs in ``kgprobe/sweeps/built``)
with at least ``--min-edges`` edges as ``--runs`` runs at the run defaults, 256 queries
(:func:`kgprobe.simulation.coverage.efficiency_fields`), and on the same seeds as runs with
``--design uniform`` (the baseline, a simple random sample); ``--lean-target`` replays the
default runs with that setting, ``--sampler`` both with another sampler (whose estimates
are the predictions the design leans on and the estimators use). Per sweep: the KG interval's
``coverage`` and mean ``ci_halfwidth``, ``srs_halfwidth`` (simple random sampling at that
accuracy), ``weak_share`` (probes on edges the model gets wrong more often than not), the
least covered predicate's coverage (a predicate without an interval counts as a miss), the
weak edges' own share and the weak share the best-case model reaches at ±6 points
(``ideal_frontier``); then the least coverage, the widest interval and how many sweeps
meet each bar of docs/design-measured.md. A sweep whose coverage falls under the bar at ``--runs``
replays is replayed again with ``--confirm-runs`` (the first ``--runs`` of them the same
runs) and judged on those: at 200 replays a coverage has a standard error of about 1.5
points, and one sweep in thirteen whose true coverage is 0.95 falls under 0.93 by chance
(binomial: 0.078); at 1,000 the error is 0.7 points and the chance 0.002. The row keeps
both. ``--truth`` replays other sweeps (a committed built KG's sweep, by its name or path
or copied anywhere, finds its own KG; any other built KG's sweep needs ``--graph``).
"""

from __future__ import annotations

import json
import math
import time

#: The bars of the adaptive design (docs/design-measured.md), at run defaults and 256 queries.
BARS = {"coverage": 0.93, "ci_halfwidth": 0.06, "weak_share": 0.60}


def register(subparsers) -> None:
    parser = subparsers.add_parser("design", help="the run-default design on every committed sweep vs uniform")
    add_truth_arguments(parser)
    parser.add_argument("--runs", type=int, default=200, help="replayed runs per sweep and design (default 200)")
    parser.add_argument("--confirm-runs", type=int, default=1000, metavar="RUNS",
                        help="replay a sweep whose coverage falls under the bar again with this many runs (the "
                             "first --runs the same) and judge it on those (default 1000; 0: never)")
    parser.add_argument("--seed", type=int, default=0, help="replay seed")
    parser.add_argument("--min-edges", type=int, default=100,
                        help="skip sweeps with fewer edges (default 100, the bars' own limit)")
    parser.add_argument("--lean-target", type=float, default=None, metavar="HALF_WIDTH",
                        help="replay the default runs with this --lean-target (default: off, as a default run)")
    parser.add_argument("--sampler", default=None, metavar="NAME",
                        help="replay the runs (default and baseline) with this sampler, whose estimates the "
                             "design leans on (default: the run default's)")
    parser.add_argument("--baseline", default="uniform", choices=("uniform", "stratified", "none"),
                        help="the design replayed beside the default on the same seeds (default uniform)")
    parser.set_defaults(func=handle)


def add_truth_arguments(parser) -> None:
    """``--truth`` and ``--graph``: the sweeps a bench replays, by default every committed one
    (:func:`load_truth_sweeps` reads them)."""
    parser.add_argument("--truth", nargs="+", default=None, metavar="SWEEP",
                        help="sweeps to replay (names or paths; default: every committed sweep, built KGs' too)")
    parser.add_argument("--graph", default=None, metavar="KG",
                        help="the KG of --truth sweeps that are not committed (default: each sweep's own)")


def load_truth_sweeps(truth, graph) -> list[tuple[str, object, object, object, object]]:
    """(name, sweep source, KG source, sweep, KG) of every ``--truth`` sweep (default: every
    committed sweep), each loaded and matched to its KG before any replay, so bad input fails
    at once. The two sources load it again where that is needed (a worker process)."""
    from kgprobe.errors import InputError
    from kgprobe.simulation.replay import sweep_graph
    from kgprobe.sweep import load_sweep

    items = [truth_item(t, graph) for t in truth] if truth else committed_sweeps()
    loaded = []
    for name, source, kg_source in items:
        sweep = load_sweep(source)
        try:
            kg, sweep = sweep_graph(sweep, kg_source)
        except InputError as exc:
            raise InputError(f"{name}: {exc}") from None
        loaded.append((name, source, kg_source, sweep, kg))
    return loaded


def committed_sweeps() -> list[tuple[str, object, object]]:
    """(name, sweep path or name, KG file or None) of every committed sweep: the embedded
    KG's first, then the built KGs'."""
    from kgprobe.sweep import built_sweeps, packaged_sweeps

    return ([(name, name, None) for name in packaged_sweeps()]
            + [(name, path, kg) for name, (path, kg) in built_sweeps().items()])


def truth_item(truth: str, graph) -> tuple[str, object, object]:
    """(name, sweep, KG) of a ``--truth`` sweep. A committed built sweep given by its path is
    reported under its name; its KG, as any committed one's, is found by
    :func:`kgprobe.simulation.replay.sweep_graph`."""
    from pathlib import Path

    from kgprobe.sweep import built_sweeps

    if graph is None and Path(truth).is_file():
        for name, (path, _) in built_sweeps().items():
            if Path(truth).resolve() == path.resolve():
                return name, truth, None
    return truth, truth, graph


def sweep_row(sweep, kg, *, runs: int, seed: int, baseline: str | None, lean_target: float | None = None,
              sampler: str | None = None) -> dict:
    """One sweep's figures at run defaults (with ``lean_target`` and ``sampler``, if given)
    and, on the same seeds and with the same sampler, with the ``baseline`` design."""
    from kgprobe.simulation.coverage import efficiency_fields

    def fields(design):
        f = efficiency_fields(sweep, kg=kg, runs=runs, seed=seed, design=design,
                              lean_target=lean_target if design is None else None, sampler=sampler)
        return {k: f[k] for k in ("coverage", "ci_halfwidth", "srs_halfwidth", "design_effect", "weak_share")} | {
            "predicate_coverage_min": f["predicate_coverage"]["min"], "frontier": f["ideal_frontier"]}

    run = fields(None)
    frontier = run.pop("frontier")
    row = {"edges": sweep.num_edges, "passes": sweep.passes, "accuracy": round(sweep.accuracy(), 4),
           "weak_edge_share": frontier["weak_edge_share"],
           "weak_share_reachable": frontier["weak_share_reachable"], "run_defaults": run}
    if baseline is not None:
        base = fields(baseline)
        base.pop("frontier")
        row[baseline] = base
    return row


def _coverage_se(coverage: float, runs: int) -> float:
    """The binomial standard error of a coverage measured over ``runs`` replays."""
    return math.sqrt(coverage * (1 - coverage) / runs)


def confirm(row: dict, sweep, kg, args) -> None:
    """Replay ``row``'s run defaults with ``args.confirm_runs`` runs and judge the sweep on them.

    Run r of a replay is seeded by the replay seed and r alone, so the first ``args.runs``
    runs are those already played and the new figure extends the old one rather than
    redrawing it. The row keeps the figures at ``args.runs`` (``run_defaults_at_runs``) and
    says how many runs its ``run_defaults`` rest on (``runs``); the baseline is not replayed
    again.
    """
    more = sweep_row(sweep, kg, runs=args.confirm_runs, seed=args.seed, baseline=None,
                     lean_target=args.lean_target, sampler=args.sampler)
    row["run_defaults_at_runs"] = row["run_defaults"]
    row["run_defaults"] = more["run_defaults"]
    row["runs"] = args.confirm_runs


def summarize(rows: dict[str, dict], baseline: str | None) -> dict:
    """Least coverage, widest interval, weak shares and bar counts over the sweeps' rows."""
    runs = {name: row["run_defaults"] for name, row in rows.items()}
    if not runs:
        return {"sweeps": 0}

    def worst(key, pick):
        name = pick(runs, key=lambda n: runs[n][key])
        return {"value": runs[name][key], "sweep": name}

    out = {
        "sweeps": len(runs),
        "coverage_min": worst("coverage", min),
        "ci_halfwidth_max": worst("ci_halfwidth", max),
        # The least covered predicate's coverage, on the sweep where it is least.
        "predicate_coverage_min": worst("predicate_coverage_min", min),
        "weak_share_min": worst("weak_share", min),
        "weak_share_mean": round(sum(r["weak_share"] for r in runs.values()) / len(runs), 3),
        # Above the weak edges' own share: what a uniform design would put on them.
        "weak_share_above_base_rate": sum(r["weak_share"] > rows[n]["weak_edge_share"] for n, r in runs.items()),
        # Where even the best-case model cannot reach the weak-share bar at ±6 points.
        "frontier_below_bar": sum((rows[n]["weak_share_reachable"] or 0.0) < BARS["weak_share"] for n in runs),
        "met": {"coverage": sum(r["coverage"] >= BARS["coverage"] for r in runs.values()),
                "ci_halfwidth": sum(r["ci_halfwidth"] <= BARS["ci_halfwidth"] for r in runs.values()),
                "weak_share": sum(r["weak_share"] >= BARS["weak_share"] for r in runs.values())},
        "bars": BARS,
        # Sweeps judged on more replays because their coverage fell under the bar (confirm).
        "confirmed": {n: {"runs": rows[n]["runs"], "coverage_at_runs": rows[n]["run_defaults_at_runs"]["coverage"],
                          "coverage": runs[n]["coverage"]} for n in runs if "run_defaults_at_runs" in rows[n]},
    }
    if baseline is not None:
        base = {n: rows[n][baseline] for n in runs}
        out[baseline] = {
            "coverage_min": min(b["coverage"] for b in base.values()),
            "ci_halfwidth_max": max(b["ci_halfwidth"] for b in base.values()),
            "predicate_coverage_min": min(b["predicate_coverage_min"] for b in base.values()),
            "weak_share_mean": round(sum(b["weak_share"] for b in base.values()) / len(base), 3),
        }
        # What the adaptive default bought against the baseline on the same seeds, sweep by sweep.
        out["weak_share_gain_mean"] = round(sum(runs[n]["weak_share"] - base[n]["weak_share"] for n in runs)
                                            / len(runs), 3)
        out["narrower_than_" + baseline] = sum(runs[n]["ci_halfwidth"] < base[n]["ci_halfwidth"] for n in runs)
    return out


def handle(args) -> int:
    from kgprobe import run_spec
    from kgprobe.errors import InputError
    from kgprobe.simulation.coverage import run_defaults

    t0 = time.perf_counter()
    if args.runs < 1:
        raise InputError("--runs must be at least 1")
    # The setting's one range check, so the message is `kgprobe run`'s.
    problem = run_spec.problem("lean_target", args.lean_target)
    if problem:
        raise InputError(f"the command line: {problem}")
    if args.sampler is not None:
        from kgprobe.settings import sampler_class

        sampler_class(args.sampler)  # an unknown name fails here, before any replay
    if args.confirm_runs < 0:
        raise InputError("--confirm-runs must be 0 (never) or a number of runs")
    if args.min_edges < 2:
        raise InputError("--min-edges must be at least 2 (a replay needs two edges)")
    baseline = None if args.baseline == "none" else args.baseline
    loaded = [(name, sweep, kg) for name, _, _, sweep, kg in load_truth_sweeps(args.truth, args.graph)]
    rows, skipped = {}, []
    for i, (name, sweep, kg) in enumerate(loaded, 1):
        if sweep.num_edges < args.min_edges:
            skipped.append(name)
            continue
        row = sweep_row(sweep, kg, runs=args.runs, seed=args.seed, baseline=baseline, lean_target=args.lean_target,
                        sampler=args.sampler)
        rows[name] = row
        r = row["run_defaults"]
        line = (f"[{i}/{len(loaded)}] {name} ({row['edges']} edges): coverage {r['coverage']:.3f} "
                f"(se {_coverage_se(r['coverage'], args.runs):.3f}), "
                f"±{r['ci_halfwidth']:.4f} (SRS {r['srs_halfwidth']:.4f}), weak share {r['weak_share']:.3f} "
                f"(weak edges {row['weak_edge_share']:.3f}, frontier {row['weak_share_reachable']})")
        if baseline is not None:
            b = row[baseline]
            line += f"; {baseline}: {b['coverage']:.3f}, ±{b['ci_halfwidth']:.4f}, weak share {b['weak_share']:.3f}"
        print(line, flush=True)
        if r["coverage"] < BARS["coverage"] and args.confirm_runs > args.runs:
            confirm(row, sweep, kg, args)
            c = row["run_defaults"]
            print(f"  coverage under {BARS['coverage']} at {args.runs} replays; at {args.confirm_runs}: "
                  f"{c['coverage']:.3f} (se {_coverage_se(c['coverage'], args.confirm_runs):.3f}), "
                  f"±{c['ci_halfwidth']:.4f}, weak share {c['weak_share']:.3f}", flush=True)
    if not rows:
        raise InputError(f"no sweep has at least {args.min_edges} edges (--min-edges); skipped: {', '.join(skipped)}")
    out = {"bench": "design", "runs": args.runs, "confirm_runs": args.confirm_runs, "seed": args.seed,
           "budget": 256, "baseline": baseline,
           "lean_target": args.lean_target, "sampler": args.sampler or run_defaults()["sampler"],
           "summary": summarize(rows, baseline), "skipped": skipped, "sweeps": rows,
           "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(out))
    return 0
