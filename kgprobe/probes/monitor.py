"""MONITOR: how far prompt framing and misleading context move a model's probabilities
of a fact's object (METHODS §5, ``papers/monitor-fktc.txt``).

For a fact c = (s, r, o) with gold object tokens o_c (length L_c), all probabilities are
teacher-forced per-token probabilities of " o" (one ``score`` request each):

* primary anchor P(o | s, r, i⁺): the positive context "{o}.\nQ: {base question}\nA:",
  where the base question is the predicate's first wh-template. (The paper writes
  "{o}. {question}"; the "Q:/A:" frame makes the object the natural next words, so
  that a model that knows the answer produces it.) The fact is kept only when the
  model's own answer to that prompt names the gold object (``run_monitor(anchor=…)``);
  otherwise it is skipped and counted ("invalid anchor"), as in the paper;
* R framings r_j (other wh-templates in the same Q/A frame, then the HGP prefixes)
  without context;
* M negative contexts "{wrong object}.\nQ: {base question}\nA:", wrong objects from C − T.

PFD_c = mean_j mean_l |P⁺_l − P(r_j)_l|, IRD_c = mean_m mean_l |P⁺_l − P(i⁻_m)_l|,
MONITOR = Σ_c sqrt(a1·PFD² + a2·IRD² + a3·PFD·IRD) / Σ_c mean_l P⁺_l over valid facts,
a1 = a2 = a3 = 1/3. Lower is more reliable.

Per-token comparison needs the same tokens: a framing whose continuation tokenizes to a
different length than the anchor's is left out of that fact's mean and counted. A fact
with no negative context left (C − T empty) is skipped and counted too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from kgprobe.errors import InputError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import GenerateRequest, LanguageModel, ScoreRequest, ScoreResult
from kgprobe.probes.common import gold_names, name_of, negative_pool
from kgprobe.probes.templates import fill, templates_for
from kgprobe.probes.verify import match_answer


@dataclass
class MonitorTask:
    edge: int
    requests: list[ScoreRequest]
    num_framings: int
    num_negatives: int


@dataclass
class MonitorFact:
    edge: int
    valid: bool
    reason: str = ""
    pfd: float = math.nan
    ird: float = math.nan
    anchor_prob: float = math.nan
    dropped_framings: int = 0


@dataclass
class MonitorResult:
    score: float
    mean_pfd: float
    mean_ird: float
    mean_anchor_prob: float
    num_facts: int
    num_valid: int
    num_invalid_anchor: int
    num_no_negatives: int
    facts: list[MonitorFact] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        """JSON-ready: scores with no valid fact behind them are None, not NaN."""
        def number(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "monitor": number(self.score),
            "mean_pfd": number(self.mean_pfd),
            "mean_ird": number(self.mean_ird),
            "mean_anchor_prob": number(self.mean_anchor_prob),
            "num_facts": self.num_facts,
            "num_valid": self.num_valid,
            "num_invalid_anchor": self.num_invalid_anchor,
            "num_no_negatives": self.num_no_negatives,
        }


def qa(question: str) -> str:
    """A question as "Q: …\nA:", so the object is what a model says next."""
    return f"Q: {question}\nA:"


def monitor_task(
    kg: KnowledgeGraph, edge: int, rng: np.random.Generator, *, num_framings: int = 7, num_negatives: int = 5
) -> MonitorTask:
    """The 1 + R + M score requests of one fact (positive, framings, negatives, in that order)."""
    if num_framings < 1 or num_negatives < 0:
        raise InputError("MONITOR needs num_framings >= 1 and num_negatives >= 0")
    t = kg.triple(edge)
    subject = name_of(kg, t.subject, edge=edge, role="subject")
    gold = name_of(kg, t.object, edge=edge, role="object")
    tpl = templates_for(kg, t.predicate)
    base = qa(fill(tpl.wh[0], subject))
    continuation = " " + gold
    framings = [qa(fill(x, subject)) for x in tpl.wh[1:]] + [fill(x, subject) for x in tpl.hgp]
    framings = framings[:num_framings]
    pool = negative_pool(kg, t.subject, t.predicate)
    picks = rng.permutation(len(pool))[:num_negatives]
    negatives = [pool[int(i)][1] for i in picks]
    requests = [ScoreRequest(f"{gold}.\n{base}", continuation, edge=edge)]
    requests += [ScoreRequest(f, continuation, edge=edge) for f in framings]
    requests += [ScoreRequest(f"{wrong}.\n{base}", continuation, edge=edge) for wrong in negatives]
    return MonitorTask(edge, requests, len(framings), len(negatives))


def _mean_abs_distance(anchor: np.ndarray, others: Sequence[ScoreResult]) -> tuple[float, int]:
    """Mean over ``others`` of mean_l |anchor_l − p_l|; also how many had another length."""
    distances, dropped = [], 0
    for other in others:
        p = np.exp(np.asarray(other.token_logprobs, dtype=float))
        if p.shape != anchor.shape:
            dropped += 1
            continue
        distances.append(float(np.mean(np.abs(anchor - p))))
    return (float(np.mean(distances)) if distances else math.nan), dropped


def fact_distances(
    edge: int,
    positive: ScoreResult,
    framings: Sequence[ScoreResult],
    negatives: Sequence[ScoreResult],
    *,
    anchor_valid: bool | None = None,
) -> MonitorFact:
    """PFD, IRD and the anchor probability of one fact, or why it is skipped.

    The anchor is valid when ``anchor_valid`` says so, or — when it is None — when the
    teacher-forced gold tokens are the greedy continuation (``positive.is_greedy``).
    """
    if not (positive.is_greedy if anchor_valid is None else anchor_valid):
        return MonitorFact(edge, False, "invalid anchor")
    if not negatives:
        return MonitorFact(edge, False, "no negatives")
    anchor = np.exp(np.asarray(positive.token_logprobs, dtype=float))
    pfd, dropped_f = _mean_abs_distance(anchor, framings)
    ird, dropped_n = _mean_abs_distance(anchor, negatives)
    if math.isnan(pfd) or math.isnan(ird):
        return MonitorFact(edge, False, "token mismatch", dropped_framings=dropped_f + dropped_n)
    return MonitorFact(edge, True, "", pfd, ird, float(anchor.mean()), dropped_f + dropped_n)


def monitor_score(facts: Sequence[MonitorFact], a1: float = 1 / 3, a2: float = 1 / 3, a3: float = 1 / 3) -> float:
    """Σ_c sqrt(a1·PFD² + a2·IRD² + a3·PFD·IRD) / Σ_c anchor probability, over valid facts."""
    valid = [f for f in facts if f.valid]
    if not valid:
        return math.nan
    numerator = sum(math.sqrt(a1 * f.pfd**2 + a2 * f.ird**2 + a3 * f.pfd * f.ird) for f in valid)
    denominator = sum(f.anchor_prob for f in valid)
    return numerator / denominator


def summarize(facts: Sequence[MonitorFact]) -> MonitorResult:
    valid = [f for f in facts if f.valid]
    return MonitorResult(
        score=monitor_score(facts),
        mean_pfd=float(np.mean([f.pfd for f in valid])) if valid else math.nan,
        mean_ird=float(np.mean([f.ird for f in valid])) if valid else math.nan,
        mean_anchor_prob=float(np.mean([f.anchor_prob for f in valid])) if valid else math.nan,
        num_facts=len(facts),
        num_valid=len(valid),
        num_invalid_anchor=sum(f.reason == "invalid anchor" for f in facts),
        num_no_negatives=sum(f.reason == "no negatives" for f in facts),
        facts=list(facts),
    )


def run_monitor(
    kg: KnowledgeGraph,
    model: LanguageModel,
    edges: Sequence[int],
    *,
    rng: np.random.Generator,
    num_framings: int = 7,
    num_negatives: int = 5,
    anchor: str = "generate",
    anchor_tokens: int = 12,
) -> MonitorResult:
    """MONITOR over ``edges`` with one batched ``score`` call (and one ``generate`` call).

    ``anchor`` decides which facts have a valid primary anchor:

    * ``"generate"`` (default): the model's greedy answer to the positive prompt
      (``anchor_tokens`` tokens, first line) names the gold object — the paper's check,
      which decodes and matches. Instruction-tuned models often answer in a sentence
      ("The continent of Africa."), which this accepts;
    * ``"greedy"``: the gold tokens themselves are the greedy continuation — stricter,
      no generation needed.
    """
    if not model.can_score:
        raise InputError(f"MONITOR needs log-probabilities, which backend {model.name!r} cannot return")
    if anchor not in ("generate", "greedy"):
        raise InputError(f"anchor must be 'generate' or 'greedy', got {anchor!r}")
    tasks = [monitor_task(kg, int(e), rng, num_framings=num_framings, num_negatives=num_negatives) for e in edges]
    results = model.score([r for task in tasks for r in task.requests])
    valid: list[bool | None] = [None] * len(tasks)
    if anchor == "generate":
        answers = model.generate(
            [GenerateRequest(t.requests[0].context, max_tokens=anchor_tokens, stop=("\n",), edge=t.edge) for t in tasks]
        )
        for k, (task, answer) in enumerate(zip(tasks, answers)):
            t = kg.triple(task.edge)
            valid[k] = match_answer(answer, gold_names(kg, t.subject, t.predicate)).correct
    facts, i = [], 0
    for k, task in enumerate(tasks):
        own = results[i : i + len(task.requests)]
        i += len(task.requests)
        positive, framings, negatives = own[0], own[1 : 1 + task.num_framings], own[1 + task.num_framings :]
        facts.append(fact_distances(task.edge, positive, framings, negatives, anchor_valid=valid[k]))
    return summarize(facts)
