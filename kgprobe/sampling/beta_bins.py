"""Coarse bins of (α, β) that bound Beta tail probabilities, for exact fast Thompson draws.

Drawing θ̃ ~ Beta(α_j, β_j) for ten million edges with ``Generator.beta`` costs over a
second, yet a Thompson round only needs the top ``n`` draws. :mod:`kgprobe.sampling.thompson`
avoids the full draw by thresholding; to do that cheaply it needs, per edge, an upper
bound on ``P(θ̃_j > τ)`` that is one table look-up. This module provides it.

Each axis is cut into ``LEVELS`` geometric levels ``[c·r^i, c·r^(i+1))`` with
``r = RATIO`` and ``c`` the smaller prior parameter (α ≥ α₀ and β ≥ β₀ always, so no
value falls below ``c``); the last level is open-ended. An edge's bin is
``level(α) · 256 + level(β)`` (uint16), dead edges get ``DEAD``. Because
``P(Beta(a, b) > τ)`` grows with ``a`` and shrinks with ``b``, evaluating it at the bin's
(largest α, smallest β) corner bounds every edge in the bin from above, and the opposite
corner from below.
"""

from __future__ import annotations

import numpy as np

LEVELS = 255
RATIO = 1.05
DEAD = np.uint16(65535)
_LOG_RATIO = float(np.log(RATIO))
# Widen the corners a hair so float round-off in the level computation never puts a
# value outside its bin's bounds.
_SLACK = 1e-9


def levels(x: np.ndarray, base: float) -> np.ndarray:
    """Geometric level of each value (0 .. LEVELS-1)."""
    lv = np.floor(np.log(x / base) / _LOG_RATIO)
    np.clip(lv, 0, LEVELS - 1, out=lv)
    return lv.astype(np.uint16)


def bin_of(alpha: np.ndarray, beta: np.ndarray, base: float) -> np.ndarray:
    return levels(alpha, base) * np.uint16(256) + levels(beta, base)


def bin_corners(bins: np.ndarray, base: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(α_lo, α_hi, β_lo, β_hi) of each bin; ``inf`` for the open top level."""
    ia = (bins // 256).astype(np.float64)
    ib = (bins % 256).astype(np.float64)

    def lo(i):
        return base * RATIO**i * (1 - _SLACK)

    def hi(i):
        return np.where(i >= LEVELS - 1, np.inf, base * RATIO ** (i + 1) * (1 + _SLACK))

    return lo(ia), hi(ia), lo(ib), hi(ib)


def ensure_bins(pkg) -> np.ndarray:
    """The bin of every edge of ``pkg``, computed once and then kept current by ``pkg.update``."""
    if pkg._bins is None:
        base = min(pkg.prior)
        bins = np.empty(pkg.num_edges, dtype=np.uint16)
        step = 1 << 20  # chunks keep the float temporaries small on 10⁷-edge graphs
        for lo in range(0, pkg.num_edges, step):
            hi = min(pkg.num_edges, lo + step)
            bins[lo:hi] = bin_of(pkg.alpha[lo:hi], pkg.beta[lo:hi], base)
            bins[lo:hi][~pkg.active[lo:hi]] = DEAD
        pkg._bins = bins
    return pkg._bins


def refresh_bins(pkg, edges: np.ndarray) -> None:
    """Recompute the bins of ``edges`` (duplicates allowed) after their α/β changed."""
    if pkg._bins is None or edges.size == 0:
        return
    edges = edges[pkg.active[edges]]
    pkg._bins[edges] = bin_of(pkg.alpha[edges], pkg.beta[edges], min(pkg.prior))
