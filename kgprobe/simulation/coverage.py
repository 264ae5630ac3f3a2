"""Coverage of the accuracy intervals on a recorded sweep: does the 95 % interval hold the truth?

:func:`replay_coverage` plays ``runs`` seeded runs of the engine's loop — predictions
before the round, the sampler's selection (with its design share), the
sweep's recorded answers as the oracle, the PKG update — for ``budget`` queries each,
and scores every estimator against the sweep's truth: the KG accuracy ``1 − mean θ`` over
the sweep's edges, and each predicate's and entity group's ``1 − mean θ`` over its edges.

The KG's active set is restricted to the sweep's edges (the other edges stay as dead
structure), exactly as the replay study of :mod:`kgprobe.simulation.replay` does. The
oracle is :class:`~kgprobe.simulation.replay.ReplayOracle` when that module is present
(draws of the recorded answers without replacement, then with replacement), else a
fresh Bernoulli draw with the sweep's θ per probe; both have mean ``1 − θ_j`` per probe.

Estimators scored:

* ``ht-difference`` — :func:`kgprobe.estimators.kg_estimate` (design-unbiased,
  model-assisted; what a run reports);
* ``design-wilson`` — the plain mean of the design probes with a Wilson interval (what
  kgprobe reported before; unbiased only under the uniform design, biased towards the
  edges an adaptive design leans on).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kgprobe.errors import InputError
from kgprobe.estimators import DESIGN, ProbeTable, group_estimates, kg_estimate, round_spread
from kgprobe.metrics import ConvergenceMonitor, knowledge_metrics, wilson_interval
from kgprobe.predictions import round_means, round_predictions, weighed_predictions
from kgprobe.sampling.design_draws import prior_design_weights, round_design_weights


def _sweep_kg(sweep):
    from kgprobe.sources.embedded import load_embedded_kg

    return load_embedded_kg(sweep.kg)


def _theta(sweep) -> np.ndarray:
    return 1.0 - np.asarray(sweep.correct, dtype=np.float64).mean(axis=1)


class _BernoulliOracle:
    """Fresh Bernoulli draws with the sweep's θ (used when the replay oracle is absent)."""

    def __init__(self, sweep, seed: int):
        self._theta = np.zeros(int(np.max(sweep.edges)) + 1)
        self._theta[np.asarray(sweep.edges)] = _theta(sweep)
        self._rng = np.random.default_rng([seed, 13])

    def answer(self, edges: np.ndarray) -> np.ndarray:
        return self._rng.random(edges.size) >= self._theta[edges]


def make_oracle(sweep, seed: int):
    try:
        from kgprobe.simulation.replay import ReplayOracle
    except ImportError:
        return _BernoulliOracle(sweep, seed)
    return ReplayOracle(sweep, seed)


def replay_setup(sweep, kg=None) -> dict[str, Any]:
    """The restricted PKG, group labels and truths a replay study needs (built once)."""
    from kgprobe.kg.parameterized import ParameterizedKG

    kg = kg if kg is not None else _sweep_kg(sweep)
    edges = np.asarray(sweep.edges, dtype=np.int64)
    if edges.size == 0 or edges.max() >= kg.num_edges:
        raise InputError(f"the sweep's edges do not index the KG {kg.name!r} ({kg.num_edges} edges)")
    active = np.zeros(kg.num_edges, bool)
    active[edges] = True
    base = ParameterizedKG.from_kg(kg)
    theta = np.zeros(kg.num_edges)
    theta[edges] = _theta(sweep)
    pred_names = [kg.predicate_id(i) for i in range(len(kg.predicates))]
    groups = [kg.entities[e].group or "(none)" for e in kg.entity_ids]
    group_names = sorted(set(groups))
    gindex = {g: i for i, g in enumerate(group_names)}
    group_of_edge = np.asarray([gindex[g] for g in groups], dtype=np.int64)[kg.subjects]
    labels = {"predicate": (np.asarray(kg.predicate_of, dtype=np.int64), pred_names),
              "group": (group_of_edge, group_names)}
    truth = {"kg": float(1.0 - theta[edges].mean())}
    sizes = {}
    for kind, (lab, names) in labels.items():
        cnt = np.bincount(lab[edges], minlength=len(names))
        tot = np.bincount(lab[edges], weights=1.0 - theta[edges], minlength=len(names))
        sizes[kind] = {str(names[g]): int(cnt[g]) for g in range(len(names)) if cnt[g]}
        truth[kind] = {str(names[g]): float(tot[g] / cnt[g]) for g in range(len(names)) if cnt[g]}
    return {"theta": theta, "kg": kg, "heads": base.heads, "tails": base.tails, "active": active, "labels": labels,
            "sizes": sizes, "truth": truth, "predicates": kg.predicate_of}


