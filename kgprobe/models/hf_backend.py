"""transformers backend: batched scoring with shared-prefix reuse, and batched generation.

Shared-prefix scoring
---------------------
A batch of score requests usually shares a lot: every fact of a relation has the same
50-example zero-prompt prefix, and all 100 options of a fact share the subject. The
backend works in two levels:

1. **Batch prefix.** The longest common token prefix of all sequences in the call is
   run once (batch 1) and its KV cache kept.
2. **Packed rows.** Requests with the same context form a group. A group becomes one
   row: the group's own shared tokens (what its sequences have in common after the
   batch prefix, e.g. the subject) followed by every request's remaining tokens
   (the option), packed back to back. A custom 4-D attention mask lets each option
   see the batch prefix, its group's shared tokens and its own earlier tokens, never a
   sibling option; position ids restart after the shared tokens for every option. So
   every token is run once, and the result equals scoring each sequence on its own.
   Rows are batched with padding; the prefix KV cache is expanded over the batch.

Models with sliding-window attention (e.g. Gemma-3, window 512) use the same path for a
family whose every sequence fits inside the window: there the window masks nothing, so
sliding and full attention are the same computation. A family with a longer sequence
gets plain batched full-sequence scoring, because the packed mask and cache would
bypass the window.

Tokenization and BOS
--------------------
Context and continuation are tokenized together; the continuation's tokens are those
whose character span ends after the context (found with offset mappings). A token that
straddles the boundary is counted as continuation. BOS is added by this backend, never
by the tokenizer: ``add_bos=None`` means "whatever the tokenizer does by default", read
once at load time and fixed in ``identity``. With no BOS and an empty context, the
first continuation token is conditioned on the EOS token (the lm-evaluation-harness
convention), so it still gets a log-probability.

Too-long inputs are refused
---------------------------
A sequence longer than the model window (``max_length``, default the model's
``max_position_embeddings``) raises :class:`~kgprobe.errors.InputError`. Truncating the
left of a zero-prompt context would silently drop examples and change what is measured,
so kgprobe refuses and says how to fix it (fewer examples, shorter prompts).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kgprobe.errors import InputError, ModelError
from kgprobe.models.base import (
    GenerateRequest,
    LanguageModel,
    ScoreRequest,
    ScoreResult,
    check_generate_request,
)
from kgprobe.models.tokens import (
    Encoded,
    TokenizedBackend,
    common_prefix_len,
    cut_at_stop,
    start_token,
)

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16"}


@dataclass
class _Row:
    """A packed row: a group's shared tokens, then each member's own tokens."""

    shared: list[int]
    members: list[tuple[int, list[int]]]  # (request index, tokens after the shared part)

    @property
    def length(self) -> int:
        return len(self.shared) + sum(len(tokens) for _, tokens in self.members)


def _resolve_device(device: str):
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {device!r} was requested but no CUDA GPU is available; use device='cpu'.")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise InputError(f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:N' or 'auto'.")
    return torch.device(device)


def _resolve_dtype(dtype, device):
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        # float32 on CPU: bfloat16 matmuls there are slow and less exact.
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    name = _DTYPES.get(str(dtype).lower())
    if name is None:
        raise InputError(f"unknown dtype {dtype!r}; use one of float32, bfloat16, float16, auto.")
    return getattr(torch, name)


def dtype_kwarg(dtype) -> dict:
    """``from_pretrained`` keyword for the weight dtype: ``dtype`` since transformers 4.56,
    ``torch_dtype`` before."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def _cache_tensors(cache) -> list[tuple]:
    """(key, value) per layer from a transformers cache object (4.x and 5.x layouts)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]


def _make_cache(tensors: list[tuple], batch: int):
    """A DynamicCache holding ``tensors`` expanded to ``batch`` rows."""
    from transformers import DynamicCache

    expanded = [(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in tensors]
    try:
        return DynamicCache(ddp_cache_data=expanded)
    except TypeError:  # transformers 4.x
        return DynamicCache.from_legacy_cache(tuple(expanded))


class _no_progress_bars:
    """Hide transformers' per-load "Loading weights" bar: loading a local copy takes a
    second, and the engine and the API leave the terminal to their caller."""

    def __enter__(self):
        from transformers.utils import logging

        self._was_enabled = logging.is_progress_bar_enabled()
        logging.disable_progress_bar()

    def __exit__(self, *exc):
        from transformers.utils import logging

        if self._was_enabled:
            logging.enable_progress_bar()


def _stop_criteria(tokenizer, stops_per_row: list[list[str]], prompt_width: int):
    """Stop each row once its *generated* text contains one of that row's stop strings.

    transformers' own ``stop_strings`` also matches text that overlaps the end of the
    prompt (prompt "... is" + stop "s " stops after one token), so kgprobe checks only
    the new tokens.
    """
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopOnGeneratedText(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            done = [
                bool(stops) and any(s in tokenizer.decode(row[prompt_width:], skip_special_tokens=True) for s in stops)
                for row, stops in zip(input_ids, stops_per_row)
            ]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([StopOnGeneratedText()])


class TransformersModel(TokenizedBackend, LanguageModel):
    """A causal LM from a local directory or hub id, run with transformers.

    Args:
        path_or_id: a model directory (config + weights + tokenizer) or a hub id.
        device: ``"cpu"``, ``"cuda"``/``"cuda:N"`` or ``"auto"``.
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"`` (float32 on CPU).
        batch_size: maximum rows per forward pass.
        max_length: the model window in tokens; longer requests are refused.
        add_bos: prepend BOS (True), never (False), or the tokenizer's default (None).
        label: the model's name in ``identity`` (default: the resolved path or id).
        share_prefix: use shared-prefix scoring (False: every sequence on its own).
        batch_tokens: token budget of one forward pass (rows × padded row length).
    """

    def __init__(
        self,
        path_or_id: str,
        *,
        device: str = "cpu",
        dtype="float32",
        batch_size: int = 16,
        max_length: int | None = None,
        add_bos: bool | None = None,
        label: str | None = None,
        share_prefix: bool = True,
        batch_tokens: int = 4096,
        _model=None,
        _tokenizer=None,
    ):
        import torch

        self.device = _resolve_device(device)
        self.dtype = _resolve_dtype(dtype, self.device)
        if batch_size < 1 or batch_tokens < 1:
            raise InputError("batch_size and batch_tokens must be positive.")
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.share_prefix = share_prefix
        if _model is not None:
            self._model, self._tokenizer = _model, _tokenizer
            self._label = label or "in-memory"
        else:
            self._model, self._tokenizer = self._load(path_or_id)
            self._label = label or (
                str(Path(path_or_id).resolve()) if Path(path_or_id).exists() else path_or_id
            )
        self._model.to(device=self.device, dtype=self.dtype)
        self._model.eval()
        config = self._model.config
        self._softcap = getattr(config, "final_logit_softcapping", None)
        sliding = getattr(config, "sliding_window", None)
        uses_sliding = getattr(config, "use_sliding_window", True) is not False and (
            getattr(config, "layer_types", None) is None or "sliding_attention" in config.layer_types
        )
        #: The attention window of sliding-window layers, None when the model has none.
        self.sliding_window = int(sliding) if sliding and uses_sliding else None
        tok = self._tokenizer
        if add_bos is None:
            with_special = tok("a").input_ids
            add_bos = bool(tok.bos_token_id is not None and with_special and with_special[0] == tok.bos_token_id)
        if add_bos and tok.bos_token_id is None:
            raise InputError("add_bos=True but the tokenizer has no BOS token.")
        self.add_bos = bool(add_bos)
        self._start_token = start_token(tok)
        window = max_length or getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        if window is None and tok.model_max_length and tok.model_max_length < 10**7:
            window = tok.model_max_length
        self.max_length = int(window) if window else None
        #: Tokens run through the model (padding excluded), and padding tokens, since creation.
        self.tokens_run = 0
        self.tokens_padded = 0
        self._torch = torch

    # ------------------------------------------------------------------ loading
    @staticmethod
    def _load(path_or_id: str):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path_or_id).expanduser()
        # Hub ids look like "name" or "org/name"; anything else is meant as a local path.
        looks_local = path_or_id.startswith((".", "/", "~")) or path_or_id.count("/") > 1
        if not path.exists() and looks_local:
            raise ModelError(f"model directory {path} does not exist; give a directory with config.json "
                             "and weights, a hub id, or `default`.")
        if path.exists() and not (path / "config.json").is_file():
            raise ModelError(f"{path} is not a transformers model directory (no config.json).")
        source = str(path) if path.exists() else path_or_id
        try:
            with _no_progress_bars():
                tokenizer = AutoTokenizer.from_pretrained(source)
                model = AutoModelForCausalLM.from_pretrained(source, **dtype_kwarg(torch.float32))
        except Exception as exc:  # corrupt weights, unknown architecture, no network for a hub id
            raise ModelError(
                f"cannot load model {path_or_id!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}. "
                "Check that the directory holds complete, uncorrupted weights (re-download or, for the "
                "default model, run `kgprobe models install-default --force`)."
            ) from exc
        return model, tokenizer

    @classmethod
    def from_components(cls, model, tokenizer, *, label: str, **kwargs) -> "TransformersModel":
        """Wrap an already-built model and tokenizer (used for the tiny test model)."""
        return cls(label, _model=model, _tokenizer=tokenizer, label=label, **kwargs)

    # ------------------------------------------------------------------ interface
    @property
    def identity(self) -> str:
        dtype = str(self.dtype).replace("torch.", "")
        return f"transformers:{self._label}|dtype={dtype}|bos={int(self.add_bos)}"

    @property
    def model(self):
        return self._model

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Log-probabilities of each continuation, with shared-prefix reuse."""
        encoded = [self._encode_checked(i, r) for i, r in enumerate(requests)]
        if not encoded:
            return []
        with self._torch.inference_mode():
            if not self.share_prefix:
                return self._score_full(encoded)
            results: list[ScoreResult | None] = [None] * len(encoded)
            for family in self._families(encoded):
                members = [encoded[i] for i in family]
                fits = self.sliding_window is None or max(len(e.ids) for e in members) < self.sliding_window
                scored = self._score_shared(members) if fits else self._score_full(members)
                for index, result in zip(family, scored):
                    results[index] = result
            return results  # type: ignore[return-value]

    def score_unshared(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Reference scoring: every sequence run on its own (batched with padding)."""
        encoded = [self._encode_checked(i, r) for i, r in enumerate(requests)]
        with self._torch.inference_mode():
            return self._score_full(encoded)

    # ------------------------------------------------------------------ forward helpers
    def _hidden(self, input_ids, attention_mask, position_ids, cache=None, use_cache=False):
        base = getattr(self._model, self._model.base_model_prefix)
        out = base(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=use_cache,
        )
        return out.last_hidden_state, (out.past_key_values if use_cache else None)

    def _logits(self, hidden):
        logits = self._model.get_output_embeddings()(hidden).float()
        if self._softcap:
            logits = self._torch.tanh(logits / self._softcap) * self._softcap
        return logits

    def _gather_results(self, hidden_rows, targets) -> list[tuple[tuple[float, ...], bool]]:
        """``hidden_rows``: [N, H] hidden states predicting ``targets`` ([N] token ids)."""
        torch = self._torch
        logprobs, greedy = [], []
        for start in range(0, hidden_rows.shape[0], 512):
            logits = self._logits(hidden_rows[start : start + 512])
            tgt = targets[start : start + 512]
            logprobs.append(torch.log_softmax(logits, dim=-1).gather(1, tgt[:, None])[:, 0])
            greedy.append(logits.argmax(dim=-1) == tgt)
        return torch.cat(logprobs).tolist(), torch.cat(greedy).tolist()

    # ------------------------------------------------------------------ plain scoring
    def _score_full(self, encoded: list[Encoded]) -> list[ScoreResult]:
        torch = self._torch
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        results: list[ScoreResult | None] = [None] * len(encoded)
        pad = self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else 0
        i = 0
        while i < len(order):
            longest = len(encoded[order[i]].ids)
            batch = [order[i]]
            i += 1
            while i < len(order) and len(batch) < self.batch_size:
                longest_next = len(encoded[order[i]].ids)
                if (len(batch) + 1) * longest_next > self.batch_tokens:
                    break
                batch.append(order[i])
                longest = longest_next
                i += 1
            ids = torch.full((len(batch), longest), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), longest), dtype=torch.long)
            for row, index in enumerate(batch):
                seq = encoded[index].ids
                ids[row, : len(seq)] = torch.tensor(seq)
                mask[row, : len(seq)] = 1
            self.tokens_run += int(mask.sum())
            self.tokens_padded += int(mask.numel() - mask.sum())
            positions = torch.arange(longest)[None, :].expand(len(batch), -1)
            hidden, _ = self._hidden(ids.to(self.device), mask.to(self.device), positions.to(self.device))
            rows, cols, targets, owners = [], [], [], []
            for row, index in enumerate(batch):
                enc = encoded[index]
                for p in range(enc.boundary, len(enc.ids)):
                    rows.append(row)
                    cols.append(p - 1)
                    targets.append(enc.ids[p])
                    owners.append(index)
            picked = hidden[torch.tensor(rows), torch.tensor(cols)]
            self._assign(results, owners, *self._gather_results(picked, torch.tensor(targets, device=self.device)))
        return results  # type: ignore[return-value]

    @staticmethod
    def _assign(results, owners, logprobs, greedy) -> None:
        per: dict[int, tuple[list[float], list[bool]]] = {}
        for owner, lp, g in zip(owners, logprobs, greedy):
            entry = per.setdefault(owner, ([], []))
            entry[0].append(float(lp))
            entry[1].append(bool(g))
        for owner, (lps, gs) in per.items():
            results[owner] = ScoreResult(tuple(lps), all(gs))

    # ------------------------------------------------------------------ shared-prefix scoring
    def _families(self, encoded: list[Encoded]) -> list[list[int]]:
        """Split request indices into families, each scored with its own batch prefix.

        A batch can mix relations, each with its own long example prefix and only a few
        tokens in common. In sorted order, the common prefix of a run of sequences is the
        minimum of adjacent common prefixes ``m``; cutting where it is reached gives
        sub-runs with longer prefixes ``L_j``. Cutting costs ``m`` tokens per extra family
        and saves ``L_j - m`` tokens for every context after the first in sub-run ``j``
        (otherwise each context's row recomputes them), so cut when that pays, recursively.
        """
        order = sorted(range(len(encoded)), key=lambda i: encoded[i].ids)
        adjacent = [
            common_prefix_len(encoded[a].ids, encoded[b].ids, 1 << 30) for a, b in zip(order, order[1:])
        ]
        contexts = [tuple(encoded[i].ids[: encoded[i].boundary]) for i in order]

        def split(lo: int, hi: int) -> list[list[int]]:  # sorted positions [lo, hi)
            if hi - lo < 2:
                return [order[lo:hi]]
            inner = adjacent[lo : hi - 1]
            m = min(inner)
            cuts = [lo] + [lo + 1 + k for k, v in enumerate(inner) if v == m] + [hi]
            parts = list(zip(cuts, cuts[1:]))
            saved = sum(
                (len(set(contexts[a:b])) - 1) * ((min(adjacent[a : b - 1]) if b - a > 1 else m) - m)
                for a, b in parts
            )
            if len(parts) < 2 or saved <= (len(parts) - 1) * m:
                return [order[lo:hi]]
            return [family for a, b in parts for family in split(a, b)]

        return split(0, len(order))

    def _plan_rows(self, encoded: list[Encoded], prefix_len: int) -> list[_Row]:
        groups: dict[tuple[int, ...], list[int]] = {}
        for index, enc in enumerate(encoded):
            groups.setdefault(tuple(enc.ids[prefix_len : enc.boundary]), []).append(index)
        max_row = max(self.batch_tokens // 2, 1)
        rows: list[_Row] = []
        for members in groups.values():
            first = encoded[members[0]].ids
            # Every member must keep at least one own token so its first target has a query.
            shared_len = min(len(encoded[m].ids) for m in members) - 1
            for m in members[1:]:
                shared_len = common_prefix_len(first, encoded[m].ids, shared_len)
            shared = first[prefix_len:shared_len]
            row = _Row(list(shared), [])
            for m in members:
                own = encoded[m].ids[shared_len:]
                if row.members and row.length + len(own) > max_row:
                    rows.append(row)
                    row = _Row(list(shared), [])
                row.members.append((m, own))
            rows.append(row)
        return rows

    def _row_mask_and_positions(self, rows: list[_Row], prefix_len: int, width: int):
        """4-D additive mask [B, 1, width, prefix_len + width] and position ids [B, width]."""
        torch = self._torch
        segment = torch.full((len(rows), width), -1, dtype=torch.long)
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            n_shared = len(row.shared)
            segment[r, :n_shared] = 0
            positions[r, :n_shared] = torch.arange(prefix_len, prefix_len + n_shared)
            offset = n_shared
            for j, (_, own) in enumerate(row.members, start=1):
                segment[r, offset : offset + len(own)] = j
                positions[r, offset : offset + len(own)] = torch.arange(
                    prefix_len + n_shared, prefix_len + n_shared + len(own)
                )
                offset += len(own)
            positions[r, offset:] = prefix_len + n_shared
        query = torch.arange(width)
        causal = query[None, :] <= query[:, None]  # [q, k]
        seg_q = segment[:, :, None]
        seg_k = segment[:, None, :]
        allowed_row = causal[None] & ((seg_k == seg_q) | (seg_k == 0))
        allowed = torch.cat(
            [torch.ones((len(rows), width, prefix_len), dtype=torch.bool), allowed_row], dim=2
        )
        mask = torch.zeros(allowed.shape, dtype=self.dtype)
        mask.masked_fill_(~allowed, torch.finfo(self.dtype).min)
        return mask[:, None], positions

    def _score_shared(self, encoded: list[Encoded]) -> list[ScoreResult]:
        torch = self._torch
        limit = min(len(e.ids) for e in encoded) - 1
        first = encoded[0].ids
        prefix_len = limit
        for enc in encoded[1:]:
            prefix_len = common_prefix_len(first, enc.ids, prefix_len)
        prefix_cache = None
        prefix_hidden = None  # hidden states of prefix positions [keep_from, prefix_len)
        keep_from = prefix_len
        if prefix_len > 0:
            keep_from = min(prefix_len, min(e.boundary for e in encoded) - 1)
            ids = torch.tensor([first[:prefix_len]], device=self.device)
            positions = torch.arange(prefix_len, device=self.device)[None]
            hidden, cache = self._hidden(ids, None, positions, cache=None, use_cache=True)
            self.tokens_run += prefix_len
            prefix_cache = _cache_tensors(cache)
            prefix_hidden = hidden[0, keep_from:prefix_len]

        rows = self._plan_rows(encoded, prefix_len)
        order = sorted(range(len(rows)), key=lambda r: rows[r].length)
        results: list[ScoreResult | None] = [None] * len(encoded)
        pad = self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else 0
        # The prefix KV cache is copied into every row of a batch; with a long prefix that
        # copy, not the rows, dominates memory, so long prefixes get fewer rows per batch.
        max_rows = max(1, min(self.batch_size, (8 * self.batch_tokens) // max(prefix_len, 1)))
        i = 0
        while i < len(order):
            batch = [rows[order[i]]]
            i += 1
            while i < len(order) and len(batch) < max_rows and (
                (len(batch) + 1) * rows[order[i]].length <= self.batch_tokens
            ):
                batch.append(rows[order[i]])
                i += 1
            width = max(row.length for row in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            for r, row in enumerate(batch):
                tokens = row.shared + [t for _, own in row.members for t in own]
                ids[r, : len(tokens)] = torch.tensor(tokens)
                self.tokens_run += len(tokens)
                self.tokens_padded += width - len(tokens)
            mask, positions = self._row_mask_and_positions(batch, prefix_len, width)
            cache = _make_cache(prefix_cache, len(batch)) if prefix_cache is not None else None
            hidden, _ = self._hidden(
                ids.to(self.device), mask.to(self.device), positions.to(self.device), cache=cache, use_cache=cache is not None
            )
            # Rows of `pool`: the kept prefix positions, then every row position of this batch.
            n_kept = 0 if prefix_hidden is None else prefix_hidden.shape[0]
            flat = hidden.reshape(-1, hidden.shape[-1])
            pool = flat if n_kept == 0 else torch.cat([prefix_hidden, flat])
            picked, targets, owners = [], [], []
            for r, row in enumerate(batch):
                offset = len(row.shared)
                for index, own in row.members:
                    enc = encoded[index]
                    shared_end = len(enc.ids) - len(own)  # == prefix_len + len(row.shared)
                    for p in range(enc.boundary - 1, len(enc.ids) - 1):
                        if p < prefix_len:
                            picked.append(p - keep_from)
                        elif p < shared_end:
                            picked.append(n_kept + r * width + p - prefix_len)
                        else:
                            picked.append(n_kept + r * width + offset + p - shared_end)
                        targets.append(enc.ids[p + 1])
                        owners.append(index)
                    offset += len(own)
            self._assign(
                results,
                owners,
                *self._gather_results(
                    pool[torch.tensor(picked, device=self.device)], torch.tensor(targets, device=self.device)
                ),
            )
        return results  # type: ignore[return-value]

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """Greedy requests are batched (left padding); sampled ones run one by one, seeded."""
        torch = self._torch
        prompts = []
        for index, request in enumerate(requests):
            check_generate_request(index, request)
            ids = self._prompt_ids(request)
            if self.max_length is not None and len(ids) + request.max_tokens > self.max_length:
                raise InputError(
                    f"generate request {index}: prompt of {len(ids)} tokens plus max_tokens="
                    f"{request.max_tokens} exceeds the model window of {self.max_length} tokens; "
                    "shorten the prompt (kgprobe does not truncate)."
                )
            prompts.append(ids)
        outputs: list[str | None] = [None] * len(requests)
        greedy_groups: dict[int, list[int]] = {}
        with torch.inference_mode():
            for index, request in enumerate(requests):
                if request.temperature == 0:
                    greedy_groups.setdefault(request.max_tokens, []).append(index)
                else:
                    outputs[index] = self._generate_batch([prompts[index]], request, seed=request.seed)[0]
            for max_tokens, members in greedy_groups.items():
                members.sort(key=lambda m: len(prompts[m]))
                for start in range(0, len(members), self.batch_size):
                    chunk = members[start : start + self.batch_size]
                    texts = self._generate_batch([prompts[m] for m in chunk], requests[chunk[0]], seed=None,
                                                 stops_per_row=[list(requests[m].stop) for m in chunk])
                    for m, text in zip(chunk, texts):
                        outputs[m] = text
        return [cut_at_stop(text, request.stop) for text, request in zip(outputs, requests)]

    def _generate_batch(self, prompts: list[list[int]], request: GenerateRequest, *, seed,
                        stops_per_row: list[list[str]] | None = None) -> list[str]:
        """Generate for prompts sharing ``request``'s settings; each row stops on its own strings."""
        torch = self._torch
        from transformers import GenerationConfig

        tok = self._tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, width - len(p) :] = torch.tensor(p)
            mask[r, width - len(p) :] = 1
        sampled = request.temperature > 0
        if stops_per_row is None:
            stops_per_row = [list(request.stop)] * len(prompts)
        stops_per_row = [[s for s in stops if s] for stops in stops_per_row]
        config = GenerationConfig(
            max_new_tokens=request.max_tokens,
            do_sample=sampled,
            temperature=request.temperature if sampled else None,
            top_k=None,
            top_p=None,
            pad_token_id=pad,
            eos_token_id=tok.eos_token_id,
        )
        if sampled:
            torch.manual_seed(seed if seed is not None else int.from_bytes(os.urandom(4), "little"))
        out = self._model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            generation_config=config,
            stopping_criteria=_stop_criteria(tok, stops_per_row, width) if any(stops_per_row) else None,
        )
        self.tokens_run += int(mask.sum()) + int(out.shape[1] - width) * len(prompts)
        return [tok.decode(row[width:], skip_special_tokens=True) for row in out]
