"""Device-dependent defaults: bf16 on CUDA and float32 on CPU, batch sizes from the device.
The choices are pure functions checked on CPU; the CUDA runs skip without a GPU."""

from __future__ import annotations

import pytest
import torch

from kgprobe.models.hf_backend import _resolve_dtype
from kgprobe.models.testing import tiny_model

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA GPU on this machine: the CUDA path cannot run here")


def test_auto_dtype_is_bf16_on_cuda_and_float32_on_cpu():
    assert _resolve_dtype("auto", torch.device("cuda")) is torch.bfloat16
    assert _resolve_dtype(None, torch.device("cuda:1")) is torch.bfloat16
    assert _resolve_dtype("auto", torch.device("cpu")) is torch.float32
    # The float32 check on a GPU asks for it explicitly.
    assert _resolve_dtype("float32", torch.device("cuda")) is torch.float32


def test_cpu_batching_is_the_measured_constants(tiny):
    assert (tiny.batch_size, tiny.batch_tokens, tiny._logit_rows) == (16, 4096, 512)
    assert tiny._vocab_sliced  # CPU float32: log-sum-exp over vocabulary slices
    small = tiny_model(seed=0, batch_size=3, batch_tokens=100)
    assert (small.batch_size, small.batch_tokens) == (3, 100)


@needs_cuda
def test_cuda_defaults_to_bf16_and_sizes_batches_from_free_memory():
    gpu = tiny_model(seed=0, device="cuda")
    assert gpu.dtype is torch.bfloat16 and "dtype=bfloat16" in gpu.identity
    assert gpu.batch_size == 256 and 4096 <= gpu.batch_tokens <= 262_144
    assert not gpu._vocab_sliced


@needs_cuda
def test_cuda_bf16_scores_close_to_cpu_float32(tiny):
    from kgprobe.models.base import ScoreRequest

    gpu = tiny_model(seed=0, device="cuda")
    requests = [ScoreRequest("Italy\tRome\nFrance", "\t" + o) for o in ("Paris", "San Marino", "Lyon")]
    for a, b in zip(tiny.score(requests), gpu.score(requests)):
        # bf16 keeps ~3 significant digits; a random 2-layer model's log-probs are ~-10.
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=0.1)
