"""Questions for predicates outside the hand-written templates, and no identical repeats.

Every expected string was read and checked by hand as a natural English question.
"""

from __future__ import annotations

import numpy as np
import pytest

from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.probes.grammar import clean_label, grammar_for, shape_of
from kgprobe.probes.kglens import KGLensProbe
from kgprobe.probes.labelled import data_kg
from kgprobe.probes.templates import fill, has_templates


@pytest.fixture(scope="module")
def facts() -> KnowledgeGraph:
    """The user-style TSV KG of plain labels shipped with the labelled set."""
    return data_kg("famous_facts")


def first_questions(kg: KnowledgeGraph, subject: str, predicate: str):
    """(first wh-question, first yes/no question about the true object) for one edge."""
    edge = next(j for j in range(kg.num_edges)
                if kg.triple(j).subject == subject and kg.triple(j).predicate == predicate)
    g = grammar_for(kg, predicate)
    obj = kg.label(kg.triple(edge).object)
    return fill(g.wh[0], kg.label(subject)), fill(g.yes_no[0], kg.label(subject), obj), g


# (subject, predicate, wh-question, yes/no question, object kind): one row per predicate, none hand-written
RENDERINGS = [
    ("Don Quixote", "author", "Who is the author of Don Quixote?",
     "Is Miguel de Cervantes the author of Don Quixote?", "person"),
    ("Carmen", "composer", "Who is the composer of Carmen?", "Is Georges Bizet the composer of Carmen?", "person"),
    ("Mona Lisa", "creator", "Who is the creator of Mona Lisa?",
     "Is Leonardo da Vinci the creator of Mona Lisa?", "person"),
    ("helium", "element symbol", "What is the element symbol of helium?",
     "Is He the element symbol of helium?", "thing"),
    ("gold", "atomic number", "What is the atomic number of gold?", "Is 79 the atomic number of gold?", "quantity"),
    ("Alabama", "capital", "What is the capital of Alabama?", "Is Montgomery the capital of Alabama?", "place"),
    ("Ottawa", "capital of", "What is Ottawa the capital of?", "Is Ottawa the capital of Canada?", "place"),
    ("Albert Einstein", "date of birth", "When was Albert Einstein born?",
     "Was Albert Einstein born on 14 March 1879?", "date"),
    ("Napoleon", "place of birth", "Where was Napoleon born?", "Was Napoleon born in Ajaccio?", "place"),
    ("Danube", "flows into", "What does Danube flow into?", "Does Danube flow into Black Sea?", "thing"),
    ("Ford Motor Company", "founded by", "Who founded Ford Motor Company?",
     "Was Ford Motor Company founded by Henry Ford?", "person"),
    ("Portugal", "shares border with", "What does Portugal share border with?",
     "Does Portugal share border with Spain?", "place"),
    ("Frida Kahlo", "spouse", "Who is the spouse of Frida Kahlo?", "Is Diego Rivera the spouse of Frida Kahlo?",
     "person"),
    ("Taj Mahal", "located in", "What is Taj Mahal located in?", "Is Taj Mahal located in Agra?", "place"),
]


@pytest.mark.parametrize("subject,predicate,wh,yes_no,kind", RENDERINGS)
def test_first_questions_of_predicates_without_templates(facts, subject, predicate, wh, yes_no, kind):
    assert not has_templates(predicate)
    got_wh, got_yes_no, g = first_questions(facts, subject, predicate)
    assert (got_wh, got_yes_no, g.kind) == (wh, yes_no, kind)
    assert '"' not in got_wh + got_yes_no


def test_paraphrases_agents_events_and_symmetric_swaps(facts):
    assert grammar_for(facts, "author").wh == (
        "Who is the author of {subject}?", "Who wrote {subject}?", "Who is {subject}'s author?")
    assert "Did {object} compose {subject}?" in grammar_for(facts, "composer").yes_no
    assert grammar_for(facts, "date of birth").wh == ("When was {subject} born?", "What is the date of birth of {subject}?")
    assert grammar_for(facts, "flows into").wh == ("What does {subject} flow into?", "Into what does {subject} flow?")
    assert grammar_for(facts, "capital of").wh == (
        "What is {subject} the capital of?", "Which place is {subject} the capital of?", "{subject} is the capital of what?")
    border = grammar_for(facts, "shares border with")
    assert border.symmetric and border.yes_no == (
        "Does {subject} share border with {object}?", "Does {object} share border with {subject}?")
    spouse = grammar_for(facts, "spouse")
    assert spouse.symmetric and "Is {subject} the spouse of {object}?" in spouse.yes_no
    assert not grammar_for(facts, "author").symmetric


