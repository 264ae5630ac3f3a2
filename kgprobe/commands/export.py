"""``kgprobe export RUN --samples FILE.jsonl``: every probe of a run, one JSON object per line.

Like lm-evaluation-harness' ``--log_samples``: each line is one probe (one fact asked
once) with the fact, what the model was shown, what it answered and how it was scored:

``run``, ``round``, ``pos``, ``design``
    where the probe sits in the run (``design``: a design draw with a known inclusion probability, see docs/design.md);
``edge``, ``subject``, ``predicate``, ``object``
    the fact: edge index, ids and labels (``{"id": …, "label": …}``);
``prompt``
    the text the model continued: the context of scored options, or the generation
    prompt (null for probes whose requests were not logged);
``options`` (multiple choice, scored methods) or ``question`` (generation methods)
    the scored continuations, in the order shown; the question as the probe states it;
``response``
    the model's answer (the chosen option or the generated text);
``verdict``
    ``true`` when the probe counted as right;
``scores``
    per option: summed log-probability, token count and whether every token was the
    greedy choice (multiple choice; empty for generations);
``detail``
    the probe's own record (gold rank and probability, options count, template …).

The first line is a header object, ``{"kgprobe_samples": 1, "protocol": {…}}``, so a
samples file says what was measured on its own.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write every probe of a run as JSON lines (--samples FILE.jsonl)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="the run file (or its name in runs/)")
    p.add_argument("--samples", required=True, metavar="FILE.jsonl",
                   help="write one JSON line per probe to this file ('-' for stdout)")
    p.set_defaults(func=handle)


def iter_samples(run):
    """The header, then one dict per probe in (round, position) order."""
    store = run.store
    kg = run.kg
    yield {"kgprobe_samples": 1, "run": run.path, "protocol": run.protocol}
    by_round: dict[int, list] = {}
    for p in store.probes():
        by_round.setdefault(p.round, []).append(p)
    for r in sorted(by_round):
        logged = {phase: store.logged_requests(r, phase) for phase in ("score", "generate")}
        cursor = {"score": 0, "generate": 0}
        for p in by_round[r]:
            requests = {}
            for phase in ("score", "generate"):
                entry = logged[phase]
                if entry is None:
                    requests[phase] = ([], [])
                    continue
                reqs, resps = entry
                start = cursor[phase]
                end = start
                # A task's requests are consecutive and carry its edge (the engine logs them in order).
                while end < len(reqs) and reqs[end].get("edge") == p.edge:
                    end += 1
                    if phase == "score" and "num_options" in p.detail and end - start == p.detail["num_options"]:
                        break
                cursor[phase] = end
                requests[phase] = (reqs[start:end], resps[start:end])
            t = kg.triple(p.edge)
            score_reqs, score_resps = requests["score"]
            gen_reqs, gen_resps = requests["generate"]
            sample = {
                "run": run.path,
                "round": p.round,
                "pos": p.pos,
                "design": p.design,
                "edge": p.edge,
                "subject": {"id": t.subject, "label": kg.label(t.subject)},
                "predicate": {"id": t.predicate, "label": kg.predicate_label(t.predicate)},
                "object": {"id": t.object, "label": kg.label(t.object)},
            }
            if score_reqs:
                contexts = {q["context"] for q in score_reqs}
                sample["prompt"] = score_reqs[0]["context"] if len(contexts) == 1 else [q["context"] for q in score_reqs]
                sample["options"] = [q["continuation"] for q in score_reqs]
            elif gen_reqs:
                sample["prompt"] = gen_reqs[0]["prompt"] if len(gen_reqs) == 1 else [q["prompt"] for q in gen_reqs]
            else:
                sample["prompt"] = None
            sample["question"] = p.question
            sample["response"] = p.answer
            if gen_resps:
                sample["generations"] = list(gen_resps)
            sample["verdict"] = p.correct
            sample["scores"] = [
                {"logprob": s.logprob, "tokens": s.num_tokens, "greedy": s.is_greedy} for s in score_resps
            ]
            sample["detail"] = p.detail
            yield sample


def handle(args: argparse.Namespace) -> int:
    from kgprobe.api import open_run
    from kgprobe.errors import StoreError

    with open_run(args.run) as run:
        if args.samples == "-":
            count = -1
            for sample in iter_samples(run):
                print(json.dumps(sample, ensure_ascii=False, default=str))
                count += 1
            return 0
        target = Path(args.samples)
        if target.is_dir():
            raise StoreError(f"--samples {args.samples} is a directory; give a file name such as samples.jsonl")
        tmp = target.with_name(target.name + ".tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            count = -1
            with open(tmp, "w", encoding="utf-8") as fh:
                for sample in iter_samples(run):
                    fh.write(json.dumps(sample, ensure_ascii=False, default=str) + "\n")
                    count += 1
            os.replace(tmp, target)
        except OSError as exc:
            raise StoreError(f"cannot write {args.samples}: {exc.strerror}; choose another path") from None
    print(f"wrote {count} samples to {target}")
    return 0
