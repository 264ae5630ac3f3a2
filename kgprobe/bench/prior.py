"""``kgprobe bench prior``: how well a prior from other models predicts a held-out model's KG accuracy.

Leave-one-model-out over the committed recorded sweeps (``kgprobe.sweep``; or the sweeps
given with ``--truth``): for each sweep in turn, the item-response prior
(:mod:`kgprobe.prior`) is fitted from the *other* sweeps on the same KG, and ``--runs``
seeded replays of the held-out model (its recorded answers as the oracle, the sweep's
edges as the KG's active set; :mod:`kgprobe.simulation.coverage`) spend ``--budget``
queries each with the run's default sampler and design fraction. Scored against the
held-out sweep's truth (1 − mean θ over its edges), pooled over held-out models and runs:

* ``abs_error_256`` — mean absolute error of the reported KG accuracy (the design-based,
  model-assisted estimate of :mod:`kgprobe.estimators`, predictions and the prior-weighted
  design from the prior, at the run's default ``prior_design`` share times the sources'
  agreement, :meth:`kgprobe.prior.ItemPrior.design_share`; per model ``source_agreement``
  and ``prior_design_share``);
* ``within_3pt`` — share of runs within 3 points of the truth;
* ``coverage`` — share of runs whose 95 % interval holds the truth;

next to the same replays with the prior but a uniform design (``uniform_design``) and
without a prior (``no_prior``), all on the same seeds. Per held-out model also
``model_mean_with_prior`` (the prior-based predictions' own mean after the run, a
model-based number without an interval, as tinyBenchmarks reports),
``prior_weight`` (the weight the prior's predictions had against the run's own at the
end, :meth:`kgprobe.prior.ItemPrior.stacked`, mean over runs) and
``floor_within_3pt``: what a design-unbiased estimate could reach with *exact*
predictions (:func:`design_floors`): each probe's Bernoulli noise is left, so a uniform
design cannot beat ``mean θ(1 − θ) / M``, while a design that draws the edges with the
larger spread more often can.

``split_half`` asks how far a *sharp* prior gets: for each sweep, the prior is fitted
from the first half of its own passes and the replays score against the second half —
the model's earlier run as the prior, the best case of learning from earlier runs.
"""

from __future__ import annotations

import json
import math
import time


