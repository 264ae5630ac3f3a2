"""The public Python API: budgeted probing of a model on a knowledge graph.

>>> import kgprobe
>>> run = kgprobe.probe("countries", "default", method="zp-lke", budget=256, seed=0)
>>> run.metrics.zero_sense_rate, run.accuracy_estimate()
>>> for edge in run.weakest(5): print(edge)

Iterate rounds and stop early (the run stays resumable):

>>> run = kgprobe.probe("countries", "default", budget=2048, lazy=True, store="runs/")
>>> for summary in run.rounds():
...     if summary.metrics.win_rate > 0.5:
...         break
>>> run = kgprobe.resume(run.path, "default")   # later, or after a crash

The names exported from ``kgprobe`` are :func:`probe`, :func:`resume`, :func:`open_run`
and :class:`Run`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from kgprobe.engine import (
    FINAL_REASONS,
    Engine,
    EngineConfig,
    Listener,
    RoundSummary,
    metrics_to_dict,
)
from kgprobe.errors import InputError, StoreError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import LanguageModel
from kgprobe.store import RunStore, kg_fingerprint

#: File suffix of run stores created in a directory.
RUN_SUFFIX = ".kgrun"
#: Share of each batch drawn by the design with known inclusion probabilities
#: (:mod:`kgprobe.sampling.audit`): all of it. At a default budget of 256 queries no
#: smaller share gives a 95 % interval of ±6 points on the KG accuracy (a design-unbiased
#: estimate's variance is about residual variance / design probes; see the README's
#: replay table), and the design is tilted towards edges predicted wrong, so it keeps
#: part of the blind-spot search. A smaller share gives the sampler's own choices
#: more of the budget at the price of a wider interval.
DEFAULT_AUDIT_FRACTION = 1.0


def with_audit_fraction(sampler: str, options: dict | None, fraction: float | None) -> dict:
    """Sampler options plus ``audit_fraction`` if the sampler takes one and none is set."""
    import inspect

    from kgprobe.sampling import SAMPLERS

    options = dict(options or {})
    cls = SAMPLERS.get(sampler)
    if cls is not None and fraction is not None and "audit_fraction" not in options:
        if "audit_fraction" in inspect.signature(cls.__init__).parameters:
            options["audit_fraction"] = fraction
    return options


# -- resolving user inputs -----------------------------------------------------------------
def resolve_kg(kg: KnowledgeGraph | str | os.PathLike) -> KnowledgeGraph:
    """A KnowledgeGraph, a KG file path, or the name of an embedded KG."""
    if isinstance(kg, KnowledgeGraph):
        return kg
    if isinstance(kg, (str, os.PathLike)):
        text = str(kg)
        if os.path.exists(text):
            from kgprobe.kg.formats import load_kg

            return load_kg(text)
        from kgprobe.sources.embedded import EMBEDDED_KGS, load_embedded_kg

        if text in EMBEDDED_KGS:
            return load_embedded_kg(text)
        raise InputError(
            f"KG {text!r} is neither an existing file nor an embedded KG ({', '.join(EMBEDDED_KGS)})"
        )
    raise InputError(f"kg must be a KnowledgeGraph, a file path or an embedded KG name, not {type(kg).__name__}")


def resolve_model(model: LanguageModel | str, options: dict | None = None) -> tuple[LanguageModel, str]:
    """``(model, spec)``: a LanguageModel as is, or a spec string loaded through the registry.

    ``options`` are keyword arguments for the backend (e.g. ``base_urls`` for several
    OpenAI-compatible servers, ``tensor_parallel_size`` for vLLM).
    """
    if isinstance(model, LanguageModel):
        return model, ""
    if isinstance(model, str):
        from kgprobe.models.registry import load_model

        try:
            return load_model(model, **(options or {})), model
        except TypeError as exc:
            raise InputError(f"model {model!r} does not take these options {sorted(options or {})}: {exc}") from None
    raise InputError(f"model must be a LanguageModel or a model spec string, not {type(model).__name__}")


def new_run_path(directory: str | os.PathLike, kg_name: str, method: str) -> Path:
    """A fresh, unique run file name in ``directory``: ``<UTC time>-<kg>-<method>-<random>.kgrun``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in f"{kg_name or 'kg'}-{method}")
    return Path(directory) / f"{stamp}-{safe}-{secrets.token_hex(3)}{RUN_SUFFIX}"


