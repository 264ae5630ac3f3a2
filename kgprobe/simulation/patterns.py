"""Error patterns the samplers were NOT tuned on: checks against overfitting the simulator.

:mod:`kgprobe.simulation.theta` is the calibrated generator the samplers were developed
against. These three are deliberately different, each a plausible way a real model's
errors could be laid out on a graph:

* ``clustered`` — graph-clustered weak regions: a few seed entities and every entity
  within one hop of them form weak regions; edges touching a region are wrong with
  θ ~ Beta(4, 1), all others with θ ~ Beta(1, 6). Errors cluster on the graph, but by
  region, not by the smooth logit field of the calibrated generator.
* ``u-shaped`` — independent U-shaped errors: θ ~ Beta(0.3, 0.6) per edge, no
  structure at all (a model that either knows a fact or not, facts unrelated).
* ``predicate`` — errors set by predicate alone: θ_p ~ Uniform(0, 1) per predicate and
  every edge of p has θ = θ_p (nothing but the relation matters).
"""

from __future__ import annotations

import numpy as np

from kgprobe.errors import InputError

PATTERNS = ("clustered", "u-shaped", "predicate")


def pattern_theta(pattern: str, heads: np.ndarray, tails: np.ndarray, predicates: np.ndarray, active: np.ndarray,
                  *, seed: int = 0, weak_seeds: int = 12) -> np.ndarray:
    """θ* per edge for one of :data:`PATTERNS` (module doc); dead edges get a value too."""
    rng = np.random.default_rng([seed, PATTERNS.index(pattern) if pattern in PATTERNS else 99])
    heads = np.asarray(heads, dtype=np.int64)
    tails = np.asarray(tails, dtype=np.int64)
    n = heads.size
    if pattern == "clustered":
        nodes = int(max(heads.max(), tails.max())) + 1
        # Seed entities among the active edges' endpoints, so the regions touch probe-able edges.
        ends = np.unique(np.concatenate([heads[active], tails[active]]))
        seeds = rng.choice(ends, size=min(weak_seeds, ends.size), replace=False)
        region = np.zeros(nodes, dtype=bool)
        region[seeds] = True
        touching = region[heads] | region[tails]
        region[heads[touching]] = True  # one hop out from each seed
        region[tails[touching]] = True
        weak = region[heads] | region[tails]
        return np.where(weak, rng.beta(4.0, 1.0, n), rng.beta(1.0, 6.0, n))
    if pattern == "u-shaped":
        return rng.beta(0.3, 0.6, n)
    if pattern == "predicate":
        predicates = np.asarray(predicates, dtype=np.int64)
        return rng.random(int(predicates.max()) + 1)[predicates]
    raise InputError(f"unknown error pattern {pattern!r}; choose one of {', '.join(PATTERNS)}")
