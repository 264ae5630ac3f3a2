"""Defect 1 (unbounded memory from an endpoint): a server that ignores LIMIT, oversized
answers and the per-build limits, against the loopback SPARQL server."""

from __future__ import annotations

import pytest

from kgprobe.errors import SourceError
from kgprobe.sources.sparql import SparqlClient

QUERY = "SELECT ?entity ?kind ?value WHERE { ?entity ?kind ?value } ORDER BY ?entity"


def client(url, **kw) -> SparqlClient:
    c = SparqlClient(url, cache=False, retries=0, timeout=5, **kw)
    c._sleep = lambda s: None
    return c


def test_a_server_ignoring_limit_is_read_once_and_paging_stops(fake_sparql):
    before = fake_sparql.counts.get("ignorelimit", 0)
    c = client(fake_sparql.url("ignorelimit"), page_size=10_000)
    with pytest.warns(RuntimeWarning, match="sent 200000 rows for a page of 10000 .*stopped paging"):
        rows = c.select(QUERY)
    # One request (not 133 pages growing without end), the 10,000 rows asked for.
    assert fake_sparql.counts["ignorelimit"] - before == 1 and c.queries_issued == 1
    assert len(rows) == 10_000
    assert rows[0]["entity"].id == "Q0" and rows[-1]["entity"].id == "Q9999"


def test_a_limit_smaller_than_a_page_keeps_only_the_rows_asked_for(fake_sparql):
    c = client(fake_sparql.url("ignorelimit"), page_size=10_000)
    with pytest.warns(RuntimeWarning):
        rows = c.select(QUERY, limit=25)
    assert [r["entity"].id for r in rows] == [f"Q{i}" for i in range(25)]


def test_an_answer_over_the_byte_limit_is_refused(fake_sparql):
    c = client(fake_sparql.url("oversized"), max_response_bytes=1 << 20)
    with pytest.raises(SourceError, match=r"sent an answer larger than 1 MiB; raise --max-response-mb"):
        c.select(QUERY)
    # It stopped reading at the limit (plus at most one chunk), not at the 3 MiB body.
    assert c.bytes_received <= (1 << 20) + (1 << 20)


def test_the_per_build_row_limit(fake_sparql):
    c = client(fake_sparql.url("rows"), page_size=None, max_rows=60)
    assert len(c.select(QUERY, limit=25)) == 25
    assert len(c.select(QUERY, limit=25)) == 25
    with pytest.raises(SourceError, match=r"sent 75 rows in this build, more than the limit of 60; .*--max-rows"):
        c.select(QUERY, limit=25)


def test_the_per_build_byte_limit(fake_sparql):
    c = client(fake_sparql.url("ignorelimit"), page_size=None, max_bytes=4 << 20, max_response_bytes=64 << 20)
    with pytest.raises(SourceError, match=r"more than 4 MiB in this build; raise --max-mb"):
        c.select(QUERY)


def test_limits_from_the_environment(monkeypatch):
    monkeypatch.setenv("KGPROBE_SPARQL_MAX_ROWS", "123")
    monkeypatch.setenv("KGPROBE_SPARQL_MAX_RESPONSE_MB", "2")
    c = SparqlClient("http://127.0.0.1:9/sparql", cache=False)
    assert (c.max_rows, c.max_response_bytes, c.max_bytes) == (123, 2 << 20, 1024 << 20)
    monkeypatch.setenv("KGPROBE_SPARQL_MAX_MB", "lots")
    with pytest.raises(SourceError, match="KGPROBE_SPARQL_MAX_MB='lots' is not a number"):
        SparqlClient("http://127.0.0.1:9/sparql", cache=False)
