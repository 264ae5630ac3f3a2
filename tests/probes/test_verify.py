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


# -- names read the way a person reads them ------------------------------------------------

from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple  # noqa: E402
from kgprobe.probes.candidates import demonyms, run_language, verify_wh  # noqa: E402
from kgprobe.probes.kglens import WH_DEMO_NAMES  # noqa: E402
from kgprobe.probes.labelled import data_kg  # noqa: E402
from kgprobe.probes.lexicon import common_words, reads_as_proper_noun  # noqa: E402
from kgprobe.probes.verify import NameIndex  # noqa: E402

# The real answers that the KG built around Japan, Brazil, Kenya, Iceland, Georgia and Chad
# (data/built_geo.jsonl.gz) was misjudged on. Edge 368: Nishinippori -> Japan (Q17);
# edge 281: São Sebastião -> Brazil.


@pytest.mark.parametrize(
    "edge, response, correct, reason, named_true, named_wrong",
    [
        # "island" is Iceland's alias "Island" only as a proper noun; "Japanese" before a
        # place noun is Japan's demonym.
        (368, "In Japan, Omaezaki is a Japanese island.", True, "match", ("Q17",), ()),
        (368, "Omaezaki is a Japanese island.", True, "match", ("Q17",), ()),
        # the few-shot demonstration repeated, not an answer (what it names is recorded)
        (368, "In Japan, the birth place of Jorund is Tokyo.", False, "demo-echo", ("Q17",), ()),
        (368, "Shaodian is a Japanese martial arts hero.", False, "demo-echo", (), ()),
        (281, "Sao Sebastiao (also known as Sao Sebastiao) is a Brazilian city.", True, "match",
         ("geonames:3469034",), ()),
        # a demonym that locates nothing is no answer
        (368, "In the context of Japanese mythology, it is a legendary dragon.", False, "no-match", (), ()),
        (368, "It is a fictional character from the Japanese anime series Naruto.", False, "no-match", (), ()),
        # said of the subject, the demonym does locate it
        (368, "Nishinippori is Japanese.", True, "match", ("Q17",), ()),
        # a capital in mid-sentence is a proper noun: Iceland, a wrong candidate
        (368, "It lies on the Island, far from Tokyo.", False, "wrong-candidate", (), ("Q189",)),
        # the TLD ".is" is not the verb "is"
        (188, "The internet domain of Chad is CHAD.", False, "no-match", (), ()),
        (188, "The internet domain of Chad is .td, not .is", True, "match", ("kgprobe:tld:td",), ()),
    ],
)
def test_built_kg_answers_read_as_a_person_reads_them(edge, response, correct, reason, named_true, named_wrong):
    m = verify_wh(data_kg("built_geo"), edge, response, demo_names=WH_DEMO_NAMES)
    assert (m.correct, m.reason, m.named_true, m.named_wrong) == (correct, reason, named_true, named_wrong)


def _iceland_index():
    return NameIndex([("Q189", ["Iceland", "Island", "Republic of Iceland"]), ("Q43", ["Turkey"]),
                      ("Q148", ["China"]), ("Q298", ["Chile"]), ("Q17", ["Japan"])])


@pytest.mark.parametrize(
    "response, gold_key, correct, named_wrong",
    [
        ("Omaezaki is a Japanese island.", "Q17", False, ()),  # no Japan named, no Iceland either
        ("Omaezaki is an island of Iceland.", "Q17", False, ("Q189",)),
        ("It is on the Island.", "Q17", False, ("Q189",)),  # mid-sentence capital: proper noun
        ("Island is where it lies.", "Q17", False, ()),  # sentence-initial capital of a common word
        ("Answer: Island is where it lies.", "Q17", False, ()),
        ("OMAEZAKI IS A JAPANESE ISLAND", "Q17", False, ()),  # capitals carry no information
        ("China is its country.", "Q148", True, ()),  # the word list knows "China" as a name too
        ("Turkey is its country.", "Q43", True, ()),
        ("It is in Turkey.", "Q43", True, ()),
        ("They sell fine china and a roast turkey.", "Q148", False, ()),
        ("turkey.", "Q43", True, ()),  # a bare answer names the entity whatever its case
        ("A dish with chile and lime.", "Q298", False, ()),
        ("It is in Chile.", "Q298", True, ()),
        # a capital joined to another capitalized word is part of a longer name
        ("Omaezaki is a Japanese Island.", "Q17", False, ()),
        ("It lies on Hokkaido Island, in the north.", "Q17", False, ()),
        ("It is near Island Park.", "Q17", False, ()),
        ("In Turkey, it is a town.", "Q43", True, ()),  # "In" only starts the sentence
        ("The town is in Ankara, Turkey.", "Q43", True, ()),
    ],
)
def test_common_word_names_match_only_as_proper_nouns(response, gold_key, correct, named_wrong):
    index = _iceland_index()
    names = {"Q17": ["Japan"], "Q43": ["Turkey"], "Q148": ["China"], "Q298": ["Chile"]}[gold_key]
    m = match_answer(response, names, index=index, true_keys=[gold_key],
                     candidate_keys=["Q189", "Q43", "Q148", "Q298", "Q17"], single_valued=True)
    assert m.correct is correct
    assert m.named_wrong == named_wrong


def test_which_common_word_names_must_be_proper_nouns():
    # Wikidata's class "island" (Q23442) is written in lower case: it matches as written.
    assert match_answer("It is an island.", ["island"]).correct
    # an alias that is a common word needs a proper noun; so does a label the word list
    # also knows as a name (Turkey); a label that is only the common word does not ("the euro")
    assert not match_answer("It is an island.", ["Iceland", "Island"]).correct
    assert not match_answer("We ate turkey.", ["Turkey"]).correct
    assert match_answer("It is paid in euro.", ["Euro"]).correct
    assert match_answer("The currency is the yen.", ["Yen", "JPY"]).correct


