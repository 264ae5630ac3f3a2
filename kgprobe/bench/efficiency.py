"""``kgprobe bench efficiency``: the KGLens §2.4 study with fixed settings, and estimator coverage.

Graph: the embedded ``countries`` KG (3,246 active edges, 518 dead). True θ*: the
calibrated default generator (:mod:`kgprobe.simulation.theta`), correlated mode, one θ*
draw per seed. Batch 64, 5 epochs of queries per configuration, seeds 0–4.

Ratio (KGLens' headline): the queries a configuration needs to reach the top-600 MSE
that brute force reaches after 4.5 epochs, divided by the queries of those 4.5 epochs,
from seed-averaged curves (:func:`kgprobe.simulation.study.efficiency_ratio`). KGLens
reports 0.65 for Thompson sampling with propagation; ``inf`` means "not reached within
5 epochs". ``ratio_intervals``: each ratio's 95 % seed-bootstrap interval
(:func:`kgprobe.simulation.study.ratio_intervals`; null = "never"), how much of it is the
seeds' luck; two samplers whose intervals overlap widely are not told apart by this run
(more ``--seeds`` narrow it). ``ratio_best`` is the smallest ratio over all configurations. The same study
is repeated with uncorrelated θ* (``uncorrelated_ratios``) to show what propagation
costs when errors do not cluster.

Real answers (``--truth SWEEP``): the same study on a recorded sweep replayed
(:mod:`kgprobe.simulation.replay`), 20 replay seeds (``TRUTH_SEEDS``): truth θ_j = the share of wrong answers over the
sweep's K passes, each probe answered by one of the edge's recorded answers (without
replacement, then with replacement — counted in ``replacement_draws``). Only the sweep's
E edges are active (the rest of the KG stays as structure); top-k and batch scale with
E (k = round(600·E/3,246), batch round(64·E/3,246)), so a sampled sweep is judged like
a full one. ``default`` is the committed default-model sweep; any sweep file works: a
sweep of an embedded KG on its own, a sweep of a KG built with ``kgprobe build`` with
``--graph KG_FILE``. The KG is matched by the sweep's edge keys and KG content hash
(:func:`kgprobe.simulation.replay.sweep_graph`); a KG that differs, or a sweep of
another ``--method``, is exit 2 naming what differs. Beside the samplers it reports two
configurations told the truth, ``informed_ratios`` (:mod:`kgprobe.simulation.informed`):
``informed top-k`` probes only the true top-k, ``screen once, then informed`` answers
every edge once and then only the true top-k; references for how hard the sweep is, not
bounds.

Patterns not tuned on (plain mode, ``pattern_ratios``): graph-clustered weak regions,
independent U-shaped errors and errors set by predicate alone
(:mod:`kgprobe.simulation.patterns`), for the samplers the bars are about, and beside them
the two informed references on the same θ* draws (``pattern_informed_ratios``): what a
configuration needs that answers every edge once and then knows the top k, next to
what the samplers need to tell it apart.

Margins on simulated θ* (``--margin-donors``, default the committed default-model
sweep): a ZP-LKE answer carries its margin (gold log-prob minus the best wrong one), and
``margin-focus`` and ``thompson`` read it; the simulated answers borrow theirs from a
recorded edge with the nearest error rate (:mod:`kgprobe.simulation.margins`). Their verdicts are the plain
Bernoulli oracle's, stream for stream, so every sampler that ignores margins has the
figures it has with ``--margin-donors none``; ``margin-focus`` is added to the
uncorrelated and pattern studies (after the references, so no other stream moves), and
``thompson``, which reads margins too (``margins=True``), reads them in its own place.

Coverage: 50 seeded runs of the ``focus`` sampler (10 % design draws) for one brute-force
epoch of queries each; the share of runs whose 95 % interval for the KG accuracy
(:func:`kgprobe.metrics.kg_accuracy_estimate`) contains the true ``1 − mean θ*``.
``coverage`` is the design mean with Wilson interval (what a run reports from its
recorded probes); ``coverage_difference_estimator`` scores the difference estimator,
which also needs the sampler's predictions at each round.
"""

