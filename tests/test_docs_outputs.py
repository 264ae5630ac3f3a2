"""Every command output shown in README.md, CONTRIBUTING.md and docs/ still matches a fresh run.

The blocks and how they are run: scripts/docs_outputs.py. A block that no longer matches
is refreshed with ``python scripts/docs_outputs.py update NAME`` after checking the diff.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docs_outputs", REPO / "scripts" / "docs_outputs.py")
docs_outputs = importlib.util.module_from_spec(_spec)
sys.modules["docs_outputs"] = docs_outputs  # dataclasses look their module up by name
_spec.loader.exec_module(docs_outputs)

BLOCKS = docs_outputs.output_blocks()


def test_every_output_block_is_listed_once_and_every_listed_block_is_shown():
    names = [block.name for block in BLOCKS]
    assert sorted(set(names)) == sorted(docs_outputs.BLOCKS), "BLOCKS in scripts/docs_outputs.py vs the Markdown"
    assert len(names) == len(set(names)), f"a block name is used twice: {names}"


def test_no_output_is_shown_without_a_marker():
    # Output goes in ```text blocks after <!-- output: NAME -->; commands go in ```bash.
    assert docs_outputs.unmarked_output_blocks() == []


def test_every_output_block_runs_a_command():
    for block in BLOCKS:
        assert block.lines and block.lines[0].startswith("$ "), block.where


def test_masks_and_excerpts():
    expected = ["$ kgprobe run", "...", "round 2 | 9.9 queries/s | ETA 0:01", "run: runs/20260101-120000-countries-zp-lke-abc123.kgrun"]
    actual = ["$ kgprobe run", "a", "b", "round 1 running 0:10 | queries 0/64 done before this round",
              "round 2 | 0.4 queries/s | ETA 1:07", "run: runs/20261124-162258-countries-zp-lke-e4e93c.kgrun"]
    norm = docs_outputs.normalize
    assert docs_outputs.matches(norm(expected), norm(actual))
    assert not docs_outputs.matches(norm(expected), norm(actual[:-1] + ["run: elsewhere.kgrun"]))
    # "..." may stand for no line at all, but a shown line may not go missing.
    assert docs_outputs.matches(norm(["x", "...", "y"]), norm(["x", "y"]))
    assert not docs_outputs.matches(norm(["x", "y"]), norm(["x"]))
    assert norm(['"round_ms": 1.405, "edges": 100000']) == ['"round_ms": <T>, "edges": 100000']


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, id=b.name, marks=[pytest.mark.slow] if docs_outputs.BLOCKS.get(b.name, docs_outputs.BlockSpec()).slow
                  else []) for b in BLOCKS],
)
def test_output_block_matches_a_fresh_run(block):
    problem = docs_outputs.check_block(block)
    assert problem is None, problem


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_documents_resolve():
    broken = []
    for path in docs_outputs.markdown_files():
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.name}: {target}")
            elif anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), flags=re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{path.name}: {target}")
    assert broken == []
