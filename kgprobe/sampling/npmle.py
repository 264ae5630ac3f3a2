"""A nonparametric empirical-Bayes prior for θ: the NPMLE on a grid (Kiefer–Wolfowitz).

The evidence posterior (:mod:`kgprobe.sampling.evidence`) assumes a shape for the prior
of θ (atoms at 0 and 1 plus a Beta). With few answers per edge that shape decides how
far an estimate moves: after two wrong answers and no right one the posterior mean is
``E[θ³]/E[θ²]`` under the prior, a third moment that edges with ≤ 2 answers cannot
identify, so the fitted family's extrapolation — not the data — sets it. Real models
answer many facts the same way every time (a quarter to half of the recorded edges
are always right or always wrong), which a U-shaped Beta fitted to 1–2 answers per edge
under-represents.

Here the prior is any distribution ``G`` on the grid ``θ ∈ {0, 1/(M−1), …, 1}``
(``M = 42``: an even count, so no grid point sits on the ½ threshold of the weak
draw), fitted by maximizing the marginal likelihood of every probed edge's own counts,
``Σ_j log Σ_m G_m θ_m^{f_j} (1 − θ_m)^{s_j}``, with the EM fixed point
``G_m ← (Σ_j w_jm + c/M) / (E + c)`` (``w_jm`` the posterior weight of grid point m for
edge j). ``c = 1``: a Dirichlet prior worth one pseudo-edge spread evenly over the grid,
so no grid point is ruled out for good while an edge has few answers. The maximizer of
such a likelihood puts its mass on few points, with atoms at 0 and 1 when the data
call for them (Lindsay 1983) — it represents "known or not" exactly, and a smooth θ
field approximately. No covariates: pooling by predicate and entity is the evidence
posterior's part; :class:`~kgprobe.sampling.thompson.ThompsonSampler` weighs the two
by how well each predicted the answers so far.

The fit is refreshed whenever the number of probes has grown by 10 % (as the evidence
posterior's). The EM starts from the last fit (from uniform at first) and runs until
no weight moves by more than 1e-7, at most 200 steps.
"""

from __future__ import annotations

import numpy as np

from kgprobe.sampling.refit import RefitOnGrowth

GRID_POINTS = 42
SMOOTHING = 1.0
_MAX_STEPS = 200
_TOL = 1e-7


def grid_likelihood(grid: np.ndarray, f: np.ndarray, s: np.ndarray) -> np.ndarray:
    """(E × M) ``θ_m^f (1 − θ_m)^s`` per edge, each row scaled by its maximum (0⁰ = 1)."""
    f = np.asarray(f, dtype=np.float64)[:, None]
    s = np.asarray(s, dtype=np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):  # log 0 = -inf; 0 · -inf is masked out below
        lw, lr = np.log(grid), np.log1p(-grid)
        ll = np.where(f > 0, f * lw[None, :], 0.0) + np.where(s > 0, s * lr[None, :], 0.0)
    return np.exp(ll - ll.max(axis=1, keepdims=True))


class GridPosterior(RefitOnGrowth):
    """The NPMLE prior on a grid and every edge's posterior under it (module docstring)."""

    def __init__(self, *, points: int = GRID_POINTS, smoothing: float = SMOOTHING, refit_growth: float = 1.1):
        super().__init__(refit_growth=refit_growth)
        self.grid = np.linspace(0.0, 1.0, int(points))
        self.weights = np.full(self.grid.size, 1.0 / self.grid.size)
        self.smoothing = float(smoothing)

    def fit(self, pkg) -> None:
        """Refit the grid weights on the active edges' answers."""
        self.fit_counts(pkg.failures[pkg.active_edges], pkg.successes[pkg.active_edges])

    def fit_counts(self, failures: np.ndarray, successes: np.ndarray, *, steps: int = _MAX_STEPS) -> None:
        """EM for the grid weights on the probed edges' (failures, successes)."""
        f = np.asarray(failures, dtype=np.float64)
        s = np.asarray(successes, dtype=np.float64)
        probed = (f + s) > 0
        if probed.sum() < 2:
            return
        lik = grid_likelihood(self.grid, f[probed], s[probed])
        g = self.weights.copy()
        n, c, m = lik.shape[0], self.smoothing, self.grid.size
        for _ in range(steps):
            post = lik * g
            post /= post.sum(axis=1, keepdims=True)
            new = (post.sum(axis=0) + c / m) / (n + c)
            done = np.max(np.abs(new - g)) < _TOL
            g = new
            if done:
                break
        self.weights = g

    def posterior(self, f: np.ndarray, s: np.ndarray) -> np.ndarray:
        """(E × M) posterior weights of the grid points for edges with f failures, s successes."""
        w = grid_likelihood(self.grid, f, s) * self.weights
        return w / w.sum(axis=1, keepdims=True)

    def mean(self, f: np.ndarray, s: np.ndarray) -> np.ndarray:
        """Posterior mean of θ for each (f, s)."""
        return self.posterior(f, s) @ self.grid

    def estimate(self, pkg) -> np.ndarray:
        """Posterior mean error of every edge."""
        return self.mean(pkg.failures, pkg.successes)

    def draw(self, f: np.ndarray, s: np.ndarray, rng) -> np.ndarray:
        """One posterior draw of θ per edge (a grid point)."""
        cdf = np.cumsum(self.posterior(f, s), axis=1)
        u = rng.random(cdf.shape[0])[:, None] * cdf[:, -1:]
        return self.grid[np.minimum((cdf < u).sum(axis=1), self.grid.size - 1)]

    def state_dict(self) -> dict:
        return {"weights": self.weights.copy(), "fitted_at": self._fitted_at}

    def load_state_dict(self, state: dict) -> None:
        self.weights = np.asarray(state["weights"], dtype=np.float64).copy()
        self.grid = np.linspace(0.0, 1.0, self.weights.size)  # the grid is even, so its size says it all
        self._fitted_at = int(state["fitted_at"])