def _convergence_settings(convergence) -> dict:
    if convergence is None or convergence is True:
        return {}
    if convergence is False:
        return {"stop_on_convergence": False}
    if isinstance(convergence, dict):
        allowed = {"window", "tolerance", "stop"}
        bad = set(convergence) - allowed
        if bad:
            raise InputError(f"unknown convergence setting(s) {sorted(bad)}; use window, tolerance, stop")
        out = {}
        if "window" in convergence:
            out["convergence_window"] = convergence["window"]
        if "tolerance" in convergence:
            out["convergence_tolerance"] = convergence["tolerance"]
        if "stop" in convergence:
            out["stop_on_convergence"] = bool(convergence["stop"])
        return out
    if isinstance(convergence, (tuple, list)) and len(convergence) == 2:
        return {"convergence_window": convergence[0], "convergence_tolerance": convergence[1]}
    raise InputError("convergence must be True, False, (window, tolerance) or a dict with window/tolerance/stop")


# -- results -----------------------------------------------------------------------------
@dataclass
class ProbeAnswer:
    round: int
    question: str
    answer: str
    correct: bool


@dataclass
class WeakEdge:
    """A probed edge with its evidence, for "where is the model weak" lists."""

    edge: int
    subject: str
    predicate: str
    object: str
    successes: int
    failures: int
    error_estimate: float
    """Posterior mean error rate from the edge's own probes, (n + 1) / (m + n + 2)."""
    answers: list[ProbeAnswer] = field(default_factory=list)

    def __str__(self) -> str:
        last = self.answers[-1] if self.answers else None
        said = f" — model said {last.answer!r}" if last else ""
        return (f"({self.subject}, {self.predicate}, {self.object}): {self.successes} right / "
                f"{self.failures} wrong{said}")


