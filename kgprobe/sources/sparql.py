"""A SPARQL client for any endpoint (Wikidata by default), built on SPARQLWrapper.

What it adds to SPARQLWrapper: a descriptive User-Agent (Wikidata's policy requires
one), POST requests (long ``VALUES`` blocks), paging with ``LIMIT``/``OFFSET``, retries
of 429 and 5xx answers with exponential backoff that honours ``Retry-After``, a
timeout, an on-disk cache keyed by endpoint + query text, and one error type: every
failure is a :class:`~kgprobe.errors.SourceError` whose message names the endpoint,
what went wrong and what to do.

Bounds (an endpoint is outside kgprobe's control; nothing it sends may grow without
limit): one answer may be at most ``max_response_bytes`` (read in chunks, never more
than that plus one chunk; the JSON is parsed only after the size check), and one
client (one build) accepts at most ``max_rows`` rows and ``max_bytes`` bytes in all.
Paging stops on a short page *and* on a page longer than asked for (an endpoint that
ignores ``LIMIT``): the rows asked for are kept, with a warning. Defaults are far above
what a Wikidata build with the default limits needs (a 1-hop build reads a few
thousand rows); raise them with ``kgprobe build --max-rows / --max-mb /
--max-response-mb`` or the environment variables ``KGPROBE_SPARQL_MAX_ROWS``,
``KGPROBE_SPARQL_MAX_MB`` and ``KGPROBE_SPARQL_MAX_RESPONSE_MB`` (also read by
``kgprobe run --endpoint``).

Cache directory: ``$KGPROBE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/kgprobe``, else
``~/.cache/kgprobe``; results live under ``sparql/`` as one JSON file per query.
"""

from __future__ import annotations

import ast
import email.utils
import hashlib
import http.client
import json
import os
import socket
import tempfile
import time
import urllib.error
import warnings
from pathlib import Path

from kgprobe.errors import SourceError
from kgprobe.sources.queries import with_limit
from kgprobe.sources.rdf import Term

DEFAULT_ENDPOINT = "https://query.wikidata.org/sparql"
USER_AGENT = "kgprobe/{version} (knowledge probing of language models; https://github.com/kgprobe/kgprobe) SPARQLWrapper"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Default bounds (see the module docstring).
MAX_ROWS = 2_000_000
MAX_MB = 1024
MAX_RESPONSE_MB = 64
_CHUNK = 1 << 20


