"""The verifier against the hand-judged labelled set (≥ 150 items, ≥ 95 % agreement)."""

from __future__ import annotations

import json
from importlib import resources

from kgprobe.probes.verify import match_answer, parse_yes_no


def load_items() -> list[dict]:
    text = resources.files("kgprobe.probes").joinpath("data/labelled_answers.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def verifier_says(item: dict) -> bool:
    """What kgprobe's verifier decides, through the same calls the KGLens probe makes."""
    if item["type"] == "wh":
        return match_answer(item["response"], item["gold"], echoed=item["subject_names"]).correct
    said = parse_yes_no(item["response"], subject_names=item["subject_names"], object_names=item["object_names"])
    return said is not None and said == item["expected"]


def test_labelled_set_is_large_and_covers_the_hard_cases():
    items = load_items()
    assert len(items) >= 150
    assert len({i["id"] for i in items}) == len(items)
    real = [i for i in items if i["source"] == "smollm2-135m-instruct"]
    assert len(real) >= 100  # most responses are real model output
    notes = " ".join(i.get("note", "") for i in items).lower()
    for case in ("alias", "refusal", "hedge", "list", "contradiction", "diacritics", "another script", "negated"):
        assert case in notes, case
    assert sum(i["type"] == "yes_no" for i in items) >= 40 and sum(i["type"] == "wh" for i in items) >= 100
    assert 0.15 < sum(i["correct"] for i in items) / len(items) < 0.85  # both verdicts well represented


def test_verifier_agrees_with_hand_judgments():
    items = load_items()
    disagreements = [(i["id"], i["response"], i["correct"]) for i in items if verifier_says(i) != i["correct"]]
    agreement = 1 - len(disagreements) / len(items)
    # KGLens reports 96 % for its GPT-4 verifier; the bar is 95 %.
    assert agreement >= 0.95, f"agreement {agreement:.3f}; disagreements: {disagreements}"
