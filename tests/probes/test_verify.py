"""Answer normalization and matching, yes/no parsing, and multiple-choice verification."""

from __future__ import annotations

import math

import pytest

from kgprobe.models.base import ScoreResult
from kgprobe.probes.base import ProbeTask, Verdict
from kgprobe.probes.common import accuracy_at_k, mean_gold_prob, verify_multiple_choice
from kgprobe.probes.kglens import KGLensProbe, YesNoLogprobProbe
from kgprobe.probes.verify import match_answer, normalize, parse_yes_no


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Côte d'Ivoire!", "cote d ivoire"),
        ("  PARIS.  ", "paris"),
        ("UTC+01:00", "utc +1"),
        ("GMT +5:30", "utc +5.5"),
        ("U.S.A.", "usa"),
        ("1,000,000 people", "1000000 people"),
        ("Москва", "москва"),
        ("São Tomé", "sao tome"),
        (".lr", "lr"),
    ],
)
def test_normalize(text, expected):
    assert normalize(text) == expected


@pytest.mark.parametrize(
    "response, golds, correct, reason",
    [
        ("The capital is Paris.", ["Paris"], True, "match"),
        ("paris", ["Paris"], True, "match"),
        ("They speak French and German.", ["French language"], True, "match"),  # list + "language" dropped
        ("The currency is the euro", ["Euro"], True, "match"),
        ("It is Congo.", ["Democratic Republic of the Congo"], False, "no-match"),  # "Republic of" kept
        ("St Helena", ["Saint Helena"], True, "match"),
        ("Berlin is not the capital; Bonn is.", ["Berlin"], False, "negated"),
        ("UTC-0", ["UTC"], True, "match"),
        ("It's in Mexico.", ["Mexico City"], False, "no-match"),  # partial name of another entity
        ("It could be Paris or Lyon.", ["Paris"], False, "disjunctive-guess"),
        ("Paris or the City of Light", ["Paris", "City of Light"], True, "match"),  # every alternative is gold
        ("It is not Paris, it is Lyon.", ["Paris"], False, "negated"),
        ("I'm sorry, I don't know.", ["Paris"], False, "refusal"),
        ("I'm not sure, but I think it is Paris.", ["Paris"], True, "match"),  # a hedge that names gold
        ("", ["Paris"], False, "empty"),
        ("Born on 1 May 1990.", ["+1990-05-01T00:00:00Z"], True, "match"),
        ("May 1st, 1990", ["1990-05-01"], True, "match"),
        ("05/01/1990", ["1990-05-01"], False, "no-match"),  # ambiguous day/month: not accepted
        ("13/05/1990", ["1990-05-01"], False, "no-match"),
        ("in 1990", ["+1990-00-00T00:00:00Z"], True, "match"),  # year-precision date
        ("about 4,818,977 people", ["4818977"], True, "match"),
        ("about 4.8 million people", ["4818977"], False, "no-match"),  # values must be equal
        ("Dial +231.", ["+231"], True, "match"),
        ("Dial 232.", ["+231"], False, "no-match"),
        ("UTC+1", ["UTC+01:00"], True, "match"),
        ("UTC-1", ["UTC+01:00"], False, "no-match"),
        ("Websites end in .lr", [".lr"], True, "match"),
        ("首都は東京です。", ["東京"], True, "match"),
        ("Столица — Москва.", ["Москва"], True, "match"),
    ],
)
def test_match_answer(response, golds, correct, reason):
    result = match_answer(response, golds)
    assert (result.correct, result.reason) == (correct, reason)


@pytest.mark.parametrize(
    "response, polarity",
    [
        ("Yes.", True),
        ("yes", True),
        ("No.", False),
        ("NO!", False),
        ('"Yes," it is.', True),
        ("A: Yes, it is.", True),
        ("Answer: no.", False),
        ("Well, yes.", True),
        ("The answer to your question is no.", False),
        ("Correct.", True),
        ("No, Paris is not in Germany.", False),
        ("Yes, it is. No other city is.", True),  # "No other" is not an answer word
        ("Maybe.", None),
        ("I don't know.", None),
        ("It is the capital.", None),
        ("Yes. Actually, no, it is Lyon.", None),
        ("No... wait, yes.", None),
        ("Yes, Paris is not the capital of France.", None),
        ("No, that is correct.", None),
        ("", None),
        ("Certainly.", True),
        ("I think so.", True),
        ("I don't think so.", False),
        ("Not really.", False),
        ("Yes and no.", None),
    ],
)
def test_parse_yes_no(response, polarity):
    assert parse_yes_no(response) is polarity


@pytest.mark.parametrize(
    "response, polarity",
    [
        ("San Jose is the capital of Costa Rica.", True),  # restates the claim
        ("Basseterre is not the capital of Costa Rica.", False),
        ("Bogotá is the capital of Colombia.", None),  # names neither Costa Rica nor San José
        ("I'm not sure whether San José is the capital of Costa Rica.", None),  # a refusal
    ],
)
def test_parse_yes_no_restatement(response, polarity):
    names = {"subject_names": ["San José", "San Jose", "Basseterre"], "object_names": ["Costa Rica"]}
    assert parse_yes_no(response, **names) is polarity


