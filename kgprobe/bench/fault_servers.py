"""Misbehaving servers on loopback for the fault-injection suite (``kgprobe bench faults``
and ``tests/faults``): a SPARQL endpoint and an OpenAI-compatible completions API.

Both listen on 127.0.0.1 only, on a free port, in a daemon thread; they answer at most
``max_requests`` requests and stop by themselves after ``lifetime`` seconds, so a test
that forgets them cannot leave a server behind. The behaviour is chosen per request by
the first path segment (``http://127.0.0.1:PORT/MODE/...``), so one server serves many
cases.

The OpenAI-compatible server is deterministic: its "tokenizer" splits the prompt into
words with their leading whitespace, and each token's log-probability is a function of
the prompt text up to and including it (CRC-32), so the same request always gets the
same answer and a resumed run can be compared bit for bit with an unbroken one.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SPARQL_JSON = "application/sparql-results+json"


def fake_logprob(prefix: str) -> float:
    """The fake model's log-probability of the last token of ``prefix``."""
    return -round(0.05 + (zlib.crc32(prefix.encode("utf-8")) % 400) / 100.0, 2)


def fake_tokens(text: str) -> list[tuple[str, int]]:
    return [(m.group(0), m.start()) for m in re.finditer(r"\s*\S+|\s+$", text)]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler, max_requests: int, lifetime: float):
        super().__init__(("127.0.0.1", 0), handler)
        self.max_requests = max_requests
        self.count = 0
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.timer = threading.Timer(lifetime, self.stop)
        self.timer.daemon = True
        self.timer.start()

    def handle_error(self, request, client_address) -> None:
        pass  # clients that give up (timeouts, kills) are part of the game, not errors

    @property
    def port(self) -> int:
        return self.server_address[1]

    def url(self, mode: str, suffix: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{mode}{suffix}"

    def tick(self, mode: str) -> int | None:
        """Count a request; None once the request budget is spent."""
        with self.lock:
            if self.count >= self.max_requests:
                return None
            self.count += 1
            self.counts[mode] = self.counts.get(mode, 0) + 1
            return self.counts[mode]

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.timer.cancel()
        threading.Thread(target=self.shutdown, daemon=True).start()

    def close(self) -> None:
        self.stop()
        self.thread.join(timeout=5)
        self.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def reset(self) -> None:
        """Close the connection with a TCP reset (RST), mid-request."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self.connection.close()
        self.close_connection = True

    def hang(self, seconds: float) -> None:
        """Say nothing for ``seconds`` (bounded), then drop the connection."""
        self.server.stopping.wait(seconds)
        self.close_connection = True

    def read_body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(min(n, 1 << 22))


# -- SPARQL ----------------------------------------------------------------------------
def sparql_rows(variables: list[str], n: int, start: int = 0) -> list[dict]:
    return [{v: {"type": "literal", "value": f"{v}{start + i}"} for v in variables} for i in range(n)]


class _SparqlHandler(_Handler):
    def do_GET(self):  # noqa: N802
        self.do_POST()

    def do_POST(self):  # noqa: N802
        mode = self.path.strip("/").split("/")[0]
        count = self.server.tick(mode)
        body = self.read_body()
        if count is None:
            return self.send_body(503, b"request budget of the fake server spent", "text/plain")
        query = _query_text(body)
        limit = re.search(r"LIMIT (\d+)", query)
        asked = int(limit.group(1)) if limit else 1000
        doc = {"head": {"vars": ["entity", "kind", "value"]}, "results": {"bindings": []}}
        if mode == "html":
            return self.send_body(200, b"<html><body>Service maintenance</body></html>", "text/html")
        if mode == "malformed":
            return self.send_body(200, b'{"head": {"vars": ["x"]}, "results": {"bindings": [ {"x": ', SPARQL_JSON)
        if mode == "truncated":
            full = json.dumps({"head": {"vars": ["x"]}, "results": {"bindings": sparql_rows(["x"], 50)}}).encode()
            return self.send_body(200, full[: len(full) // 2], SPARQL_JSON)
        if mode == "wrongshape":
            return self.send_body(200, b'{"head": {"vars": ["x"]}, "results": {"bindings": {"x": 1}}}', SPARQL_JSON)
        if mode == "notjsonobject":
            return self.send_body(200, b'[1, 2, 3]', SPARQL_JSON)
        if mode == "r429":
            if count <= 2:
                return self.send_body(429, b"slow down", "text/plain", {"Retry-After": "1"})
            return self.send_body(200, json.dumps(doc).encode(), SPARQL_JSON)
        if mode == "r429always":
            return self.send_body(429, b"slow down", "text/plain", {"Retry-After": "0"})
        if mode == "s500":
            return self.send_body(500, b"internal error", "text/plain")
        if mode == "s503once":
            if count == 1:
                return self.send_body(503, b"unavailable", "text/plain")
            return self.send_body(200, json.dumps(doc).encode(), SPARQL_JSON)
        if mode == "hang":
            return self.hang(30)
        if mode == "reset":
            return self.reset()
        if mode == "oversized":
            # One answer larger than the client's per-answer limit (the client sets it low).
            pad = b" " * (3 << 20)
            return self.send_body(200, b'{"head": {"vars": ["x"]}, ' + pad + b'"results": {"bindings": []}}',
                                  SPARQL_JSON)
        if mode == "ignorelimit":
            # Every page holds far more rows than asked for, whatever LIMIT/OFFSET say.
            n = 200_000
            rows = ",".join('{"entity":{"type":"uri","value":"http://www.wikidata.org/entity/Q%d"},'
                            '"kind":{"type":"literal","value":"label"},"value":{"type":"literal","value":"x"}}'
                            % i for i in range(n))
            body = ('{"head":{"vars":["entity","kind","value"]},"results":{"bindings":[' + rows + "]}}").encode()
            return self.send_body(200, body, SPARQL_JSON)
        if mode == "empty":
            return self.send_body(200, json.dumps(doc).encode(), SPARQL_JSON)
        if mode == "rows":
            doc = {"head": {"vars": ["x"]}, "results": {"bindings": sparql_rows(["x"], min(asked, 25))}}
            return self.send_body(200, json.dumps(doc).encode(), SPARQL_JSON)
        return self.send_body(404, b"unknown mode", "text/plain")


def _query_text(body: bytes) -> str:
    from urllib.parse import parse_qs

    text = body.decode("utf-8", "replace")
    if text.startswith("query="):
        return parse_qs(text).get("query", [""])[0]
    return text


def sparql_server(max_requests: int = 500, lifetime: float = 300.0) -> _Server:
    """A misbehaving SPARQL endpoint; ``url(MODE)`` is its address for one behaviour."""
    return _Server(_SparqlHandler, max_requests, lifetime)


# -- OpenAI-compatible ------------------------------------------------------------------
class _OpenAIHandler(_Handler):
    def do_POST(self):  # noqa: N802
        parts = self.path.strip("/").split("/")
        mode = parts[0]
        count = self.server.tick(mode)
        raw = self.read_body()
        if count is None:
            return self.send_body(503, b'{"error": {"message": "budget spent"}}', "application/json")
        try:
            payload = json.loads(raw)
        except ValueError:
            return self.send_body(400, b'{"error": {"message": "bad json"}}', "application/json")
        if mode.startswith("slow"):  # slowMS: every answer takes MS milliseconds
            time.sleep(int(mode[4:] or 50) / 1000)
        elif mode == "html":
            return self.send_body(200, b"<html>proxy error</html>", "text/html")
        elif mode == "malformed":
            return self.send_body(200, b'{"id": "x", "choices": [', "application/json")
        elif mode == "wrongshape":
            return self.send_body(200, b'{"id": "x", "object": "text_completion", "choices": [{"text": 5}]}',
                                  "application/json")
        elif mode == "r429" and count % 3 == 1:
            return self.send_body(429, b'{"error": {"message": "rate limited"}}', "application/json",
                                  {"Retry-After": "0.2"})
        elif mode == "s500":
            return self.send_body(500, b'{"error": {"message": "boom"}}', "application/json")
        elif mode == "s503sometimes" and count % 4 == 0:
            return self.send_body(503, b'{"error": {"message": "busy"}}', "application/json")
        elif mode == "reset" and count % 3 == 0:
            return self.reset()
        elif mode == "hangevery2" and count % 2 == 0:
            return self.hang(20)
        elif mode.startswith("failfrom"):  # failfromN: every request after the N-th fails for good
            if count > int(mode[8:]):
                return self.send_body(400, b'{"error": {"message": "quota exhausted"}}', "application/json")
        elif mode == "hang":
            return self.hang(20)
        return self.send_body(200, json.dumps(_completion(payload)).encode(), "application/json")


def _completion(payload: dict) -> dict:
    prompt = payload.get("prompt", "")
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt else ""
    if payload.get("echo"):
        tokens = fake_tokens(prompt) + [(" x", len(prompt))]
        text = prompt + " x"
        lps = [None] + [fake_logprob(text[: off + len(tok)]) for tok, off in tokens[1:]]
        top = [None] + [{tok: lp} for (tok, _), lp in zip(tokens[1:], lps[1:])]
        return {"id": "cmpl-1", "object": "text_completion", "model": payload.get("model", "m"),
                "choices": [{"index": 0, "text": text, "finish_reason": "length",
                             "logprobs": {"tokens": [t for t, _ in tokens], "text_offset": [o for _, o in tokens],
                                          "token_logprobs": lps, "top_logprobs": top}}]}
    words = prompt.split()
    return {"id": "cmpl-1", "object": "text_completion", "model": payload.get("model", "m"),
            "choices": [{"index": 0, "text": " " + (words[-1] if words else "yes"), "finish_reason": "stop",
                         "logprobs": None}]}


def openai_server(max_requests: int = 20_000, lifetime: float = 600.0) -> _Server:
    """A deterministic OpenAI-compatible completions API; ``url(MODE, "/v1")`` is its base URL."""
    return _Server(_OpenAIHandler, max_requests, lifetime)
