"""Run the real ``oxigraph`` SPARQL server on a loopback port, loaded with embedded data.

Used by the KG tests and by ``kgprobe bench build`` to exercise the SPARQL client over
HTTP exactly as against Wikidata. The ``oxigraph`` binary comes from the ``oxigraph``
PyPI package (a test dependency); it is looked up next to the running Python, then on
``PATH``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from kgprobe.errors import SourceError
from kgprobe.sources.embedded import data_path


def find_oxigraph_binary() -> str:
    """Path of the ``oxigraph`` server binary, or a SourceError saying how to get it."""
    beside = Path(sys.executable).parent / "oxigraph"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("oxigraph")
    if found:
        return found
    raise SourceError("the oxigraph server binary is not installed; run `pip install oxigraph`")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OxigraphServer:
    """``with OxigraphServer("geo") as server: server.query_url`` — an in-memory oxigraph
    server on 127.0.0.1 holding an embedded KG (or nothing, with ``kg=None``).

    The server process is started in ``start()`` and killed in ``stop()``; both are
    idempotent, and the context manager always stops it.
    """

    def __init__(self, kg: str | None = "geo", *, startup_timeout: float = 20.0):
        self.kg = kg
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self._workdir: tempfile.TemporaryDirectory | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def query_url(self) -> str:
        """The SPARQL query endpoint URL."""
        return f"{self.base_url}/query"

    def start(self) -> "OxigraphServer":
        if self.process is not None:
            return self
        binary = find_oxigraph_binary()
        self._workdir = tempfile.TemporaryDirectory(prefix="kgprobe-oxigraph-")
        log = open(Path(self._workdir.name) / "server.log", "wb")
        for _ in range(3):  # the free port may be taken between probing and binding
            self.port = free_port()
            self.process = subprocess.Popen(
                [binary, "serve", "--bind", f"127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
            if self._wait_ready():
                break
            self._kill()
        else:
            log.close()
            raise SourceError(f"the oxigraph server did not start; see {log.name}")
        log.close()
        if self.kg:
            self.load_ntriples(gzip.decompress(data_path(self.kg).read_bytes()))
        return self

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.base_url}/query?query=ASK%7B%7D", timeout=2) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        return False

    def load_ntriples(self, data: bytes) -> None:
        """Add N-Triples to the default graph (``POST /store?default``)."""
        req = urllib.request.Request(
            f"{self.base_url}/store?default", data=data, method="POST",
            headers={"Content-Type": "application/n-triples"},
        )
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                r.read()
        except urllib.error.URLError as exc:
            raise SourceError(f"loading data into the oxigraph server failed: {exc}") from None

    def _kill(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            self.process = None

    def stop(self) -> None:
        self._kill()
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def __enter__(self) -> "OxigraphServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
