"""One ``openai:`` model over several servers: capacity per server, one identity, same answers."""

from __future__ import annotations

import time
import urllib.request

import pytest

from kgprobe.models.base import GenerateRequest
from kgprobe.models.openai_backend import OpenAICompatibleModel

SERVED = "smollm2"
TOL = 5e-4  # the vLLM-vs-vLLM tolerance of test_vllm_serve.py


def test_concurrency_limit_is_per_server(faults, fault_server_b):
    # 8 requests of 0.2 s, round-robin over two servers, at most 2 in flight on each: each
    # server answers 4 and sees exactly 2 at once (the limit is not a total of 2 over both).
    fault_server_b.reset()
    urls = [faults.url("slow"), fault_server_b.url("slow")]
    with OpenAICompatibleModel("m", base_urls=urls, max_concurrency=2, backoff=0.01, timeout=5.0) as model:
        out = model.generate([GenerateRequest(f"w{i}") for i in range(8)])
        assert model.identity == OpenAICompatibleModel("m", urls[0]).identity
    assert out == [f" w{i}, more" for i in range(8)]
    assert faults.counts["slow"] == 4 and fault_server_b.counts["slow"] == 4
    assert faults.max_inflight["slow"] == 2 and fault_server_b.max_inflight["slow"] == 2


def test_a_failing_server_moves_its_requests_to_the_other(faults, fault_server_b, down_url):
    fault_server_b.reset()
    with OpenAICompatibleModel("m", base_urls=[down_url, fault_server_b.url("ok")], max_concurrency=1,
                               max_retries=1, backoff=0.01, timeout=5.0) as model:
        out = model.generate([GenerateRequest(f"w{i}") for i in range(4)])
        assert model.retries == 2  # requests 0 and 2 started on the dead server
    assert out == [f" w{i}, more" for i in range(4)]
    assert fault_server_b.counts["ok"] == 4


def _served(base_url: str) -> float:
    """Requests a vLLM server has finished (its Prometheus counter)."""
    root = base_url[: -len("/v1")]
    with urllib.request.urlopen(f"{root}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


@pytest.mark.slow
@pytest.mark.vllm
def test_two_vllm_servers_behind_one_model(vllm_server, vllm_server_b, cases):
    started = time.perf_counter()
    with OpenAICompatibleModel(SERVED, vllm_server, max_concurrency=2) as one:
        alone = one.score(cases.SCORE_REQUESTS)
        greedy_alone = one.generate(cases.GREEDY_REQUESTS)
        identity = one.identity
    before = [_served(vllm_server), _served(vllm_server_b)]
    with OpenAICompatibleModel(SERVED, base_urls=[vllm_server, vllm_server_b], max_concurrency=2) as both:
        assert both.identity == identity  # which servers serve the model is not part of it
        got = both.score(cases.SCORE_REQUESTS)
        greedy = both.generate(cases.GREEDY_REQUESTS)
    served = [_served(vllm_server) - before[0], _served(vllm_server_b) - before[1]]
    n = len(cases.SCORE_REQUESTS) + len(cases.GREEDY_REQUESTS)
    # Round-robin: every request once, split evenly (the first URL gets the odd one out).
    assert sum(served) == n and abs(served[0] - served[1]) <= 2 and min(served) >= n // 2 - 1
    diff = max(abs(x - y) for a, b in zip(got, alone) for x, y in zip(a.token_logprobs, b.token_logprobs))
    print(f"two servers vs one: max |token log-prob difference| = {diff:.2e}; served {served}; "
          f"{time.perf_counter() - started:.1f} s")
    assert [r.num_tokens for r in got] == [r.num_tokens for r in alone]
    assert diff <= TOL
    assert [r.is_greedy for r in got] == [r.is_greedy for r in alone]
    assert greedy == greedy_alone