class Run:
    """One probing run: its configuration, state, results, and (if live) its engine.

    A run from :func:`probe` or :func:`resume` can play rounds (:meth:`rounds`,
    :meth:`finish`); one from :func:`open_run` is read-only. Results (``metrics``,
    ``by_predicate``, ``weakest``, ``accuracy_estimate`` …) always reflect the last
    committed round.
    """

    def __init__(self, store: RunStore, engine: Engine | None = None):
        self.store = store
        self.engine = engine
        self._pkg = None

    # -- identity ---------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.store.path

    @property
    def config(self) -> EngineConfig:
        return EngineConfig.from_dict(self.store.config)

    @property
    def kg(self) -> KnowledgeGraph:
        return self.engine.kg if self.engine else self.store.kg

    @property
    def model_identity(self) -> str:
        return self.store.model_identity

    @property
    def model_name(self) -> str:
        return self.store.model_name

    @property
    def status(self) -> str:
        return self.store.status

    @property
    def stop_reason(self) -> str:
        return self.store.stop_reason

    @property
    def is_finished(self) -> bool:
        return self.store.status == "finished"

    # -- playing -------------------------------------------------------------------------
    def rounds(self) -> Iterator[RoundSummary]:
        """Play the remaining rounds, yielding a :class:`RoundSummary` after each.

        Leave the loop whenever you like: the run is saved after every round and can be
        continued with :func:`resume` or by iterating again.
        """
        if self.engine is None:
            raise InputError(f"run {self.path} was opened read-only; use kgprobe.resume() to continue it")
        self._pkg = None
        for summary in self.engine.rounds():
            self._pkg = None
            yield summary
        self._pkg = None

    __iter__ = rounds

    def finish(self) -> "Run":
        """Play every remaining round; returns self."""
        for _ in self.rounds():
            pass
        return self

    def subscribe(self, listener: Listener) -> None:
        """Receive every engine event (the live view uses this)."""
        if self.engine is None:
            raise InputError("a read-only run has no events")
        self.engine.subscribe(listener)

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- results -------------------------------------------------------------------------
    @property
    def rounds_played(self) -> int:
        return self.store.last_round()

    @property
    def queries_spent(self) -> int:
        h = self.store.history()
        return h[-1]["queries_spent"] if h else 0

    @property
    def pkg(self):
        """The parameterized KG after the last committed round."""
        if self.engine is not None:
            return self.engine.pkg
        if self._pkg is None:
            from kgprobe.kg.parameterized import ParameterizedKG

            cfg = self.config
            pkg = ParameterizedKG.from_kg(self.kg, prior=tuple(cfg.prior), propagation_weight=cfg.propagation_weight)
            if self.store.last_round() > 0:
                pkg.load_state_dict(self.store.pkg_state())
            self._pkg = pkg
        return self._pkg

    @property
    def successes(self) -> np.ndarray:
        return np.asarray(self.pkg.successes)

    @property
    def failures(self) -> np.ndarray:
        return np.asarray(self.pkg.failures)

    @property
    def metrics(self):
        """Win / zero-sense / all-sense rates over every probed edge (``KnowledgeMetrics``)."""
        from kgprobe.metrics import knowledge_metrics

        return knowledge_metrics(self.successes, self.failures)

    def _grouped(self, labels: np.ndarray) -> dict[str, Any]:
        from kgprobe.metrics import grouped_metrics

        probed = (self.successes + self.failures) > 0
        out = grouped_metrics(self.successes, self.failures, labels)
        # Groups none of whose edges were probed carry no information; leave them out.
        seen = set(np.unique(labels[probed]).tolist()) if probed.any() else set()
        return {str(k): v for k, v in out.items() if k in seen}

    @property
    def by_predicate(self) -> dict[str, Any]:
        """Metrics per predicate label."""
        kg = self.kg
        labels = np.asarray([kg.predicates[kg.predicate_id(i)].label for i in kg.predicate_of.tolist()], dtype=object)
        return self._grouped(labels)

    @property
    def by_group(self) -> dict[str, Any]:
        """Metrics per entity group of the subject (``Entity.group``: country, city, …)."""
        kg = self.kg
        groups = np.asarray([kg.entities[e].group or "(none)" for e in kg.entity_ids], dtype=object)
        return self._grouped(groups[kg.subjects])

    def by_entity(self, min_edges: int = 1) -> dict[str, Any]:
        """Metrics per subject entity label, for subjects with ≥ ``min_edges`` probed edges."""
        from kgprobe.metrics import knowledge_metrics

        kg = self.kg
        s, f = self.successes, self.failures
        probed = np.flatnonzero((s + f) > 0)
        subj = kg.subjects[probed]
        out = {}
        for idx in np.unique(subj):
            edges = probed[subj == idx]
            if edges.size >= min_edges:
                out[kg.label(kg.entity_id(int(idx)))] = knowledge_metrics(s[edges], f[edges])
        return out

    def history(self) -> list[dict]:
        """One dict per committed round: round, queries, queries_spent, elapsed, metrics, …"""
        return self.store.history()

    def weakest(self, k: int = 10) -> list[WeakEdge]:
        """The ``k`` probed edges with the highest posterior error, with every question and answer."""
        s, f = self.successes, self.failures
        probed = np.flatnonzero((s + f) > 0)
        if probed.size == 0:
            return []
        err = (f[probed] + 1.0) / (s[probed] + f[probed] + 2.0)
        # Highest error first; among equals, more evidence first, then edge order.
        order = np.lexsort((probed, -(s[probed] + f[probed]), -err))[:k]
        kg = self.kg
        out = []
        for i in order:
            j = int(probed[i])
            t = kg.triple(j)
            answers = [ProbeAnswer(p.round, p.question, p.answer, p.correct) for p in self.store.probes(edge=j)]
            out.append(
                WeakEdge(j, kg.label(t.subject), kg.predicate_label(t.predicate), kg.label(t.object),
                         int(s[j]), int(f[j]), float(err[i]), answers)
            )
        return out

    def accuracy_estimate(self, confidence: float = 0.95):
        """Unbiased KG-level accuracy (share of active edges the model answers right), with a CI.

        The design-based, model-assisted estimate of :mod:`kgprobe.estimators`: the
        predictions recorded before each round, corrected by the design-based (audit)
        probes weighted by their inclusion probabilities. A ``GroupEstimate`` (NaN with
        ``n == 0`` when the run has no design-based probe).
        """
        from kgprobe.estimators import DESIGN, GroupEstimate

        est = self.estimates(confidence)["kg"]
        if est is None:
            nan = float("nan")
            return GroupEstimate(nan, nan, nan, 0, self.kg.num_active, DESIGN, "no-design-probes")
        nan = float("nan")
        return GroupEstimate(**{k: (nan if v is None and k in ("estimate", "low", "high", "se") else
                                    float("inf") if v is None and k == "df" else v) for k, v in est.items()})

    def estimates(self, confidence: float = 0.95) -> dict:
        """KG, per-predicate and per-entity-group accuracy with intervals, each labelled design- or model-based.

        ``{"kg": {...} | None, "by_predicate": {predicate id: {...}}, "by_group": {group: {...}}}``
        (see :func:`kgprobe.estimators.run_estimates`).
        """
        from kgprobe.estimators import run_estimates

        return run_estimates(self.store, confidence=confidence)

    def summary(self) -> dict:
        """Everything a report needs, JSON-able."""
        estimates = self.estimates()
        est = estimates["kg"]
        return {
            "run": self.path,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "kg": {"name": self.kg.name, "fingerprint": self.store.meta("kg_fingerprint"),
                   "active_edges": self.kg.num_active, "edges": self.kg.num_edges},
            "model": self.model_name,
            "model_identity": self.model_identity,
            "config": self.config.to_dict(),
            "rounds": self.rounds_played,
            "queries_spent": self.queries_spent,
            "metrics": metrics_to_dict(self.metrics),
            "prior": _prior_summary(self.store.meta("item_prior")),
            "accuracy_estimate": est,
            "estimates_by_predicate": estimates["by_predicate"],
            "estimates_by_group": estimates["by_group"],
            "by_predicate": {k: metrics_to_dict(v) for k, v in self.by_predicate.items()},
            "by_group": {k: metrics_to_dict(v) for k, v in self.by_group.items()},
        }

    def __repr__(self) -> str:
        return f"Run({self.path!r}, status={self.status}, rounds={self.rounds_played})"


