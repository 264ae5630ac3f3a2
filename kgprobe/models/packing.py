"""Planning of packed, prefix-tree scoring with array operations (no loop per token).

A batch of score requests is split into *families* (requests sharing a long token
prefix, e.g. one relation's fixed examples); each family's common prefix is run once
and its KV cache reused. Inside a family, the requests with the same context form a
*group*, packed into one row as a prefix tree (trie): the group's common tokens as a
chain, then every continuation's tokens with shared beginnings stored once (" San" of
" San Marino" and " San José"). Each tree node is one position of the row; it attends
to the family prefix and to its own ancestors, and its position id is its depth. So
every distinct token prefix is run once and every scored log-prob equals that of the
sequence run on its own.

Everything here is numpy on token ids; the backend turns the arrays into tensors
(on the device) and runs them. Tests check the plans on CPU, without a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Sequence

import numpy as np


def trie_size(sequences: Sequence[Sequence[int]]) -> int:
    """Number of distinct non-empty prefixes of ``sequences`` (nodes of their token trie):
    the fewest tokens a scorer that runs every token can run for them (the packed path
    skips the leaves, which predict nothing)."""
    return build_tree(sequences).size


def lcp(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two id sequences (numpy compare, no Python loop)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


def padded(seqs: Sequence[Sequence[int]], pad: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """``(matrix [K, max_len] padded with pad, lengths [K])`` of id sequences."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    width = int(lengths.max()) if len(seqs) else 0
    matrix = np.full((len(seqs), width), pad, dtype=np.int64)
    flat = np.fromiter(chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum()))
    matrix[np.arange(width)[None, :] < lengths[:, None]] = flat
    return matrix, lengths


@dataclass
class Tree:
    """A prefix tree of K sequences, nodes in depth-first (pre-)order.

    ``tokens[n]``/``depth[n]``: node n's token and depth (0 = first token);
    ``node_of[k, d]``: the node of sequence k's token d (-1 past its end).
    """

    tokens: np.ndarray
    depth: np.ndarray
    node_of: np.ndarray

    @property
    def size(self) -> int:
        return int(self.tokens.shape[0])

    def internal(self) -> np.ndarray:
        """Boolean [n]: nodes with at least one child. A leaf (the last token of its
        sequences) predicts no scored token and is no other node's ancestor, so it need
        not be run at all: the scored tokens' log-probs come from internal nodes."""
        out = np.zeros(self.size, dtype=bool)
        if self.node_of.shape[1] > 1:
            parents = self.node_of[:, :-1][self.node_of[:, 1:] >= 0]
            out[parents] = True
        return out

    def ancestors(self) -> np.ndarray:
        """Boolean [n, n]: ``[i, j]`` when node j is node i or one of its ancestors."""
        n = self.size
        allowed = np.zeros((n, n), dtype=bool)
        if n == 0:
            return allowed
        # Node i was created by some sequence k at depth d; its ancestors are node_of[k, :d+1].
        creator = np.empty(n, dtype=np.int64)
        ks, ds = np.nonzero(self.node_of >= 0)
        nodes = self.node_of[ks, ds]
        creator[nodes] = ks  # any sequence through the node gives the same path
        paths = self.node_of[creator]  # [n, max_len]
        upto = np.arange(paths.shape[1])[None, :] <= self.depth[:, None]
        rows = np.broadcast_to(np.arange(n)[:, None], paths.shape)[upto]
        allowed[rows, paths[upto]] = True
        return allowed


def build_tree(seqs: Sequence[Sequence[int]]) -> Tree:
    """The prefix tree of ``seqs`` (each possibly empty), with array operations only."""
    matrix, lengths = padded(seqs)
    k, width = matrix.shape
    if k == 0 or width == 0:
        return Tree(np.zeros(0, np.int64), np.zeros(0, np.int64), np.full((k, 0), -1, np.int64))
    order = np.lexsort(matrix.T[::-1])  # rows in lexicographic order; -1 padding sorts first
    sm, sl = matrix[order], lengths[order]
    same = np.cumprod(sm[1:] == sm[:-1], axis=1)  # padding equal to padding is cut by lengths below
    common = np.minimum(same.sum(axis=1), np.minimum(sl[1:], sl[:-1]))
    start = np.concatenate([[0], common])  # first new depth of each sorted sequence
    d = np.arange(width)[None, :]
    new = (d >= start[:, None]) & (d < sl[:, None])
    ids = np.cumsum(new.ravel()).reshape(new.shape) - 1
    node_sorted = np.maximum.accumulate(np.where(new, ids, -1), axis=0)
    node_sorted[d >= sl[:, None]] = -1
    node_of = np.empty_like(node_sorted)
    node_of[order] = node_sorted
    depth = np.broadcast_to(d, new.shape)[new]
    return Tree(sm[new], depth.astype(np.int64), node_of)


