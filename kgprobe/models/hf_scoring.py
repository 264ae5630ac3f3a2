"""transformers backend, scoring: batched log-probs with shared-prefix reuse.

Shared-prefix scoring
---------------------
A batch of score requests usually shares a lot: every fact of a relation has the same
50-example zero-prompt prefix, and all 100 options of a fact share the subject. The
backend works in two levels:

1. **Families.** Requests with the same context form a group; groups whose contexts
   share a long token prefix (one relation's fixed examples) form a family, whose common
   prefix is run once (batch 1) and its KV cache kept. Groups sharing nothing worth
   caching (each fact with its own examples, as in real runs) go together into one
   family with no cached prefix, so they batch well.
2. **Prefix trees.** A group becomes one row: the group's common tokens as a chain, then
   every request's remaining tokens as a prefix tree (options starting with the same
   tokens share those nodes). A 4-D mask lets each node see the family prefix and its
   own ancestors, never a sibling; its position id is its depth. So every distinct token
   prefix is run once, and the result equals scoring each sequence on its own. A tree's
   leaves (an option's last token: it predicts nothing and nothing attends to it) are
   not run at all. Plans, masks and gather indices are numpy array operations
   (:mod:`kgprobe.models.packing`), turned into tensors on the model's device once per
   batch. A batch whose chains are long (each fact its own examples) runs in two passes:
   the chains causally with no mask (SDPA's causal kernel), then the trees over the
   cached prefix + chain keys with a [tree, keys] mask, instead of one pass under a
   dense [width, width] mask (measured ~40 % less forward time on 5 facts of 50 × 100).
3. **Output layer.** The vocabulary log-sum-exp is computed once per distinct
   predicting node (all options of a fact share the node after the context), and each
   scored token's logit is gathered on its own. The argmax (for greedy flags) is found
   only for nodes where one of their scored tokens lies in the vocabulary slice holding
   the node's maximum; elsewhere no scored token can be the argmax.

Models with sliding-window attention (e.g. Gemma-3, window 512) use the same path for a
family whose every sequence fits inside the window: there the window masks nothing, so
sliding and full attention are the same computation. A family with a longer sequence
gets plain batched full-sequence scoring, because the packed mask and cache would
bypass the window.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from kgprobe.models import packing
from kgprobe.models.base import ScoreRequest, ScoreResult
from kgprobe.models.tokens import Encoded

#: Vocabulary columns per slice of the CPU float32 log-sum-exp (:meth:`PackedScoring._sliced_stats`):
#: a slice of ~200 rows stays in a core's L2 cache.
SLICE = 512

#: Shortest chain (tokens) for which a batch runs as chains then trees (two passes)
#: rather than as one pass under a dense [width, width] mask.
SPLIT_MIN_CHAIN = 64


def cache_tensors(cache) -> list[tuple]:
    """(key, value) per layer from a transformers cache object (4.x and 5.x layouts)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]


