"""Starting a new run: the one sequence :func:`kgprobe.probe`, ``kgprobe run`` and
``kgprobe sweep`` share.

1. :func:`check_run`: every check that needs no model (settings against the KG, method and
   sampler names and options, the prior's references), because loading a model takes
   seconds and a typo should not cost them;
2. the caller loads the model (the API as given, the command line quietly and through its
   response cache);
3. :func:`start_run`: the model against the method, then the run file with its protocol
   and the settings a resume needs (model options, device, prior), then the engine.

A run file is only created in step 3, after everything that can be checked has been; if
the engine cannot be set up, the file is removed again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

from kgprobe.engine import Engine, EngineConfig, check_compatible
from kgprobe.inputs import MEMORY, RUN_SUFFIX, new_run_path
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import LanguageModel
from kgprobe.runs import Run
from kgprobe.store import RunStore


def check_names(config: EngineConfig) -> None:
    """Fail on an unknown method or sampler, or options they refuse, before a model is loaded."""
    from kgprobe.probes import make_probe
    from kgprobe.sampling import make_sampler

    make_probe(config.method, **config.probe_options)
    make_sampler(config.sampler, **config.sampler_options)


def fit_item_prior(kg: KnowledgeGraph, prior, config: EngineConfig | None = None):
    """The :class:`kgprobe.prior.ItemPrior` from ``prior`` references (None when there are none).

    With the run's ``config``, sources recorded with another method or other probe options
    are warned about and noted in the prior (:mod:`kgprobe.prior_sources`)."""
    if prior is None:
        return None
    refs = [prior] if isinstance(prior, (str, os.PathLike)) else list(prior)
    if not refs:
        return None
    from kgprobe.prior_sources import prior_from_refs

    return prior_from_refs(kg, [str(r) for r in refs], method=None if config is None else config.method,
                           probe_options=None if config is None else config.probe_options)


def check_run(kg: KnowledgeGraph, config: EngineConfig, prior=None):
    """Every check of a new run that needs no model; returns the fitted item prior (or None)."""
    config.validate(kg)
    check_names(config)
    return fit_item_prior(kg, prior, config)


def check_model(config: EngineConfig, model: LanguageModel) -> None:
    """Refuse a scoring method on a model that cannot score, before a run file is created."""
    from kgprobe.probes import make_probe

    check_compatible(make_probe(config.method, **config.probe_options), model, config.method)


def open_new_store(store, kg: KnowledgeGraph, config: EngineConfig, model: LanguageModel, spec: str) -> RunStore:
    """A new run file (or in-memory store) holding the run's settings and protocol.

    ``store``: an open :class:`RunStore` (used as is), ``None`` or ``":memory:"``, a path
    ending in ``.kgrun`` (that file), or a directory (created if needed) that gets a new,
    uniquely named run file.
    """
    if isinstance(store, RunStore):
        return store
    if store is None or str(store) == MEMORY:
        path = MEMORY
    else:
        p = Path(store)
        path = str(p if p.suffix == RUN_SUFFIX else new_run_path(p, kg.name, config.method))
    from kgprobe.protocol import build_protocol

    protocol = build_protocol(config, kg, model, spec)
    run_store = RunStore.create(path, config=config.to_dict(), kg=kg, model_identity=model.identity,
                                model_spec=spec, model_name=protocol["model"]["label"])
    try:
        run_store.set_meta("protocol", json.dumps(protocol, sort_keys=True))
    except BaseException:
        run_store.discard()
        raise
    return run_store


def start_run(
    kg: KnowledgeGraph,
    config: EngineConfig,
    model: LanguageModel,
    *,
    spec: str,
    store,
    model_options: Mapping | None = None,
    device: str | None = None,
    item_prior=None,
    meta: Mapping[str, str] | None = None,
) -> Run:
    """A new run, ready to play: run file (see :func:`open_new_store`) and engine.

    ``spec`` is the model spec the run records (``""`` for a model object, which cannot
    be resumed by spec); ``model_options`` and ``device`` are recorded so a resume loads
    and places the model alike; ``item_prior`` (from :func:`check_run`) starts the PKG;
    ``meta``: further records of the caller (a sweep's identity).

    The run removes its file again when it fails before anything was recorded
    (:meth:`Run.rounds`), so a model that cannot answer leaves no empty run behind.
    """
    check_model(config, model)
    ours = not isinstance(store, RunStore)
    run_store = open_new_store(store, kg, config, model, spec)
    try:
        if model_options:
            run_store.set_meta("model_options", json.dumps(dict(model_options), sort_keys=True))
        if device:
            run_store.set_meta("device", device)
        if item_prior is not None:
            run_store.set_meta("item_prior", item_prior.to_json())
        for key, value in (meta or {}).items():
            run_store.set_meta(key, value)
        engine = Engine.from_config(kg, model, config, run_store)
    except BaseException:
        if ours:
            run_store.discard()
        else:
            run_store.close()
        raise
    run = Run(run_store, engine)
    run.discard_if_unplayed = ours
    return run
