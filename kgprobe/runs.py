"""A run as Python sees it: :class:`Run`, its configuration, state, results and engine.

:func:`kgprobe.probe` and :func:`kgprobe.resume` return one that can play rounds;
:func:`kgprobe.open_run` a read-only one. Reports and comparisons read runs through it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from kgprobe.engine import FINAL_REASONS, Engine, EngineConfig, Listener, RoundSummary, metrics_to_dict, play_out
from kgprobe.errors import InputError, StoreError
from kgprobe.inputs import RUN_SUFFIX
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import LanguageModel
from kgprobe.store import RunStore

if TYPE_CHECKING:
    from kgprobe.kg.parameterized import ParameterizedKG
    from kgprobe.metrics import AccuracyEstimate, KnowledgeMetrics


def run_completion(status: str | None, being_written: bool | None = None) -> str:
    """How far a run file's run got, from its recorded status and its writer lock.

    ``finished``; ``written now`` (another process holds its writer lock); ``killed`` (the
    file still says ``running`` but no process holds it: it ended without a final record);
    ``running`` (says so, the lock not checked); ``stopped`` (stopped, interrupted or
    failed: resumable); ``unknown`` (no status recorded). ``being_written``:
    :func:`kgprobe.store.transactions.writer_active`, or None when not checked.
    """
    if not status:
        return "unknown"
    if status == "finished":
        return "finished"
    if status == "running":
        return {True: "written now", False: "killed"}.get(being_written, "running")
    return "stopped"


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
        #: A model the run started for itself (Ray workers), closed with the run.
        self.owned_model: LanguageModel | None = None
        self._pkg = None
        #: The report files written by :func:`probe` (``{"markdown", "html", "plots"}``), if any.
        self.report_paths: dict[str, str] | None = None
        #: Remove the run file when playing fails before the model's first answer is
        #: recorded (a new run whose file this process created: :func:`kgprobe.start.start_run`).
        self.discard_if_unplayed = False

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

    @property
    def nothing_left(self) -> bool:
        """Finished, and its limits leave no round to play (raise the budget or the round
        limit to extend it); always true for a read-only run."""
        if self.engine is None:
            return True
        return self.is_finished and self.stop_reason in FINAL_REASONS and self.engine.pending_stop() is not None

    # -- playing -------------------------------------------------------------------------
    def rounds(self) -> Iterator[RoundSummary]:
        """Play the remaining rounds, yielding a :class:`RoundSummary` after each.

        Leave the loop whenever you like: the run is saved after every round and can be
        continued with :func:`resume` or by iterating again.
        """
        if self.engine is None:
            raise InputError(f"run {self.path} was opened read-only; use kgprobe.resume() to continue it")
        self._pkg = None
        engine_rounds = self.engine.rounds()
        try:
            for summary in engine_rounds:
                self._pkg = None
                self.discard_if_unplayed = False
                yield summary
        except KeyboardInterrupt as exc:
            # One thrown in at the yield (engine.play_out) or landing here between rounds is
            # the engine's to record: it marks the run interrupted, as inside a round.
            if engine_rounds.gi_frame is not None:
                engine_rounds.throw(exc)
            raise
        except Exception:
            # An error, not an interruption: a run file with no answer in it would only
            # look like a run that measured nothing.
            if self.discard_if_unplayed and not self.store.holds_answers():
                self.store.discard()
            raise
        self._pkg = None

    __iter__ = rounds

    def finish(self, progress: bool = False) -> "Run":
        """Play every remaining round; returns self.

        ``progress=True`` shows progress: a live panel in a terminal, a progress bar in a
        Jupyter notebook, a line per round (and at least every 10 s) otherwise.
        """
        if not progress or self.engine is None:
            play_out(self.rounds())
            return self
        from kgprobe.live import progress_view

        with progress_view(self) as view:
            self.engine.subscribe(view)
            try:
                play_out(self.rounds())
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
        self.release_workers()

    def release_workers(self) -> None:
        """Stop the Ray workers this run started (its results stay readable). Safe to call twice."""
        owned, self.owned_model = self.owned_model, None
        if owned is not None:
            owned.close()

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
    def prior_weight(self) -> float | None:
        """How much the item-response prior's predictions count against the run's own now.

        The weight ``w`` of :meth:`kgprobe.prior.ItemPrior.stacked` in the state after the
        last committed round, which the next round would use: 1.0 before two edges have
        answers, near 0 when the run's own answers predict this model better than the
        sources do. None without a prior, or with a sampler whose predictions stay fixed.
        A prior that ends near 0 narrowed the interval little or widened it a little
        (docs/priors.md, "Where a prior helps and where it costs").
        """
        text = self.store.meta("item_prior")
        if not text:
            return None
        from kgprobe.predictions import weighed_predictions

        if self.engine is not None:
            return weighed_predictions(self.engine.pkg, self.engine.sampler, self.engine.item_prior)[1]
        from kgprobe.engine import decode_state
        from kgprobe.prior import ItemPrior
        from kgprobe.sampling import make_sampler

        cfg = self.config
        sampler = make_sampler(cfg.sampler, **cfg.sampler_options)
        # The sampler's state alone: self.pkg has the PKG state decoded already.
        state = self.store.sampler_state()
        if state is not None:
            sampler.load_state_dict(decode_state(state))
        return weighed_predictions(self.pkg, sampler, ItemPrior.from_json(text))[1]

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
        """The ``k`` edges answered wrong at least once with the highest posterior error, with
        every question and answer (edges never answered wrong are not weak, so a run with
        few wrong answers lists fewer than ``k``)."""
        s, f = self.successes, self.failures
        probed = np.flatnonzero(f > 0)
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
        predictions recorded before each round, corrected by the design-based
        probes weighted by their inclusion probabilities. A ``GroupEstimate`` (NaN with
        ``n == 0`` when the run has no design-based probe).
        """
        return self.kg_accuracy(self.estimates(confidence, up_to_round=up_to_round))

    def kg_accuracy(self, estimates: dict) -> "AccuracyEstimate":
        """:meth:`accuracy_estimate` read off :meth:`estimates`' result, for a caller that
        already has it (the estimates are computed from the whole run file)."""
        from kgprobe.estimators import DESIGN, GroupEstimate

        est = estimates["kg"]
        nan = float("nan")
        if est is None:
            return GroupEstimate(nan, nan, nan, 0, self.kg.num_active, DESIGN, "no-design-probes")
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
            "prior": _prior_summary(self.store.meta("item_prior"), self.prior_weight),
            "accuracy_estimate": est,
            "estimates_by_predicate": estimates["by_predicate"],
            "estimates_by_group": estimates["by_group"],
            "by_predicate": {k: metrics_to_dict(v) for k, v in self.by_predicate.items()},
            "by_group": {k: metrics_to_dict(v) for k, v in self.by_group.items()},
        }

    def __repr__(self) -> str:
        return f"Run({self.path!r}, status={self.status}, rounds={self.rounds_played})"


def _prior_summary(text: str, weight: float | None = None) -> dict | None:
    """Sources, their abilities, shared edges, agreement and protocol notes of a run's
    item-response prior, and its weight now (:attr:`Run.prior_weight`); None without one."""
    if not text:
        return None
    d = json.loads(text)
    # Priors stored before the agreement was measured shaped the design in full (kgprobe.prior).
    return {"sources": d["sources"], "abilities": d["abilities"], "shared_edges": d["shared_edges"],
            "agreement": float(d.get("agreement", 1.0)), "protocol_notes": list(d.get("protocol_notes", [])),
            "weight": weight}


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