def _prior_summary(text: str) -> dict | None:
    """Sources, their abilities and the shared edges of a run's item-response prior (None without one)."""
    if not text:
        return None
    d = json.loads(text)
    return {"sources": d["sources"], "abilities": d["abilities"], "shared_edges": d["shared_edges"]}


def _safe(fn):
    """The estimate, or None when there is none (no audit probes in the run)."""
    est = fn()
    return None if est.n == 0 else est


# -- entry points ------------------------------------------------------------------------
def probe(
    kg: KnowledgeGraph | str | os.PathLike,
    model: LanguageModel | str = "default",
    method: str = "zp-lke",
    *,
    budget: int | None = None,
    batch_size: int = 64,
    max_rounds: int | None = None,
    sampler: str = "thompson",
    seed: int = 0,
    convergence: bool | tuple | dict | None = True,
    propagation_weight: float = 1.0,
    probe_options: dict | None = None,
    sampler_options: dict | None = None,
    audit_fraction: float | None = DEFAULT_AUDIT_FRACTION,
    store: str | os.PathLike | RunStore | None = None,
    lazy: bool = False,
    listeners: Iterable[Listener] = (),
    prior: str | os.PathLike | Iterable[str | os.PathLike] | None = None,
    design_tilt: float = 0.0,
) -> Run:
    """Probe ``model`` on ``kg`` with an adaptive sampler, within ``budget`` model queries.

    Parameters
    ----------
    kg:
        A KnowledgeGraph, a KG file path, or an embedded KG name (``"countries"``, ``"geo"``).
    model:
        A LanguageModel or a spec for :func:`kgprobe.models.registry.load_model`
        (``"default"``, a local path, ``"hf:…"``, ``"vllm:…"``, ``"openai:model@base_url"``).
    method:
        A probe name (:data:`kgprobe.probes.PROBES`): ``"zp-lke"``, ``"yes-no"``, ``"hard"`` …
    budget:
        Model queries to spend (one per scored option set or generation); at least one batch.
    batch_size, max_rounds, sampler, seed, propagation_weight:
        As in KGLens: edges per round, a round cap, the sampler name, the seed that makes
        the whole run reproducible, the one-hop propagation weight (0 disables it).
    audit_fraction:
        Share of each batch drawn by the design with known inclusion probabilities
        (uniform half, half towards edges predicted wrong) that the unbiased estimates
        rest on; the rest is the sampler's own choice (for samplers that take
        ``audit_fraction``; None leaves the sampler's own default). Default 1.
    convergence:
        True (default window 5, tolerance 0.01), False (never stop on convergence),
        ``(window, tolerance)`` or ``{"window":…, "tolerance":…, "stop": bool}``.
    store:
        None (in memory), a path ending in ``.kgrun`` (that run file is created), any
        other path (a directory, created if needed, that gets a new uniquely named run
        file), or an open :class:`RunStore`.
    lazy:
        Return before playing any round; iterate :meth:`Run.rounds` yourself.
    listeners:
        Callables receiving every engine event.
    prior:
        Run files or recorded sweeps of *other* models on the same KG (one or a list):
        an item-response model of edge difficulty fitted from their answers starts the
        PKG and predicts each outcome (:mod:`kgprobe.prior`). Another KG, or no shared
        edge, is an ``InputError``.
    design_tilt:
        Share (0–1) of the design probabilities leaning towards edges predicted wrong
        (:mod:`kgprobe.sampling.audit`); 0 (default) keeps the design uniform, so runs
        with the same seed share their design edges and compare paired.
    """
    kg_obj = resolve_kg(kg)
    config = EngineConfig(
        method=method,
        sampler=sampler,
        batch_size=batch_size,
        budget=budget,
        max_rounds=max_rounds,
        seed=seed,
        propagation_weight=propagation_weight,
        probe_options=dict(probe_options or {}),
        sampler_options=with_audit_fraction(sampler, sampler_options, audit_fraction),
        design_tilt=design_tilt,
        **_convergence_settings(convergence),
    )
    config.validate(kg_obj)
    _check_names(config)
    item_prior = fit_item_prior(kg_obj, prior)
    model_obj, spec = resolve_model(model)
    check_model(config, model_obj)
    run_store = _open_new_store(store, kg_obj, config, model_obj, spec)
    try:
        if item_prior is not None:
            run_store.set_meta("item_prior", item_prior.to_json())
        engine = Engine.from_config(kg_obj, model_obj, config, run_store)
    except BaseException:
        run_store.close()
        raise
    run = Run(run_store, engine)
    for listener in listeners:
        run.subscribe(listener)
    if not lazy:
        run.finish()
    return run


