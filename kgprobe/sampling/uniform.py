"""Uniform random sampling ("Monte Carlo" in KGLens §2.4): n distinct active edges per round.

Every edge it picks is an audit draw: the choice never looks at the state.
"""

from __future__ import annotations

import numpy as np

from kgprobe.sampling.audit import check_batch_size, draw_audit
from kgprobe.sampling.base import Sampler, Selection


class UniformSampler(Sampler):
    """n distinct active edges uniformly at random each round, all flagged as audit."""

    name = "uniform"

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        n = check_batch_size(pkg, n)
        edges = draw_audit(pkg, n, rng)
        return Selection(edges, np.ones(n, dtype=bool))
