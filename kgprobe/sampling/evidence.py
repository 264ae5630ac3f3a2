"""The evidence posterior: an edge's own answers, plus a discounted prior from related edges.

KGLens adds every neighbour's answer to an edge's Beta counts at full weight, so an edge
at a hub soon carries hundreds of neighbour answers that swamp its own: it becomes the
neighbourhood average. Here the two kinds of evidence are kept apart.

**Prior from related edges.** For edge j with predicate p, subject node s and object
node o, three sources summarize what the *other* probed edges say (leave-one-out: edge
j's own answers are never part of its prior):

* the predicate: failures ``F_p`` and probes ``N_p`` of the other edges of p;
* the subject entity: failures and probes of the other edges at node s;
* the object entity: the same at node o (a literal object is a node of its own, so it
  contributes nothing).

Each source becomes a smoothed rate ``r = (F + c·g) / (N + c)`` (``g`` the global error
rate of all probes, ``c = 2``) and a logit offset ``z = logit r − logit g``. The prior
mean is a logistic regression on those offsets::

    μ_j = σ( logit g + b + a_p·z_p + a_s·z_s + a_o·z_o ),     a_x ≥ 0

and the prior is ``Beta(K·μ_j, K·(1 − μ_j))``: worth K answers at most, however many
neighbours an edge has.

**Strengths learned from the data.** ``(K, b, a_p, a_s, a_o)`` maximize the
beta-binomial marginal likelihood of every probed edge's own counts under its
leave-one-out prior (an honest fit: no edge's answers predict themselves). When
neighbours predict an edge (errors cluster), the weights and K grow; when they do not
(independent errors), the weights go to 0 and the prior is the global rate, with a small
K if answers are U-shaped (facts the model either knows or not) — so pooling cannot do
much harm. The fit is refreshed whenever the number of probes has grown by 10 %.

**Facts known or not.** Real models answer many facts the same way every time (on the
default model's recorded ZP-LKE answers, about a quarter of the edges were right in all
20 passes and a fifth wrong in all 20), so the prior is a mixture: with probability π₀
the edge is always answered right (θ = 0), with π₁ always wrong (θ = 1), otherwise θ
follows the Beta above. π₀ and π₁ are fitted with the rest. After a few wrong answers
and no right one, an edge's estimate moves to 1 quickly; one right answer rules the
"always wrong" atom out.

**Posterior.** The mixture updated with the edge's own failures ``f_j`` and successes
``s_j``: atom weights ``π₀·1[f_j = 0]`` and ``π₁·1[s_j = 0]``, the Beta part
``Beta(K·μ_j + f_j, K·(1 − μ_j) + s_j)`` weighted by its beta-binomial likelihood; the
estimate is the posterior mean. Only direct answers are used, so the posterior is the
same whatever propagation weight the parameterized KG was built with.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import betaln, expit, logit

from kgprobe.sampling.refit import RefitOnGrowth

_EPS = 1e-6
_SMOOTHING = 2.0
#: Bounds of the fitted parameters: log K, intercept b, the three weights a_x, and the
#: logits l₀, l₁ of the atoms (π₀ = e^l₀ / (1 + e^l₀ + e^l₁), likewise π₁).
_BOUNDS = [(np.log(0.02), np.log(1000.0)), (-6.0, 6.0), (0.0, 4.0), (0.0, 4.0), (0.0, 4.0), (-12.0, 6.0),
           (-12.0, 6.0)]
_START = np.array([np.log(2.0), 0.0, 0.5, 0.5, 0.5, -2.0, -2.0])


def source_offsets(pkg) -> tuple[np.ndarray, float]:
    """(3 × edges) logit offsets of the predicate, subject and object sources; and logit g."""
    f = pkg.failures.astype(np.float64)
    n = f + pkg.successes.astype(np.float64)
    g = (f.sum() + 1.0) / (n.sum() + 2.0)
    lg = float(logit(g))
    heads, tails = pkg.heads.astype(np.int64), pkg.tails.astype(np.int64)
    nodes = pkg.num_nodes
    node_f = np.bincount(heads, f, nodes) + np.bincount(tails, f, nodes)
    node_n = np.bincount(heads, n, nodes) + np.bincount(tails, n, nodes)
    loop = (heads == tails).astype(np.float64)  # a self-loop was counted twice at its node
    out = np.empty((3, f.size))
    if pkg.predicates is not None and pkg.predicates.size:
        preds = pkg.predicates.astype(np.int64)
        pf = np.bincount(preds, f)[preds] - f
        pn = np.bincount(preds, n)[preds] - n
    else:
        pf = pn = np.zeros_like(f)
    for row, (sf, sn) in enumerate(((pf, pn), (node_f[heads] - f * (1 + loop), node_n[heads] - n * (1 + loop)),
                                    (node_f[tails] - f * (1 + loop), node_n[tails] - n * (1 + loop)))):
        rate = (np.maximum(sf, 0.0) + _SMOOTHING * g) / (np.maximum(sn, 0.0) + _SMOOTHING)
        out[row] = logit(np.clip(rate, _EPS, 1 - _EPS)) - lg
    return out, lg


def _prior_mean(params: np.ndarray, z: np.ndarray, lg: float) -> np.ndarray:
    eta = lg + params[1] + params[2] * z[0] + params[3] * z[1] + params[4] * z[2]
    return np.clip(expit(eta), _EPS, 1 - _EPS)


def _log_weights(params) -> tuple[float, float, float]:
    """log π₀, log π₁, log π_Beta."""
    lse = np.logaddexp(0.0, np.logaddexp(params[5], params[6]))
    return params[5] - lse, params[6] - lse, -lse


def _component_logs(params, z, lg, f, s, mu=None):
    """Per edge: log weight·likelihood of the atoms and the Beta part, and the Beta's (a, b).

    ``mu``, when given, replaces the Beta part's prior mean (e.g. moved by the margins).
    """
    k = np.exp(params[0])
    if mu is None:
        mu = _prior_mean(params, z, lg)
    a, b = k * mu, k * (1 - mu)
    l0, l1, lm = _log_weights(params)
    log0 = np.where(f == 0, l0, -np.inf)
    log1 = np.where(s == 0, l1, -np.inf)
    logm = lm + betaln(a + f, b + s) - betaln(a, b)
    return log0, log1, logm, a, b


def _neg_log_marginal(params, z, lg, f, s) -> float:
    log0, log1, logm, _, _ = _component_logs(params, z, lg, f, s)
    return -float(np.sum(np.logaddexp(np.logaddexp(log0, log1), logm)))


def posterior_mean(params, z, lg, f, s, mu=None) -> np.ndarray:
    log0, log1, logm, a, b = _component_logs(params, z, lg, f, s, mu)
    top = np.maximum(np.maximum(log0, log1), logm)
    w0, w1, wm = np.exp(log0 - top), np.exp(log1 - top), np.exp(logm - top)
    return (w1 + wm * (a + f) / (a + b + f + s)) / (w0 + w1 + wm)


class EvidencePosterior(RefitOnGrowth):
    """Own answers + a learned, bounded prior from predicate and entity evidence (module doc)."""

    def __init__(self, *, refit_growth: float = 1.1):
        super().__init__(refit_growth=refit_growth)
        self.params = _START.copy()

    @property
    def strength(self) -> float:
        """K: how many answers the prior is worth."""
        return float(np.exp(self.params[0]))

    def fit(self, pkg) -> None:
        """Maximize the leave-one-out beta-binomial marginal likelihood of the probed edges."""
        probed = (pkg.failures + pkg.successes) > 0
        if probed.sum() < 2:
            return
        z, lg = source_offsets(pkg)
        z = z[:, probed]
        f = pkg.failures[probed].astype(np.float64)
        s = pkg.successes[probed].astype(np.float64)
        best = None
        # Two starts (the last fit and a neutral one): the likelihood is not always unimodal.
        for start in (self.params, _START):
            res = minimize(_neg_log_marginal, start, args=(z, lg, f, s), method="L-BFGS-B", bounds=_BOUNDS,
                           options={"maxiter": 60})
            if best is None or res.fun < best.fun:
                best = res
        self.params = np.asarray(best.x, dtype=np.float64)

    def estimate(self, pkg, mu: np.ndarray | None = None,
                 offsets: tuple[np.ndarray, float] | None = None) -> np.ndarray:
        """Posterior mean error of every edge (``mu``: the Beta part's prior means, if moved).

        ``offsets``: :func:`source_offsets` of the same ``pkg``, when the caller has them already.
        """
        z, lg = source_offsets(pkg) if offsets is None else offsets
        return posterior_mean(self.params, z, lg, pkg.failures.astype(np.float64),
                               pkg.successes.astype(np.float64), mu)

    def beta_mean(self, pkg, offsets: tuple[np.ndarray, float] | None = None) -> np.ndarray:
        """Every edge's prior mean of the Beta part (the atoms left out).

        ``offsets``: :func:`source_offsets` of the same ``pkg``, when the caller has them already.
        """
        z, lg = source_offsets(pkg) if offsets is None else offsets
        return _prior_mean(self.params, z, lg)

    def prior_mean(self, pkg, beta_mean: np.ndarray | None = None) -> np.ndarray:
        """Every edge's prior predictive error (atoms and Beta mean), from the leave-one-out sources only.

        ``beta_mean``: :meth:`beta_mean` of the same ``pkg``, when the caller has it already.
        """
        mu = self.beta_mean(pkg) if beta_mean is None else beta_mean
        l0, l1, lm = _log_weights(self.params)
        return np.exp(l1) + np.exp(lm) * mu

    def draw(self, pkg, edges: np.ndarray, rng, mu: np.ndarray | None = None,
             offsets: tuple[np.ndarray, float] | None = None) -> np.ndarray:
        """One posterior draw θ̃ per edge: an atom (0 or 1) or the Beta part, by its posterior weight.

        ``mu``: the Beta part's prior means, if moved; ``offsets``: as in :meth:`beta_mean`.
        """
        z, lg = source_offsets(pkg) if offsets is None else offsets
        f = pkg.failures[edges].astype(np.float64)
        s = pkg.successes[edges].astype(np.float64)
        log0, log1, logm, a, b = _component_logs(self.params, z[:, edges], lg, f, s, mu)
        top = np.maximum(np.maximum(log0, log1), logm)
        w0, w1, wm = np.exp(log0 - top), np.exp(log1 - top), np.exp(logm - top)
        total = w0 + w1 + wm
        u = rng.random(edges.size) * total
        theta = rng.beta(a + f, b + s)
        return np.where(u < w0, 0.0, np.where(u < w0 + w1, 1.0, theta))

    def state_dict(self) -> dict:
        return {"params": self.params.copy(), "fitted_at": self._fitted_at}

    def load_state_dict(self, state: dict) -> None:
        self.params = np.asarray(state["params"], dtype=np.float64).copy()
        self._fitted_at = int(state["fitted_at"])
