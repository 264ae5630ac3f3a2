"""``kgprobe run``: probe a model on a KG within a query budget, with a live view.

With no arguments: the embedded countries KG, the default model (SmolLM2-135M), the
zero-prompt many-shot method and a budget that finishes in a few minutes on 2 CPU cores.
Every option can also come from ``--config FILE.toml`` (keys are the option names with
``_`` or ``-``; the command line wins). The defaults are those of the Python API
(kgprobe/settings.py), and every option of the probe and sampler is recorded in the
run's protocol. The run is saved to ``--out`` (default ``runs/``) after every round;
Ctrl-C or SIGTERM stops after saving and ``kgprobe resume RUN`` continues. ``--output
FILE.json`` also writes the report data, protocol included.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tomllib
from pathlib import Path

from kgprobe.commands.options import RenamedOption, add_device_option
from kgprobe.errors import InputError

from kgprobe.settings import METHOD_DEFAULTS, RUN_DEFAULTS

#: The settings ``kgprobe run`` uses when neither the command line nor a config file
#: sets them: the one set of defaults in :mod:`kgprobe.settings`, shared with the API.
DEFAULTS = RUN_DEFAULTS
#: Probe settings per method beyond the probe classes' own defaults (see kgprobe.settings).
DEFAULT_PROBE_OPTIONS = METHOD_DEFAULTS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="probe a model on a KG within a query budget (default: embedded countries KG, default model)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    S = argparse.SUPPRESS  # unset options stay absent so a config file can supply them
    src = p.add_argument_group("knowledge graph")
    src.add_argument("--kg", default=S, help="a KG file or an embedded KG name (default: countries)")
    src.add_argument("--endpoint", default=S, help="build the KG from this SPARQL endpoint URL first")
    src.add_argument("--seed-entities", dest="seed_entities", nargs="+", default=S, metavar="ENTITY",
                     help="seed entities (QIDs or labels) for --endpoint")
    src.add_argument("--seeds", dest="seed_entities", nargs="+", default=S, action=RenamedOption,
                     new_name="--seed-entities")
    src.add_argument("--hops", type=int, default=S, help="random-walk hops for --endpoint (default 2)")
    m = p.add_argument_group("model and method")
    m.add_argument("--model", default=S,
                   help="default | a registry name | a hub id (HuggingFaceTB/SmolLM2-135M) | a local directory | "
                   "hf:ID | vllm:MODEL | openai:MODEL@BASE_URL (default: default, SmolLM2-135M-Instruct "
                   "(GGUF Q4_1, dequantized))")
    m.add_argument("--model-option", action="append", default=S, metavar="KEY=VALUE",
                   help='a backend setting (JSON values; repeatable), e.g. base_urls=\'["http://a:8000/v1", '
                   '"http://b:8000/v1"]\' or tensor_parallel_size=2')
    add_device_option(m)
    m.add_argument("--method", default=S, help="probe method: zp-lke, hgp, yes-no, wh, easy, hard, … (default zp-lke)")
    m.add_argument("--probe-option", action="append", default=S, metavar="KEY=VALUE",
                   help="a probe setting, e.g. num_examples=20 (JSON values; repeatable)")
    m.add_argument("--cache", default=S, metavar="FILE", help="SQLite response cache shared across runs")
    add_round_timeout_option(m, S)
    s = p.add_argument_group("sampling and stopping")
    s.add_argument("--sampler", default=S, help="focus, thompson, kglens-thompson, epsilon-greedy, uniform, brute-force, … (default focus)")
    s.add_argument("--sampler-option", action="append", default=S, metavar="KEY=VALUE", help="a sampler setting")
    s.add_argument("--design-fraction", dest="audit_fraction", type=float, default=S, metavar="SHARE",
                   help="share of each batch drawn by the known-probability design the unbiased estimates rest on "
                        "(default 1: every probe; lower it to give the sampler's own choices more, at the price "
                        "of wider intervals)")
    s.add_argument("--audit-fraction", dest="audit_fraction", type=float, default=S, action=RenamedOption,
                   new_name="--design-fraction")
    s.add_argument("--design", default=S, choices=("uniform", "stratified", "adaptive"),
                   help="how design probes are drawn: adaptive (default) leans towards edges predicted wrong or "
                        "uncertain, stratified keeps uniform probabilities, both give every predicate and subject "
                        "group design probes; uniform is a simple random sample (see docs/design.md)")
    s.add_argument("--prior", nargs="+", default=S, metavar="RUN_OR_SWEEP",
                   help="run files or recorded sweeps of other models on the same KG: an item-response "
                        "model of edge difficulty fitted from them starts the PKG, the estimates and the design")
    s.add_argument("--prior-design", type=float, default=S, metavar="SHARE",
                   help="with --prior: share (0-1) of the design probabilities that follows the prior's "
                        "predicted spread, drawing edges it leaves uncertain more often (default 0.5; 0: uniform)")
    s.add_argument("--design-tilt", type=float, default=S,
                   help="share (0-1) of the design probabilities leaning towards edges predicted wrong "
                        "(default 0: uniform, so runs with the same seed compare paired)")
    s.add_argument("--budget", type=int, default=S, help="model queries to spend (default 256)")
    s.add_argument("--batch-size", type=int, default=S, help="edges per round (default 32)")
    s.add_argument("--max-rounds", type=int, default=S, help="stop after this many rounds")
    s.add_argument("--seed", type=int, default=S,
                   help="random seed of the whole run (default 0); not --seed-entities")
    s.add_argument("--propagation-weight", type=float, default=S,
                   help="one-hop propagation weight w (default 1, as KGLens; 0 turns propagation off)")
    s.add_argument("--convergence-window", type=int, default=S, help="rounds in the convergence window (default 5)")
    s.add_argument("--convergence-tolerance", type=float, default=S, help="convergence tolerance (default 0.01)")
    s.add_argument("--no-convergence-stop", dest="stop_on_convergence", action="store_false", default=S,
                   help="keep going after the metrics converge")
    o = p.add_argument_group("output")
    o.add_argument("--config", help="TOML file with any of these settings")
    o.add_argument("--out", default=S, help="directory for the run file (default runs/)")
    o.add_argument("--output", metavar="PATH", help="also write the JSON report (with the protocol) to PATH")
    o.add_argument("--no-report", dest="report", action="store_false", default=S,
                   help="do not write the Markdown/HTML report at the end")
    o.add_argument("--quiet", action="store_true", default=S, help="no progress output")
    o.add_argument("--plain", action="store_true", default=S, help="line-by-line progress even on a terminal")
    p.set_defaults(func=handle)


def add_round_timeout_option(group, default=None) -> None:
    """``--round-timeout``: the deadline of one round's requests to an HTTP backend."""
    group.add_argument("--round-timeout", type=float, default=default, metavar="SECONDS",
                       help="HTTP backends (openai:): give up a round after this many seconds; its answered "
                       "requests are kept for the resume (default: no limit beyond per-request timeouts)")


