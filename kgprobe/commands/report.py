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
    p.add_argument("--output", metavar="PATH", help="write the JSON report data to PATH (implies --json)")
    p.add_argument("--null-model", nargs="?", const="tiny-random", metavar="MODEL",
                   help="first measure the null-model baseline: MODEL (default tiny-random, random weights) "
                        "answers renderings of each predicate's edges under the run's protocol; the rates are "
                        "stored in the run file and shown next to every accuracy (docs/baselines.md)")
    p.set_defaults(func=handle)


def write_output(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a partial file never stands as complete)."""
    import os
    from pathlib import Path

    from kgprobe.errors import StoreError

    target = Path(path)
    if target.is_dir():
        raise StoreError(f"--output {path} is a directory; give a file name, e.g. {target / 'report.json'}")
    tmp = target.with_name(target.name + ".tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror}; choose another --output") from None


def handle(args: argparse.Namespace) -> int:
    from kgprobe.api import find_run, open_run
    from kgprobe.report import report_data, write_report

    from kgprobe.store.transactions import writer_active

    path = find_run(args.run)
    if args.null_model:
        from kgprobe.api import resolve_model
        from kgprobe.report import measure_null_baseline

        model, spec = resolve_model(args.null_model)
        measure_null_baseline(path, model, spec)
    # Before the file is opened: the check opens and closes a descriptor of it, which would
    # drop the locks SQLite holds on a file this process already reads.
    being_written = writer_active(path)
    with open_run(path) as run:
        if args.json or args.output:
            text = json.dumps(report_data(run, being_written=being_written), indent=1, default=str)
            if args.output:
                write_output(args.output, text)
                print(f"wrote {args.output}")
            else:
                print(text)
            return 0
        paths = write_report(run, args.out, being_written=being_written)
    print(f"wrote {paths['html']}")
    print(f"wrote {paths['markdown']}")
    return 0