def make_cache(tensors: list[tuple], batch: int):
    """A DynamicCache holding ``tensors`` expanded to ``batch`` rows."""
    from transformers import DynamicCache

    expanded = [(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in tensors]
    try:
        return DynamicCache(ddp_cache_data=expanded)
    except TypeError:  # transformers 4.x
        return DynamicCache.from_legacy_cache(tuple(expanded))


class PackedScoring:
    """The scoring half of :class:`~kgprobe.models.hf_backend.TransformersModel` (a mixin:
    the model, tokenizer, device and batch sizes are the backend's)."""

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Log-probabilities of each continuation, packed as prefix trees (see the module notes)."""
        start = time.perf_counter()
        try:
            encoded = self._encode_all(requests)
            self.phase_seconds["tokenize"] += time.perf_counter() - start
            if not encoded:
                return []
            with self._torch.inference_mode():
                if not self.share_prefix:
                    return self._score_full(encoded, list(range(len(encoded))))
                return self._score_packed(encoded, [r.context for r in requests])
        finally:
            self.phase_seconds["total"] += time.perf_counter() - start

    def score_unshared(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Reference scoring: every sequence run on its own (batched with padding)."""
        encoded = self._encode_all(requests)
        with self._torch.inference_mode():
            return self._score_full(encoded, list(range(len(encoded))))

    # ------------------------------------------------------------------ forward helpers
    def _hidden(self, input_ids, attention_mask, position_ids, cache=None, use_cache=False):
        start = time.perf_counter()
        base = getattr(self._model, self._model.base_model_prefix)
        out = base(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=use_cache,
        )
        self.phase_seconds["forward"] += time.perf_counter() - start
        return out.last_hidden_state, (out.past_key_values if use_cache else None)

    def _logits(self, hidden):
        logits = self._model.get_output_embeddings()(hidden).float()
        if self._softcap:
            logits = self._torch.tanh(logits / self._softcap) * self._softcap
        return logits

    def _position_stats(self, hidden, wanted=None):
        """``(logsumexp [N], argmax [N])`` of the logits of ``hidden`` ([N, H]) over the vocabulary.

        On CPU in float32 the vocabulary is walked in slices (:meth:`_sliced_stats`): the
        [N, vocabulary] logits never exist at once, which keeps them in cache. Elsewhere
        rows go in chunks through the output layer as in :meth:`_logits`.

        ``wanted``: optional ``(rows [E], tokens [E])`` tensors, the tokens whose greedy
        flag the caller needs; on the sliced path the argmax is then found only for rows
        where one of their wanted tokens lies in the vocabulary slice holding the row's
        maximum, and is -1 (no token) elsewhere: there none of the row's wanted tokens can
        be the argmax, so every greedy flag is the same as with the full argmax.
        """
        torch = self._torch
        n = hidden.shape[0]
        self.positions_run += n
        self.output_layer_calls += 1
        if self._vocab_sliced:
            return self._sliced_stats(hidden, wanted)
        lse, arg = [], []
        rows = self._logit_rows
        for lo in range(0, n, rows):
            logits = self._logits(hidden[lo : lo + rows])
            lse.append(torch.logsumexp(logits, dim=-1))
            arg.append(logits.argmax(dim=-1))
        return torch.cat(lse), torch.cat(arg)

    def _sliced_stats(self, hidden, wanted=None):
        """The exact log-sum-exp over vocabulary slices of :data:`SLICE` columns (CPU float32).

        Per slice: one matrix product into a reused buffer (no allocation, so no page
        faults), the slice maximum of each row stored in a [N, slices] matrix, then
        ``exp(x - max)`` in place and its row sums into a second [N, slices] matrix. After
        the loop both matrices combine into the log-sum-exp with array operations
        (``M + log(sum_s sums_s * exp(max_s - M))``, M the row maximum), so the loop holds
        no per-row running updates. Every exponent is <= 0: nothing overflows, and the
        result equals ``torch.logsumexp`` of the full logits to float rounding.
        """
        torch = self._torch
        head = self._model.get_output_embeddings()
        weight, bias = head.weight, head.bias
        n, vocab, step = hidden.shape[0], weight.shape[0], SLICE
        slices = (vocab + step - 1) // step
        tops = torch.empty((n, slices), dtype=torch.float32)
        sums = torch.empty((n, slices), dtype=torch.float32)
        buf = torch.empty((n, step), dtype=torch.float32)
        for s in range(slices):
            lo = s * step
            x = self._head_slice(hidden, weight, bias, lo, step, out=buf)
            top = tops[:, s]
            torch.amax(x, dim=-1, out=top)  # max with indices costs several times more per slice
            x.sub_(top[:, None]).exp_()
            torch.sum(x, dim=-1, out=sums[:, s])
        best = tops.amax(dim=1)
        best_slice = tops.argmax(dim=1)  # the first slice holding the maximum: the first maximum wins
        lse = best + torch.log((sums * torch.exp(tops - best[:, None])).sum(dim=1))
        index = torch.full((n,), -1, dtype=torch.long)
        if wanted is None:
            need = torch.arange(n)
        else:
            rows, tokens = wanted
            need = torch.unique(rows[best_slice[rows] == torch.div(tokens, step, rounding_mode="floor")])
        # The argmax inside each needed row's best slice, recomputing only those slices.
        if need.numel():
            slice_of = best_slice[need]
            for s in torch.unique(slice_of).tolist():
                rows_s = need[slice_of == s]
                x = self._head_slice(hidden[rows_s], weight, bias, s * step, step)
                index[rows_s] = x.argmax(dim=-1) + s * step
        return lse, index

    def _head_slice(self, hidden, weight, bias, lo: int, step: int, out=None):
        w = weight[lo : lo + step]
        x = hidden @ w.T if out is None else self._torch.mm(hidden, w.T, out=out[:, : w.shape[0]])
        if bias is not None:
            x += bias[lo : lo + step]
        if self._softcap:
            x = self._torch.tanh(x / self._softcap) * self._softcap
        return x

    def _target_logits(self, hidden, targets):
        """Logit of ``targets[i]`` after ``hidden[i]`` without the full logit rows (CPU float32)."""
        head = self._model.get_output_embeddings()
        x = (hidden * head.weight[targets]).sum(-1)
        if head.bias is not None:
            x = x + head.bias[targets]
        if self._softcap:
            x = self._torch.tanh(x / self._softcap) * self._softcap
        return x

    def _logits_rows_at(self, hidden, targets):
        torch = self._torch
        out = []
        rows = self._logit_rows
        for lo in range(0, hidden.shape[0], rows):
            logits = self._logits(hidden[lo : lo + rows])
            out.append(logits.gather(1, targets[lo : lo + rows, None])[:, 0])
        return torch.cat(out)

    def _score_entries(self, pool, positions: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log-prob and greedy flag of each (row of ``pool``, target) entry; each distinct
        row's log-sum-exp is computed once (sibling options share their predicting node)."""
        torch = self._torch
        start = time.perf_counter()
        rows, inverse = np.unique(positions, return_inverse=True)
        hidden = pool[torch.from_numpy(rows).to(self.device)]
        inv = torch.from_numpy(inverse.reshape(-1)).to(self.device)
        tgt = torch.from_numpy(targets).to(self.device)
        lse, argmax = self._position_stats(hidden, (inv, tgt))
        if self._vocab_sliced:
            picked = self._target_logits(hidden[inv], tgt)
        else:  # the same logits as the log-sum-exp, so the two roundings agree in bfloat16
            picked = self._logits_rows_at(hidden[inv], tgt)
        logprob = picked.float() - lse[inv]
        greedy = argmax[inv] == tgt
        out = logprob.cpu().numpy(), greedy.cpu().numpy()
        self.phase_seconds["output_layer"] += time.perf_counter() - start
        return out

    @staticmethod
    def _results(n: int, owners: list[np.ndarray], logprobs: list[np.ndarray], greedy: list[np.ndarray],
                 into: list | None = None, order: Sequence[int] | None = None) -> list[ScoreResult]:
        """ScoreResults from entries (owner request, log-prob, greedy) whose entries of one
        owner are contiguous and in token order."""
        own = np.concatenate(owners) if owners else np.zeros(0, np.int64)
        lp = np.concatenate(logprobs) if logprobs else np.zeros(0)
        gr = np.concatenate(greedy) if greedy else np.zeros(0, bool)
        sort = np.argsort(own, kind="stable")
        own, lp, gr = own[sort], lp[sort].tolist(), gr[sort]
        bounds = np.flatnonzero(np.diff(own)) + 1
        starts = [0, *bounds.tolist()]
        ends = [*bounds.tolist(), len(own)]
        all_greedy = np.logical_and.reduceat(gr, starts).tolist() if len(own) else []
        results = into if into is not None else [None] * n
        for owner, a, b, g in zip(own[starts].tolist() if len(own) else [], starts, ends, all_greedy):
            results[owner if order is None else order[owner]] = ScoreResult(tuple(lp[a:b]), bool(g))
        return results

    # ------------------------------------------------------------------ plain scoring
    def _score_full(self, encoded: list[Encoded], which: list[int], into: list | None = None) -> list[ScoreResult]:
        """Every sequence ``encoded[i]`` (i in ``which``) run on its own, batched with padding."""
        order = sorted(which, key=lambda i: len(encoded[i].ids))
        results = into if into is not None else [None] * len(encoded)
        pad = self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else 0
        i = 0
        while i < len(order):
            batch = [order[i]]
            i += 1
            while i < len(order) and len(batch) < self.batch_size and (
                (len(batch) + 1) * len(encoded[order[i]].ids) <= self.batch_tokens
            ):
                batch.append(order[i])
                i += 1
            ids, lengths = packing.padded([encoded[b].ids for b in batch], pad=pad)
            ids[ids < 0] = pad
            longest = ids.shape[1]
            mask = np.arange(longest)[None, :] < lengths[:, None]
            self.tokens_run += int(lengths.sum())
            self.tokens_padded += int(mask.size - lengths.sum())
            positions = np.broadcast_to(np.arange(longest)[None, :], ids.shape)
            hidden, _ = self._hidden(*self._tensors(ids, mask.astype(np.int64), positions))
            boundaries = np.array([encoded[b].boundary for b in batch])
            counts = lengths - boundaries
            row = np.repeat(np.arange(len(batch)), counts)
            p = np.repeat(boundaries, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
            flat = hidden.reshape(-1, hidden.shape[-1])
            lp, gr = self._score_entries(flat, row * longest + p - 1, ids[row, p])
            self._results(len(encoded), [np.asarray(batch)[row]], [lp], [gr], into=results)
        return results  # type: ignore[return-value]

    def _tensors(self, *arrays):
        """numpy arrays as tensors on the model's device."""
        return tuple(self._torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for a in arrays)

    # ------------------------------------------------------------------ packed scoring
    def _score_packed(self, encoded: list[Encoded], contexts: list[str]) -> list[ScoreResult]:
        """Families of context groups, each with its prefix run once and its groups packed
        as prefix trees (:mod:`kgprobe.models.packing`)."""
        groups: dict[tuple, list[int]] = {}
        for i, enc in enumerate(encoded):
            # Requests with one context share its encoded head (the same ids).
            key = (enc.shared, contexts[i]) if enc.shared else (0, i)
            groups.setdefault(key, []).append(i)
        members = list(groups.values())
        reps = []  # each group's common token prefix
        for group in members:
            first = encoded[group[0]]
            shared = first.shared
            if len(group) == 1:
                reps.append(first.ids)
                continue
            rests, lengths = packing.padded([encoded[i].ids[shared:] for i in group])
            same = np.cumprod((rests == rests[:1]) & (rests >= 0), axis=1).sum(axis=1)
            reps.append(first.ids[: shared + int(same.min())])
        results: list[ScoreResult | None] = [None] * len(encoded)
        # A family of one group would run its context as a prefix (batch 1) and then its
        # tree alone; as a row of a shared family it runs the same tokens, batched.
        fams = packing.families(reps)
        single = [f[0] for f in fams if len(f) == 1]
        fams = [f for f in fams if len(f) > 1] + ([single] if single else [])
        for family in fams:
            which = [i for g in family for i in members[g]]
            longest = max(len(encoded[i].ids) for i in which)
            if self.sliding_window is not None and longest >= self.sliding_window:
                self._score_full(encoded, which, into=results)
            else:
                self._score_family(encoded, [members[g] for g in family], [reps[g] for g in family], results)
        return results  # type: ignore[return-value]

    def _score_family(self, encoded, groups: list[list[int]], reps: list[list[int]], results: list) -> None:
        torch = self._torch
        which = [i for g in groups for i in g]
        prefix_len = min(len(encoded[i].ids) for i in which) - 1
        for rep in reps:
            prefix_len = min(prefix_len, packing.lcp(reps[0], rep))
        prefix_ids = np.asarray(reps[0][:prefix_len], dtype=np.int64)
        prefix_cache = prefix_hidden = None
        keep_from = prefix_len
        if prefix_len > 0:
            keep_from = min(prefix_len, min(encoded[i].boundary for i in which) - 1)
            ids = torch.from_numpy(prefix_ids[None]).to(self.device)
            positions = torch.arange(prefix_len, device=self.device)[None]
            hidden, cache = self._hidden(ids, None, positions, cache=None, use_cache=True)
            self.tokens_run += prefix_len
            prefix_cache = cache_tensors(cache)
            prefix_hidden = hidden[0, keep_from:prefix_len]
        max_row = max(self.batch_tokens // 2, 1)
        rows: list[packing.Row] = []
        for group, rep in zip(groups, reps):
            chain = rep[prefix_len:]
            rests = [encoded[i].ids[len(rep):] for i in group]
            rows.extend(packing.group_rows(chain, rests, group, max_row))
        order = sorted(range(len(rows)), key=lambda r: rows[r].length)
        # The prefix KV cache is copied into every row of a batch; with a long prefix that
        # copy, not the rows, dominates memory, so long prefixes get fewer rows per batch.
        max_rows = max(1, min(self.batch_size, (8 * self.batch_tokens) // max(prefix_len, 1)))
        n_kept = 0 if prefix_hidden is None else prefix_hidden.shape[0]
        owners, logprobs, greedy = [], [], []
        i = 0
        while i < len(order):
            batch = [rows[order[i]]]
            i += 1
            while i < len(order) and len(batch) < max_rows and (
                (len(batch) + 1) * rows[order[i]].length <= self.batch_tokens
            ):
                batch.append(rows[order[i]])
                i += 1
            if self._split_rows(batch):
                pool, where = self._run_split(batch, prefix_len, prefix_cache)
            else:
                ids, positions, allowed, at_cols = packing.run_batch_mask(batch, prefix_len)
                width = ids.shape[1]
                used = sum(int((col >= 0).sum()) for col in at_cols)
                self.tokens_run += used
                self.tokens_padded += len(batch) * width - used
                where = None
                if width == 0:  # every predicting node lies in the prefix (one-token options after it)
                    pool = self._no_outputs()
                else:
                    ids_t, pos_t, allowed_t = self._tensors(ids, positions, allowed)
                    cache = make_cache(prefix_cache, len(batch)) if prefix_cache is not None else None
                    hidden, _ = self._hidden(ids_t, self._float_mask(allowed_t), pos_t, cache=cache,
                                             use_cache=cache is not None)
                    pool = hidden.reshape(-1, hidden.shape[-1])
            if n_kept:
                pool = torch.cat([prefix_hidden, pool])
            entries_pos, entries_tgt = [], []
            for r, row in enumerate(batch):
                who = row.members
                lengths = np.array([len(encoded[m].ids) for m in who])
                boundaries = np.array([encoded[m].boundary for m in who])
                member, p, node, target = row.scored(boundaries, lengths, prefix_ids)
                q_prefix = p - 1 < prefix_len
                at = r * width + at_cols[r][node] if where is None else where.pool_index(r, node)
                entries_pos.append(np.where(q_prefix, p - 1 - keep_from, n_kept + at))
                entries_tgt.append(target)
                owners.append(who[member])
            lp, gr = self._score_entries(pool, np.concatenate(entries_pos), np.concatenate(entries_tgt))
            logprobs.append(lp)
            greedy.append(gr)
        self._results(len(encoded), owners, logprobs, greedy, into=results)

    def _no_outputs(self):
        """An empty [0, hidden] output pool: a batch whose predicting nodes all lie in the prefix."""
        return self._torch.zeros((0, self._model.config.hidden_size), dtype=self.dtype, device=self.device)

    def _float_mask(self, allowed):
        """The additive attention mask [B, 1, Q, K] of a boolean one [B, Q, K]."""
        torch = self._torch
        mask = torch.zeros(allowed.shape, dtype=self.dtype, device=self.device)
        mask.masked_fill_(~allowed, torch.finfo(self.dtype).min)
        return mask[:, None]

    def _split_rows(self, batch) -> bool:
        """Run ``batch`` as chains then trees (:meth:`_run_split`)? Where the chains are long
        (a fact's own context): a dense mask would cover [width, width] per row, the two
        passes only the chains' causal triangle and [tree, chain + tree]."""
        return self.split_chains and min(row.chain.shape[0] for row in batch) >= SPLIT_MIN_CHAIN

    def _run_split(self, batch, prefix_len: int, prefix_cache):
        """Every row's chain causally (no mask: SDPA's causal kernel), then every row's
        tree over the cached prefix + chain keys with a [tree, prefix + chain + tree] mask.
        Returns the outputs ``cat(chains [B*Cw], trees [B*Tw])`` and the layout."""
        torch = self._torch
        split = packing.split_batch(batch, prefix_len)
        b, cw = split.chain_ids.shape
        tw = split.tree_ids.shape[1]
        run_tree = sum(int((at >= 0).sum()) for at in split.tree_at)
        self.tokens_run += int(split.chain_len.sum()) + run_tree
        self.tokens_padded += int(b * cw - split.chain_len.sum()) + b * tw - run_tree
        cache = make_cache(prefix_cache, b) if prefix_cache is not None else None
        parts = []
        if cw:
            ids_t, pos_t = self._tensors(split.chain_ids, split.chain_pos)
            chain_hidden, cache = self._hidden(ids_t, None, pos_t, cache=cache, use_cache=True)
            parts.append(chain_hidden.reshape(-1, chain_hidden.shape[-1]))
        if tw:
            ids_t, pos_t, allowed_t = self._tensors(split.tree_ids, split.tree_pos, split.tree_allowed)
            tree_hidden, _ = self._hidden(ids_t, self._float_mask(allowed_t), pos_t, cache=cache, use_cache=True)
            parts.append(tree_hidden.reshape(-1, tree_hidden.shape[-1]))
        if not parts:
            return self._no_outputs(), split
        return torch.cat(parts), split

    # ------------------------------------------------------------------ generation