def simulate_run(setup: dict, sweep, *, sampler: str, sampler_options: dict, budget: int, batch: int,
                 seed: int, propagation_weight: float = 1.0, item_prior=None, tilt: float = 0.0,
                 prior_design: float = 0.0, design: str = "uniform", oracle=None,
                 convergence: tuple[int, float] | None = None, lean_target: float | None = None) -> ProbeTable:
    """One replayed run; the :class:`ProbeTable` the engine would have recorded.

    ``convergence``: ``(window, tolerance)`` to stop as a run with ``stop_on_convergence``
    does, once the win, zero-sense and all-sense rates over the probed edges have
    converged (:class:`kgprobe.metrics.ConvergenceMonitor`); None runs to the budget.

    ``design``: how design probes are drawn (:mod:`kgprobe.sampling.design`); the floor
    and lean parts use generators of their own, seeded by ``seed`` and the round as the
    engine's are, so replays of two sweeps with the same seed share the floor draws.
    ``lean_target``: the run's ``--lean-target`` (:func:`kgprobe.sampling.design.hunting_weights`).
    """
    from kgprobe.kg.parameterized import ParameterizedKG
    from kgprobe.sampling import make_sampler
    from kgprobe.sampling.design_draws import UNTILTED_SAMPLERS
    from kgprobe.sampling.design import (DesignPlan, design_columns, rounds_to_come, run_design_draws,
                                          with_expected_draws)

    pkg = ParameterizedKG(setup["heads"], setup["tails"], setup["active"], predicates=setup["predicates"],
                          propagation_weight=propagation_weight)
    base = None
    if item_prior is not None:
        item_prior.start(pkg)
        base = prior_design_weights(pkg, item_prior.initial_mean(), item_prior.design_share(prior_design))
    smp = make_sampler(sampler, **sampler_options)
    plan = None
    if design != "uniform" and sampler not in UNTILTED_SAMPLERS:
        plan = DesignPlan(design, setup["labels"]["predicate"][0], setup["labels"]["group"][0], setup["active"],
                          base=base, draws=run_design_draws(budget, smp), lean_target=lean_target)
    oracle = make_oracle(sweep, seed) if oracle is None else oracle
    rng = np.random.default_rng([seed, 5])
    cols: dict[str, list] = {k: [] for k in ("correct", "design", "predicted", "inclusion", "round", "edge",
                                             "part")}
    means = []
    monitor = None
    if convergence is not None:
        monitor = ConvergenceMonitor(window=convergence[0], tolerance=convergence[1])
    spent, t = 0, 0
    while spent < budget:
        n = min(batch, budget - spent, pkg.num_active)  # a batch never exceeds the active edges
        right = round_predictions(pkg, smp, item_prior)
        means.append({kind: round_means(right, lab, setup["active"], names)
                      for kind, (lab, names) in setup["labels"].items()})
        if plan is not None:
            pkg.design = plan.round(right, np.random.default_rng([seed, t, 2]), np.random.default_rng([seed, t, 3]),
                                    rounds_to_come(budget - spent, batch))
        else:
            pkg.design_weights = round_design_weights(pkg, right, sampler=sampler, tilt=tilt, base=base)
        sel = smp.select(pkg, n, rng)
        in_design = np.asarray(sel.design, bool)
        inclusion, part = design_columns(pkg, sel.edges, in_design)
        means[-1] = with_expected_draws(means[-1], getattr(pkg, "design", None), setup["labels"])
        pkg.design_weights = None
        pkg.design = None
        ok = np.asarray(oracle.answer(sel.edges), dtype=bool)
        if plan is not None:
            plan.record(sel.edges, part, round_spread(ok, right[sel.edges], inclusion, part, pkg.num_active))
        cols["correct"].append(ok)
        cols["part"].append(part)
        cols["design"].append(in_design)
        cols["predicted"].append(right[sel.edges])
        cols["inclusion"].append(inclusion)
        cols["round"].append(np.full(sel.edges.size, t))
        cols["edge"].append(sel.edges)
        # A margin-reading sampler gets each answer's recorded margin, as the engine gives it.
        margins = getattr(oracle, "last_margins", None) if smp.uses_margins else None
        pkg.update(sel.edges, ok, margins)
        spent += sel.edges.size
        t += 1
        if monitor is not None and monitor.update(knowledge_metrics(pkg.successes, pkg.failures)):
            break
    arr = {k: np.concatenate(v) for k, v in cols.items()}
    labels = {kind: np.asarray(names, dtype=object)[lab[arr["edge"]]]
              for kind, (lab, names) in setup["labels"].items()}
    final, weight = weighed_predictions(pkg, smp, item_prior)
    return ProbeTable(arr["correct"], arr["design"], arr["predicted"].astype(np.float64), arr["inclusion"],
                      arr["round"], labels, means, setup["sizes"], arr["edge"],
                      float(final[setup["active"]].mean()), weight, arr["part"])


