"""Which device a local backend runs on: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.

``auto`` (the default everywhere) is the first CUDA GPU when PyTorch sees one, else the
CPU, so a machine with a GPU uses it without a flag. Asking for CUDA where there is none
is an error, never a silent fall-back to CPU: a run's speed and its float rounding
depend on the device, and the user asked for one.
"""

from __future__ import annotations

import re

from kgprobe.errors import InputError, ModelError

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N (N = GPU index)"
_PATTERN = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def check_device_spec(value) -> str:
    """``value`` if it names a device kgprobe knows (no torch import), else InputError."""
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text is None or not _PATTERN.match(text):
        raise InputError(f"unknown device {value!r}; use {DEVICE_CHOICES}.")
    return text


def resolve_device(value: str = "auto"):
    """The ``torch.device`` for ``value``; CUDA asked for but absent (or a GPU index out of
    range) is a :class:`ModelError` naming what to use instead."""
    import torch

    spec = check_device_spec(value)
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ModelError(f"device {spec!r} was requested but no CUDA GPU is available; use --device cpu "
                             "(or auto).")
        index = int(spec.split(":")[1]) if ":" in spec else 0
        if index >= torch.cuda.device_count():
            raise ModelError(f"device {spec!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s), "
                             f"numbered from 0.")
    return torch.device(spec)
