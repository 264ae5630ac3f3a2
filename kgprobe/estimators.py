"""Design-unbiased, model-assisted accuracy of the whole KG, of each predicate and entity group.

The target. The KG accuracy is ``A = (1/N) Σ_j μ_j`` over the ``N`` active edges, where
``μ_j = 1 − θ_j`` is the chance that the model answers edge j right (each probe is a
fresh Bernoulli draw with that mean). A group's accuracy ``A_G`` is the same mean over
the ``N_G`` active edges of the group (a predicate, or the subject's entity group).

The data. Each round t the engine records, *before* the round is played,

* every probe's prediction ``ŷ_i`` of its own outcome (:mod:`kgprobe.predictions`: the
  sampler's posterior mean of ``μ`` averaged with the edge's (predicate, object) cell's
  share, stacked with the item-response prior's when given, see :mod:`kgprobe.prior`), and
* per group G the mean prediction ``P̄_{G,t}`` over the group's active edges and the
  mean predicted Bernoulli variance ``V̄_{G,t}`` (mean of ``ŷ(1 − ŷ)``),

and the sampler flags its *design-based* probes: edges drawn by a random design with a
known inclusion probability ``π_i`` (:mod:`kgprobe.sampling.design_draws`; uniform without
replacement, ``π_i = m_t / N`` for ``m_t`` draws among ``N`` active edges).

The estimator (Horvitz–Thompson difference estimator; the "active inference" of Zrnic &
Candès, ICML 2024, with predictions made before each round). Per round::

    Â_{G,t} = P̄_{G,t} + (1/N_G) Σ_{i ∈ s_t ∩ G} (y_i − ŷ_i) / π_i

Given everything before round t, each edge j is in the design sample with probability
``π_j`` and its outcome has mean ``μ_j``, so ``E[Â_{G,t} | past] = P̄_{G,t} + (1/N_G)
Σ_{j∈G} (μ_j − ŷ_j) = A_G`` exactly, whatever the predictions are — good predictions
only shrink the variance. Rounds are combined with weights ``m_t / M`` fixed by the
design (``M`` = all design probes), which is the mean over design probes i of::

    z_i = P̄_{G,t_i} + 1[i ∈ G] · (y_i − ŷ_i) · m_{t_i} / (N_G · π_i)

So ``Â_G = mean_i z_i`` is unbiased, and ``z_i − A_G`` are martingale differences.

The KG interval. The standard error ``sqrt(s² / M)`` with ``s²`` the sample variance of
the ``z_i``: the with-replacement (Hansen–Hurwitz) variance, which is
conservative for draws without replacement and for predictions that drift between rounds.
Under the adaptive design (:mod:`kgprobe.sampling.design`: a floor and a lean part per
round, weighted as in :func:`probe_weights`) the rounds' own variances are summed
instead (:func:`martingale_variance`; martingale CLT, Zrnic & Candès 2024). The
interval is Wilson's at the effective sample size this standard error implies
(:func:`kgprobe.metrics.effective_wilson`): the normal interval in the middle, and one
that keeps its coverage near 0 and 1, where the normal one does not.

Predicates and entity groups. The ratio (Hájek) estimate of :func:`hajek_estimate`: the
design-weighted share of right answers among the group's design probes, always in
[0, 1], each round weighed by the draws it expected in the group
(:func:`group_probe_weights`), with a Korn–Graubard (Clopper–Pearson at the effective
sample size) interval. A
group with fewer than :data:`MIN_DESIGN_PROBES` design probes gets no number (basis
:data:`TOO_FEW`). Only a run without any design probe falls back on **model-based**
Jeffreys intervals from the group's probes, which are right only if the probed edges
represent the group. (:func:`design_estimate` with ``group=True`` is the difference
estimator for a group, unbiased but not bounded to [0, 1]; reports no longer use it.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm
from scipy.stats import t as student_t

from kgprobe.errors import InputError
from kgprobe.metrics import effective_wilson

#: A group needs this many design-based probes for a design-based interval.
MIN_DESIGN_PROBES = 2
DESIGN = "design-based"
MODEL = "model-based"
#: Basis of a group with fewer than :data:`MIN_DESIGN_PROBES` design probes: no number.
TOO_FEW = "too-few-design-probes"


@dataclass(frozen=True)
class GroupEstimate:
    """Accuracy of a set of active edges (the KG, a predicate, an entity group), with an interval."""

    estimate: float
    low: float
    high: float
    n: int
    """Design-based probes the estimate rests on (that fell in the group)."""
    edges: int
    """Active edges in the group (N_G)."""
    basis: str
    """``design-based`` (unbiased by construction) or ``model-based`` (assumes the probed edges
    represent the group)."""
    method: str
    se: float = float("nan")
    """Standard error behind the interval (NaN for a model-based interval)."""
    df: float = float("inf")
    """Degrees of freedom of the interval's quantile (inf: normal)."""
    raw: float | None = None
    """The unbiased value before ``estimate`` was clipped to [0, 1] (design-based only)."""

    def as_dict(self) -> dict:
        """JSON-able: non-finite numbers (no estimate, no standard error, normal df) become None."""
        # ``raw`` stays out: an accuracy shown anywhere lies in [0, 1].
        d = {"estimate": self.estimate, "low": self.low, "high": self.high, "n": self.n,
             "edges": self.edges, "basis": self.basis, "method": self.method, "se": self.se, "df": self.df}
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in d.items()}


