"""Prefix-tree planning (kgprobe.models.packing) on hand-built token sequences: no model,
every expected array worked out by hand."""

from __future__ import annotations

import numpy as np

from kgprobe.models.packing import (Row, batch_mask, build_tree, families, group_rows, lcp, padded, run_batch_mask,
                                    split_batch, trie_size)

# Trie of these: 5 -> 6 -> {7, 8}, 5 -> 9; the empty sequence adds nothing.
SEQS = [[5, 6, 7], [5, 6, 8], [5, 9], []]


def test_padded_matrix_and_lengths():
    matrix, lengths = padded(SEQS)
    assert matrix.tolist() == [[5, 6, 7], [5, 6, 8], [5, 9, -1], [-1, -1, -1]]
    assert lengths.tolist() == [3, 3, 2, 0]


def test_tree_nodes_in_preorder_with_depths():
    tree = build_tree(SEQS)
    assert tree.tokens.tolist() == [5, 6, 7, 8, 9]
    assert tree.depth.tolist() == [0, 1, 2, 2, 1]
    assert tree.node_of.tolist() == [[0, 1, 2], [0, 1, 3], [0, 4, -1], [-1, -1, -1]]


def test_tree_nodes_do_not_depend_on_input_order():
    tree = build_tree([[5, 9], [5, 6, 8], [5, 6, 7]])
    assert tree.tokens.tolist() == [5, 6, 7, 8, 9]
    assert tree.node_of.tolist() == [[0, 4, -1], [0, 1, 3], [0, 1, 2]]


def test_duplicate_sequences_share_every_node():
    tree = build_tree([[3, 4], [3, 4], [3]])
    assert tree.tokens.tolist() == [3, 4]
    assert tree.node_of.tolist() == [[0, 1], [0, 1], [0, -1]]


def test_ancestor_matrix():
    allowed = build_tree(SEQS).ancestors().astype(int).tolist()
    assert allowed == [
        [1, 0, 0, 0, 0],  # 5
        [1, 1, 0, 0, 0],  # 5 6
        [1, 1, 1, 0, 0],  # 5 6 7
        [1, 1, 0, 1, 0],  # 5 6 8: not its sibling 7
        [1, 0, 0, 0, 1],  # 5 9
    ]


def test_trie_size_counts_distinct_prefixes():
    assert trie_size(SEQS) == 5
    assert trie_size([]) == 0
    assert trie_size([[1, 2], [1, 2], [2, 1]]) == 4


def test_lcp():
    assert lcp([1, 2, 3], [1, 2, 4, 5]) == 2
    assert lcp([1, 2], [1, 2, 3]) == 2
    assert lcp([], [1]) == 0
    assert lcp([7], [8]) == 0


def test_row_of_chain_and_tree():
    row = group_rows([1, 2], [[5, 6, 7], [5, 6, 8], [5, 9]], [10, 11, 12], max_row=100)[0]
    assert row.tokens().tolist() == [1, 2, 5, 6, 7, 8, 9]
    assert row.depths().tolist() == [0, 1, 2, 3, 4, 4, 3]
    assert row.allowed().astype(int).tolist() == [
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 1, 0],
        [1, 1, 1, 0, 0, 0, 1],
    ]
    # Member 1 (sequence prefix + [1, 2, 5, 6, 8]): depths 0..4 are row nodes 0, 1, 2, 3, 5.
    assert row.node_index(np.array([1] * 5), np.arange(5)).tolist() == [0, 1, 2, 3, 5]


def test_scored_positions_targets_and_predicting_nodes():
    # Family prefix [40, 41, 42]; rows hold [1, 2] + tree; member 2 is prefix + [1, 2, 5, 9].
    row = group_rows([1, 2], [[5, 6, 7], [5, 6, 8], [5, 9]], [10, 11, 12], max_row=100)[0]
    lengths = np.array([8, 8, 7])  # 3 prefix + 2 chain + own tokens
    boundaries = np.array([5, 5, 4])  # member 2 also scores the chain's last token (2)
    member, p, node, target = row.scored(boundaries, lengths, np.array([40, 41, 42]))
    assert member.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert p.tolist() == [5, 6, 7, 5, 6, 7, 4, 5, 6]
    assert target.tolist() == [5, 6, 7, 5, 6, 8, 2, 5, 9]
    # Token p is predicted by position p - 1: row depth p - 4 (3 prefix tokens).
    assert node.tolist() == [1, 2, 3, 1, 2, 3, 0, 1, 2]


