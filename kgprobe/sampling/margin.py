"""Margin focus: the model's own margin tells a weak edge answered right from a strong one.

Where the samplers lose on real answers (docs/samplers-measured.md) is telling apart, after one
answer, an edge answered right that the model usually gets wrong from one it always
gets right: a right answer is the same one bit for both. A probe that scores options
(ZP-LKE) says more than the bit. It scores the gold object against every wrong
candidate, and the answer is right exactly when the margin
``m = log p(gold) − max log p(wrong)`` is positive. On the committed sweeps the margin of
one answer predicts the edge's error rate over the other passes (Spearman −0.45 to
−0.61 among edges answered right, on four sweeps of three models); of the edges answered
right with a margin in the lowest quarter 8–29 % are weak, in the highest 0–1.5 %.

**The latent margin model.** Each answer's margin is the edge's own mean plus noise, and
the edge's error rate is the chance of a negative margin::

    m_jk = M_j + ε_jk,   ε_jk ~ N(0, s²),   M_j ~ N(μ0_j, τ²),   θ_j = P(m < 0) = Φ(−M_j / s)

* ``s²``: the pooled within-edge variance of the margins of edges answered more than
  once, once they give :data:`MIN_REPEAT_DOF` degrees of freedom; before that
  :data:`DEFAULT_WITHIN_SD`² (the committed sweeps' within-edge spread, 1.3–1.5 in median
  standard deviation); never below :data:`MIN_WITHIN_VAR`;
* ``τ²``: the spread of the edges' mean margins less the noise in them, at least
  :data:`MIN_BETWEEN_VAR`;
* ``μ0_j``: set so that the prior's own chance of a wrong answer,
  ``Φ(−μ0_j / sqrt(s² + τ²))``, is the edge's prior mean error from ``focus``'s pooled
  posterior (predicate and neighbours, never the edge's own answers). The pooling of
  ``focus`` stays; the margins replace the bits of the edge's own answers.

Given the edge's n margins, ``M_j`` is normal with variance ``v = 1/(1/τ² + n/s²)`` and
mean ``v·(μ0_j/τ² + Σm/s²)``, so ``P(θ_j ≥ t) = Φ((−s·Φ⁻¹(t) − mean) / sqrt(v))``.

**Picks.** Each round's picks (after the design draws) are the edges with the highest::

    score_j = P_margin(θ_j ≥ t) · p_j (1 − p_j) / (a_j + b_j + 1)²
              + E_margin[1{θ_j ≥ t} ((2c_j + 1)(θ_j − θ̂_j)² − θ_j (1 − θ_j))] / (c_j + 1)²

Both terms are what one more answer is expected to take off the squared error the edge
adds over the hardest ``top_share`` of the graph (``t`` the level at which the margin
posteriors put that share: mean over the active edges (an even stride of at most 20,000
of them on larger graphs) of ``P(θ_j ≥ t)`` = ``top_share``), under two views of θ_j:

* the first, the chance that the edge is among the hardest times the expected drop in
  the variance of its *count* estimate (``focus``'s pooled ``Beta(a_j, b_j)``, ``p_j`` its
  mean): it keeps asking the blind spots found until their rates are known;
* the second (:func:`top_error_drops`), the drop of the squared error of the estimate
  ``θ̂_j`` (below, worth ``c_j = a_j + b_j`` answers) averaged over the margin model's
  own posterior of θ_j: an edge answered right by a hair whose θ may still be high has a
  large error if it is a top edge, so it is asked again before a blind spot already
  known (the top edges an answer hid are where the samplers lost most on the recorded
  answers: docs/samplers-measured.md, "Why the adaptive samplers lose").

Either alone lost where the other won: the first hid top edges answered right once (geo-us
SmolLM2), the second, whose margin model is too sure of θ where a margin is far below 0,
left blind spots at one answer (Gemma-3-270m's sweeps). Their sum needs fewer queries than
the first alone on 21 of the 31 recorded sweeps with three or more passes and more on 3
(geometric mean of the ratios 0.284 → 0.258), on U-shaped simulated errors 0.420 against
0.611, but more on simulated clustered regions (0.375 against 0.130; docs/samplers-margin-focus.md,
"Two views of what an answer is worth").

**Estimate.** ``focus``'s pooled posterior mean of the share of wrong answers, with the
prior's K pseudo-answers at the margin model's chance of a wrong next answer
(:func:`margin_error_rates`) instead of the predicate-and-neighbour mean μ_j::

    θ̂_j = (K·r_j + f_j) / (K + f_j + m_j)

The edge's own verdicts count as in ``focus``, so as its answers grow they decide; the
margins move only the part the prior held, which on real answers (K below 2: facts known
or not) is small after many answers and most of the estimate after one. Estimating θ
from the margins alone, or letting them set the variance term of the picks, made the
ratios worse (a margin posterior is confident after one answer, and a common ``s``
misreads edges whose margins sit near 0 every time); this form lowered the ratio on 29
of the 31 recorded sweeps with margins, judged on the same picks (docs/samplers-margin-focus.md).

Without margins — probes that generate (KGLens), a run of another sampler's design, fewer
than :data:`MIN_EDGES_WITH_MARGINS` edges answered — the picks are ``focus``'s.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri

from kgprobe.sampling.base import Selection
from kgprobe.sampling.design_draws import check_batch_size
from kgprobe.sampling.epsilon_greedy import top_n_by_score
from kgprobe.sampling.focus import LEVEL_SAMPLE, FocusSampler

#: Within-edge standard deviation of the margins before the run has seen enough repeats.
DEFAULT_WITHIN_SD = 1.5
#: Degrees of freedom of repeated answers (Σ (n_j − 1)) before s² is estimated from them.
MIN_REPEAT_DOF = 20
#: The least within-edge variance s² (a model that scores every phrasing alike would give 0).
MIN_WITHIN_VAR = 0.25
#: The least between-edge variance τ² of the mean margins (a floor for few answers).
MIN_BETWEEN_VAR = 0.5
#: Edges with a margin before the margins steer the picks.
MIN_EDGES_WITH_MARGINS = 5
_CLIP = 1e-6


def margin_variances(count: np.ndarray, total: np.ndarray, squares: np.ndarray) -> tuple[float, float]:
    """``(s², τ²)`` from per-edge margin counts, sums and sums of squares (module docstring)."""
    count = np.asarray(count, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64)
    squares = np.asarray(squares, dtype=np.float64)
    rep = count >= 2
    dof = float((count[rep] - 1).sum())
    if dof >= MIN_REPEAT_DOF:
        s2 = max(float((squares[rep] - total[rep] ** 2 / count[rep]).sum() / dof), MIN_WITHIN_VAR)
    else:
        s2 = DEFAULT_WITHIN_SD ** 2
    has = count > 0
    tau2 = MIN_BETWEEN_VAR
    if has.sum() >= 2:
        means = total[has] / count[has]
        tau2 = max(float(means.var()) - s2 * float(np.mean(1.0 / count[has])), MIN_BETWEEN_VAR)
    return s2, tau2


def _mean_margin_posterior(prior_error, count, total, s2: float, tau2: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of each edge's mean margin ``M_j`` given its margins (module docstring)."""
    mu = np.clip(np.asarray(prior_error, dtype=np.float64), _CLIP, 1 - _CLIP)
    mu0 = -np.sqrt(s2 + tau2) * ndtri(mu)
    var = 1.0 / (1.0 / tau2 + np.asarray(count, dtype=np.float64) / s2)
    return var * (mu0 / tau2 + np.asarray(total, dtype=np.float64) / s2), var


