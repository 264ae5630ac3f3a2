"""The public Python API: budgeted probing of a model on a knowledge graph.

>>> import kgprobe
>>> run = kgprobe.probe("countries", "default", method="zp-lke", budget=256, seed=0)
>>> run.metrics.zero_sense_rate, run.accuracy_estimate()
>>> for edge in run.weakest(5): print(edge)

Iterate rounds and stop early (the run stays resumable):

>>> run = kgprobe.probe("countries", "default", budget=2048, lazy=True, store="runs/")
>>> for summary in run.rounds():
...     if summary.metrics.win_rate > 0.5:
...         break
>>> run = kgprobe.resume(run.path, "default")   # later, or after a crash

The names exported from ``kgprobe`` are :func:`probe`, :func:`resume`, :func:`open_run`
and :class:`Run`.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Iterable

from kgprobe import run_spec
from kgprobe.engine import Engine, EngineConfig, Listener
from kgprobe.errors import DamagedFileError, InputError
from kgprobe.inputs import (  # noqa: F401  (re-exported: the API's names from one place)
    MEMORY,
    RUN_SUFFIX,
    convergence_settings,
    find_run,
    new_run_path,
    resolve_kg,
    resolve_model,
)
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import LanguageModel
from kgprobe.runs import ProbeAnswer, Run, WeakEdge  # noqa: F401  (re-exported)
from kgprobe.start import check_model, check_run, fit_item_prior, start_run  # noqa: F401  (re-exported)
from kgprobe.store import RunStore, kg_fingerprint

# -- entry points ------------------------------------------------------------------------
class _Default:
    """Marks an argument left at kgprobe's default (see :mod:`kgprobe.settings`)."""

    def __repr__(self) -> str:
        return "DEFAULT"


#: The value of every :func:`probe` argument that was not given: the setting then comes
#: from :data:`kgprobe.settings.RUN_DEFAULTS`, exactly as for ``kgprobe run``.
DEFAULT: Any = _Default()


