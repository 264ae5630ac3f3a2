"""``kgprobe resume RUN``: continue a stopped, interrupted or killed run.

The run continues from its last committed round with the model it was started with;
a round whose responses were already logged is replayed from the run file instead of
asking the model again, so the result equals that of an unbroken run with the same seed.
"""

from __future__ import annotations

import argparse

from kgprobe.commands.options import add_device_option, add_worker_options
from kgprobe.commands.run import add_round_timeout_option


def register(subparsers) -> None:
    p = subparsers.add_parser("resume", help="continue a stopped, interrupted or killed run", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="the run file (or its name in runs/)")
    p.add_argument("--model", help="model spec, if it must be given again (default: the one the run used)")
    add_device_option(p, default=None, help_default="the device the run was started with")
    p.add_argument("--budget", type=int, help="raise the run's query budget (extends a finished run)")
    p.add_argument("--max-rounds", type=int, help="raise the run's round limit")
    p.add_argument("--cache", metavar="FILE", help="SQLite response cache shared across runs")
    add_round_timeout_option(p)
    add_worker_options(p, default=None)
    p.add_argument("--no-report", dest="report", action="store_false", help="do not write the report at the end")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--plain", action="store_true", help="line-by-line progress even on a terminal")
    p.add_argument("--output", metavar="PATH", help="also write the JSON report (with the protocol) to PATH")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from kgprobe.api import find_run, resume
    from kgprobe.commands.run import _short_warnings, load_model_setting, play, prepare_process_for_models
    from kgprobe.store import RunStore

    import json

    prepare_process_for_models()
    _short_warnings()
    path = find_run(args.run)
    spec = args.model
    # Not verified here: resume() verifies and may drop a damaged last round.
    with RunStore.open(path, verify=False) as ro:
        options = json.loads(ro.meta("model_options") or "{}")
        if spec is None:
            spec = ro.model_spec or None
        device = args.device or ro.meta("device") or "auto"
        # The worker count the run was started with, unless given again; the answers are
        # the same on any number of workers, and without workers the run goes on in-process.
        workers = args.workers if args.workers is not None else int(ro.meta("workers") or 0) or None
    from kgprobe.commands.run import with_round_timeout

    options = with_round_timeout(options, args.round_timeout)
    if workers is not None or args.ray_address:
        from kgprobe.commands.run import record_workers
        from kgprobe.config_schema import check_settings

        check_settings({"workers": workers, "ray_address": args.ray_address}, "the command line")
    model = load_model_setting(spec, args.cache, options, device, workers, args.ray_address) if spec else None
    try:
        run = resume(path, model, budget=args.budget, max_rounds=args.max_rounds, lazy=True)
    except BaseException:
        if model is not None:
            model.close()
        raise
    if workers is not None:
        record_workers(run.store, workers)
    return play(run.engine, run.store, {"quiet": args.quiet, "plain": args.plain, "report": args.report,
                                       "output": args.output})
