"""``kgprobe bench samplers``: the samplers' ratios on every committed sweep at once.

A sampler chosen on one sweep's answers is chosen for that sweep: the best sampler on
the default model's sweep needed 0.29 of brute force, and 0.66 on answers nobody tuned it
to. So a sampler change is judged on every recorded sweep, and this benchmark does that in
one command. It replays the KGLens study of ``kgprobe bench efficiency --truth`` on each
committed sweep (the embedded KG's and the built KGs' of ``kgprobe/sweeps/built``) with at
least ``--min-passes`` passes and ``--min-edges`` edges: the same top-k and batch (scaled
with the sweep's edges), the same 5 epochs, and each sampler on the random stream it has
there, so a sweep's row here is that bench's ratio for the same seeds. ``--first-seed``
moves the replay seeds to fresh ones.

Per sweep: each sampler's ratio (queries to reach brute force's top-k MSE at 4.5 epochs ÷
those epochs' queries), the best of them, and ``screen once, then informed`` (told θ*: it
answers every edge once and then only the true top k; how hard the sweep is, not a
bound). Then per sampler, over the sweeps: the geometric mean of its ratios, their
median and worst, on how many sweeps it is best, its geometric mean relative to the run
default's sampler on the same sweeps (below 1: fewer queries than the default), and how
many sweeps meet the issue's bars (best ≤ 0.30, ``thompson`` ≤ 0.40). With 3 or more
seeds each ratio also has its 95 % seed-bootstrap interval (``ratio_intervals``, as in
``bench efficiency``: how much of it is the seeds' luck), and ``met_by_interval`` counts
the sweeps whose interval's upper end is under the bar (met whatever the luck) and those
whose lower end is (not told apart from the bar by these seeds). A ratio never
reached within the 5 epochs counts as 5/4.5 in the means (the budget: its true ratio is
at least that) and is counted in ``not_reached``.

Sweeps of two passes are left out by default: 4.5 brute-force epochs ask each edge more
often than it was answered, so most of the study re-uses recorded answers and the ratio
says more about the replay than about the sampler.
"""

from __future__ import annotations

import json
import math
import statistics
import time

#: The issue's bars on the committed sweeps (docs/samplers-measured.md).
BARS = {"best": 0.30, "thompson": 0.40}
#: The samplers replayed by default (labels of ``kgprobe.simulation.study.DEFAULT_SPECS``).
DEFAULT_SAMPLERS = ("thompson", "focus", "focus (no propagation)", "margin-focus")
#: Epochs of queries per configuration and the brute-force epochs the ratio is taken at,
#: as in ``kgprobe bench efficiency``.
EPOCHS, REFERENCE_EPOCHS = 5.0, 4.5
#: Where a ratio was never reached, the means count this: the budget, a lower bound.
NOT_REACHED = EPOCHS / REFERENCE_EPOCHS
REFERENCE = "brute-force"