@dataclass
class Row:
    """One packed row: ``chain`` tokens shared by its members, then their tree.

    ``members`` are request indices; ``tree`` holds their tokens after the chain.
    Row node n < len(chain) is chain token n; node len(chain) + t is tree node t.
    """

    chain: np.ndarray
    tree: Tree
    members: np.ndarray

    @property
    def length(self) -> int:
        return int(self.chain.shape[0]) + self.tree.size

    def tokens(self) -> np.ndarray:
        return np.concatenate([self.chain, self.tree.tokens])

    def depths(self) -> np.ndarray:
        c = self.chain.shape[0]
        return np.concatenate([np.arange(c), c + self.tree.depth])

    def allowed(self) -> np.ndarray:
        """Boolean [length, length]: which row node attends to which (chain + tree ancestry)."""
        c, t = self.chain.shape[0], self.tree.size
        out = np.zeros((c + t, c + t), dtype=bool)
        out[:c, :c] = np.tril(np.ones((c, c), dtype=bool))
        out[c:, :c] = True
        out[c:, c:] = self.tree.ancestors()
        return out

    def run_mask(self) -> np.ndarray:
        """Boolean [length]: the row nodes that must be run: the chain, and the tree's internal
        nodes (:meth:`Tree.internal`; leaves predict nothing and nothing attends to them).
        With no tree, the chain's last token is the leaf."""
        chain = np.ones(self.chain.shape[0], dtype=bool)
        if self.tree.size == 0 and chain.size:
            chain[-1] = False
        return np.concatenate([chain, self.tree.internal()])

    def node_index(self, member: int, depth: np.ndarray) -> np.ndarray:
        """Row nodes of member ``member`` (its position in ``members``) at token depths
        ``depth`` counted from the start of the row."""
        c = self.chain.shape[0]
        in_chain = depth < c
        tree_depth = np.where(in_chain, 0, depth - c)
        nodes = self.tree.node_of[member, tree_depth] if self.tree.node_of.shape[1] else np.zeros_like(depth)
        return np.where(in_chain, depth, c + nodes)


    def scored(self, boundaries: np.ndarray, lengths: np.ndarray, prefix: np.ndarray):
        """The scored tokens of every member: ``(member [E], p [E], node [E], target [E])``.

        Member j's full sequence is ``prefix + chain + its tree tokens``; its scored tokens
        are positions ``boundaries[j] .. lengths[j] - 1``. ``node`` is the row node whose
        output predicts token p (that of position p - 1; meaningless where p - 1 is inside
        the prefix, which the caller takes from the prefix run); ``target`` is token p.
        """
        counts = lengths - boundaries
        total = int(counts.sum())
        member = np.repeat(np.arange(len(counts)), counts)
        p = np.repeat(boundaries, counts) + (np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts))
        n_prefix = prefix.shape[0]
        row_tokens = self.tokens()
        node = self.node_index(member, np.maximum(p - 1 - n_prefix, 0))
        in_row = p >= n_prefix
        target_node = self.node_index(member, np.maximum(p - n_prefix, 0))
        target = np.where(in_row, row_tokens[np.where(in_row, target_node, 0)] if row_tokens.size else 0,
                          prefix[np.minimum(p, max(n_prefix - 1, 0))] if n_prefix else 0)
        return member, p, node, target


