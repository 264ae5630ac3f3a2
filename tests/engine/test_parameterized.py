"""ParameterizedKG: the update rule and one-hop propagation on hand-computed graphs."""

import numpy as np
import pytest

from kgprobe.errors import InputError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.kg.parameterized import ParameterizedKG

# Nodes 0..3. Edges:
#   e0 = (0, 1)
#   e1 = (1, 2)
#   e2 = (1, 0)   shares BOTH nodes with e0 (reversed parallel edge)
#   e3 = (2, 3)
#   e4 = (3, 3)   self-loop
#   e5 = (0, 2)   dead
HEADS = np.array([0, 1, 1, 2, 3, 0])
TAILS = np.array([1, 2, 0, 3, 3, 2])
ACTIVE = np.array([1, 1, 1, 1, 1, 0], dtype=bool)


def small(w=1.0, prior=(1.0, 1.0)):
    return ParameterizedKG(HEADS, TAILS, ACTIVE, prior=prior, propagation_weight=w)


def test_neighbours_and_incidence():
    pkg = small()
    # e0 touches nodes 0 and 1: node 0 has e0, e2, e5; node 1 has e0, e1, e2.
    assert pkg.neighbours(0).tolist() == [1, 2, 5]
    assert pkg.neighbours(4).tolist() == [3]  # the self-loop only meets e3 at node 3
    assert pkg.neighbours(5).tolist() == [0, 1, 2, 3]
    assert sorted(pkg.incident_edges(3).tolist()) == [3, 4]  # the loop is listed once
    assert pkg.num_active == 5 and pkg.active_edges.tolist() == [0, 1, 2, 3, 4]


def test_update_by_hand_w1():
    pkg = small()
    pkg.update(np.array([0, 3]), np.array([False, True]))  # e0 wrong, e3 right
    # e0: own failure (+1 α); no probed neighbour (e3 shares no node)   -> α 2, β 1
    # e1: neighbour e0 wrong (node 1), neighbour e3 right (node 2)      -> α 2, β 2
    # e2: shares both nodes with e0: counted ONCE                       -> α 2, β 1
    # e3: own success                                                   -> α 1, β 2
    # e4: unprobed self-loop, neighbour e3 right at node 3              -> α 1, β 2
    # e5: dead, keeps the prior although it touches e0 and e3           -> α 1, β 1
    assert pkg.alpha.tolist() == [2, 2, 2, 1, 1, 1]
    assert pkg.beta.tolist() == [1, 2, 1, 2, 2, 1]
    assert pkg.failures.tolist() == [1, 0, 0, 0, 0, 0]
    assert pkg.successes.tolist() == [0, 0, 0, 1, 0, 0]


def test_update_adjacent_and_parallel_probes():
    pkg = small()
    # e0 wrong, e2 wrong (parallel pair), e1 right.
    pkg.update(np.array([0, 1, 2]), np.array([False, True, False]))
    # e0: own wrong 1 + e2 wrong (counted once) 1 ; e1 right shares node 1 -> α 1+2=3, β 1+1=2
    # e1: own right; e0, e2 wrong neighbours at node 1                    -> α 1+2=3, β 1+1=2
    # e2: own wrong 1 + e0 wrong 1; e1 right                              -> α 3, β 2
    # e3: e1 right at node 2                                             -> α 1, β 2
    # e4: nothing probed at node 3                                      -> α 1, β 1
    assert pkg.alpha.tolist() == [3, 3, 3, 1, 1, 1]
    assert pkg.beta.tolist() == [2, 2, 2, 2, 1, 1]
    # The propagated part is recoverable: e1 received 2 failures, 0 successes.
    nb_f, nb_s = pkg.neighbour_counts()
    assert nb_f.tolist() == [1, 2, 1, 0, 0, 0] and nb_s.tolist() == [1, 0, 1, 1, 0, 0]


