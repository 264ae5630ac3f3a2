"""Synthetic graphs with a realistic degree skew, for scale benchmarks and sampler studies.

Endpoints are drawn independently from a Zipf-like law over ``num_nodes`` nodes,
``P(node i) ∝ (i + 1)^(−skew)``: a few hub nodes (a country, a language) touch a large
share of the edges, most nodes touch one or two — the shape of Wikidata neighbourhoods.
With the defaults (``N/4`` nodes, skew 0.8) the largest hub of a 10⁶-edge graph has
~25,000 edges. Generated in chunks so that building a 10⁷-edge graph needs little
memory beyond the int32 endpoint arrays.
"""

from __future__ import annotations

import numpy as np

from kgprobe.errors import InputError


def skewed_graph(
    num_edges: int,
    *,
    num_nodes: int | None = None,
    skew: float = 0.8,
    dead_fraction: float = 0.1,
    seed: int = 0,
    chunk: int = 1_000_000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(heads, tails, active) of a random multigraph with Zipf-skewed degrees (int32, bool)."""
    if num_edges < 1:
        raise InputError(f"a synthetic graph needs at least 1 edge, got {num_edges}")
    if not 0 <= dead_fraction < 1:
        raise InputError(f"dead_fraction must lie in [0, 1), got {dead_fraction}")
    nodes = int(num_nodes or max(2, num_edges // 4))
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(np.arange(1, nodes + 1, dtype=np.float64) ** -float(skew))
    cdf /= cdf[-1]
    heads = np.empty(num_edges, dtype=np.int32)
    tails = np.empty(num_edges, dtype=np.int32)
    for lo in range(0, num_edges, chunk):
        hi = min(num_edges, lo + chunk)
        heads[lo:hi] = np.minimum(np.searchsorted(cdf, rng.random(hi - lo)), nodes - 1)
        tails[lo:hi] = np.minimum(np.searchsorted(cdf, rng.random(hi - lo)), nodes - 1)
    del cdf
    active = rng.random(num_edges, dtype=np.float32) >= dead_fraction
    if not active.any():
        active[0] = True
    return heads, tails, active
