"""Focus sampling: kgprobe's own sampler, aimed at knowing the weak edges precisely.

KGLens wants the model's blind spots: the edges it loses (θ > ½) and how badly. Thompson
sampling finds them but then keeps re-asking edges whose θ is already pinned down (a
posterior concentrated near 1 keeps winning the draw), while an edge nobody has asked
about yet may be just as weak. Focus sampling instead spends each query where it
removes the most uncertainty about weak edges, on the pooled empirical-Bayes posterior
``Beta(a_j, b_j)`` of :mod:`kgprobe.sampling.pooled`. Each round's picks (after the
design draws) come from two rankings:

* **focus score** (the other ``1 − value_share`` of the picks)::

      score_j = P(θ_j > ½) · Var(E[θ_j | next answer])
              = P_{Beta(a_j, b_j)}(θ > ½) · p_j (1 − p_j) / (a_j + b_j + 1)²,   p_j = a_j / (a_j + b_j)

  the expected drop in posterior variance from one more probe, on edges that are
  plausibly blind spots;
* **top-share value** (``value_share`` of the picks, default ½, taken first): the
  expected one-step drop of the squared error an edge would add to the error over the
  hardest ``top_share`` of the graph::

      L(a, b) = E[(θ − μ)² · 1{θ ≥ t}],   μ = a / (a + b)
      value_j = L(a_j, b_j) − [p_j L(a_j + 1, b_j) + (1 − p_j) L(a_j, b_j + 1)]

  where t is the level above which the run's posteriors put ``top_share`` of the edges
  (the mean over edges of P(θ_j ≥ t) equals ``top_share``), so t comes from the learned
  θ distribution, not a fixed ½. Why both: the focus score lets an edge answered right
  once wait, which is right when such edges are "always right" (the recorded real
  answers), but loses when a right answer is weak evidence (θ spread over a U-shape:
  top edges whose first answer was right carry most of the error); the value re-asks
  such an edge exactly as far as its posterior still reaches above t. When the hardest
  edges are the "always wrong" ones, t sits near 1 and an edge answered right has next
  to no mass there. Alone, the value loses where the focus score wins (weak regions
  pooled over the graph); half and half gained on U-shaped errors and on the recorded
  sweeps and gave up part of the focus score's lead on clustered regions
  (docs/samplers-tried.md).

The design draws (``design_fraction`` of each batch, :mod:`kgprobe.sampling.design_draws`)
feed the unbiased KG-level accuracy estimate; a run's default fraction is 1, every probe
a design draw, so these rankings choose probes only when it is lowered. The point
estimate is the pooled posterior mean. Deterministic given the seed (the only
randomness is design draws and tie-breaking).
"""

from __future__ import annotations

import numpy as np
from scipy.special import betainc

from kgprobe.sampling.design_draws import check_batch_size, check_fraction
from kgprobe.sampling.base import Selection
from kgprobe.sampling.epsilon_greedy import top_n_by_score
from kgprobe.sampling.pooled import PooledPosteriorSampler

#: The hardest share of edges the top-share value aims at: 600 of the 3,246 active edges
#: of the embedded ``countries`` KG, the top-k of the efficiency study (KGLens §2.4).
TOP_SHARE = 600 / 3246
#: At most this many edges' posteriors set the level t (an even stride through the active edges).
LEVEL_SAMPLE = 20_000


def focus_scores(a: np.ndarray, b: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """P(θ > threshold) × expected variance reduction of one probe, under Beta(a, b)."""
    nu = a + b
    p = a / nu
    # P(θ > t) = I_{1−t}(b, a): the same number as betaincc(a, b, t), ~10× faster.
    return betainc(b, a, 1.0 - threshold) * p * (1 - p) / (nu + 1) ** 2


def top_level(a: np.ndarray, b: np.ndarray, share: float, weights: np.ndarray | None = None) -> float:
    """The level t with mean_j P(θ_j ≥ t) = ``share`` under Beta(a_j, b_j) (bisection to 2⁻³⁰).

    ``weights``: how many edges each (a_j, b_j) stands for (default one each).
    """
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if float(np.average(betainc(b, a, 1.0 - mid), weights=weights)) > share:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _tail_loss(a: np.ndarray, b: np.ndarray, level: float) -> np.ndarray:
    """E[(θ − μ)² 1{θ ≥ level}] under Beta(a, b), μ its mean.

    E[θ^k 1{θ ≥ t}] = B(a + k, b)/B(a, b) · P_{Beta(a + k, b)}(θ ≥ t), and the tail of
    Beta(a + k, b) is I_{1−t}(b, a + k).
    """
    nu = a + b
    mu = a / nu
    x = 1.0 - level
    m0 = betainc(b, a, x)
    m1 = mu * betainc(b, a + 1, x)
    m2 = mu * (a + 1) / (nu + 1) * betainc(b, a + 2, x)
    return m2 - 2 * mu * m1 + mu * mu * m0


def top_share_values(a: np.ndarray, b: np.ndarray, level: float) -> np.ndarray:
    """Expected one-step drop of E[(θ − μ)² 1{θ ≥ level}] from one more answer, under Beta(a, b)."""
    p = a / (a + b)
    after = p * _tail_loss(a + 1, b, level) + (1 - p) * _tail_loss(a, b + 1, level)
    return _tail_loss(a, b, level) - after


class FocusSampler(PooledPosteriorSampler):
    """Focus score and top-share value, half the picks each, on the pooled posterior (module doc)."""

    name = "focus"

    def __init__(self, *, design_fraction: float = 0.1, threshold: float = 0.5, refit_growth: float = 1.1,
                 top_share: float = TOP_SHARE, value_share: float = 0.5):
        super().__init__(design_fraction=design_fraction, refit_growth=refit_growth)
        self.threshold = check_fraction("threshold", threshold)
        self.top_share = check_fraction("top_share", top_share)
        self.value_share = check_fraction("value_share", value_share)

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        n = check_batch_size(pkg, n)
        self._maybe_fit(pkg)
        n, design, pool = self.design_draws(pkg, n, rng)
        a, b = self.posterior(pkg)
        rest = n - design.size
        by_value = int(round(self.value_share * rest))
        first = np.empty(0, dtype=np.int64)
        if by_value and 0.0 < self.top_share < 1.0:
            act = pkg.active_edges
            sample = act[:: max(1, act.size // LEVEL_SAMPLE)]
            pairs, counts = np.unique(a[sample] + 1j * b[sample], return_counts=True)
            level = top_level(pairs.real, pairs.imag, self.top_share, weights=counts)
            value = np.zeros(pkg.num_edges)
            # Many edges share a posterior (e.g. unasked edges of one predicate): compute once per pair.
            pairs, back = np.unique(a[pool] + 1j * b[pool], return_inverse=True)
            value[pool] = top_share_values(pairs.real, pairs.imag, level)[back.ravel()]
            first = top_n_by_score(value, pool, by_value, rng)
        score = np.zeros(pkg.num_edges)
        score[pool] = focus_scores(a[pool], b[pool], self.threshold)
        score[first] = -1.0  # taken already; focus scores are >= 0
        chosen = np.concatenate([first, top_n_by_score(score, pool, rest - first.size, rng)])
        return Selection.design_first(design, chosen)
