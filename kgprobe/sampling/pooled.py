"""Pooled Thompson sampling: kgprobe's own sampler and estimator.

KGLens adds every neighbour's result to an edge's Beta counts at full weight. That
pools evidence (good when errors cluster) but with fixed, unbounded weight: an edge at
a hub soon carries hundreds of neighbour results that swamp its own, and when errors do
not cluster the pooled counts are pure bias. Pooled Thompson sampling keeps the pooling
but lets the data decide how much to trust it:

* **prior mean from the neighbourhood and predicate** — for edge j with predicate p,
  ``μ_j = (F_j + c·π_p) / (F_j + S_j + c)`` where ``F_j, S_j`` are the neighbour
  failures/successes propagated to j (``pkg.neighbour_counts()``; zero when w = 0),
  ``π_p = (failures_p + 2·g) / (probes_p + 2)`` the predicate's pooled error rate,
  ``g`` the global error rate of all probes, and ``c`` a pseudo-count;
* **prior strength by empirical Bayes** — the prior is ``Beta(K·μ_j, K·(1−μ_j))``;
  ``(K, c)`` maximize the beta-binomial marginal likelihood of every probed edge's own
  counts over a small grid (``K`` from 0.05 to 205, ``c`` in {1, 4, 16}; a small K is a
  U-shaped prior, which is what facts that are either known or not call for). ``μ_j`` never
  uses edge j's own results, so this is an honest fit: when neighbours predict an edge,
  K grows; when they do not (uncorrelated errors), K shrinks and the edge's own counts
  dominate — propagation cannot hurt much;
* **estimate** ``θ̂_j = (K·μ_j + f_j) / (K + m_j + f_j)`` (posterior mean; ``f_j, m_j``
  the edge's direct failures and successes);
* **selection** — top n − a of θ̃_j drawn from the posterior ``Beta(K·μ_j + f_j,
  K·(1−μ_j) + m_j)`` (Thompson sampling on the pooled posterior), plus ``a`` design
  draws (``design_fraction``: the class default 0.1; a run's default is 1, every probe a
  design draw) for the unbiased KG-level accuracy.

The grid fit is refreshed whenever the number of probes has grown by 10 % since the
last fit (every round at first, rarely later; ~55 fits over 5 epochs of a 3,000-edge
graph). Draws are made for every active
edge with ``Generator.beta``, so this sampler suits graphs up to ~10⁶ edges; at 10⁷ use
``thompson`` (threshold draws).
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaln

from kgprobe.sampling.design_draws import check_batch_size
from kgprobe.sampling.base import DesignShareSampler, Selection
from kgprobe.sampling.refit import RefitOnGrowth

_K_GRID = 0.05 * 2.0 ** np.arange(0, 13)  # 0.05 .. 204.8
_C_GRID = (1.0, 4.0, 16.0)
_EPS = 1e-6


def predicate_error_rates(pkg) -> np.ndarray:
    """π_p of every edge's predicate: ``(failures_p + 2·g) / (probes_p + 2)``, with ``g`` the
    global error rate ``(F + 1) / (T + 2)`` of all direct probes (``g`` itself without
    predicates)."""
    f = pkg.failures.astype(np.float64)
    s = pkg.successes.astype(np.float64)
    g = (f.sum() + 1.0) / (f.sum() + s.sum() + 2.0)
    if pkg.predicates is None or not pkg.predicates.size:
        return np.full(pkg.num_edges, g)
    npred = int(pkg.predicates.max()) + 1
    fp = np.bincount(pkg.predicates, weights=f, minlength=npred)
    tp = np.bincount(pkg.predicates, weights=f + s, minlength=npred)
    return ((fp + 2.0 * g) / (tp + 2.0))[pkg.predicates]


def _prior_mean(pkg, c: float) -> np.ndarray:
    pi = predicate_error_rates(pkg)
    nb_f, nb_s = pkg.neighbour_counts()
    mu = (nb_f + c * pi) / (nb_f + nb_s + c)
    return np.clip(mu, _EPS, 1 - _EPS)


def _log_marginal(f: np.ndarray, s: np.ndarray, mu: np.ndarray, k: float) -> float:
    a, b = k * mu, k * (1 - mu)
    # The binomial coefficient does not depend on (K, c) and is dropped.
    return float(np.sum(betaln(a + f, b + s) - betaln(a, b)))


class PooledPosterior(RefitOnGrowth):
    """The empirical-Bayes pooled posterior of every edge (module docstring)."""

    def __init__(self, *, refit_growth: float = 1.1):
        super().__init__(refit_growth=refit_growth)
        self.strength = 2.0  # K
        self.pseudo_count = 4.0  # c

    def fit(self, pkg) -> None:
        """Choose (K, c) by beta-binomial marginal likelihood of the probed edges' own counts."""
        probed = (pkg.failures + pkg.successes) > 0
        if probed.sum() < 2:
            return
        f = pkg.failures[probed].astype(np.float64)
        s = pkg.successes[probed].astype(np.float64)
        best = (-np.inf, self.strength, self.pseudo_count)
        for c in _C_GRID:
            mu = _prior_mean(pkg, c)[probed]
            for k in _K_GRID:
                ll = _log_marginal(f, s, mu, k)
                if ll > best[0]:
                    best = (ll, float(k), c)
        _, self.strength, self.pseudo_count = best

    def __call__(self, pkg) -> tuple[np.ndarray, np.ndarray]:
        """(a, b) of every edge's pooled posterior Beta(a, b) under the current fit."""
        mu = _prior_mean(pkg, self.pseudo_count)
        k = self.strength
        return k * mu + pkg.failures, k * (1 - mu) + pkg.successes

    def estimate(self, pkg) -> np.ndarray:
        """Posterior mean error of every edge (the pooled point estimate θ̂)."""
        a, b = self(pkg)
        return a / (a + b)

    def prior_mean(self, pkg) -> np.ndarray:
        """μ_j: every edge's prior mean error, from its neighbours and predicate, never its own answers."""
        return _prior_mean(pkg, self.pseudo_count)

    def state_dict(self) -> dict:
        return {"strength": self.strength, "pseudo_count": self.pseudo_count, "fitted_at": self._fitted_at}

    def load_state_dict(self, state: dict) -> None:
        self.strength = float(state["strength"])
        self.pseudo_count = float(state["pseudo_count"])
        self._fitted_at = int(state["fitted_at"])