def group_rows(chain_ids: Sequence[int], rests: Sequence[Sequence[int]], members: Sequence[int],
               max_row: int) -> list[Row]:
    """Rows of one group: ``chain_ids`` shared, then the tree of ``rests``; a tree that makes
    the row longer than ``max_row`` is split over several rows (each repeating the chain)."""
    chain = np.asarray(chain_ids, dtype=np.int64)
    members = np.asarray(members, dtype=np.int64)
    tree = build_tree(rests)
    if chain.shape[0] + tree.size <= max_row or len(rests) == 1:
        return [Row(chain, tree, members)]
    # Split the sorted members in contiguous runs of about equal tree size.
    order = sorted(range(len(rests)), key=lambda i: rests[i])
    rows, current = [], []
    budget = max(max_row - chain.shape[0], 1)
    used = 0
    for i in order:
        if current and used + len(rests[i]) > budget:
            rows.append(current)
            current, used = [], 0
        current.append(i)
        used += len(rests[i])
    rows.append(current)
    return [Row(chain, build_tree([rests[i] for i in part]), members[part]) for part in rows]


def families(reps: Sequence[Sequence[int]]) -> list[list[int]]:
    """Split groups (by their common token prefix ``reps``) into families, each scored
    with its own batch prefix.

    In sorted order, the common prefix of a run of groups is the minimum of adjacent
    common prefixes ``m``; cutting where it is reached gives sub-runs with longer
    prefixes ``L_j``. Cutting costs ``m`` tokens per extra family and saves ``L_j - m``
    tokens for every group after the first in sub-run ``j`` (otherwise each group's row
    recomputes them), so cut when that pays, recursively.
    """
    order = sorted(range(len(reps)), key=lambda i: reps[i])
    adjacent = [lcp(reps[a], reps[b]) for a, b in zip(order, order[1:])]

    def split(lo: int, hi: int) -> list[list[int]]:
        if hi - lo < 2:
            return [order[lo:hi]]
        inner = adjacent[lo : hi - 1]
        m = min(inner)
        cuts = [lo] + [lo + 1 + k for k, v in enumerate(inner) if v == m] + [hi]
        parts = list(zip(cuts, cuts[1:]))
        saved = sum((b - a - 1) * ((min(adjacent[a : b - 1]) if b - a > 1 else m) - m) for a, b in parts)
        if len(parts) < 2 or saved <= (len(parts) - 1) * m:
            return [order[lo:hi]]
        return [family for a, b in parts for family in split(a, b)]

    return split(0, len(order)) if reps else []