@pytest.fixture
def wikidata_style() -> KnowledgeGraph:
    """Predicates as the SPARQL builder fetches them: ids, labels, aliases, descriptions."""
    entities = [
        Entity("Q1653", "Danube"), Entity("Q166", "Black Sea"), Entity("Q2", "Earth"), Entity("Q405", "Moon"),
        Entity("Q7259", "Ada Lovelace", group="human"), Entity("Q84", "London", group="city"),
        Entity("Q5679", "Lord Byron", group="human"), Entity("Q7251", "Alan Turing", group="human"),
        Entity("Q1", "1"), Entity("Q9", "Bletchley Park"), Entity("Q10", "Augustus De Morgan", group="human"),
    ]
    predicates = [
        Predicate("P403", "mouth of the watercourse", ("outflow", "empties into"),
                  "the body of water to which the watercourse drains"),
        Predicate("P1X", "number of moons"),
        Predicate("birthPlace", "birthPlace"),
        Predicate("P22", "father", (), "male parent of the subject"),
        Predicate("P1066", "student of", (), "person who has taught this person"),
        Predicate("P50X", "written by"),
        Predicate("P9X", "employer"),
    ]
    triples = [
        Triple("Q1653", "P403", "Q166"), Triple("Q2", "P1X", "Q1"), Triple("Q7259", "birthPlace", "Q84"),
        Triple("Q7259", "P22", "Q5679"), Triple("Q7259", "P1066", "Q10"), Triple("Q405", "P50X", "Q7251"),
        Triple("Q7251", "P9X", "Q9"),
    ]
    return KnowledgeGraph(entities, predicates, triples)


def test_wikidata_labels_aliases_and_descriptions(wikidata_style):
    kg = wikidata_style
    mouth = grammar_for(kg, "P403")
    # a long noun label, then alias swaps: the noun alias and the verb alias
    assert mouth.wh == (
        "What is the mouth of the watercourse of {subject}?",
        "Which place is the mouth of the watercourse of {subject}?",
        "What is the outflow of {subject}?",
        "What does {subject} empty into?",
    )
    assert "Does {subject} empty into {object}?" in mouth.yes_no
    assert grammar_for(kg, "P1X").wh[0] == "How many moons does {subject} have?"
    assert grammar_for(kg, "P1X").kind == "quantity"
    # camelCase label read as words, an event noun: "Where was … born?"
    assert grammar_for(kg, "birthPlace").wh[0] == "Where was {subject} born?"
    assert grammar_for(kg, "P22").wh[0] == "Who is the father of {subject}?"
    # inverse predicate: the subject is the student, the object the teacher
    assert grammar_for(kg, "P1066").wh[0] == "Who is {subject} the student of?"
    assert grammar_for(kg, "P1066").yes_no[0] == "Is {subject} the student of {object}?"
    # passive "by" with an irregular participle: the active voice comes first
    assert grammar_for(kg, "P50X").wh[:2] == ("Who wrote {subject}?", "Who was {subject} written by?")
    # the description decides nothing here; "employer" is a thing: "What is …"
    assert grammar_for(kg, "P9X").wh[0] == "What is the employer of {subject}?"


def test_label_shapes_and_cleaning():
    assert clean_label("date_of_birth") == "date of birth"
    assert clean_label("dateOfBirth") == "date of birth"
    assert clean_label("Date Of Birth") == "date of birth"
    assert clean_label("has part(s)") == "has part"
    shapes = {label: shape_of(label) for label in (
        "author", "capital of", "founded by", "located in", "flows into", "number of moons", "characters",
        "twinned with", "has part", "different from")}
    assert shapes == {
        "author": "noun", "capital of": "inverse-noun", "founded by": "passive", "located in": "participle",
        "flows into": "verb", "number of moons": "count", "characters": "noun", "twinned with": "participle",
        "has part": "verb", "different from": "participle",
    }


