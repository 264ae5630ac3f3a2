"""The sampler interface: pick the next batch of edges to probe.

A sampler reads the parameterized KG's state (α, β, probe counts) and returns edge
indices. Every sampler is seeded through the ``rng`` it is handed, so the engine is
deterministic for a given seed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from kgprobe.sampling.design_draws import check_batch_size, check_fraction, design_count, draw_design


@dataclass(frozen=True)
class Selection:
    """The edges chosen for one round.

    ``design`` marks edges drawn by the run's design, with inclusion probabilities
    known before the round's answers; only these feed the unbiased KG-level accuracy
    estimate (the sampler's own choices deliberately over-sample weak edges).
    """

    edges: np.ndarray  # int64 edge indices, no duplicates
    design: np.ndarray  # bool, same length

    def __len__(self) -> int:
        return int(self.edges.shape[0])

    @classmethod
    def design_first(cls, design: np.ndarray, chosen: np.ndarray) -> "Selection":
        """The design edges first (flagged), then the sampler's own choices."""
        edges = np.concatenate([design, chosen]).astype(np.int64)
        flags = np.zeros(edges.size, dtype=bool)
        flags[: design.size] = True
        return cls(edges, flags)


class Sampler(ABC):
    name: ClassVar[str]
    #: Whether :meth:`select` reads each answer's margin (``ParameterizedKG.update``'s
    #: ``margins``): the engine and the studies pass margins only to a sampler that does.
    uses_margins: ClassVar[bool] = False

    @abstractmethod
    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        """Choose ``n`` distinct active edges of ``pkg`` (a ``ParameterizedKG``)."""

    def estimate(self, pkg) -> np.ndarray:
        """The point estimate of every edge's error θ this sampler's method implies.

        Default: the posterior mean ``pkg.error_estimate()``. Samplers with their own
        posterior (e.g. ``pooled-thompson``) override it; use it to rank edges.
        """
        return pkg.error_estimate()

    def prior_estimate(self, pkg) -> np.ndarray | None:
        """Every edge's predicted error from the *other* edges' answers only (its own left out).

        What :meth:`kgprobe.prior.ItemPrior.stacked` weighs an item-response prior against:
        judged on an edge's own answers, a prediction that already holds them would always
        win. None (the default): the sampler has no such prediction.
        """
        return None

    def state_dict(self) -> dict:
        """Sampler-internal state (e.g. a brute-force cursor) for checkpoints."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class DesignShareSampler(Sampler):
    """A sampler that takes part of each batch from the run's design and chooses the rest.

    ``design_fraction`` of each batch are design draws
    (:mod:`kgprobe.sampling.design`); :meth:`design_draws` is the shared prologue of
    :meth:`select`: the checked batch size, the design edges, and the pool the sampler
    chooses the rest from.
    """

    def __init__(self, *, design_fraction: float = 0.1):
        self.design_fraction = check_fraction("design_fraction", design_fraction)

    def design_draws(self, pkg, n: int, rng: np.random.Generator) -> tuple[int, np.ndarray, np.ndarray]:
        n = check_batch_size(pkg, n)
        design = draw_design(pkg, design_count(n, self.design_fraction, rng), rng)
        pool = pkg.active_edges
        if design.size:
            pool = np.setdiff1d(pool, design, assume_unique=True)
        return n, design, pool
