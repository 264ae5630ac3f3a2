"""One place that resolves the settings of a run, for the CLI, TOML configs and the API.

``kgprobe run``, ``kgprobe run --config FILE.toml`` and :func:`kgprobe.probe` all call
:func:`resolve_run_settings`: the defaults below, overridden by a config file, overridden
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

from kgprobe.errors import InputError

if typing.TYPE_CHECKING:
    from kgprobe.engine import EngineConfig

#: Settings of a run when neither a config file, the command line nor the API sets them.
#: The budget is chosen so that the default run (embedded countries KG, default model,
#: ZP-LKE) finishes in a few minutes on 2 CPU cores; see the README.
RUN_DEFAULTS: dict[str, Any] = {
    "kg": "countries",
    "endpoint": None,
    "seed_entities": None,
    "hops": 2,
    "model": "default",
    "model_options": {},
    # auto: CUDA when present, else CPU (kgprobe.models.devices).
    "device": "auto",
    "method": "zp-lke",
    # The best sampler on the recorded real answers (kgprobe/sweeps, `kgprobe bench efficiency
    # --truth`): focus with propagation weight 1 needed 0.294 of brute force's queries on the
    # default model's 500-edge sweep (thompson 0.300, focus without propagation 0.403) and has
    # the lowest mean over the three committed real sweeps (0.280; thompson 0.401); see the
    # README, "Samplers on real answers". With the default audit fraction of 1 every probe
    # is a design draw, so the choice matters once --audit-fraction is below 1 (the
    # propagation weight also shapes the PKG's predictions the estimators use).
    "sampler": "focus",
    "budget": 256,
    "batch_size": 32,
    "max_rounds": None,
    "seed": 0,
    "propagation_weight": 1.0,  # KGLens' one-hop update (see the sampler comment above)
    "convergence_window": 5,
    "convergence_tolerance": 0.01,
    "stop_on_convergence": True,
    # Share of each batch drawn by the design with known inclusion probabilities
    # (kgprobe.sampling.audit): all of it. At the default budget of 256 queries no smaller
    # share gives a 95 % interval of about ±6 points on the KG accuracy (a design-unbiased
    # estimate's variance is about residual variance / design probes; see the README's
    # replay table). A smaller share gives the sampler's own choices more of the budget
    # at the price of a wider interval.
    "audit_fraction": 1.0,
    # Share (0-1) of the design probabilities leaning towards edges predicted wrong; 0
    # keeps the design uniform, so runs with the same seed share design edges (paired).
    "design_tilt": 0.0,
    # In a run with --prior: share (0-1) of the design probabilities that follows the
    # prior's predicted outcome spread (kgprobe.sampling.audit.prior_design_weights): edges
    # every earlier model got right, or wrong, are drawn less. Fixed by the prior alone, so
    # runs with the same prior and seed still share design edges. Half: on replays it is
    # what lets a sharp prior beat the uniform design, at no measured cost with a weak one.
    "prior_design": 0.5,
    # How design probes are drawn (kgprobe.sampling.design): adaptive leans each round's
    # draws towards edges predicted wrong or uncertain (known probabilities, a floor shared
    # by every model with the same seed, a minimum of draws for every predicate and subject
    # group); stratified keeps uniform probabilities with those minimums; uniform is the
    # design of run files made before the others. See docs/design.md for what each measured.
    "design": "adaptive",
    "probe_options": {},
    "sampler_options": {},
    # Run files or recorded sweeps of other models on the same KG (kgprobe.prior).
    "prior": [],
    "out": "runs",
    "cache": None,
    "report": True,
    "quiet": False,
    "plain": False,
    "round_timeout": None,
}

#: Project defaults of probe options that differ from the probe class's own defaults.
#: ZP-LKE with 20 examples and 20 options (gold + 19) instead of the paper's 50 and 100
#: costs ~1 s of CPU per fact on the default model instead of ~3.5 s, which keeps the
#: default run within minutes on 2 cores. HGP uses the same 19 distractors so that both
#: multiple-choice methods have the same chance level (5 %) by default. The paper's
#: protocol: ``--probe-option num_examples=50 --probe-option num_distractors=99``.
METHOD_DEFAULTS: dict[str, dict[str, Any]] = {
    "zp-lke": {"num_examples": 20, "num_distractors": 19},
    "zp-lke-gen": {"num_examples": 20},
    "hgp": {"num_distractors": 19},
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


def _probe_class(method: str):
    from kgprobe.probes import PROBES

    try:
        return PROBES[method]
    except KeyError:
        raise InputError(f"unknown probe method {method!r}; choose one of: {', '.join(PROBES)}") from None


def _sampler_class(sampler: str):
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
    specs = option_specs(_probe_class(method))
    out = {k: d for k, (d, allowed) in specs.items() if k not in _IMPLIED_BY_NAME and _recordable(d, allowed)}
    out.update(METHOD_DEFAULTS.get(method, {}))
    return out


def sampler_option_defaults(sampler: str) -> dict[str, Any]:
    """Every plain option of ``sampler`` at its default."""
    specs = option_specs(_sampler_class(sampler))
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
    cls = _probe_class(name) if kind == "probe" else _sampler_class(name)
    specs = option_specs(cls)
    merged = probe_option_defaults(name) if kind == "probe" else sampler_option_defaults(name)
    what = source or f"{kind} option"
    for key, value in (given or {}).items():
        if key not in specs or (kind == "probe" and key in _IMPLIED_BY_NAME):
            known = sorted(k for k in specs if not (kind == "probe" and k in _IMPLIED_BY_NAME))
            raise InputError(f"{what}: {kind} {name!r} has no option {key!r}; its options: {', '.join(known) or 'none'}")
        merged[key] = check_option(what, key, value, specs[key][1])
    return merged


def _check_with_schema(mapping: Mapping[str, Any], source: str) -> None:
    """Value types and ranges of run settings: the one schema in :mod:`kgprobe.config_schema`."""
    from kgprobe.config_schema import check_settings

    check_settings(dict(mapping), source, known=RUN_DEFAULTS)


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
        _check_with_schema(layer, source)
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
    sampler_given = dict(settings["sampler_options"])
    if settings["audit_fraction"] is not None and "audit_fraction" not in sampler_given \
            and "audit_fraction" in option_specs(_sampler_class(settings["sampler"])):
        sampler_given["audit_fraction"] = settings["audit_fraction"]
    settings["sampler_options"] = merge_options("sampler", settings["sampler"], sampler_given,
                                                source=origin["sampler_options"])
    return settings


def engine_config(settings: Mapping[str, Any]) -> "EngineConfig":
    """The :class:`~kgprobe.engine.EngineConfig` of resolved settings."""
    from kgprobe.engine import EngineConfig

    return EngineConfig(
        method=settings["method"],
        sampler=settings["sampler"],
        batch_size=settings["batch_size"],
        budget=settings["budget"],
        max_rounds=settings["max_rounds"],
        seed=settings["seed"],
        propagation_weight=settings["propagation_weight"],
        convergence_window=settings["convergence_window"],
        convergence_tolerance=settings["convergence_tolerance"],
        stop_on_convergence=settings["stop_on_convergence"],
        probe_options=dict(settings["probe_options"]),
        sampler_options=dict(settings["sampler_options"]),
        design_tilt=settings["design_tilt"],
        prior_design=settings["prior_design"],
        design=settings["design"],
    )