def _direct_counts(table: ProbeTable, kind: str) -> dict[str, tuple[int, int]]:
    out = {}
    lab = table.labels[kind]
    for g in np.unique(lab):
        sel = lab == g
        s = int(table.correct[sel].sum())
        out[str(g)] = (s, int(sel.sum()) - s)
    return out


def replay_coverage(
    sweep,
    *,
    sampler: str = "thompson",
    sampler_options: dict | None = None,
    design_fraction: float | None = None,
    budget: int = 256,
    batch: int = 32,
    runs: int = 200,
    seed: int = 0,
    confidence: float = 0.95,
    predicate_target: float = 0.85,
    propagation_weight: float = 1.0,
    item_prior=None,
    kg=None,
    tilt: float = 0.0,
    prior_design: float = 0.0,
    design: str = "uniform",
    lean_target: float | None = None,
) -> dict:
    """Coverage and half-width of the accuracy intervals over ``runs`` replayed runs.

    Returns a JSON-able dict: ``truth``; per KG estimator (``ht-difference``,
    ``design-wilson``) its ``coverage``, mean ``ci_halfwidth``, ``mean_estimate``,
    ``rmse``; and ``predicate_coverage`` / ``group_coverage``: per label the share of runs
    whose interval held that label's truth, the share of labels at or above
    ``predicate_target`` and the minimum, and how often the interval was model-based.
    """
    if runs < 1 or budget < 1 or batch < 1:
        raise InputError("runs, budget and batch must be >= 1")
    setup = replay_setup(sweep, kg)
    opts = dict(sampler_options or {})
    if design_fraction is not None:
        opts["design_fraction"] = design_fraction
    truth = setup["truth"]
    kg_stats: dict[str, dict[str, list]] = {m: {"covered": [], "half": [], "est": []}
                                            for m in ("ht-difference", "design-wilson")}
    grp = {kind: {g: {"covered": [], "model": []} for g in truth[kind]} for kind in ("predicate", "group")}
    model_based: list[float] = []
    prior_weights: list[float] = []
    weak_probes: list[float] = []
    weak_found: list[int] = []
    design_probes: list[int] = []
    outside = 0  # group estimates outside [0, 1] (there should be none)
    for r in range(runs):
        table = simulate_run(setup, sweep, sampler=sampler, sampler_options=opts, budget=budget, batch=batch,
                             seed=seed * 100_003 + r, propagation_weight=propagation_weight, item_prior=item_prior,
                             tilt=tilt, prior_design=prior_design, design=design, lean_target=lean_target)
        est = kg_estimate(table, confidence=confidence)
        model_based.append(table.final_mean)
        if table.prior_weight is not None:
            prior_weights.append(table.prior_weight)
        weak = setup["theta"][table.edge] > 0.5
        weak_probes.append(float(weak.mean()))
        weak_found.append(int(np.unique(table.edge[weak]).size))
        d = table.design
        k, n = int(table.correct[d].sum()), int(d.sum())
        design_probes.append(n)
        lo, hi = wilson_interval(k, n, confidence)
        for name, (e, low, high) in (("ht-difference", (est.estimate, est.low, est.high)),
                                     ("design-wilson", (k / n if n else math.nan, lo, hi))):
            kg_stats[name]["covered"].append(bool(low <= truth["kg"] <= high))
            kg_stats[name]["half"].append((high - low) / 2)
            kg_stats[name]["est"].append(e)
        for kind in grp:
            ests = group_estimates(table, kind, confidence=confidence, direct=_direct_counts(table, kind))
            for g, st in grp[kind].items():
                ge = ests.get(g)
                if ge is None or math.isnan(ge.low):
                    st["covered"].append(False)  # no interval at all counts as a miss
                    st["model"].append(True)
                    continue
                st["covered"].append(bool(ge.low <= truth[kind][g] <= ge.high))
                st["model"].append(ge.basis != DESIGN)
                if not 0.0 <= ge.estimate <= 1.0:
                    outside += 1
    out: dict[str, Any] = {"truth": round(truth["kg"], 4), "runs": runs, "budget": budget, "batch": batch,
                           "sampler": sampler, "sampler_options": opts, "design_tilt": tilt, "design": design,
                           "prior_design": prior_design if item_prior is not None else None}
    for name, st in kg_stats.items():
        e = np.asarray(st["est"], dtype=np.float64)
        out[name] = {
            "coverage": round(float(np.mean(st["covered"])), 3),
            "ci_halfwidth": round(float(np.nanmean(st["half"])), 4),
            "mean_estimate": round(float(np.nanmean(e)), 4),
            "rmse": round(float(np.sqrt(np.nanmean((e - truth["kg"]) ** 2))), 4),
            "abs_error": round(float(np.nanmean(np.abs(e - truth["kg"]))), 4),
            "within_3pt": round(float(np.mean(np.abs(e - truth["kg"]) <= 0.03)), 3),
        }
        # What simple random sampling of as many design probes gives at the true accuracy p,
        # 1.96·sqrt(p(1 − p)/n), and the design effect: the squared ratio of the half-widths
        # (a variance ratio; below 1, the design and the predictions bought precision).
        n_design = float(np.mean(design_probes))
        srs = 1.959964 * math.sqrt(truth["kg"] * (1 - truth["kg"]) / n_design) if n_design else math.nan
        out[name]["srs_halfwidth"] = round(srs, 4)
        out[name]["design_effect"] = round((out[name]["ci_halfwidth"] / srs) ** 2, 3) if srs > 0 else None
    # How much the prior's predictions counted against the run's own at the end (mean over runs).
    out["prior_weight"] = round(float(np.mean(prior_weights)), 3) if prior_weights else None
    # The predictions' own mean after the run: model-based, no interval (tinyBenchmarks-style).
    mb = np.asarray(model_based, dtype=np.float64)
    out["model-mean"] = {"mean_estimate": round(float(mb.mean()), 4),
                         "rmse": round(float(np.sqrt(np.mean((mb - truth["kg"]) ** 2))), 4),
                         "abs_error": round(float(np.mean(np.abs(mb - truth["kg"]))), 4),
                         "within_3pt": round(float(np.mean(np.abs(mb - truth["kg"]) <= 0.03)), 3)}
    # The floor of any design-unbiased estimate from these probes: even exact predictions
    # leave each probe's Bernoulli noise, mean θ(1 − θ) over the edges per probe.
    theta = _theta(sweep)
    out["bernoulli_variance"] = round(float(np.mean(theta * (1 - theta))), 4)
    # What the blind-spot search got: share of probes on edges the model gets wrong more
    # often than not (θ > ½), and how many such edges a run probed at least once.
    out["group_estimates_outside_unit"] = outside
    out["weak_probe_share"] = round(float(np.mean(weak_probes)), 3)
    out["weak_edges_found"] = round(float(np.mean(weak_found)), 1)
    out["weak_edges"] = int(np.sum(theta > 0.5))
    for kind, per in grp.items():
        cov = {g: float(np.mean(st["covered"])) for g, st in per.items()}
        vals = np.asarray(list(cov.values()))
        out[f"{kind}_coverage"] = {
            "share_at_target": round(float(np.mean(vals >= predicate_target)), 3),
            "min": round(float(vals.min()), 3),
            "target": predicate_target,
            "per_label": {g: round(c, 3) for g, c in cov.items()},
            # Share of runs in which the label had no design-based interval (too few design probes).
            "no_interval_share": {g: round(float(np.mean(st["model"])), 3) for g, st in per.items()},
            "edges": setup["sizes"][kind],
        }
    return out


