"""The probe interface: one KG edge in, model requests out, a verdict back.

A probe renders an edge as a :class:`ProbeTask` (score and/or generate requests plus
what is needed to verify the answers) using a seeded generator, so each probe of the
same edge is a fresh rendering (new in-context examples, new distractors, new yes/no
polarity). The engine gathers the tasks of a whole round, sends all their requests to
the model in one batch (so shared prefixes are shared), then asks the probe to verify.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import GenerateRequest, ScoreRequest, ScoreResult


@dataclass
class ProbeTask:
    edge: int
    score_requests: list[ScoreRequest] = field(default_factory=list)
    generate_requests: list[GenerateRequest] = field(default_factory=list)
    question: str = ""
    """A human-readable rendering of what was asked, for reports."""
    payload: dict[str, Any] = field(default_factory=dict)
    """What ``verify`` needs (gold option index, polarity, gold answers); JSON-serializable."""

    @property
    def num_queries(self) -> int:
        """Model queries this task costs: one per generation, one per scored option set."""
        return len(self.generate_requests) + (1 if self.score_requests else 0)


@dataclass
class Verdict:
    correct: bool
    answer: str
    """The model's answer as text: the chosen option or the generated text."""
    detail: dict[str, Any] = field(default_factory=dict)
    """Method-specific numbers (gold probability mass, rank, …); JSON-serializable."""


class Probe(ABC):
    """Turns edges into requests and responses into verdicts."""

    name: ClassVar[str]
    #: True when the probe needs log-probabilities (cannot run on chat-only APIs).
    needs_scoring: ClassVar[bool]

    @abstractmethod
    def render(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> ProbeTask:
        ...

    @abstractmethod
    def verify(
        self, kg: KnowledgeGraph, task: ProbeTask, scores: Sequence[ScoreResult], generations: Sequence[str]
    ) -> Verdict:
        ...

    def render_attempt(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator, attempt: int) -> ProbeTask:
        """The ``attempt``-th probe of an edge (0 = first; the engine counts earlier probes).

        Probes with a finite set of phrasings (KGLens questions) give each attempt a
        different one and mark the verdict ``detail["repeated"]`` once they run out;
        probes that redraw their prompt from ``rng`` anyway (ZP-LKE) ignore ``attempt``.
        """
        return self.render(kg, edge, rng)

    def chance_level(self, kg: KnowledgeGraph, edge: int) -> float:
        """Probability that a random guess is verified correct for this edge."""
        return float("nan")
