"""Simulated answers that carry a margin, as a ZP-LKE probe's do, the margins taken from recorded answers.

A ZP-LKE probe scores the gold object against every wrong candidate; the answer is right
exactly when the margin (gold log-prob minus the best wrong one) is positive, and
``margin-focus`` reads that margin. The array-level Bernoulli oracle of the studies
(:func:`kgprobe.simulation.study.bernoulli_oracle`) gives verdicts only, so on simulated
θ* a margin reader saw nothing to read. :class:`MarginDonorOracle` adds margins without
a model of how margins behave: each simulated edge borrows a *donor*, a recorded edge of
a real sweep whose share of wrong answers is nearest its θ*, and every answer's margin
is one of the donor's recorded margins with the answer's sign.

Why donors and not a fitted distribution: ``margin-focus`` assumes normal margins around
an edge mean; drawing simulated margins from that same model would test the sampler on
its own assumption. A donor keeps what real margins do — the spread between edges with
the same error rate (an always-right edge with small margins stays small), skew, ties,
the model's own scale — and so is as kind to the sampler as the recorded answers are.

The verdicts are the Bernoulli oracle's, from the same random stream
(``default_rng([seed, 1])``), so a sampler that ignores margins sees exactly the answers
it sees without them; donors and margin draws use a separate stream.
"""

from __future__ import annotations

import numpy as np

from kgprobe.errors import InputError


class MarginDonorOracle:
    """``answer(edges)`` -> Bernoulli(1 − θ*) verdicts (True = right); ``last_margins`` their margins.

    ``sweep``: a recorded sweep with log-probs (``sweep.margin()`` not None). Donor of edge
    j: a recorded edge drawn uniformly among those whose share of wrong answers is
    nearest θ*_j. A margin of sign s for edge j is drawn uniformly from the donor's
    recorded margins of sign s; when the donor has none (an always-right donor and a
    wrong simulated answer), from the margins of sign s of all recorded edges at the
    nearest error share that has any.
    """

    replacement_draws = 0  # nothing is replayed past a recorded answer count

    def __init__(self, theta_star, sweep, seed: int):
        margin = sweep.margin() if hasattr(sweep, "margin") else None
        if margin is None:
            raise InputError("margin donors need a sweep recorded with log-probs (gold and best wrong)")
        margin = np.asarray(margin, dtype=np.float64)
        if margin.size == 0:
            raise InputError("margin donors need a sweep with at least one recorded answer")
        if np.any(margin == 0):
            # A zero margin has no sign: it cannot stand for either verdict.
            margin = np.where(margin == 0, np.nextafter(0.0, 1.0), margin)
        self.theta = np.asarray(theta_star, dtype=np.float64)
        self._verdict_rng = np.random.default_rng([seed, 1])
        self._margin_rng = np.random.default_rng([seed, 2])
        recorded = np.mean(margin <= 0, axis=1)  # each donor's share of wrong answers
        levels = np.unique(recorded)
        nearest = levels[np.abs(self.theta[:, None] - levels[None, :]).argmin(axis=1)]
        self._donor = np.empty(self.theta.size, dtype=np.int64)
        for level in levels:
            who = np.flatnonzero(nearest == level)
            if who.size:
                self._donor[who] = self._margin_rng.choice(np.flatnonzero(recorded == level), who.size)
        # Each donor's margins sorted descending: the positives first, then the negatives.
        self._sorted = -np.sort(-margin, axis=1)
        self._positives = np.sum(margin > 0, axis=1)
        self._passes = margin.shape[1]
        self._pool = {}
        for right in (True, False):
            for level in levels:
                rows = margin[recorded == level]
                self._pool[right, level] = rows[(rows > 0) == right]
        self._levels = levels
        self.last_margins: np.ndarray | None = None
        self.draws = 0

    def _fallback(self, edge: int, right: bool) -> float:
        with_sign = [lv for lv in self._levels if self._pool[right, lv].size]
        level = min(with_sign, key=lambda lv: (abs(lv - self.theta[edge]), lv))
        return float(self._margin_rng.choice(self._pool[right, level]))

    def answer(self, edges: np.ndarray) -> np.ndarray:
        edges = np.asarray(edges, dtype=np.int64)
        verdicts = self._verdict_rng.random(edges.size) >= self.theta[edges]
        margins = np.empty(edges.size, dtype=np.float64)
        for i, (edge, right) in enumerate(zip(edges.tolist(), verdicts.tolist())):
            donor = self._donor[edge]
            npos = int(self._positives[donor])
            lo, count = (0, npos) if right else (npos, self._passes - npos)
            if count:
                margins[i] = self._sorted[donor, lo + int(self._margin_rng.integers(count))]
            else:
                margins[i] = self._fallback(edge, right)
        self.last_margins = margins
        self.draws += edges.size
        return verdicts