def with_round_timeout(options: dict, round_timeout) -> dict:
    """Model options with ``round_timeout`` set when one is given."""
    if round_timeout is None:
        return options
    if isinstance(round_timeout, bool) or not isinstance(round_timeout, (int, float)) or not round_timeout > 0:
        raise InputError(f"--round-timeout must be a number of seconds > 0, not {round_timeout!r}")
    return {**options, "round_timeout": float(round_timeout)}


def _parse_kv(items: list[str], what: str) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise InputError(f"{what} {item!r} is not KEY=VALUE")
        key, value = item.split("=", 1)
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def load_config_file(path: str) -> dict:
    """Settings from a TOML file, keys normalised to ``snake_case``; unknown keys are errors."""
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"config file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise InputError(f"cannot read config file {path}: {exc.strerror}") from None
    from kgprobe.config_schema import check_settings

    cfg = {k.replace("-", "_"): v for k, v in raw.items()}
    check_settings(cfg, f"config file {path}", known=DEFAULTS)
    if "seeds" in cfg and "seed_entities" not in cfg:
        print(f"kgprobe: warning: config file {path}: 'seeds' is now 'seed_entities'; the old name still works for now",
              file=sys.stderr)
        cfg["seed_entities"] = cfg.pop("seeds")
    return cfg


