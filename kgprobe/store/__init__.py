"""The run store: one SQLite file per run that never loses a model response.

What a run file holds (format version :data:`FORMAT_VERSION`):

``meta``
    key/value: ``format_version``, ``kgprobe_version``, ``created``, ``config`` (JSON),
    ``model_identity``, ``model_spec``, ``kg_fingerprint``, ``status`` (``running``,
    ``finished``, ``interrupted``) and ``stop_reason``.
``kg``
    the knowledge graph itself (zlib-compressed JSON), so a run file is self-contained:
    reports, ``compare`` and ``resume`` need nothing else.
``responses``
    every request and response of a round, one row per (round, phase) where phase is
    ``score`` or ``generate``, written right after the model returns and *before* the
    parameterized KG is updated from it, in the round's one transaction
    (:meth:`RunStore.round_transaction`), which keeps them even when the round's commit
    fails. ``request_sha`` is the
    SHA-256 of the canonical JSON of the requests, so a resumed run can prove that the
    requests it is about to send are the ones already answered and replay the answers.
``rounds``
    one row per finished round, committed atomically together with that round's rows in
    ``probes``: queries, timing, metrics (JSON), the PKG state after the round, the
    sampler and convergence state. PKG states are stored as a keyframe every
    :data:`KEYFRAME_EVERY` rounds and as the changed entries (delta) otherwise, so the
    file stays small on large graphs while every round's PKG can be rebuilt exactly.
``probes``
    one row per probed edge: round, position in the round, edge, design part (the
    design-based sample feeding the unbiased estimate), correctness, the question and the
    model's answer, method-specific detail (JSON), the prediction of its outcome made
    before its round (``predicted``: chance of a right answer) and, for design-based
    probes, the inclusion probability (``inclusion``; NULL otherwise). ``rounds.predictions``
    holds per predicate and entity group the mean prediction and mean predicted variance
    over the active edges before that round (JSON), which the estimators of
    :mod:`kgprobe.estimators` need, and under a stratified or adaptive design the group's
    expected floor and lean draws that round (two more numbers; files written before
    them have two, and their groups' estimates weigh each round by its draws).

``checks``
    integrity (files written since kgprobe added it; meta ``integrity`` names the scheme):
    one SHA-256 per record, computed over the whole stored row as SQLite returns it
    (``SELECT *``, every column in table order), so a column added later is covered
    without extra work. ``round:N`` chains round N's row and its probe rows to round
    N-1's digest; ``head`` holds the last round and its digest, so a deleted last round
    is noticed too; ``responses:N:PHASE``, ``kg`` and ``meta:KEY`` cover the other
    records. :meth:`RunStore.verify` recomputes them all; opening a file for a report or
    a resume refuses a damaged one with a :class:`~kgprobe.errors.DamagedFileError`
    (exit 2). A file without ``checks`` (an older kgprobe) is still read: its records are
    decoded and range-checked, and ``kgprobe verify`` says it carries no checksums.

Crash safety: the file is in WAL mode and every write is one transaction (a round's
responses and its record share one), so a process
killed at any moment (SIGKILL included) leaves the file at the last committed
transaction. Two runs never share a file; a writer holds an exclusive ``flock`` on its
run file for its whole life, so resuming a run that is still running is refused instead
of corrupting it.
"""

from kgprobe.store.codec import (
    apply_delta,
    kg_fingerprint,
    kg_from_dict,
    kg_to_dict,
    request_to_json,
    requests_json,
    requests_sha,
    state_delta,
)
from kgprobe.store.integrity import INTEGRITY_SCHEME, Problem, Verification
from kgprobe.store.records import Checkpoint, ProbeRecord, RoundRecord
from kgprobe.store.run_file import FORMAT_VERSION, KEYFRAME_EVERY, REPLAY_WINDOW_ENV, RunStore
from kgprobe.store.transactions import DISK_FULL_ENV

__all__ = [
    "DISK_FULL_ENV", "FORMAT_VERSION", "INTEGRITY_SCHEME", "KEYFRAME_EVERY", "REPLAY_WINDOW_ENV", "Checkpoint",
    "ProbeRecord", "Problem", "RoundRecord", "RunStore", "Verification", "apply_delta", "kg_fingerprint",
    "kg_from_dict", "kg_to_dict", "request_to_json", "requests_json", "requests_sha", "state_delta",
]
