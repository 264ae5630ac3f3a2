"""The verifier against the hand-judged labelled set (≥ 97 % agreement on the whole set).

The set (``kgprobe/probes/data/labelled_answers.jsonl``) holds the first 218 items
(embedded-KG questions, judged with the gold names only) and later items: real
answers of the default model to questions on predicates outside the hand-written
templates (``data/famous_facts.tsv``) and hand-made answers of the hard classes (longest
mention, wrong candidates for single- and multi-valued facts, reversals). Each item was
judged by a person before the verifier was run on it; ``note`` says why. The class
``built-kg`` holds real answers of the default model on a KG written by ``kgprobe build``
(``data/README.md`` says how they were made and labelled).
"""

from __future__ import annotations

from collections import Counter

from kgprobe.probes.labelled import data_kg, item_class, load_items, named_agrees, verifier_says
from kgprobe.probes.templates import has_templates


def test_labelled_set_is_large_and_covers_the_hard_cases():
    items = load_items()
    assert len(items) >= 318
    assert len({i["id"] for i in items}) == len(items)
    real = [i for i in items if i["source"] == "smollm2-135m-instruct"]
    assert len(real) >= 150  # most responses are real model output
    notes = " ".join(i.get("note", "") for i in items).lower()
    for case in ("alias", "refusal", "hedge", "list", "contradiction", "diacritics", "another script", "negated"):
        assert case in notes, case
    assert sum(i["type"] == "yes_no" for i in items) >= 40 and sum(i["type"] == "wh" for i in items) >= 100
    assert 0.15 < sum(i["correct"] for i in items) / len(items) < 0.85  # both verdicts well represented


def test_issue_14_items_real_answers_outside_the_templates_and_hard_classes():
    new = [i for i in load_items() if i.get("class") and i["class"] != "built-kg"]
    assert len(new) >= 100
    real = [i for i in new if i["source"] == "smollm2-135m-instruct"]
    assert len(real) >= len(new) / 2 - 10 and len(real) >= 50
    assert all(i["kg"] == "famous_facts" and not has_templates(i["predicate"]) for i in real)
    assert len({i["predicate"] for i in real}) >= 10
    classes = Counter(item_class(i) for i in new)
    for cls in ("longest-mention", "single-valued-extra", "multi-valued-extras", "multi-valued-complete",
                "no-candidate", "reversal"):
        assert classes[cls] >= 4, cls


def test_verifier_agrees_with_hand_judgments():
    items = load_items()
    disagreements = [(i["id"], i["response"], i["correct"]) for i in items if verifier_says(i) != i["correct"]]
    agreement = 1 - len(disagreements) / len(items)
    # KGLens reports 96 % for its GPT-4 verifier; the bar is 97 %.
    assert agreement >= 0.97, f"agreement {agreement:.3f}; disagreements: {disagreements}"


def test_built_kg_class_real_answers_on_a_built_kg():
    items = [i for i in load_items() if item_class(i) == "built-kg"]
    assert len(items) >= 100
    assert all(i["source"] == "smollm2-135m-instruct" for i in items)
    assert {i["kg"] for i in items} == {"built_geo", "built_geo_b"}
    for name, seeds in (("built_geo", "Japan+Brazil+Kenya+Iceland+Georgia+Chad"),
                        ("built_geo_b", "Turkey+Chile+Jordan+Guinea+China+Peru")):
        kg = data_kg(name)
        assert kg.metadata["source"] == "embedded:geo" and kg.metadata["lang"] == "en" and kg.name == seeds
    assert {i["type"] for i in items} == {"wh", "yes_no"}
    assert sum(i["type"] == "yes_no" for i in items) >= 40 and sum(i["type"] == "wh" for i in items) >= 100
    assert 10 <= sum(i["correct"] for i in items) <= len(items) - 10
    # every item is the question the probe asked about its edge, on the shipped KG
    for i in items:
        t = data_kg(i["kg"]).triple(i["edge"])
        assert t.predicate == i["predicate"] and i["subject_names"][0] in i["question"], i["id"]
    notes = " ".join(i["note"] for i in items).lower()
    for case in ("demonstration", "demonym", "not iceland", "locates nothing"):
        assert case in notes, case


def test_built_kg_class_agreement_and_named_entities():
    items = [i for i in load_items() if item_class(i) == "built-kg"]
    disagreements = [(i["id"], i["response"]) for i in items if verifier_says(i) != i["correct"]]
    assert 1 - len(disagreements) / len(items) >= 0.97, disagreements
    named = [named_agrees(i) for i in items if named_agrees(i) is not None]
    assert len(named) >= 100 and sum(named) / len(named) >= 0.97
