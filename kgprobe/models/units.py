"""Answers that do not depend on the batch: every request *unit* answered by its own backend call.

A batched backend's floats depend on what else is in the batch: padding widths and
matrix shapes change the order of summation (measured on the transformers backend with
``tiny-random``: 8 ZP-LKE facts scored in one call and fact by fact differ by up to
1.9e-6 in log-probability). Where answers must not depend on how work is split — over Ray workers
(:mod:`kgprobe.models.ray_workers`) or over the shards of a sweep — requests are cut
into units, a maximal run of consecutive requests about the same KG edge (one probe's
option set or questions) or a single request without an edge, and each unit is one
backend call. A unit's answer is then a function of the unit alone.
"""

from __future__ import annotations

from typing import Any, Sequence

from kgprobe.models.base import DelegatingModel, GenerateRequest, ScoreRequest, ScoreResult


def request_units(requests: Sequence[Any]) -> list[tuple[int, int]]:
    """``(start, stop)`` of each unit: consecutive requests about the same edge, or one edgeless request."""
    units: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(requests) + 1):
        if i == len(requests) or requests[i].edge is None or requests[i].edge != requests[start].edge:
            units.append((start, i))
            start = i
    return units


class UnitCalls(DelegatingModel):
    """``model`` asked one unit at a time (see the module doc); same identity, same answers as a
    Ray worker gives."""

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        return [r for a, b in request_units(requests) for r in self.model.score(list(requests[a:b]))]

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return [r for a, b in request_units(requests) for r in self.model.generate(list(requests[a:b]))]