@dataclass
class ProbeTable:
    """The per-probe columns and per-round prediction summaries an estimate needs.

    ``correct``, ``design`` (the design flag), ``predicted`` (ŷ_i), ``inclusion`` (π_i,
    NaN for sampler-chosen probes), ``round`` (index into the per-round lists), and
    per probe its group labels in ``labels[kind]`` (e.g. ``labels["predicate"]``).
    ``round_means[t][kind][g] = (P̄_{g,t}, V̄_{g,t})``; ``group_sizes[kind][g] = N_g``.
    """

    correct: np.ndarray
    design: np.ndarray
    predicted: np.ndarray
    inclusion: np.ndarray
    round: np.ndarray
    labels: dict[str, np.ndarray]
    round_means: list[dict[str, dict[str, tuple[float, float]]]]
    group_sizes: dict[str, dict[str, int]]
    edge: np.ndarray | None = None
    """Edge index of each probe (pairs the design probes of two runs in a comparison)."""
    final_mean: float | None = None
    """Mean prediction over the active edges after the last round (a model-based number, studies only)."""
    prior_weight: float | None = None
    """The item-response prior's stacking weight after the last round (:meth:`kgprobe.prior.ItemPrior.stacked`;
    studies only, None without a prior)."""
    part: np.ndarray | None = None
    """Design part of each probe (:mod:`kgprobe.sampling.design`: 0 the sampler's choice, 1 floor,
    2 lean); None: every design probe is of the one part of a uniform or stratified design."""

    def design_weights(self) -> np.ndarray:
        """ω_i of every design probe (:func:`probe_weights`), in the order of ``correct[design]``."""
        d = self.design
        parts = None if self.part is None else self.part[d]
        return probe_weights(self.inclusion[d], self.round[d], parts, len(self.round_means))


def probe_weights(pi, rounds, parts=None, num_rounds: int | None = None) -> np.ndarray:
    """Each design probe's weight ω_i in its round's estimate of a total, ``Σ_i ω_i·x_i``.

    One part (uniform, stratified): ``ω_i = 1/π_i`` (Horvitz–Thompson). An adaptive round
    has ``k_F`` floor draws and ``k_L`` lean draws (the lean drawn among the edges not in
    the floor, ``π`` conditional on it); its estimate is the mix ``(k_F/k)·T̂_F +
    (k_L/k)·T̂_L`` of the floor's HT estimate and the lean's (the floor edges counted with
    certainty plus the lean's HT sum over the rest), both unbiased, so::

        ω_i = (k_F/k)/π_i + k_L/k   (floor probe),   ω_i = (k_L/k)/π_i   (lean probe).
    """
    pi = np.asarray(pi, dtype=np.float64)
    rnd = np.asarray(rounds, dtype=np.int64)
    if parts is None:
        return 1.0 / pi
    parts = np.asarray(parts)
    lean = parts == 2
    if not lean.any():
        return 1.0 / pi
    size = int(num_rounds if num_rounds is not None else (rnd.max() + 1 if rnd.size else 0))
    k_f = np.bincount(rnd, weights=(~lean).astype(np.float64), minlength=size)[rnd]
    k_l = np.bincount(rnd, weights=lean.astype(np.float64), minlength=size)[rnd]
    k = k_f + k_l
    return np.where(lean, (k_l / k) / pi, (k_f / k) / pi + k_l / k)


