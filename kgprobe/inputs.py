"""Resolving what a user names: a KG, a model, a run file, a new run file's path.

The Python API (:mod:`kgprobe.api`) and the command line both go through these, so a
name means the same in both.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from kgprobe.errors import InputError
from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.models.base import LanguageModel

#: File suffix of run stores created in a directory.
RUN_SUFFIX = ".kgrun"
#: The path of a run kept in memory (``store=None``).
MEMORY = ":memory:"


def resolve_kg(kg: KnowledgeGraph | str | os.PathLike) -> KnowledgeGraph:
    """A KnowledgeGraph, a KG file path, or the name of an embedded KG."""
    if isinstance(kg, KnowledgeGraph):
        return kg
    if isinstance(kg, (str, os.PathLike)):
        text = str(kg)
        if os.path.exists(text):
            from kgprobe.kg.formats import load_kg

            return load_kg(text)
        from kgprobe.sources.embedded import EMBEDDED_KGS, load_embedded_kg

        if text in EMBEDDED_KGS:
            return load_embedded_kg(text)
        raise InputError(
            f"KG {text!r} is neither an existing file nor an embedded KG ({', '.join(EMBEDDED_KGS)})"
        )
    raise InputError(f"kg must be a KnowledgeGraph, a file path or an embedded KG name, not {type(kg).__name__}")


def resolve_model(model: LanguageModel | str, options: dict | None = None) -> tuple[LanguageModel, str]:
    """``(model, spec)``: a LanguageModel as is, or a spec string loaded through the registry.

    ``options`` are keyword arguments for the backend (e.g. ``base_urls`` for several
    OpenAI-compatible servers, ``tensor_parallel_size`` for vLLM).
    """
    if isinstance(model, LanguageModel):
        return model, ""
    if isinstance(model, str):
        from kgprobe.models.registry import load_model

        try:
            return load_model(model, **(options or {})), model
        except TypeError as exc:
            raise InputError(f"model {model!r} does not take these options {sorted(options or {})}: {exc}") from None
    raise InputError(f"model must be a LanguageModel or a model spec string, not {type(model).__name__}")


def new_run_path(directory: str | os.PathLike, kg_name: str, method: str) -> Path:
    """A fresh, unique run file name in ``directory``: ``<UTC time>-<kg>-<method>-<random>.kgrun``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in f"{kg_name or 'kg'}-{method}")
    return Path(directory) / f"{stamp}-{safe}-{secrets.token_hex(3)}{RUN_SUFFIX}"


def convergence_settings(convergence) -> dict:
    """The run settings of the API's one ``convergence`` argument (see :func:`kgprobe.probe`)."""
    if convergence is None or convergence is True:
        return {}
    if convergence is False:
        return {"stop_on_convergence": False}
    if isinstance(convergence, dict):
        allowed = {"window", "tolerance", "stop"}
        bad = set(convergence) - allowed
        if bad:
            raise InputError(f"unknown convergence setting(s) {sorted(bad)}; use window, tolerance, stop")
        out = {}
        if "window" in convergence:
            out["convergence_window"] = convergence["window"]
        if "tolerance" in convergence:
            out["convergence_tolerance"] = convergence["tolerance"]
        if "stop" in convergence:
            out["stop_on_convergence"] = bool(convergence["stop"])
        return out
    if isinstance(convergence, (tuple, list)) and len(convergence) == 2:
        return {"convergence_window": convergence[0], "convergence_tolerance": convergence[1]}
    raise InputError("convergence must be True, False, (window, tolerance) or a dict with window/tolerance/stop")


def find_run(ref: str | os.PathLike, runs_dir: str | os.PathLike = "runs") -> str:
    """A run file path from a path or a run name (looked up in ``runs_dir``)."""
    if str(ref) == MEMORY:
        raise InputError(
            "':memory:' is not a run file: an in-memory run lives only in the Run object that made it. "
            "Keep playing it with run.rounds() / run.finish(), or save it with run.save('my-run.kgrun') "
            "and resume that file"
        )
    p = Path(ref)
    if p.is_file():
        return str(p)
    for candidate in (Path(runs_dir) / p.name, Path(runs_dir) / (p.name + RUN_SUFFIX)):
        if candidate.is_file():
            return str(candidate)
    raise InputError(f"no run file {str(ref)!r} (looked in {runs_dir}/ too); pass the path printed by `kgprobe run`")