def batch_mask(rows: Sequence[Row], prefix_len: int, width: int | None = None,
               keep: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids [B, width], positions [B, width], allowed [B, width, prefix_len + width])``.

    ``keep[r]`` (default: every node) selects the nodes of row r that are laid out, in
    order; ``width`` defaults to the most kept nodes of a row. Padding positions see the
    prefix and themselves only (no row of the mask is empty, so attention stays finite);
    their outputs are never read.
    """
    if keep is None:
        keep = [np.ones(row.length, dtype=bool) for row in rows]
    if width is None:
        width = max(int(k.sum()) for k in keep)
    b = len(rows)
    ids = np.zeros((b, width), dtype=np.int64)
    positions = np.full((b, width), prefix_len, dtype=np.int64)
    allowed = np.zeros((b, width, prefix_len + width), dtype=bool)
    allowed[:, :, :prefix_len] = True
    diag = np.arange(width)
    allowed[:, diag, prefix_len + diag] = True
    for r, (row, k) in enumerate(zip(rows, keep)):
        n = int(k.sum())
        ids[r, :n] = row.tokens()[k]
        positions[r, :n] = prefix_len + row.depths()[k]
        allowed[r, :n, prefix_len : prefix_len + n] = row.allowed()[np.ix_(k, k)]
    return ids, positions, allowed


def run_batch_mask(rows: Sequence[Row], prefix_len: int):
    """:func:`batch_mask` of the nodes that must be run (:meth:`Row.run_mask`: no tree leaves).

    Returns ``(ids, positions, allowed, at)``, ``at[r]`` mapping row r's nodes to their
    columns (-1 for a leaf, not run).
    """
    keep = [row.run_mask() for row in rows]
    ids, positions, allowed = batch_mask(rows, prefix_len, keep=keep)
    at = []
    for k in keep:
        col = np.cumsum(k) - 1
        col[~k] = -1
        at.append(col)
    return ids, positions, allowed, at


@dataclass
class SplitBatch:
    """A batch of rows run in two passes: every row's chain causally (no mask needed), then
    every row's tree (its internal nodes: leaves are not run) over the cached prefix +
    chain keys with a small mask.

    ``chain_ids``/``chain_pos`` [B, Cw] (right-padded; padding sees only earlier tokens, is
    never attended from a tree and never read), ``chain_len`` [B];
    ``tree_ids``/``tree_pos`` [B, Tw]; ``tree_allowed`` [B, Tw, prefix_len + Cw + Tw]: a
    tree node sees the prefix, its row's real chain tokens and its own tree ancestors;
    tree padding sees the prefix and itself. ``tree_at[r]``: row r's tree node -> its
    column among the run tree nodes (-1 for a leaf).
    """

    chain_ids: np.ndarray
    chain_pos: np.ndarray
    chain_len: np.ndarray
    tree_ids: np.ndarray
    tree_pos: np.ndarray
    tree_allowed: np.ndarray
    tree_at: list

    def pool_index(self, row: int, node: np.ndarray) -> np.ndarray:
        """Index of (predicting) row node ``node`` of row ``row`` in
        ``cat(chain outputs [B*Cw], tree outputs [B*Tw])``."""
        b, cw = self.chain_ids.shape
        tw = self.tree_ids.shape[1]
        c = int(self.chain_len[row])
        at = self.tree_at[row]
        tree_col = at[np.clip(node - c, 0, max(at.shape[0] - 1, 0))] if at.shape[0] else np.zeros_like(node)
        return np.where(node < c, row * cw + node, b * cw + row * tw + tree_col)


def split_batch(rows: Sequence[Row], prefix_len: int) -> SplitBatch:
    """The two-pass layout of ``rows`` (see :class:`SplitBatch`); tree leaves are not run
    (:meth:`Tree.internal`), so ``pool_index`` is meant for predicting nodes only."""
    b = len(rows)
    # With no tree, the chain's last token is a leaf: not run.
    chain_len = np.fromiter((r.chain.shape[0] - (r.tree.size == 0 and r.chain.shape[0] > 0) for r in rows),
                            dtype=np.int64, count=b)
    keep = [r.tree.internal() for r in rows]
    tree_len = np.fromiter((int(k.sum()) for k in keep), dtype=np.int64, count=b)
    cw, tw = int(chain_len.max(initial=0)), int(tree_len.max(initial=0))
    chain_ids, _ = padded([r.chain[:c] for r, c in zip(rows, chain_len.tolist())], pad=0)
    chain_pos = np.broadcast_to(prefix_len + np.arange(cw)[None, :], (b, cw)).copy()
    tree_ids = np.zeros((b, tw), dtype=np.int64)
    tree_pos = np.full((b, tw), prefix_len, dtype=np.int64)
    tree_at = []  # per row: tree node -> its column among the run tree nodes (-1: a leaf, not run)
    allowed = np.zeros((b, tw, prefix_len + cw + tw), dtype=bool)
    allowed[:, :, :prefix_len] = True
    # Real tree nodes see their row's real chain tokens; tree padding sees none of the chain.
    real = np.arange(tw)[None, :] < tree_len[:, None]
    allowed[:, :, prefix_len : prefix_len + cw] = real[:, :, None] & (np.arange(cw)[None, :] < chain_len[:, None])[:, None, :]
    diag = np.arange(tw)
    allowed[:, diag, prefix_len + cw + diag] = True  # padding: the prefix and itself
    for r, (row, k) in enumerate(zip(rows, keep)):
        at = np.cumsum(k) - 1
        at[~k] = -1
        tree_at.append(at)
        t = int(tree_len[r])
        if t == 0:
            continue
        tree_ids[r, :t] = row.tree.tokens[k]
        tree_pos[r, :t] = prefix_len + chain_len[r] + row.tree.depth[k]
        allowed[r, :t, prefix_len + cw : prefix_len + cw + t] = row.tree.ancestors()[np.ix_(k, k)]
    return SplitBatch(chain_ids, chain_pos, chain_len, tree_ids, tree_pos, allowed, tree_at)
