"""``kgprobe run``: probe a model on a KG within a query budget, with a live view.

With no arguments: the embedded countries KG, the default model (SmolLM2-135M), the
zero-prompt many-shot method and a budget that finishes in a few minutes on 2 CPU cores.
Every option can also come from ``--config FILE.toml`` (keys are the option names with
``_`` or ``-``; the command line wins). The defaults are those of the Python API
(kgprobe/run_spec.py), and every option of the probe and sampler is recorded in the
run's protocol. The run is saved to ``--out`` (default ``runs/``) after every round;
Ctrl-C or SIGTERM stops after saving and ``kgprobe resume RUN`` continues. ``--output
FILE.json`` also writes the report data, protocol included.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kgprobe.commands.common import (  # noqa: F401  (load_config_file, settings_from_args: re-exported)
    check_out_dir,
    load_config_file,
    load_model_setting,
    play,
    prepare_process_for_models,
    resolve_kg_setting,
    settings_from_args,
    short_warnings,
    with_round_timeout,
)
from kgprobe.commands.options import add_setting_arguments
from kgprobe.engine import EngineConfig
from kgprobe.start import check_run, start_run


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="probe a model on a KG within a query budget (default: embedded countries KG, default model)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Unset options stay absent so a config file can supply them.
    sections = add_setting_arguments(p, "run")
    # Not a run setting of its own: a shortcut for --probe-option lang=CODE (read in settings_from_args).
    sections["model and method"].add_argument(
        "--lang", default=argparse.SUPPRESS, metavar="CODE",
        help="language the free answers of wh, yes-no, easy and hard are read in (en, de, …; "
        "default: the KG's, from kgprobe build --lang); a shortcut for --probe-option lang=CODE")
    o = sections["output"]
    o.add_argument("--config", help="TOML file with any of these settings")
    o.add_argument("--output", metavar="PATH", help="also write the JSON report (with the protocol) to PATH")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    prepare_process_for_models()
    short_warnings()  # before the checks: a prior's sources are warned about there
    # Types, ranges and unknown keys are checked while resolving, before a run file exists.
    settings = settings_from_args(args)
    settings["model_options"] = with_round_timeout(settings["model_options"], settings.pop("round_timeout"))
    kg = resolve_kg_setting(settings)
    config = EngineConfig.from_settings(settings)
    # Cheap checks first: a typo should not cost a model load.
    item_prior = check_run(kg, config, settings.get("prior") or None)
    out = Path(settings["out"])
    check_out_dir(out)
    model = load_model_setting(settings["model"], settings["cache"], settings["model_options"], settings["device"],
                               settings["workers"], settings["ray_address"])
    # The device asked for (auto, cpu, cuda:N) is recorded, so `kgprobe resume` places the model alike.
    # The worker count too (not the cluster address, which rarely outlives a run); the
    # answers are the same on any number of workers.
    try:
        run = start_run(kg, config, model, spec=settings["model"], store=out,
                        model_options=settings["model_options"], device=settings["device"], item_prior=item_prior,
                        meta={"workers": str(settings["workers"])} if settings["workers"] is not None else None)
    except BaseException:
        model.close()
        raise
    return play(run, {**settings, "output": getattr(args, "output", None)})