def test_update_weight_half_and_zero():
    half = small(w=0.5, prior=(2.0, 3.0))
    half.update(np.array([0, 3]), np.array([False, True]))
    # As in test_update_by_hand_w1 with neighbour terms halved, on prior (2, 3):
    assert half.alpha.tolist() == [3.0, 2.5, 2.5, 2.0, 2.0, 2.0]
    assert half.beta.tolist() == [3.0, 3.5, 3.0, 4.0, 3.5, 3.0]
    none = small(w=0.0)
    none.update(np.array([0, 3]), np.array([False, True]))
    assert none.alpha.tolist() == [2, 1, 1, 1, 1, 1]
    assert none.beta.tolist() == [1, 1, 1, 2, 1, 1]
    assert none.error_estimate()[0] == pytest.approx(2 / 3)


def test_state_dict_round_trip_is_exact():
    pkg = small()
    pkg.update(np.array([0, 3]), np.array([False, True]))
    pkg.update(np.array([1, 4]), np.array([False, False]))
    state = pkg.state_dict()
    fresh = small()
    fresh.load_state_dict(state)
    for key in ("alpha", "beta", "successes", "failures"):
        np.testing.assert_array_equal(getattr(fresh, key), getattr(pkg, key))
    pkg.update(np.array([2]), np.array([True]))
    fresh.update(np.array([2]), np.array([True]))
    np.testing.assert_array_equal(fresh.alpha, pkg.alpha)
    with pytest.raises(InputError, match="w="):
        small(w=0.5).load_state_dict(state)


def test_from_kg_keeps_literals_private():
    ents = [Entity("A", "A"), Entity("B", "B"), Entity("y1990", "1990", is_literal=True)]
    preds = [Predicate("P1", "founded"), Predicate("P2", "knows")]
    kg = KnowledgeGraph(ents, preds, [Triple("A", "P1", "y1990"), Triple("B", "P1", "y1990"),
                                      Triple("A", "P2", "B", active=False)])
    pkg = ParameterizedKG.from_kg(kg)
    # Both facts end in the literal 1990 but are related only through the dead A-B edge.
    assert pkg.neighbours(0).tolist() == [2]
    assert pkg.neighbours(1).tolist() == [2]
    assert ParameterizedKG.from_kg(kg, link_literals=True).neighbours(0).tolist() == [1, 2]
    assert pkg.predicates.tolist() == [0, 0, 1]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(heads=[], tails=[], active=[]), "no edges"),
        (dict(heads=[0, 1], tails=[1, 2], active=[False, False]), "none is active"),
        (dict(prior=(float("nan"), 1.0)), "prior"),
        (dict(prior=(-1.0, 1.0)), "prior"),
        (dict(prior=(1.0, 0.0)), "prior"),
        (dict(propagation_weight=-0.5), "propagation weight"),
        (dict(propagation_weight=float("nan")), "propagation weight"),
    ],
)
def test_bad_construction(kwargs, message):
    base = dict(heads=HEADS, tails=TAILS, active=ACTIVE)
    base.update(kwargs)
    h, t, a = (np.asarray(base.pop(k)) for k in ("heads", "tails", "active"))
    with pytest.raises(InputError, match=message):
        ParameterizedKG(h.astype(int), t.astype(int), a.astype(bool), **base)


def test_bad_updates():
    pkg = small()
    with pytest.raises(InputError, match="twice"):
        pkg.update(np.array([0, 0]), np.array([True, False]))
    with pytest.raises(InputError, match="dead"):
        pkg.update(np.array([5]), np.array([True]))
    with pytest.raises(InputError, match="must lie in 0..5"):
        pkg.update(np.array([6]), np.array([True]))
    with pytest.raises(InputError, match="one flag per edge"):
        pkg.update(np.array([0, 1]), np.array([True]))
    assert pkg.alpha.tolist() == [1] * 6  # nothing was applied


def test_from_kg_empty_graph():
    with pytest.raises(InputError, match="no triples"):
        ParameterizedKG.from_kg(KnowledgeGraph([], [], [], name="empty"))


def test_to_networkx_carries_beliefs():
    pkg = small()
    pkg.update(np.array([0]), np.array([False]))
    g = pkg.to_networkx()
    assert g.number_of_edges() == 6
    assert g.edges[0, 1, 0]["alpha"] == 2.0 and g.edges[0, 2, 5]["active"] is False
