"""What a round and a probe look like in a run file, as the engine writes and reports read them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ProbeRecord:
    """One probed edge in one round, as reports and the unbiased estimate read it."""

    round: int
    pos: int
    edge: int
    design: int
    """0: the sampler's own choice; else a design probe, by part (kgprobe.sampling.design: 1 floor, 2 lean)."""
    correct: bool
    question: str
    answer: str
    detail: dict
    predicted: float | None = None
    """Predicted chance of a right answer, from the state before the round (None in old files)."""
    inclusion: float | None = None
    """Inclusion probability of a design probe; None for the sampler's own choices."""


@dataclass
class RoundRecord:
    """Everything the engine commits at the end of a round, in one transaction."""

    round: int
    queries: int
    queries_spent: int
    num_requests: int
    replayed: bool
    started: float
    elapsed: float
    metrics: dict
    converged: bool
    pkg_state: dict[str, np.ndarray]
    sampler_state: dict
    convergence_state: dict
    probes: list[ProbeRecord]
    predictions: dict | None = None
    """``{"predicate": {id: [mean ŷ, mean ŷ(1−ŷ)]}, "group": {…}}`` before the round."""


@dataclass
class Checkpoint:
    """The state after the last committed round, from which a run resumes."""

    round: int
    queries_spent: int
    pkg_state: dict[str, np.ndarray]
    sampler_state: dict
    convergence_state: dict
    converged: bool
