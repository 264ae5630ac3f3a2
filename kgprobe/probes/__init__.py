"""Probes: turn a KG edge into model requests and the responses into right or wrong.

``make_probe(name, **options)`` builds a probe by the name users give on the command
line; ``PROBES`` maps each name to its class.
"""

from __future__ import annotations

from kgprobe.errors import InputError
from kgprobe.probes.base import Probe, ProbeTask, Verdict
from kgprobe.probes.hgp import HumanPromptGenerationProbe, HumanPromptProbe
from kgprobe.probes.kglens import KGLensProbe, YesNoLogprobProbe
from kgprobe.probes.zp_lke import ZeroPromptGenerationProbe, ZeroPromptProbe

#: Probe name -> class. Several KGLens names share one class with a different mode.
PROBES: dict[str, type[Probe]] = {
    "zp-lke": ZeroPromptProbe,
    "zp-lke-gen": ZeroPromptGenerationProbe,
    "hgp": HumanPromptProbe,
    "hgp-gen": HumanPromptGenerationProbe,
    "yes-no": KGLensProbe,
    "yes-no-logprob": YesNoLogprobProbe,
    "wh": KGLensProbe,
    "easy": KGLensProbe,
    "hard": KGLensProbe,
}

_MODE = {"yes-no": "yes-no", "wh": "wh", "easy": "easy", "hard": "hard"}


def make_probe(name: str, **options) -> Probe:
    """The probe called ``name`` with keyword ``options`` for its constructor.

    Unknown names raise :class:`InputError` listing the known ones; unknown options raise
    :class:`InputError` naming the option.
    """
    try:
        cls = PROBES[name]
    except KeyError:
        raise InputError(f"unknown probe method {name!r}; choose one of: {', '.join(PROBES)}") from None
    if name in _MODE:
        options = {"mode": _MODE[name], **options}
    try:
        return cls(**options)
    except TypeError as exc:
        raise InputError(f"probe {name!r}: {exc}") from None


__all__ = ["PROBES", "Probe", "ProbeTask", "Verdict", "make_probe"]
