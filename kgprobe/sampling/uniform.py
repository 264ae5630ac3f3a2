"""Uniform random sampling ("Monte Carlo" in KGLens §2.4): n distinct active edges per round.

Every edge it picks is a design draw: the choice never looks at the state.
"""

from __future__ import annotations

import numpy as np

from kgprobe.sampling.design_draws import check_batch_size, draw_design
from kgprobe.sampling.base import Sampler, Selection


class UniformSampler(Sampler):
    """n distinct active edges uniformly at random each round, all flagged as design draws."""

    name = "uniform"

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        n = check_batch_size(pkg, n)
        edges = draw_design(pkg, n, rng)
        return Selection(edges, np.ones(n, dtype=bool))
