"""``kgprobe resume RUN``: continue a stopped, interrupted or killed run.

The run continues from its last committed round with the model it was started with;
a round whose responses were already logged is replayed from the run file instead of
asking the model again, so the result equals that of an unbroken run with the same seed.
"""

from __future__ import annotations

import argparse

from kgprobe.commands.options import add_setting_arguments
from kgprobe.models.devices import DEVICE_CHOICES


def register(subparsers) -> None:
    p = subparsers.add_parser("resume", help="continue a stopped, interrupted or killed run", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="the run file (or its name in runs/)")
    add_setting_arguments(p, "resume", unset=None, groups=False, help={
        "model": "model spec, if it must be given again (default: the one the run used)",
        "device": f"where a local model runs: {DEVICE_CHOICES} (default: the device the run was started with); "
                  "API backends ignore it",
        "budget": "raise the run's query budget (extends a finished run)",
        "max_rounds": "raise the run's round limit",
        "report": "do not write the report at the end",
    })
    p.add_argument("--output", metavar="PATH", help="also write the JSON report (with the protocol) to PATH")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from kgprobe.api import find_run, resume
    from kgprobe.commands.common import (
        load_model_setting, play, prepare_process_for_models, short_warnings, with_round_timeout,
    )
    import json

    from kgprobe.store import RunStore

    prepare_process_for_models()
    short_warnings()
    path = find_run(args.run)
    spec = args.model
    # Not verified here: resume() verifies and may drop a damaged last round.
    with RunStore.open(path, verify=False) as ro:
        options = json.loads(ro.meta("model_options") or "{}")
        if spec is None:
            spec = ro.model_spec or None
        # A run file without a recorded device: its model options may name one.
        device = args.device or ro.meta("device") or options.get("device") or "auto"
    options = with_round_timeout(options, args.round_timeout)
    model = load_model_setting(spec, args.cache, options, device) if spec else None
    run = resume(path, model, budget=args.budget, max_rounds=args.max_rounds, lazy=True)
    if run.nothing_left:
        print(f"kgprobe: {run.path} is finished ({run.rounds_played} rounds, {run.queries_spent} queries, stopped "
              f"by {run.stop_reason}); nothing to resume. Raise --budget or --max-rounds to extend it; "
              f"`kgprobe report {run.path}` shows its results")
        run.close()
        return 0
    return play(run, {"quiet": args.quiet, "plain": args.plain, "report": args.report,
                                       "output": args.output})