def probe(
    kg: KnowledgeGraph | str | os.PathLike = DEFAULT,
    model: LanguageModel | str = DEFAULT,
    method: str = DEFAULT,
    *,
    budget: int | None = DEFAULT,
    batch_size: int = DEFAULT,
    max_rounds: int | None = DEFAULT,
    sampler: str = DEFAULT,
    seed: int = DEFAULT,
    convergence: bool | tuple | dict | None = True,
    propagation_weight: float = DEFAULT,
    probe_options: dict | None = None,
    sampler_options: dict | None = None,
    model_options: dict | None = None,
    audit_fraction: float | None = DEFAULT,  # design_fraction's older name, kept for existing scripts (warns)
    store: str | os.PathLike | RunStore | None = DEFAULT,
    report: bool = True,
    progress: bool = True,
    lazy: bool = False,
    listeners: Iterable[Listener] = (),
    prior: str | os.PathLike | Iterable[str | os.PathLike] | None = None,
    design_tilt: float = DEFAULT,
    prior_design: float = DEFAULT,
    device: str = DEFAULT,
    design: str = DEFAULT,
    lean_target: float | None = DEFAULT,
    design_fraction: float | None = DEFAULT,
    workers: int | None = DEFAULT,
    ray_address: str | None = DEFAULT,
) -> "Run":
    """Probe ``model`` on ``kg`` with an adaptive sampler, within ``budget`` model queries.

    Every argument left out takes the value ``kgprobe run`` uses when its option is left
    out (:data:`kgprobe.settings.RUN_DEFAULTS`): the embedded countries KG, the default
    model, ZP-LKE with 20 examples and 19 distractors, the ``focus`` sampler with every
    probe a design draw, budget 256 queries, batch 32, seed 0, saved under ``runs/`` and
    reported there. So ``kgprobe.probe()`` and ``kgprobe run`` measure the same thing.

    Parameters
    ----------
{run settings}
    convergence:
        True (default window 5, tolerance 0.01), False (never stop on convergence),
        ``(window, tolerance)`` or ``{"window":…, "tolerance":…, "stop": bool}``.
    store:
        Left out: a new run file under ``runs/``. A path ending in ``.kgrun`` (that run
        file is created), any other path (a directory that gets a new uniquely named run
        file), ``None`` or ``":memory:"`` (in memory; keep it with :meth:`Run.save`), or
        an open :class:`RunStore`.
    progress:
        Show progress while playing: a live panel in a terminal, a progress bar in
        Jupyter, a line per round (and at least every 10 s) otherwise; False: silent.
    lazy:
        Return before playing any round; iterate :meth:`Run.rounds` yourself.
    listeners:
        Callables receiving every engine event.
    audit_fraction:
        The old name of ``design_fraction``; it still works, with a DeprecationWarning.
    """
    from kgprobe.models.devices import check_device_spec

    if audit_fraction is not DEFAULT:
        warnings.warn("kgprobe.probe(audit_fraction=...) is now design_fraction=...; the old name still works "
                      "for now", DeprecationWarning, stacklevel=2)
        if design_fraction is DEFAULT:
            design_fraction = audit_fraction
    settings = probe_settings(kg=kg, method=method, budget=budget, batch_size=batch_size, max_rounds=max_rounds,
                              sampler=sampler, seed=seed, convergence=convergence,
                              propagation_weight=propagation_weight, probe_options=probe_options,
                              sampler_options=sampler_options, design_fraction=design_fraction,
                              design_tilt=design_tilt, prior_design=prior_design, design=design,
                              lean_target=lean_target, device=device,
                              workers=workers, ray_address=ray_address)
    model_options = dict(model_options or {})
    device_given = device is not DEFAULT or "device" in model_options
    if "device" in model_options:  # the same setting as ``device``, recorded alike
        if device is not DEFAULT and device != model_options["device"]:
            raise InputError(f"device={device!r} and model_options['device']={model_options['device']!r} "
                             "disagree; give the device once")
        settings["device"] = model_options.pop("device")
    settings["device"] = check_device_spec(settings["device"])
    kg_obj = resolve_kg(settings["kg"])
    config = EngineConfig.from_settings(settings)
    item_prior = check_run(kg_obj, config, prior)
    if model is DEFAULT:
        model = settings["model"]
    model_obj, spec = resolve_model(model, {**model_options, **({"device": settings["device"]} if device_given else {})},
                                    workers=settings["workers"], ray_address=settings["ray_address"])
    by_spec = isinstance(model, str)
    owned = model_obj if settings["workers"] is not None or settings["ray_address"] else None
    try:
        run = start_run(kg_obj, config, model_obj, spec=spec, store=settings["out"] if store is DEFAULT else store,
                        model_options=model_options if by_spec else None,
                        device=settings["device"] if by_spec else None, item_prior=item_prior,
                        meta={"workers": str(settings["workers"])} if settings["workers"] is not None else None)
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    run.owned_model = owned
    for listener in listeners:
        run.subscribe(listener)
    if not lazy:
        _play_to_the_end(run, progress)
        if report and run.path != MEMORY:
            from kgprobe.report import write_report

            run.report_paths = write_report(run)
    return run


probe.__doc__ = probe.__doc__.replace("{run settings}", run_spec.api_doc())


def probe_settings(**kwargs) -> dict:
    """The resolved settings of :func:`probe` for these arguments (those left at
    :data:`DEFAULT` come from :data:`kgprobe.settings.RUN_DEFAULTS`), as ``kgprobe run``
    resolves its options: through :func:`kgprobe.settings.resolve_run_settings`."""
    from kgprobe.settings import resolve_run_settings

    convergence = kwargs.pop("convergence", True)
    given = {k: v for k, v in kwargs.items()
             if v is not DEFAULT and not (k.endswith("_options") and v is None)}
    given.update(convergence_settings(convergence))
    kg = given.get("kg")
    if isinstance(kg, os.PathLike):
        given["kg"] = str(kg)
    elif kg is not None and not isinstance(kg, str):
        given.pop("kg")  # a KnowledgeGraph object: nothing to check or merge
    settings = resolve_run_settings(("kgprobe.probe()", given))
    if kg is not None and not isinstance(kg, (str, os.PathLike)):
        settings["kg"] = kg
    return settings