def settings_from_args(args: argparse.Namespace) -> dict:
    """Defaults, overridden by the config file, overridden by the command line (key by key
    for probe, sampler and model options); resolved in :mod:`kgprobe.settings`."""
    from kgprobe.settings import resolve_run_settings

    layers = []
    if getattr(args, "config", None):
        layers.append((f"config file {args.config}", load_config_file(args.config)))
    given = {k: v for k, v in vars(args).items()
             if k not in ("func", "command", "config", "output") and not k.startswith("_")}
    options = []
    for flag, key in (("probe_option", "probe_options"), ("model_option", "model_options"),
                      ("sampler_option", "sampler_options")):
        if flag in given:
            name = "--" + flag.replace("_", "-")
            options.append((name, {key: _parse_kv(given.pop(flag), name)}))
    settings = resolve_run_settings(*layers, ("the command line", given), *options)
    from kgprobe.models.devices import check_device_spec

    settings["device"] = check_device_spec(settings["device"])
    return settings


def resolve_kg_setting(settings: dict):
    if settings.get("endpoint"):
        if not settings.get("seed_entities"):
            raise InputError("--endpoint needs --seed-entities (QIDs or labels of the entities to start from)")
        from kgprobe.kg.build import build_kg

        return build_kg(settings["endpoint"], settings["seed_entities"], hops=settings["hops"])
    from kgprobe.api import resolve_kg

    return resolve_kg(settings["kg"])


def load_model_setting(spec: str, cache: str | None, options: dict | None = None, device: str | None = None):
    """The model of a run; ``device`` (``--device``) places local backends."""
    from kgprobe.api import resolve_model

    if not str(spec).startswith("openai:"):  # an HTTP backend loads no weights: skip importing transformers
        _quiet_model_loading()
    model, _ = resolve_model(spec, {**(options or {}), **({"device": device} if device else {})})
    if cache:
        from kgprobe.models.cache import CachedModel

        model = CachedModel(model, cache)
    return model


def prepare_process_for_models() -> None:
    """Process settings for local model backends; call before torch is imported.

    OpenMP threads that wait by spinning (libgomp's default) collapse when the cores
    are shared: measured on this project's 2 shared cores, one round of the default run
    took ~220 s with spinning threads and ~30 s with ``OMP_WAIT_POLICY=PASSIVE``; on
    dedicated cores passive waiting costs next to nothing. A value set by the user wins.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _quiet_model_loading() -> None:
    """No per-file download/loading progress bars: they would garble the live view and logs."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # transformers is optional for API-only backends
        pass


def handle(args: argparse.Namespace) -> int:
    from kgprobe.api import _check_names, _open_new_store, check_model
    from kgprobe.engine import Engine
    from kgprobe.settings import engine_config

    prepare_process_for_models()
    # Types, ranges and unknown keys are checked while resolving, before a run file exists.
    settings = settings_from_args(args)
    settings["model_options"] = with_round_timeout(settings["model_options"], settings.pop("round_timeout"))
    kg = resolve_kg_setting(settings)
    config = engine_config(settings)
    # Cheap checks first: a typo should not cost a model load.
    config.validate(kg)
    _check_names(config)
    from kgprobe.api import fit_item_prior

    item_prior = fit_item_prior(kg, settings.get("prior") or None)
    out = Path(settings["out"])
    _check_out_dir(out)
    model = load_model_setting(settings["model"], settings["cache"], settings["model_options"], settings["device"])
    check_model(config, model)
    store = _open_new_store(out, kg, config, model, settings["model"])
    if settings["model_options"]:
        store.set_meta("model_options", json.dumps(settings["model_options"], sort_keys=True))
    if item_prior is not None:
        store.set_meta("item_prior", item_prior.to_json())
    # The device asked for (auto, cpu, cuda:N), so `kgprobe resume` places the model alike.
    store.set_meta("device", settings["device"])
    try:
        engine = Engine.from_config(kg, model, config, store)
    except BaseException:
        store.close()
        raise
    return play(engine, store, {**settings, "output": getattr(args, "output", None)})