def _score_scale(omega, rnd, m_per_round, n_group) -> np.ndarray:
    """What each design probe's residual y − ŷ is multiplied by in its score z: m_t·ω_i/N."""
    return m_per_round[rnd] * omega / n_group


def _z_scores(y, yhat, omega, rnd, in_group, m_per_round, mean_pred, n_group) -> np.ndarray:
    """z_i of the module docstring for the design probes (all arrays over design probes)."""
    resid = np.where(in_group, (y - yhat) * _score_scale(omega, rnd, m_per_round, n_group), 0.0)
    return mean_pred[rnd] + resid


def design_estimate(
    y,
    yhat,
    pi,
    rounds,
    mean_pred,
    *,
    n_group: int,
    in_group=None,
    mean_var=None,
    n_total: int | None = None,
    group: bool = False,
    confidence: float = 0.95,
    parts=None,
    martingale: bool = False,
) -> GroupEstimate:
    """The Horvitz–Thompson difference estimate of one group from its design probes.

    Arrays are over the design probes of the run: outcomes ``y``, predictions ``yhat``,
    inclusion probabilities ``pi``, round indices ``rounds`` (0-based into ``mean_pred``
    and ``mean_var``), and whether each probe's edge is in the group (``in_group``; all
    True for the KG). ``mean_pred[t]`` is P̄_{G,t}; ``mean_var[t]`` is V̄_{G,t} and
    ``n_total`` the KG's active edges N (both only for a group's variance floor, which
    assumes the uniform design). ``group=True`` asks for the small-sample treatment of
    a predicate or entity group (Student t, variance floor).
    """
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie in (0, 1), got {confidence}")
    y = np.asarray(y, dtype=np.float64)
    yhat = np.asarray(yhat, dtype=np.float64)
    pi = np.asarray(pi, dtype=np.float64)
    rnd = np.asarray(rounds, dtype=np.int64)
    mean_pred = np.asarray(mean_pred, dtype=np.float64)
    in_g = np.ones(y.shape, bool) if in_group is None else np.asarray(in_group, bool)
    if not (y.shape == yhat.shape == pi.shape == rnd.shape == in_g.shape) or y.ndim != 1:
        raise InputError("outcomes, predictions, inclusion probabilities and rounds need one value per probe")
    if y.size and (rnd.min() < 0 or rnd.max() >= mean_pred.size):
        raise InputError("round indices must index the per-round mean predictions")
    if y.size and (np.any(~(pi > 0)) or np.any(pi > 1)):
        raise InputError("inclusion probabilities of design probes must lie in (0, 1]")
    if n_group < 1:
        raise InputError(f"a group needs at least one active edge, got {n_group}")
    m = y.size
    method = "ht-difference"
    if m == 0:
        nan = float("nan")
        return GroupEstimate(nan, nan, nan, 0, int(n_group), DESIGN, "no-design-probes")
    m_per_round = np.bincount(rnd, minlength=mean_pred.size).astype(np.float64)
    omega = probe_weights(pi, rnd, parts, mean_pred.size)
    z = _z_scores(y, yhat, omega, rnd, in_g, m_per_round, mean_pred, float(n_group))
    est = float(z.mean())
    hits = int(in_g.sum())
    var = float(z.var(ddof=1)) if m > 1 else math.inf
    if martingale and m > 1:
        var = martingale_variance(z, rnd, var)
    df = math.inf
    if group:
        if mean_var is None or n_total is None:
            raise InputError("a group estimate needs the mean predicted variance per round and the KG's size")
        mv = np.asarray(mean_var, dtype=np.float64)
        # The floor: the variance of z the predictions themselves expect — a uniform draw
        # lands in G with probability N_G/N and then carries (N/N_G)·(y − ŷ).
        floor = float(np.mean(mv[rnd])) * (n_total / n_group)
        var = max(var, floor)
        df = float(max(hits - 1, 1))
        q = float(student_t.ppf(0.5 + confidence / 2, df))
    else:
        q = float(norm.ppf(0.5 + confidence / 2))
    se = math.sqrt(var / m)
    if group:
        half = q * se
        low, high = est - half, est + half
    else:
        in_y = y[in_g]
        low, high = effective_wilson(est, se, m, q, all_right=bool(np.all(in_y == 1.0)),
                                     all_wrong=bool(np.all(in_y == 0.0)))
    # An accuracy lies in [0, 1]; the unbiased value can stray outside on few probes.
    # Shown clipped (as is the interval); ``raw`` keeps the unbiased number.
    return GroupEstimate(min(1.0, max(0.0, est)), min(1.0, max(0.0, low)), max(0.0, min(1.0, high)), hits,
                         int(n_group), DESIGN, method, se, df, est)


