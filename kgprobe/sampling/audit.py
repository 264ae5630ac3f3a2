"""Shared pieces of every sampler: batch-size checks and the uniform audit side sample.

The audit sample is what makes an unbiased KG-level accuracy estimate possible despite
adaptive selection (see :func:`kgprobe.metrics.kg_accuracy_estimate`): each round, a
sampler with ``audit_fraction = f`` draws about ``f·n`` of its ``n`` edges uniformly at
random from the active edges, without looking at the state, and flags them in
``Selection.audit``. The count is ``floor(f·n)`` plus one with probability equal to the
fractional part, so the long-run audit share is exactly ``f``.
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


def audit_count(n: int, fraction: float, rng: np.random.Generator) -> int:
    """How many of a round's ``n`` edges are audit draws (stochastic rounding of f·n)."""
    if fraction <= 0.0:
        return 0
    expected = fraction * n
    k = math.floor(expected)
    if expected > k and rng.random() < expected - k:
        k += 1
    return min(k, n)


def draw_audit(pkg, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` distinct active edges drawn uniformly at random (int64, ascending).

    Small samples from large graphs draw edge indices uniformly and keep, in draw
    order, the first ``k`` distinct active ones: each kept edge is uniform over the
    active edges not yet kept, i.e. a simple random sample without replacement, at
    O(k) cost instead of materializing the index of all active edges.
    """
    if k == 0:
        return np.empty(0, dtype=np.int64)
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
