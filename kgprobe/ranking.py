"""One definition of "weakest" and of "most probed", shared by the live view and the reports.

Groups (predicates, entity groups, subjects) are ranked weakest first by the best
accuracy estimate a group's metrics carry: an ``estimate`` field when the metrics have
one (an estimate with an interval), else the win rate over the group's probed edges.
Ties go to the group with more probed edges (more evidence), then to the name, so every
table and plot that ranks groups lists them in the same order.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping


def _field(m: Any, key: str):
    if isinstance(m, Mapping):
        return m.get(key)
    return getattr(m, key, None)


def accuracy_of(m: Any) -> float:
    """The accuracy estimate used for ranking (NaN ranks last)."""
    est = _field(m, "estimate")
    if isinstance(est, Mapping):
        est = est.get("estimate")
    value = est if isinstance(est, (int, float)) else _field(m, "win_rate")
    return float(value) if value is not None else float("nan")


def weakest_first(items: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``(name, metrics)`` pairs, lowest accuracy first; ties: more probed edges, then name."""

    def key(item):
        name, m = item
        acc = accuracy_of(m)
        return (math.isnan(acc), acc if not math.isnan(acc) else 0.0, -int(_field(m, "probed_edges") or 0), str(name))

    return sorted(items, key=key)


def most_probed(counts: Mapping[Any, int], labels: Mapping[Any, str], k: int) -> list[Any]:
    """The ``k`` keys with the most probed edges; ties broken by label (then key), the same everywhere."""
    return sorted(counts, key=lambda key: (-int(counts[key]), str(labels.get(key, key)), str(key)))[:k]
