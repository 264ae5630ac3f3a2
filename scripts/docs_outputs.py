#!/usr/bin/env python
"""Check, or refresh, every command output shown in the project's Markdown.

An output block is a fenced ``text`` block right after a marker line
``<!-- output: NAME -->``. Its lines starting with ``$ `` are commands; the lines after a
command are what it printed (stdout and stderr together). A line ``...`` stands for any
number of lines, so a block can show an excerpt. A command ending in ``&`` runs in the
background (a server) and is stopped when the block is done; its output is not shown.

Each block runs with bash in a fresh temporary directory, with this checkout's code first
on ``PYTHONPATH`` and the running Python's ``bin`` first on ``PATH`` (so ``kgprobe`` is
this checkout's). What legitimately changes between runs is masked on both sides before
comparing: rates and ETAs, run file names (they carry the time), dates, timings in JSON.

    python scripts/docs_outputs.py check             # the fast blocks (tests/test_docs_outputs.py)
    python scripts/docs_outputs.py check --slow      # every block (the slow ones use the default model)
    python scripts/docs_outputs.py update NAME ...   # rewrite these blocks from a fresh run
    python scripts/docs_outputs.py list

Every block name must be in :data:`BLOCKS`, which says whether it is slow and what it needs.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- output: ([a-z0-9-]+) -->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class BlockSpec:
    slow: bool = False  # uses the default model or a long benchmark: run with --slow (CI's full suite)
    port: str | None = None  # a port written in the block; replaced by a free one while it runs
    timeout: float = 300.0  # seconds per command


#: Every output block of the documentation. A name here without a block, or a block
#: without a name here, fails tests/test_docs_outputs.py.
BLOCKS: dict[str, BlockSpec] = {
    "help-exit-codes": BlockSpec(),
    "first-run": BlockSpec(slow=True, timeout=900),
    "oxigraph-build": BlockSpec(port="7878"),
    "api-tiny": BlockSpec(),
    "report-md": BlockSpec(),
    "compare": BlockSpec(),
    "resume": BlockSpec(),
    "questions": BlockSpec(),
    "bench-verifier": BlockSpec(),
    "bench-sampler": BlockSpec(),
}


@dataclass
class Block:
    name: str
    path: Path
    start: int  # index of the first line inside the fence
    end: int  # index of the closing fence
    lines: list[str]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.start + 1}"


def markdown_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    return [f for f in files if f.is_file()]


def fenced_blocks(path: Path):
    """(language, first line index, closing fence index, marker name or None) per fenced block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i].strip())
        if fence is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        previous = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = MARKER.match(previous.strip())
        yield fence.group(1), i + 1, j, marker.group(1) if marker else None
        i = j + 1


def output_blocks() -> list[Block]:
    found = []
    for path in markdown_files():
        lines = path.read_text(encoding="utf-8").splitlines()
        for _lang, start, end, name in fenced_blocks(path):
            if name is not None:
                found.append(Block(name, path, start, end, lines[start:end]))
    return found


def unmarked_output_blocks() -> list[str]:
    """Fenced blocks that look like output (no language, or ``text``) but carry no marker."""
    bad = []
    for path in markdown_files():
        for lang, start, _end, name in fenced_blocks(path):
            if name is None and lang in ("", "text", "console"):
                bad.append(f"{path.relative_to(REPO)}:{start}")
    return bad


# What differs between two honest runs of the same command, masked on both sides.
MASKS = [
    (re.compile(r"\d+(?:\.\d+)? (queries|responses|facts)/s"), r"<N> \1/s"),
    (re.compile(r"ETA \d+(?::\d\d)+"), "ETA <T>"),
    (re.compile(r"\b\d{8}-\d{6}-[A-Za-z0-9_.-]*?[0-9a-f]{6}\b"), "<RUN>"),
    (re.compile(r"\b\d{8}-\d{6}(?:-[A-Za-z0-9_.-]*)?…"), "<RUN>…"),  # cut short in a table cell
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d| UTC)?"), "<DATE>"),
    # Timings and memory in benchmark JSON and text.
    (re.compile(r'("[a-z0-9_]*(?:seconds|_s|_ms|time|elapsed|rss|per_s|speedup|bytes_per)[a-z0-9_]*"): -?[0-9.e+-]+'),
     r"\1: <T>"),
    (re.compile(r"\b\d+(?:\.\d+)? (ms|MB|GB)\b"), r"<N> \1"),
    (re.compile(r"^\| versions \| .* \|$"), "| versions | <VERSIONS> |"),
]
# Lines that appear or not depending on speed: "round 3 running 0:10" inside a long round.
VOLATILE_LINES = re.compile(r"^round \d+ running \d+:\d\d")


