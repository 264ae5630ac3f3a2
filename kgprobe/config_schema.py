"""One schema for the run settings: types, ranges and unknown keys, checked up front.

:func:`check_settings` is called on a TOML config file's table and on the settings the
command line resolves to, before a KG is built, a model loaded or a run file created,
so a wrong value is a clear :class:`~kgprobe.errors.InputError` (exit 2) naming the
key, the expected type and the value, never a ``TypeError`` deep inside a run.

Rules that plain ``isinstance`` gets wrong: ``True`` is not an integer (Python's bool
is an int subclass; ``seed = true`` is a mistake, not seed 1), an integer is a valid
float (``propagation_weight = 1``), and ``nan``/``inf`` are not valid numbers here.

Why not a schema library: the checks are few, the messages must name the key and the
expected type in the user's terms (and the TOML/CLI spelling), and the bool-vs-int rule
is easy to state here; a JSON Schema validator would add a dependency for less clear
messages. Settings this schema does not describe but the caller knows (``known``) are
accepted without a type check, so a setting added elsewhere is not refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kgprobe.errors import InputError


@dataclass(frozen=True)
class Rule:
    """Expected type (``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"list[str]"``,
    ``"table"``), bounds, and whether ``None`` (unset) is allowed."""

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    optional: bool = False
    choices: tuple[str, ...] = ()


#: The run settings (keys of ``kgprobe run`` options and ``--config`` TOML files).
SCHEMA: dict[str, Rule] = {
    "kg": Rule("str"),
    "endpoint": Rule("str", optional=True),
    "seed_entities": Rule("list[str]", optional=True),
    "seeds": Rule("list[str]", optional=True),  # the old name of seed_entities
    "hops": Rule("int", low=1, high=10),
    "model": Rule("str"),
    "model_options": Rule("table"),
    "device": Rule("str"),
    "method": Rule("str"),
    "sampler": Rule("str"),
    "budget": Rule("int", low=1, optional=True),
    "batch_size": Rule("int", low=1),
    "max_rounds": Rule("int", low=1, optional=True),
    "seed": Rule("int", low=0, high=2**63 - 1),
    "propagation_weight": Rule("float", low=0),
    "convergence_window": Rule("int", low=2),
    "convergence_tolerance": Rule("float", low=0, low_open=True),
    "stop_on_convergence": Rule("bool"),
    "audit_fraction": Rule("float", low=0, high=1),
    "design_tilt": Rule("float", low=0, high=1),
    "prior_design": Rule("float", low=0, high=1),
    "design": Rule("str", choices=("uniform", "stratified", "adaptive")),
    "prior": Rule("list[str]", optional=True),
    "probe_options": Rule("table"),
    "sampler_options": Rule("table"),
    "out": Rule("str"),
    "cache": Rule("str", optional=True),
    "report": Rule("bool"),
    "quiet": Rule("bool"),
    "plain": Rule("bool"),
    "round_timeout": Rule("float", low=0, low_open=True, optional=True),
}

_NAMES = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
          "list[str]": "a list of strings", "table": "a table (key = value pairs)"}


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "list[str]":
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    if kind == "table":
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
    raise ValueError(f"unknown rule kind {kind!r}")


def _range_text(rule: Rule) -> str:
    parts = []
    if rule.low is not None:
        parts.append(f"{'>' if rule.low_open else '>='} {rule.low:g}")
    if rule.high is not None:
        parts.append(f"<= {rule.high:g}")
    return " and ".join(parts)


def check_settings(mapping: Mapping[str, Any], source: str, *, known: Iterable[str] = ()) -> None:
    """Raise :class:`InputError` for the first wrong setting in ``mapping``.

    ``source`` names where the settings came from ("config file run.toml", "the command
    line") for the message. Keys may use ``-`` or ``_``. ``known``: further accepted keys
    that this schema does not type-check.
    """
    if not isinstance(mapping, Mapping):
        raise InputError(f"{source}: the settings must be a table of key = value pairs")
    extra = {k.replace("-", "_") for k in known}
    unknown = [k for k in mapping if isinstance(k, str) and k.replace("-", "_") not in SCHEMA
               and k.replace("-", "_") not in extra]
    if unknown:
        raise InputError(f"{source}: unknown setting(s) {', '.join(sorted(unknown))}; known settings: "
                         f"{', '.join(sorted(set(SCHEMA) | extra))}")
    for raw_key, value in mapping.items():
        if not isinstance(raw_key, str):
            raise InputError(f"{source}: setting names must be strings, not {raw_key!r}")
        key = raw_key.replace("-", "_")
        rule = SCHEMA.get(key)
        if rule is None:
            if key in extra:
                continue
            raise InputError(f"{source}: unknown setting {raw_key!r}; known settings: "
                             f"{', '.join(sorted(set(SCHEMA) | extra))}")
        if value is None and rule.optional:
            continue
        if not _type_ok(rule.kind, value):
            hint = ""
            if rule.kind in ("int", "float") and isinstance(value, bool):
                hint = " (true/false is not a number)"
            elif rule.kind == "int" and isinstance(value, float) and value.is_integer():
                hint = f" (write {int(value)} without a decimal point)"
            elif rule.kind == "float" and isinstance(value, float):
                hint = " (nan and inf are not allowed)"
            raise InputError(f"{source}: setting {raw_key!r} must be {_NAMES[rule.kind]}, not "
                             f"{_describe(value)}{hint}")
        if rule.kind in ("int", "float"):
            too_low = rule.low is not None and (value <= rule.low if rule.low_open else value < rule.low)
            too_high = rule.high is not None and value > rule.high
            if too_low or too_high:
                raise InputError(f"{source}: setting {raw_key!r} must be {_NAMES[rule.kind]} {_range_text(rule)}, "
                                 f"not {value!r}")
        if rule.kind == "str" and "\x00" in value:
            raise InputError(f"{source}: setting {raw_key!r} contains a NUL character")
