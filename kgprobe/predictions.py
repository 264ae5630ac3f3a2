"""The predictions the design leans on and the estimator subtracts.

Before each round the engine records every edge's predicted chance of a right answer
``ŷ_j`` (:func:`round_predictions`); the round's design leans on them
(:mod:`kgprobe.sampling.design`) and the difference estimator of
:mod:`kgprobe.estimators` subtracts them. Any predictions made before the round keep the
estimate unbiased; better ones only narrow its interval, so this module is where the
run's knowledge goes in:

* the sampler's posterior (:func:`sampler_predictions`: for ``focus``, pooled over
  predicates and one-hop neighbours);
* the edge's (predicate, object) cell (:func:`cell_predictions`);
* with ``--prior``, other models' answers through the item-response prior, stacked
  against the two (:func:`weighed_predictions`, :meth:`kgprobe.prior.ItemPrior.stacked`).

docs/design-measured.md ("Cell predictions") has the measurements behind the mix.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from kgprobe.sampling.pooled import predicate_error_rates


def round_means(predicted_right: np.ndarray, labels: np.ndarray, active: np.ndarray,
                names: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``{name: (mean ŷ, mean ŷ(1−ŷ))}`` over the active edges of each label index.

    ``labels[j]`` is edge j's group index into ``names``; inactive edges are ignored.
    """
    act = np.asarray(active, bool)
    lab = np.asarray(labels)[act]
    p = np.asarray(predicted_right, dtype=np.float64)[act]
    k = len(names)
    count = np.bincount(lab, minlength=k).astype(np.float64)
    mean = np.bincount(lab, weights=p, minlength=k)
    var = np.bincount(lab, weights=p * (1 - p), minlength=k)
    return {str(names[g]): (float(mean[g] / count[g]), float(var[g] / count[g])) for g in range(k) if count[g] > 0}


#: Samplers whose design draws are without replacement *across* rounds (an epoch visits
#: every edge once): given the past, an edge already visited this epoch cannot be drawn,
#: so the per-round inclusion probability k / N holds only marginally. Their predictions
#: are held fixed (independent of the answers), which keeps the estimate unbiased.
FIXED_PREDICTION_SAMPLERS = ("brute-force",)


def round_predictions(pkg, sampler=None, item_prior=None) -> np.ndarray:
    """The predictions the engine records before a round (see :func:`predicted_right`)."""
    return weighed_predictions(pkg, sampler, item_prior)[0]


def weighed_predictions(pkg, sampler=None, item_prior=None) -> tuple[np.ndarray, float | None]:
    """:func:`round_predictions` and the item-response prior's stacking weight (None: not stacked)."""
    if sampler is not None and getattr(sampler, "name", "") in FIXED_PREDICTION_SAMPLERS:
        if item_prior is not None:
            return item_prior.initial_mean(), None
        return np.full(pkg.num_edges, 0.5), None
    if item_prior is not None:
        # The prior weighed against the run's own predictions by how well each predicts
        # answers it has not seen (kgprobe.prior.ItemPrior.stacked): both halves of the
        # run's prediction without the edge's own answers.
        own, cell_loo = _mixed_predictions(pkg, sampler)
        loo = sampler.prior_estimate(pkg) if sampler is not None else None
        other_prior = None if loo is None else 0.5 * (1.0 - loo) + 0.5 * cell_loo
        return item_prior.stacked(pkg, own, other_prior)
    return predicted_right(pkg, sampler), None


#: Pseudo-count of the predicate-level prior in :func:`sampler_predictions`.
PREDICATE_STRENGTH = 2.0
#: Pseudo-counts of :func:`cell_predictions`: the (predicate, object) cell's rate is shrunk
#: to its predicate's with the first, an edge's own answers weigh against the cell's rate
#: with the second.
CELL_STRENGTH = 2.0
OWN_STRENGTH = 2.0


def predicted_right(pkg, sampler=None) -> np.ndarray:
    """Every edge's predicted chance of a right answer, from the state before a round.

    The mean of two predictions: the sampler's (:func:`sampler_predictions`: its posterior,
    pooled over predicates and neighbours) and the edge's (predicate, object) cell's
    (:func:`cell_predictions`). Why both: on the built KGs most edges are facts like "X is
    in country Y", and how well a model knows the places of country Y varies far more
    between countries than the propagated neighbour counts track early in a run; the
    cell's own rate learns it from a few answers. Averaging the two narrowed the design's
    KG interval on all 16 recorded sweeps (docs/design-measured.md, "Cell predictions"). Any
    prediction keeps the estimate unbiased; better ones narrow the interval.
    """
    return _mixed_predictions(pkg, sampler)[0]


