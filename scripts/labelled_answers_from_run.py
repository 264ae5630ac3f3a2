"""Write the answers of a KGLens run (wh, yes-no, easy, hard) as items to be labelled by hand.

    python scripts/labelled_answers_from_run.py RUN.kgrun KG_FILE --prefix geo-wh7 --run wh-seed7 > todo.jsonl

Each line is one probe of the run in (round, position) order, with what the verifier
needs (gold names, subject names; for yes/no the question's object, its names and the
expected polarity from the KG) and ``"correct": null``, ``"named": null``, ``"note": ""``
for the person who labels it. The KG file must be the one the run probed (the edge ids
are its). See kgprobe/probes/data/README.md for how the shipped set was made.
"""

from __future__ import annotations

import argparse
import json
import sys

from kgprobe.kg.formats import load_kg
from kgprobe.probes.common import all_names, gold_names
from kgprobe.store import RunStore


def question_object(kg, edge: int, name: str) -> str | None:
    """The entity among T and C of the edge's (s, p) whose name the yes/no question shows."""
    t = kg.triple(edge)
    for entity in [*sorted(kg.true_objects(t.subject, t.predicate)), *kg.candidate_objects(t.predicate)]:
        if name in all_names(kg.entity(entity)):
            return entity
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run")
    parser.add_argument("kg")
    parser.add_argument("--prefix", required=True, help="id prefix, e.g. geo-wh7")
    parser.add_argument("--run", dest="run_name", required=True, help="what the items' run field says")
    parser.add_argument("--kg-name", default="built_geo", help="name of the KG in kgprobe/probes/data")
    parser.add_argument("--class", dest="cls", default="built-kg")
    args = parser.parse_args(argv)
    kg = load_kg(args.kg)
    store = RunStore.open(args.run)
    for i, p in enumerate(store.probes()):
        t = kg.triple(p.edge)
        item = {"id": f"{args.prefix}-{i:03d}", "source": "smollm2-135m-instruct", "class": args.cls,
                "kg": args.kg_name, "edge": p.edge, "predicate": t.predicate, "run": args.run_name,
                "type": p.detail.get("type"), "question": p.question,
                "subject_names": all_names(kg.entity(t.subject))}
        if item["type"] == "wh":
            item["gold"] = gold_names(kg, t.subject, t.predicate)
        else:
            name = p.detail["phrasing"]["object"]
            obj = question_object(kg, p.edge, name)
            item.update(expected=obj in kg.true_objects(t.subject, t.predicate), object=name,
                        object_names=all_names(kg.entity(obj)) if obj else [name])
        item.update(response=p.answer, correct=None, named=None, note="")
        sys.stdout.write(json.dumps(item, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
