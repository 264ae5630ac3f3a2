"""The run file's checksums: one SHA-256 per record, and what :meth:`RunStore.verify` reports."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: The value of meta ``integrity`` in files that carry checksums (see ``checks``).
INTEGRITY_SCHEME = "sha256-rows-v1"

def digest_rows(h, rows) -> None:
    """Feed SQLite rows into ``h`` unambiguously (type tag, length, value per column)."""
    for row in rows:
        for v in row:
            if v is None:
                h.update(b"N;")
            elif isinstance(v, int):
                h.update(b"I%d;" % v)
            elif isinstance(v, float):
                h.update(b"F" + v.hex().encode() + b";")
            elif isinstance(v, str):
                b = v.encode("utf-8", "surrogatepass")
                h.update(b"S%d:" % len(b) + b)
            else:
                b = bytes(v)
                h.update(b"B%d:" % len(b) + b)
        h.update(b"|")


def meta_digest(key: str, value: str) -> str:
    h = hashlib.sha256(b"meta")
    digest_rows(h, [(key, value)])
    return h.hexdigest()


@dataclass
class Problem:
    """One damaged record found by :meth:`RunStore.verify`."""

    where: str  # "file", "meta", "kg", "round", "responses"
    round: int | None
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class Verification:
    """What :meth:`RunStore.verify` found."""

    path: str
    checked: bool  # the file carries checksums (False: written by an older kgprobe)
    rounds: int
    records: int  # records whose checksum (or, without checksums, decoding) was verified
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def only_last_round(self) -> bool:
        """Every problem lies in the last committed round or in responses after it."""
        if not self.problems:
            return False
        return all(p.where in ("round", "responses", "head") and p.round is not None and p.round >= self.rounds
                   for p in self.problems)

    def summary(self) -> str:
        if self.problems:
            head = "; ".join(str(p) for p in self.problems[:5])
            more = f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
            return head + more
        if not self.checked:
            return (f"no checksums: written by an older kgprobe; {self.records} records decode and "
                    f"{self.rounds} rounds are consistent, but changed values cannot be detected")
        return f"ok: {self.records} records match their checksums ({self.rounds} rounds)"
