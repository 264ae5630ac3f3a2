"""Human-generated prompts (HGP), the baseline ZP-LKE is compared with (METHODS §3).

A natural template per predicate ("The capital of {subject} is", from
``data/templates.json``) replaces the many-shot context; multiple choice and generation
are scored exactly as in :mod:`kgprobe.probes.zp_lke`, so the two differ only in the
prompt. Each probe draws one of the predicate's templates from ``rng`` (the paper
samples three HGPs per relation); ``template_index`` pins one instead.
"""

from __future__ import annotations

from typing import ClassVar, Sequence

import numpy as np

from kgprobe.errors import InputError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import GenerateRequest, ScoreRequest, ScoreResult
from kgprobe.probes.base import Probe, ProbeTask, Verdict
from kgprobe.probes.common import (
    WarnOnce,
    gold_names,
    multiple_choice_chance,
    multiple_choice_options,
    name_of,
    verify_multiple_choice,
)
from kgprobe.probes.templates import fill, templates_for
from kgprobe.probes.verify import first_segment, match_answer


def _pick(templates: tuple[str, ...], index: int | None, rng: np.random.Generator) -> tuple[str, int]:
    if index is None:
        i = int(rng.integers(len(templates)))
    else:
        i = index % len(templates)
    return templates[i], i


class HumanPromptProbe(Probe):
    """HGP multiple choice: same options and scoring as ZP-LKE, after a natural template."""

    name: ClassVar[str] = "hgp"
    needs_scoring: ClassVar[bool] = True

    def __init__(self, num_distractors: int = 99, *, template_index: int | None = None):
        if num_distractors < 0:
            raise InputError(f"num_distractors must be >= 0, got {num_distractors}")
        self.num_distractors = num_distractors
        self.template_index = template_index
        self.warn = WarnOnce()

    def render(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> ProbeTask:
        t = kg.triple(edge)
        subject = name_of(kg, t.subject, edge=edge, role="subject")
        template, ti = _pick(templates_for(kg, t.predicate).hgp, self.template_index, rng)
        context = fill(template, subject)
        options, gold_index = multiple_choice_options(kg, edge, self.num_distractors, rng, self.warn)
        return ProbeTask(
            edge=edge,
            score_requests=[ScoreRequest(context, " " + o, edge=edge) for o in options],
            question=f"{context} [{len(options)} options]",
            payload={"options": options, "gold_index": gold_index, "template": ti},
        )

    def verify(
        self, kg: KnowledgeGraph, task: ProbeTask, scores: Sequence[ScoreResult], generations: Sequence[str]
    ) -> Verdict:
        verdict = verify_multiple_choice(task.payload["options"], task.payload["gold_index"], scores)
        verdict.detail["template"] = task.payload["template"]
        return verdict

    def chance_level(self, kg: KnowledgeGraph, edge: int) -> float:
        return multiple_choice_chance(kg, edge, self.num_distractors)


class HumanPromptGenerationProbe(Probe):
    """HGP generation: greedy tokens after the template; the first sentence must name a gold."""

    name: ClassVar[str] = "hgp-gen"
    needs_scoring: ClassVar[bool] = False

    def __init__(self, *, max_tokens: int = 10, template_index: int | None = None):
        if max_tokens < 1:
            raise InputError(f"max_tokens must be >= 1, got {max_tokens}")
        self.max_tokens = max_tokens
        self.template_index = template_index

    def render(self, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> ProbeTask:
        t = kg.triple(edge)
        subject = name_of(kg, t.subject, edge=edge, role="subject")
        template, ti = _pick(templates_for(kg, t.predicate).hgp, self.template_index, rng)
        prompt = fill(template, subject)
        return ProbeTask(
            edge=edge,
            generate_requests=[GenerateRequest(prompt, max_tokens=self.max_tokens, stop=("\n",), edge=edge)],
            question=prompt,
            payload={"gold": gold_names(kg, t.subject, t.predicate), "template": ti},
        )

    def verify(
        self, kg: KnowledgeGraph, task: ProbeTask, scores: Sequence[ScoreResult], generations: Sequence[str]
    ) -> Verdict:
        # The completion's first sentence is its answer; later sentences drift to other facts.
        answer = first_segment(generations[0], ". ").strip()
        result = match_answer(answer, task.payload["gold"])
        return Verdict(result.correct, answer, {"reason": result.reason, "template": task.payload["template"]})

    def chance_level(self, kg: KnowledgeGraph, edge: int) -> float:
        return 0.0