def fit_item_prior(kg: KnowledgeGraph, prior):
    """The :class:`kgprobe.prior.ItemPrior` from ``prior`` references (None when there are none)."""
    if prior is None:
        return None
    refs = [prior] if isinstance(prior, (str, os.PathLike)) else list(prior)
    if not refs:
        return None
    from kgprobe.prior import prior_from_refs

    return prior_from_refs(kg, [str(r) for r in refs])


def _check_names(config: EngineConfig) -> None:
    """Fail on an unknown method or sampler before a model is loaded (loading takes seconds)."""
    from kgprobe.probes import make_probe
    from kgprobe.sampling import make_sampler

    make_probe(config.method, **config.probe_options)
    make_sampler(config.sampler, **config.sampler_options)


def check_model(config: EngineConfig, model: LanguageModel) -> None:
    """Refuse a scoring method on a model that cannot score, before a run file is created."""
    from kgprobe.engine import check_compatible
    from kgprobe.probes import make_probe

    check_compatible(make_probe(config.method, **config.probe_options), model, config.method)


def _open_new_store(store, kg: KnowledgeGraph, config: EngineConfig, model: LanguageModel, spec: str) -> RunStore:
    if isinstance(store, RunStore):
        return store
    if store is None:
        path = ":memory:"
    else:
        # A path ending in .kgrun names the run file; anything else is a directory (created
        # if needed) that gets a new, uniquely named run file.
        p = Path(store)
        path = str(p if p.suffix == RUN_SUFFIX else new_run_path(p, kg.name, config.method))
    return RunStore.create(path, config=config.to_dict(), kg=kg, model_identity=model.identity, model_spec=spec,
                           model_name=model.name)


