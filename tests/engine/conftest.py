"""Shared helpers of the engine tests."""

from __future__ import annotations

import dataclasses

import numpy as np


def turned_right(sweep, share: float, rng: np.random.Generator):
    """``sweep`` with each recorded wrong answer turned right with probability ``share``.

    A stronger model on the same edges and predicates, for the cases near 100 % right
    where normal intervals undercover. The log-probabilities no longer match the answers,
    so they are dropped.
    """
    correct = sweep.correct | (rng.random(sweep.correct.shape) < share)
    return dataclasses.replace(sweep, correct=correct, gold_logprob=None, best_wrong_logprob=None)
