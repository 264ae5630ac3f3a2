"""Focus sampling: kgprobe's own sampler, aimed at knowing the weak edges precisely.

KGLens wants the model's blind spots: the edges it loses (θ > ½) and how badly. Thompson
sampling finds them but then keeps re-asking edges whose θ is already pinned down (a
posterior concentrated near 1 keeps winning the draw), while an edge nobody has asked
about yet may be just as weak. Focus sampling instead spends each query where it
removes the most uncertainty about weak edges. On the pooled empirical-Bayes posterior
``Beta(a_j, b_j)`` of :mod:`kgprobe.sampling.pooled`, edge j scores::

    score_j = P(θ_j > ½) · Var(E[θ_j | next answer])
            = P_{Beta(a_j, b_j)}(θ > ½) · p_j (1 − p_j) / (a_j + b_j + 1)²,   p_j = a_j / (a_j + b_j)

The second factor is the expected drop in posterior variance from one more probe (the
variance of the posterior mean's update); the first restricts attention to edges that
are plausibly blind spots. The top n − a scores are probed (ties broken at random),
plus ``a`` uniform design draws (``design_fraction``, default 0.1) that feed the unbiased
KG-level accuracy estimate. The point estimate is the pooled posterior mean.

Deterministic given the seed (the only randomness is design draws and tie-breaking).
"""

from __future__ import annotations

import numpy as np
from scipy.special import betainc

from kgprobe.sampling.design_draws import check_batch_size, check_fraction
from kgprobe.sampling.base import Selection
from kgprobe.sampling.epsilon_greedy import top_n_by_score
from kgprobe.sampling.pooled import PooledPosteriorSampler


def focus_scores(a: np.ndarray, b: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """P(θ > threshold) × expected variance reduction of one probe, under Beta(a, b)."""
    nu = a + b
    p = a / nu
    # P(θ > t) = I_{1−t}(b, a): the same number as betaincc(a, b, t), ~10× faster.
    return betainc(b, a, 1.0 - threshold) * p * (1 - p) / (nu + 1) ** 2


class FocusSampler(PooledPosteriorSampler):
    """Greedy expected-variance reduction on likely-weak edges, on the pooled posterior."""

    name = "focus"

    def __init__(self, *, design_fraction: float = 0.1, threshold: float = 0.5, refit_growth: float = 1.1):
        super().__init__(design_fraction=design_fraction, refit_growth=refit_growth)
        self.threshold = check_fraction("threshold", threshold)

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        n = check_batch_size(pkg, n)
        self._maybe_fit(pkg)
        n, design, pool = self.design_draws(pkg, n, rng)
        a, b = self.posterior(pkg)
        score = np.zeros(pkg.num_edges)
        score[pool] = focus_scores(a[pool], b[pool], self.threshold)
        chosen = top_n_by_score(score, pool, n - design.size, rng)
        return Selection.design_first(design, chosen)