def normalize(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        line = line.rstrip()
        if VOLATILE_LINES.match(line):
            continue
        for pattern, replacement in MASKS:
            line = pattern.sub(replacement, line)
        out.append(line)
    return out


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line-by-line equality where an expected line ``...`` matches any run of lines."""
    parts = [r"(?:[^\n]*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in expected]
    return re.fullmatch("".join(parts), "".join(line + "\n" for line in actual)) is not None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout:.0f} s")


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    # Same output on every machine: no terminal, a fixed width, unbuffered (stdout and
    # stderr interleave as printed), two threads as in the other product tests.
    env.update(PYTHONUNBUFFERED="1", COLUMNS="100", TERM="dumb", OMP_NUM_THREADS="2", LC_ALL="C.UTF-8")
    env.pop("FORCE_COLOR", None)
    return env


def run_block(block: Block) -> list[str]:
    """The block's commands run afresh: the block as it should read now."""
    spec = BLOCKS[block.name]
    port = str(free_port()) if spec.port else None
    produced: list[str] = []
    background: list[subprocess.Popen] = []
    env = environment()
    with tempfile.TemporaryDirectory(prefix=f"kgprobe-docs-{block.name}-") as workdir:
        # The commands read as if run in a clone of the repository: examples/ and the
        # package's data files are where a clone has them.
        for name in ("examples", "kgprobe"):
            (Path(workdir) / name).symlink_to(REPO / name)
        try:
            for line in block.lines:
                if not line.startswith("$ "):
                    continue
                produced.append(line)
                command = line[2:]
                if port:
                    command = command.replace(spec.port, port)
                if command.rstrip().endswith("&"):
                    background.append(subprocess.Popen(
                        ["bash", "-c", command.rstrip()[:-1]], cwd=workdir, env=env, start_new_session=True,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                    if port:
                        wait_for_port(int(port))
                    continue
                done = subprocess.run(["bash", "-c", command], cwd=workdir, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, timeout=spec.timeout)
                output = done.stdout
                if port:
                    output = output.replace(port, spec.port)
                produced.extend(output.rstrip("\n").splitlines() if output.strip() else [])
        finally:
            for process in background:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
    return [line.rstrip() for line in produced if not VOLATILE_LINES.match(line)]


def check_block(block: Block) -> str | None:
    """None when the block still matches a fresh run, else a diff to show."""
    if block.name not in BLOCKS:
        return f"{block.where}: output block {block.name!r} is not listed in BLOCKS of {Path(__file__).name}"
    actual = run_block(block)
    expected = normalize(block.lines)
    if matches(expected, normalize(actual)):
        return None
    diff = difflib.unified_diff(block.lines, actual, "documented", "produced now", lineterm="", n=2)
    return f"{block.where}: output block {block.name!r} no longer matches\n" + "\n".join(diff)


def update_block(block: Block, force: bool) -> bool:
    actual = run_block(block)
    if "..." in block.lines and not force:
        if matches(normalize(block.lines), normalize(actual)):
            return False
        print(f"{block.where}: {block.name!r} shows an excerpt (...): edit it by hand or pass --force\n"
              + "\n".join(difflib.unified_diff(block.lines, actual, lineterm="", n=2)))
        return False
    lines = block.path.read_text(encoding="utf-8").splitlines()
    lines[block.start:block.end] = actual
    block.path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="run the blocks and compare")
    check.add_argument("names", nargs="*", help="only these blocks")
    check.add_argument("--slow", action="store_true", help="also the slow blocks")
    update = sub.add_parser("update", help="rewrite blocks from a fresh run")
    update.add_argument("names", nargs="+")
    update.add_argument("--force", action="store_true", help="also replace excerpts with the full output")
    sub.add_parser("list", help="every block with where it is")
    args = parser.parse_args(argv)

    blocks = output_blocks()
    if args.command == "list":
        for block in blocks:
            spec = BLOCKS.get(block.name)
            print(f"{block.name:20} {'slow' if spec and spec.slow else 'fast' if spec else 'UNLISTED'}  {block.where}")
        return 0
    chosen = [b for b in blocks if not args.names or b.name in args.names]
    if args.command == "update":
        # Later blocks first, so that earlier line numbers in the same file stay valid.
        for block in sorted(chosen, key=lambda b: (str(b.path), -b.start)):
            if update_block(block, args.force):
                print(f"updated {block.name} ({block.where})")
        return 0
    failures = 0
    for block in chosen:
        if not args.slow and not args.names and BLOCKS.get(block.name, BlockSpec()).slow:
            continue
        problem = check_block(block)
        print(problem or f"ok {block.name}")
        failures += problem is not None
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