def simulate_default_run(setup: dict, sweep, *, seed: int, budget: int = 256, **options) -> ProbeTable:
    """:func:`simulate_run` with a default ``kgprobe run``'s sampler, design and batch
    (:func:`run_defaults`); ``options`` (e.g. ``convergence``) go to :func:`simulate_run`."""
    d = run_defaults()
    return simulate_run(setup, sweep, sampler=d["sampler"], sampler_options={"design_fraction": d["design_fraction"]},
                        budget=budget, batch=d["batch"], seed=seed, propagation_weight=d["propagation_weight"],
                        tilt=d["design_tilt"], prior_design=d["prior_design"], design=d["design"],
                        lean_target=d["lean_target"], **options)


def run_defaults() -> dict:
    """The sampler, batch and design fraction a default ``kgprobe run`` uses."""
    from kgprobe.settings import RUN_DEFAULTS as DEFAULTS

    return {"sampler": DEFAULTS["sampler"], "batch": DEFAULTS["batch_size"],
            "design_fraction": DEFAULTS["design_fraction"], "propagation_weight": DEFAULTS["propagation_weight"],
            "design_tilt": DEFAULTS.get("design_tilt", 0.0), "prior_design": DEFAULTS.get("prior_design", 0.0),
            "design": DEFAULTS.get("design", "uniform"), "lean_target": DEFAULTS.get("lean_target")}


