"""Samplers: which edges to probe next. ``make_sampler(name, **kwargs)`` builds one by name.

* ``thompson`` — kgprobe's Thompson sampling on the evidence posterior (own answers plus a
  learned, bounded prior from the predicate's and entities' other answers;
  :mod:`kgprobe.sampling.evidence`) and a grid NPMLE, with design draws; where probes
  score options, each answer's margin moves the evidence prior as in ``margin-focus``;
* ``kglens-thompson`` — KGLens' Thompson sampling (top-n of θ̃ ~ Beta(α, β), neighbours'
  answers added to the counts by propagation);
* ``epsilon-greedy`` — ε uniform + greedy by posterior mean;
* ``uniform`` — uniform random ("Monte Carlo");
* ``brute-force`` — sweep all edges per epoch in random order;
* ``pooled-thompson`` — kgprobe's own: Thompson on an empirical-Bayes posterior pooled
  over each edge's neighbourhood and predicate, with a design side sample
  (:mod:`kgprobe.sampling.pooled`);
* ``focus`` — kgprobe's own: probes where one more answer most reduces the uncertainty
  about likely-weak edges, on the same pooled posterior (:mod:`kgprobe.sampling.focus`);
* ``margin-focus`` — ``focus`` that reads each answer's margin (gold log-prob minus the
  best wrong one, from probes that score options) to tell weak edges answered right
  from strong ones (:mod:`kgprobe.sampling.margin`).
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from kgprobe.errors import InputError
from kgprobe.sampling.base import Sampler, Selection
from kgprobe.sampling.brute_force import BruteForceSampler
from kgprobe.sampling.epsilon_greedy import EpsilonGreedySampler
from kgprobe.sampling.focus import FocusSampler
from kgprobe.sampling.margin import MarginFocusSampler
from kgprobe.sampling.pooled import PooledThompsonSampler
from kgprobe.sampling.thompson import KGLensThompsonSampler, ThompsonSampler
from kgprobe.sampling.uniform import UniformSampler

SAMPLERS: dict[str, type[Sampler]] = {
    "thompson": ThompsonSampler,
    "kglens-thompson": KGLensThompsonSampler,
    "epsilon-greedy": EpsilonGreedySampler,
    "uniform": UniformSampler,
    "brute-force": BruteForceSampler,
    "pooled-thompson": PooledThompsonSampler,
    "focus": FocusSampler,
    "margin-focus": MarginFocusSampler,
}

#: Sampler options under their older names. The old names keep working (with a warning
#: where someone wrote them) so that existing scripts, config files and run files do.
RENAMED_OPTIONS: dict[str, str] = {"audit_fraction": "design_fraction"}


def current_option_names(options: Mapping[str, Any], *, warn: str | None = None) -> dict[str, Any]:
    """``options`` with every old name of :data:`RENAMED_OPTIONS` replaced by the current one.

    ``warn``: where the options came from, named in a warning per old name; None for no
    warning (what older run files recorded is read as is).
    """
    out = dict(options)
    for old, new in RENAMED_OPTIONS.items():
        if old not in out:
            continue
        if new in out:
            raise InputError(f"{warn or 'sampler options'}: {old!r} is the old name of {new!r}; give only {new!r}")
        if warn is not None:
            warnings.warn(f"{warn}: sampler option {old!r} is now {new!r}; the old name still works for now",
                          FutureWarning, stacklevel=3)
        out = {(new if key == old else key): value for key, value in out.items()}
    return out


#: Sampler options added after runs were first recorded, with the value a run that lacks
#: them was played with (its behaviour then). A run started by ``start_run`` records every
#: option resolved, so a record that names the sampler's options but not one of these
#: predates it; resuming it with today's default would change its picks.
RECORDED_WITHOUT: dict[str, dict[str, Any]] = {"focus": {"value_share": 0.0}, "thompson": {"margins": False, "margin_estimate": False}}


def recorded_options(sampler: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """The sampler options a stored run was played with: current names, plus the value of
    every option the run predates (:data:`RECORDED_WITHOUT`). An empty record resolved
    nothing (an engine configured by hand), so it stays empty: the class defaults it ran with."""
    out = current_option_names(options)
    if out:
        out.update({k: v for k, v in RECORDED_WITHOUT.get(str(sampler), {}).items() if k not in out})
    return out


def make_sampler(name: str, **kwargs) -> Sampler:
    """A sampler by registry name, with its keyword settings (e.g. ``design_fraction``)."""
    try:
        cls = SAMPLERS[name]
    except KeyError:
        raise InputError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}") from None
    kwargs = current_option_names(kwargs, warn="make_sampler")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise InputError(f"sampler {name!r} does not take these settings: {exc}") from None


__all__ = ["RECORDED_WITHOUT", "RENAMED_OPTIONS", "SAMPLERS", "Sampler", "Selection", "current_option_names",
           "make_sampler", "recorded_options"]