from __future__ import annotations

import json
import math
import time


def register(subparsers) -> None:
    parser = subparsers.add_parser("efficiency", help="KGLens §2.4 sample-efficiency study + estimator coverage")
    parser.add_argument("--graph", default=None, metavar="KG",
                        help="an embedded KG name or a KG file (`kgprobe build`); default: countries, or with "
                        "--truth the sweep's own KG (a built KG's sweep needs its KG file here)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="study seeds per configuration (default: 20 with --truth, 5 on the simulated graph); "
                        "every random stream hangs on the seed, and a replayed ratio from 5 seeds runs about "
                        "0.03 apart from seed set to seed set and low on average (docs/samplers.md, 'How much of "
                        "a ratio is luck'); 3 or more give ratio_intervals")
    parser.add_argument("--coverage-runs", type=int, default=None,
                        help="replays of the coverage study (default: 1000 with --truth, where a coverage of "
                        "0.93 or more is judged and 200 replays would leave a standard error of 1.5 points; "
                        "50 on the simulated graph)")
    parser.add_argument("--epochs", type=float, default=5.0, help="query budget per configuration, in epochs")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--truth", metavar="SWEEP",
                        help="judge the samplers on a recorded sweep's real answers: 'default' (the committed "
                        "default-model sweep), another committed name, or a sweep file")
    parser.add_argument("--method", default="zp-lke", help="the probe method the --truth sweep must use "
                        "(default zp-lke)")
    parser.add_argument("--no-patterns", dest="patterns", action="store_false",
                        help="skip the study on the error patterns the samplers were not tuned on")
    parser.add_argument("--pattern-seeds", type=int, default=2,
                        help="seeds (θ* draws) per error pattern not tuned on (default 2)")
    parser.add_argument("--margin-donors", default="default", metavar="SWEEP",
                        help="on simulated θ*, each answer carries a margin borrowed from a recorded edge of this "
                        "sweep with the nearest error rate, as a ZP-LKE probe's answer does "
                        "(kgprobe.simulation.margins); 'none': verdicts only, so a margin reader picks as focus "
                        "(default: the committed default-model sweep)")
    parser.set_defaults(func=handle)


#: Replays of the coverage study with ``--truth``: a coverage near 0.95 then has a
#: standard error of 0.7 points, small enough to judge it against 0.93.
TRUTH_COVERAGE_RUNS = 1000
#: Study seeds with ``--truth``. A replayed sweep's ratio rests on rare seeds in which a
#: top edge stays unasked for long (its squared error dwarfs the rest), so 5 seeds give a
#: figure that is low on average and about 0.03 apart from one seed set to the next; 20
#: halve that (100 seeds of the default sweep, docs/samplers.md).
TRUTH_SEEDS = 20
#: Study seeds on the simulated graph, where every seed also draws its own θ*.
SIMULATED_SEEDS = 5
#: Runs of the coverage study on the simulated graph (its truth is exact, not replayed).
SIMULATED_COVERAGE_RUNS = 50

#: The samplers every study reports on (labels of DEFAULT_SPECS); the bars concern
#: ``thompson`` and the best of them.
BAR_LABELS = ("brute-force", "kglens-thompson", "kglens-thompson+prop", "thompson", "pooled-thompson", "focus",
              "focus (no propagation)")


def _margin_oracle(theta, args):
    """The simulated studies' oracle: verdicts with donor margins (``--margin-donors``), or None
    for the plain Bernoulli oracle. Its verdicts are the Bernoulli oracle's, stream for stream."""
    if args.margin_donor_sweep is None:
        return None
    from kgprobe.simulation.margins import MarginDonorOracle

    return lambda seed: MarginDonorOracle(theta, args.margin_donor_sweep, seed)


