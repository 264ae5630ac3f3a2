"""The KGLens §2.4 sample-efficiency study, on any graph with any true θ*.

Each sampler configuration probes the graph round by round (batch ``n``) against a fast
array-level Bernoulli oracle — edge j answered wrong with probability θ*_j — and after
every round the study records the MSE between the method's estimate of θ and θ* over
the top-k hardest active edges (k = 200 and 600 by default; hardest by θ*, which here is
the ground truth KGLens approximated with 20 brute-force sweeps). Curves are averaged
over seeds; brute-force epochs (one query per active edge each) are the reference.

Entry points:

* :func:`run_study` — arrays in (endpoints, activity, predicate ids, θ*), result out;
* :func:`run_study_on_kg` — the same for a :class:`~kgprobe.kg.graph.KnowledgeGraph`;
* :func:`efficiency_ratio` — queries a configuration needs to reach the reference's
  MSE at a given number of epochs, divided by the queries of those epochs;
* :func:`ratio_intervals` — how much of a ratio is the seeds' luck (a seed bootstrap);
* :func:`estimator_coverage` — how often the design-based accuracy interval covers the truth.

Example::

    from kgprobe.sources.embedded import load_embedded_kg
    from kgprobe.simulation import run_study_on_kg, theta_for_kg
    kg = load_embedded_kg("countries")
    result = run_study_on_kg(kg, theta_for_kg(kg, seed=0), seeds=range(5))
    print(result.ratios(epochs=4.5, k=600))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from kgprobe.errors import InputError
from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.metrics import kg_accuracy_estimate
from kgprobe.sampling import make_sampler


@dataclass(frozen=True)
class SamplerSpec:
    """One curve of the study: a sampler, its settings and the propagation weight."""

    label: str
    sampler: str
    propagation_weight: float = 0.0
    options: tuple[tuple[str, object], ...] = ()

    def make(self):
        return make_sampler(self.sampler, **dict(self.options))


#: KGLens' methods (with and without propagation; KGLens' Thompson without design draws,
#: as in the paper) plus kgprobe's samplers, as a run uses them (with their 10 % design
#: draws): ``thompson`` (evidence posterior; it reads direct answers only, so the
#: propagation weight does not matter to it and is 0 here), pooled and focus.
DEFAULT_SPECS: tuple[SamplerSpec, ...] = (
    SamplerSpec("brute-force", "brute-force", 0.0),
    SamplerSpec("uniform", "uniform", 0.0),
    SamplerSpec("uniform+prop", "uniform", 1.0),
    SamplerSpec("epsilon-greedy", "epsilon-greedy", 0.0),
    SamplerSpec("epsilon-greedy+prop", "epsilon-greedy", 1.0),
    SamplerSpec("kglens-thompson", "kglens-thompson", 0.0, (("design_fraction", 0.0),)),
    SamplerSpec("kglens-thompson+prop", "kglens-thompson", 1.0, (("design_fraction", 0.0),)),
    SamplerSpec("thompson", "thompson", 0.0),
    SamplerSpec("pooled-thompson", "pooled-thompson", 1.0),
    SamplerSpec("focus", "focus", 1.0),
    SamplerSpec("focus (no propagation)", "focus", 0.0),
    # Last, so every configuration above keeps its random stream (the spec index seeds it).
    SamplerSpec("margin-focus", "margin-focus", 1.0),
)


@dataclass
class StudyResult:
    """MSE curves (seed × round) per configuration and top-k, on a common query grid."""

    queries: np.ndarray  # queries after each round
    num_active: int
    batch: int
    top_k: tuple[int, ...]
    seeds: tuple[int, ...]
    mse: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)  # label -> k -> (seeds, rounds)
    replacement_draws: dict[str, int] = field(default_factory=dict)  # label -> draws past K (replay oracles)

    def mean_curve(self, label: str, k: int) -> np.ndarray:
        return self.mse[label][k].mean(axis=0)

    def epoch_queries(self, epochs: float) -> float:
        return epochs * self.num_active

    def ratios(self, *, epochs: float = 4.5, k: int = 600, reference: str = "brute-force") -> dict[str, float]:
        """:func:`efficiency_ratio` of every configuration (seed-averaged curves)."""
        return {lab: efficiency_ratio(self, lab, epochs=epochs, k=k, reference=reference) for lab in self.mse}

    def to_json(self, *, epochs: float = 4.5) -> dict:
        return {
            "num_active_edges": self.num_active,
            "batch": self.batch,
            "seeds": list(self.seeds),
            "top_k": list(self.top_k),
            "queries": self.queries.tolist(),
            "mse_mean": {
                lab: {str(k): self.mean_curve(lab, k).tolist() for k in self.top_k} for lab in self.mse
            },
            # null = the configuration never reached the reference MSE (strict JSON has no inf)
            "ratios": {
                str(k): {lab: (r if math.isfinite(r) else None) for lab, r in self.ratios(epochs=epochs, k=k).items()}
                for k in self.top_k
            },
            "ratio_epochs": epochs,
        }


def _crossing(queries: np.ndarray, curve: np.ndarray, target: float) -> float:
    """First query count at which ``curve`` (linearly interpolated) falls to ``target``."""
    below = np.flatnonzero(curve <= target)
    if below.size == 0:
        return math.inf
    i = int(below[0])
    if i == 0:
        return float(queries[0] * target / curve[0]) if curve[0] > 0 else float(queries[0])
    q0, q1, c0, c1 = queries[i - 1], queries[i], curve[i - 1], curve[i]
    return float(q0 + (q1 - q0) * (c0 - target) / (c0 - c1))


def efficiency_ratio(result: StudyResult, label: str, *, epochs: float = 4.5, k: int = 600,
                     reference: str = "brute-force") -> float:
    """Queries ``label`` needs to reach the reference's top-k MSE at ``epochs`` epochs / those epochs' queries.

    Both curves are seed-averaged; the reference MSE at a fractional epoch is linearly
    interpolated between rounds. ``inf`` if the configuration never gets there.
    """
    q_ref = _reference_queries(result, epochs)
    target = float(np.interp(q_ref, result.queries, result.mean_curve(reference, k)))
    return _crossing(result.queries, result.mean_curve(label, k), target) / q_ref


def _reference_queries(result: StudyResult, epochs: float) -> float:
    """The queries of ``epochs`` brute-force epochs, which the study must have run."""
    q_ref = result.epoch_queries(epochs)
    if q_ref > result.queries[-1]:
        raise InputError(f"the study ran {result.queries[-1]} queries, fewer than {epochs} epochs ({q_ref:.0f})")
    return q_ref


def ratio_intervals(result: StudyResult, *, epochs: float = 4.5, k: int = 600, reference: str = "brute-force",
                    level: float = 0.95, resamples: int = 2000, seed: int = 0) -> dict[str, tuple[float, float]]:
    """Percentile seed-bootstrap interval of every configuration's :func:`efficiency_ratio`.

    Every random stream of a study run (picks, answers, θ* draws) hangs on its seed, so
    the seeds are the independent units: each resample draws as many seeds as the study
    ran, with replacement, and recomputes the ratio from the reference's and the
    configuration's curves averaged over those same seeds (pairing kept). The interval is
    for the ratio the same study would give with many seeds. With few seeds it is rough
    (a percentile bootstrap of 5 units runs narrow), so read it as the ratio's noise, not
    as an exact 95 % interval; an upper end of ``inf`` means more than the tail share of
    resamples never reached the reference. Needs at least 3 seeds.
    """
    n = len(result.seeds)
    if n < 3:
        raise InputError(f"a seed-bootstrap interval needs at least 3 seeds; the study ran {n}")
    if not 0.0 < level < 1.0:
        raise InputError(f"level must be in (0, 1), got {level}")
    q_ref = _reference_queries(result, epochs)
    seed_sets = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    # The reference's MSE at q_ref on each resample, read once for every configuration.
    targets = [float(np.interp(q_ref, result.queries, c))
               for c in result.mse[reference][k][seed_sets].mean(axis=1)]
    tail = 50.0 * (1.0 - level)
    out = {}
    for label in result.mse:
        curves = result.mse[label][k][seed_sets].mean(axis=1)
        r = np.array([_crossing(result.queries, c, t) / q_ref for c, t in zip(curves, targets)])
        # Order statistics, not interpolation: inf sorts last, so an end past the finite
        # resamples is inf (not reached), never NaN.
        r.sort()
        out[label] = (float(r[int(np.floor(tail / 100 * (resamples - 1)))]),
                      float(r[int(np.ceil((1 - tail / 100) * (resamples - 1)))]))
    return out


def hardest_edges(theta: np.ndarray, active: np.ndarray) -> np.ndarray:
    """The active edges from the highest θ to the lowest, ties in edge order: the study's top
    k are the first k."""
    active_idx = np.flatnonzero(np.asarray(active, dtype=bool))
    return active_idx[np.argsort(-np.asarray(theta)[active_idx], kind="stable")]


def bernoulli_oracle(theta_star: np.ndarray, edges: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Right/wrong verdicts: edge j is answered right with probability 1 − θ*_j."""
    return rng.random(edges.size) >= theta_star[edges]


