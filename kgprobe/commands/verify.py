"""``kgprobe verify RUN``: check a run file's integrity record by record.

Every record a report or a resume trusts (meta, KG, each round with its probes, each
logged response) carries a SHA-256 checksum; this recomputes them all and checks
SQLite's own structure. Exit 0 when the file is intact (or, for a file written by an
older kgprobe without checksums, when every record decodes; the output says that
changed values cannot be detected there), exit 2 when anything is damaged, with one
line per damaged record. A damage confined to the last round can be repaired by
``kgprobe resume``, which drops that round and plays it again.
"""

from __future__ import annotations

import argparse
import json


def register(subparsers) -> None:
    p = subparsers.add_parser("verify", help="check a run file's checksums (exit 2 when damaged)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="the run file (or its name in runs/)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from kgprobe.api import find_run
    from kgprobe.errors import DamagedFileError
    from kgprobe.store import RunStore

    path = find_run(args.run)
    try:
        with RunStore.open(path, verify=False) as store:
            result = store.verify()
    except DamagedFileError as exc:  # not even the meta table can be read
        result = None
        problems, checked, rounds, records = exc.problems or [str(exc)], True, 0, 0
    if result is not None:
        problems = [str(p) for p in result.problems]
        checked, rounds, records = result.checked, result.rounds, result.records
    if args.json:
        print(json.dumps({"path": path, "ok": not problems, "checked": checked, "rounds": rounds,
                          "records": records, "problems": problems,
                          "repairable_by_resume": bool(result and result.only_last_round)}))
    elif problems:
        print(f"{path}: DAMAGED ({len(problems)} problem{'s' * (len(problems) != 1)})")
        for p in problems:
            print(f"  {p}")
        if result is not None and result.only_last_round:
            print(f"  only the last round is affected: `kgprobe resume {path}` drops it and plays it again")
    else:
        print(f"{path}: {result.summary()}")
    return 2 if problems else 0