def sr(*logprobs, greedy=False):
    return ScoreResult(tuple(logprobs), greedy)


def test_multiple_choice_argmax_and_gold_mass():
    # summed log-probs: A = -2, B = -0.5 + -0.5 = -1, C = -3 -> B wins
    v = verify_multiple_choice(["A", "B", "C"], 1, [sr(-2.0), sr(-0.5, -0.5), sr(-3.0)])
    assert v.correct and v.answer == "B"
    # p(B) = e^-1 / (e^-2 + e^-1 + e^-3) = 1 / (e^-1 + 1 + e^-2) = 1 / 1.503214724
    assert v.detail["gold_prob"] == pytest.approx(0.665240955, abs=1e-9)
    assert v.detail["gold_rank"] == 1 and v.detail["num_options"] == 3
    wrong = verify_multiple_choice(["A", "B", "C"], 2, [sr(-2.0), sr(-1.0), sr(-3.0)])
    assert not wrong.correct and wrong.answer == "B" and wrong.detail["gold_rank"] == 3
    # the gold and best wrong summed log-probs: B's -1 is the best of A, C when B is gold,
    # and the best of A, B when C is gold
    assert v.detail["gold_logprob"] == -1.0 and v.detail["best_wrong_logprob"] == -2.0
    assert wrong.detail["gold_logprob"] == -3.0 and wrong.detail["best_wrong_logprob"] == -1.0
    alone = verify_multiple_choice(["A"], 0, [sr(-4.0)])
    assert alone.correct and alone.detail["best_wrong_logprob"] is None


def test_multiple_choice_tie_is_wrong():
    v = verify_multiple_choice(["A", "B", "C"], 1, [sr(-1.0), sr(-1.0), sr(-3.0)])
    assert not v.correct and v.detail["tie"]
    assert v.detail["gold_rank"] == 2  # ties share the worse rank


def test_accuracy_at_k_and_gold_mass():
    verdicts = [
        Verdict(True, "a", {"pred_prob": 0.9, "gold_prob": 0.9}),
        Verdict(False, "b", {"pred_prob": 0.6, "gold_prob": 0.1}),
        Verdict(True, "c", {"pred_prob": 0.3, "gold_prob": 0.3}),
    ]
    assert accuracy_at_k(verdicts, 0.5) == (0.5, 2)
    assert accuracy_at_k(verdicts, 0.0) == (pytest.approx(2 / 3), 3)
    acc, kept = accuracy_at_k(verdicts, 0.95)
    assert math.isnan(acc) and kept == 0
    assert mean_gold_prob(verdicts) == pytest.approx((0.9 + 0.1 + 0.3) / 3)


def test_yes_no_verdicts(tiny_kg):
    probe = KGLensProbe("yes-no")
    yes_task = ProbeTask(0, payload={"type": "yes_no", "question": "q", "expected": True, "object": "Paris"})
    no_task = ProbeTask(0, payload={"type": "yes_no", "question": "q", "expected": False, "object": "Berlin"})
    assert probe.verify(tiny_kg, yes_task, [], ["Yes, Paris is the capital."]).correct
    assert not probe.verify(tiny_kg, yes_task, [], ["No."]).correct
    assert probe.verify(tiny_kg, no_task, [], [" no."]).correct
    assert not probe.verify(tiny_kg, no_task, [], ["I am not sure."]).correct
    logprob = YesNoLogprobProbe()
    assert logprob.verify(tiny_kg, yes_task, [sr(-0.2), sr(-1.8)], []).correct
    assert not logprob.verify(tiny_kg, no_task, [sr(-0.2), sr(-1.8)], []).correct
    tie = logprob.verify(tiny_kg, yes_task, [sr(-1.0), sr(-1.0)], [])
    assert not tie.correct and tie.answer == "tie" and tie.detail["p_yes"] == 0.5


def test_wh_verdict(tiny_kg):
    probe = KGLensProbe("wh")
    task = ProbeTask(3, payload={"type": "wh", "question": "q", "gold": ["French", "French language", "German"]})
    assert probe.verify(tiny_kg, task, [], ["The official languages are German and French."]).correct
    assert not probe.verify(tiny_kg, task, [], ["English."]).correct
    v = probe.verify(tiny_kg, task, [], ["I'm sorry, I don't know."])
    assert not v.correct and v.detail["reason"] == "refusal"


def test_a_subject_name_inside_the_gold_answer_is_not_masked_as_an_echo():
    # "In which country is Bissau?" — the right answer contains the subject's name.
    assert match_answer("Guinea-Bissau", ["Guinea-Bissau"], echoed=["Bissau"]).correct
    assert match_answer("Bissau is in Guinea-Bissau.", ["Guinea-Bissau"], echoed=["Bissau"]).correct
    # Only repeating the subject is still no answer.
    assert not match_answer("Bissau", ["Guinea-Bissau"], echoed=["Bissau"]).correct
    # A gold name inside the echoed subject is still masked.
    assert not match_answer("Federated States of Micronesia", ["Micronesia"],
                            echoed=["Federated States of Micronesia"]).correct
