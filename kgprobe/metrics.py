"""Knowledge metrics (KGLens §3.2), their convergence, and an unbiased KG-level accuracy.

Per edge with ``m`` direct successes and ``n`` direct failures over all rounds it was
probed (propagated signal never counts here):

* win rate        = share of probed edges with ``m > n``;
* zero-sense rate = share of probed edges with ``m == 0``;
* all-sense rate  = share of probed edges with ``n == 0``.

These are over **probed edges** — a biased sample of the KG when an adaptive sampler
chose them (Thompson sampling over-samples weak edges), so they are rates, not estimates
for the KG. The KG, predicate and group accuracy a run reports, with intervals, are the
design-based estimates of :mod:`kgprobe.estimators`. :func:`kg_accuracy_estimate` here is
the older design-only estimate (uniform design draws; plain mean with Wilson's interval, or
the difference estimator), kept for the sampler study and for reading old run files.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.stats import norm

from kgprobe import run_spec
from kgprobe.errors import InputError


@dataclass(frozen=True)
class KnowledgeMetrics:
    """Win / zero-sense / all-sense rates over probed edges (NaN when nothing was probed)."""

    win_rate: float
    zero_sense_rate: float
    all_sense_rate: float
    probed_edges: int

    def as_dict(self) -> dict[str, float | int]:
        return {
            "win_rate": self.win_rate,
            "zero_sense_rate": self.zero_sense_rate,
            "all_sense_rate": self.all_sense_rate,
            "probed_edges": self.probed_edges,
        }


def _counts(successes, failures) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(successes)
    n = np.asarray(failures)
    if m.shape != n.shape or m.ndim != 1:
        raise InputError(f"successes and failures must be 1-d arrays of one length, got {m.shape} and {n.shape}")
    if m.size and (m.min() < 0 or n.min() < 0):
        raise InputError("probe counts cannot be negative")
    return m, n


def knowledge_metrics(successes, failures) -> KnowledgeMetrics:
    """The three KGLens rates over the edges probed at least once."""
    m, n = _counts(successes, failures)
    probed = (m + n) > 0
    k = int(probed.sum())
    if k == 0:
        nan = float("nan")
        return KnowledgeMetrics(nan, nan, nan, 0)
    mp, np_ = m[probed], n[probed]
    return KnowledgeMetrics(
        win_rate=float(np.mean(mp > np_)),
        zero_sense_rate=float(np.mean(mp == 0)),
        all_sense_rate=float(np.mean(np_ == 0)),
        probed_edges=k,
    )


def grouped_metrics(successes, failures, groups: Sequence[str] | np.ndarray) -> dict[str, KnowledgeMetrics]:
    """:func:`knowledge_metrics` per group label (a predicate, an entity's country…).

    ``groups[j]`` is edge j's label. Groups with no probed edge are left out.
    """
    m, n = _counts(successes, failures)
    labels = np.asarray(groups)
    if labels.shape != m.shape:
        raise InputError(f"groups has {labels.shape[0] if labels.ndim else 0} labels for {m.shape[0]} edges")
    out: dict[str, KnowledgeMetrics] = {}
    probed = (m + n) > 0
    uniq, inv = np.unique(labels, return_inverse=True)
    for g in np.unique(inv[probed]):
        sel = inv == g
        out[str(uniq[g])] = knowledge_metrics(m[sel], n[sel])
    return out


class ConvergenceMonitor:
    """Declares the running metrics converged when they stop moving.

    Converged after an update when the last ``window + 1`` snapshots of each of win,
    zero-sense and all-sense rate all lie within ``tolerance`` of each other (max − min
    ≤ tolerance), i.e. no rate moved by more than ``tolerance`` over ``window`` rounds.
    Snapshots with no probed edge (NaN) reset the window.
    """

    def __init__(self, window: int = 5, tolerance: float = 0.01):
        # The run settings' own checks, so a window or tolerance is refused alike here, on
        # the command line, in a config file and in the API.
        window = int(window) if isinstance(window, np.integer) else window
        tolerance = float(tolerance) if isinstance(tolerance, np.floating) else tolerance
        run_spec.check_value("convergence_window", window)
        run_spec.check_value("convergence_tolerance", tolerance)
        self.window = int(window)
        self.tolerance = tolerance
        self._history: deque[tuple[float, float, float]] = deque(maxlen=self.window + 1)
        self.converged = False

    def update(self, metrics: KnowledgeMetrics) -> bool:
        """Record one round's metrics; return whether they have converged."""
        snap = (metrics.win_rate, metrics.zero_sense_rate, metrics.all_sense_rate)
        if any(math.isnan(x) for x in snap):
            self._history.clear()
            self.converged = False
            return False
        self._history.append(snap)
        if len(self._history) <= self.window:
            self.converged = False
            return False
        h = np.asarray(self._history)
        self.converged = bool(np.all(h.max(axis=0) - h.min(axis=0) <= self.tolerance))
        return self.converged

    def state_dict(self) -> dict:
        return {
            "window": self.window,
            "tolerance": self.tolerance,
            "history": [list(x) for x in self._history],
            "converged": self.converged,
        }

    def load_state_dict(self, state: dict) -> None:
        self.window = int(state["window"])
        self.tolerance = float(state["tolerance"])
        self._history = deque((tuple(x) for x in state["history"]), maxlen=self.window + 1)
        self.converged = bool(state["converged"])


@dataclass(frozen=True)
class AccuracyEstimate:
    """KG-level accuracy (share of right answers on a uniformly random active edge)."""

    estimate: float
    low: float
    high: float
    n: int
    """Number of probes the estimate rests on (the design probes)."""
    method: str

    def as_dict(self) -> dict[str, float | int | str]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "n": self.n, "method": self.method}


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n == 0:
        return float("nan"), float("nan")
    return _wilson_bounds(successes / n, n, float(norm.ppf(0.5 + confidence / 2)))


