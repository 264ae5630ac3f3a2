"""``kgprobe bench efficiency``: the KGLens §2.4 study with fixed settings, and estimator coverage.

Graph: the embedded ``countries`` KG (3,246 active edges, 518 dead). True θ*: the
calibrated default generator (:mod:`kgprobe.simulation.theta`), correlated mode, one θ*
draw per seed. Batch 64, 5 epochs of queries per configuration, seeds 0–4.

Ratio (KGLens' headline): the queries a configuration needs to reach the top-600 MSE
that brute force reaches after 4.5 epochs, divided by the queries of those 4.5 epochs,
from seed-averaged curves (:func:`kgprobe.simulation.study.efficiency_ratio`). KGLens
reports 0.65 for Thompson sampling with propagation; ``inf`` means "not reached within
5 epochs". ``ratio_best`` is the smallest ratio over all configurations. The same study
is repeated with uncorrelated θ* (``uncorrelated_ratios``) to show what propagation
costs when errors do not cluster.

Coverage: 50 seeded runs of the ``focus`` sampler (10 % audit draws) for one brute-force
epoch of queries each; the share of runs whose 95 % interval for the KG accuracy
(:func:`kgprobe.metrics.kg_accuracy_estimate`) contains the true ``1 − mean θ*``.
``coverage`` is the audit mean with Wilson interval (what a run reports from its
recorded probes); ``coverage_difference_estimator`` scores the difference estimator,
which also needs the sampler's predictions at each round.
"""

from __future__ import annotations

import json
import math
import time


def register(subparsers) -> None:
    parser = subparsers.add_parser("efficiency", help="KGLens §2.4 sample-efficiency study + estimator coverage")
    parser.add_argument("--graph", default="countries", help="embedded KG name (default: countries)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--coverage-runs", type=int, default=50)
    parser.add_argument("--epochs", type=float, default=5.0, help="query budget per configuration, in epochs")
    parser.add_argument("--batch", type=int, default=64)
    parser.set_defaults(func=handle)


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
                               specs=specs, batch=args.batch, epochs=args.epochs, seeds=[seed]))
    return combine_results(parts), pkg


def _finite(x: float):
    return round(x, 4) if math.isfinite(x) else None


def handle(args) -> int:
    from kgprobe.errors import InputError
    from kgprobe.simulation.study import DEFAULT_SPECS, SamplerSpec, estimator_coverage
    from kgprobe.simulation.theta import theta_for_kg
    from kgprobe.sources.embedded import load_embedded_kg

    if args.seeds < 1 or args.coverage_runs < 1:
        raise InputError("--seeds and --coverage-runs must be >= 1")
    if args.epochs < 4.5:
        raise InputError("--epochs must be >= 4.5: the reference is brute force at 4.5 epochs")
    t0 = time.perf_counter()
    kg = load_embedded_kg(args.graph)
    seeds = range(args.seeds)
    result, pkg = _study(kg, DEFAULT_SPECS, seeds, "correlated", args)
    ratios = result.ratios(epochs=4.5, k=600)
    ratios200 = result.ratios(epochs=4.5, k=200)
    candidates = {lab: r for lab, r in ratios.items() if lab != "brute-force"}
    best = min(candidates, key=candidates.get)
    import numpy as np

    bf_target = float(np.interp(result.epoch_queries(4.5), result.queries, result.mean_curve("brute-force", 600)))
    print(f"graph {args.graph}: {result.num_active} active edges; brute-force top-600 MSE at 4.5 epochs "
          f"{bf_target:.4f}")
    for lab in ratios:
        print(f"  {lab:22s} ratio top-600 {ratios[lab]:.3f}   top-200 {ratios200[lab]:.3f}")

    uncorrelated_specs = [s for s in DEFAULT_SPECS if s.label in ("brute-force", "thompson", "thompson+prop",
                                                                     "pooled-thompson", "focus",
                                                                     "focus (no propagation)")]
    unc, _ = _study(kg, uncorrelated_specs, seeds, "none", args)
    unc_ratios = unc.ratios(epochs=4.5, k=600)
    for lab in unc_ratios:
        print(f"  uncorrelated θ*: {lab:22s} ratio top-600 {unc_ratios[lab]:.3f}")

    theta = theta_for_kg(kg, seed=0)
    cov_spec = SamplerSpec("focus", "focus", 1.0)
    cov = estimator_coverage(pkg.heads, pkg.tails, kg.active, theta, predicates=kg.predicate_of,
                             sampler=cov_spec, batch=args.batch, epochs=1.0, seeds=range(args.coverage_runs))
    print(f"coverage of the 95% audit interval: {cov['coverage']:.2f} over {cov['runs']} runs "
          f"(mean width {cov['mean_width']:.3f}); difference estimator {cov['coverage_difference']:.2f} "
          f"(mean width {cov['mean_width_difference']:.3f})")
    out = {
        "bench": "efficiency",
        "graph": args.graph,
        "active_edges": result.num_active,
        "seeds": args.seeds,
        "batch": args.batch,
        "epochs_run": args.epochs,
        "reference": "brute-force top-600 MSE at 4.5 epochs",
        "reference_mse": round(bf_target, 5),
        "ratio_best": _finite(ratios[best]),
        "best_sampler": best,
        "ratios": {lab: _finite(r) for lab, r in ratios.items()},
        "ratios_top200": {lab: _finite(r) for lab, r in ratios200.items()},
        "kglens_thompson_prop_ratio": _finite(ratios["thompson+prop"]),
        "uncorrelated_ratios": {lab: _finite(r) for lab, r in unc_ratios.items()},
        "coverage": round(cov["coverage"], 3),
        "coverage_runs": cov["runs"],
        "coverage_sampler": "focus (audit_fraction 0.1)",
        "coverage_budget_epochs": 1.0,
        "coverage_mean_ci_width": round(cov["mean_width"], 4),
        "coverage_truth": round(cov["truth"], 4),
        "coverage_difference_estimator": round(cov["coverage_difference"], 3),
        "coverage_difference_mean_ci_width": round(cov["mean_width_difference"], 4),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))
    return 0