def round_spread(correct, predicted, inclusion, parts, n_active: int) -> tuple[float, float, int]:
    """One round's share of the KG estimate's variance, as the interval counts it and as
    the predictions expect it.

    Arrays are over the round's probes (``parts`` 0 for a sampler's own choice, which the
    estimate leaves out). Returns ``(m·s², Σ ŷ(1 − ŷ)·(m·ω/N)², m)`` over its ``m``
    design probes: ``s²`` the within-round variance of their scores ``z`` that
    :func:`martingale_variance` sums, and the variance the same draws would have if every
    prediction ŷ were each answer's exact chance of being right. Their ratio is what the
    predictions' own errors add (a run's ``--lean-target`` control,
    :func:`kgprobe.sampling.design.projected_halfwidth`). A round with one design probe
    gives its expected share for both.
    """
    d = np.asarray(parts) != 0
    m = int(d.sum())
    if m == 0:
        return 0.0, 0.0, 0
    y = np.asarray(correct, dtype=np.float64)[d]
    yhat = np.asarray(predicted, dtype=np.float64)[d]
    rnd = np.zeros(m, dtype=np.int64)
    omega = probe_weights(np.asarray(inclusion, dtype=np.float64)[d], rnd, np.asarray(parts)[d], 1)
    scale = _score_scale(omega, rnd, np.array([float(m)]), float(n_active))
    expected = float(np.sum(yhat * (1.0 - yhat) * scale * scale))
    realized = m * float(np.var((y - yhat) * scale, ddof=1)) if m > 1 else expected
    return realized, expected, m


def martingale_variance(z: np.ndarray, rounds: np.ndarray, pooled: float) -> float:
    """``M·Var(mean z)`` from the rounds' own spreads: ``Σ_t m_t·s²_t / M``.

    Each round's mean of z is unbiased given the past (a martingale difference once the
    accuracy is subtracted), so the variance of the run's mean is the sum of the rounds'
    conditional variances, each estimated by its within-round sample variance; the
    martingale central limit theorem makes the normal interval valid as rounds accrue
    (Zrnic & Candès 2024). Rounds with one design probe borrow the pooled variance.
    Unlike the pooled sample variance it leaves out how the rounds' mean predictions P̄_t
    moved between rounds, which is not noise of the estimate.
    """
    m = z.size
    total = 0.0
    for t in np.unique(rounds):
        zt = z[rounds == t]
        total += zt.size * (float(zt.var(ddof=1)) if zt.size > 1 else pooled)
    return total / m


def design_scores(table: ProbeTable, mask: np.ndarray | None = None) -> np.ndarray:
    """The z_i of the KG estimate for every design probe of ``table`` (or those in ``mask``,
    a boolean over the design probes; the weights stay those of the whole design)."""
    d = table.design
    rounds = len(table.round_means)
    rnd = table.round[d]
    m_per_round = np.bincount(rnd, minlength=rounds).astype(np.float64)
    sizes = table.group_sizes["predicate"]
    n_g = sum(sizes.values())
    mean_pred = np.array([_kg_mean(table.round_means[t]["predicate"], sizes, n_g) for t in range(rounds)])
    in_g = np.ones(int(d.sum()), bool)
    z = _z_scores(table.correct[d].astype(np.float64), table.predicted[d], table.design_weights(), rnd, in_g,
                  m_per_round, mean_pred, float(n_g))
    return z if mask is None else z[mask]



def _round_draw_weights(omega: np.ndarray, rnd: np.ndarray, num_rounds: int | None = None) -> np.ndarray:
    """``a_i = m_t·ω_i``: each design probe's weight with its round weighed by its design draws."""
    size = num_rounds if num_rounds is not None else int(rnd.max()) + 1
    return np.bincount(rnd, minlength=size).astype(np.float64)[rnd] * omega