def test_the_english_word_list():
    words = common_words("en")
    assert words["island"] is False and words["china"] is True and words["turkey"] is True
    assert "japan" in words and "iceland" not in words and "georgia" not in words
    assert common_words("de") is None and common_words("en-GB") is words
    assert reads_as_proper_noun("We met in Turkey.", 10, "en")
    assert not reads_as_proper_noun("We met a turkey.", 11, "en")
    assert not reads_as_proper_noun("Island it is.", 0, "en")
    assert reads_as_proper_noun("China it is.", 0, "en")
    assert not reads_as_proper_noun("On Rhode Island.", 9, "en", 15)
    assert reads_as_proper_noun("On the Island.", 7, "en", 13)


@pytest.mark.parametrize(
    "lang, correct",
    [
        ("de", True),  # "Island" is Iceland's German name: no English word list applies
        ("en", False),  # in English a sentence-initial "Island" is the common word
        ("en-US", False),
        ("fr", True),
    ],
)
def test_lang_decides_which_names_are_common_words(lang, correct):
    m = match_answer("Island ist das Land, in dem Reykjavík liegt.", ["Iceland", "Island"], lang=lang)
    assert m.correct is correct


def _iceland_kg(lang="en"):
    entities = [
        Entity("Q1764", "Reykjavík", ("Reykjavik",), group="city"),
        Entity("Q189", "Iceland", ("Island",), group="country"),
        Entity("Q17", "Japan", group="country"),
        Entity('"Icelander"@en', "Icelander", is_literal=True),
        Entity('"Isländer"@de', "Isländer", is_literal=True),
        Entity('"Japanese"@en', "Japanese", is_literal=True),
    ]
    predicates = [Predicate("P17", "country"), Predicate("P1549", "demonym")]
    triples = [Triple("Q1764", "P17", "Q189"), Triple("Q189", "P1549", '"Icelander"@en'),
               Triple("Q189", "P1549", '"Isländer"@de'), Triple("Q17", "P1549", '"Japanese"@en')]
    return KnowledgeGraph(entities, predicates, triples, metadata={"lang": lang})


def test_demonyms_come_from_the_kg_in_the_runs_language():
    kg = _iceland_kg()
    assert demonyms(kg, "en") == {"Q189": ["Icelander"], "Q17": ["Japanese"]}
    assert demonyms(kg, "de") == {"Q189": ["Isländer"]}
    assert run_language(kg) == "en" and run_language(kg, "de-AT") == "de"
    assert run_language(_iceland_kg("de")) == "de"
    # edge 0: Reykjavík -> Iceland; the demonym locates it, the wrong candidate's does not count
    assert verify_wh(kg, 0, "Reykjavík is an Icelander town.").correct
    assert not verify_wh(kg, 0, "Reykjavík is a Japanese town.").correct


def test_the_kglens_probe_reads_answers_in_its_language():
    import numpy as np

    kg = _iceland_kg()
    answer = "Island ist das Land."
    verdicts = {}
    for lang in (None, "de"):
        probe = KGLensProbe("wh", lang=lang, use_alias=False)
        task = probe.render(kg, 0, np.random.default_rng(0))
        verdicts[lang] = probe.verify(kg, task, [], [answer]).correct
    assert verdicts == {None: False, "de": True}
    # the KG's own language is the default
    probe = KGLensProbe("wh", use_alias=False)
    task = probe.render(_iceland_kg("de"), 0, np.random.default_rng(0))
    assert probe.verify(_iceland_kg("de"), task, [], [answer]).correct


def test_demo_names_in_the_question_are_no_echo():
    # A question about the Yellow Emperor may be answered with his father.
    m = match_answer("Shaodian.", ["Shaodian"], echoed=["Yellow Emperor"], demo_names=WH_DEMO_NAMES)
    assert (m.correct, m.reason) == (True, "match")
    m = match_answer("The father of Yellow Emperor is Shaodian.", ["Tokyo"], demo_names=WH_DEMO_NAMES)
    assert m.reason == "demo-echo"


def test_run_lang_flag_is_the_probes_lang_option():
    from kgprobe.cli import build_parser
    from kgprobe.commands.run import settings_from_args
    from kgprobe.errors import InputError

    def settings(*argv):
        return settings_from_args(build_parser().parse_args(["run", *argv]))

    assert settings("--method", "wh", "--lang", "de")["probe_options"]["lang"] == "de"
    assert settings("--method", "hard")["probe_options"]["lang"] is None  # the KG's language
    with pytest.raises(InputError, match="--lang: probe 'zp-lke' has no option 'lang'"):
        settings("--method", "zp-lke", "--lang", "de")


def test_a_demonym_does_not_reach_into_the_next_sentence():
    kg = _iceland_kg()
    assert verify_wh(kg, 0, "Reykjavík is Icelander. Nice.").correct  # said of the subject
    assert not verify_wh(kg, 0, "Reykjavík is for the Icelander. City life.").correct


@pytest.mark.parametrize(
    "text, informative",
    [
        ("It lies on the Island.", True),
        ("In Heqiao, China.", True),  # names only: every capital is a name's or a sentence's
        ("Omaezaki Is A Japanese Island.", False),  # Title Case: "Is", "Island" capitalized mid-line
        ("OMAEZAKI IS A JAPANESE ISLAND", False),
    ],
)
def test_when_capitals_carry_information(text, informative):
    from kgprobe.probes.lexicon import case_is_informative

    assert case_is_informative(text, "en") is informative