class PooledPosteriorSampler(DesignShareSampler):
    """The shared parts of the samplers on the pooled posterior: its fit, estimates and state."""

    def __init__(self, *, design_fraction: float = 0.1, refit_growth: float = 1.1):
        super().__init__(design_fraction=design_fraction)
        self.posterior = PooledPosterior(refit_growth=refit_growth)
        self._rounds = 0

    def estimate(self, pkg) -> np.ndarray:
        return self.posterior.estimate(pkg)

    def prior_estimate(self, pkg) -> np.ndarray:
        return self.posterior.prior_mean(pkg)

    def _maybe_fit(self, pkg) -> None:
        self.posterior.maybe_fit(pkg)
        self._rounds += 1

    def state_dict(self) -> dict:
        return {**self.posterior.state_dict(), "rounds": self._rounds}

    def load_state_dict(self, state: dict) -> None:
        self.posterior.load_state_dict(state)
        self._rounds = int(state["rounds"])


class PooledThompsonSampler(PooledPosteriorSampler):
    """Thompson sampling on an empirical-Bayes posterior pooled over neighbours and predicate."""

    name = "pooled-thompson"

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        n = check_batch_size(pkg, n)
        self._maybe_fit(pkg)
        n, design, pool = self.design_draws(pkg, n, rng)
        a, b = self.posterior(pkg)
        draws = rng.beta(a[pool], b[pool])
        k = n - design.size
        if k:
            part = np.argpartition(-draws, k - 1)[:k]
            chosen = pool[part[np.argsort(-draws[part], kind="stable")]]
        else:
            chosen = np.empty(0, dtype=np.int64)
        return Selection.design_first(design, chosen)