def group_probe_weights(table: ProbeTable, kind: str, group: str, omega: np.ndarray | None = None) -> np.ndarray:
    """Each design probe's weight ``a_i`` in ``group``'s ratio estimate (:func:`hajek_estimate`).

    A round's design estimates the group's total and size without bias, and a ratio of
    rounds' estimates summed with weights fixed before each round's answers stays
    consistent; the weights only decide how noisy it is. Where the run recorded each
    round's expected draws in the group (:func:`kgprobe.sampling.design.with_expected_draws`:
    ``e_F`` of the floor, ``e_L`` of the lean given the floor), each part of a round is
    weighed by them::

        a_i = e_F/π_i + e_L   (floor probe),   a_i = e_L/π_i   (lean probe),

    so a draw weighs about the group's size whichever round made it: a round whose draw
    reached a small predicate with a small π counts as the fraction of a draw it expected.
    For the whole KG ``e_F`` and ``e_L`` are the round's floor and lean draws and this is
    ``m_t·ω_i`` (:func:`probe_weights`), the KG estimate's weight. Runs without them (the
    uniform design, files written before they were recorded): ``m_t·ω_i`` for every group
    (``omega``: the table's :meth:`ProbeTable.design_weights`, when already at hand).
    """
    d = table.design
    rnd = table.round[d]
    expected = _expected_draws(table, kind, group)
    if expected is None:
        return _round_draw_weights(table.design_weights() if omega is None else omega, rnd, len(table.round_means))
    pi = table.inclusion[d]
    lean = np.zeros(pi.size, bool) if table.part is None else table.part[d] == 2
    e_f, e_l = expected[rnd, 0], expected[rnd, 1]
    return np.where(lean, e_l / pi, e_f / pi + e_l)


def _expected_draws(table: ProbeTable, kind: str, group: str) -> np.ndarray | None:
    """``(rounds, 2)``: the group's expected floor and lean draws per round, None unless every
    round recorded them."""
    rows = []
    for means in table.round_means:
        v = means.get(kind, {}).get(group)
        if v is None or len(v) < 4:
            return None
        rows.append((float(v[2]), float(v[3])))
    return np.asarray(rows, dtype=np.float64).reshape(-1, 2)


def hajek_estimate(y, omega, rounds, in_group, *, n_group: int, confidence: float = 0.95,
                   weights=None) -> GroupEstimate:
    """A group's accuracy as a ratio (Hájek) of design-weighted sums, with a Korn–Graubard interval.

    Arrays are over the run's design probes: outcomes ``y``, weights ``omega``
    (:func:`probe_weights`), 0-based ``rounds``, membership ``in_group``. With round
    weights ``m_t`` (the round's design draws), probe i weighs ``a_i = m_t·ω_i``, or
    ``weights`` when given (:func:`group_probe_weights`), and::

        Â_G = Σ_{i∈G} a_i·y_i / Σ_{i∈G} a_i

    a weighted mean of 0/1 outcomes, so always in [0, 1]. Both sums are unbiased for
    the group's total and size (each round's design estimates any total without bias), so
    the ratio is consistent whatever the adaptivity. The interval: the linearized
    variance ``v = M·s²(a_i·1_G·(y_i − Â)) / (Σ_G a_i)²`` over the ``M`` design probes
    (the with-replacement approximation), turned into an effective sample size
    ``n* = Â(1 − Â)/v`` (at most Kish's ``(Σa)²/Σa²``, and Kish's where ``Â`` is 0 or 1
    or ``v`` is 0), then the Clopper–Pearson interval for ``n*·Â`` successes in ``n*``
    trials (Korn & Graubard 1998). With equal weights each design probe of the group is
    a Bernoulli draw with the group's accuracy as its mean, and this is the exact binomial
    interval. Fewer than :data:`MIN_DESIGN_PROBES` design probes in the group: no
    estimate (basis :data:`TOO_FEW`).
    """
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie in (0, 1), got {confidence}")
    y = np.asarray(y, dtype=np.float64)
    omega = np.asarray(omega, dtype=np.float64)
    rnd = np.asarray(rounds, dtype=np.int64)
    in_g = np.asarray(in_group, bool)
    if not (y.shape == omega.shape == rnd.shape == in_g.shape) or y.ndim != 1:
        raise InputError("outcomes, weights, rounds and group flags need one value per design probe")
    h = int(in_g.sum())
    nan = float("nan")
    if h < MIN_DESIGN_PROBES:
        return GroupEstimate(nan, nan, nan, h, int(n_group), TOO_FEW, "too-few-design-probes")
    a = _round_draw_weights(omega, rnd) if weights is None else np.asarray(weights, dtype=np.float64)
    if a.shape != y.shape:
        raise InputError("outcomes and probe weights need one value per design probe")
    p, e = _hajek_parts(y, a, in_g)
    ag = a[in_g]
    total = float(ag.sum())
    m = y.size
    var = float(m * e.var(ddof=1) / total ** 2) if m > 1 else 0.0
    kish = total ** 2 / float(np.dot(ag, ag))
    n_eff = kish
    if 0.0 < p < 1.0 and var > 0:
        n_eff = min(kish, p * (1 - p) / var)
    low, high = clopper_pearson(p * n_eff, n_eff, confidence)
    se = math.sqrt(var) if var > 0 else math.sqrt(p * (1 - p) / n_eff)
    return GroupEstimate(p, low, high, h, int(n_group), DESIGN, "hajek-korn-graubard", se, n_eff - 1, p)


