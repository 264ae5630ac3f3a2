"""Shared pieces of every sampler: batch-size checks and the draws of the design sample.

A run's design (stratified, adaptive) lives in :mod:`kgprobe.sampling.design`; it hands
its draws out through :func:`draw_design` when the engine has set ``pkg.design``. This
module keeps the uniform design (``--design uniform``, and run files made before the
others) and the drawing machinery both use.

The design sample is what makes an unbiased KG-level accuracy estimate possible despite
adaptive selection (see :mod:`kgprobe.estimators`): each round, a sampler with
``design_fraction = f`` draws about ``f·n`` of its ``n`` edges by a random design with
known inclusion probabilities, and flags them in ``Selection.design``. The count is
``floor(f·n)`` plus one with probability equal to the fractional part, so the long-run
design share is exactly ``f``.

Two designs, both drawing ``k`` distinct edges:

* **uniform** (the default, and always outside a run's engine, e.g. in the efficiency
  study): a simple random sample of the active edges, ``π_j = k / N``;
* **tilted** (a run with ``design_tilt`` λ > 0: the engine sets ``pkg.design_weights``
  before the sampler's turn, :func:`design_weights`): inclusion probabilities proportional to
  ``(1 − λ)/N + λ · θ̂_j / Σθ̂`` — part uniform, part towards the edges the predictions
  say the model gets wrong — drawn by randomized systematic
  sampling (random order, one uniform start), which gives exactly these ``π_j``. So the
  design share searches for blind spots too, and stays a probability sample: the
  estimators weight each design probe by ``1/π_j``. Why it costs the estimate little:
  edges the model likely misses have the larger residuals (y − ŷ), and sampling them
  more is what the variance-optimal design (π ∝ residual sd) does anyway; the uniform
  half bounds every weight by ``1/(1 − λ)`` times the uniform one. The default is
  uniform (λ = 0) all the same: a tilted design depends on the model's answers, so two
  models' runs no longer draw the same edges, and their comparison can no longer be
  paired — which narrows a difference's interval far more than the tilt helps.
* **prior-weighted** (a run with an item-response prior, :mod:`kgprobe.prior`, and
  ``prior_design`` λ > 0; the run default is 1/2): inclusion probabilities proportional
  to ``(1 − λ)/N + λ·σ_j/Σσ`` with ``σ_j`` the prior's predicted outcome spread
  (:func:`prior_design_weights`), drawn the same systematic way. It replaces the uniform
  base of the design (a tilt, when also asked for, leans from it).
"""

from __future__ import annotations

import math

import numpy as np

from kgprobe.errors import InputError


def check_batch_size(pkg, n) -> int:
    """``n`` as an int, or an :class:`InputError` naming why it cannot be a batch size."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise InputError(f"batch size must be an integer, got {n!r}")
    n = int(n)
    if n < 1:
        raise InputError(f"batch size must be >= 1, got {n}")
    if n > pkg.num_active:
        raise InputError(
            f"batch size {n} is larger than the graph's {pkg.num_active} active edges; "
            f"use a batch of at most {pkg.num_active}"
        )
    return n


def check_fraction(name: str, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not (0.0 <= value <= 1.0) or math.isnan(value):
        raise InputError(f"{name} must lie in [0, 1], got {value}")
    return value


def design_count(n: int, fraction: float, rng: np.random.Generator) -> int:
    """How many of a round's ``n`` edges are design draws (stochastic rounding of f·n)."""
    if fraction <= 0.0:
        return 0
    expected = fraction * n
    k = math.floor(expected)
    if expected > k and rng.random() < expected - k:
        k += 1
    return min(k, n)


#: Samplers whose design draws stay uniform (their names promise it, or they do not draw
#: from the design at all).
UNTILTED_SAMPLERS = ("uniform", "brute-force")

#: Share λ of a tilted design that follows the predicted error (the rest is uniform), when asked for.
DESIGN_TILT = 0.5
#: Above this many active edges the design stays uniform (a systematic draw permutes them all).
TILT_LIMIT = 2_000_000


def design_weights(pkg, predicted_error: np.ndarray, tilt: float = DESIGN_TILT,
                   base: np.ndarray | None = None) -> np.ndarray | None:
    """Per-edge design weights (sum 1 over active edges, 0 elsewhere) for a tilted design.

    ``(1 − λ)·base + λ·θ̂_j / Σθ̂`` with ``base`` the untilted design's weights (uniform
    when None; the prior design of :func:`prior_design_weights` in a run with a prior).
    ``base`` itself (None: uniform) when λ is 0, the graph is too large to weight, or
    every ``θ̂_j`` is 0.
    """
    if pkg.num_active > TILT_LIMIT or tilt <= 0:
        return base
    act = pkg.active
    err = np.clip(np.asarray(predicted_error, dtype=np.float64), 0.0, 1.0) * act
    total = float(err.sum())
    if base is None:
        base = np.where(act, 1.0 / pkg.num_active, 0.0)
    if total <= 0:
        return base
    return (1.0 - tilt) * base + tilt * err / total


#: Share λ of the design that follows an item-response prior's predicted outcome spread
#: (the run default, when the run has a prior).
PRIOR_DESIGN_SHARE = 0.5


