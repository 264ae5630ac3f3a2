"""The scoring path of kgprobe before the prefix-tree packing, kept as the baseline of ``kgprobe bench throughput``.

A frozen copy of the transformers backend's scoring as it was (landed code of
2026-11-22): one tokenizer call per request (each re-encoding its context), shared-prefix
rows planned and masked with Python loops per token, logits of every scored token.
It wraps a :class:`~kgprobe.models.hf_backend.TransformersModel` and uses only its
forward helpers (``_hidden``, ``_logits``), so both paths run the same network on the
same device; only the work around the network differs. Nothing but the benchmark uses
it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kgprobe.models.base import GenerateRequest, LanguageModel, ScoreRequest, ScoreResult
from kgprobe.models.hf_backend import cache_tensors, make_cache
from kgprobe.models.tokens import Encoded, common_prefix_len, encode_score_request


@dataclass
class _Row:
    """A packed row: a group's shared tokens, then each member's own tokens."""

    shared: list[int]
    members: list[tuple[int, list[int]]]  # (request index, tokens after the shared part)

    @property
    def length(self) -> int:
        return len(self.shared) + sum(len(tokens) for _, tokens in self.members)


class BaselineScorer(LanguageModel):
    """``model``'s network scored the old way (see the module docstring)."""

    def __init__(self, model):
        self._m = model

    def __getattr__(self, name):  # the wrapped model's settings and forward helpers
        return getattr(self._m, name)

    @property
    def identity(self) -> str:
        return self._m.identity + "|baseline-scoring"

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return self._m.generate(requests)

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        m = self._m
        encoded = [
            encode_score_request(m._tokenizer, i, r, add_bos=m.add_bos, start=m._start_token, window=m.max_length)
            for i, r in enumerate(requests)
        ]
        if not encoded:
            return []
        with m._torch.inference_mode():
            if not m.share_prefix:
                return self._score_full(encoded)
            results: list[ScoreResult | None] = [None] * len(encoded)
            for family in self._families(encoded):
                members = [encoded[i] for i in family]
                fits = m.sliding_window is None or max(len(e.ids) for e in members) < m.sliding_window
                scored = self._score_shared(members) if fits else self._score_full(members)
                for index, result in zip(family, scored):
                    results[index] = result
            return results  # type: ignore[return-value]

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
            prefix_cache = cache_tensors(cache)
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
            cache = make_cache(prefix_cache, len(batch)) if prefix_cache is not None else None
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