#: The bars the ideal frontier of :func:`weak_share_frontier` is reported at.
FRONTIER_WEAK_SHARE = 0.6
FRONTIER_HALFWIDTH = 0.06


def weak_share_frontier(theta, budget: int, *, weak_share: float = FRONTIER_WEAK_SHARE,
                        halfwidth: float = FRONTIER_HALFWIDTH, confidence: float = 0.95) -> dict:
    """What a share of probes on weak edges costs in half-width, in a model of the best case.

    An idealized run of ``budget`` probes over the N edges with accuracies ``μ_j = 1 − θ_j``:
    its *fresh* probes go to edges not yet answered, drawn uniformly (a design that cannot
    tell weak unprobed edges from strong ones), so a share ``b`` of them (the weak edges'
    share) lands on weak edges; its other probes re-ask edges known to be weak, every one
    on a weak edge (the best case). A weak share ``w`` then leaves ``n₁ = budget·(1 − f)``
    fresh edges, ``f = (w − b)/(1 − b)``, and the KG accuracy rests on them: the sample
    mean of their answers, each edge counted once (the finite-population gain in full),
    has variance ``((1 − n₁/N)·S² + β̄)/n₁`` with ``S²`` the variance of the ``μ_j`` over
    the edges and ``β̄`` the mean Bernoulli variance ``θ(1 − θ)`` of one answer. Not a
    strict bound: predictions of the unanswered edges, left out here, can shrink the
    ``S²`` part (docs/design-measured.md, "The frontier").

    Returns the half-width this needs at ``weak_share`` (``ci_halfwidth_needed``) and the
    largest weak share reachable at ``halfwidth`` (``weak_share_reachable``; None when even
    ``n₁ = min(budget, N)`` fresh edges give a wider interval).
    """
    from scipy.stats import norm

    th = np.asarray(theta, dtype=np.float64)
    n_edges = th.size
    if n_edges < 2 or budget < 1:
        raise InputError("the frontier needs at least two edges and one probe")
    z = float(norm.ppf(0.5 + confidence / 2))
    b = float(np.mean(th > 0.5))
    s2 = float(np.var(1.0 - th, ddof=1))
    noise = float(np.mean(th * (1.0 - th)))
    most_fresh = min(float(budget), float(n_edges))

    def share(fresh: float) -> float:
        return b + (1.0 - fresh / budget) * (1.0 - b)

    f = max(0.0, (weak_share - b) / (1.0 - b)) if b < 1.0 else 0.0
    fresh = min(budget * (1.0 - f), most_fresh)
    needed = z * math.sqrt(max((1.0 - fresh / n_edges) * s2 + noise, 0.0) / fresh) if fresh > 0 else math.inf
    # The half-width falls as n₁ grows: the least n₁ that reaches ``halfwidth``.
    least = (s2 + noise) / ((halfwidth / z) ** 2 + s2 / n_edges)
    reachable = None if least > most_fresh else share(least)
    return {"weak_share": weak_share, "ci_halfwidth_needed": round(needed, 4) if math.isfinite(needed) else None,
            "ci_halfwidth": halfwidth, "weak_share_reachable": None if reachable is None else round(reachable, 3),
            "weak_edge_share": round(b, 3)}


