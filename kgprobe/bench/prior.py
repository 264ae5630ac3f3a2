"""``kgprobe bench prior``: how well a prior from other models predicts a held-out model's KG accuracy.

Leave-one-model-out over the committed recorded sweeps (``kgprobe.sweep``; or the sweeps
given with ``--truth``): for each sweep in turn, the item-response prior
(:mod:`kgprobe.prior`) is fitted from the *other* sweeps on the same KG, and ``--runs``
seeded replays of the held-out model (its recorded answers as the oracle, the sweep's
edges as the KG's active set; :mod:`kgprobe.simulation.coverage`) spend ``--budget``
queries each with the run's default sampler and audit fraction. Scored against the
held-out sweep's truth (1 − mean θ over its edges), pooled over held-out models and runs:

* ``abs_error_256`` — mean absolute error of the reported KG accuracy (the design-based,
  model-assisted estimate of :mod:`kgprobe.estimators`, predictions from the prior);
* ``within_3pt`` — share of runs within 3 points of the truth;
* ``coverage`` — share of runs whose 95 % interval holds the truth;

next to the same replays without a prior (``no_prior``: same seeds), per held-out model
(with ``model_mean_with_prior``: the prior-based predictions' own mean after the run, a
model-based number without an interval, as tinyBenchmarks reports),
and the Bernoulli floor: with exact predictions a design-unbiased estimate from ``M``
design probes still has variance ``mean θ(1 − θ) / M``, so ``within_3pt`` cannot
reliably reach 0.9 unless ``1.645 · sqrt(mean θ(1 − θ) / M) ≤ 0.03``
(``floor_within_3pt`` is that normal-approximation bound per model).
"""

from __future__ import annotations

import json
import math
import time


def register(subparsers) -> None:
    parser = subparsers.add_parser("prior", help="leave-one-model-out accuracy of the item-response prior")
    parser.add_argument("--truth", nargs="+", default=None, metavar="SWEEP",
                        help="recorded sweeps (names or paths) on one KG; default: every committed sweep")
    parser.add_argument("--runs", type=int, default=200, help="seeded replays per held-out model")
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--batch", type=int, default=None, help="edges per round (default: the run default)")
    parser.add_argument("--sampler", default=None, help="sampler (default: the run default)")
    parser.add_argument("--audit-fraction", type=float, default=None, help="design share (default: the run default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=handle)


def _floor_within(var_per_probe: float, m: float, tol: float = 0.03) -> float:
    """P(|N(0, v/m)| ≤ tol): the best share within ``tol`` a design-unbiased estimate can have."""
    if m <= 0:
        return 0.0
    sd = math.sqrt(var_per_probe / m)
    return math.erf(tol / (sd * math.sqrt(2))) if sd > 0 else 1.0


def handle(args) -> int:
    from kgprobe.commands.run import DEFAULTS
    from kgprobe.errors import InputError
    from kgprobe.prior import fit_prior, sweep_answers
    from kgprobe.simulation.coverage import replay_coverage
    from kgprobe.sources.embedded import load_embedded_kg
    from kgprobe.sweep import load_sweep, packaged_sweeps

    import numpy as np

    if args.runs < 1 or args.budget < 1:
        raise InputError("--runs and --budget must be >= 1")
    t0 = time.perf_counter()
    names = args.truth or sorted(packaged_sweeps())
    if len(names) < 2:
        raise InputError(f"leave-one-model-out needs at least two sweeps on one KG, got {len(names)}")
    sweeps = [load_sweep(n) for n in names]
    kgs = {s.kg for s in sweeps}
    if len(kgs) != 1:
        raise InputError(f"the sweeps must share one KG, got {', '.join(sorted(kgs))}")
    kg = load_embedded_kg(sweeps[0].kg)
    sampler = args.sampler or DEFAULTS["sampler"]
    fraction = DEFAULTS["audit_fraction"] if args.audit_fraction is None else args.audit_fraction
    batch = args.batch or DEFAULTS["batch_size"]


    per_model = {}
    errors, within, covered, base_err, base_within, base_cov = [], [], [], [], [], []
    for i, (name, sw) in enumerate(zip(names, sweeps)):
        others = [sweep_answers(s, n) for j, (n, s) in enumerate(zip(names, sweeps)) if j != i]
        prior = fit_prior(kg, others)
        common = dict(sampler=sampler, audit_fraction=fraction, budget=args.budget, batch=batch, runs=args.runs,
                      seed=args.seed, kg=kg, tilt=DEFAULTS.get("design_tilt", 0.0),
                      propagation_weight=DEFAULTS["propagation_weight"])
        with_prior = replay_coverage(sw, item_prior=prior, **common)
        without = replay_coverage(sw, **common)
        hd, nd = with_prior["ht-difference"], without["ht-difference"]
        m = args.budget * fraction
        per_model[name] = {
            "truth": with_prior["truth"],
            "shared_edges": prior.shared_edges,
            "abs_error": hd["abs_error"], "within_3pt": hd["within_3pt"], "coverage": hd["coverage"],
            "ci_halfwidth": hd["ci_halfwidth"],
            "no_prior": {k: nd[k] for k in ("abs_error", "within_3pt", "coverage", "ci_halfwidth")},
            "model_mean_with_prior": with_prior["model-mean"],
            "bernoulli_variance": with_prior["bernoulli_variance"],
            "floor_within_3pt": round(_floor_within(with_prior["bernoulli_variance"], m), 3),
        }
        print(f"held out {name}: truth {with_prior['truth']:.3f}; with prior |err| {hd['abs_error']:.4f}, "
              f"within 3 pt {hd['within_3pt']:.2f}, coverage {hd['coverage']:.2f}, half-width "
              f"{hd['ci_halfwidth']:.4f}; without prior |err| {nd['abs_error']:.4f}, within 3 pt "
              f"{nd['within_3pt']:.2f}, coverage {nd['coverage']:.2f}")
        errors.append(hd["abs_error"]); within.append(hd["within_3pt"]); covered.append(hd["coverage"])
        base_err.append(nd["abs_error"]); base_within.append(nd["within_3pt"]); base_cov.append(nd["coverage"])
    out = {
        "bench": "prior",
        "sweeps": names,
        "runs_per_model": args.runs,
        "budget": args.budget,
        "sampler": sampler,
        "audit_fraction": fraction,
        "batch": batch,
        "estimator": "ht-difference (design-based, predictions from the item-response prior)",
        "abs_error_256" if args.budget == 256 else f"abs_error_{args.budget}": round(float(np.mean(errors)), 4),
        "within_3pt": round(float(np.mean(within)), 3),
        "coverage": round(float(np.mean(covered)), 3),
        "no_prior": {"abs_error": round(float(np.mean(base_err)), 4), "within_3pt": round(float(np.mean(base_within)), 3),
                     "coverage": round(float(np.mean(base_cov)), 3)},
        "per_model": per_model,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))
    return 0