def test_a_long_group_is_split_over_rows_repeating_its_chain():
    rows = group_rows([1, 2], [[5, 6], [7, 8], [9, 10]], [0, 1, 2], max_row=6)
    assert [r.members.tolist() for r in rows] == [[0, 1], [2]]
    assert [r.tokens().tolist() for r in rows] == [[1, 2, 5, 6, 7, 8], [1, 2, 9, 10]]


def test_batch_mask_pads_to_self_and_prefix():
    short = Row(np.array([4]), build_tree([[5]]), np.array([0]))
    long = group_rows([4], [[5, 6], [7]], [1, 2], max_row=10)[0]
    ids, positions, allowed = batch_mask([short, long], prefix_len=2, width=4)
    assert ids.tolist() == [[4, 5, 0, 0], [4, 5, 6, 7]]
    assert positions.tolist() == [[2, 3, 2, 2], [2, 3, 4, 3]]
    assert allowed[0].astype(int).tolist() == [
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 0, 0, 1, 0],  # padding: prefix and itself
        [1, 1, 0, 0, 0, 1],
    ]
    assert allowed[1].astype(int).tolist() == [
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 0, 0, 1],  # 7 sees the chain, not 5 6
    ]


def test_internal_nodes_are_those_with_a_child():
    tree = build_tree([[5, 6, 7], [5, 6, 8], [5, 9], [5, 6]])
    # Nodes in preorder: 5, 6, 7, 8, 9; [5, 6] ends inside [5, 6, 7] (not a leaf).
    assert tree.tokens.tolist() == [5, 6, 7, 8, 9]
    assert tree.internal().tolist() == [True, True, False, False, False]
    assert build_tree([[4]]).internal().tolist() == [False]


def test_run_batch_mask_leaves_out_tree_leaves():
    row = group_rows([1, 2], [[5, 6, 7], [5, 6, 8], [5, 9]], [10, 11, 12], max_row=100)[0]
    ids, positions, allowed, at = run_batch_mask([row], prefix_len=1)
    # Row nodes 1 2 | 5 6 7 8 9: the leaves 7, 8, 9 are not run.
    assert ids.tolist() == [[1, 2, 5, 6]]
    assert positions.tolist() == [[1, 2, 3, 4]]
    assert at[0].tolist() == [0, 1, 2, 3, -1, -1, -1]
    assert allowed[0].astype(int).tolist() == [
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1],
    ]


def test_split_batch_runs_chains_then_trees():
    a = group_rows([1, 2, 3], [[5, 6, 7], [5, 9]], [0, 1], max_row=100)[0]  # tree 5 6 7 9; runs 5 6
    b = group_rows([4], [[8, 8], [8]], [2, 3], max_row=100)[0]  # tree 8 8; runs 8
    split = split_batch([a, b], prefix_len=2)
    assert split.chain_ids.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert split.chain_pos.tolist() == [[2, 3, 4], [2, 3, 4]]
    assert split.chain_len.tolist() == [3, 1]
    assert split.tree_ids.tolist() == [[5, 6], [8, 0]]
    assert split.tree_pos.tolist() == [[5, 6], [3, 2]]
    # Keys: prefix (2) | chains (3) | trees (2).
    assert split.tree_allowed[0].astype(int).tolist() == [[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]]
    assert split.tree_allowed[1].astype(int).tolist() == [[1, 1, 1, 0, 0, 1, 0],  # row b sees its 1 chain token
                                                          [1, 1, 0, 0, 0, 0, 1]]  # padding: prefix and itself
    # Outputs are cat(chains [2*3], trees [2*2]): row a's node 2 (chain token 3) is 2, its
    # tree node 5 (row node 3) is 6 + 0 and 6 (row node 4) 6 + 1; row b's tree node 8 is 6 + 2.
    assert split.pool_index(0, np.array([2, 3, 4])).tolist() == [2, 6, 7]
    assert split.pool_index(1, np.array([0, 1])).tolist() == [3, 8]


def test_families_split_unrelated_prefixes():
    reps = [[1, 2, 3, 4], [9, 9, 9, 9, 9], [1, 2, 3, 5]]
    assert families(reps) == [[0, 2], [1]]
    # Nothing to gain from splitting two groups that share only a short prefix.
    assert families([[1, 2], [1, 3]]) == [[0, 1]]
    assert families([]) == []


def test_a_row_without_tree_does_not_run_its_last_chain_token():
    row = Row(np.array([1, 2, 3]), build_tree([[]]), np.array([0]))
    assert row.run_mask().tolist() == [True, True, False]
    split = split_batch([row, group_rows([4, 5], [[6], [7, 8]], [1, 2], max_row=10)[0]], prefix_len=0)
    assert split.chain_len.tolist() == [2, 2]
    assert split.chain_ids.tolist() == [[1, 2], [4, 5]]
    assert split.tree_ids.tolist() == [[0], [7]]
