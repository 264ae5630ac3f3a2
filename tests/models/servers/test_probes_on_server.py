"""Every probe method on a real OpenAI-compatible server (``vllm serve``, default model):
the same facts and seeds give the same verdicts as the transformers backend.

Scoring probes go to the completions endpoint (log-probs); the KGLens question probes send
chat requests, so they also run on a chat-only endpoint. One fact per active predicate of
the countries KG (11 facts); ZP-LKE with 10 examples and 10 options keeps the HTTP
traffic small.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kgprobe.bench.methods import run_probe, sample_facts
from kgprobe.errors import ModelError
from kgprobe.models.openai_backend import OpenAICompatibleModel
from kgprobe.probes import make_probe
from kgprobe.probes.kglens import WH_MAX_OUT_DEGREE

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

SERVED = "smollm2"
SMALL = {"num_examples": 10, "num_distractors": 9}
SCORING = {"zp-lke": SMALL, "hgp": {"num_distractors": 9}, "yes-no-logprob": {}}
GENERATION = {"zp-lke-gen": {"num_examples": 10}, "hgp-gen": {}, "yes-no": {}, "wh": {}}


@pytest.fixture(scope="module")
def facts():
    from kgprobe.sources.embedded import load_embedded_kg

    kg = load_embedded_kg("countries")
    edges = [e for es in sample_facts(kg, 1, np.random.default_rng(0)).values() for e in es]
    assert len(edges) == 11
    return kg, edges


def _edges_for(kg, method, edges):
    if method != "wh":
        return edges
    return [e for e in edges if kg.out_degree(kg.triple(e).subject, kg.triple(e).predicate) < WH_MAX_OUT_DEGREE]


def _verdicts(kg, model, method, options, edges):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer-options warnings on small predicates are not under test
        return [correct for _, correct, _ in run_probe(kg, model, make_probe(method, **options), edges, seed=3)]


@pytest.mark.parametrize("method", list(SCORING) + list(GENERATION))
def test_verdicts_equal_transformers(vllm_server, smol, facts, method):
    kg, edges = facts
    edges = _edges_for(kg, method, edges)
    options = {**SCORING, **GENERATION}[method]
    with OpenAICompatibleModel(SERVED, vllm_server, max_concurrency=4) as served:
        got = _verdicts(kg, served, method, options, edges)
    want = _verdicts(kg, smol, method, options, edges)
    print(f"{method}: {sum(got)}/{len(got)} right on the server, {sum(want)}/{len(want)} with transformers")
    assert got == want


@pytest.mark.parametrize("method", ["yes-no", "wh"])
def test_question_probes_run_on_a_chat_only_endpoint(vllm_server, smol, facts, method):
    kg, edges = facts
    edges = _edges_for(kg, method, edges)
    with OpenAICompatibleModel(SERVED, vllm_server, api="chat") as chat:
        assert chat.can_score is False
        got = _verdicts(kg, chat, method, {}, edges)
    assert got == _verdicts(kg, smol, method, {}, edges)


def test_scoring_probe_on_a_chat_only_endpoint_is_a_clear_error(vllm_server, facts):
    kg, edges = facts
    with OpenAICompatibleModel(SERVED, vllm_server, api="chat") as chat, pytest.raises(ModelError, match="chat-only"):
        _verdicts(kg, chat, "zp-lke", SMALL, edges[:1])