def _margin_readers(specs, args) -> list:
    """The specs whose sampler reads margins, when the simulated answers carry them (else none)."""
    if args.margin_donor_sweep is None:
        return []
    from kgprobe.sampling import SAMPLERS

    return [s for s in specs if SAMPLERS[s.sampler].uses_margins]


def _load_margin_donors(args) -> None:
    from kgprobe.errors import InputError
    from kgprobe.sweep import load_sweep

    args.margin_donor_sweep = None
    if args.margin_donors in (None, "none"):
        return
    sweep = load_sweep(args.margin_donors)
    if sweep.margin() is None:
        raise InputError(f"--margin-donors {args.margin_donors}: the sweep has no log-probs to take margins from; "
                         "use a ZP-LKE sweep recorded with log-probs, or 'none'")
    args.margin_donor_sweep = sweep


def _study(kg, specs, seeds, correlation, args):
    from kgprobe.kg.parameterized import ParameterizedKG
    from kgprobe.simulation.study import combine_results, run_study
    from kgprobe.simulation.theta import ThetaSettings, generate_theta

    pkg = ParameterizedKG.from_kg(kg)
    parts = []
    for seed in seeds:
        theta = generate_theta(pkg.heads, pkg.tails, kg.predicate_of, kg.active,
                               ThetaSettings(correlation=correlation), seed=seed)
        parts.append(run_study(pkg.heads, pkg.tails, kg.active, theta, predicates=kg.predicate_of,
                               specs=specs, batch=args.batch, epochs=args.epochs, seeds=[seed],
                               oracle=_margin_oracle(theta, args)))
    return combine_results(parts), pkg


def json_ratio(x: float):
    """A ratio as the JSON lines give it: four decimals, ``None`` where it was never reached."""
    return round(x, 4) if math.isfinite(x) else None


def ratio_seed_intervals(result, k: int, ratios: dict) -> dict | None:
    """Seed-bootstrap 95 % intervals of the ratios in ``ratios`` (JSON-ready), or None under 3 seeds."""
    from kgprobe.simulation.study import ratio_intervals

    if len(result.seeds) < 3:
        return None
    return {lab: [json_ratio(lo), json_ratio(hi)] for lab, (lo, hi) in ratio_intervals(result, k=k).items()
            if lab in ratios}


def interval_text(intervals: dict | None, label: str) -> str:
    if not intervals:
        return ""
    lo, hi = (("never" if x is None else f"{x:.3f}") for x in intervals[label])
    return f" [{lo}, {hi}]"


def _best(ratios: dict) -> str:
    candidates = {lab: r for lab, r in ratios.items() if lab != "brute-force"}
    return min(candidates, key=candidates.get)


def check_truth(sweep, method: str) -> None:
    """The sweep must be of the study's probe method; InputError (exit 2) otherwise.

    Its KG is matched by :func:`kgprobe.simulation.replay.sweep_graph` (edge keys and
    content hash)."""
    from kgprobe.errors import InputError

    if sweep.method != method:
        raise InputError(f"--truth: the sweep was recorded with the method {sweep.method!r}, but this study is "
                         f"about {method!r}; pass --method {sweep.method} or a sweep recorded with {method!r}")