def _check_out_dir(out: Path) -> None:
    from kgprobe.errors import StoreError

    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the output directory {out}: {exc.strerror}; choose another --out") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise StoreError(f"the output directory {out} is not writable; choose another --out")


def _short_warnings() -> None:
    """Warnings (e.g. a predicate with too few distractors) as one line, without source lines."""
    import warnings

    warnings.formatwarning = lambda message, category, *args, **kwargs: f"kgprobe: warning: {message}\n"


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (``kill``, a job scheduler's stop) ends a run like Ctrl-C: the current round
    is undone or kept as the engine decides on KeyboardInterrupt, the run is marked
    interrupted and stays resumable. Only in the main thread, where signals arrive."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def play(engine, store, settings: dict) -> int:
    """Run the engine under the live view; print the outcome; write the report. Exit code."""
    _short_warnings()
    from kgprobe.api import Run
    from kgprobe.live import progress_view

    run = Run(store, engine)
    try:
        with sigterm_as_interrupt():
            with progress_view(run, quiet=settings.get("quiet", False), plain=settings.get("plain", False)) as view:
                run.subscribe(view)
                run.finish()
    except KeyboardInterrupt:
        # Plain print: a wrapped path could not be copied into the resume command.
        print(f"kgprobe: interrupted after round {store.last_round()}; everything up to it is saved in "
              f"{store.path}\n  continue with: kgprobe resume {store.path}", file=sys.stderr)
        run.close()
        return 130
    try:
        store.check_still_there()  # never "run: PATH" for a file that is gone
        print_outcome(run, quiet=settings.get("quiet", False))
        if settings.get("report", True):
            from kgprobe.report import write_report

            try:
                paths = write_report(run)
            except OSError as exc:
                from kgprobe.errors import StoreError

                raise StoreError(f"the run is saved in {store.path}, but its report could not be written: "
                                 f"{exc.strerror or exc}; free space or fix permissions, then "
                                 f"`kgprobe report {store.path}`") from None
            print(f"report: {paths['html']} and {paths['markdown']}")
        if settings.get("output"):
            from kgprobe.commands.report import write_output
            from kgprobe.report import report_data

            write_output(settings["output"], json.dumps(report_data(run), indent=1, default=str))
            print(f"report data: {settings['output']}")
        print(f"run: {store.path}")
    finally:
        run.close()
    return 0


def print_outcome(run, *, quiet: bool = False) -> None:
    """The run's results on stdout: a short table (or one line when quiet)."""
    from rich.console import Console
    from rich.table import Table

    m = run.metrics
    est = run.accuracy_estimate()
    est_txt = f"{est.estimate:.1%} [{est.low:.1%}, {est.high:.1%}] (n={est.n})" if est.n else "n/a (no design probes)"
    if quiet:
        print(f"win {m.win_rate:.1%}  zero-sense {m.zero_sense_rate:.1%}  all-sense {m.all_sense_rate:.1%}  "
              f"over {m.probed_edges} probed edges; KG accuracy {est_txt}")
        return
    out = Console(highlight=False, soft_wrap=False)
    out.print(f"{run.model_name} on {run.kg.name}: {run.rounds_played} rounds, {run.queries_spent} queries, "
              f"stopped by {run.stop_reason}", markup=False, soft_wrap=True)
    t = Table()
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("win rate", f"{m.win_rate:.1%}")
    t.add_row("zero-sense rate", f"{m.zero_sense_rate:.1%}")
    t.add_row("all-sense rate", f"{m.all_sense_rate:.1%}")
    t.add_row("probed edges", str(m.probed_edges))
    t.add_row("KG accuracy (unbiased, 95% CI)", est_txt)
    out.print(t)
    from kgprobe.ranking import weakest_first

    weak = weakest_first(run.by_predicate.items())[:5]
    if weak:
        w = Table(title="weakest predicates (lowest win rate)", title_justify="left")
        w.add_column("predicate")
        w.add_column("win", justify="right")
        w.add_column("zero-sense", justify="right")
        w.add_column("probed", justify="right")
        for name, pm in weak:
            w.add_row(name, f"{pm.win_rate:.0%}", f"{pm.zero_sense_rate:.0%}", str(pm.probed_edges))
        out.print(w)