def efficiency_fields(sweep, *, runs: int = 200, budget: int = 256, seed: int = 0, kg=None,
                      design: str | None = None, lean_target: float | None = None,
                      sampler: str | None = None) -> dict:
    """The keys ``kgprobe bench efficiency --truth`` adds to its JSON line (run defaults, 256 queries).

    ``coverage`` and ``ci_halfwidth`` (mean) of the reported KG interval; ``predicate_coverage``:
    the share of predicates whose interval held their truth in ≥ 85 % of runs, and the
    minimum coverage over predicates; ``ideal_frontier``: what a 60 % weak share costs in
    half-width in a best-case model, and the weak share it reaches at ±6 points
    (:func:`weak_share_frontier`). ``design``: another design than the run default's
    (``uniform``: what ``kgprobe run --design uniform`` gives, on the same seeds);
    ``lean_target``: a run's ``--lean-target`` instead of the default's; ``sampler``: a run's
    ``--sampler`` (its estimates are the predictions), at its own defaults.
    """
    d = run_defaults()
    if sampler is not None:
        d["sampler"] = sampler
    if design is not None:
        d["design"] = design
    if lean_target is not None:
        d["lean_target"] = lean_target
    from kgprobe.settings import takes_design_fraction

    # As a run does: the design fraction goes to the samplers that take one.
    if not takes_design_fraction(d["sampler"]):
        d["design_fraction"] = None
    out = replay_coverage(sweep, sampler=d["sampler"], design_fraction=d["design_fraction"], batch=d["batch"],
                          propagation_weight=d["propagation_weight"], budget=budget, runs=runs, seed=seed, kg=kg,
                          tilt=d["design_tilt"], design=d["design"], lean_target=d["lean_target"])
    kg_est = out["ht-difference"]
    pc = out["predicate_coverage"]
    gc = out["group_coverage"]
    return {
        "coverage": kg_est["coverage"],
        "ci_halfwidth": kg_est["ci_halfwidth"],
        "srs_halfwidth": kg_est["srs_halfwidth"],
        "design_effect": kg_est["design_effect"],
        # Share of probes on edges the model gets wrong more often than not (θ > ½).
        "weak_share": out["weak_probe_share"],
        "predicate_coverage": {"share": pc["share_at_target"], "min": pc["min"], "target": pc["target"]},
        "group_coverage": {"share": gc["share_at_target"], "min": gc["min"], "target": gc["target"]},
        "group_estimates_outside_unit": out["group_estimates_outside_unit"],
        # What the weak-share and half-width bars cost together in a best-case model.
        "ideal_frontier": weak_share_frontier(_theta(sweep), budget),
        "coverage_study": {"runs": runs, "budget": budget, "truth": out["truth"], "estimator": "ht-difference",
                           "sampler": d["sampler"], "design_fraction": d["design_fraction"], "design": d["design"],
                           # For contrast only: the old plain mean ignores the adaptive
                           # design's unequal probabilities, so it is biased and under-covers.
                           "design_wilson": {**out["design-wilson"],
                                             "what": "naive: unweighted mean of the design probes, Wilson interval; "
                                                     "biased under the adaptive design, not what a run reports"},
                           "group_coverage_min": out["group_coverage"]["min"]},
    }