def _mixed_predictions(pkg, sampler=None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`predicted_right` and the cell's leave-one-out prediction it was made from."""
    cell, cell_loo = cell_predictions(pkg)
    return 0.5 * (sampler_predictions(pkg, sampler) + cell), cell_loo


def _cell_keys(pkg) -> np.ndarray:
    """Each edge's (predicate, object) cell index, cached on the PKG (its edges never change)."""
    keys = getattr(pkg, "_cell_keys", None)
    if keys is None or keys.size != pkg.num_edges:
        tails = np.asarray(pkg.tails, dtype=np.int64)
        preds = np.zeros_like(tails) if pkg.predicates is None else np.asarray(pkg.predicates, dtype=np.int64)
        span = int(tails.max()) + 1 if tails.size else 1
        keys = np.unique(preds * span + tails, return_inverse=True)[1].ravel() if tails.size else tails
        try:
            pkg._cell_keys = keys
        except AttributeError:  # a PKG type with slots: recompute next time
            pass
    return keys


def cell_predictions(pkg) -> tuple[np.ndarray, np.ndarray]:
    """Every edge's chance of a right answer from the answers in its (predicate, object) cell.

    Returns ``(ŷ, ŷ_loo)``. ``ŷ_loo`` is the cell's share of right answers without the
    edge's own, shrunk to its predicate's share (all of the predicate's answers, the
    predicate's in turn shrunk to the run's overall share) with
    :data:`CELL_STRENGTH`; ``ŷ = (K·ŷ_loo + s_j) / (K + s_j + f_j)`` adds the edge's own
    right and wrong answers at strength ``K`` = :data:`OWN_STRENGTH`. Before any answer
    every edge is at ½. A predicate whose objects are all distinct (a cell per edge)
    falls back to the predicate's share.
    """
    f = np.asarray(pkg.failures, dtype=np.float64)
    s = np.asarray(pkg.successes, dtype=np.float64)
    # The predicate's share of right answers, shrunk to the run's overall share: the
    # complement of the pooled posterior's predicate error rate (the same counts).
    predicate = 1.0 - predicate_error_rates(pkg)
    keys = _cell_keys(pkg)
    cell_right = np.bincount(keys, weights=s)[keys] - s
    cell_total = np.bincount(keys, weights=s + f)[keys] - s - f
    loo = (cell_right + CELL_STRENGTH * predicate) / (cell_total + CELL_STRENGTH)
    return (OWN_STRENGTH * loo + s) / (OWN_STRENGTH + s + f), loo


def sampler_predictions(pkg, sampler=None) -> np.ndarray:
    """The sampler's prediction of every edge's chance of a right answer.

    A sampler with its own posterior (one that overrides ``estimate``, e.g. the pooled
    empirical-Bayes posterior of ``focus``) predicts ``1 − sampler.estimate(pkg)``.
    Otherwise the PKG's Beta posterior, with the flat prior replaced by the predicate's
    pooled error rate ``(F_p + 1) / (T_p + 2)`` (direct probes of the predicate) at
    strength :data:`PREDICATE_STRENGTH`: an unprobed edge far from any probe is
    predicted like its predicate, not at ½.
    """
    if sampler is not None:
        from kgprobe.sampling.base import Sampler

        if type(sampler).estimate is not Sampler.estimate:
            return 1.0 - np.asarray(sampler.estimate(pkg), dtype=np.float64)
    a0, b0 = pkg.prior
    alpha = pkg.alpha - a0
    beta = pkg.beta - b0
    f = pkg.failures.astype(np.float64)
    s = pkg.successes.astype(np.float64)
    if pkg.predicates is not None and pkg.predicates.size:
        k = int(pkg.predicates.max()) + 1
        fp = np.bincount(pkg.predicates, weights=f, minlength=k)
        tp = np.bincount(pkg.predicates, weights=f + s, minlength=k)
        pi = ((fp + 1.0) / (tp + 2.0))[pkg.predicates]
    else:
        pi = np.full(pkg.num_edges, (f.sum() + 1.0) / (f.sum() + s.sum() + 2.0))
    theta = (alpha + PREDICATE_STRENGTH * pi) / (alpha + beta + PREDICATE_STRENGTH)
    return 1.0 - theta
