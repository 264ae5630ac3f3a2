"""LLM question generation and judging: prompt text, rejection of unusable questions, caching.

The rejection and cache rules need a model that writes one specific (bad) question, so
these tests use a scripted backend; the real model runs the same path in
test_real_model.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from kgprobe.errors import InputError
from kgprobe.models.base import LanguageModel
from kgprobe.probes.kglens import KGLensProbe, LLMJudge, LLMQuestionGenerator


class ScriptedModel(LanguageModel):
    """Answers every generate request with the next scripted string; records prompts."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.prompts = []

    @property
    def identity(self) -> str:
        return "scripted"

    def score(self, requests):
        raise NotImplementedError

    def generate(self, requests):
        self.prompts += [r.prompt for r in requests]
        return [self.replies.pop(0) for _ in requests]


def test_generated_wh_template_is_used_for_every_edge_of_the_predicate_and_cached(tiny_kg, tmp_path):
    # The model writes one question about the predicate's first edge (France, capital, Paris);
    # it becomes a template, asked first for every edge of P36 (KGLens A.6, cached per predicate).
    model = ScriptedModel(["QUESTION: Which city is the seat of the French government of France? Extra text"])
    cache = tmp_path / "q.json"
    probe = KGLensProbe("wh", questions=LLMQuestionGenerator(model, cache), use_alias=False)
    task = probe.render(tiny_kg, 0, np.random.default_rng(0))
    assert task.question == "Which city is the seat of the French government of France?"
    assert task.payload["phrasing"]["source"] == "llm"
    assert model.prompts[0].endswith("SUBJECT is France, PREDICATE is capital, OBJECT is Paris\nQUESTION:")
    # Germany's capital reuses the template: no second model call
    assert probe.render(tiny_kg, 1, np.random.default_rng(0)).question == (
        "Which city is the seat of the French government of Germany?"
    )
    assert len(model.prompts) == 1
    # the next probe of an edge rotates to the hand-written templates
    assert probe.render_attempt(tiny_kg, 0, np.random.default_rng(0), 1).question == "What is the capital of France?"
    # a second generator on the same file asks the model nothing
    again = LLMQuestionGenerator(ScriptedModel([]), cache)
    assert KGLensProbe("wh", questions=again, use_alias=False).render(tiny_kg, 0, np.random.default_rng(0)).question \
        == task.question
    assert json.loads(cache.read_text()) == {
        json.dumps(["scripted", "wh", "P36", "capital"]): "Which city is the seat of the French government of {subject}?"
    }


def test_wh_question_naming_the_object_falls_back_to_the_template(tiny_kg):
    generator = LLMQuestionGenerator(ScriptedModel(["Is Paris the capital of France?"]))
    task = KGLensProbe("wh", questions=generator, use_alias=False).render(tiny_kg, 0, np.random.default_rng(0))
    assert task.question == "What is the capital of France?"
    assert generator.rejected == 1


def test_yes_no_template_puts_both_names_in_placeholders(tiny_kg):
    model = ScriptedModel(["Is Paris really the capital city of France?"])
    probe = KGLensProbe("yes-no", questions=LLMQuestionGenerator(model))
    # France's edge: the generated template is the first yes/no phrasing, object alternating
    tasks = [probe.render_attempt(tiny_kg, 0, np.random.default_rng(0), a) for a in range(2)]
    assert model.prompts[0].endswith("SUBJECT is France, PREDICATE is capital, OBJECT is Paris\nQUESTION:")
    assert {t.question for t in tasks} == {
        "Is Paris really the capital city of France (also known as French Republic)?",
        "Is Berlin really the capital city of France (also known as French Republic)?",
    }


def test_generated_question_without_the_subject_is_rejected():
    from kgprobe.probes.kglens import question_template

    assert question_template("Who wrote it?", "Hamlet", "Shakespeare", "wh") is None
    assert question_template("Who wrote hamlet?", "Hamlet", "Shakespeare", "wh") == "Who wrote {subject}?"
    assert question_template("Did Shakespeare write Hamlet?", "Hamlet", "Shakespeare", "yes_no") == (
        "Did {object} write {subject}?"
    )
    assert question_template("Did Marlowe write Hamlet?", "Hamlet", "Shakespeare", "yes_no") is None


def test_corrupt_cache_is_an_input_error(tmp_path):
    path = tmp_path / "q.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        LLMQuestionGenerator(ScriptedModel([]), path)


def test_judge_prompt_and_verdicts():
    model = ScriptedModel(["yes", "No.", "I cannot tell"])
    judge = LLMJudge(model)
    assert judge.judge("Q?", ["left", "left side"], "It runs on the left.") is True
    assert judge.judge("Q?", ["left"], "right") is False
    assert judge.judge("Q?", ["left"], "right") is None
    assert "ANSWERS: left, left side\nRESPONSE: It runs on the left.\nCORRECT:" in model.prompts[0]


def test_judge_decides_wh_answers_string_matching_misses(tiny_kg):
    # "the city of lights" names no gold string; the judge says yes, so the verdict is right
    probe = KGLensProbe("wh", judge=LLMJudge(ScriptedModel(["Yes"])), use_alias=False)
    task = probe.render(tiny_kg, 0, np.random.default_rng(0))
    verdict = probe.verify(tiny_kg, task, [], ["The city of lights."])
    assert verdict.correct and verdict.detail["judge"] is True
