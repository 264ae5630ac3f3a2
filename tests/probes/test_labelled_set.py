"""The verifier against the hand-judged labelled set (≥ 97 % agreement on the whole set).

The set (``kgprobe/probes/data/labelled_answers.jsonl``) holds the first 218 items
(embedded-KG questions, judged with the gold names only) and later items: real
answers of the default model to questions on predicates outside the hand-written
templates (``data/famous_facts.tsv``) and hand-made answers of the hard classes (longest
mention, wrong candidates for single- and multi-valued facts, reversals). Each item was
judged by a person before the verifier was run on it; ``note`` says why.
"""

from __future__ import annotations

from collections import Counter

from kgprobe.probes.labelled import item_class, load_items, verifier_says
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
    new = [i for i in load_items() if i.get("class")]
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
