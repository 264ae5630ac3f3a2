"""What exactly a run measured: the resolved protocol, stored in the run and shown everywhere.

A protocol is a JSON object (:func:`build_protocol`) written into the run file when the
run is created (meta key ``protocol``) and shown at the top of every report and in
``kgprobe report --json``. It holds:

``method``, ``probe_options``
    the probe method and *every* option it was built with (defaults included);
``sampler``, ``sampler_options``
    the sampler and every option (the design fraction among them);
``batch_size``, ``budget``, ``max_rounds``, ``seed``, ``propagation_weight``, ``prior``, ``design``, ``convergence``
    the run's other settings;
``model``
    the spec the user gave, a display label that says what the weights are, the
    identity recorded in the run (backend, weights, dtype, BOS policy), the backend,
    the weights' format, quantization, dtype and device;
``kg``
    the KG's name, content hash (SHA-256 of its canonical JSON), edge counts;
``versions``
    kgprobe, Python, torch, transformers, numpy;
``date``
    when the run was created (UTC, ISO 8601).

Two runs measure the same thing when their *measurement* fields agree
(:data:`MEASUREMENT_FIELDS`): ``kgprobe compare`` refuses runs whose protocols differ
there (:func:`protocol_differences`). The model and its dtype/device are what a
comparison compares; the seed, budget, versions and date are listed but do not make runs
incomparable (a different seed is a replicate; the budget changes interval widths).

Runs created before protocols were recorded get one reconstructed from their settings
(``"reconstructed": true``): probe options are filled with the defaults of the probe
classes, which is what those runs were built with.
"""

from __future__ import annotations

import json
import platform
import re
import time
from dataclasses import dataclass
from typing import Any, Mapping

from kgprobe.run_spec import RECORDED_BEFORE
from kgprobe.settings import RECORDED_WITHOUT

#: Bumped when the meaning of a field changes.
PROTOCOL_VERSION = 1

#: Fields that must agree for two runs to be compared (dotted paths into the protocol).
MEASUREMENT_FIELDS: tuple[str, ...] = (
    "kg.name",
    "kg.content_hash",
    "method",
    "probe_options",
    "sampler",
    "sampler_options",
    "batch_size",
    "propagation_weight",
    "prior",
)

#: Fields listed side by side by ``compare`` but that do not make runs incomparable.
CONTEXT_FIELDS: tuple[str, ...] = (
    "model.label",
    "model.dtype",
    "model.device",
    "seed",
    "budget",
    "max_rounds",
    "convergence",
    "design",
    "versions.kgprobe",
    "versions.torch",
    "versions.transformers",
)


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return None


def library_versions() -> dict[str, str | None]:
    """Versions of kgprobe and the libraries that determine a model's outputs."""
    from kgprobe import __version__

    return {
        "kgprobe": __version__,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "numpy": _version("numpy"),
    }


# -- the model -----------------------------------------------------------------------------
_QUANT_RE = re.compile(r"[.\-_]((?:i?q\d[\w]*)|f16|bf16|f32)\.gguf$", re.IGNORECASE)


def gguf_label(gguf_name: str) -> tuple[str, str | None]:
    """``("SmolLM2-135M-Instruct", "Q4_1")`` from ``SmolLM2-135M-Instruct.Q4_1.gguf``."""
    m = _QUANT_RE.search(gguf_name)
    if not m:
        return gguf_name.removesuffix(".gguf"), None
    return gguf_name[: m.start()], m.group(1).upper()


def _catalog_entry(spec: str, identity: str = ""):
    """The registry entry a model was loaded from: by its spec, else by the name in its identity."""
    from kgprobe.models import catalog
    from kgprobe.models.default_model import DEFAULT_MODEL_NAME

    name = spec[5:] if spec.startswith("vllm:") else spec
    if name == "default" or (spec.startswith("vllm:") and not name):
        name = DEFAULT_MODEL_NAME
    if name in catalog.CATALOG:
        return catalog.CATALOG[name]
    # transformers:<name>@<sha16>|dtype=…: registry models are labelled <name>@<GGUF sha>.
    label = identity.split(":", 1)[-1].split("|", 1)[0]
    base, _, sha = label.partition("@")
    entry = catalog.CATALOG.get(base)
    if entry is not None and sha and entry.sha256.startswith(sha):
        return entry
    return None


