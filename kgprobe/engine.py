"""The round loop: state in, events out.

One round (KGLens §2.2, METHODS.md §1):

1. derive the round's random generators from ``(seed, round)`` with
   :class:`numpy.random.SeedSequence`, so a resumed run draws exactly what an unbroken
   run draws;
2. ``sampler.select`` picks up to ``batch_size`` edges (fewer when the budget left is
   smaller);
3. ``probe.render`` turns every edge into a task, each with its own generator
   (``(seed, round, 1, position)``), so one edge's rendering never depends on another's;
4. ONE ``model.score`` call for every score request of the round and ONE
   ``model.generate`` call for every generate request, so a backend can share prefixes
   across the whole round;
5. every request and response goes to the run store *before* anything is updated; if
   the store already holds this round's responses (a run killed after the model
   answered), they are replayed instead of asking the model again;
6. ``probe.verify`` per task, ``pkg.update`` (with one-hop propagation), metrics,
   convergence, budget (queries = ``sum(task.num_queries)``);
7. the round is committed to the store in one transaction.

The engine never prints and does no I/O of its own except through the store it is
given. Progress is reported as events to listeners (the live view, the Python API).
:meth:`Engine.rounds` is a generator, so user code can iterate rounds and stop early;
a stopped run is resumable.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from kgprobe import run_spec
from kgprobe.errors import InputError, ModelError, PartialBatchError
from kgprobe.estimators import round_spread
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import LanguageModel
from kgprobe.probes.base import Probe, ProbeTask, Verdict
from kgprobe.probes.common import unnamed_active_edges
from kgprobe.run_spec import RECORDED_BEFORE
from kgprobe.sampling.base import Sampler
from kgprobe.store import REPLAY_WINDOW_ENV, ProbeRecord, RoundRecord, RunStore, requests_sha


#: Rounds KGLens runs (n = 64, 60 rounds); the engine's cap when neither a budget nor
#: ``max_rounds`` is given, so a run always ends.
DEFAULT_MAX_ROUNDS = 60


@dataclass
class EngineConfig:
    """Everything that determines a run besides the KG and the model.

    The fields besides ``prior`` are run settings: their defaults, ranges and meaning are
    rows of :mod:`kgprobe.run_spec`. ``budget`` counts model queries
    (``ProbeTask.num_queries``: one per generation, one per scored option set). ``None``
    means no budget: the run stops at ``max_rounds`` (default :data:`DEFAULT_MAX_ROUNDS`
    when both are unset) or on convergence.
    """

    method: str = run_spec.default("method")
    sampler: str = run_spec.default("sampler")
    batch_size: int = run_spec.default("batch_size")
    budget: int | None = run_spec.default("budget")
    max_rounds: int | None = run_spec.default("max_rounds")
    seed: int = run_spec.default("seed")
    propagation_weight: float = run_spec.default("propagation_weight")
    prior: tuple[float, float] = (1.0, 1.0)
    """The Beta prior every edge's PKG belief starts from (not a run setting)."""
    convergence_window: int = run_spec.default("convergence_window")
    convergence_tolerance: float = run_spec.default("convergence_tolerance")
    stop_on_convergence: bool = run_spec.default("stop_on_convergence")
    probe_options: dict[str, Any] = field(default_factory=dict)
    sampler_options: dict[str, Any] = field(default_factory=dict)
    design_tilt: float = run_spec.default("design_tilt")
    prior_design: float = run_spec.default("prior_design")
    design: str = run_spec.default("design")
    lean_target: float | None = run_spec.default("lean_target")
    design_pacing: str = "capped"
    """How the design's stratum minimums are set and paced (kgprobe.sampling.design.PACINGS;
    not a run setting): recorded so that a run file keeps the rule it was played with."""
    lean_control: str = "realized"
    """How a lean target projects the half-width (kgprobe.sampling.design.LEAN_CONTROLS;
    not a run setting): recorded so that a run file keeps the rule it was played with."""

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "EngineConfig":
        """The configuration of resolved run settings (:func:`kgprobe.settings.resolve_run_settings`)."""
        values = {name: settings[name] for name in run_spec.ENGINE_SETTINGS}
        values["probe_options"] = dict(values["probe_options"])
        values["sampler_options"] = dict(values["sampler_options"])
        return cls(**values)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["prior"] = list(self.prior)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "EngineConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown run setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        d = {**RECORDED_BEFORE, **d}
        if "sampler_options" in d:  # older run files name some options differently or lack them
            from kgprobe.sampling import recorded_options

            d["sampler_options"] = recorded_options(d.get("sampler"), d["sampler_options"])
        if "prior" in d:
            d["prior"] = tuple(d["prior"])
        return cls(**d)

    def design_draws(self, sampler: Sampler) -> float | None:
        """The run's design draws as far as the settings bound them: the budget or the
        round limit's batches, whichever is less, times the sampler's design fraction;
        None when neither bounds the run."""
        from kgprobe.sampling.design import run_design_draws

        bounds = [b for b in (self.budget, None if self.round_limit is None else self.round_limit * self.batch_size)
                  if b is not None]
        return run_design_draws(min(bounds) if bounds else None, sampler)

    @property
    def round_limit(self) -> int | None:
        if self.max_rounds is None and self.budget is None:
            return DEFAULT_MAX_ROUNDS
        return self.max_rounds

    def validate(self, kg: KnowledgeGraph) -> None:
        """Raise :class:`InputError` naming the first setting that cannot work on ``kg``."""
        for name in run_spec.ENGINE_SETTINGS:
            run_spec.check_value(name, getattr(self, name))
        if kg.num_active == 0:
            raise InputError(f"the KG {kg.name!r} has no active edges: nothing can be probed")
        unnamed = unnamed_active_edges(kg)
        if len(unnamed):
            t = kg.triple(int(unnamed[0]))
            raise InputError(
                f"{len(unnamed)} active edge(s) of the KG {kg.name!r} have an entity with no usable name "
                f"(no label other than its id and no alias), e.g. edge {int(unnamed[0])}: "
                f"({t.subject}, {t.predicate}, {t.object}); no question can be asked about them. Give those "
                "entities a label or alias in the KG file, or mark the edges dead (active: false)"
            )
        if self.batch_size > kg.num_active:
            raise InputError(
                f"batch size {self.batch_size} is larger than the {kg.num_active} active edges of the KG "
                f"{kg.name!r}; use --batch-size {kg.num_active} or less"
            )
        if self.budget is not None and self.budget < self.batch_size:
            raise InputError(
                f"budget {self.budget} is below one batch ({self.batch_size} edges, at least "
                f"{self.batch_size} queries); raise --budget or lower --batch-size"
            )


