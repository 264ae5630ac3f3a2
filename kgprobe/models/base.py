"""The one model interface every backend implements: batched ``score`` and ``generate``.

Modelled on lm-evaluation-harness' ``LM`` (loglikelihood / generate_until over batched
requests), kept as small. Backends receive whole batches so they can share work: the
transformers backend runs a context shared by many continuations once and reuses its
KV cache; API backends spread a batch over concurrent requests.

Scoring contract: context and continuation are tokenized *together* and the log-probs
of the continuation's token positions are returned; a backend never tokenizes them
apart and assumes a stable boundary. BOS handling is the backend's explicit choice per
model and is part of its ``identity``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

from kgprobe.errors import InputError


@dataclass(frozen=True)
class ScoreRequest:
    """Log-probability of ``continuation`` given ``context``.

    ``edge`` names the KG edge the request probes, for bookkeeping and for the
    simulated model; real backends ignore it and it is not part of a cache key.
    """

    context: str
    continuation: str
    edge: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ScoreResult:
    token_logprobs: tuple[float, ...]
    """Log-probability of each continuation token, in order."""
    is_greedy: bool
    """True when every continuation token is the argmax at its position."""

    @property
    def logprob(self) -> float:
        return float(sum(self.token_logprobs))

    @property
    def num_tokens(self) -> int:
        return len(self.token_logprobs)


@dataclass(frozen=True)
class GenerateRequest:
    """Text generated after ``prompt``.

    ``temperature == 0`` means greedy decoding (deterministic, cacheable); sampled
    generations use ``seed``. ``chat`` asks chat-capable backends to send the prompt as
    a user message (with the model's chat template) instead of raw text.
    """

    prompt: str
    max_tokens: int = 32
    stop: tuple[str, ...] = ()
    temperature: float = 0.0
    seed: int | None = None
    chat: bool = False
    edge: int | None = field(default=None, compare=False)


def check_generate_request(index: int, request: GenerateRequest) -> None:
    """Refuse settings no backend can honour, naming the request."""
    if request.max_tokens < 1:
        raise InputError(f"generate request {index}: max_tokens must be at least 1.")
    if request.temperature < 0:
        raise InputError(f"generate request {index}: temperature must be >= 0.")


class LanguageModel(ABC):
    """A scorer and generator over batches of requests."""

    #: Can this backend return log-probs of a given continuation? Chat-only APIs cannot.
    can_score: bool = True

    @property
    @abstractmethod
    def identity(self) -> str:
        """A string that determines outputs: backend, model, revision, dtype, BOS policy.

        Used as the response-cache key prefix and recorded in run stores.
        """

    @property
    def name(self) -> str:
        """A short display name (defaults to the identity)."""
        return self.identity

    @abstractmethod
    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """One result per request, in order."""

    @abstractmethod
    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """One generated string per request, in order, stop strings removed."""

    def close(self) -> None:
        """Release servers, sessions or GPU memory. Safe to call twice."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class DelegatingModel(LanguageModel):
    """A model that answers for ``model``: the same identity, name and scoring ability, and
    closing it closes ``model``. Subclasses change how requests reach ``model`` (a response
    cache, one call per request unit)."""

    def __init__(self, model: LanguageModel):
        self.model = model
        self.can_score = model.can_score

    @property
    def identity(self) -> str:
        return self.model.identity

    @property
    def name(self) -> str:
        return self.model.name

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        return self.model.score(requests)

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return self.model.generate(requests)

    def close(self) -> None:
        self.model.close()