def _inner(model):
    """The backend under wrappers such as the response cache."""
    seen = 0
    while hasattr(model, "model") and not isinstance(getattr(model, "model"), str) and seen < 4:
        inner = getattr(model, "model")
        if not hasattr(inner, "identity"):
            break
        model, seen = inner, seen + 1
    return model


def _identity_part(identity: str, key: str) -> str | None:
    for part in identity.split("|")[1:]:
        k, _, v = part.partition("=")
        if k == key:
            return v
    return None


def describe_model(model, spec: str = "") -> dict[str, Any]:
    """The model fields of a protocol, from a loaded backend and the spec it was loaded from."""
    identity = str(model.identity)
    backend = identity.split(":", 1)[0] if ":" in identity else type(model).__name__
    inner = _inner(model)
    dtype = getattr(inner, "dtype", None)
    dtype = str(dtype).replace("torch.", "") if dtype is not None else _identity_part(identity, "dtype")
    device = getattr(inner, "device", None)
    device = str(device) if device is not None else ("server" if backend == "openai" else None)
    entry = _catalog_entry(spec or "", identity)
    if entry is not None:
        base, quant = gguf_label(entry.gguf_name)
        weights_format = f"GGUF {quant or ''}".strip() + f", dequantized to {dtype or 'float32'}"
        quantization = f"{quant} (dequantized)" if quant else None
        label = f"{base} (GGUF {quant}, dequantized)" if quant else f"{base} (GGUF, dequantized)"
    else:
        quant_cfg = getattr(getattr(getattr(inner, "_model", None), "config", None), "quantization_config", None)
        quantization = None
        if quant_cfg is not None:
            method = quant_cfg.get("quant_method") if isinstance(quant_cfg, dict) else getattr(quant_cfg, "quant_method", None)
            quantization = str(method or "quantized")
        if backend == "openai":
            weights_format = "served (unknown to the client)"
        elif backend in ("transformers", "vllm"):
            weights_format = "transformers checkpoint"
        else:
            weights_format = backend
        label = str(getattr(model, "name", identity))
        if spec and (spec.startswith("hf:") or spec.startswith("vllm:")):
            label = spec.split(":", 1)[1] or label
    return {
        "spec": spec,
        "label": label,
        "identity": identity,
        "backend": backend,
        "weights_format": weights_format,
        "quantization": quantization,
        "dtype": dtype,
        "device": device,
    }


def model_label(model, spec: str = "") -> str:
    """What a report calls the model, e.g. ``SmolLM2-135M-Instruct (GGUF Q4_1, dequantized)``."""
    return describe_model(model, spec)["label"]


def _design_text(design: Mapping[str, Any] | None) -> str:
    """How the design draws were made, in words (older protocols: uniform)."""
    design = design or {}
    tilt, share = design.get("tilt") or 0.0, design.get("prior_share") or 0.0
    # Protocols written before the design's name was recorded lack it. Short enough for one
    # report cell (160 characters) with every part present.
    name, target = design.get("name"), design.get("lean_target")
    parts = []
    if name == "adaptive":
        parts.append("adaptive (uniform floor with stratum minimums, lean to edges predicted wrong or uncertain)")
    elif name == "stratified":
        parts.append("stratified (uniform with stratum minimums)")
    if target:
        parts.append(f"--lean-target {target:g}")
    # A rule of an older kgprobe, not what a new run uses: named, as compare lists it.
    from kgprobe.engine import EngineConfig

    pacing, control = design.get("pacing"), design.get("lean_control")
    if pacing and pacing != EngineConfig.design_pacing:
        parts.append(f"stratum minimums paced {pacing!r}")
    if control and control != EngineConfig.lean_control:
        parts.append(f"target control {control!r}")
    if share:
        parts.append(f"with --prior, {share:g} follows its predicted spread")
    if tilt:
        parts.append(f"{tilt:g} leans towards edges predicted wrong")
    return "; ".join(parts) if parts else "uniform"