def _env_number(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        raise SourceError(f"environment variable {name}={value!r} is not a number", exit_code=2) from None
    if not number > 0:
        raise SourceError(f"environment variable {name}={value!r} must be > 0", exit_code=2)
    return number


def cache_dir() -> Path:
    """The user cache directory of kgprobe (see the module docstring)."""
    if os.environ.get("KGPROBE_CACHE_DIR"):
        return Path(os.environ["KGPROBE_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "kgprobe"
    return Path.home() / ".cache" / "kgprobe"


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class SparqlClient:
    """SELECT queries against one SPARQL endpoint URL.

    Parameters
    ----------
    endpoint:
        The endpoint URL (default: the Wikidata Query Service).
    timeout:
        Seconds to wait for one HTTP answer before giving up on that attempt.
    retries:
        Extra attempts after a 429/5xx answer, a timeout or a dropped connection.
    backoff, max_backoff:
        Wait ``backoff * 2**attempt`` seconds between attempts (capped), or what the
        server's ``Retry-After`` says if that is longer (capped at ``max_retry_after``).
    page_size:
        Rows per request when paging; ``None`` sends each query whole.
    cache:
        Read and write the on-disk cache (``cache_dir()/sparql``).
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        max_retry_after: float = 300.0,
        page_size: int | None = 10_000,
        cache: bool = True,
        cache_path: str | os.PathLike | None = None,
        user_agent: str | None = None,
        max_rows: int | None = None,
        max_bytes: int | None = None,
        max_response_bytes: int | None = None,
    ):
        if not endpoint.startswith(("http://", "https://")):
            raise SourceError(f"SPARQL endpoint {endpoint!r} is not an http(s) URL", exit_code=2)
        from kgprobe import __version__

        self.endpoint = endpoint
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.page_size = page_size
        self.cache = cache
        self.cache_path = Path(cache_path) if cache_path else cache_dir() / "sparql"
        self.user_agent = user_agent or USER_AGENT.format(version=__version__)
        self.max_rows = int(max_rows or _env_number("KGPROBE_SPARQL_MAX_ROWS", MAX_ROWS))
        self.max_bytes = int(max_bytes or _env_number("KGPROBE_SPARQL_MAX_MB", MAX_MB) * (1 << 20))
        self.max_response_bytes = int(
            max_response_bytes or _env_number("KGPROBE_SPARQL_MAX_RESPONSE_MB", MAX_RESPONSE_MB) * (1 << 20))
        #: Rows and bytes received over this client's life (the per-build bounds).
        self.rows_received = 0
        self.bytes_received = 0
        #: HTTP requests actually sent (cache hits and retries of one query excluded).
        self.queries_issued = 0
        #: Queries answered from the on-disk cache.
        self.cache_hits = 0
        self._sleep = time.sleep  # replaced by tests to observe waits

    # -- public ----------------------------------------------------------------------
    def select(self, query: str, *, limit: int | None = None) -> list[dict[str, Term]]:
        """Rows of a SELECT query (variable -> :class:`Term`; unbound variables omitted).

        ``query`` must not carry its own LIMIT/OFFSET; ``limit`` caps the rows. With a
        ``page_size``, the rows are fetched page by page (the query must have ORDER BY
        so that pages are stable).
        """
        if self.page_size is None:
            return self._select_once(with_limit(query, limit))
        rows: list[dict[str, Term]] = []
        while limit is None or len(rows) < limit:
            want = self.page_size if limit is None else min(self.page_size, limit - len(rows))
            page = self._select_once(with_limit(query, want, len(rows)))
            if len(page) > want:
                # The endpoint ignores LIMIT: asking for the next page would fetch it all again.
                warnings.warn(
                    f"SPARQL endpoint {self.endpoint} sent {len(page)} rows for a page of {want} (it ignores "
                    f"LIMIT); kept the first {want} and stopped paging", RuntimeWarning, stacklevel=2)
                rows.extend(page[:want])
                break
            rows.extend(page)
            if len(page) < want:
                break
        return rows

    # -- one request -----------------------------------------------------------------
    def _cache_file(self, query: str) -> Path:
        key = hashlib.sha256(f"{self.endpoint}\n{query}".encode()).hexdigest()
        return self.cache_path / key[:2] / f"{key}.json"

    def _select_once(self, query: str) -> list[dict[str, Term]]:
        cached = self._cache_file(query)
        if self.cache and cached.is_file():
            try:
                with open(cached, encoding="utf-8") as fh:
                    rows = [{k: Term.from_json(v) for k, v in r.items()} for r in json.load(fh)["rows"]]
                self.cache_hits += 1
                return rows
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                pass  # a damaged cache entry is refetched and overwritten
        rows = self._fetch(query)
        if self.cache:
            self._store(cached, query, rows)
        return rows

    def _store(self, path: Path, query: str, rows) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(
                    {"endpoint": self.endpoint, "query": query, "rows": [{k: t.to_json() for k, t in r.items()} for r in rows]},
                    fh,
                )
            os.replace(tmp, path)
        except OSError:
            pass  # the cache is an optimisation; a read-only cache dir must not fail a build

    def _fetch(self, query: str) -> list[dict[str, Term]]:
        last: _Retryable | None = None
        for attempt in range(self.retries + 1):
            if last is not None:
                wait = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
                if last.retry_after is not None:
                    wait = max(wait, min(last.retry_after, self.max_retry_after))
                self._sleep(wait)
            try:
                return self._request(query)
            except _Retryable as exc:
                last = exc
        raise SourceError(
            f"SPARQL endpoint {self.endpoint} kept failing after {self.retries + 1} attempts "
            f"(last: {last}); try again later, raise --retries, or use --source embedded"
        )

    def _request(self, query: str) -> list[dict[str, Term]]:
        from SPARQLWrapper import JSON, POST, SPARQLWrapper
        from SPARQLWrapper.SPARQLExceptions import (
            EndPointInternalError,
            EndPointNotFound,
            QueryBadFormed,
            SPARQLWrapperException,
            Unauthorized,
            URITooLong,
        )

        wrapper = SPARQLWrapper(self.endpoint, agent=self.user_agent)
        wrapper.setMethod(POST)
        wrapper.setReturnFormat(JSON)
        wrapper.setTimeout(int(max(1, round(self.timeout))))
        wrapper.setQuery(query)
        self.queries_issued += 1
        where = f"SPARQL endpoint {self.endpoint}"
        try:
            result = wrapper.query()
            response = result.response
            status = getattr(response, "status", 200)
            content_type = (response.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            body = self._read_bounded(response)
        except EndPointInternalError as exc:
            detail = _body_text(exc)
            if "timeout" in detail.lower():
                raise SourceError(
                    f"{where} timed out evaluating the query (HTTP 500: {detail[:200]}); "
                    "lower --per-hop-limit / --candidate-limit or use fewer seeds"
                ) from None
            raise _Retryable(f"HTTP 500 {detail[:200]}", _header_retry_after(exc.__context__)) from None
        except QueryBadFormed as exc:
            raise SourceError(f"{where} rejected the query as malformed (HTTP 400): {_body_text(exc)[:300]}") from None
        except EndPointNotFound:
            raise SourceError(f"{where} answered 404 Not Found; check the endpoint URL") from None
        except Unauthorized:
            raise SourceError(f"{where} answered 401 Unauthorized; it needs credentials kgprobe does not send") from None
        except URITooLong:
            raise SourceError(f"{where} answered 414 URI Too Long; use fewer seeds per query") from None
        except urllib.error.HTTPError as exc:
            if exc.code in RETRY_STATUSES:
                raise _Retryable(f"HTTP {exc.code} {exc.reason}", _header_retry_after(exc)) from None
            raise SourceError(f"{where} answered HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise _Retryable(f"no answer within {self.timeout:g} s") from None
            if isinstance(reason, ConnectionRefusedError):
                raise SourceError(
                    f"{where} is down or unreachable (connection refused); check the URL and that "
                    "the server runs, or use --source embedded"
                ) from None
            raise SourceError(f"{where} is unreachable: {reason}; check the URL and your network") from None
        except (TimeoutError, socket.timeout):
            raise _Retryable(f"no answer within {self.timeout:g} s") from None
        except (http.client.HTTPException, ConnectionError) as exc:
            raise _Retryable(f"connection dropped ({type(exc).__name__}: {exc})") from None
        except SPARQLWrapperException as exc:
            raise SourceError(f"{where} failed: {exc}") from None
        if status in RETRY_STATUSES:  # some stacks hand non-2xx bodies back without raising
            raise _Retryable(f"HTTP {status}", _retry_after_seconds(response.headers.get("Retry-After")))
        if content_type not in ("application/sparql-results+json", "application/json"):
            snippet = body[:120].decode("utf-8", "replace").replace("\n", " ")
            raise SourceError(
                f"{where} answered with {content_type or 'no content type'} instead of SPARQL JSON "
                f"(starts: {snippet!r}); is the URL a SPARQL endpoint (e.g. .../sparql or .../query)?"
            )
        try:
            doc = json.loads(body)
            del body
            variables = doc["head"]["vars"]
            bindings = doc["results"]["bindings"]
            if not isinstance(bindings, list):
                raise TypeError("results.bindings is not a list")
            self.rows_received += len(bindings)
            if self.rows_received > self.max_rows:
                raise SourceError(
                    f"{where} has sent {self.rows_received} rows in this build, more than the limit of "
                    f"{self.max_rows}; if the build really needs more, raise --max-rows (or "
                    "KGPROBE_SPARQL_MAX_ROWS), else lower --per-hop-limit / --candidate-limit"
                )
            return [{k: Term.from_json(v) for k, v in b.items() if k in variables} for b in bindings]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SourceError(
                f"{where} sent a malformed or truncated SPARQL JSON answer ({type(exc).__name__}: "
                f"{str(exc)[:120]}); try again, or lower the page size"
            ) from None


    def _read_bounded(self, response) -> bytes:
        """The response body, refused once it passes the per-answer or per-build byte limit."""
        where = f"SPARQL endpoint {self.endpoint}"
        deadline = time.monotonic() + max(self.timeout, 1.0) * 4
        chunks, size = [], 0
        while True:
            chunk = response.read(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            self.bytes_received += len(chunk)
            if size > self.max_response_bytes:
                raise SourceError(
                    f"{where} sent an answer larger than {self.max_response_bytes / (1 << 20):g} MiB; raise "
                    "--max-response-mb (or KGPROBE_SPARQL_MAX_RESPONSE_MB) if that is expected, else lower "
                    "the page size or the limits of the build"
                )
            if self.bytes_received > self.max_bytes:
                raise SourceError(
                    f"{where} has sent more than {self.max_bytes / (1 << 20):g} MiB in this build; raise "
                    "--max-mb (or KGPROBE_SPARQL_MAX_MB) if the build really needs more"
                )
            if time.monotonic() > deadline:  # a server that trickles bytes forever
                raise _Retryable(f"the answer took longer than {max(self.timeout, 1.0) * 4:g} s to arrive")
            chunks.append(chunk)
        return b"".join(chunks)


def _body_text(exc: Exception) -> str:
    """The server's response body that SPARQLWrapper folded into its exception message."""
    message = str(exc.args[0]) if exc.args else ""
    _, sep, rest = message.partition("Response:\n")
    if not sep:
        return ""
    try:
        raw = ast.literal_eval(rest.strip())
    except (ValueError, SyntaxError):
        return rest.strip()
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _header_retry_after(exc) -> float | None:
    headers = getattr(exc, "headers", None)
    return _retry_after_seconds(headers.get("Retry-After")) if headers is not None else None
