"""Informed references for the sample-efficiency study: two samplers that are told θ*.

A sampler's ratio (:func:`kgprobe.simulation.study.efficiency_ratio`) says how many
queries it needs next to brute force. These two say how many a sampler needs when it
knows what no real sampler knows, which tells "the samplers could do better here" from
"this sweep is hard for anyone":

* ``informed top-k``: probes only the true top-k edges, the least-answered first.
* ``screen once, then informed``: answers every edge once first (in a random order, as a
  sampler that knows nothing yet must look at each edge), then only the true top-k, the
  least-answered first. A sampler above it loses by not telling the top k apart after
  one answer; one below it gains from pooling (leaving edges its predicate says are fine).

Both estimate θ as ``focus`` does (its pooled posterior, refitted as the answers grow),
so their MSE curves compare with ``focus``'s. Neither is a bound: that estimator learns its prior from all the
answers, so where a predicate is wrong as a whole, answers spread over the predicate can
teach it more than answers on the top k alone (Qwen2.5-Coder-0.5B's answers on geo-us:
``focus`` 0.084, ``informed top-k`` 0.268; docs/samplers-measured.md). They are study
instruments: they read the truth, so no run can use them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kgprobe.sampling.base import Selection
from kgprobe.sampling.focus import FocusSampler
from kgprobe.simulation.study import hardest_edges

INFORMED_TOP_K = "informed top-k"
SCREEN_THEN_INFORMED = "screen once, then informed"


class InformedSampler(FocusSampler):
    """Picks from the true top-k edges ``top`` (after one answer per edge, with ``screen``)."""

    name = "informed"

    def __init__(self, top: np.ndarray, *, screen: bool, **options) -> None:
        super().__init__(**options)
        self.top = np.asarray(top, dtype=np.int64)
        self.screen = screen

    @staticmethod
    def _least_answered(candidates: np.ndarray, answered: np.ndarray, n: int,
                        rng: np.random.Generator) -> np.ndarray:
        # Random order first, then a stable sort by answers: ties are broken at random.
        shuffled = rng.permutation(candidates)
        return shuffled[np.argsort(answered[shuffled], kind="stable")][:n]

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        # The estimate is focus's pooled posterior, fitted as focus fits it (before each
        # round's picks, on every answer so far); unfitted, it would estimate with the
        # initial strength and pseudo-count whatever the answers said.
        self._maybe_fit(pkg)
        answered = np.asarray(pkg.successes, dtype=np.int64) + np.asarray(pkg.failures, dtype=np.int64)
        picked = np.empty(0, dtype=np.int64)
        if self.screen:
            active = pkg.active_edges
            picked = rng.permutation(active[answered[active] == 0])[:n]
        if picked.size < n:
            rest = self.top[~np.isin(self.top, picked)]
            picked = np.concatenate([picked, self._least_answered(rest, answered, n - picked.size, rng)])
        if picked.size < n:  # k < n: fill the round with the other edges, least answered first
            others = pkg.active_edges[~np.isin(pkg.active_edges, picked)]
            picked = np.concatenate([picked, self._least_answered(others, answered, n - picked.size, rng)])
        return Selection(picked.astype(np.int64), np.zeros(picked.size, dtype=bool))


@dataclass(frozen=True)
class InformedSpec:
    """A study configuration (the interface of :class:`~kgprobe.simulation.study.SamplerSpec`)."""

    label: str
    top: tuple[int, ...]
    screen: bool
    propagation_weight: float = 0.0

    def make(self) -> InformedSampler:
        return InformedSampler(np.array(self.top, dtype=np.int64), screen=self.screen)


def informed_specs(theta: np.ndarray, active: np.ndarray, k: int) -> list[InformedSpec]:
    """The two informed configurations for the study's top ``k`` active edges by θ."""
    top = tuple(int(j) for j in hardest_edges(theta, active)[:k])
    return [InformedSpec(INFORMED_TOP_K, top, screen=False), InformedSpec(SCREEN_THEN_INFORMED, top, screen=True)]