#: Edges per predicate of :func:`skewed_sweep`: one predicate holds most edges, six are small.
SKEWED_SIZES = (666, 11, 7, 5, 3, 2, 2)


def skewed_sweep(kg=None, *, sizes=SKEWED_SIZES, passes: int = 10, seed: int = 0):
    """A simulated recorded sweep on a skewed subset of the ``countries`` KG.

    The largest predicate keeps ``sizes[0]`` edges (all of them when it has fewer); the
    next predicates ``sizes[1:]`` each; answers are ``passes`` Bernoulli draws per edge
    from the calibrated generator's θ* (:mod:`kgprobe.simulation.theta`). What a KG a
    user builds around a few seeds looks like: one relation dominates, a few hold a
    handful of edges, which a uniform design of 256 draws rarely reaches.
    """
    from kgprobe.simulation.theta import theta_for_kg
    from kgprobe.sources.embedded import load_embedded_kg
    from kgprobe.store import kg_fingerprint
    from kgprobe.sweep import Sweep

    kg = load_embedded_kg("countries") if kg is None else kg
    rng = np.random.default_rng([seed, 17])
    theta = theta_for_kg(kg, seed=seed)
    act = np.flatnonzero(kg.active)
    preds = np.asarray(kg.predicate_of)[act]
    order = np.argsort(-np.bincount(preds), kind="stable")
    chosen = []
    for p, size in zip(order, sizes):
        members = act[preds == p]
        chosen.append(rng.choice(members, size=min(size, members.size), replace=False))
    edges = np.sort(np.concatenate(chosen))
    correct = rng.random((edges.size, passes)) >= theta[edges][:, None]
    keys = np.asarray([[kg.triple(int(e)).subject, kg.triple(int(e)).predicate, kg.triple(int(e)).object]
                       for e in edges])
    return Sweep(kg.name, kg_fingerprint(kg), "simulated", {}, f"skewed-theta-seed{seed}", passes, seed, edges,
                 correct, None, None, "kgprobe.simulation.coverage.skewed_sweep", keys)
