"""Fixtures for the KG tests: a real oxigraph server, the embedded store, and a small
HTTP server that misbehaves on purpose for the fault tests. Every server binds
127.0.0.1 and is stopped when its fixture ends."""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from kgprobe.sources.embedded import EmbeddedStore
from kgprobe.sources.oxigraph_server import OxigraphServer


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Keep the SPARQL cache of every test in its own temporary directory."""
    monkeypatch.setenv("KGPROBE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="session")
def countries_server():
    """The real oxigraph server holding the embedded ``countries`` data."""
    with OxigraphServer("countries") as server:
        yield server


@pytest.fixture(scope="session")
def countries_store():
    """The in-process pyoxigraph store holding the same data."""
    return EmbeddedStore("countries")


class ScriptedHandler(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next step of ``server.script``; the last step repeats.

    A step is ``(status, headers, body_bytes, delay_seconds)``.
    """

    def do_POST(self):  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        self.server.requests.append(self.rfile.read(length))
        self._answer()

    def do_GET(self):  # noqa: N802
        self.server.requests.append(self.path.encode())
        self._answer()

    def _answer(self):
        script = self.server.script
        status, headers, body, delay = script.pop(0) if len(script) > 1 else script[0]
        if delay:
            time.sleep(delay)
        try:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def log_message(self, *args):  # keep test output clean
        pass


SPARQL_JSON = "application/sparql-results+json"


def sparql_json(rows: list[dict[str, str]], variables=("x",)) -> bytes:
    """A SPARQL JSON results body whose bindings are plain literals."""
    return json.dumps(
        {"head": {"vars": list(variables)},
         "results": {"bindings": [{k: {"type": "literal", "value": v} for k, v in r.items()} for r in rows]}}
    ).encode()


@pytest.fixture
def bad_server():
    """A loopback HTTP server scripted per test: ``bad_server.script = [...]``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ScriptedHandler)
    server.daemon_threads = True
    server.script = [(200, {"Content-Type": SPARQL_JSON}, sparql_json([]), 0)]
    server.requests = []
    server.url = f"http://127.0.0.1:{server.server_address[1]}/sparql"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