def test_each_probe_of_an_edge_gets_a_new_question_until_they_run_out(facts):
    probe = KGLensProbe("wh")
    edge = next(j for j in range(facts.num_edges) if facts.triple(j).subject == "Hamlet")
    rng = np.random.default_rng(0)
    asked = [probe.render_attempt(facts, edge, rng, a) for a in range(4)]
    assert [t.question for t in asked[:3]] == [
        "Who is the author of Hamlet?", "Who wrote Hamlet?", "Who is Hamlet's author?"]
    assert [t.payload["phrasing"]["repeated"] for t in asked] == [False, False, False, True]
    assert asked[3].question == asked[0].question
    # the verdict of the repeat says so, and carries the phrasing it used
    verdict = probe.verify(facts, asked[3], [], ["William Shakespeare"])
    assert verdict.correct and verdict.detail["repeated"] is True
    assert verdict.detail["phrasing"]["template"] == "Who is the author of {subject}?"
    assert "repeated" not in probe.verify(facts, asked[0], [], ["Shakespeare"]).detail


def test_hard_mode_switches_kind_when_one_runs_out(facts):
    probe = KGLensProbe("hard")
    edge = next(j for j in range(facts.num_edges) if facts.triple(j).subject == "Hamlet")
    assert probe.phrasing_count(facts, edge, "wh") == 3
    # yes/no: 3 templates × (1 true + 11 wrong authors) = 36 questions
    assert probe.phrasing_count(facts, edge, "yes_no") == 36
    kinds = set()
    for seed in range(20):
        task = probe.render_attempt(facts, edge, np.random.default_rng(seed), 5)
        assert not task.payload["phrasing"].get("repeated")
        kinds.add(task.payload["type"])
    assert kinds == {"yes_no"}  # the 6th wh-question would repeat, so yes/no is asked


def test_no_subject_as_its_own_wrong_object(facts):
    probe = KGLensProbe("yes-no")
    edge = next(j for j in range(facts.num_edges)
                if facts.triple(j).subject == "Diego Rivera" and facts.triple(j).predicate == "spouse")
    objects = {probe.render_attempt(facts, edge, np.random.default_rng(0), a).payload["object"] for a in range(40)}
    assert "Diego Rivera" not in objects and "Frida Kahlo" in objects


def test_questions_command_prints_natural_questions(capsys):
    from importlib import resources

    from kgprobe.cli import main

    path = resources.files("kgprobe.probes").joinpath("data/famous_facts.tsv")
    assert main(["questions", "--kg", str(path), "--predicate", "capital", "--predicate", "flows into",
                 "--n", "1", "--seed", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    # seed 3 samples Nevada and the Rhine; every line read and checked by hand (facts and
    # grammar); the first yes/no polarity comes from each edge's triple
    assert out == [
        "capital: 12 edges, templates grammar, object kind place, label read as noun",
        "  edge 61: Nevada -> Carson City  (24 distinct yes/no, 2 distinct wh questions)",
        "    yes/no Is Springfield the capital of Nevada?  [no]",
        "    yes/no Is Carson City the capital of Nevada?  [yes]",
        "    wh     What is the capital of Nevada?  [Carson City]",
        "    wh     Which place is the capital of Nevada?  [Carson City]",
        "flows into: 12 edges, templates grammar, object kind thing, label read as verb",
        "  edge 92: Rhine -> North Sea  (9 distinct yes/no, 2 distinct wh questions)",
        "    yes/no Does Rhine flow into North Sea?  [yes]",
        "    yes/no Does Rhine flow into East China Sea?  [no]",
        "    wh     What does Rhine flow into?  [North Sea]",
        "    wh     Into what does Rhine flow?  [North Sea]",
    ]


def test_questions_command_rejects_an_unknown_predicate(capsys):
    from importlib import resources

    from kgprobe.cli import main

    path = resources.files("kgprobe.probes").joinpath("data/famous_facts.tsv")
    assert main(["questions", "--kg", str(path), "--predicate", "wrote"]) == 2
    assert "--predicate 'wrote' is not a predicate of this KG" in capsys.readouterr().err


def test_predicate_descriptions_survive_the_kg_file_and_the_run_store(wikidata_style, tmp_path):
    from kgprobe.kg.formats import load_kg, save_kg
    from kgprobe.store import kg_from_dict, kg_to_dict

    path = save_kg(wikidata_style, tmp_path / "kg.jsonl")
    back = load_kg(path)
    assert back.predicates["P403"].description == "the body of water to which the watercourse drains"
    assert back.predicates["P1X"].description == ""
    # no "description" key is written for a predicate without one, so older readers see the same records
    assert '"id":"P1X","label":"number of moons","aliases":[]}' in path.read_text()
    assert kg_from_dict(kg_to_dict(wikidata_style)).predicates["P22"].description == "male parent of the subject"
