"""``kgprobe bench verifier``: agreement of the answer verifier with hand judgments.

Runs kgprobe's verifier on every item of the labelled set
(``kgprobe/probes/data/labelled_answers.jsonl``) and, as the baseline in the same run,
the same string rules with the gold names only (no KG candidates or other names). Prints the
disagreements, then a JSON object as the last line: ``items``, ``agreement`` (with a
Wilson 95 % interval), the baseline's agreement, agreement per class, how the
wh-answers judged right split into right-and-complete and right-with-wrong-extras, and
(``named_agreement``) on the items that record which entities a person read in the
answer, how often the verifier names the same ones.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict


def register(subparsers) -> None:
    parser = subparsers.add_parser("verifier", help="agreement of the answer verifier with the hand-labelled set")
    parser.add_argument("--quiet", action="store_true", help="print only the JSON line")
    parser.set_defaults(func=handle)


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n (95 % by default)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def handle(args) -> int:
    from kgprobe.probes.labelled import item_class, load_items, named_agrees, verifier_says, wh_match

    items = load_items()
    agree = defaultdict(int)
    total = defaultdict(int)
    baseline_agree = 0
    misses = []
    complete = extras = incomplete = 0
    named_total = named_same = 0
    for item in items:
        same = named_agrees(item)
        if same is not None:
            named_total += 1
            named_same += same
        cls = item_class(item)
        says = verifier_says(item)
        total[cls] += 1
        if says == item["correct"]:
            agree[cls] += 1
        else:
            misses.append((item["id"], cls, item["response"], item["correct"], says))
        baseline_agree += verifier_says(item, use_kg=False) == item["correct"]
        if item["type"] == "wh" and says:
            m = wh_match(item)
            if m.named_wrong:
                extras += 1
            elif m.complete:
                complete += 1
            else:
                incomplete += 1
    n = len(items)
    k = sum(agree.values())
    if not args.quiet:
        for mid, cls, response, label, says in misses:
            print(f"miss {mid} [{cls}] label={'right' if label else 'wrong'} verifier={'right' if says else 'wrong'}: "
                  f"{response[:100]!r}")
    low, high = wilson(k, n)
    result = {
        "bench": "verifier",
        "items": n,
        "agreement": round(k / n, 4),
        "agreement_ci95": [round(low, 4), round(high, 4)],
        "baseline_agreement": round(baseline_agree / n, 4),
        "baseline": "the string rules with the gold names only (no KG candidates, no other entity names)",
        "misses": [m[0] for m in misses],
        "per_class": {c: {"items": total[c], "agreement": round(agree[c] / total[c], 4)} for c in sorted(total)},
        "wh_right": {"complete": complete, "with_wrong_extras": extras, "incomplete_no_extras": incomplete},
        "named_agreement": {
            "items": named_total,
            "agreement": round(named_same / named_total, 4) if named_total else None,
            "what": "wh-items with the entities a person read in the answer: the verifier names the same "
                    "true objects and candidates",
        },
    }
    print(json.dumps(result))
    return 0
