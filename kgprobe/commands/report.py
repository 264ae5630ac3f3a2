"""``kgprobe report RUN``: Markdown and self-contained HTML report of a run, or ``--json``."""

from __future__ import annotations

import argparse
import json


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="write the Markdown/HTML report of a run (or print --json)",
                              description=__doc__)
    p.add_argument("run", help="the run file (or its name in runs/)")
    p.add_argument("--out", help="directory for the report files (default: next to the run file)")
    p.add_argument("--json", action="store_true", help="print the report data as JSON on stdout instead")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from kgprobe.api import open_run
    from kgprobe.report import report_data, write_report

    with open_run(args.run) as run:
        if args.json:
            print(json.dumps(report_data(run), indent=1, default=str))
            return 0
        paths = write_report(run, args.out)
    print(f"wrote {paths['html']}")
    print(f"wrote {paths['markdown']}")
    return 0