def _check_inputs(heads, tails, active, theta_star, batch, epochs, top_k) -> np.ndarray:
    theta = np.asarray(theta_star, dtype=np.float64)
    if theta.shape != np.shape(heads):
        raise InputError(f"θ* has {theta.size} values but the graph has {np.size(heads)} edges: one per edge")
    act = np.asarray(active, dtype=bool)
    if not np.all(np.isfinite(theta[act])) or theta[act].min() < 0 or theta[act].max() > 1:
        raise InputError("θ* must be probabilities in [0, 1] (no NaN) on every active edge")
    if isinstance(batch, bool) or int(batch) != batch or batch < 1:
        raise InputError(f"batch must be a positive integer, got {batch!r}")
    if not (epochs > 0 and math.isfinite(epochs)):
        raise InputError(f"the budget must be > 0 epochs, got {epochs}")
    n_act = int(act.sum())
    if batch > n_act:
        raise InputError(f"batch {batch} is larger than the graph's {n_act} active edges")
    for k in top_k:
        if not 1 <= k <= n_act:
            raise InputError(f"top-k of {k} edges needs 1 <= k <= {n_act} (active edges)")
    return theta


def run_study(
    heads: np.ndarray,
    tails: np.ndarray,
    active: np.ndarray,
    theta_star: np.ndarray,
    *,
    predicates: np.ndarray | None = None,
    specs: Sequence[SamplerSpec] = DEFAULT_SPECS,
    batch: int = 64,
    epochs: float = 5.0,
    seeds: Iterable[int] = range(5),
    top_k: Sequence[int] = (200, 600),
    prior=(1.0, 1.0),
    oracle=None,
    streams: Sequence[int] | None = None,
) -> StudyResult:
    """Run every configuration for ``epochs`` brute-force epochs of queries, for each seed.

    ``theta_star[j]`` is the true error probability of edge j (any array you like, e.g.
    from :func:`kgprobe.simulation.theta.generate_theta` or measured on a real model).
    ``oracle(seed)`` (optional) returns an object whose ``answer(edges)`` gives the
    verdicts of one study run (e.g. :class:`kgprobe.simulation.replay.ReplayOracle`,
    recorded real answers); it is made afresh for every configuration and seed, and the
    ``replacement_draws`` it reports are summed per configuration in
    ``StudyResult.replacement_draws``. Default: a Bernoulli(θ*) oracle.
    ``streams[i]`` (optional) numbers the random stream of the picks of ``specs[i]``
    (default: its position), so a study of a few configurations can give each the
    stream, and so the very curve, it has in a study of all of them.
    """
    theta = _check_inputs(heads, tails, active, theta_star, batch, epochs, top_k)
    streams = tuple(range(len(specs))) if streams is None else tuple(int(i) for i in streams)
    if len(streams) != len(specs):
        raise ValueError(f"streams: {len(streams)} stream numbers for {len(specs)} configurations")
    act = np.asarray(active, dtype=bool)
    active_idx = np.flatnonzero(act)
    order = hardest_edges(theta, act)
    hardest = {int(k): order[:k] for k in top_k}
    n_act = active_idx.size
    rounds = math.ceil(epochs * n_act / batch)
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise InputError("the study needs at least one seed")
    result = StudyResult(
        queries=batch * np.arange(1, rounds + 1, dtype=np.float64), num_active=n_act, batch=batch,
        top_k=tuple(int(k) for k in top_k), seeds=seeds,
    )
    for spec_i, spec in enumerate(specs):
        curves = {k: np.empty((len(seeds), rounds)) for k in result.top_k}
        for si, seed in enumerate(seeds):
            pkg = ParameterizedKG(heads, tails, act, prior=prior, propagation_weight=spec.propagation_weight,
                                  predicates=predicates)
            sampler = spec.make()
            pick_rng = np.random.default_rng([seed, streams[spec_i], 0])
            # The oracle stream depends only on the seed, so configurations see
            # comparable luck.
            answer_rng = np.random.default_rng([seed, 1])
            replay = oracle(seed) if oracle is not None else None
            for r in range(rounds):
                sel = sampler.select(pkg, batch, pick_rng)
                if replay is None:
                    verdicts = bernoulli_oracle(theta, sel.edges, answer_rng)
                else:
                    verdicts = replay.answer(sel.edges)
                if replay is not None and sampler.uses_margins:
                    pkg.update(sel.edges, verdicts, replay.last_margins)
                else:
                    pkg.update(sel.edges, verdicts)
                est = sampler.estimate(pkg)
                for k, idx in hardest.items():
                    d = est[idx] - theta[idx]
                    curves[k][si, r] = float(np.dot(d, d) / idx.size)
            if replay is not None:
                result.replacement_draws[spec.label] = (
                    result.replacement_draws.get(spec.label, 0) + int(replay.replacement_draws))
        result.mse[spec.label] = curves
    return result


