"""A simulated language model that knows each KG fact with probability 1 − θ*.

It plugs into the :class:`~kgprobe.models.base.LanguageModel` interface so the engine,
probes and run store can be exercised in seconds; it never stands in for a real model
in a feature test. The efficiency study does not use it (it uses an array-level
Bernoulli oracle, :func:`kgprobe.simulation.study.bernoulli_oracle`).

Per probe — one edge and one context/prompt — the model "knows" the fact iff
``u(seed, edge, context) ≥ θ*[edge]``, with ``u`` a uniform number derived from a hash
of (seed, edge, context). So the decision is deterministic, shared by every option
scored after the same context, and fresh for every new rendering of the edge.

Scoring (each continuation gets one token log-prob):

* an option is *right* if it names a true object of the edge's (subject, predicate)
  (label or alias, case- and whitespace-insensitive), or, for the continuations " Yes" /
  " No", if it matches whether the question names a true object (see below);
* knowing: right options score −0.1, wrong ones −5 − j (j ∈ [0, 1) a hashed jitter);
* not knowing: right options score −6, wrong ones −1 − j, so one wrong option wins.

Generation: for a yes/no question (the prompt's last "Question:" line, or its last
line, starts with Is/Are/Was/Were/Does/Do/Did/Has/Have/Can) the answer is "Yes." or
"No." — right when knowing, flipped when not; otherwise the answer is the label of the
edge's own object when knowing, else the label of a candidate object of the predicate
that is not a true object (or "I don't know." when there is none).

Whether a yes/no question is "true" is read from its text: it is false when it names a
candidate object of the predicate that is not a true object (and is not part of a named
true object), else true. This heuristic matches the KGLens templates; a free-form
question can fool it. The subject's own names are blanked out before the search.
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

import numpy as np

from kgprobe.errors import InputError, ModelError
from kgprobe.models.base import GenerateRequest, LanguageModel, ScoreRequest, ScoreResult

_YES_NO_START = re.compile(r"^(is|are|was|were|does|do|did|has|have|can)\b", re.IGNORECASE)


def _norm(text: str) -> str:
    # Punctuation is kept: ".do" (a domain) must not match the word "Do".
    return " ".join(text.lower().split())


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and re.search(rf"(?<![\w-]){re.escape(needle)}(?![\w-])", haystack) is not None


class SimulatedModel(LanguageModel):
    """Answers edge j right with probability 1 − θ*[j] (module docstring)."""

    def __init__(self, kg, theta_star, seed: int = 0):
        theta = np.asarray(theta_star, dtype=np.float64)
        if theta.shape != (kg.num_edges,):
            raise InputError(f"θ* has {theta.size} values but the KG has {kg.num_edges} edges: one per edge")
        if not np.all(np.isfinite(theta)) or theta.min() < 0 or theta.max() > 1:
            raise InputError("θ* must hold probabilities in [0, 1]")
        self.kg = kg
        self.theta = theta
        self.seed = int(seed)
        self._digest = hashlib.blake2b(theta.tobytes(), digest_size=6).hexdigest()

    @property
    def identity(self) -> str:
        return f"simulated:{self.kg.name}:theta-{self._digest}:seed-{self.seed}"

    @property
    def name(self) -> str:
        return "simulated"

    # -- the knowledge decision -----------------------------------------------------------
    def _uniform(self, *parts) -> float:
        h = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8).digest()
        return int.from_bytes(h, "little") / 2.0**64

    def knows(self, edge: int, context: str) -> bool:
        """Whether this probe of ``edge`` with this context is answered right."""
        return self._uniform(self.seed, edge, context) >= self.theta[edge]

    def _edge(self, request) -> int:
        if request.edge is None:
            raise ModelError("the simulated model needs request.edge: it answers per KG edge")
        edge = int(request.edge)
        if not 0 <= edge < self.kg.num_edges:
            raise ModelError(f"request.edge {edge} is not an edge of KG {self.kg.name!r}")
        return edge

    def _true_names(self, edge: int) -> set[str]:
        t = self.kg.triple(edge)
        return {_norm(n) for o in self.kg.true_objects(t.subject, t.predicate) for n in self.kg.entity(o).names}

    def _false_candidates(self, edge: int) -> list[str]:
        t = self.kg.triple(edge)
        true = self.kg.true_objects(t.subject, t.predicate)
        return [o for o in self.kg.candidate_objects(t.predicate) if o not in true]

    @staticmethod
    def _question_line(text: str) -> str:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        questions = [ln for ln in lines if ln.lower().startswith("question:")]
        line = questions[-1][len("question:"):] if questions else (lines[-1] if lines else "")
        return line.strip()

    def question_is_true(self, edge: int, text: str) -> bool:
        """Does the (last) question in ``text`` name a true object? (module docstring)"""
        q = _norm(self._question_line(text))
        # The subject is named too (and can be a candidate object, e.g. for "shares a
        # border with"): blank its names out first.
        subject = self.kg.entity(self.kg.triple(edge).subject)
        for n in sorted((_norm(x) for x in subject.names), key=len, reverse=True):
            if n:
                q = re.sub(rf"(?<![\w-]){re.escape(n)}(?![\w-])", " ", q)
        true_names = [n for n in self._true_names(edge) if _contains(q, n)]
        for o in self._false_candidates(edge):
            for n in self.kg.entity(o).names:
                nn = _norm(n)
                if _contains(q, nn) and not any(nn in t for t in true_names):
                    return False
        return True

    def _is_right(self, edge: int, context: str, continuation: str) -> bool:
        c = _norm(continuation).rstrip(".")
        if c in ("yes", "no"):
            return (c == "yes") == self.question_is_true(edge, context)
        return c in self._true_names(edge)

    # -- the interface ----------------------------------------------------------------------
    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        logprobs = []
        for r in requests:
            edge = self._edge(r)
            right = self._is_right(edge, r.context, r.continuation)
            jitter = self._uniform(self.seed, "jitter", edge, r.context, r.continuation)
            if self.knows(edge, r.context):
                lp = -0.1 if right else -5.0 - jitter
            else:
                lp = -6.0 if right else -1.0 - jitter
            logprobs.append(lp)
        best: dict[tuple[int, str], float] = {}
        for r, lp in zip(requests, logprobs):
            key = (int(r.edge), r.context)
            best[key] = max(best.get(key, -np.inf), lp)
        return [
            ScoreResult((lp,), is_greedy=lp >= best[(int(r.edge), r.context)]) for r, lp in zip(requests, logprobs)
        ]

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        out = []
        for r in requests:
            edge = self._edge(r)
            knows = self.knows(edge, r.prompt)
            if _YES_NO_START.match(self._question_line(r.prompt)):
                truth = self.question_is_true(edge, r.prompt)
                out.append("Yes." if truth == knows else "No.")
                continue
            if knows:
                out.append(self.kg.label(self.kg.triple(edge).object))
                continue
            wrong = self._false_candidates(edge)
            if not wrong:
                out.append("I don't know.")
            else:
                pick = int(self._uniform(self.seed, "wrong", edge, r.prompt) * len(wrong))
                out.append(self.kg.label(wrong[pick]))
        return out
