"""BELIEF / BELIEF-ICL multi-prompt evaluation (METHODS §4, ``papers/belief-myriadlama.txt``).

Every fact is asked with several prompts — each cloze template of its predicate
(``templates.PredicateTemplates.cloze``) × each name of the subject (label and aliases)
— in one of four in-context settings:

* ``zero-shot``: only the instruction "Predict the [MASK] in each sentence in one word.";
* ``random``: X demonstrations drawn from facts of any predicate;
* ``relation``: X demonstrations from the same predicate, each with a random template;
* ``template``: X demonstrations from the same predicate and the same template.

Demonstrations are "Q: …\\nA: obj." pairs and never show the target fact or another
fact with the same subject and predicate. Answers are generated greedily and checked
one-directionally (a gold name must occur in the answer, :func:`match_answer`).

Metrics (pure functions below, each tested on hand-computed numbers):

* accuracy mean / range / SD over resamples that pick one prompt per fact;
* consistency: per fact, the share of unordered prompt pairs whose answers agree
  (bi-directional partial match of normalized words), macro-averaged over facts with
  at least two prompts;
* overconfidence: prompts sorted by confidence into 10 equal-count bins,
  Σ_bins (|bin| / N)(mean confidence − mean accuracy) — METHODS' 1/M weight when N
  divides evenly, and the exact share of prompts otherwise;
* coverage: average (accuracy over all prompts), maximum (per predicate, the best
  template with each fact's best subject name, weighted by facts) and oracle (facts
  answered right by at least one prompt).

Confidence: the paper estimates it from 100 sampled generations per prompt. With a
scoring backend kgprobe uses the model's own probability of its greedy answer
(exp of the summed log-probs, one extra scored continuation per prompt, 100× cheaper);
on a generation-only backend it falls back to the paper's sampling estimate with
``num_samples`` samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Sequence

import numpy as np

from kgprobe.errors import InputError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import GenerateRequest, LanguageModel, ScoreRequest
from kgprobe.probes.common import all_names, display_name, gold_names, name_of
from kgprobe.probes.templates import fill, templates_for
from kgprobe.probes.verify import match_answer, normalize

ICL_SETTINGS = ("zero-shot", "random", "relation", "template")
INSTRUCTION = "Predict the [MASK] in each sentence in one word."


# -- prompts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BeliefPrompt:
    edge: int
    template: int
    subject_name: str
    text: str


def render_prompt(cloze: str, demonstrations: Sequence[tuple[str, str]]) -> str:
    """Instruction, "Q: …\\nA: obj." demonstrations, then the target "Q: …\\nA:"."""
    lines = [INSTRUCTION]
    for question, answer in demonstrations:
        lines += [f"Q: {question}", f"A: {answer}."]
    lines += [f"Q: {cloze}", "A:"]
    return "\n".join(lines)


def _demo_pool(kg: KnowledgeGraph, edge: int, same_predicate: bool) -> np.ndarray:
    t = kg.triple(edge)
    edges = kg.edges_of_predicate(t.predicate) if same_predicate else np.arange(kg.num_edges)
    edges = edges[kg.active[edges]] if kg.active[edges].any() else edges
    same_pair = (kg.subjects[edges] == kg.subjects[edge]) & (kg.predicate_of[edges] == kg.predicate_of[edge])
    return edges[~same_pair]


def demonstrations(
    kg: KnowledgeGraph, edge: int, template: int, setting: str, num_demos: int, rng: np.random.Generator
) -> list[tuple[str, str]]:
    """(cloze question, answer) demonstrations for one prompt in the given setting."""
    if setting not in ICL_SETTINGS:
        raise InputError(f"unknown BELIEF setting {setting!r}; choose one of {', '.join(ICL_SETTINGS)}")
    if setting == "zero-shot" or num_demos == 0:
        return []
    pool = _demo_pool(kg, edge, same_predicate=setting != "random")
    demos: list[tuple[str, str]] = []
    for j in rng.permutation(pool):
        tj = kg.triple(int(j))
        subject, obj = display_name(kg.entity(tj.subject)), display_name(kg.entity(tj.object))
        if subject is None or obj is None:
            continue
        cloze = templates_for(kg, tj.predicate).cloze
        ti = template if setting == "template" else int(rng.integers(len(cloze)))
        demos.append((fill(cloze[ti % len(cloze)], subject), obj))
        if len(demos) == num_demos:
            break
    return demos


def build_prompts(
    kg: KnowledgeGraph,
    edges: Sequence[int],
    *,
    setting: str = "zero-shot",
    num_demos: int = 4,
    max_names: int | None = 3,
    rng: np.random.Generator,
) -> list[BeliefPrompt]:
    """Every template × subject name (up to ``max_names``) of every edge, in ``setting``."""
    prompts = []
    for edge in edges:
        edge = int(edge)
        t = kg.triple(edge)
        name_of(kg, t.subject, edge=edge, role="subject")  # raises when the subject has no name
        names = all_names(kg.entity(t.subject))[: max_names or None]
        for ti, cloze in enumerate(templates_for(kg, t.predicate).cloze):
            for name in names:
                demos = demonstrations(kg, edge, ti, setting, num_demos, rng)
                prompts.append(BeliefPrompt(edge, ti, name, render_prompt(fill(cloze, name), demos)))
    return prompts


def answer_text(generation: str) -> str:
    """The one-word answer: the first line, without a trailing full stop."""
    line = generation.strip().split("\n", 1)[0].strip()
    return line[:-1].strip() if line.endswith(".") else line


# -- metrics ---------------------------------------------------------------------------------


def accuracy_fluctuation(
    correct_by_fact: Sequence[Sequence[bool]], num_resamples: int, rng: np.random.Generator
) -> tuple[float, float, float]:
    """(mean, range, SD) of accuracy when each fact is asked with one random prompt.

    Facts with no prompt are ignored. SD is the population SD of the resampled accuracies.
    """
    facts = [np.asarray(c, dtype=float) for c in correct_by_fact if len(c)]
    if not facts:
        return math.nan, math.nan, math.nan
    if num_resamples < 1:
        raise InputError(f"num_resamples must be >= 1, got {num_resamples}")
    sizes = np.array([len(f) for f in facts])
    picks = (rng.random((num_resamples, len(facts))) * sizes).astype(int)
    table = np.zeros((len(facts), sizes.max()))
    for i, f in enumerate(facts):
        table[i, : len(f)] = f
    acc = table[np.arange(len(facts))[None, :], picks].mean(axis=1)
    return float(acc.mean()), float(acc.max() - acc.min()), float(acc.std())


def answers_agree(a: str, b: str) -> bool:
    """Bi-directional partial match: one normalized answer's words occur in the other's."""
    na, nb = normalize(a), normalize(b)
    if not na or not nb:
        return False
    wa, wb = f" {na} ", f" {nb} "
    return wa in wb or wb in wa


def consistency(predictions_by_fact: Sequence[Sequence[str]]) -> float:
    """Share of agreeing prompt pairs per fact, macro-averaged over facts with ≥ 2 prompts."""
    per_fact = []
    for preds in predictions_by_fact:
        if len(preds) < 2:
            continue
        pairs = list(combinations(preds, 2))
        per_fact.append(sum(answers_agree(a, b) for a, b in pairs) / len(pairs))
    return float(np.mean(per_fact)) if per_fact else math.nan


def overconfidence(confidences: Sequence[float], corrects: Sequence[bool], num_bins: int = 10) -> float:
    """Σ_bins (|bin| / N)(mean confidence − mean accuracy) over equal-count bins, signed."""
    conf = np.asarray(confidences, dtype=float)
    acc = np.asarray(corrects, dtype=float)
    if conf.shape != acc.shape:
        raise InputError("overconfidence: confidences and corrects differ in length")
    if conf.size == 0:
        return math.nan
    order = np.argsort(-conf, kind="stable")
    total = 0.0
    for chunk in np.array_split(order, min(num_bins, conf.size)):
        total += len(chunk) / conf.size * (conf[chunk].mean() - acc[chunk].mean())
    return float(total)


@dataclass(frozen=True)
class Coverage:
    average: float
    maximum: float
    oracle: float


def coverage(records: Sequence[tuple[int, str, int, bool]]) -> Coverage:
    """Coverage from (fact, predicate, template, correct) records, one per prompt.

    * average: share of correct prompts;
    * maximum: per predicate, the template whose accuracy is highest when each fact
      counts as right under that template if any of its subject names got it right;
      averaged over predicates weighted by their number of facts;
    * oracle: share of facts right under at least one prompt.
    """
    if not records:
        return Coverage(math.nan, math.nan, math.nan)
    average = float(np.mean([r[3] for r in records]))
    best_by_fact_template: dict[tuple[int, int], bool] = {}
    fact_predicate: dict[int, str] = {}
    for fact, predicate, template, correct in records:
        key = (fact, template)
        best_by_fact_template[key] = best_by_fact_template.get(key, False) or bool(correct)
        fact_predicate[fact] = predicate
    weighted = 0.0
    for predicate in set(fact_predicate.values()):
        facts = [f for f, p in fact_predicate.items() if p == predicate]
        templates = {t for (f, t) in best_by_fact_template if fact_predicate[f] == predicate}
        best = max(
            np.mean([best_by_fact_template.get((f, t), False) for f in facts]) for t in templates
        )
        weighted += best * len(facts)
    maximum = weighted / len(fact_predicate)
    known: dict[int, bool] = {}
    for (fact, _template), correct in best_by_fact_template.items():
        known[fact] = known.get(fact, False) or correct
    oracle = float(np.mean(list(known.values())))
    return Coverage(average, float(maximum), oracle)


# -- running it --------------------------------------------------------------------------------


@dataclass
class BeliefResult:
    setting: str
    accuracy_mean: float
    accuracy_range: float
    accuracy_sd: float
    consistency: float
    overconfidence: float
    coverage: Coverage
    num_facts: int
    num_prompts: int
    prompts: list[dict] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        return {
            "setting": self.setting,
            "accuracy_mean": self.accuracy_mean,
            "accuracy_range": self.accuracy_range,
            "accuracy_sd": self.accuracy_sd,
            "consistency": self.consistency,
            "overconfidence": self.overconfidence,
            "coverage_average": self.coverage.average,
            "coverage_maximum": self.coverage.maximum,
            "coverage_oracle": self.coverage.oracle,
            "num_facts": self.num_facts,
            "num_prompts": self.num_prompts,
        }


def run_belief(
    kg: KnowledgeGraph,
    model: LanguageModel,
    edges: Sequence[int],
    *,
    setting: str = "zero-shot",
    num_demos: int = 4,
    max_names: int | None = 3,
    max_tokens: int = 8,
    num_resamples: int = 10_000,
    num_samples: int = 10,
    rng: np.random.Generator,
) -> BeliefResult:
    """Ask every fact with every prompt in ``setting`` and compute the BELIEF metrics."""
    prompts = build_prompts(kg, edges, setting=setting, num_demos=num_demos, max_names=max_names, rng=rng)
    if not prompts:
        raise InputError("BELIEF needs at least one edge to evaluate")
    requests = [GenerateRequest(p.text, max_tokens=max_tokens, stop=("\n",), edge=p.edge) for p in prompts]
    generations = model.generate(requests)
    answers = [answer_text(g) for g in generations]
    golds = {e: gold_names(kg, kg.triple(e).subject, kg.triple(e).predicate) for e in {p.edge for p in prompts}}
    corrects = [match_answer(a, golds[p.edge]).correct for p, a in zip(prompts, answers)]
    confidences = _confidences(model, prompts, generations, answers, num_samples, max_tokens)

    by_fact: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_fact.setdefault(p.edge, []).append(i)
    mean, spread, sd = accuracy_fluctuation([[corrects[i] for i in idx] for idx in by_fact.values()], num_resamples, rng)
    cons = consistency([[answers[i] for i in idx] for idx in by_fact.values()])
    ovc = overconfidence(confidences, corrects)
    cov = coverage([(p.edge, kg.triple(p.edge).predicate, p.template, c) for p, c in zip(prompts, corrects)])
    records = [
        {"edge": p.edge, "template": p.template, "subject": p.subject_name, "answer": a, "correct": c, "confidence": conf}
        for p, a, c, conf in zip(prompts, answers, corrects, confidences)
    ]
    return BeliefResult(setting, mean, spread, sd, cons, ovc, cov, len(by_fact), len(prompts), records)


def _confidences(model, prompts, generations, answers, num_samples, max_tokens) -> list[float]:
    if model.can_score:
        scored = [i for i, g in enumerate(generations) if g.strip()]
        results = model.score([ScoreRequest(prompts[i].text, generations[i], edge=prompts[i].edge) for i in scored])
        conf = [0.0] * len(prompts)
        for i, r in zip(scored, results):
            conf[i] = math.exp(r.logprob)
        return conf
    conf = []
    for p, greedy in zip(prompts, answers):
        samples = model.generate(
            [
                GenerateRequest(p.text, max_tokens=max_tokens, stop=("\n",), temperature=1.0, seed=s, edge=p.edge)
                for s in range(num_samples)
            ]
        )
        conf.append(sum(answers_agree(answer_text(s), greedy) for s in samples) / num_samples)
    return conf