def handle_truth(args) -> int:
    """The KGLens study on a replayed real sweep (module docstring)."""
    from kgprobe.errors import InputError
    from kgprobe.simulation.replay import run_replay_study, scaled, sweep_graph
    from kgprobe.sweep import load_sweep

    t0 = time.perf_counter()
    sweep = load_sweep(args.truth)
    check_truth(sweep, args.method)
    try:
        kg, sweep = sweep_graph(sweep, args.graph)
    except InputError as exc:
        raise InputError(f"--truth {args.truth}: {exc}") from None
    e = sweep.num_edges
    k600, k200 = scaled(600, e), scaled(200, e)
    batch = scaled(args.batch, e)
    if e < 2:
        raise InputError(f"--truth: the sweep has {e} edge(s); a study needs at least 2")
    from kgprobe.simulation.informed import informed_specs
    from kgprobe.simulation.replay import replay_truth
    from kgprobe.simulation.study import DEFAULT_SPECS

    _, active, truth = replay_truth(kg, sweep)
    # Appended after the samplers, so their curves (and random streams) are unchanged.
    references = informed_specs(truth, active, k600)
    result = run_replay_study(kg, sweep, specs=[*DEFAULT_SPECS, *references], seeds=range(args.seeds),
                              epochs=args.epochs, batch=batch, top_k=sorted({k200, k600}))
    ratios = result.ratios(epochs=4.5, k=k600)
    informed = {spec.label: ratios.pop(spec.label) for spec in references}
    ratios200 = {lab: r for lab, r in result.ratios(epochs=4.5, k=k200).items() if lab not in informed}
    intervals = ratio_seed_intervals(result, k600, ratios)
    best = _best(ratios)
    theta = sweep.theta()
    print(f"truth: {sweep.describe()}")
    print(f"replay study: {e} active edges, batch {batch}, top-k {k600} (and {k200}), {args.seeds} replay seeds, "
          f"{args.epochs} epochs")
    for lab in ratios:
        print(f"  {lab:24s} ratio top-{k600} {ratios[lab]:.3f}{interval_text(intervals, lab)}   "
              f"top-{k200} {ratios200[lab]:.3f}   draws past K {result.replacement_draws.get(lab, 0)}")
    for lab, r in informed.items():
        print(f"  {lab:24s} ratio top-{k600} {r:.3f}   (told θ*: a reference, not a sampler)")
    total_draws = int(result.queries[-1]) * len(result.seeds) * len(ratios)
    draws = {lab: n for lab, n in result.replacement_draws.items() if lab not in informed}
    replacement = int(sum(draws.values()))
    out = {
        "bench": "efficiency",
        "truth": str(args.truth),
        "graph": sweep.kg,
        "method": sweep.method,
        "model": sweep.model,
        "passes": sweep.passes,
        "edges": e,
        "accuracy": round(sweep.accuracy(), 4),
        "always_right": round(float((theta == 0).mean()), 4),
        "always_wrong": round(float((theta == 1).mean()), 4),
        "k": k600,
        "k200": k200,
        "batch": batch,
        "seeds": args.seeds,
        "epochs_run": args.epochs,
        "reference": f"brute-force top-{k600} MSE at 4.5 epochs",
        "ratio_best": json_ratio(ratios[best]),
        "best_sampler": best,
        "ratios": {lab: json_ratio(r) for lab, r in ratios.items()},
        "ratios_top200": {lab: json_ratio(r) for lab, r in ratios200.items()},
        "ratio_intervals": intervals,
        # Samplers told θ* (kgprobe.simulation.informed): how far the best sampler is from
        # screening every edge once and then knowing the top k (references, not bounds).
        "informed_ratios": {lab: json_ratio(r) for lab, r in informed.items()},
        "replacement_draws": replacement,
        "replacement_share": round(replacement / total_draws, 4) if total_draws else 0.0,
        "replacement_draws_by_sampler": draws,
    }
    # How often the run's 95 % intervals (KG and per predicate) hold this sweep's
    # truth at 256 queries with the run defaults (kgprobe.simulation.coverage).
    from kgprobe.simulation.coverage import efficiency_fields

    out.update(efficiency_fields(sweep, kg=kg, runs=args.coverage_runs))
    cov = out["coverage_study"]
    print(f"run defaults, {cov['budget']} queries, {cov['runs']} replays: KG interval coverage {out['coverage']:.3f} "
          f"(standard error {math.sqrt(out['coverage'] * (1 - out['coverage']) / cov['runs']):.3f}), half-width "
          f"{out['ci_halfwidth']:.4f} (simple random sampling {out['srs_halfwidth']:.4f}), probes on weak edges "
          f"{out['weak_share']:.3f}")
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))
    return 0


