"""The SPARQL client against a loopback server that misbehaves on purpose, and an
endpoint that is down. Every failure must be a SourceError with a clear message."""

from __future__ import annotations

import email.utils
import time

import pytest

from kgprobe.errors import SourceError
from kgprobe.sources.oxigraph_server import free_port
from kgprobe.sources.sparql import SparqlClient

from .conftest import SPARQL_JSON, sparql_json

QUERY = "SELECT ?x WHERE { ?x ?p ?o } ORDER BY ?x"
OK = (200, {"Content-Type": SPARQL_JSON}, sparql_json([{"x": "a"}, {"x": "b"}]), 0)


def client(url, **kw) -> tuple[SparqlClient, list[float]]:
    """A client that records its backoff waits instead of sleeping."""
    c = SparqlClient(url, cache=False, page_size=None, backoff=0.5, **kw)
    waits: list[float] = []
    c._sleep = waits.append
    return c, waits


def test_429_is_retried_after_the_retry_after_delay(bad_server):
    bad_server.script = [(429, {"Retry-After": "7"}, b"slow down", 0), OK]
    c, waits = client(bad_server.url)
    rows = c.select(QUERY)
    assert [r["x"].value for r in rows] == ["a", "b"]
    # Retry-After (7 s) beats the first backoff (0.5 s)
    assert waits == [7.0]
    assert c.queries_issued == 2


def test_retry_after_as_http_date(bad_server):
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    bad_server.script = [(503, {"Retry-After": when}, b"", 0), OK]
    c, waits = client(bad_server.url)
    c.select(QUERY)
    assert len(waits) == 1 and 25 <= waits[0] <= 30


def test_500_is_retried_with_exponential_backoff(bad_server):
    bad_server.script = [(500, {}, b"oops", 0), (502, {}, b"", 0), (500, {}, b"", 0), OK]
    c, waits = client(bad_server.url)
    assert len(c.select(QUERY)) == 2
    assert waits == [0.5, 1.0, 2.0]  # backoff * 2**attempt


def test_persistent_429_gives_up_with_a_clear_message(bad_server):
    bad_server.script = [(429, {}, b"", 0)]
    c, waits = client(bad_server.url, retries=2)
    with pytest.raises(SourceError, match=r"kept failing after 3 attempts \(last: HTTP 429"):
        c.select(QUERY)
    assert len(bad_server.requests) == 3
    assert waits == [0.5, 1.0]


def test_query_timeout_reported_by_the_endpoint_is_not_retried(bad_server):
    bad_server.script = [(500, {}, b"java.util.concurrent.TimeoutException", 0)]
    c, waits = client(bad_server.url)
    with pytest.raises(SourceError, match="timed out evaluating the query"):
        c.select(QUERY)
    assert len(bad_server.requests) == 1 and waits == []


def test_html_instead_of_json(bad_server):
    bad_server.script = [(200, {"Content-Type": "text/html; charset=utf-8"}, b"<html><body>Welcome</body></html>", 0)]
    c, _ = client(bad_server.url)
    with pytest.raises(SourceError, match=r"answered with text/html instead of SPARQL JSON \(starts: '<html>"):
        c.select(QUERY)


def test_truncated_json(bad_server):
    body = sparql_json([{"x": "a"}, {"x": "b"}])
    bad_server.script = [(200, {"Content-Type": SPARQL_JSON}, body[: len(body) // 2], 0)]
    c, _ = client(bad_server.url)
    with pytest.raises(SourceError, match="malformed or truncated SPARQL JSON"):
        c.select(QUERY)


def test_json_that_is_not_sparql_results(bad_server):
    bad_server.script = [(200, {"Content-Type": "application/json"}, b'{"error": "nope"}', 0)]
    c, _ = client(bad_server.url)
    with pytest.raises(SourceError, match="malformed or truncated SPARQL JSON"):
        c.select(QUERY)


def test_timeout_is_retried_then_reported(bad_server):
    bad_server.script = [(200, {"Content-Type": SPARQL_JSON}, sparql_json([]), 3)]
    c, waits = client(bad_server.url, timeout=1, retries=1)
    start = time.monotonic()
    with pytest.raises(SourceError, match=r"kept failing after 2 attempts \(last: no answer within 1 s\)"):
        c.select(QUERY)
    assert time.monotonic() - start < 5
    assert waits == [0.5]


def test_bad_query_is_not_retried(bad_server):
    bad_server.script = [(400, {}, b"Parse error at line 1", 0)]
    c, waits = client(bad_server.url)
    with pytest.raises(SourceError, match=r"rejected the query as malformed \(HTTP 400\): Parse error"):
        c.select(QUERY)
    assert waits == []


def test_endpoint_down():
    url = f"http://127.0.0.1:{free_port()}/sparql"
    c, waits = client(url)
    with pytest.raises(SourceError, match=r"is down or unreachable \(connection refused\)"):
        c.select(QUERY)
    assert waits == []


def test_not_a_url():
    with pytest.raises(SourceError, match="is not an http"):
        SparqlClient("query.wikidata.org")


def test_failures_are_not_cached(bad_server, tmp_path):
    bad_server.script = [(200, {"Content-Type": "text/html"}, b"<html>", 0), OK]
    c = SparqlClient(bad_server.url, page_size=None)
    with pytest.raises(SourceError):
        c.select(QUERY)
    assert len(c.select(QUERY)) == 2
    assert len(c.select(QUERY)) == 2
    assert c.queries_issued == 2 and c.cache_hits == 1