def top_probabilities(prior_error: np.ndarray, count: np.ndarray, total: np.ndarray, s2: float, tau2: float,
                      level: float) -> np.ndarray:
    """``P(θ_j ≥ level)`` per edge under the latent margin model (module docstring)."""
    return _top_chance(*_mean_margin_posterior(prior_error, count, total, s2, tau2), s2, level)


def _top_chance(mean: np.ndarray, var: np.ndarray, s2: float, level: float) -> np.ndarray:
    """``P(θ ≥ level)`` for ``θ = Φ(−M/s)`` and ``M`` normal with ``mean`` and ``var``."""
    cut = -np.sqrt(s2) * ndtri(min(max(level, _CLIP), 1 - _CLIP))  # θ ≥ level  ⇔  M ≤ cut
    return ndtr((cut - mean) / np.sqrt(var))


def margin_error_rates(prior_error: np.ndarray, count: np.ndarray, total: np.ndarray, s2: float,
                       tau2: float) -> np.ndarray:
    """The latent margin model's chance that the edge's next answer is wrong, ``E[Φ(−M_j / s)]``.

    With ``M_j`` normal (mean ``m``, variance ``v``) given its margins this is
    ``Φ(−m / sqrt(s² + v))``; with no margin it is the prior error itself.
    """
    return _next_wrong_chance(*_mean_margin_posterior(prior_error, count, total, s2, tau2), s2)