def register(subparsers) -> None:
    parser = subparsers.add_parser("prior", help="leave-one-model-out accuracy of the item-response prior")
    parser.add_argument("--truth", nargs="+", default=None, metavar="SWEEP",
                        help="recorded sweeps (names or paths) on one KG; default: every committed sweep")
    parser.add_argument("--graph", default=None, metavar="KG",
                        help="the KG the sweeps were recorded on: a KG file (`kgprobe build`) or an embedded KG "
                        "name; default: the sweeps' own KG, which must be embedded")
    parser.add_argument("--runs", type=int, default=200, help="seeded replays per held-out model")
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--batch", type=int, default=None, help="edges per round (default: the run default)")
    parser.add_argument("--sampler", default=None, help="sampler (default: the run default)")
    parser.add_argument("--design-fraction", type=float, default=None, help="design share (default: the run default)")
    parser.add_argument("--prior-design", type=float, default=None, metavar="SHARE",
                        help="share of the design that follows the prior (default: the run default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=handle)


def _floor_within(var_per_probe: float, m: float, tol: float = 0.03) -> float:
    """P(|N(0, v/m)| ≤ tol): the share within ``tol`` of a design-unbiased estimate of variance v/m."""
    if m <= 0:
        return 0.0
    sd = math.sqrt(var_per_probe / m)
    return math.erf(tol / (sd * math.sqrt(2))) if sd > 0 else 1.0


def design_floors(theta, m: float, share: float) -> dict:
    """``within_3pt`` of a design-unbiased estimate from ``m`` design draws with *exact* predictions.

    Exact predictions leave only each probe's Bernoulli noise, ``v_j = θ_j(1 − θ_j)``; one
    draw with probabilities ``π_j`` (summing to 1) has variance ``Σ_j v_j / (N² π_j)``:

    * ``uniform``: ``π_j = 1/N``, variance ``mean v`` — the best a uniform design can do;
    * ``prior_design``: the prior-weighted design of a run (share λ = ``share``) built
      from the exact spreads ``sqrt(v_j)``;
    * ``neyman``: ``π_j ∝ sqrt(v_j)`` (λ = 1), variance ``(mean sqrt v)²`` — no design does better.
    """
    import numpy as np

    v = np.asarray(theta, dtype=np.float64)
    v = v * (1.0 - v)
    n = v.size
    sd = np.sqrt(v)
    out = {"uniform": _floor_within(float(v.mean()), m), "neyman": _floor_within(float(sd.mean()) ** 2, m)}
    if sd.sum() > 0:
        pi = (1.0 - share) / n + share * sd / sd.sum()
        out["prior_design"] = _floor_within(float(np.sum(v / (n * n * pi))), m)
    else:
        out["prior_design"] = 1.0
    return {k: round(val, 3) for k, val in out.items()}


def _split_halves(sweep):
    """(first half, second half) of a sweep's passes: the same model's earlier answers as a prior."""
    import dataclasses

    from kgprobe.sweep import pass_slice

    half = sweep.passes // 2
    return tuple(dataclasses.replace(pass_slice(sweep, lo, hi), gold_logprob=None, best_wrong_logprob=None)
                 for lo, hi in ((0, half), (half, sweep.passes)))


_KEYS = ("abs_error", "within_3pt", "coverage", "ci_halfwidth", "srs_halfwidth", "design_effect")


def _scores(result: dict) -> dict:
    return {k: result["ht-difference"][k] for k in _KEYS}


def _pooled(rows: list[dict]) -> dict:
    import numpy as np

    out = {}
    for k in _KEYS:
        # A truth of 0 or 1 has no SRS half-width and so no design effect: left out of the mean.
        values = [r[k] for r in rows if r[k] is not None]
        digits = 4 if k in ("abs_error", "ci_halfwidth", "srs_halfwidth") else 3
        out[k] = round(float(np.mean(values)), digits) if values else None
    return out


def handle(args) -> int:
    from kgprobe.settings import RUN_DEFAULTS as DEFAULTS
    from kgprobe.errors import InputError
    from kgprobe.prior import fit_prior
    from kgprobe.prior_sources import protocol_notes, sweep_answers
    from kgprobe.simulation.coverage import replay_coverage
    from kgprobe.simulation.replay import sweep_graph, sweep_on_kg
    from kgprobe.sweep import load_sweep, packaged_sweeps

    if args.runs < 1 or args.budget < 1:
        raise InputError("--runs and --budget must be >= 1")
    t0 = time.perf_counter()
    names = args.truth or sorted(packaged_sweeps())
    if len(names) < 2:
        raise InputError(f"leave-one-model-out needs at least two sweeps on one KG, got {len(names)}")
    sweeps = [load_sweep(n) for n in names]
    kgs = {s.kg for s in sweeps}
    if len(kgs) != 1 and args.graph is None:
        raise InputError(f"the sweeps must share one KG, got {', '.join(sorted(kgs))}")
    try:
        kg, first = sweep_graph(sweeps[0], args.graph)
    except InputError as exc:
        raise InputError(f"--truth {names[0]}: {exc}") from None
    # every sweep on the one KG, by its edge keys: the prior and the replays index the KG's edges
    on_kg = [first]
    for name, sw in zip(names[1:], sweeps[1:]):
        try:
            on_kg.append(sweep_on_kg(kg, sw))
        except InputError as exc:
            raise InputError(f"--truth {name}: {exc}") from None
    sweeps = on_kg
    sampler = args.sampler or DEFAULTS["sampler"]
    fraction = DEFAULTS["design_fraction"] if args.design_fraction is None else args.design_fraction
    batch = args.batch or DEFAULTS["batch_size"]
    design = DEFAULTS["prior_design"] if args.prior_design is None else args.prior_design
    common = dict(sampler=sampler, design_fraction=fraction, budget=args.budget, batch=batch, runs=args.runs,
                  seed=args.seed, kg=kg, tilt=DEFAULTS.get("design_tilt", 0.0), design=DEFAULTS["design"],
                  propagation_weight=DEFAULTS["propagation_weight"])
    m = args.budget * fraction

    per_model = {}
    loo, loo_uniform, base, split, split_uniform = [], [], [], [], []
    for i, (name, sw) in enumerate(zip(names, sweeps)):
        others = [sweep_answers(s, n) for j, (n, s) in enumerate(zip(names, sweeps)) if j != i]
        prior = fit_prior(kg, others)
        # Held-out sweeps rendered otherwise than their sources (the paper's examples
        # against balanced ones) show what such a prior gives, but say so.
        notes = protocol_notes(others, sw.method, sw.probe_options)
        with_prior = replay_coverage(sw, item_prior=prior, prior_design=design, **common)
        uniform = replay_coverage(sw, item_prior=prior, prior_design=0.0, **common)
        without = replay_coverage(sw, **common)
        hd, ud, nd = _scores(with_prior), _scores(uniform), _scores(without)
        row = {
            "truth": with_prior["truth"],
            "shared_edges": prior.shared_edges,
            **hd,
            "uniform_design": ud,
            "no_prior": nd,
            "prior_weight": with_prior["prior_weight"],
            # How far the design followed this prior: the share asked for × the sources' agreement.
            "source_agreement": prior.agreement,
            "prior_design_share": prior.design_share(design),
            "model_mean_with_prior": with_prior["model-mean"],
            "bernoulli_variance": with_prior["bernoulli_variance"],
            "floor_within_3pt": design_floors(sw.theta(), m, design),
            "protocol_notes": notes,
        }
        loo.append(hd); loo_uniform.append(ud); base.append(nd)
        line = (f"held out {name}: truth {with_prior['truth']:.3f}; prior from the others: within 3 pt "
                f"{hd['within_3pt']:.2f} (uniform design {ud['within_3pt']:.2f}, no prior {nd['within_3pt']:.2f}), "
                f"coverage {hd['coverage']:.2f}, half-width {hd['ci_halfwidth']:.4f}")
        if notes:
            line += f" (sources recorded otherwise: {len(notes)} of {len(others)})"
        if sw.passes >= 2:
            # The same model's first half of passes as the prior, its second half as the
            # truth: a prior as sharp as an earlier run of this very model.
            first, second = _split_halves(sw)
            own = fit_prior(kg, [sweep_answers(first, f"{name} (first {first.passes} passes)")])
            own_run = replay_coverage(second, item_prior=own, prior_design=design, **common)
            sd = _scores(own_run)
            su = _scores(replay_coverage(second, item_prior=own, prior_design=0.0, **common))
            row["split_half"] = {**sd, "uniform_design": su, "prior_weight": own_run["prior_weight"],
                                 "passes": [first.passes, second.passes]}
            split.append(sd); split_uniform.append(su)
            line += (f"; own first-half prior: within 3 pt {sd['within_3pt']:.2f} (uniform design "
                     f"{su['within_3pt']:.2f}), coverage {sd['coverage']:.2f}")
        per_model[name] = row
        print(line, flush=True)
    pooled = _pooled(loo)
    out = {
        "bench": "prior",
        "sweeps": names,
        "runs_per_model": args.runs,
        "budget": args.budget,
        "sampler": sampler,
        "design_fraction": fraction,
        "batch": batch,
        "prior_design": design,
        "estimator": "ht-difference (design-based, predictions and design from the item-response prior)",
        "abs_error_256" if args.budget == 256 else f"abs_error_{args.budget}": pooled["abs_error"],
        "within_3pt": pooled["within_3pt"],
        "coverage": pooled["coverage"],
        "ci_halfwidth": pooled["ci_halfwidth"],
        "srs_halfwidth": pooled["srs_halfwidth"],
        "design_effect": pooled["design_effect"],
        "design": DEFAULTS["design"],
        # True when some held-out sweep's sources were recorded with another method or
        # other probe options (per_model[...]["protocol_notes"] names them).
        "mixed_protocols": any(row["protocol_notes"] for row in per_model.values()),
        "uniform_design": _pooled(loo_uniform),
        "no_prior": _pooled(base),
        "split_half": ({**_pooled(split), "uniform_design": _pooled(split_uniform)} if split else None),
        "per_model": per_model,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))
    return 0
