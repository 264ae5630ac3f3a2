"""Reading a prior's sources: other models' recorded answers from run files and recorded
sweeps, and fitting the prior (:mod:`kgprobe.prior`) from them.

A source recorded with another probe method or other probe options than the run (the
paper's ZP-LKE examples against today's balanced ones, 50 examples against 20) still
gives a valid prior: the estimators stay unbiased whatever the predictions. But its
answers measure a somewhat different thing, so they may predict the run's less well and
narrow its interval less. :func:`protocol_notes` names each such difference, the run
warns (:class:`PriorProtocolWarning`) and its report lists them.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np

from kgprobe.errors import InputError
from kgprobe.prior import AnswerCounts, ItemPrior, fit_prior, triple_keys


class PriorProtocolWarning(UserWarning):
    """A prior's source was recorded with another probe method or other probe options than the run."""


def load_answers(ref: str | os.PathLike) -> AnswerCounts:
    """Recorded answers of a run file (``.kgrun``) or a recorded sweep (name or path)."""
    ref = str(ref)
    path = Path(ref)
    if path.suffix == ".kgrun" or (path.is_file() and _is_sqlite(path)):
        return _run_answers(path)
    return _sweep_answers(ref)


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _run_answers(path: Path) -> AnswerCounts:
    from kgprobe.store import RunStore

    with RunStore.open(path) as store:
        kg = store.kg
        probes = store.probe_arrays()
        model = store.model_identity
        config = store.config
    if probes["edge"].size == 0:
        raise InputError(f"the run {path} has no probes; a prior needs recorded answers")
    edges, inv = np.unique(probes["edge"], return_inverse=True)
    right = np.bincount(inv, weights=probes["correct"].astype(np.float64), minlength=edges.size)
    total = np.bincount(inv, minlength=edges.size).astype(np.float64)
    return AnswerCounts(str(path), model, kg.name, triple_keys(kg, edges), right, total,
                        method=config.get("method"), probe_options=dict(config.get("probe_options") or {}))


def _sweep_answers(ref: str) -> AnswerCounts:
    from kgprobe.sweep import load_sweep

    try:
        sweep = load_sweep(ref)
    except InputError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"cannot read a prior from {ref!r}: not a run file (.kgrun) nor a recorded sweep ({exc})") \
            from None
    return sweep_answers(sweep, ref)


def sweep_answers(sweep, source: str) -> AnswerCounts:
    """The recorded answers of a :class:`~kgprobe.sweep.Sweep` (keys from the sweep, else its KG)."""
    edges = np.asarray(sweep.edges, dtype=np.int64)
    if getattr(sweep, "keys", None) is not None:
        keys = [tuple(k) for k in np.asarray(sweep.keys).tolist()]
    else:
        from kgprobe.sources.embedded import load_embedded_kg

        keys = triple_keys(load_embedded_kg(sweep.kg), edges)
    correct = np.asarray(sweep.correct, dtype=bool)
    return AnswerCounts(source, sweep.model, sweep.kg, keys, correct.sum(axis=1).astype(np.float64),
                        np.full(edges.size, float(correct.shape[1])), method=sweep.method,
                        probe_options=dict(sweep.probe_options or {}))


def prior_from_refs(kg, refs: list[str], *, method: str | None = None,
                    probe_options: dict | None = None) -> ItemPrior:
    """Load every reference (run file or sweep) and fit the prior over ``kg``.

    With the run's ``method`` and ``probe_options``, sources recorded otherwise are noted
    in the prior (:attr:`ItemPrior.protocol_notes`) and warned about.
    """
    sources = [load_answers(r) for r in refs]
    prior = fit_prior(kg, sources)
    if method is not None:
        prior.protocol_notes = protocol_notes(sources, method, probe_options or {})
        for note in prior.protocol_notes:
            warnings.warn(f"the prior source {note}; its answers may predict this run's less well (the estimates stay "
                          "valid, the interval may narrow less)", PriorProtocolWarning, stacklevel=2)
    return prior


def protocol_notes(sources: list[AnswerCounts], method: str, probe_options: dict) -> list[str]:
    """One line per source recorded with another method or other probe options than
    ``method`` / ``probe_options`` (each side with the options it predates at the value it
    was made with, :func:`kgprobe.settings.recorded_probe_options`); empty when all agree.

    E.g. ``'default' was recorded with examples='paper', this run uses examples='balanced'``.
    Sources of unknown protocol are not noted. Options are compared key by key as
    ``kgprobe compare`` compares two runs (:func:`kgprobe.protocol.protocol_differences`).
    """
    from kgprobe.protocol import protocol_differences
    from kgprobe.settings import recorded_probe_options

    ours = {"probe_options": recorded_probe_options(method, probe_options)}
    notes = []
    for src in sources:
        if src.method is None:
            continue
        if src.method != method:
            notes.append(f"{src.source!r} was recorded with the method {src.method!r}, this run uses {method!r}")
            continue
        theirs = {"probe_options": recorded_probe_options(src.method, src.probe_options or {})}
        diffs = protocol_differences(theirs, ours, fields=("probe_options",))
        if diffs:
            keys = [d.field.removeprefix("probe_options.") for d in diffs]
            notes.append(f"{src.source!r} was recorded with "
                         + ", ".join(f"{k}={json.dumps(d.a)}" for k, d in zip(keys, diffs))
                         + ", this run uses " + ", ".join(f"{k}={json.dumps(d.b)}" for k, d in zip(keys, diffs)))
    return notes
