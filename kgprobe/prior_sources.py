"""Reading a prior's sources: other models' recorded answers from run files and recorded
sweeps, and fitting the prior (:mod:`kgprobe.prior`) from them."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kgprobe.errors import InputError
from kgprobe.prior import AnswerCounts, ItemPrior, fit_prior, triple_keys


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
    if probes["edge"].size == 0:
        raise InputError(f"the run {path} has no probes; a prior needs recorded answers")
    edges, inv = np.unique(probes["edge"], return_inverse=True)
    right = np.bincount(inv, weights=probes["correct"].astype(np.float64), minlength=edges.size)
    total = np.bincount(inv, minlength=edges.size).astype(np.float64)
    return AnswerCounts(str(path), model, kg.name, triple_keys(kg, edges), right, total)


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
                        np.full(edges.size, float(correct.shape[1])))


def prior_from_refs(kg, refs: list[str]) -> ItemPrior:
    """Load every reference (run file or sweep) and fit the prior over ``kg``."""
    return fit_prior(kg, [load_answers(r) for r in refs])