# -- building --------------------------------------------------------------------------------
def _design_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    # How the design draws were made (kgprobe.sampling.design, design_draws): older run
    # files have none of these keys and drew uniformly. The rules that are recorded but
    # are not settings count only where they acted (stratum minimums: not in a uniform
    # design; the lean target's control: only with a target), so runs that differ in a
    # rule that did nothing are not listed as different.
    name, target = config.get("design", "uniform"), config.get("lean_target")
    return {"name": name, "tilt": config.get("design_tilt", 0.0), "prior_share": config.get("prior_design", 0.0),
            "lean_target": target,
            "pacing": None if name == "uniform" else config.get("design_pacing", RECORDED_BEFORE["design_pacing"]),
            "lean_control": config.get("lean_control", RECORDED_BEFORE["lean_control"]) if target else None}


def _config_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "method": config["method"],
        "probe_options": dict(config.get("probe_options") or {}),
        "sampler": config["sampler"],
        "sampler_options": dict(config.get("sampler_options") or {}),
        "batch_size": config["batch_size"],
        "budget": config.get("budget"),
        "max_rounds": config.get("max_rounds"),
        "seed": config["seed"],
        "propagation_weight": config["propagation_weight"],
        "prior": list(config.get("prior") or (1.0, 1.0)),
        "design": _design_fields(config),
        "convergence": {
            "window": config.get("convergence_window"),
            "tolerance": config.get("convergence_tolerance"),
            "stop": config.get("stop_on_convergence"),
        },
    }


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