def _wilson_bounds(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's score bounds for a proportion ``p`` of ``n`` draws at the normal quantile ``z``."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def effective_wilson(estimate: float, se: float, n: int, q: float, *, all_right: bool = False,
                     all_wrong: bool = False) -> tuple[float, float]:
    """Wilson's score interval at the effective sample size ``n* = p(1 − p)/se²``.

    A normal interval ``p ± q·se`` undercovers near 0 and 1: a run that happened to draw
    edges its predictions got right has both an estimate near the boundary and a small
    ``se``, so the runs that miss are the ones that look surest (replays of a model right
    97 % of the time: 0.89–0.92 coverage). Wilson's interval takes the variance at the
    accuracy it tests rather than at the estimate, as if the estimate were a proportion
    of ``n*`` fresh draws — the "effective sample size" Wilson interval of survey
    statistics (compared with its alternatives by Dean & Pagano 2015; Korn & Graubard 1998
    use the same ``n*`` with Clopper–Pearson, as :func:`kgprobe.estimators.hajek_estimate`
    does for predicates and groups). At the committed sweeps' accuracies (0.3–0.8) and
    256 probes it is the normal interval to within a few hundredths of a point; on few
    probes it is wider, as it should be (1 right of 32: 0.5–16 % against 0–9 %). ``p`` is
    the estimate clipped to [0, 1]; where it is 0 or 1, or ``se`` is 0, ``n*`` is ``n``,
    the design probes. Where every design probe was answered right (wrong), ``p`` is 1
    (0): predictions the weights correct by small amounts can leave the unbiased value a
    little below 1, but no answer says the model fails anywhere, and only the design
    probes' count bounds how far the truth can be below 1.
    """
    if not math.isfinite(se):
        return 0.0, 1.0
    p = min(1.0, max(0.0, float(estimate)))
    if all_right or all_wrong:
        p = 1.0 if all_right else 0.0
    n_eff = p * (1.0 - p) / se ** 2 if 0.0 < p < 1.0 and se > 0 else float(n)
    low, high = _wilson_bounds(p, n_eff, q)
    # At p = 1 (0) the upper (lower) bound is 1 (0) exactly; rounding would leave it just short.
    return (0.0 if p == 0.0 else low), (1.0 if p == 1.0 else high)


