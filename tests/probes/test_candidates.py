"""The candidate-aware wh-verifier: T, C and every KG name; hand-made answers, hand-judged."""

from __future__ import annotations

import numpy as np
import pytest

from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.probes.candidates import verify_wh
from kgprobe.probes.kglens import KGLensProbe
from kgprobe.probes.verify import parse_yes_no


@pytest.fixture
def europe() -> KnowledgeGraph:
    """Neighbours (P47), continents (P30) and official languages (P37) of a few countries."""
    names = {"PT": "Portugal", "ES": "Spain", "FR": "France", "AD": "Andorra", "CH": "Switzerland",
             "BW": "Botswana", "ZA": "South Africa", "AF": "Africa", "EU": "Europe", "AS": "Asia",
             "fr": "French", "de": "German", "it": "Italian", "rm": "Romansh", "es": "Spanish", "en": "English"}
    entities = [Entity(k, v, ("Republic of South Africa",) if k == "ZA" else ()) for k, v in names.items()]
    triples = [
        Triple("PT", "P47", "ES"),  # edge 0: Portugal has one neighbour
        Triple("ES", "P47", "PT"), Triple("ES", "P47", "FR"), Triple("ES", "P47", "AD"),
        Triple("FR", "P47", "ES"), Triple("FR", "P47", "AD"), Triple("FR", "P47", "CH"),
        Triple("BW", "P30", "AF"),  # edge 7
        Triple("ZA", "P30", "AF"), Triple("PT", "P30", "EU"), Triple("FR", "P30", "EU"),
        Triple("CH", "P37", "fr"),  # edge 11: Switzerland, four languages
        Triple("CH", "P37", "de"), Triple("CH", "P37", "it"), Triple("CH", "P37", "rm"),
        Triple("ES", "P37", "es"), Triple("FR", "P37", "fr"),
    ]
    predicates = [Predicate("P47", "shares border with"), Predicate("P30", "continent"),
                  Predicate("P37", "official language")]
    return KnowledgeGraph(entities, predicates, triples, candidates={"P30": ["AF", "EU", "AS"],
                                                                   "P37": ["fr", "de", "it", "rm", "es", "en"]})


def check(kg, edge, response):
    m = verify_wh(kg, edge, response)
    return m.correct, m.reason


def test_the_longest_mention_wins(europe):
    # Botswana's continent is Africa; "South Africa" is another entity of the KG
    assert check(europe, 7, "Botswana is in South Africa.") == (False, "no-match")
    assert check(europe, 7, "Republic of South Africa") == (False, "no-match")
    assert check(europe, 7, "It lies in Africa, north of South Africa.") == (True, "match")
    assert check(europe, 7, "Africa") == (True, "match")
    # a longer name the KG does not know: a capitalised qualifier makes it another place
    assert check(europe, 7, "Botswana is in Central Africa.") == (False, "no-match")
    assert check(europe, 7, "Botswana is in southern Africa.") == (True, "match")


def test_a_wrong_candidate_makes_a_single_valued_answer_wrong(europe):
    assert check(europe, 0, "Spain and France") == (False, "wrong-extra")
    assert check(europe, 0, "Spain") == (True, "match")
    assert check(europe, 0, "France.") == (False, "wrong-candidate")
    # the subject echoed, a non-candidate place, a negated candidate: none is a wrong extra
    assert check(europe, 0, "Portugal shares a border with Spain and the Atlantic Ocean.") == (True, "match")
    assert check(europe, 0, "Spain. It does not border France.") == (True, "match")
    # for Botswana the continent Asia is a candidate outside T
    assert check(europe, 7, "Africa and Asia") == (False, "wrong-extra")


def test_multi_valued_answers_report_completeness_and_wrong_extras(europe):
    complete = verify_wh(europe, 11, "French, German, Italian and Romansh.")
    assert complete.correct and complete.reason == "match" and complete.complete
    assert sorted(complete.named_true) == ["de", "fr", "it", "rm"]
    partial = verify_wh(europe, 11, "German and Italian.")
    assert partial.correct and partial.reason == "match" and partial.complete is False
    extras = verify_wh(europe, 11, "French, German and Spanish.")
    assert extras.correct and extras.reason == "match-with-extras" and extras.named_wrong == ("es",)
    assert extras.complete is False
    assert check(europe, 11, "Spanish and English.") == (False, "wrong-candidate")


def test_answers_naming_no_candidate_fall_back_to_the_string_rules(europe):
    assert check(europe, 11, "I don't know.") == (False, "refusal")
    assert check(europe, 11, "Swiss German") == (True, "match")  # names German; "Swiss" is no entity
    assert check(europe, 11, "") == (False, "empty")
    assert check(europe, 0, "Not Spain.") == (False, "negated")
    assert check(europe, 0, "It could be Spain or Morocco.") == (False, "disjunctive-guess")


def test_the_probe_verdict_carries_the_candidates_named(europe):
    probe = KGLensProbe("wh")
    task = probe.render(europe, 11, np.random.default_rng(0))
    assert task.question == "What is the official language of Switzerland?"
    verdict = probe.verify(europe, task, [], ["French, German and Spanish."])
    assert verdict.correct
    assert verdict.detail["reason"] == "match-with-extras"
    assert verdict.detail["named_true"] == ["de", "fr"] and verdict.detail["wrong_extras"] == ["es"]
    assert verdict.detail["complete"] is False
    wrong = probe.verify(europe, probe.render(europe, 0, np.random.default_rng(0)), [], ["Spain and France"])
    assert not wrong.correct and wrong.detail["wrong_extras"] == ["FR"]


def test_reversals_stay_unverifiable():
    for response in ("Yes. No, wait.", "No. Actually, yes.", "Yes... wait, no."):
        assert parse_yes_no(response, subject_names=["Alabama"], object_names=["Montgomery"]) is None
