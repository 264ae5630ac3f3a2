"""Shared fixtures for the model tests: one tiny random model and one real default
model per session (loading is the slow part)."""

from __future__ import annotations

import pytest
import torch

# Six engineers share two cores; one thread keeps test timings honest and polite.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny():
    """A 2-layer random Llama with SmolLM2's tokenizer (milliseconds per call)."""
    from kgprobe.models.testing import tiny_model

    return tiny_model(seed=0)


@pytest.fixture(scope="session")
def smol():
    """The real default model, SmolLM2-135M-Instruct (converted copy, ~1 s to load), on the
    CPU in float32: the log-likelihoods the tests pin are those (on a GPU machine ``auto``
    would mean CUDA in bfloat16)."""
    from kgprobe.models.default_model import load_default_model

    return load_default_model(device="cpu")


def _plain_logprobs(hf_model, ids: list[int], boundary: int) -> tuple[list[float], list[bool]]:
    """Independent reference: one plain forward over the whole sequence, no cache, no
    packing; log-probs and argmax flags of positions ``boundary..len(ids)-1``."""
    with torch.no_grad():
        logits = hf_model(torch.tensor([ids], device=hf_model.device)).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    values = [logprobs[p - 1, ids[p]].item() for p in range(boundary, len(ids))]
    greedy = [int(logits[p - 1].argmax()) == ids[p] for p in range(boundary, len(ids))]
    return values, greedy


@pytest.fixture(scope="session")
def plain():
    """The plain full-sequence reference scorer (see ``_plain_logprobs``)."""
    return _plain_logprobs