def open_run(path: str | os.PathLike) -> Run:
    """A finished or interrupted run, read-only (reports, comparisons)."""
    return Run(RunStore.open(find_run(path), writable=False))


def find_run(ref: str | os.PathLike, runs_dir: str | os.PathLike = "runs") -> str:
    """A run file path from a path or a run name (looked up in ``runs_dir``)."""
    p = Path(ref)
    if p.is_file():
        return str(p)
    for candidate in (Path(runs_dir) / p.name, Path(runs_dir) / (p.name + RUN_SUFFIX)):
        if candidate.is_file():
            return str(candidate)
    raise InputError(f"no run file {str(ref)!r} (looked in {runs_dir}/ too); pass the path printed by `kgprobe run`")


def resume(
    path: str | os.PathLike,
    model: LanguageModel | str | None = None,
    *,
    budget: int | None = None,
    max_rounds: int | None = None,
    lazy: bool = False,
    listeners: Iterable[Listener] = (),
) -> Run:
    """Continue a stopped, interrupted or killed run from its last committed round.

    ``model`` defaults to the spec the run was started with; a model whose identity
    differs from the recorded one is refused (the run would mix two models).
    ``budget`` / ``max_rounds`` raise the run's limits, e.g. to extend a finished run.
    """
    store = RunStore.open(find_run(path), writable=True)
    try:
        config = EngineConfig.from_dict(store.config)
        changed = False
        if budget is not None and budget != config.budget:
            config.budget, changed = budget, True
        if max_rounds is not None and max_rounds != config.max_rounds:
            config.max_rounds, changed = max_rounds, True
        if changed:
            config.validate(store.kg)
            store.set_meta("config", json.dumps(config.to_dict(), sort_keys=True))
        if model is None:
            if not store.model_spec:
                raise InputError(
                    f"run {store.path} was started with a model object, not a spec; pass the model to resume()"
                )
            model = store.model_spec
        options = json.loads(store.meta("model_options") or "{}") if isinstance(model, str) else None
        model_obj, _ = resolve_model(model, options)
        if model_obj.identity != store.model_identity:
            raise InputError(
                f"run {store.path} was made with model {store.model_identity!r}, not {model_obj.identity!r}; "
                "resume it with the same model"
            )
        kg = store.kg
        if kg_fingerprint(kg) != store.meta("kg_fingerprint"):
            raise StoreError(f"run file {store.path} is damaged: its KG does not match its fingerprint")
        engine = Engine.from_config(kg, model_obj, config, store)
    except BaseException:
        store.close()
        raise
    run = Run(store, engine)
    for listener in listeners:
        run.subscribe(listener)
    if store.status == "finished" and store.stop_reason in FINAL_REASONS and engine.pending_stop() is not None:
        return run
    if not lazy:
        run.finish()
    return run
