"""One place that resolves the settings of a run, for the CLI, TOML configs and the API.

``kgprobe run``, ``kgprobe run --config FILE.toml`` and :func:`kgprobe.probe` all call
:func:`resolve_run_settings`: the defaults (:mod:`kgprobe.run_spec`), overridden by a config file, overridden
by the command line or the API's keyword arguments. So the command line and Python
resolve to the same protocol when neither says anything.

Probe and sampler options are merged *key by key* over the method's (or sampler's) full
set of defaults: ``--probe-option num_examples=10`` changes that one option and leaves
every other one at its default. Each value is checked against the option's type, so
``num_examples=abc`` is an error naming the option and the expected type instead of a
failure deep inside a round. The resolved options are complete: a run records every
option its probe and sampler were built with (see :mod:`kgprobe.protocol`).
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from typing import Any, Mapping

from kgprobe import run_spec
from kgprobe.errors import InputError

#: Settings of a run when neither a config file, the command line nor the API sets them
#: (one row each in :mod:`kgprobe.run_spec`, with the reasons for the values).
RUN_DEFAULTS: dict[str, Any] = run_spec.defaults()

#: Project defaults of probe options that differ from the probe class's own defaults.
#: ZP-LKE with 20 examples and 20 options (gold + 19) instead of the paper's 50 and 100
#: makes each fact's prompt several times shorter, which keeps the default run within
#: minutes on 2 CPU cores (`kgprobe bench throughput` measures the cost). HGP uses the same 19 distractors so that both
#: multiple-choice methods have the same chance level (5 %) by default. The paper's
#: protocol: ``--probe-option num_examples=50 --probe-option num_distractors=99
#: --probe-option examples=paper``. ZP-LKE's examples are balanced over the options so
#: that the context's object frequencies do not point at the answer (docs/baselines.md).
METHOD_DEFAULTS: dict[str, dict[str, Any]] = {
    "zp-lke": {"num_examples": 20, "num_distractors": 19, "examples": "balanced"},
    "zp-lke-gen": {"num_examples": 20, "examples": "balanced"},
    "hgp": {"num_distractors": 19},
}

#: Probe options added after runs and sweeps were first recorded, with the value a record
#: that lacks them was made with (the probe class's own default). Reading an older record
#: against today's defaults would otherwise claim a protocol it was not made with.
RECORDED_WITHOUT: dict[str, dict[str, Any]] = {
    "zp-lke": {"examples": "paper"},
    "zp-lke-gen": {"examples": "paper"},
}

#: Constructor parameters a probe takes from its method name, not from options.
_IMPLIED_BY_NAME = {"mode"}

_SCALARS = (bool, int, float, str, type(None))


def _hints(cls) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls.__init__)
    except Exception:  # an annotation that cannot be evaluated: fall back on defaults' types
        return {}


def _allowed_types(annotation) -> tuple[type, ...] | None:
    """The scalar types an annotation admits, or None when it is not a plain scalar type."""
    if annotation is inspect.Parameter.empty:
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        out: list[type] = []
        for arg in typing.get_args(annotation):
            inner = _allowed_types(arg)
            if inner is None:
                return None
            out.extend(inner)
        return tuple(out)
    if annotation in _SCALARS:
        return (annotation,)
    return None


def option_specs(cls) -> dict[str, tuple[Any, tuple[type, ...] | None]]:
    """``name -> (default, allowed types)`` of a class's keyword settings (``__init__``)."""
    hints = _hints(cls)
    specs = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or name.startswith("_") or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = param.default
        allowed = _allowed_types(hints.get(name, inspect.Parameter.empty))
        if allowed is None and default is not inspect.Parameter.empty and isinstance(default, _SCALARS) \
                and default is not None:
            allowed = (type(default),)
        specs[name] = (default, allowed)
    return specs


def probe_class(method: str):
    from kgprobe.probes import PROBES

    try:
        return PROBES[method]
    except KeyError:
        raise InputError(f"unknown probe method {method!r}; choose one of: {', '.join(PROBES)}") from None


def takes_design_fraction(sampler: str) -> bool:
    """Whether the sampler takes a ``design_fraction`` (a run hands it the setting only then)."""
    return "design_fraction" in option_specs(sampler_class(sampler))


def sampler_class(sampler: str):
    from kgprobe.sampling import SAMPLERS

    try:
        return SAMPLERS[sampler]
    except KeyError:
        raise InputError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}") from None


def _recordable(default, allowed) -> bool:
    """Options that take plain values (numbers, strings, flags) are recorded with their
    defaults; object-valued ones (an LLM question generator) only when given."""
    if default is inspect.Parameter.empty:
        return False
    return allowed is not None and isinstance(default, _SCALARS)


