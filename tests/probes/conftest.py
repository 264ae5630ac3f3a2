"""A small hand-built KG for the probe tests; every expected value is worked out by hand."""

from __future__ import annotations

import pytest

from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple


def country(qid, label, *aliases):
    return Entity(qid, label, tuple(aliases), group="country")


def city(qid, label, *aliases):
    return Entity(qid, label, tuple(aliases), group="city")


def language(qid, label, *aliases):
    return Entity(qid, label, tuple(aliases), group="language")


@pytest.fixture
def tiny_kg() -> KnowledgeGraph:
    """Capitals of France and Germany, languages of France and Switzerland (out-degree 4)."""
    entities = [
        country("Q142", "France", "French Republic"),
        country("Q183", "Germany"),
        country("Q39", "Switzerland", "Swiss Confederation"),
        city("Q90", "Paris"),
        city("Q64", "Berlin"),
        language("Q150", "French", "French language"),
        language("Q188", "German"),
        language("Q652", "Italian"),
        language("Q13199", "Romansh"),
    ]
    predicates = [Predicate("P36", "capital"), Predicate("P37", "official language")]
    triples = [
        Triple("Q142", "P36", "Q90"),  # edge 0: France capital Paris
        Triple("Q183", "P36", "Q64"),  # edge 1: Germany capital Berlin
        Triple("Q142", "P37", "Q150"),  # edge 2: France French
        Triple("Q39", "P37", "Q150"),  # edge 3: Switzerland French
        Triple("Q39", "P37", "Q188"),  # edge 4: Switzerland German
        Triple("Q39", "P37", "Q652"),  # edge 5: Switzerland Italian
        Triple("Q39", "P37", "Q13199"),  # edge 6: Switzerland Romansh
        Triple("Q183", "P37", "Q188"),  # edge 7: Germany German
    ]
    return KnowledgeGraph(entities, predicates, triples, name="tiny")


@pytest.fixture
def capitals_kg() -> KnowledgeGraph:
    """30 made-up countries C0..C29 with capitals K0..K29 (edge j: Cj capital Kj)."""
    entities = [country(f"Qc{i}", f"Country{i}") for i in range(30)]
    entities += [city(f"Qk{i}", f"City{i}") for i in range(30)]
    triples = [Triple(f"Qc{i}", "P36", f"Qk{i}") for i in range(30)]
    return KnowledgeGraph(entities, [Predicate("P36", "capital")], triples, name="capitals")