def open_run(path: str | os.PathLike) -> Run:
    """A finished or interrupted run, read-only (reports, comparisons)."""
    return Run(RunStore.open(find_run(path), writable=False))


def _repair_or_refuse(store: RunStore) -> None:
    """Verify a run file before resuming it; drop a damaged last round (saying so), refuse worse."""
    result = store.verify()
    if result.ok:
        return
    if not result.only_last_round:
        store.require_intact()  # raises, naming the damage
    summary = result.summary()
    dropped = store.drop_last_round(result)
    warnings.warn(f"run file {store.path}: dropped {dropped}, which was damaged ({summary}); "
                  "it is played again", RuntimeWarning, stacklevel=3)


def resume(
    path: str | os.PathLike,
    model: LanguageModel | str | None = None,
    *,
    budget: int | None = None,
    max_rounds: int | None = None,
    lazy: bool = False,
    progress: bool = True,
    listeners: Iterable[Listener] = (),
    workers: int | None = None,
    ray_address: str | None = None,
) -> Run:
    """Continue a stopped, interrupted or killed run from its last committed round.

    ``model`` defaults to the spec the run was started with; a model whose identity
    differs from the recorded one is refused (the run would mix two models).
    ``budget`` / ``max_rounds`` raise the run's limits, e.g. to extend a finished run.
    ``workers`` / ``ray_address``: as in :func:`probe` (a model spec is then loaded in
    Ray actors); left out, a run started with workers goes on with as many local ones.
    """
    store = RunStore.open(find_run(path), writable=True)
    owned = None
    try:
        _repair_or_refuse(store)
        config = EngineConfig.from_dict(store.config)
        changed = False
        if budget is not None and budget != config.budget:
            config.budget, changed = budget, True
        if max_rounds is not None and max_rounds != config.max_rounds:
            config.max_rounds, changed = max_rounds, True
        if changed:
            config.validate(store.kg)
            store.set_meta("config", json.dumps(config.to_dict(), sort_keys=True))
        if model is None:
            if not store.model_spec:
                raise InputError(
                    f"run {store.path} was started with a model object, not a spec; pass the model to resume()"
                )
            model = store.model_spec
        options = None
        if isinstance(model, str):
            # The model loads as it was: its options, and on the device the run recorded.
            options = json.loads(store.meta("model_options") or "{}")
            if store.meta("device"):
                options["device"] = store.meta("device")
        if workers is None and isinstance(model, str):
            workers = int(store.meta("workers") or 0) or None
        if workers is not None or ray_address:
            run_spec.check_settings({"workers": workers, "ray_address": ray_address}, "resume()")
        model_obj, _ = resolve_model(model, options, workers=workers, ray_address=ray_address)
        owned = model_obj if isinstance(model, str) and (workers is not None or ray_address) else None
        if model_obj.identity != store.model_identity:
            raise InputError(
                f"run {store.path} was made with model {store.model_identity!r}, not {model_obj.identity!r}; "
                "resume it with the same model"
            )
        kg = store.kg
        if kg_fingerprint(kg) != store.meta("kg_fingerprint"):
            raise DamagedFileError(f"run file {store.path} is damaged: its KG does not match its fingerprint")
        engine = Engine.from_config(kg, model_obj, config, store)
    except BaseException:
        store.close()
        if owned is not None:
            owned.close()
        raise
    run = Run(store, engine)
    run.owned_model = owned
    for listener in listeners:
        run.subscribe(listener)
    if run.nothing_left:
        return run
    if not lazy:
        _play_to_the_end(run, progress)
    return run


def _play_to_the_end(run: Run, progress: bool) -> None:
    """Play ``run``'s remaining rounds and stop the Ray workers it started."""
    try:
        run.finish(progress=progress)
    except BaseException:
        # The run file stays resumable; release it (and its lock) for `resume`.
        run.close()
        raise
    run.release_workers()