def _hajek_parts(y, a, in_g) -> tuple[float, np.ndarray]:
    """``Â_G`` of :func:`hajek_estimate` (cut to [0, 1]) from the probe weights ``a_i``, and
    each design probe's linearized deviation ``a_i·1_G·(y_i − Â)``."""
    ag = a[in_g]
    p = min(1.0, max(0.0, float(np.dot(ag, y[in_g]) / float(ag.sum()))))
    return p, np.where(in_g, a * (y - p), 0.0)


def hajek_scores(table: ProbeTable, kind: str, group: str) -> np.ndarray | None:
    """Each design probe's share of the error of ``group``'s ratio estimate (:func:`hajek_estimate`):
    ``u_i = a_i·1_G·(y_i − Â_G) / Σ_G a_i``, whose ``M·s²(u)`` is the estimate's linearized
    variance. Two runs' scores over their paired draws give the covariance of their two
    estimates (``kgprobe compare``). None when no design probe is in the group."""
    d = table.design
    in_g = np.asarray(table.labels[kind][d] == group, bool)
    if not in_g.any():
        return None
    a = group_probe_weights(table, kind, group)
    _, e = _hajek_parts(table.correct[d].astype(np.float64), a, in_g)
    return e / float(a[in_g].sum())


def clopper_pearson(x: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson bounds for ``x`` successes in ``n`` trials (both may be fractional)."""
    a = (1 - confidence) / 2
    low = float(beta_dist.ppf(a, x, n - x + 1)) if x > 0 else 0.0
    high = float(beta_dist.ppf(1 - a, x + 1, n - x)) if x < n else 1.0
    return low, high


def model_interval(successes: int, failures: int, *, n_group: int, confidence: float = 0.95) -> GroupEstimate:
    """Jeffreys interval (Beta(½ + s, ½ + f) quantiles) from a group's probe counts: model-based."""
    s, f = int(successes), int(failures)
    if s + f == 0:
        nan = float("nan")
        return GroupEstimate(nan, nan, nan, 0, int(n_group), MODEL, "no-probes")
    a = (1 - confidence) / 2
    low = float(beta_dist.ppf(a, s + 0.5, f + 0.5)) if s > 0 else 0.0
    high = float(beta_dist.ppf(1 - a, s + 0.5, f + 0.5)) if f > 0 else 1.0
    return GroupEstimate(s / (s + f), low, high, 0, int(n_group), MODEL, "jeffreys-probed-edges")


def kg_estimate(table: ProbeTable, *, confidence: float = 0.95) -> GroupEstimate:
    """The KG accuracy: the design estimate with G = every active edge."""
    d = table.design
    rounds = len(table.round_means)
    sizes = table.group_sizes["predicate"]
    n_total = sum(sizes.values())
    mean_pred = np.array([_kg_mean(table.round_means[t]["predicate"], sizes, n_total) for t in range(rounds)])
    parts = None if table.part is None else table.part[d]
    # The rounds' own variances (martingale CLT) for an adaptive design; the pooled one,
    # as before it existed, for the uniform and stratified designs (their reports unchanged).
    adaptive = parts is not None and bool(np.any(parts == 2))
    return design_estimate(table.correct[d], table.predicted[d], table.inclusion[d], table.round[d], mean_pred,
                           n_group=n_total, confidence=confidence, parts=parts, martingale=adaptive)


def _kg_mean(means: Mapping[str, Sequence[float]], sizes: Mapping[str, int], n_total: int) -> float:
    return sum(sizes[g] * means[g][0] for g in sizes if g in means) / n_total


def group_estimates(table: ProbeTable, kind: str, *, confidence: float = 0.95,
                    direct: Mapping[str, tuple[int, int]] | None = None) -> dict[str, GroupEstimate]:
    """Accuracy of every group of one kind (``predicate`` or ``group``) with its interval.

    The ratio estimate of :func:`hajek_estimate` (in [0, 1]) from the group's design
    probes; a group with fewer than :data:`MIN_DESIGN_PROBES` of them gets no number
    (basis :data:`TOO_FEW`). Only a run with no design probe at all falls back on
    model-based intervals from ``direct[g] = (successes, failures)`` of all the group's
    probes (left out when there are none).
    """
    d = table.design
    out: dict[str, GroupEstimate] = {}
    if not d.any():
        for g, n_g in table.group_sizes[kind].items():
            if direct is not None and sum(direct.get(g, (0, 0))) > 0:
                out[g] = model_interval(*direct[g], n_group=n_g, confidence=confidence)
        return out
    labels = table.labels[kind][d]
    y = table.correct[d].astype(np.float64)
    omega = table.design_weights()
    rnd = table.round[d]
    for g, n_g in table.group_sizes[kind].items():
        out[g] = hajek_estimate(y, omega, rnd, labels == g, n_group=n_g, confidence=confidence,
                                weights=group_probe_weights(table, kind, g, omega))
    return out


def group_labels(kg) -> dict[str, tuple[np.ndarray, list[str]]]:
    """Per edge of ``kg`` its predicate and subject entity group, as (index array, names).

    Cached on the graph (a KG is not changed after loading): the engine asks every round.
    """
    cached = getattr(kg, "_estimator_labels", None)
    if cached is not None:
        return cached
    pred_names = [kg.predicate_id(i) for i in range(len(kg.predicates))]
    groups = [kg.entities[e].group or "(none)" for e in kg.entity_ids]
    names = sorted(set(groups))
    index = {g: i for i, g in enumerate(names)}
    group_of_entity = np.asarray([index[g] for g in groups], dtype=np.int64)
    group_of_edge = group_of_entity[kg.subjects] if kg.num_edges else np.empty(0, np.int64)
    out = {"predicate": (np.asarray(kg.predicate_of, dtype=np.int64), pred_names), "group": (group_of_edge, names)}
    try:
        kg._estimator_labels = out
    except AttributeError:  # a graph type with slots: recompute next time
        pass
    return out


def table_from_store(store) -> ProbeTable | None:
    """The :class:`ProbeTable` of a run file, or None when it predates recorded predictions."""
    probes = store.probe_arrays()
    preds = store.round_predictions()
    if "predicted" not in probes or not preds:
        return None
    kg = store.kg
    rounds = probes["round"]
    last = store.last_round()
    if any(r not in preds for r in range(1, last + 1)) or np.isnan(probes["predicted"]).any():
        return None  # an older run resumed by this version: part of it has no predictions
    labels = group_labels(kg)
    act = np.asarray(kg.active, bool)
    sizes: dict[str, dict[str, int]] = {}
    per_probe: dict[str, np.ndarray] = {}
    for kind, (lab, names) in labels.items():
        cnt = np.bincount(lab[act], minlength=len(names))
        sizes[kind] = {str(names[g]): int(cnt[g]) for g in range(len(names)) if cnt[g]}
        per_probe[kind] = np.asarray(names, dtype=object)[lab[probes["edge"]]] if probes["edge"].size \
            else np.empty(0, object)
    means = [{kind: {g: tuple(v) for g, v in preds[r][kind].items()} for kind in labels}
             for r in range(1, last + 1)]
    design = probes["design"]
    table = ProbeTable(probes["correct"], design, probes["predicted"], probes["inclusion"], rounds - 1,
                       per_probe, means, sizes, probes["edge"], part=probes.get("part"))
    return table


def run_estimates(store, *, confidence: float = 0.95) -> dict:
    """KG, per-predicate and per-group accuracy with intervals for a run file, JSON-able.

    ``{"kg": {...}, "by_predicate": {id: {...}}, "by_group": {name: {...}}}``; each entry
    is a :meth:`GroupEstimate.as_dict`. Runs recorded before predictions were stored get
    the plain design mean with a Wilson interval for the KG and model-based groups only.
    """
    from kgprobe.metrics import wilson_interval

    table = table_from_store(store)
    probes = store.probe_arrays()
    kg = store.kg
    labels = group_labels(kg)
    act = np.asarray(kg.active, bool)
    direct: dict[str, dict[str, tuple[int, int]]] = {}
    for kind, (lab, names) in labels.items():
        e = probes["edge"]
        ok = probes["correct"]
        k = len(names)
        s = np.bincount(lab[e], weights=ok, minlength=k) if e.size else np.zeros(k)
        t = np.bincount(lab[e], minlength=k) if e.size else np.zeros(k)
        direct[kind] = {str(names[g]): (int(s[g]), int(t[g] - s[g])) for g in range(k) if t[g]}
    out: dict = {}
    if table is not None and table.design.any():
        out["kg"] = kg_estimate(table, confidence=confidence).as_dict()
        for kind, key in (("predicate", "by_predicate"), ("group", "by_group")):
            out[key] = {g: e.as_dict() for g, e in group_estimates(table, kind, confidence=confidence,
                                                                   direct=direct[kind]).items()}
        return _with_labels(out, kg)
    d = probes["design"]
    n = int(d.sum())
    if n:
        k = int(probes["correct"][d].sum())
        low, high = wilson_interval(k, n, confidence)
        p = k / n
        out["kg"] = GroupEstimate(p, low, high, n, int(act.sum()), DESIGN, "design-wilson",
                                  math.sqrt(max(p * (1 - p), 1e-12) / n)).as_dict()
    else:
        out["kg"] = None
    sizes = {kind: np.bincount(lab[act], minlength=len(names)) for kind, (lab, names) in labels.items()}
    for kind, key in (("predicate", "by_predicate"), ("group", "by_group")):
        names = labels[kind][1]
        idx = {str(nm): i for i, nm in enumerate(names)}
        out[key] = {g: model_interval(s, f, n_group=int(sizes[kind][idx[g]]), confidence=confidence).as_dict()
                    for g, (s, f) in direct[kind].items()}
    return _with_labels(out, kg)


def _with_labels(out: dict, kg) -> dict:
    """Each predicate entry gains its label (the report shows labels, the keys are ids)."""
    for pid, entry in out["by_predicate"].items():
        entry["label"] = kg.predicates[pid].label if pid in kg.predicates else pid
    return out


def format_estimate(est: Mapping | None) -> str:
    """``"61.2 % [55.0, 67.4] design-based"``-style text of an estimate dict ('n/a' when None)."""
    if est and est.get("basis") == TOO_FEW:
        return f"too few design probes ({est.get('n', 0)})"
    if not est or est.get("estimate") is None or not math.isfinite(est["estimate"]):
        return "n/a"
    return f"{est['estimate']:.1%} [{est['low']:.1%}, {est['high']:.1%}] {est['basis']}"


def short_estimate(est: Mapping | None) -> str:
    """``"32% [20%, 45%]"`` for a narrow column; ``*`` marks a model-based estimate.

    'too few' when the group's design probes are too few for an interval, 'n/a' without one.
    """
    if est and est.get("basis") == TOO_FEW:
        return "too few"
    if not est or est.get("estimate") is None or not math.isfinite(est["estimate"]):
        return "n/a"
    mark = "" if est.get("basis") == DESIGN else "*"
    return f"{est['estimate']:.0%} [{est['low']:.0%}, {est['high']:.0%}]{mark}"


def compact_line(estimates: Mapping, *, limit: int = 3) -> str:
    """One line for a live view: KG accuracy and the lowest-accuracy predicates, with intervals.

    ``estimates`` is :func:`run_estimates`' result. E.g. ``"KG accuracy 61% [55, 67]
    (design) · weakest predicates: capital 32% [20, 45], …"``.
    """
    kg = estimates.get("kg")
    if not kg or kg.get("estimate") is None or not math.isfinite(kg["estimate"]):
        return "KG accuracy: n/a (no design-based probes yet)"
    parts = [f"KG accuracy {kg['estimate']:.0%} [{kg['low']:.0%}, {kg['high']:.0%}]"]
    preds = [(e.get("label", k), e) for k, e in estimates.get("by_predicate", {}).items()
             if e.get("estimate") is not None and math.isfinite(e["estimate"])]
    preds.sort(key=lambda kv: kv[1]["estimate"])
    if preds and limit > 0:
        parts.append("lowest: " + ", ".join(f"{name} {short_estimate(e)}" for name, e in preds[:limit]))
    return " · ".join(parts)