def register(subparsers) -> None:
    from kgprobe.bench.design import add_truth_arguments

    parser = subparsers.add_parser("samplers", help="the samplers' ratios on every committed sweep at once")
    add_truth_arguments(parser)
    parser.add_argument("--samplers", default=",".join(DEFAULT_SAMPLERS), metavar="LABELS",
                        help="comma-separated study labels (`kgprobe bench efficiency`'s, e.g. 'focus (no "
                             "propagation)'); default: " + ", ".join(DEFAULT_SAMPLERS))
    parser.add_argument("--seeds", type=int, default=20,
                        help="replay seeds per sweep (default 20, as `bench efficiency --truth`)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first replay seed (default 0; e.g. 20 for seeds no sampler was judged on)")
    parser.add_argument("--min-passes", type=int, default=3,
                        help="skip sweeps with fewer passes (default 3; see the module's docstring)")
    parser.add_argument("--min-edges", type=int, default=100, help="skip sweeps with fewer edges (default 100)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="sweeps replayed at once, one process each (default 1); the figures do not depend on it")
    parser.set_defaults(func=handle)


def _specs(labels: list[str]) -> tuple[list, list[int]]:
    """The study configurations of ``labels`` (brute force first) and their stream numbers
    in ``bench efficiency``'s study, so each replays exactly as it does there."""
    from kgprobe.simulation.study import DEFAULT_SPECS

    index = {spec.label: i for i, spec in enumerate(DEFAULT_SPECS)}
    wanted = [REFERENCE] + [lab for lab in labels if lab != REFERENCE]
    return [DEFAULT_SPECS[index[lab]] for lab in wanted], [index[lab] for lab in wanted]


def sweep_row(sweep, kg, *, labels: list[str], seeds: range) -> dict:
    """One sweep's ratios: ``bench efficiency --truth``'s study, for ``labels`` only."""
    from kgprobe.bench.efficiency import json_ratio, ratio_seed_intervals
    from kgprobe.simulation.informed import SCREEN_THEN_INFORMED, informed_specs
    from kgprobe.simulation.replay import replay_truth, run_replay_study, scaled
    from kgprobe.simulation.study import DEFAULT_SPECS

    t0 = time.perf_counter()
    e = sweep.num_edges
    k, batch = scaled(600, e), scaled(64, e)
    specs, streams = _specs(labels)
    _, active, truth = replay_truth(kg, sweep)
    # bench efficiency appends the two informed references after its samplers; this is the second.
    screen = [s for s in informed_specs(truth, active, k) if s.label == SCREEN_THEN_INFORMED]
    result = run_replay_study(kg, sweep, specs=[*specs, *screen], seeds=seeds, epochs=EPOCHS, batch=batch,
                              top_k=[k], streams=[*streams, len(DEFAULT_SPECS) + 1])
    ratios = result.ratios(epochs=REFERENCE_EPOCHS, k=k, reference=REFERENCE)
    screen_once = ratios.pop(SCREEN_THEN_INFORMED)
    ratios.pop(REFERENCE)
    ratios = {lab: ratios[lab] for lab in labels if lab != REFERENCE}
    best = min(ratios, key=ratios.get)
    return {"edges": e, "passes": sweep.passes, "accuracy": round(sweep.accuracy(), 4), "k": k, "batch": batch,
            "ratios": {lab: json_ratio(r) for lab, r in ratios.items()}, "best_sampler": best,
            "ratio_best": json_ratio(ratios[best]), "ratio_intervals": ratio_seed_intervals(result, k, ratios),
            "screen_once_then_informed": json_ratio(screen_once), "seconds": round(time.perf_counter() - t0, 1)}


def _counted(r) -> float:
    return NOT_REACHED if r is None else r


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(rows: dict[str, dict], labels: list[str], default: str | None) -> dict:
    """Per sampler over the sweeps of ``rows`` (module docstring), and the bars' counts."""
    out = {"sweeps": len(rows), "not_reached_counts_as": round(NOT_REACHED, 4), "default_sampler": default}
    per = {}
    for lab in labels:
        values = {name: _counted(row["ratios"][lab]) for name, row in rows.items()}
        worst = max(values, key=values.get)
        entry = {"geometric_mean": round(_geometric_mean(list(values.values())), 4),
                 "median": round(statistics.median(values.values()), 4),
                 "worst": {"value": rows[worst]["ratios"][lab], "sweep": worst},
                 "best_on": sum(row["best_sampler"] == lab for row in rows.values()),
                 "not_reached": sum(row["ratios"][lab] is None for row in rows.values())}
        if default in labels:
            entry["relative_to_default"] = round(_geometric_mean(
                [values[name] / _counted(rows[name]["ratios"][default]) for name in rows]), 4)
        per[lab] = entry
    out["samplers"] = per
    # Each bar and whose ratio on a sweep it is judged on.
    bars = {"best": lambda row: row["best_sampler"]}
    if "thompson" in labels:
        bars["thompson"] = lambda row: "thompson"
    out["met"] = {bar: sum(_counted(row["ratios"][which(row)]) <= BARS[bar] for row in rows.values())
                  for bar, which in bars.items()}
    # The same counts read through each ratio's seed-bootstrap interval: a sweep whose whole
    # interval is under the bar meets it whatever the seeds' luck; one whose interval only
    # starts under it is not told apart from the bar by these seeds.
    if all(row.get("ratio_intervals") for row in rows.values()):
        out["met_by_interval"] = {bar: {
            "upper_end_under": sum(_counted(row["ratio_intervals"][which(row)][1]) <= BARS[bar] for row in rows.values()),
            "lower_end_under": sum(_counted(row["ratio_intervals"][which(row)][0]) <= BARS[bar] for row in rows.values()),
        } for bar, which in bars.items()}
    out["screen_once_then_informed_geometric_mean"] = round(_geometric_mean(
        [_counted(row["screen_once_then_informed"]) for row in rows.values()]), 4)
    return out


def _replay(item) -> tuple[str, dict]:
    """A worker process's job: load one sweep and its KG, and replay it (module-level, so a process can run it)."""
    from kgprobe.simulation.replay import sweep_graph
    from kgprobe.sweep import load_sweep

    name, source, graph, labels, seeds = item
    kg, sweep = sweep_graph(load_sweep(source), graph)
    return name, sweep_row(sweep, kg, labels=labels, seeds=seeds)


def _line(i: int, n: int, name: str, row: dict) -> str:
    from kgprobe.bench.efficiency import interval_text

    shown = ", ".join(f"{lab} {'never' if r is None else f'{r:.3f}'}{interval_text(row['ratio_intervals'], lab)}"
                      for lab, r in row["ratios"].items())
    screen = row["screen_once_then_informed"]
    return (f"[{i}/{n}] {name} ({row['edges']} edges × {row['passes']} passes, top-{row['k']}): {shown}; "
            f"best {row['best_sampler']}; screen once, then informed "
            f"{'never' if screen is None else f'{screen:.3f}'} ({row['seconds']} s)")


def handle(args) -> int:
    from kgprobe.bench.design import load_truth_sweeps
    from kgprobe.errors import InputError
    from kgprobe.simulation.coverage import run_defaults
    from kgprobe.simulation.study import DEFAULT_SPECS

    t0 = time.perf_counter()
    known = [spec.label for spec in DEFAULT_SPECS]
    labels = [lab.strip() for lab in args.samplers.split(",") if lab.strip()]
    unknown = [lab for lab in labels if lab not in known]
    if unknown:
        raise InputError(f"--samplers: {', '.join(map(repr, unknown))} is not one of the study's labels; choose "
                         f"from: {', '.join(known)} (comma-separated)")
    if not [lab for lab in labels if lab != REFERENCE]:
        raise InputError(f"--samplers: name at least one sampler besides {REFERENCE}, the reference every ratio "
                         "is taken against (e.g. --samplers margin-focus)")
    labels = [lab for lab in dict.fromkeys(labels) if lab != REFERENCE]
    for option, value, least in (("--seeds", args.seeds, 1), ("--jobs", args.jobs, 1),
                                 ("--min-passes", args.min_passes, 1), ("--min-edges", args.min_edges, 2)):
        if value < least:
            raise InputError(f"{option} must be at least {least} (got {value})")
    if args.first_seed < 0:
        raise InputError(f"--first-seed must be 0 or more (got {args.first_seed})")
    loaded = load_truth_sweeps(args.truth, args.graph)
    todo, skipped = {}, []
    for name, _, _, sweep, kg in loaded:
        if sweep.passes < args.min_passes or sweep.num_edges < args.min_edges:
            skipped.append(name)
        else:
            todo[name] = (kg, sweep)
    if not todo:
        raise InputError(f"no sweep has at least {args.min_passes} passes (--min-passes) and {args.min_edges} edges "
                         f"(--min-edges); skipped: {', '.join(skipped)}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(name, source, graph, labels, seeds) for name, source, graph, _, _ in loaded if name in todo]
    print(f"replaying {len(jobs)} sweeps ({len(skipped)} skipped), replay seeds {seeds.start}–{seeds.stop - 1}, "
          f"{args.jobs} at once", flush=True)
    rows = {}
    if args.jobs == 1:
        for i, (name, *_) in enumerate(jobs, 1):
            kg, sweep = todo[name]  # loaded and matched above
            rows[name] = row = sweep_row(sweep, kg, labels=labels, seeds=seeds)
            print(_line(i, len(jobs), name, row), flush=True)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # spawn: a forked worker would inherit the parent's BLAS threads and locks.
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_replay, job) for job in jobs]
            for i, future in enumerate(as_completed(futures), 1):
                name, row = future.result()
                rows[name] = row
                print(_line(i, len(jobs), name, row), flush=True)
    rows = {name: rows[name] for name in todo}  # the listing's order, whatever finished first
    default = run_defaults()["sampler"]
    out = {"bench": "samplers", "seeds": [seeds.start, seeds.stop - 1], "epochs": EPOCHS,
           "reference": f"brute-force top-k MSE at {REFERENCE_EPOCHS} epochs", "samplers": labels,
           "summary": summarize(rows, labels, default if default in labels else None),
           "skipped": skipped, "sweeps": rows, "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(out))
    return 0
