"""ε-greedy: per round, about ε·n uniform draws and the rest greedily by the posterior mean.

The uniform part doubles as the design sample (it never looks at the state). The greedy
part takes the active edges with the highest point estimate ``pkg.error_estimate()``
(the posterior mean α/(α+β)); ties, e.g. all edges at the prior in the first round, are
broken uniformly at random so the sampler does not sweep edges in index order.
"""

from __future__ import annotations

import numpy as np

from kgprobe.sampling.design_draws import check_batch_size, check_fraction, design_count, draw_design
from kgprobe.sampling.base import Sampler, Selection


def top_n_by_score(score: np.ndarray, pool: np.ndarray, n: int, rng) -> np.ndarray:
    """The ``n`` edges of ``pool`` with the highest ``score``, ties broken at random."""
    if n == 0:
        return np.empty(0, dtype=np.int64)
    s = score[pool]
    tiebreak = rng.random(pool.size)
    # Sort by score descending, then by the random key.
    order = np.lexsort((tiebreak, -s))[:n]
    return pool[order]


class EpsilonGreedySampler(Sampler):
    """ε·n uniform (design) edges plus the top edges by posterior mean error."""

    name = "epsilon-greedy"

    def __init__(self, *, epsilon: float = 0.1):
        self.epsilon = check_fraction("epsilon", epsilon)

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        n = check_batch_size(pkg, n)
        design = draw_design(pkg, design_count(n, self.epsilon, rng), rng)
        pool = pkg.active_edges
        if design.size:
            pool = np.setdiff1d(pool, design, assume_unique=True)
        greedy = top_n_by_score(pkg.error_estimate(), pool, n - design.size, rng)
        return Selection.design_first(design, greedy)