def run_study_on_kg(kg, theta_star: np.ndarray, **kwargs) -> StudyResult:
    """:func:`run_study` on a KnowledgeGraph (literal objects are private nodes)."""
    pkg = ParameterizedKG.from_kg(kg)
    return run_study(pkg.heads, pkg.tails, kg.active, theta_star, predicates=kg.predicate_of, **kwargs)


def estimator_coverage(
    heads, tails, active, theta_star, *, predicates=None, sampler: SamplerSpec, batch: int = 64,
    epochs: float = 1.0, seeds: Iterable[int] = range(50), confidence: float = 0.95,
) -> dict:
    """Run ``sampler`` for ``epochs`` epochs per seed; share of runs whose interval covers the truth.

    The truth is the KG accuracy ``1 − mean θ*`` over active edges. The answers come from
    an oracle seeded differently per run, so runs are independent. Both estimators of
    :func:`kgprobe.metrics.kg_accuracy_estimate` are scored: the design mean with Wilson
    interval (keys ``coverage``, ``mean_width``) and the difference estimator on the
    sampler's own predictions (``coverage_difference``, ``mean_width_difference``).
    """
    theta = _check_inputs(heads, tails, active, theta_star, batch, epochs, ())
    act = np.asarray(active, dtype=bool)
    truth = float(1.0 - theta[act].mean())
    rounds = math.ceil(epochs * int(act.sum()) / batch)
    stats = {m: {"covered": [], "width": [], "estimate": []} for m in ("design-wilson", "design-difference")}
    for seed in seeds:
        pkg = ParameterizedKG(heads, tails, act, propagation_weight=sampler.propagation_weight, predicates=predicates)
        smp = sampler.make()
        pick_rng = np.random.default_rng([seed, 7, 0])
        answer_rng = np.random.default_rng([seed, 7, 1])
        correct, design, predicted, round_ids, mean_pred = [], [], [], [], []
        for r in range(rounds):
            # Predictions from the state before the round, as the difference estimator needs.
            right = 1.0 - smp.estimate(pkg)
            mean_pred.append(float(right[act].mean()))
            sel = smp.select(pkg, batch, pick_rng)
            ok = bernoulli_oracle(theta, sel.edges, answer_rng)
            pkg.update(sel.edges, ok)
            correct.append(ok)
            design.append(sel.design)
            predicted.append(right[sel.edges])
            round_ids.append(np.full(sel.edges.size, r))
        c, a = np.concatenate(correct), np.concatenate(design)
        for est in (
            kg_accuracy_estimate(c, a, confidence=confidence),
            kg_accuracy_estimate(c, a, confidence=confidence, predicted=np.concatenate(predicted),
                                 rounds=np.concatenate(round_ids), mean_predicted=np.asarray(mean_pred)),
        ):
            st = stats[est.method]
            st["covered"].append(est.low <= truth <= est.high)
            st["width"].append(est.high - est.low)
            st["estimate"].append(est.estimate)
    w, d = stats["design-wilson"], stats["design-difference"]
    return {
        "truth": truth,
        "coverage": float(np.mean(w["covered"])),
        "runs": len(w["covered"]),
        "mean_width": float(np.mean(w["width"])),
        "mean_estimate": float(np.mean(w["estimate"])),
        "design_probes_per_run": int(a.sum()),
        "coverage_difference": float(np.mean(d["covered"])),
        "mean_width_difference": float(np.mean(d["width"])),
        "mean_estimate_difference": float(np.mean(d["estimate"])),
    }


def combine_results(results: Sequence[StudyResult]) -> StudyResult:
    """One result from studies run separately (e.g. one θ* draw per seed) on one graph."""
    if not results:
        raise InputError("nothing to combine")
    first = results[0]
    for r in results[1:]:
        if (r.num_active, r.batch, r.top_k) != (first.num_active, first.batch, first.top_k) or set(r.mse) != set(
            first.mse
        ) or r.queries.shape != first.queries.shape:
            raise InputError("studies can only be combined when graph, batch, top-k, budget and samplers match")
    out = StudyResult(first.queries, first.num_active, first.batch, first.top_k,
                      tuple(s for r in results for s in r.seeds))
    for lab in first.mse:
        out.mse[lab] = {k: np.concatenate([r.mse[lab][k] for r in results]) for k in first.top_k}
        if any(lab in r.replacement_draws for r in results):
            out.replacement_draws[lab] = sum(r.replacement_draws.get(lab, 0) for r in results)
    return out