# -- events -------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunStarted:
    config: EngineConfig
    kg_name: str
    num_active: int
    model: str
    start_round: int
    """The first round this process plays (> 1 when resuming)."""
    queries_spent: int
    resumed: bool


@dataclass(frozen=True)
class RoundStarted:
    round: int
    queries_spent: int
    budget: int | None


@dataclass
class RoundSummary:
    """What one finished round did and where the run stands after it."""

    round: int
    edges: np.ndarray
    correct: np.ndarray
    design: np.ndarray
    queries: int
    queries_spent: int
    budget: int | None
    max_rounds: int | None
    num_requests: int
    elapsed: float
    """Seconds this round took (select, render, model, verify, update, commit)."""
    model_seconds: float
    replayed: bool
    """True when the responses came from the store (a resumed, half-finished round)."""
    metrics: Any
    """``KnowledgeMetrics`` over every probed edge so far."""
    by_predicate: dict[str, Any]
    by_group: dict[str, Any]
    weakest_entities: list[tuple[str, Any]]
    """(entity id, metrics) of subjects with the highest zero-sense rate, worst first."""
    converged: bool
    estimates: Any = None
    """KG, per-predicate and per-group accuracy with intervals after this round
    (:func:`kgprobe.estimators.run_estimates`), or None when they could not be computed."""

    @property
    def responses_per_second(self) -> float:
        return self.num_requests / self.elapsed if self.elapsed > 0 else float("nan")


@dataclass(frozen=True)
class RoundFinished:
    summary: RoundSummary


@dataclass(frozen=True)
class Converged:
    round: int
    queries_spent: int


@dataclass(frozen=True)
class RunFinished:
    reason: str
    """``converged``, ``budget``, ``max-rounds``, ``exhausted``, ``stopped`` or ``interrupted``."""
    rounds: int
    queries_spent: int


Event = RunStarted | RoundStarted | RoundFinished | Converged | RunFinished
Listener = Callable[[Event], None]

