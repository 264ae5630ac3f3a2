"""Write kgprobe/probes/data/common_words.en.txt.gz from a SCOWL word list.

    apt-get install wamerican          # SCOWL size 50, American English
    python scripts/build_common_words.py /usr/share/dict/american-english

One lower-case word per line (letters a-z only, two or more), followed by a tab and "+"
when the list also holds the word capitalized (a proper noun: "china" and "China").
Same input, same bytes (gzip without a timestamp).
"""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "kgprobe" / "probes" / "data" / "common_words.en.txt.gz"


def main(path: str) -> int:
    words = Path(path).read_text(encoding="utf-8").split("\n")
    lower = {w for w in words if re.fullmatch(r"[a-z]{2,}", w)}
    proper = {w.lower() for w in words if re.fullmatch(r"[A-Z][a-z]+", w)}
    lines = sorted(w + ("\t+" if w in proper else "") for w in lower)
    with gzip.GzipFile(OUT, "wb", mtime=0, compresslevel=9) as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8"))
    print(f"wrote {OUT}: {len(lines)} words, {sum(w in proper for w in lower)} also proper nouns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/dict/american-english"))