def kg_accuracy_estimate(
    correct,
    design,
    *,
    confidence: float = 0.95,
    predicted=None,
    rounds=None,
    mean_predicted=None,
) -> AccuracyEstimate:
    """Unbiased accuracy of the whole KG from the design probes of a run.

    ``correct`` and ``design`` are flat per-probe arrays over all rounds (what the engine
    records: each probe's verdict and its ``Selection.design`` flag).

    Estimator: each design probe picks its edge uniformly from the active edges,
    independently of everything before, and the model answers it right with probability
    ``1 − θ_j``; so each design verdict is a Bernoulli draw with mean
    ``A = 1 − mean_j θ_j`` (the KG accuracy) and their mean is unbiased for ``A`` no
    matter how the other probes were chosen. The interval is Wilson's score interval at
    ``confidence``; within a round design edges are drawn without replacement, which only
    shrinks the variance, so the interval is if anything conservative. Returns NaNs with
    ``method="no-design-probes"`` when no probe was a design draw (e.g. plain Thompson
    sampling with ``design_fraction=0``) — there is then no unbiased estimate to give.

    With ``predicted`` (per probe: the predicted chance of a right answer on its edge,
    ``1 − θ̂_j``, from the state *before* the probe's round), ``rounds`` (per probe: its
    round index) and ``mean_predicted`` (per round index: the mean prediction over all
    active edges from that same state), the estimate is the **difference estimator**
    ``mean_i z_i`` with ``z_i = mean_predicted[t_i] + (y_i − predicted_i)`` over design
    probes i. Given the past, a design edge is uniform, so ``E[y_i − predicted_i] =
    A − mean_predicted[t_i]`` and every ``z_i`` has mean ``A``: unbiased whatever the
    predictions are, and far less variable than the plain mean when they are good
    (facts a model knows or not are predictable from its earlier answers). Interval:
    :func:`effective_wilson` with standard error ``sd(z_i)/√n`` (method
    ``"design-difference"``).
    """
    c = np.asarray(correct, dtype=bool)
    a = np.asarray(design, dtype=bool)
    if c.shape != a.shape:
        raise InputError(f"correct and design must have one flag per probe, got shapes {c.shape} and {a.shape}")
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie in (0, 1), got {confidence}")
    n = int(a.sum())
    if n == 0:
        nan = float("nan")
        return AccuracyEstimate(nan, nan, nan, 0, "no-design-probes")
    if predicted is not None:
        return _difference_estimate(c, a, predicted, rounds, mean_predicted, confidence)
    k = int(c[a].sum())
    low, high = wilson_interval(k, n, confidence)
    return AccuracyEstimate(k / n, low, high, n, "design-wilson")


def _difference_estimate(c, a, predicted, rounds, mean_predicted, confidence) -> AccuracyEstimate:
    if rounds is None or mean_predicted is None:
        raise InputError("the difference estimator needs predicted, rounds and mean_predicted together")
    pred = np.asarray(predicted, dtype=np.float64)
    rnd = np.asarray(rounds)
    mean_pred = np.asarray(mean_predicted, dtype=np.float64)
    if pred.shape != c.shape or rnd.shape != c.shape:
        raise InputError("predicted and rounds need one value per probe")
    if rnd.size and (rnd.min() < 0 or rnd.max() >= mean_pred.size):
        raise InputError("rounds must index into mean_predicted")
    z = mean_pred[rnd[a]] + c[a].astype(np.float64) - pred[a]
    n = z.size
    est = float(z.mean())
    sd = float(z.std(ddof=1)) if n > 1 else float("inf")
    y = c[a]
    low, high = effective_wilson(est, sd / math.sqrt(n), n, float(norm.ppf(0.5 + confidence / 2)),
                                 all_right=bool(y.all()), all_wrong=not bool(y.any()))
    return AccuracyEstimate(est, low, high, n, "design-difference")