def prior_design_weights(pkg, predicted_right: np.ndarray, share: float = PRIOR_DESIGN_SHARE) -> np.ndarray | None:
    """Design weights from a prior's predictions: ``(1 − λ)/N + λ·σ_j / Σσ``, ``σ_j = sqrt(p_j(1 − p_j))``.

    Why: the variance of the difference estimator from one design draw is
    ``Σ_j E[(y_j − ŷ_j)²] / (N² π_j)``, smallest for ``π_j ∝ sqrt(E[(y_j − ŷ_j)²])``
    (Neyman allocation). Before any answer of the new model, the prior's ``p_j(1 − p_j)``
    is the best guess of that residual: edges every earlier model got right (or wrong)
    are drawn less, edges the prior leaves at a coin flip more. The uniform share
    ``1 − λ`` bounds every weight by ``1/(1 − λ)`` times the uniform one, so a prior that
    is wrong about an edge costs at most that factor there. The weights come from the
    prior alone (``p_j`` at the sources' mean ability), not from the run's answers: two
    runs with the same prior and seed draw the same design edges and still compare
    paired. None (uniform) when ``λ`` is 0 or the graph is too large to weight.
    """
    p = np.clip(np.asarray(predicted_right, dtype=np.float64), 0.0, 1.0)
    # The same mix as a tilt from the uniform design, with the spread as what it leans on.
    return design_weights(pkg, np.sqrt(p * (1.0 - p)), share)


def inclusion_probabilities(weights: np.ndarray, k: int) -> np.ndarray:
    """``π_j ∝ weights_j`` with ``Σ π = k`` and every ``π_j ≤ 1`` (capped edges get 1, the rest rescaled)."""
    w = np.asarray(weights, dtype=np.float64)
    pi = np.zeros_like(w)
    if k <= 0:
        return pi
    free = w > 0
    if int(free.sum()) < k:
        raise ValueError(f"cannot draw {k} distinct edges from {int(free.sum())} with positive weight")
    capped = np.zeros_like(free)
    while True:
        left = k - int(capped.sum())
        if left == 0 or not (free & ~capped).any():  # every edge that can be drawn is drawn
            return np.where(capped, 1.0, 0.0)
        scale = left / float(w[free & ~capped].sum())
        trial = np.where(free & ~capped, w * scale, 0.0)
        over = trial > 1.0
        if not over.any():
            pi = np.where(capped, 1.0, trial)
            return pi
        capped |= over


def draw_systematic(pi: np.ndarray, rng: np.random.Generator, order: np.ndarray | None = None) -> np.ndarray:
    """Randomized systematic sampling: edge j is drawn with probability exactly ``π_j``.

    The edges with ``π > 0`` in a random order, their ``π`` laid end to end on [0, k);
    the points ``u, u + 1, …, u + k − 1`` (``u`` uniform in [0, 1)) pick the edges they
    fall on. Each edge covers an interval of length ``π_j ≤ 1``, so it is picked at most
    once and with probability ``π_j``; exactly ``k = Σ π`` edges are picked. ``order``: the
    edges with ``π > 0`` in the order to lay them out (random when None; an order grouped
    by stratum gives each stratum the floor or ceiling of its expected draws).
    """
    if order is None:
        cand = np.flatnonzero(pi > 0)
        order = cand[rng.permutation(cand.size)]
    cum = np.cumsum(pi[order])
    u = rng.random()
    # Points u + i in (cum_{j−1}, cum_j]: count of points ≤ cum_j minus those ≤ cum_{j−1}.
    upto = np.floor(cum - u + 1.0 - 1e-12)
    hits = np.diff(np.concatenate([[0.0], upto])) > 0
    return np.sort(order[hits]).astype(np.int64)


def design_inclusion(pkg, k: int, edges: np.ndarray) -> np.ndarray:
    """Inclusion probabilities of ``edges``, drawn as ``k`` design draws from ``pkg``'s current design."""
    w = getattr(pkg, "design_weights", None)
    if w is None:
        return np.full(np.asarray(edges).size, k / pkg.num_active)
    return inclusion_probabilities(w, k)[np.asarray(edges, dtype=np.int64)]


def draw_design(pkg, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` distinct active edges of the current design (module docstring), int64, ascending.

    Tilted when the engine has set ``pkg.design_weights``; otherwise uniformly at random:

    Small samples from large graphs draw edge indices uniformly and keep, in draw
    order, the first ``k`` distinct active ones: each kept edge is uniform over the
    active edges not yet kept, i.e. a simple random sample without replacement, at
    O(k) cost instead of materializing the index of all active edges.
    """
    if k == 0:
        return np.empty(0, dtype=np.int64)
    design = getattr(pkg, "design", None)
    if design is not None:  # the run's stratified or adaptive design (kgprobe.sampling.design)
        return design.draw(k)
    weights = getattr(pkg, "design_weights", None)
    if weights is not None:
        return draw_systematic(inclusion_probabilities(weights, k), rng)
    n_act = pkg.num_active
    if k * 16 > n_act:
        return np.sort(rng.choice(pkg.active_edges, size=k, replace=False)).astype(np.int64)
    kept: list[int] = []
    seen: set[int] = set()
    share = n_act / pkg.num_edges
    while len(kept) < k:
        draws = rng.integers(0, pkg.num_edges, size=int((k - len(kept)) / share * 1.25) + 8)
        for e in draws[pkg.active[draws]].tolist():
            if e not in seen:
                seen.add(e)
                kept.append(e)
                if len(kept) == k:
                    break
    return np.sort(np.asarray(kept, dtype=np.int64))


def round_design_weights(pkg, predicted_right: np.ndarray, *, sampler: str, tilt: float,
                         base: np.ndarray | None) -> np.ndarray | None:
    """One round's design weights (None = uniform), as the engine sets ``pkg.design_weights``.

    ``base`` is the run's untilted design (None for uniform, or the prior design of
    :func:`prior_design_weights`); a tilt λ > 0 leans from it towards edges predicted
    wrong. Samplers in :data:`UNTILTED_SAMPLERS` keep the uniform design.
    """
    if sampler in UNTILTED_SAMPLERS:
        return None
    if tilt > 0:
        return design_weights(pkg, 1.0 - np.asarray(predicted_right, dtype=np.float64), tilt, base=base)
    return base