def _pattern_ratios(kg, pkg, seeds, args, *, k: int = 600) -> tuple[dict, dict]:
    """Ratios (top-``k``) of the bar samplers on each error pattern the samplers were not tuned on,
    and of the two informed references on the same θ* draws (told θ*: references, not samplers)."""
    from kgprobe.simulation.informed import informed_specs
    from kgprobe.simulation.patterns import PATTERNS, pattern_theta
    from kgprobe.simulation.study import DEFAULT_SPECS, combine_results, run_study

    specs = [s for s in DEFAULT_SPECS if s.label in ("brute-force", "thompson", "focus", "pooled-thompson",
                                                     "kglens-thompson+prop")]
    # After the references, so the samplers' and the references' random streams are unchanged
    # (thompson, which reads margins too, keeps its place among the samplers).
    readers = [s for s in _margin_readers(DEFAULT_SPECS, args) if s not in specs]
    out, informed = {}, {}
    for pattern in PATTERNS:
        parts = []
        for seed in seeds:
            theta = pattern_theta(pattern, pkg.heads, pkg.tails, kg.predicate_of, kg.active, seed=seed)
            # Appended after the samplers, so their curves (and random streams) are unchanged.
            references = informed_specs(theta, kg.active, k)
            parts.append(run_study(pkg.heads, pkg.tails, kg.active, theta, predicates=kg.predicate_of,
                                   specs=[*specs, *references, *readers], batch=args.batch, epochs=args.epochs,
                                   seeds=[seed], top_k=(k,), oracle=_margin_oracle(theta, args)))
        ratios = combine_results(parts).ratios(epochs=4.5, k=k)
        told = {spec.label: ratios.pop(spec.label) for spec in references}
        for lab, r in ratios.items():
            print(f"  pattern {pattern:10s}: {lab:26s} ratio top-{k} {r:.3f}")
        for lab, r in told.items():
            print(f"  pattern {pattern:10s}: {lab:26s} ratio top-{k} {r:.3f}   (told θ*: a reference, not a sampler)")
        out[pattern] = {lab: json_ratio(r) for lab, r in ratios.items()}
        informed[pattern] = {lab: json_ratio(r) for lab, r in told.items()}
    return out, informed