def build_protocol(config, kg, model, spec: str = "", *, date: str | None = None) -> dict[str, Any]:
    """The protocol of a new run: an :class:`~kgprobe.engine.EngineConfig` (or its dict),
    the KG, the loaded model and the spec it came from."""
    from kgprobe.store import kg_fingerprint

    cfg = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    proto = {
        "protocol_version": PROTOCOL_VERSION,
        **_config_fields(cfg),
        "model": describe_model(model, spec),
        "kg": {"name": kg.name, "content_hash": kg_fingerprint(kg), "edges": int(kg.num_edges),
               "active_edges": int(kg.num_active)},
        "versions": library_versions(),
        "date": date or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return _jsonable(proto)


def reconstruct_protocol(store) -> dict[str, Any]:
    """A protocol for a run file written before protocols were stored (best effort)."""
    from kgprobe.sampling import recorded_options
    from kgprobe.settings import option_specs, probe_class, sampler_class

    cfg = dict(store.config)
    cfg["sampler_options"] = recorded_options(cfg.get("sampler"), cfg.get("sampler_options") or {})
    fields = _config_fields(cfg)
    # Those runs built their probe and sampler from the class defaults plus what was stored.
    for kind, key, getter in (("probe", "probe_options", probe_class), ("sampler", "sampler_options", sampler_class)):
        name = cfg["method"] if kind == "probe" else cfg["sampler"]
        try:
            specs = option_specs(getter(name))
        except Exception:
            continue
        full = {k: d for k, (d, allowed) in specs.items()
                if k != "mode" and allowed is not None and isinstance(d, (bool, int, float, str, type(None)))}
        full.update(fields[key])
        fields[key] = full
    identity = store.model_identity
    kg = store.kg
    proto = {
        "protocol_version": PROTOCOL_VERSION,
        "reconstructed": True,
        **fields,
        "model": {
            "spec": store.model_spec, "label": store.model_name, "identity": identity,
            "backend": identity.split(":", 1)[0] if ":" in identity else None, "weights_format": None,
            "quantization": None, "dtype": _identity_part(identity, "dtype"), "device": None,
        },
        "kg": {"name": kg.name, "content_hash": store.meta("kg_fingerprint"), "edges": int(kg.num_edges),
               "active_edges": int(kg.num_active)},
        "versions": {"kgprobe": store.meta("kgprobe_version") or None, "python": None, "torch": None,
                     "transformers": None, "numpy": None},
        "date": store.meta("created") or None,
    }
    return _jsonable(proto)


def protocol_of_store(store) -> dict[str, Any]:
    """The stored protocol of a run file, or one reconstructed for an older file."""
    raw = store.meta("protocol")
    if not raw:
        return reconstruct_protocol(store)
    from kgprobe.sampling import recorded_options

    proto = json.loads(raw)
    if isinstance(proto.get("sampler_options"), dict):  # older run files name some options differently or lack them
        proto["sampler_options"] = recorded_options(proto.get("sampler"), proto["sampler_options"])
    design = proto.get("design")
    if isinstance(design, dict):
        # Protocols written before the design's name, or its rules that are not settings,
        # were recorded: the run's settings hold them.
        recorded = _design_fields(store.config)
        for key in ("name", "lean_target", "pacing", "lean_control"):
            design.setdefault(key, recorded[key])
    return proto


# -- comparing -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Difference:
    """One protocol field on which two runs differ."""

    field: str
    a: Any
    b: Any

    def __str__(self) -> str:
        return f"{self.field}: {_short(self.a)} vs {_short(self.b)}"


def _short(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def field_at(proto: Mapping[str, Any], path: str):
    """The value at a dotted ``path`` of a protocol (None where it has none)."""
    node: Any = proto
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _diff(path: str, a, b) -> list[Difference]:
    """Differences under ``path``, one per leaf key of option dictionaries."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for key in sorted(set(a) | set(b)):
            out += _diff(f"{path}.{key}", a.get(key), b.get(key))
        return out
    if a != b and not (_is_num(a) and _is_num(b) and float(a) == float(b)):
        return [Difference(path, a, b)]
    return []


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def protocol_differences(a: Mapping[str, Any], b: Mapping[str, Any],
                         fields: tuple[str, ...] = MEASUREMENT_FIELDS) -> list[Difference]:
    """The measurement fields on which protocols ``a`` and ``b`` differ (empty: comparable).

    Option dictionaries are compared key by key, so the message names e.g.
    ``probe_options.num_distractors: 19 vs 99``.
    """
    out: list[Difference] = []
    for path in fields:
        va, vb = field_at(a, path), field_at(b, path)
        if path == "probe_options":
            va, vb = _as_recorded(a, va), _as_recorded(b, vb)
        out += _diff(path, va, vb)
    return out


def _as_recorded(proto: Mapping[str, Any], options):
    """Probe options with those a protocol predates at the value it was made with."""
    if not isinstance(options, Mapping):
        return options
    return {**RECORDED_WITHOUT.get(str(proto.get("method")), {}), **options}


def protocol_rows(proto: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, value) rows for the top of a report, in reading order."""
    m = proto.get("model", {})
    kg = proto.get("kg", {})
    v = proto.get("versions", {})
    conv = proto.get("convergence", {})

    def opts(d):
        return ", ".join(f"{k}={json.dumps(val)}" for k, val in (d or {}).items()) or "(none)"

    rows = [
        ("model", f"{m.get('label')}"),
        ("model identity", str(m.get("identity"))),
        ("weights / quantization", f"{m.get('weights_format') or 'unknown'} / {m.get('quantization') or 'none'}"),
        ("dtype / device", f"{m.get('dtype') or 'unknown'} / {m.get('device') or 'unknown'}"),
        ("KG", f"{kg.get('name')} ({kg.get('active_edges')} active of {kg.get('edges')} edges), "
               f"content hash {str(kg.get('content_hash'))[:16]}"),
        ("method", str(proto.get("method"))),
        ("probe options", opts(proto.get("probe_options"))),
        ("sampler", f"{proto.get('sampler')} ({opts(proto.get('sampler_options'))})"),
        ("batch size / budget / max rounds", f"{proto.get('batch_size')} / {proto.get('budget') or 'none'} / "
                                             f"{proto.get('max_rounds') or 'none'}"),
        ("seed", str(proto.get("seed"))),
        ("propagation weight / prior", f"{proto.get('propagation_weight')} / {proto.get('prior')}"),
        ("design", _design_text(proto.get("design"))),
        ("convergence", f"window {conv.get('window')}, tolerance {conv.get('tolerance')}, "
                        f"{'stops the run' if conv.get('stop') else 'does not stop the run'}"),
        ("versions", ", ".join(f"{k} {val}" for k, val in v.items() if val) or "unknown"),
        ("date", str(proto.get("date"))),
    ]
    if proto.get("reconstructed"):
        rows.append(("note", "reconstructed from an older run file's settings; model dtype/device and "
                             "library versions were not recorded"))
    return rows
