"""Brute force: sweep every active edge once per epoch, in a fresh random order each epoch.

Each epoch is a uniformly random permutation of the active edges, so every probe is a
design draw (its edge is uniform over the active edges and independent of the state).
When an epoch ends inside a round, the round is completed from the next epoch's order,
skipping edges already in the round (they stay queued in the new epoch), so a round
never repeats an edge and every epoch still probes every edge exactly once.
"""

from __future__ import annotations

import numpy as np

from kgprobe.errors import InputError
from kgprobe.sampling.design_draws import check_batch_size
from kgprobe.sampling.base import Sampler, Selection


class BruteForceSampler(Sampler):
    """Epoch-by-epoch sweep of all active edges in a seeded random order."""

    name = "brute-force"

    def __init__(self):
        self._queue = np.empty(0, dtype=np.int64)  # edges left in the current epoch, in order
        self.epochs_started = 0

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        n = check_batch_size(pkg, n)
        if self._queue.size and self._queue.max() >= pkg.num_edges:
            raise InputError("brute-force sampler state belongs to a different graph")
        taken = self._queue[:n]
        self._queue = self._queue[n:]
        if taken.size < n:
            fresh = rng.permutation(pkg.active_edges).astype(np.int64)
            self.epochs_started += 1
            dup = np.isin(fresh, taken)
            extra_idx = np.flatnonzero(~dup)[: n - taken.size]
            extra = fresh[extra_idx]
            keep = np.ones(fresh.size, dtype=bool)
            keep[extra_idx] = False
            self._queue = fresh[keep]
            taken = np.concatenate([taken, extra])
        return Selection(taken.astype(np.int64), np.ones(n, dtype=bool))

    def state_dict(self) -> dict:
        return {"queue": self._queue.copy(), "epochs_started": self.epochs_started}

    def load_state_dict(self, state: dict) -> None:
        self._queue = np.asarray(state["queue"], dtype=np.int64).copy()
        self.epochs_started = int(state["epochs_started"])