def handle(args) -> int:
    from kgprobe.errors import InputError

    if args.seeds is None:
        args.seeds = TRUTH_SEEDS if args.truth else SIMULATED_SEEDS
    if args.coverage_runs is None:
        args.coverage_runs = TRUTH_COVERAGE_RUNS if args.truth else SIMULATED_COVERAGE_RUNS
    elif args.coverage_runs < 1:
        raise InputError(f"--coverage-runs must be >= 1, got {args.coverage_runs}")
    if args.truth:
        if args.seeds < 1 or args.epochs < 4.5:
            raise InputError("--seeds must be >= 1 and --epochs >= 4.5 (the reference is brute force at 4.5 epochs)")
        return handle_truth(args)
    from kgprobe.simulation.study import DEFAULT_SPECS, SamplerSpec, estimator_coverage
    from kgprobe.api import resolve_kg
    from kgprobe.simulation.theta import theta_for_kg

    if args.seeds < 1:
        raise InputError("--seeds must be >= 1")
    if args.epochs < 4.5:
        raise InputError("--epochs must be >= 4.5: the reference is brute force at 4.5 epochs")
    t0 = time.perf_counter()
    kg = resolve_kg(args.graph or "countries")
    seeds = range(args.seeds)
    _load_margin_donors(args)
    if args.margin_donor_sweep is not None:
        print(f"simulated answers carry margins borrowed from {args.margin_donor_sweep.describe()} "
              "(kgprobe.simulation.margins; --margin-donors none: verdicts only)")
    result, pkg = _study(kg, DEFAULT_SPECS, seeds, "correlated", args)
    ratios = result.ratios(epochs=4.5, k=600)
    ratios200 = result.ratios(epochs=4.5, k=200)
    intervals = ratio_seed_intervals(result, 600, ratios)
    best = _best(ratios)
    import numpy as np

    bf_target = float(np.interp(result.epoch_queries(4.5), result.queries, result.mean_curve("brute-force", 600)))
    print(f"graph {kg.name}: {result.num_active} active edges; brute-force top-600 MSE at 4.5 epochs "
          f"{bf_target:.4f}")
    for lab in ratios:
        print(f"  {lab:22s} ratio top-600 {ratios[lab]:.3f}{interval_text(intervals, lab)}   "
              f"top-200 {ratios200[lab]:.3f}")

    readers = _margin_readers(DEFAULT_SPECS, args)
    uncorrelated_specs = [s for s in DEFAULT_SPECS if s.label in BAR_LABELS or s in readers]
    unc, _ = _study(kg, uncorrelated_specs, seeds, "none", args)
    unc_ratios = unc.ratios(epochs=4.5, k=600)
    unc_best = _best(unc_ratios)
    for lab in unc_ratios:
        print(f"  uncorrelated θ*: {lab:22s} ratio top-600 {unc_ratios[lab]:.3f}")
    patterns, pattern_informed = (_pattern_ratios(kg, pkg, range(args.pattern_seeds), args) if args.patterns
                                  else ({}, {}))

    theta = theta_for_kg(kg, seed=0)
    cov_spec = SamplerSpec("focus", "focus", 1.0)
    cov = estimator_coverage(pkg.heads, pkg.tails, kg.active, theta, predicates=kg.predicate_of,
                             sampler=cov_spec, batch=args.batch, epochs=1.0, seeds=range(args.coverage_runs))
    print(f"coverage of the 95% design interval: {cov['coverage']:.2f} over {cov['runs']} runs "
          f"(mean width {cov['mean_width']:.3f}); difference estimator {cov['coverage_difference']:.2f} "
          f"(mean width {cov['mean_width_difference']:.3f})")
    out = {
        "bench": "efficiency",
        "graph": kg.name,
        "active_edges": result.num_active,
        "seeds": args.seeds,
        "batch": args.batch,
        "epochs_run": args.epochs,
        "reference": "brute-force top-600 MSE at 4.5 epochs",
        "reference_mse": round(bf_target, 5),
        "ratio_best": json_ratio(ratios[best]),
        "best_sampler": best,
        "ratios": {lab: json_ratio(r) for lab, r in ratios.items()},
        "ratios_top200": {lab: json_ratio(r) for lab, r in ratios200.items()},
        "ratio_intervals": intervals,
        "kglens_thompson_prop_ratio": json_ratio(ratios["kglens-thompson+prop"]),
        "thompson_ratio": json_ratio(ratios["thompson"]),
        "uncorrelated_ratios": {lab: json_ratio(r) for lab, r in unc_ratios.items()},
        "uncorrelated_ratio_best": json_ratio(unc_ratios[unc_best]),
        "uncorrelated_best_sampler": unc_best,
        "pattern_ratios": patterns,
        # The same θ* draws probed by the two configurations told θ* (kgprobe.simulation.informed).
        "pattern_informed_ratios": pattern_informed,
        "pattern_seeds": args.pattern_seeds if args.patterns else 0,
        # Where the simulated answers' margins came from (null: verdicts only).
        "margin_donors": args.margin_donors if args.margin_donor_sweep is not None else None,
        "coverage": round(cov["coverage"], 3),
        "coverage_runs": cov["runs"],
        "coverage_sampler": "focus (design_fraction 0.1)",
        "coverage_budget_epochs": 1.0,
        "coverage_mean_ci_width": round(cov["mean_width"], 4),
        "coverage_truth": round(cov["truth"], 4),
        "coverage_difference_estimator": round(cov["coverage_difference"], 3),
        "coverage_difference_mean_ci_width": round(cov["mean_width_difference"], 4),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))
    return 0