def probe_option_defaults(method: str) -> dict[str, Any]:
    """Every plain option of ``method`` at the value a run uses when none is given."""
    specs = option_specs(probe_class(method))
    out = {k: d for k, (d, allowed) in specs.items() if k not in _IMPLIED_BY_NAME and _recordable(d, allowed)}
    out.update(METHOD_DEFAULTS.get(method, {}))
    return out


def recorded_probe_options(method: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The full probe options of a record (run file, sweep) that stored ``options``:
    today's defaults, then what records lacking a newer option were made with
    (:data:`RECORDED_WITHOUT`), then the recorded values."""
    return {**probe_option_defaults(method), **RECORDED_WITHOUT.get(method, {}), **options}


def sampler_option_defaults(sampler: str) -> dict[str, Any]:
    """Every plain option of ``sampler`` at its default."""
    specs = option_specs(sampler_class(sampler))
    return {k: d for k, (d, allowed) in specs.items() if _recordable(d, allowed)}


def _type_name(allowed: tuple[type, ...]) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in allowed))


def check_option(what: str, key: str, value: Any, allowed: tuple[type, ...] | None) -> Any:
    """``value`` if it fits ``allowed`` (an int is accepted where a number is), else InputError."""
    if allowed is None:
        return value
    if isinstance(value, bool):
        ok = bool in allowed
    elif isinstance(value, int):
        ok = int in allowed or float in allowed
        if ok and int not in allowed:
            value = float(value)
    elif isinstance(value, float):
        ok = float in allowed and math.isfinite(value)
    else:
        ok = isinstance(value, allowed)
    if not ok:
        raise InputError(f"{what} {key}={value!r}: expected {_type_name(allowed)}")
    return value


def merge_options(kind: str, name: str, given: Mapping[str, Any] | None, *, source: str = "") -> dict[str, Any]:
    """The full options of probe method / sampler ``name``: its defaults, then ``given`` key by key.

    ``kind`` is ``"probe"`` or ``"sampler"``; ``source`` names where ``given`` came from
    for error messages (``--probe-option``, a config file, ``probe_options=``).
    """
    cls = probe_class(name) if kind == "probe" else sampler_class(name)
    specs = option_specs(cls)
    merged = probe_option_defaults(name) if kind == "probe" else sampler_option_defaults(name)
    what = source or f"{kind} option"
    for key, value in (given or {}).items():
        if key not in specs or (kind == "probe" and key in _IMPLIED_BY_NAME):
            known = sorted(k for k in specs if not (kind == "probe" and k in _IMPLIED_BY_NAME))
            raise InputError(f"{what}: {kind} {name!r} has no option {key!r}; its options: {', '.join(known) or 'none'}")
        merged[key] = check_option(what, key, value, specs[key][1])
    return merged


def resolve_run_settings(
    *layers: tuple[str, Mapping[str, Any] | None],
) -> dict[str, Any]:
    """:data:`RUN_DEFAULTS` overridden by each ``(source, settings)`` layer in turn.

    Option dictionaries (``probe_options``, ``sampler_options``, ``model_options``)
    merge key by key across layers; the probe's and sampler's options are then
    completed with their defaults and type-checked (:func:`merge_options`). Unknown
    setting names are errors naming the source.
    """
    settings = {k: (dict(v) if isinstance(v, dict) else v) for k, v in RUN_DEFAULTS.items()}
    origin = {"probe_options": "probe_options", "sampler_options": "sampler_options"}
    for source, layer in layers:
        if not layer:
            continue
        unknown = sorted(set(layer) - set(RUN_DEFAULTS))
        if unknown:
            raise InputError(f"{source}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(RUN_DEFAULTS))}")
        run_spec.check_settings(dict(layer), source)
        for key, value in layer.items():
            if key in ("probe_options", "sampler_options", "model_options"):
                if value is None:
                    continue
                if not isinstance(value, Mapping):
                    raise InputError(f"{source}: {key} must be a table of KEY = VALUE, got {value!r}")
                settings[key] = {**settings[key], **value}
                origin[key] = source if source.startswith("--") else f"{source} {key}"
            else:
                settings[key] = value
    settings["probe_options"] = merge_options("probe", settings["method"], settings["probe_options"],
                                              source=origin["probe_options"])
    from kgprobe.sampling import current_option_names

    sampler_given = current_option_names(settings["sampler_options"], warn=origin["sampler_options"])
    if settings["design_fraction"] is not None and "design_fraction" not in sampler_given \
            and takes_design_fraction(settings["sampler"]):
        sampler_given["design_fraction"] = settings["design_fraction"]
    settings["sampler_options"] = merge_options("sampler", settings["sampler"], sampler_given,
                                                source=origin["sampler_options"])
    return settings
