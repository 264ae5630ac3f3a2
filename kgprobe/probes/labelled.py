"""The hand-labelled answer set (``data/labelled_answers.jsonl``) and how kgprobe judges it.

Each line is one model answer a person judged right or wrong (``correct``), with what
the verifier needs. Three kinds of item:

* items of the first set (no ``class``): a question on an embedded KG with the gold
  names only; judged by today's string rules (:func:`~kgprobe.probes.verify.match_answer`
  without candidates, :func:`~kgprobe.probes.verify.parse_yes_no`);
* items with ``"kg": "famous_facts", "edge": j``: real answers to questions on
  ``data/famous_facts.tsv`` (predicates outside the hand-written templates); judged
  exactly as the KGLens probe judges them, with the KG's true objects, candidates and
  names (:func:`~kgprobe.probes.candidates.verify_wh`);
* hand-made items of the hard classes with their own small candidate sets:
  ``true_objects`` (T, names per entity), ``candidates`` (C − T) and ``others`` (other
  entities whose names may contain a gold name).

* real answers of the default model on a KG written by ``kgprobe build``
  (``"class": "built-kg"``, ``data/labelled_built_kg.jsonl`` on ``data/built_geo*.jsonl.gz``;
  how they were made and labelled: ``data/README.md``), each with the entities the person
  read in the answer (``named``).

``verifier_says(item)`` gives kgprobe's verdict; ``item_class(item)`` the class the
verifier benchmark reports agreement for; ``named_agrees(item)`` whether the verifier
names the entities the person read.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.probes.kglens import WH_DEMO_NAMES
from kgprobe.probes.verify import Match, NameIndex, match_answer, parse_yes_no

DATA = ("data/labelled_answers.jsonl", "data/labelled_built_kg.jsonl")


def load_items() -> list[dict]:
    items = []
    for name in DATA:
        text = resources.files("kgprobe.probes").joinpath(name).read_text(encoding="utf-8")
        items += [json.loads(line) for line in text.splitlines() if line.strip()]
    return items


@lru_cache(maxsize=4)
def data_kg(name: str) -> KnowledgeGraph:
    """A KG shipped in ``kgprobe/probes/data``: ``famous_facts`` = ``famous_facts.tsv``,
    ``built_geo`` = ``built_geo.jsonl.gz`` (written by ``kgprobe build``), likewise ``built_geo_b``."""
    from kgprobe.kg.formats import load_kg

    folder = resources.files("kgprobe.probes").joinpath("data")
    file = next(f"{name}{ext}" for ext in (".tsv", ".jsonl.gz", ".jsonl")
                if folder.joinpath(f"{name}{ext}").is_file() or ext == ".jsonl")
    with resources.as_file(folder.joinpath(file)) as path:
        return load_kg(path)


def item_class(item: dict) -> str:
    if item.get("class"):
        return item["class"]
    return f"first-set:{item['type']}"


def wh_match(item: dict, *, use_kg: bool = True) -> Match:
    """The wh-verdict; ``use_kg=False`` is today's rules (gold names only) as the baseline."""
    if not use_kg:
        return match_answer(item["response"], item["gold"], echoed=item["subject_names"])
    if "kg" in item:
        from kgprobe.probes.candidates import verify_wh

        return verify_wh(data_kg(item["kg"]), int(item["edge"]), item["response"], demo_names=WH_DEMO_NAMES)
    if "true_objects" in item:
        groups = [(f"t{i}", names) for i, names in enumerate(item["true_objects"])]
        groups += [(f"c{i}", names) for i, names in enumerate(item.get("candidates", []))]
        groups += [(f"o{i}", names) for i, names in enumerate(item.get("others", []))]
        true = [f"t{i}" for i in range(len(item["true_objects"]))]
        cands = true + [f"c{i}" for i in range(len(item.get("candidates", [])))]
        return match_answer(
            item["response"], item["gold"], echoed=item["subject_names"], index=NameIndex(groups),
            true_keys=true, candidate_keys=cands, single_valued=len(true) == 1, demo_names=WH_DEMO_NAMES,
        )
    return match_answer(item["response"], item["gold"], echoed=item["subject_names"], demo_names=WH_DEMO_NAMES)


def verifier_says(item: dict, *, use_kg: bool = True) -> bool:
    """What kgprobe's verifier decides, through the same calls the KGLens probe makes."""
    if item["type"] == "wh":
        return wh_match(item, use_kg=use_kg).correct
    said = parse_yes_no(item["response"], subject_names=item["subject_names"], object_names=item["object_names"])
    return said is not None and said == item["expected"]


def named_agrees(item: dict) -> bool | None:
    """For a wh-item on a shipped KG with a hand-recorded ``named`` list: does the verifier
    name the same true objects and candidates the person read in the answer? Names outside
    T and C (a country that is no candidate of the predicate) are not compared, since the
    verifier only reports T and C. None for items without ``named``."""
    if item["type"] != "wh" or "named" not in item or "kg" not in item:
        return None
    kg = data_kg(item["kg"])
    t = kg.triple(int(item["edge"]))
    known = set(kg.true_objects(t.subject, t.predicate)) | set(kg.candidate_objects(t.predicate))
    m = wh_match(item)
    return set(m.named_true) | set(m.named_wrong) == set(item["named"]) & known