#: Reasons after which the run is complete (a resume does nothing more).
FINAL_REASONS = ("converged", "budget", "max-rounds", "exhausted")


def check_compatible(probe: Probe, model: LanguageModel, method: str) -> None:
    """A scoring probe needs a model that returns log-probabilities; raise ModelError if not."""
    if getattr(probe, "needs_scoring", False) and not getattr(model, "can_score", True):
        raise ModelError(
            f"method {method!r} scores answer options, but model {model.name!r} cannot return "
            "log-probabilities (a chat-only API); use a generation method such as 'yes-no', 'wh' or 'hard'"
        )


def round_rng(seed: int, round_: int, *path: int) -> np.random.Generator:
    """The generator for one purpose in one round: a pure function of (seed, round, path)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(round_, *path))))


def metrics_to_dict(m: Any) -> dict:
    """A ``KnowledgeMetrics`` (dataclass or named tuple) as a plain dict of numbers."""
    if dataclasses.is_dataclass(m):
        d = dataclasses.asdict(m)
    elif hasattr(m, "_asdict"):
        d = m._asdict()
    else:
        d = dict(vars(m))
    return {k: (float(v) if isinstance(v, (float, np.floating)) else int(v) if isinstance(v, (int, np.integer)) else v)
            for k, v in d.items()}


def play_out(rounds: Iterator) -> None:
    """Run a ``rounds()`` generator to its end.

    A KeyboardInterrupt (Ctrl-C, or SIGTERM turned into one) that lands while the caller
    holds control between two rounds is raised in the caller's frame, not the loop's; the
    loop would then only be closed and record the run as ``stopped``. It is thrown into
    the loop instead, which records ``interrupted`` as it does for an interrupt during a
    round.
    """
    try:
        for _ in rounds:
            pass
    except KeyboardInterrupt as exc:
        if getattr(rounds, "gi_frame", None) is not None:  # suspended between rounds
            rounds.throw(exc)
        raise


class Engine:
    """Plays rounds of a run against one model, recording everything in ``store``.

    Build it with :meth:`from_config` (which makes the PKG, sampler, probe and
    convergence monitor from an :class:`EngineConfig` and restores the store's last
    checkpoint if there is one), then iterate :meth:`rounds` or call :meth:`run`.
    """

    def __init__(
        self,
        kg: KnowledgeGraph,
        model: LanguageModel,
        probe: Probe,
        sampler: Sampler,
        pkg,
        monitor,
        store: RunStore,
        config: EngineConfig,
    ):
        self.kg, self.model, self.probe, self.sampler = kg, model, probe, sampler
        self.pkg, self.monitor, self.store, self.config = pkg, monitor, store, config
        self.listeners: list[Listener] = []
        self.round = 0
        self.queries_spent = 0
        self.converged = False
        self.stop_reason: str | None = None
        self.last_summary: RoundSummary | None = None
        self._subject_of_edge = kg.subjects
        self._predicate_of_edge = np.asarray([kg.predicate_id(i) for i in kg.predicate_of.tolist()], dtype=object) \
            if kg.num_edges < 2_000_000 else None
        groups = [kg.entities[eid].group or "(none)" for eid in kg.entity_ids]
        self._group_of_edge = np.asarray(groups, dtype=object)[kg.subjects] if kg.num_edges else np.empty(0, object)
        from kgprobe.estimators import group_labels

        # Predicate and entity-group index of every edge, for the per-round mean predictions.
        self._labels = group_labels(kg)
        #: An item-response prior (``kgprobe.prior.ItemPrior``) predicting outcomes, or None.
        self.item_prior = None
        #: The run's untilted design weights: None (uniform), or the prior-weighted design,
        #: fixed by the prior when the run is set up (from_config).
        self.design_base: np.ndarray | None = None
        #: Edges this engine probes (a bool mask), or None for all: a shard of a sweep plays
        #: the whole sweep's schedule (selection, positions, generators) and asks the model
        #: only about its own edges, so its answers are exactly the unsharded sweep's.
        self.probe_only: np.ndarray | None = None
        #: The stratified or adaptive design across rounds (kgprobe.sampling.design), or None
        #: (the uniform design, and the samplers whose names promise their own draws).
        self.design_plan = None
        # The state before round 1, to fall back on when an interrupted first round must be undone.
        self._initial = (pkg.state_dict(), sampler.state_dict(), monitor.state_dict())
        self._needs_reload = False

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_config(cls, kg: KnowledgeGraph, model: LanguageModel, config: EngineConfig, store: RunStore) -> "Engine":
        from kgprobe.kg.parameterized import ParameterizedKG
        from kgprobe.metrics import ConvergenceMonitor
        from kgprobe.probes import make_probe
        from kgprobe.sampling import make_sampler

        config.validate(kg)
        probe = make_probe(config.method, **config.probe_options)
        check_compatible(probe, model, config.method)
        sampler = make_sampler(config.sampler, **config.sampler_options)
        pkg = ParameterizedKG.from_kg(kg, prior=tuple(config.prior), propagation_weight=config.propagation_weight)
        monitor = ConvergenceMonitor(window=config.convergence_window, tolerance=config.convergence_tolerance)
        item_prior = None
        stored_prior = store.meta("item_prior")
        if stored_prior:
            # An item-response prior fitted when the run was created (kgprobe.prior): the
            # PKG starts from it, and it predicts every outcome before each round.
            from kgprobe.prior import ItemPrior

            item_prior = ItemPrior.from_json(stored_prior)
            item_prior.start(pkg)
        engine = cls(kg, model, probe, sampler, pkg, monitor, store, config)
        engine.item_prior = item_prior
        probe_only = store.meta("probe_only")
        if probe_only:
            engine.probe_only = np.zeros(kg.num_edges, dtype=bool)
            engine.probe_only[np.asarray(json.loads(probe_only), dtype=np.int64)] = True
        if item_prior is not None:
            from kgprobe.sampling.design_draws import prior_design_weights

            engine.design_base = prior_design_weights(pkg, item_prior.initial_mean(),
                                                      item_prior.design_share(config.prior_design))
        from kgprobe.sampling.design_draws import UNTILTED_SAMPLERS
        from kgprobe.sampling.design import DesignPlan

        if config.design != "uniform" and config.sampler not in UNTILTED_SAMPLERS:
            engine.design_plan = DesignPlan(config.design, engine._labels["predicate"][0],
                                            engine._labels["group"][0], kg.active, base=engine.design_base,
                                            pacing=config.design_pacing, draws=config.design_draws(sampler),
                                            lean_target=config.lean_target, lean_control=config.lean_control)
        engine._restore()
        return engine

    def _restore(self) -> None:
        """Load the last committed round's state (or the initial state) into PKG, sampler, monitor."""
        checkpoint = self.store.checkpoint()
        if self.design_plan is not None:
            # The floor draws so far set the stratum minimums of the rounds to come.
            self.design_plan.reset()
            if checkpoint is not None:
                probes = self.store.probe_arrays()
                for r in np.unique(probes["round"][probes["round"] <= checkpoint.round]):
                    at = probes["round"] == r
                    spread = None
                    if "predicted" in probes:
                        spread = round_spread(probes["correct"][at], probes["predicted"][at],
                                              probes["inclusion"][at], probes["part"][at], self.kg.num_active)
                    self.design_plan.record(probes["edge"][at], probes["part"][at], spread)
        if checkpoint is None:
            pkg_state, sampler_state, monitor_state = self._initial
            self.pkg.load_state_dict(pkg_state)
            self.sampler.load_state_dict(sampler_state)
            self.monitor.load_state_dict(monitor_state)
            self.round, self.queries_spent, self.converged = 0, 0, False
            return
        self.pkg.load_state_dict(checkpoint.pkg_state)
        self.sampler.load_state_dict(decode_state(checkpoint.sampler_state))
        self.monitor.load_state_dict(decode_state(checkpoint.convergence_state))
        self.round = checkpoint.round
        self.queries_spent = checkpoint.queries_spent
        self.converged = checkpoint.converged

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(event)`` for every event from now on."""
        self.listeners.append(listener)

    def _emit(self, event: Event) -> None:
        for listener in self.listeners:
            listener(event)

    # -- the loop ------------------------------------------------------------------------
    def pending_stop(self) -> str | None:
        """Why no further round would be played now, or None if one would."""
        cfg = self.config
        if self.converged and cfg.stop_on_convergence:
            return "converged"
        if cfg.budget is not None and self.queries_spent >= cfg.budget:
            return "budget"
        limit = cfg.round_limit
        if limit is not None and self.round >= limit:
            return "max-rounds"
        return None

    def rounds(self) -> Iterator[RoundSummary]:
        """Play rounds until the run stops, yielding a summary after each.

        Breaking out of the loop leaves the run resumable (status ``stopped``);
        KeyboardInterrupt leaves it ``interrupted`` and re-raises. Calling this again
        continues from the last *committed* round: a round cut short in memory (an
        exception half-way through an update) is discarded and replayed from the store.
        """
        if self._needs_reload:
            self._restore()
        self._needs_reload = True
        self._emit(
            RunStarted(self.config, self.kg.name, self.kg.num_active, self.model.name, self.round + 1,
                       self.queries_spent, resumed=self.round > 0)
        )
        self.store.set_status("running")
        finished = False
        try:
            while True:
                reason = self.pending_stop()
                if reason is None:
                    summary = self._play_round(self.round + 1)
                    if summary is None:
                        reason = "budget" if self.config.budget is not None else "exhausted"
                if reason is not None:
                    self._finish(reason)
                    finished = True
                    return
                yield summary
        except KeyboardInterrupt:
            self._stop("interrupted")
            finished = True
            raise
        finally:
            if not finished:
                # The caller left the loop early (break / close) or an error escaped.
                self._stop("stopped")

    def run(self) -> str:
        """Play every remaining round; return the stop reason."""
        play_out(self.rounds())
        return self.stop_reason or ""

    def _finish(self, reason: str) -> None:
        self.stop_reason = reason
        self.store.set_status("finished", reason)
        self._emit(RunFinished(reason, self.round, self.queries_spent))

    def _stop(self, reason: str) -> None:
        self.stop_reason = reason
        try:
            self.store.set_status(reason, reason)
        except Exception:  # the store may be the thing that failed; the run stays resumable
            pass
        self._emit(RunFinished(reason, self.round, self.queries_spent))

    def _play_round(self, r: int) -> RoundSummary | None:
        cfg = self.config
        started_wall, t0 = time.time(), time.perf_counter()
        remaining = None if cfg.budget is None else cfg.budget - self.queries_spent
        n = min(cfg.batch_size, self.kg.num_active, remaining if remaining is not None else cfg.batch_size)
        self._emit(RoundStarted(r, self.queries_spent, cfg.budget))
        # Predictions of every outcome from the state before the round: what the
        # model-assisted estimators correct (kgprobe.estimators).
        right, predictions = self._predictions()
        from kgprobe.sampling.design_draws import round_design_weights
        from kgprobe.sampling.design import design_columns, rounds_to_come, with_expected_draws

        # The design share of the batch, always drawn with known probabilities: the run's
        # stratified or adaptive design (kgprobe.sampling.design; its own generators, so the
        # floor part is the same for every model with this seed), or the uniform design
        # (weighted by the prior and/or tilted, kgprobe.sampling.design_draws); uniform and brute
        # force stay as named.
        plan = self.design_plan
        if plan is not None:
            limit_left = None if cfg.round_limit is None else cfg.round_limit - r + 1
            rounds_left = rounds_to_come(remaining, cfg.batch_size, limit_left)
            self.pkg.design = plan.round(right, round_rng(cfg.seed, r, 2), round_rng(cfg.seed, r, 3), rounds_left)
        else:
            self.pkg.design_weights = round_design_weights(self.pkg, right, sampler=cfg.sampler,
                                                           tilt=cfg.design_tilt, base=self.design_base)
        try:
            selection = self.sampler.select(self.pkg, n, round_rng(cfg.seed, r, 0))
            edges = np.asarray(selection.edges, dtype=np.int64)
            in_design = np.asarray(selection.design, dtype=bool)
            inclusion, parts = design_columns(self.pkg, edges, in_design)
            predictions = with_expected_draws(predictions, getattr(self.pkg, "design", None), self._labels)
        finally:
            self.pkg.design_weights = None
            self.pkg.design = None
        positions = np.arange(edges.size)
        selected = edges.size
        if self.probe_only is not None:
            mine = self.probe_only[edges]
            edges, in_design, inclusion, parts, positions = (edges[mine], in_design[mine], inclusion[mine], parts[mine],
                                                         positions[mine])
        attempts = self._attempts(edges)
        tasks: list[ProbeTask] = [
            self.probe.render_attempt(self.kg, int(edge), round_rng(cfg.seed, r, 1, int(positions[i])), attempts[i])
            for i, edge in enumerate(edges)
        ]
        if remaining is not None:
            # A task may cost more than one query; drop trailing tasks so the budget holds.
            cost = np.cumsum([t.num_queries for t in tasks]) if tasks else np.empty(0)
            keep = int(np.searchsorted(cost, remaining, side="right"))
            drawn = int(in_design.sum())
            tasks, edges, in_design, parts = tasks[:keep], edges[:keep], in_design[:keep], parts[:keep]
            inclusion = np.asarray(inclusion, dtype=np.float64)[:keep]
            if int(in_design.sum()) < drawn:
                # The budget ended inside the design share: the kept draws are no longer a
                # sample with known probabilities, so none of them counts as design-based.
                in_design = np.zeros(keep, dtype=bool)
                parts = np.zeros(keep, dtype=np.int64)
        if not tasks and not (self.probe_only is not None and selected):
            return None  # a shard's round without any of its edges is still played (and recorded)

        score_requests = [req for t in tasks for req in t.score_requests]
        generate_requests = [req for t in tasks for req in t.generate_requests]
        tm = time.perf_counter()
        scores, replayed_s, new_scores = self._answer(r, "score", score_requests, self.model.score)
        try:
            generations, replayed_g, new_generations = self._answer(r, "generate", generate_requests,
                                                                    self.model.generate)
        except BaseException:
            if new_scores:  # keep the score answers already paid for: the resume replays them
                self.store.log_responses(r, "score", score_requests, scores)
            raise
        model_seconds = time.perf_counter() - tm
        # The round's one store transaction: its fresh responses (logged before the PKG is
        # updated from them), then its record. Should anything fail in between, the
        # transaction still commits the responses (RunStore.round_transaction).
        with self.store.round_transaction():
            if new_scores:
                self.store.log_responses(r, "score", score_requests, scores)
            if new_generations:
                self.store.log_responses(r, "generate", generate_requests, generations)
            _replay_window_hook(r)
            summary_args = self._finish_round(r, tasks, edges, parts, inclusion, right, predictions, scores,
                                              generations, score_requests, generate_requests, replayed_s,
                                              replayed_g, started_wall, t0)
        return self._summarize(r, model_seconds, *summary_args)

    def _finish_round(self, r, tasks, edges, parts, inclusion, right, predictions, scores, generations,
                      score_requests, generate_requests, replayed_s, replayed_g, started_wall, t0):
        """Verify, update the PKG, and commit the round (inside the round's transaction)."""
        in_design = parts > 0
        verdicts: list[Verdict] = []
        si = gi = 0
        for task in tasks:
            ns, ng = len(task.score_requests), len(task.generate_requests)
            verdicts.append(self.probe.verify(self.kg, task, scores[si : si + ns], generations[gi : gi + ng]))
            si, gi = si + ns, gi + ng
        correct = np.fromiter((bool(v.correct) for v in verdicts), dtype=bool, count=len(verdicts))

        # A probe that had to repeat an earlier phrasing of its edge is the same
        # observation again, not new evidence: it is recorded but does not update the PKG.
        fresh = np.fromiter((not v.detail.get("repeated", False) for v in verdicts), dtype=bool, count=len(verdicts))
        if self.sampler.uses_margins:
            self.pkg.update(edges[fresh], correct[fresh], _margins(verdicts)[fresh])
        else:
            self.pkg.update(edges[fresh], correct[fresh])
        queries = int(sum(t.num_queries for t in tasks))
        self.queries_spent += queries
        self.round = r
        metrics = self._metrics()
        converged_now = bool(self.monitor.update(metrics))
        newly_converged = converged_now and not self.converged
        self.converged = self.converged or converged_now
        elapsed = time.perf_counter() - t0
        num_requests = len(score_requests) + len(generate_requests)
        replayed = (replayed_s or not score_requests) and (replayed_g or not generate_requests)
        self.store.commit_round(
            RoundRecord(
                round=r,
                queries=queries,
                queries_spent=self.queries_spent,
                num_requests=num_requests,
                replayed=bool(replayed),
                started=started_wall,
                elapsed=elapsed,
                metrics=metrics_to_dict(metrics),
                converged=self.converged,
                pkg_state=self.pkg.state_dict(),
                sampler_state=_encode_state(self.sampler.state_dict()),
                convergence_state=_encode_state(self.monitor.state_dict()),
                probes=[
                    ProbeRecord(r, i, int(e), int(a), bool(v.correct), t.question, v.answer, v.detail,
                                float(right[e]), float(pi) if a else None)
                    for i, (e, a, t, v, pi) in enumerate(zip(edges, parts, tasks, verdicts, inclusion))
                ],
                predictions=predictions,
            )
        )
        if self.design_plan is not None:
            self.design_plan.record(edges, parts, round_spread(correct, right[edges], inclusion, parts,
                                                               self.kg.num_active))
        return edges, correct, in_design, queries, num_requests, elapsed, replayed, metrics, newly_converged

    def _summarize(self, r, model_seconds, edges, correct, in_design, queries, num_requests, elapsed, replayed,
                   metrics, newly_converged) -> RoundSummary:
        cfg = self.config
        summary = RoundSummary(
            round=r,
            edges=edges,
            correct=correct,
            design=in_design,
            queries=queries,
            queries_spent=self.queries_spent,
            budget=cfg.budget,
            max_rounds=cfg.round_limit,
            num_requests=num_requests,
            elapsed=elapsed,
            model_seconds=model_seconds,
            replayed=bool(replayed),
            metrics=metrics,
            by_predicate=self._grouped(self._predicate_of_edge),
            by_group=self._grouped(self._group_of_edge),
            weakest_entities=self._weakest_entities(),
            converged=self.converged,
            estimates=self._estimates(),
        )
        self.last_summary = summary
        self._emit(RoundFinished(summary))
        if newly_converged:
            self._emit(Converged(r, self.queries_spent))
        return summary

    def _attempts(self, edges: np.ndarray) -> list[int]:
        """How many times each selected edge was probed before (its evidence count, plus
        earlier picks of the same edge in this round), so the probe can vary its phrasing."""
        before = np.asarray(self.pkg.successes) + np.asarray(self.pkg.failures)
        seen: dict[int, int] = {}
        out = []
        for edge in edges.tolist():
            out.append(int(before[edge]) + seen.get(edge, 0))
            seen[edge] = seen.get(edge, 0) + 1
        return out

    def _answer(self, r: int, phase: str, requests: Sequence, call) -> tuple[list, bool, bool]:
        """Responses for one phase of round ``r``: replayed from the store, else from the model.

        Returns ``(responses, replayed, fresh)``; fresh responses are not logged here: the
        caller logs them in the round's transaction, before the PKG update.
        """
        if not requests:
            return [], False, False
        logged = self.store.logged_responses(r, phase)
        if logged is not None:
            sha, responses = logged
            if sha == requests_sha(requests) and len(responses) == len(requests):
                return responses, True, False
            warnings.warn(
                f"round {r}: the {phase} requests logged before the interruption differ from the ones "
                "rendered now (kgprobe, probe or KG changed?); asking the model again",
                RuntimeWarning,
                stacklevel=2,
            )
        # Answers kept from an earlier attempt at this round that failed part-way (the
        # requests' hash, a JSON pass over thousands of requests, only when some were kept).
        sha = requests_sha(requests) if self.store.has_partial_responses(r, phase) else None
        kept = self.store.partial_responses(r, phase, sha) if sha is not None else {}
        todo = [i for i in range(len(requests)) if i not in kept]
        try:
            fresh = list(call([requests[i] for i in todo])) if todo else []
        except PartialBatchError as exc:
            answered = {**kept, **{todo[i]: v for i, v in exc.answered.items() if 0 <= i < len(todo)}}
            if answered:
                self.store.log_partial(r, phase, sha or requests_sha(requests), answered)
            raise PartialBatchError(
                f"{exc} ({len(answered)} of {len(requests)} {phase} answers of round {r} are kept in the run "
                "file; `kgprobe resume` asks only for the rest)", answered) from None
        if len(fresh) != len(todo):
            raise ModelError(
                f"model {self.model.name!r} returned {len(fresh)} {phase} results for {len(todo)} requests"
            )
        answers = dict(kept)
        answers.update(zip(todo, fresh))
        responses = [answers[i] for i in range(len(requests))]
        return responses, False, True

    # -- predictions and estimates -------------------------------------------------------
    def _predictions(self) -> tuple[np.ndarray, dict]:
        """Every edge's predicted chance of a right answer, and its per-group means."""
        from kgprobe.predictions import round_means, round_predictions

        right = round_predictions(self.pkg, self.sampler, self.item_prior)
        active = self.kg.active
        means = {kind: {g: list(v) for g, v in round_means(right, lab, active, names).items()}
                 for kind, (lab, names) in self._labels.items()}
        return right, means

    def _estimates(self):
        from kgprobe.estimators import run_estimates

        try:
            return run_estimates(self.store)
        except Exception:  # a display aid here (reports recompute it); the run must go on
            return None

    # -- metrics -------------------------------------------------------------------------
    def _metrics(self):
        from kgprobe.metrics import knowledge_metrics

        return knowledge_metrics(self.pkg.successes, self.pkg.failures)

    def _grouped(self, groups) -> dict[str, Any]:
        if groups is None:
            return {}
        from kgprobe.metrics import grouped_metrics

        return {str(k): v for k, v in grouped_metrics(self.pkg.successes, self.pkg.failures, groups).items()}

    def _weakest_entities(self, k: int = 5, min_edges: int = 2) -> list[tuple[str, Any]]:
        """Subjects with at least ``min_edges`` probed edges, highest zero-sense rate first."""
        from kgprobe.metrics import knowledge_metrics

        probed = np.flatnonzero((np.asarray(self.pkg.successes) + np.asarray(self.pkg.failures)) > 0)
        if probed.size == 0:
            return []
        subj = self._subject_of_edge[probed]
        uniq, counts = np.unique(subj, return_counts=True)
        out = []
        for s in uniq[counts >= min_edges]:
            edges = probed[subj == s]
            m = knowledge_metrics(np.asarray(self.pkg.successes)[edges], np.asarray(self.pkg.failures)[edges])
            out.append((self.kg.entity_id(int(s)), m))
        out.sort(key=lambda x: (-x[1].zero_sense_rate, -x[1].probed_edges, x[0]))
        return out[:k]


def _replay_window_hook(round_: int) -> None:
    """Test hook (see :data:`kgprobe.store.REPLAY_WINDOW_ENV`): pause between a round's
    logged responses and its commit, announced on stderr, so a kill can land there."""
    pause = os.environ.get(REPLAY_WINDOW_ENV)  # "SECONDS" (every round) or "SECONDS@ROUND"
    if pause:
        pause, _, only = pause.partition("@")
        if only and int(only) != round_:
            return
        print(f"kgprobe: test hook: round {round_} answered and logged, not committed", file=sys.stderr, flush=True)
        time.sleep(float(pause))


def _encode_state(state: dict) -> dict:
    """JSON-safe form of a sampler / monitor state dict, arrays tagged so they come back as arrays."""
    out = {}
    for k, v in (state or {}).items():
        if isinstance(v, np.ndarray):
            out[k] = {"__ndarray__": v.tolist(), "dtype": str(v.dtype)}
        elif isinstance(v, (np.integer,)):
            out[k] = int(v)
        elif isinstance(v, (np.floating,)):
            out[k] = float(v)
        elif isinstance(v, dict):
            out[k] = _encode_state(v)
        else:
            out[k] = v
    return out


def decode_state(state: dict) -> dict:
    """A sampler / monitor state dict as stored (:func:`_encode_state`), arrays restored."""
    out = {}
    for k, v in (state or {}).items():
        if isinstance(v, dict) and "__ndarray__" in v:
            out[k] = np.asarray(v["__ndarray__"], dtype=v["dtype"])
        elif isinstance(v, dict):
            out[k] = decode_state(v)
        else:
            out[k] = v
    return out


def _margins(verdicts) -> np.ndarray:
    """Each verdict's margin, gold log-prob minus the best wrong one (NaN where a probe has none:
    it generated its answer, or scored no wrong option)."""
    out = np.full(len(verdicts), np.nan)
    for i, v in enumerate(verdicts):
        gold, wrong = v.detail.get("gold_logprob"), v.detail.get("best_wrong_logprob")
        if gold is not None and wrong is not None and math.isfinite(gold) and math.isfinite(wrong):
            out[i] = float(gold) - float(wrong)
    return out
