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
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

from kgprobe.engine import (
    FINAL_REASONS,
    Engine,
    EngineConfig,
    Listener,
    RoundSummary,
    metrics_to_dict,
)
from kgprobe.errors import DamagedFileError, InputError, StoreError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import LanguageModel
from kgprobe.settings import RUN_DEFAULTS
from kgprobe.store import RunStore, kg_fingerprint

if TYPE_CHECKING:
    from kgprobe.kg.parameterized import ParameterizedKG
    from kgprobe.metrics import AccuracyEstimate, KnowledgeMetrics

#: File suffix of run stores created in a directory.
RUN_SUFFIX = ".kgrun"
#: The path of a run kept in memory (``store=None``).
MEMORY = ":memory:"
#: Share of each batch drawn by the design with known inclusion probabilities
#: (:mod:`kgprobe.sampling.audit`); the one value lives in
#: :data:`kgprobe.settings.RUN_DEFAULTS` (all of the batch, see the reason there).
DEFAULT_AUDIT_FRACTION = RUN_DEFAULTS["audit_fraction"]


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

    def __init__(self, store: RunStore, engine: Engine | None = None) -> None:
        self.store = store
        self.engine = engine
        self._pkg = None
        #: The report files written by :func:`probe` (``{"markdown", "html", "plots"}``), if any.
        self.report_paths: dict[str, str] | None = None

    # -- identity ---------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.store.path

    @property
    def config(self) -> EngineConfig:
        return EngineConfig.from_dict(self.store.config)

    @property
    def protocol(self) -> dict:
        """What exactly this run measured (see :mod:`kgprobe.protocol`)."""
        from kgprobe.protocol import protocol_of_store

        return protocol_of_store(self.store)

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

    def finish(self, progress: bool = False) -> "Run":
        """Play every remaining round; returns self.

        ``progress=True`` shows progress: a live panel in a terminal, a progress bar in a
        Jupyter notebook, a line per round (and at least every 10 s) otherwise.
        """
        if not progress or self.engine is None:
            for _ in self.rounds():
                pass
            return self
        from kgprobe.live import progress_view

        with progress_view(self) as view:
            self.engine.subscribe(view)
            try:
                for _ in self.rounds():
                    pass
            finally:
                if view in self.engine.listeners:
                    self.engine.listeners.remove(view)
        return self

    def save(self, path: str | os.PathLike) -> str:
        """Copy this run (an in-memory one in particular) into a new run file ``path``.

        The copy holds everything the run holds (KG, settings, protocol, every response
        and round) and can be reported, compared and resumed. Returns the path.
        """
        import sqlite3

        target = Path(path)
        if target.suffix != RUN_SUFFIX:
            target = target.with_name(target.name + RUN_SUFFIX)
        if target.exists():
            raise InputError(f"{target} already exists; choose a new file name for run.save()")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            dest = sqlite3.connect(str(target))
            try:
                self.store._conn.backup(dest)
            finally:
                dest.close()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot save the run to {target}: {exc}") from None
        return str(target)

    def subscribe(self, listener: Listener) -> None:
        """Receive every engine event (the live view uses this)."""
        if self.engine is None:
            raise InputError("a read-only run has no events")
        self.engine.subscribe(listener)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: object) -> None:
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
    def pkg(self) -> "ParameterizedKG":
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
    def metrics(self) -> "KnowledgeMetrics":
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

    def accuracy_estimate(self, confidence: float = 0.95, *, up_to_round: int | None = None) -> "AccuracyEstimate":
        """Unbiased KG-level accuracy (share of active edges the model answers right), with a CI.

        The design-based, model-assisted estimate of :mod:`kgprobe.estimators`: the
        predictions recorded before each round, corrected by the design-based (audit)
        probes weighted by their inclusion probabilities. A ``GroupEstimate`` (NaN with
        ``n == 0`` when the run has no design-based probe).
        """
        from kgprobe.estimators import DESIGN, GroupEstimate

        est = self.estimates(confidence, up_to_round=up_to_round)["kg"]
        if est is None:
            nan = float("nan")
            return GroupEstimate(nan, nan, nan, 0, self.kg.num_active, DESIGN, "no-design-probes")
        nan = float("nan")
        return GroupEstimate(**{k: (nan if v is None and k in ("estimate", "low", "high", "se") else
                                    float("inf") if v is None and k == "df" else v) for k, v in est.items()})

    def estimates(self, confidence: float = 0.95, *, up_to_round: int | None = None) -> dict:
        """KG, per-predicate and per-entity-group accuracy with intervals, each labelled design- or model-based.

        ``{"kg": {...} | None, "by_predicate": {predicate id: {...}}, "by_group": {group: {...}}}``
        (see :func:`kgprobe.estimators.run_estimates`); ``up_to_round``: as it stood after
        that round (the report plots the estimate's history).
        """
        from kgprobe.estimators import run_estimates

        store = self.store if up_to_round is None else _StoreUpToRound(self.store, up_to_round)
        return run_estimates(store, confidence=confidence)

    def summary(self) -> dict:
        """Everything a report needs, JSON-able."""
        estimates = self.estimates()
        est = estimates["kg"]
        return {
            "run": self.path,
            "protocol": self.protocol,
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


class _StoreUpToRound:
    """A read-only view of a run store as it stood after round ``last`` (for estimate histories)."""

    def __init__(self, store: RunStore, last: int):
        self._store, self._last = store, int(last)
        self.kg = store.kg

    def probe_arrays(self) -> dict:
        probes = self._store.probe_arrays()
        keep = probes["round"] <= self._last
        return {k: v[keep] for k, v in probes.items()}

    def round_predictions(self) -> dict:
        return {r: p for r, p in self._store.round_predictions().items() if r <= self._last}

    def last_round(self) -> int:
        return min(self._store.last_round(), self._last)


# -- entry points ------------------------------------------------------------------------
class _Default:
    """Marks an argument left at kgprobe's default (see :mod:`kgprobe.settings`)."""

    def __repr__(self) -> str:
        return "DEFAULT"


#: The value of every :func:`probe` argument that was not given: the setting then comes
#: from :data:`kgprobe.settings.RUN_DEFAULTS`, exactly as for ``kgprobe run``.
DEFAULT: Any = _Default()


def probe(
    kg: KnowledgeGraph | str | os.PathLike = DEFAULT,
    model: LanguageModel | str = DEFAULT,
    method: str = DEFAULT,
    *,
    budget: int | None = DEFAULT,
    batch_size: int = DEFAULT,
    max_rounds: int | None = DEFAULT,
    sampler: str = DEFAULT,
    seed: int = DEFAULT,
    convergence: bool | tuple | dict | None = True,
    propagation_weight: float = DEFAULT,
    probe_options: dict | None = None,
    sampler_options: dict | None = None,
    model_options: dict | None = None,
    audit_fraction: float | None = DEFAULT,
    store: str | os.PathLike | RunStore | None = DEFAULT,
    report: bool = True,
    progress: bool = True,
    lazy: bool = False,
    listeners: Iterable[Listener] = (),
    prior: str | os.PathLike | Iterable[str | os.PathLike] | None = None,
    design_tilt: float = DEFAULT,
    prior_design: float = DEFAULT,
    design: str = DEFAULT,
    design_fraction: float | None = DEFAULT,
) -> "Run":
    """Probe ``model`` on ``kg`` with an adaptive sampler, within ``budget`` model queries.

    Every argument left out takes the value ``kgprobe run`` uses when its option is left
    out (:data:`kgprobe.settings.RUN_DEFAULTS`): the embedded countries KG, the default
    model, ZP-LKE with 20 examples and 19 distractors, the ``focus`` sampler with every
    probe a design draw, budget 256 queries, batch 32, seed 0, saved under ``runs/`` and
    reported there. So ``kgprobe.probe()`` and ``kgprobe run`` measure the same thing.

    Parameters
    ----------
    kg:
        A KnowledgeGraph, a KG file path, or an embedded KG name (``"countries"``, ``"geo"``).
    model:
        A LanguageModel or a spec for :func:`kgprobe.models.registry.load_model`
        (``"default"``, a hub id such as ``"HuggingFaceTB/SmolLM2-135M"``, a local
        directory, ``"hf:…"``, ``"vllm:…"``, ``"openai:model@base_url"``).
    method:
        A probe name (:data:`kgprobe.probes.PROBES`): ``"zp-lke"``, ``"hgp"``, ``"yes-no"`` …
    budget:
        Model queries to spend (one per scored option set or generation); at least one
        batch. ``None``: no budget (the run stops on convergence or after 60 rounds).
    batch_size, max_rounds, sampler, seed, propagation_weight:
        As in KGLens: edges per round, a round cap, the sampler name, the seed that makes
        the whole run reproducible, the one-hop propagation weight (0 disables it).
    probe_options, sampler_options, model_options:
        Options merged key by key over the method's / sampler's defaults (type-checked);
        backend settings for a model spec (e.g. ``{"dtype": "bfloat16"}``).
    audit_fraction:
        Share of each batch drawn by the design with known inclusion probabilities
        (uniform, or tilted towards edges predicted wrong by ``design_tilt``) that the
        unbiased estimates rest on; the rest is the sampler's own choice (for samplers
        that take ``audit_fraction``). Default 1.
    convergence:
        True (default window 5, tolerance 0.01), False (never stop on convergence),
        ``(window, tolerance)`` or ``{"window":…, "tolerance":…, "stop": bool}``.
    store:
        Left out: a new run file under ``runs/``. A path ending in ``.kgrun`` (that run
        file is created), any other path (a directory that gets a new uniquely named run
        file), ``None`` or ``":memory:"`` (in memory; keep it with :meth:`Run.save`), or
        an open :class:`RunStore`.
    report:
        Write the Markdown/HTML report next to the run file when the run has played
        (not for in-memory or lazy runs; see :func:`kgprobe.report.write_report`).
    progress:
        Show progress while playing: a live panel in a terminal, a progress bar in
        Jupyter, a line per round (and at least every 10 s) otherwise; False: silent.
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
    design:
        How design probes are drawn (:mod:`kgprobe.sampling.design`): ``adaptive``,
        ``stratified`` or ``uniform``; see docs/design.md.
    design_fraction:
        Share of each batch drawn by the design (the old keyword ``audit_fraction`` still
        works, with a DeprecationWarning).
    prior_design:
        With ``prior``: share (0–1) of the design probabilities that follows the prior's
        predicted outcome spread, so edges the prior leaves uncertain are drawn more often
        (:func:`kgprobe.sampling.audit.prior_design_weights`; default 0.5, 0 = uniform).
        Fixed by the prior alone: runs with the same prior and seed compare paired.
    """
    from kgprobe.settings import engine_config

    if audit_fraction is not DEFAULT:
        warnings.warn("kgprobe.probe(audit_fraction=...) is now design_fraction=...; the old name still works "
                      "for now", DeprecationWarning, stacklevel=2)
        if design_fraction is DEFAULT:
            design_fraction = audit_fraction
    settings = probe_settings(kg=kg, method=method, budget=budget, batch_size=batch_size, max_rounds=max_rounds,
                              sampler=sampler, seed=seed, convergence=convergence,
                              propagation_weight=propagation_weight, probe_options=probe_options,
                              sampler_options=sampler_options, audit_fraction=design_fraction,
                              design_tilt=design_tilt, prior_design=prior_design, design=design)
    kg_obj = resolve_kg(settings["kg"])
    config = engine_config(settings)
    config.validate(kg_obj)
    _check_names(config)
    item_prior = fit_item_prior(kg_obj, prior)
    if model is DEFAULT:
        model = settings["model"]
    model_obj, spec = resolve_model(model, model_options)
    check_model(config, model_obj)
    run_store = _open_new_store(settings["out"] if store is DEFAULT else store, kg_obj, config, model_obj, spec)
    if model_options and isinstance(model, str):
        run_store.set_meta("model_options", json.dumps(model_options, sort_keys=True))
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
        try:
            run.finish(progress=progress)
        except BaseException:
            # The run file stays resumable; release it (and its lock) for `resume`.
            run.close()
            raise
        if report and run.path != MEMORY:
            from kgprobe.report import write_report

            run.report_paths = write_report(run)
    return run


def probe_settings(**kwargs) -> dict:
    """The resolved settings of :func:`probe` for these arguments (those left at
    :data:`DEFAULT` come from :data:`kgprobe.settings.RUN_DEFAULTS`), as ``kgprobe run``
    resolves its options: through :func:`kgprobe.settings.resolve_run_settings`."""
    from kgprobe.settings import resolve_run_settings

    convergence = kwargs.pop("convergence", True)
    given = {k: v for k, v in kwargs.items()
             if v is not DEFAULT and not (k.endswith("_options") and v is None)}
    given.update(_convergence_settings(convergence))
    kg = given.get("kg")
    if isinstance(kg, os.PathLike):
        given["kg"] = str(kg)
    elif kg is not None and not isinstance(kg, str):
        given.pop("kg")  # a KnowledgeGraph object: nothing to check or merge
    settings = resolve_run_settings(("kgprobe.probe()", given))
    if kg is not None and not isinstance(kg, (str, os.PathLike)):
        settings["kg"] = kg
    return settings


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
    if store is None or str(store) == MEMORY:
        path = MEMORY
    else:
        # A path ending in .kgrun names the run file; anything else is a directory (created
        # if needed) that gets a new, uniquely named run file.
        p = Path(store)
        path = str(p if p.suffix == RUN_SUFFIX else new_run_path(p, kg.name, config.method))
    from kgprobe.protocol import build_protocol

    protocol = build_protocol(config, kg, model, spec)
    run_store = RunStore.create(path, config=config.to_dict(), kg=kg, model_identity=model.identity,
                                model_spec=spec, model_name=protocol["model"]["label"])
    try:
        run_store.set_meta("protocol", json.dumps(protocol, sort_keys=True))
    except BaseException:
        run_store.close()
        raise
    return run_store


def open_run(path: str | os.PathLike) -> Run:
    """A finished or interrupted run, read-only (reports, comparisons)."""
    return Run(RunStore.open(find_run(path), writable=False))


def find_run(ref: str | os.PathLike, runs_dir: str | os.PathLike = "runs") -> str:
    """A run file path from a path or a run name (looked up in ``runs_dir``)."""
    if str(ref) == MEMORY:
        raise InputError(
            "':memory:' is not a run file: an in-memory run lives only in the Run object that made it. "
            "Keep playing it with run.rounds() / run.finish(), or save it with run.save('my-run.kgrun') "
            "and resume that file"
        )
    p = Path(ref)
    if p.is_file():
        return str(p)
    for candidate in (Path(runs_dir) / p.name, Path(runs_dir) / (p.name + RUN_SUFFIX)):
        if candidate.is_file():
            return str(candidate)
    raise InputError(f"no run file {str(ref)!r} (looked in {runs_dir}/ too); pass the path printed by `kgprobe run`")


def _repair_or_refuse(store: RunStore) -> None:
    """Verify a run file before resuming it; drop a damaged last round (saying so), refuse worse."""
    result = store.verify()
    if result.ok:
        return
    if not result.only_last_round:
        store.require_intact()  # raises, naming the damage
    summary = result.summary()
    dropped = store.drop_last_round(result)
    warnings.warn(f"run file {store.path}: dropped {dropped}, which was damaged ({summary}); "
                  "it is played again", RuntimeWarning, stacklevel=3)


def resume(
    path: str | os.PathLike,
    model: LanguageModel | str | None = None,
    *,
    budget: int | None = None,
    max_rounds: int | None = None,
    lazy: bool = False,
    progress: bool = True,
    listeners: Iterable[Listener] = (),
) -> Run:
    """Continue a stopped, interrupted or killed run from its last committed round.

    ``model`` defaults to the spec the run was started with; a model whose identity
    differs from the recorded one is refused (the run would mix two models).
    ``budget`` / ``max_rounds`` raise the run's limits, e.g. to extend a finished run.
    """
    store = RunStore.open(find_run(path), writable=True)
    try:
        _repair_or_refuse(store)
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
            raise DamagedFileError(f"run file {store.path} is damaged: its KG does not match its fingerprint")
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
        try:
            run.finish(progress=progress)
        except BaseException:
            run.close()
            raise
    return run
