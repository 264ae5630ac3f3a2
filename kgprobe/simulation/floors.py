"""Informed floors for the sample-efficiency study: samplers that are told θ*.

A sampler's ratio (:func:`kgprobe.simulation.study.efficiency_ratio`) says how many
queries it needs next to brute force; these two say how many a sampler would need if it
knew what no real sampler knows, which separates "the samplers could do better" from
"this sweep is hard for anyone":

* ``informed top-k``: probes only the true top-k edges, the least-answered first. Nothing
  can spend fewer queries on the top-k's estimates, so its ratio is a floor for every
  sampler with the same estimator.
* ``screen once, then informed``: answers every edge once first (in a random order, the
  way a sampler that knows nothing yet must look at each edge), then only the true top-k,
  the least-answered first. A sampler that does no better than screening once and then
  telling the top-k apart perfectly would land here; below it, a sampler is gaining from
  pooling (skipping edges its predicate says are fine), above it, from not telling the
  top-k apart after one answer.

Both estimate θ as ``focus`` does (its pooled posterior), so their MSE curves compare
with ``focus``'s. They are study instruments: they read the truth, so no run can use them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kgprobe.sampling.base import Selection
from kgprobe.sampling.focus import FocusSampler

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
        answered = np.asarray(pkg.successes, dtype=np.int64) + np.asarray(pkg.failures, dtype=np.int64)
        picked = np.empty(0, dtype=np.int64)
        if self.screen:
            active = np.flatnonzero(pkg.active)
            picked = rng.permutation(active[answered[active] == 0])[:n]
        if picked.size < n:
            rest = self.top[~np.isin(self.top, picked)]
            picked = np.concatenate([picked, self._least_answered(rest, answered, n - picked.size, rng)])
        if picked.size < n:  # k < n: fill the round with the other edges, least answered first
            others = np.flatnonzero(pkg.active)
            others = others[~np.isin(others, picked)]
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
    """The two informed configurations for the top ``k`` active edges by θ (ties in edge
    order, as the study ranks them)."""
    act = np.flatnonzero(np.asarray(active, dtype=bool))
    top = tuple(int(j) for j in act[np.argsort(-np.asarray(theta)[act], kind="stable")][:k])
    return [InformedSpec(INFORMED_TOP_K, top, screen=False), InformedSpec(SCREEN_THEN_INFORMED, top, screen=True)]