def _next_wrong_chance(mean: np.ndarray, var: np.ndarray, s2: float) -> np.ndarray:
    """``E[Φ(−M/s)] = Φ(−mean / sqrt(s² + var))`` for ``M`` normal with ``mean`` and ``var``."""
    return ndtr(-mean / np.sqrt(s2 + var))


#: Gauss–Legendre nodes and weights on [−1, 1] of the expectations in :func:`top_error_drops`.
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(24)


def top_error_drops(prior_error: np.ndarray, count: np.ndarray, total: np.ndarray, s2: float, tau2: float,
                    level: float, estimate: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Expected drop of ``E[(θ_j − θ̂_j)² 1{θ_j ≥ level}]`` from one more answer, θ_j under the margin model.

    ``θ̂_j`` (``estimate``) counts as ``c_j`` (``weight``) answers, so one more verdict ``y``
    makes it ``(c θ̂ + y)/(c + 1)``; averaging over ``y ~ Bernoulli(θ)`` the squared error
    falls by ``((2c + 1)(θ − θ̂)² − θ(1 − θ)) / (c + 1)²``. That is averaged over the latent
    margin model's posterior of θ_j = Φ(−M_j/s) (``M_j`` normal: module docstring) where
    θ_j ≥ level, i.e. ``M_j ≤ cut``: with ``P`` that probability, the integral over
    ``u = F(M_j)`` from 0 to ``P`` by 24-point Gauss–Legendre quadrature (smooth in u, where
    the cut would make a quadrature over M itself inexact).
    """
    return _top_error_drops(*_mean_margin_posterior(prior_error, count, total, s2, tau2), s2, level, estimate,
                            weight)


def _top_error_drops(mean: np.ndarray, var: np.ndarray, s2: float, level: float, estimate: np.ndarray,
                     weight: np.ndarray) -> np.ndarray:
    """:func:`top_error_drops` from the margin posterior's ``mean`` and ``var`` of each edge."""
    sd = np.sqrt(var)
    top = _top_chance(mean, var, s2, level)[:, None]
    u = np.clip(top * (1 + _NODES[None, :]) / 2, 1e-300, None)
    theta = ndtr(-(mean[:, None] + sd[:, None] * ndtri(u)) / np.sqrt(s2))
    est = np.asarray(estimate, dtype=np.float64)[:, None]
    c = np.asarray(weight, dtype=np.float64)[:, None]
    drop = ((2 * c + 1) * (theta - est) ** 2 - theta * (1 - theta)) / (c + 1) ** 2
    return (top / 2 * _WEIGHTS[None, :] * drop).sum(axis=1)


def margin_level(prob_at, share: float) -> float:
    """The level t with ``mean(prob_at(t)) = share`` (bisection to 2⁻²⁵; P(θ ≥ t) falls with t)."""
    lo, hi = 0.0, 1.0
    for _ in range(25):
        mid = 0.5 * (lo + hi)
        if float(np.mean(prob_at(mid))) > share:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def has_margins(pkg) -> bool:
    """Whether the run's margins steer a sampler: :data:`MIN_EDGES_WITH_MARGINS` active edges have one."""
    count = pkg.margin_count
    return count is not None and int(np.count_nonzero(count[pkg.active_edges])) >= MIN_EDGES_WITH_MARGINS


def run_margin_variances(pkg) -> tuple[float, float]:
    """:func:`margin_variances` of the parameterized KG's active edges."""
    act = pkg.active_edges
    return margin_variances(pkg.margin_count[act], pkg.margin_sum[act], pkg.margin_squares[act])


def run_margin_error_rates(pkg, prior_error: np.ndarray) -> np.ndarray:
    """:func:`margin_error_rates` of every edge of the parameterized KG, from ``prior_error``
    and the run's own ``(s², τ²)``: what the edge's margins say its next answer's chance of
    being wrong is (``prior_error`` itself where it has none)."""
    return margin_error_rates(prior_error, pkg.margin_count, pkg.margin_sum, *run_margin_variances(pkg))


class MarginFocusSampler(FocusSampler):
    """``focus``'s posterior and estimate; picks by the margins' chance of a top edge (module doc)."""

    name = "margin-focus"
    #: Asks the engine and the replays for each answer's margin (ParameterizedKG.update).
    uses_margins = True

    def estimate(self, pkg) -> np.ndarray:
        """``focus``'s pooled posterior mean, its prior mean moved to what the edge's margins predict.

        ``θ̂_j = (K·r_j + f_j) / (K + f_j + m_j)``: the edge's own verdicts as in ``focus``,
        and in place of the prior mean μ_j (predicate and neighbours) ``r_j``, the latent
        margin model's chance of a wrong next answer (:func:`margin_error_rates`, which
        starts from μ_j). The margins count in the K pseudo-answers only, so as the
        edge's answers grow its verdicts decide; after one right answer by a hair the
        estimate is the higher one a weak edge calls for.
        """
        if not has_margins(pkg):
            return super().estimate(pkg)
        a, b = self.posterior(pkg)
        prior = self.posterior.prior_mean(pkg)
        return self._moved(a, b, prior, pkg.margin_count, run_margin_error_rates(pkg, prior))

    def _moved(self, a, b, prior, count, rate) -> np.ndarray:
        """The estimate of :meth:`estimate` from the posterior ``(a, b)`` and the margin model's ``rate``."""
        moved = np.where(count > 0, a + self.posterior.strength * (rate - prior), a)
        return moved / (a + b)

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        count = pkg.margin_count
        if not has_margins(pkg):
            return super().select(pkg, n, rng)
        n = check_batch_size(pkg, n)
        self._maybe_fit(pkg)
        n, design, pool = self.design_draws(pkg, n, rng)
        if design.size == n:  # every probe a design draw (a run's default): nothing left to rank
            return Selection.design_first(design, np.empty(0, dtype=np.int64))
        a, b = self.posterior(pkg)
        act = pkg.active_edges
        s2, tau2 = run_margin_variances(pkg)
        prior = self.posterior.prior_mean(pkg)
        # The level from an even stride of at most LEVEL_SAMPLE edges, as focus's.
        sample = act[:: max(1, act.size // LEVEL_SAMPLE)]
        # Each margin posterior once: the bisection for the level and the three terms below reuse them.
        sample_mean, sample_var = _mean_margin_posterior(prior[sample], count[sample], pkg.margin_sum[sample], s2,
                                                         tau2)
        level = margin_level(lambda t: _top_chance(sample_mean, sample_var, s2, t), self.top_share)
        mean, var = _mean_margin_posterior(prior[pool], count[pool], pkg.margin_sum[pool], s2, tau2)
        top = _top_chance(mean, var, s2, level)
        nu = a[pool] + b[pool]
        p = a[pool] / nu
        estimate = self._moved(a[pool], b[pool], prior[pool], count[pool], _next_wrong_chance(mean, var, s2))
        score = np.zeros(pkg.num_edges)
        score[pool] = top * p * (1 - p) / (nu + 1) ** 2 + _top_error_drops(mean, var, s2, level, estimate, nu)
        return Selection.design_first(design, top_n_by_score(score, pool, n - design.size, rng))
