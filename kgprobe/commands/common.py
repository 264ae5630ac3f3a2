"""What the commands that play runs share: settings from flags and config files, loading
the model, the output directory, and playing a run under the live view."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tomllib
from pathlib import Path

from kgprobe import run_spec
from kgprobe.errors import InputError, StoreError
from kgprobe.inputs import resolve_kg, resolve_model
from kgprobe.runs import Run


def with_round_timeout(options: dict, round_timeout) -> dict:
    """Model options with ``round_timeout`` set when one is given."""
    if round_timeout is None:
        return options
    if isinstance(round_timeout, bool) or not isinstance(round_timeout, (int, float)) or not round_timeout > 0:
        raise InputError(f"--round-timeout must be a number of seconds > 0, not {round_timeout!r}")
    return {**options, "round_timeout": float(round_timeout)}


def parse_kv(items: list[str], what: str) -> dict:
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
    cfg = {k.replace("-", "_"): v for k, v in raw.items()}
    run_spec.check_settings(cfg, f"config file {path}")
    for old, new in run_spec.TOML_ALIASES.items():
        if old in cfg and new not in cfg:
            print(f"kgprobe: warning: config file {path}: {old!r} is now {new!r}; the old name still works for now",
                  file=sys.stderr)
            cfg[new] = cfg.pop(old)
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
    for setting in run_spec.SETTINGS:
        if setting.cli == "pairs" and setting.name in given:
            options.append((setting.flag_name, {setting.name: parse_kv(given.pop(setting.name), setting.flag_name)}))
    if "lang" in given:
        options.append(("--lang", {"probe_options": {"lang": given.pop("lang")}}))
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
    return resolve_kg(settings["kg"])


def load_model_setting(spec: str, cache: str | None, options: dict | None = None, device: str | None = None,
                       workers: int | None = None, ray_address: str | None = None, unit_calls: bool = False):
    """The model of a run; ``device`` (``--device``) places local backends; ``workers`` /
    ``ray_address`` spread it over Ray actors (:mod:`kgprobe.models.ray_workers`);
    ``unit_calls``: an in-process model asked one probe at a time
    (:class:`kgprobe.models.units.UnitCalls`, the answers Ray workers give)."""
    if not str(spec).startswith("openai:"):  # an HTTP backend loads no weights: skip importing transformers
        quiet_model_loading()
    model, _ = resolve_model(spec, {**(options or {}), **({"device": device} if device else {})},
                             workers=workers, ray_address=ray_address)
    if unit_calls and workers is None and not ray_address:
        from kgprobe.models.units import UnitCalls

        model = UnitCalls(model)
    if cache:
        from kgprobe.models.cache import CachedModel

        model = CachedModel(model, cache)
    return model


def prepare_process_for_models() -> None:
    """Process settings for local model backends; call before torch is imported.

    OpenMP threads that wait by spinning (libgomp's default) collapse when the cores
    are shared: each spinning thread takes a core another thread needs, and a round of
    the default run took several times longer than with ``OMP_WAIT_POLICY=PASSIVE``; on
    dedicated cores passive waiting costs next to nothing. A value set by the user wins.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def quiet_model_loading() -> None:
    """No per-file download/loading progress bars: they would garble the live view and logs."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # transformers is optional for API-only backends
        pass


def check_out_dir(out: Path) -> None:
    if out.suffix == ".kgrun" and not out.is_dir():
        # Checked before mkdir: a directory named like a run file would then block the run.
        raise InputError(f"--out {out} names a run file, but --out is the directory the run file is written to "
                         f"(its name is chosen for you); use --out {out.parent}, or `kgprobe resume {out}` "
                         "to continue an existing run")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the output directory {out}: {exc.strerror}; choose another --out") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise StoreError(f"the output directory {out} is not writable; choose another --out")


def short_warnings() -> None:
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


def play(run: Run, settings: dict) -> int:
    """Play ``run`` under the live view; print the outcome; write the report. Exit code.

    The model is closed at the end (Ray workers stopped, HTTP clients closed)."""
    try:
        return _play(run, settings)
    finally:
        if run.engine is not None:
            run.engine.model.close()


def _play(run: Run, settings: dict) -> int:
    short_warnings()
    from kgprobe.live import progress_view

    store = run.store
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
    from rich import box
    from rich.console import Console
    from rich.table import Table

    m = run.metrics
    estimates = run.estimates()  # computed once: the KG line and the predicates' column
    est = run.kg_accuracy(estimates)
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
    # The three rates describe the edges the sampler chose, not the KG: the rows say so.
    t.add_row("win rate (probed edges)", f"{m.win_rate:.1%}")
    t.add_row("zero-sense rate (probed edges)", f"{m.zero_sense_rate:.1%}")
    t.add_row("all-sense rate (probed edges)", f"{m.all_sense_rate:.1%}")
    t.add_row("probed edges", str(m.probed_edges))
    t.add_row("KG accuracy (unbiased, 95% CI)", est_txt)
    from kgprobe.baselines import baseline_text, dominated
    from kgprobe.report import by_label as keyed_by_label
    from kgprobe.report import run_baselines

    found = run_baselines(run)
    by_label = keyed_by_label(found.get("by_predicate"))
    t.add_row("no-knowledge baseline (chance / majority / null)", baseline_text(found.get("kg")))
    out.print(t)
    from kgprobe.estimators import MODEL, short_estimate
    from kgprobe.ranking import weakest_first

    weak = weakest_first(run.by_predicate.items())[:5]
    if weak:
        # Win and zero-sense describe the probed edges; the accuracy column estimates the
        # whole predicate (all its active edges), so it carries the interval.
        pred_est = keyed_by_label(estimates.get("by_predicate"))
        # No vertical rules and two-line headers: six columns fit an 80-column terminal.
        w = Table(title="weakest predicates (lowest win rate)", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
        w.add_column("predicate")
        for name in ("win", "zero-sense", "probed"):
            w.add_column(name, justify="right", no_wrap=True)
        w.add_column("accuracy\n(95% CI)", justify="right", no_wrap=True)
        w.add_column("chance /\nmajority / null", justify="right", no_wrap=True)
        for name, pm in weak:
            w.add_row(name, f"{pm.win_rate:.0%}", f"{pm.zero_sense_rate:.0%}", str(pm.probed_edges),
                      short_estimate(pred_est.get(name)), baseline_text(by_label.get(name), digits=0))
        out.print(w)
        if any((pred_est.get(name) or {}).get("basis") == MODEL for name, _ in weak):
            out.print("*: model-based, from the probed edges alone: it holds only if they represent the "
                      "predicate (docs/statistics.md)", markup=False, soft_wrap=True)
    probed = {pid: row for pid, row in (found.get("by_predicate") or {}).items() if row["label"] in run.by_predicate}
    for warning in dominated(probed):
        print(f"kgprobe: warning: {warning}", file=sys.stderr)
