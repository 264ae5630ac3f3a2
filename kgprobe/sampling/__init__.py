"""Samplers: which edges to probe next. ``make_sampler(name, **kwargs)`` builds one by name.

* ``thompson`` — kgprobe's Thompson sampling on the evidence posterior (own answers plus a
  learned, bounded prior from the predicate's and entities' other answers;
  :mod:`kgprobe.sampling.evidence`), with audit draws;
* ``kglens-thompson`` — KGLens' Thompson sampling (top-n of θ̃ ~ Beta(α, β), neighbours'
  answers added to the counts by propagation);
* ``epsilon-greedy`` — ε uniform + greedy by posterior mean;
* ``uniform`` — uniform random ("Monte Carlo");
* ``brute-force`` — sweep all edges per epoch in random order;
* ``pooled-thompson`` — kgprobe's own: Thompson on an empirical-Bayes posterior pooled
  over each edge's neighbourhood and predicate, with an audit side sample
  (:mod:`kgprobe.sampling.pooled`);
* ``focus`` — kgprobe's own: probes where one more answer most reduces the uncertainty
  about likely-weak edges, on the same pooled posterior (:mod:`kgprobe.sampling.focus`).
"""

from __future__ import annotations

from kgprobe.errors import InputError
from kgprobe.sampling.base import Sampler, Selection
from kgprobe.sampling.brute_force import BruteForceSampler
from kgprobe.sampling.epsilon_greedy import EpsilonGreedySampler
from kgprobe.sampling.focus import FocusSampler
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
}



def make_sampler(name: str, **kwargs) -> Sampler:
    """A sampler by registry name, with its keyword settings (e.g. ``audit_fraction``)."""
    try:
        cls = SAMPLERS[name]
    except KeyError:
        raise InputError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}") from None
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise InputError(f"sampler {name!r} does not take these settings: {exc}") from None


__all__ = ["SAMPLERS", "Sampler", "Selection", "make_sampler"]
