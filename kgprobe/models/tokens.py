"""Token-level rules shared by the local backends (transformers and vLLM).

One copy of how a score request becomes token ids, where its continuation starts, the
BOS policy, the prompt ids of a generation request and how stop strings cut generated
text, so that both backends score exactly the same tokens and a test against one holds
for the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kgprobe.errors import InputError
from kgprobe.models.base import GenerateRequest, ScoreRequest


@dataclass
class Encoded:
    """One score request as token ids; ``boundary`` is the index of the first scored token.

    ``shared``: how many leading ids are the same for every request with this context
    (its encoded head, see :class:`BatchEncoder`); 0 when unknown.
    """

    ids: list[int]
    boundary: int
    shared: int = 0


def common_prefix_len(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """Length of the common prefix of ``a`` and ``b``, at most ``limit``."""
    n = min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def longest_common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix shared by every sequence."""
    limit = min(len(s) for s in seqs)
    for s in seqs[1:]:
        limit = common_prefix_len(seqs[0], s, limit)
    return limit


def start_token(tokenizer) -> int:
    """The token that conditions the first position when a model adds no BOS.

    Without it the first token of an empty context would have no log-probability.
    """
    return tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.bos_token_id


def encode_pair(tokenizer, context: str, continuation: str, *, add_bos: bool, start: int) -> Encoded:
    """Tokenize context + continuation together; the continuation starts at the first token
    whose character span ends after the context (a token straddling the boundary is scored)."""
    enc = tokenizer(context + continuation, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    n_context = len(context)
    first = next((i for i, (_, end) in enumerate(enc["offset_mapping"]) if end > n_context), len(ids))
    prefix: list[int] = []
    if add_bos:
        prefix = [tokenizer.bos_token_id]
    elif first == 0:
        prefix = [start]
    return Encoded(prefix + ids, len(prefix) + first)


def _check_request(index: int, request: ScoreRequest) -> None:
    if not request.continuation:
        raise InputError(
            f"score request {index} has an empty continuation (context {request.context[-40:]!r}); "
            "there is nothing to score. Drop the request or give the option text."
        )


def _check_encoded(index: int, request: ScoreRequest, enc: Encoded, window: int | None, reserve: int) -> None:
    if enc.boundary >= len(enc.ids):
        raise InputError(f"score request {index}: the continuation {request.continuation!r} produced no tokens.")
    if window is not None and len(enc.ids) + reserve > window:
        raise InputError(
            f"score request {index} is {len(enc.ids)} tokens long, more than the model window of "
            f"{window} tokens allows; kgprobe does not truncate contexts (it would silently drop "
            "examples). Use fewer in-context examples or shorter prompts."
        )


def encode_score_request(
    tokenizer,
    index: int,
    request: ScoreRequest,
    *,
    add_bos: bool,
    start: int,
    window: int | None,
    reserve: int = 0,
) -> Encoded:
    """:func:`encode_pair` with the checks every backend makes.

    ``window`` is the model's context length (None: unbounded); ``reserve`` tokens of it
    are kept free (vLLM must generate one token after a scored prompt). Contexts are
    refused, never truncated: truncation would silently drop in-context examples.
    """
    _check_request(index, request)
    enc = encode_pair(tokenizer, request.context, request.continuation, add_bos=add_bos, start=start)
    _check_encoded(index, request, enc, window, reserve)
    return enc


class BatchEncoder:
    """Pair tokenization of many score requests with few tokenizer calls, same ids as
    :func:`encode_pair`.

    Why it is exact: for a byte-level BPE tokenizer with no normalizer (GPT-2, SmolLM2,
    Llama-3, Qwen style), tokenizers first cut the text into pre-tokens with a regex
    that only looks one character past each match, then run BPE inside each pre-token.
    Appending text to a context can only change the context's *last* pre-token (it may
    grow, "Fran" + "ce", or split differently, trailing whitespace before a word); every
    earlier pre-token boundary stays, and BPE never merges across one. So the ids of
    ``context + continuation`` are the context's own ids up to the start of its
    second-to-last pre-token (one pre-token more than needed, as a margin), followed by
    the ids of the rest of the context plus the continuation, tokenized on its own. The
    context is encoded once per distinct context and all "rest + continuation" texts in
    one batched call. Special (added) tokens are split before pre-tokenization, so a
    context or continuation containing one, or a context ending in the beginning of
    one, goes through :func:`encode_pair`; so does every request when the tokenizer is
    not of this kind (its full texts are then encoded in one batched call).
    """

    def __init__(self, tokenizer, *, add_bos: bool, start: int):
        self.tokenizer = tokenizer
        self.add_bos = add_bos
        self.start = start
        self._backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
        self.splits_safely = self._backend is not None and _byte_level_bpe(self._backend)
        added = []
        if self._backend is not None:
            added = [t.content for t in tokenizer.added_tokens_decoder.values() if t.content]
        self._added = added
        self._added_firsts = frozenset(a[0] for a in added)
        self._added_prefixes = tuple({a[:i] for a in added for i in range(1, len(a))})
        self._pre = self._backend.pre_tokenizer if self.splits_safely else None

    # -------------------------------------------------------------- helpers
    def _has_added(self, text: str) -> bool:
        return bool(self._added_firsts) and not self._added_firsts.isdisjoint(text) and any(
            a in text for a in self._added
        )

    def _encode_texts(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
        if not texts:
            return []
        if self._backend is not None:
            out = self._backend.encode_batch(texts, add_special_tokens=False)
            return [(e.ids, e.offsets) for e in out]
        enc = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        return list(zip(enc["input_ids"], enc["offset_mapping"]))

    def _finish(self, ids: list[int], first: int, head: int = 0) -> Encoded:
        if self.add_bos:
            return Encoded([self.tokenizer.bos_token_id] + ids, first + 1, head + 1 if head else 0)
        if first == 0:
            return Encoded([self.start] + ids, 1)
        return Encoded(ids, first, head)

    def _tail_start(self, context: str) -> int:
        """Character offset of the context's second-to-last pre-token (0 with fewer)."""
        pieces = self._pre.pre_tokenize_str(context)
        return pieces[-2][1][0] if len(pieces) >= 2 else 0

    # -------------------------------------------------------------- main
    def encode(self, requests: Sequence[ScoreRequest]) -> list[Encoded]:
        """One :class:`Encoded` per request, equal to :func:`encode_pair`'s."""
        contexts: dict[str, int] = {}
        for r in requests:
            contexts.setdefault(r.context, len(contexts))
        distinct = list(contexts)
        safe = [self.splits_safely and not self._has_added(c) and not c.endswith(self._added_prefixes)
                for c in distinct] if self.splits_safely else [False] * len(distinct)
        # Per distinct context: its ids and where its stable head ends (token k, char s).
        heads: list[tuple[list[int], int, int]] = [([], 0, 0)] * len(distinct)
        safe_groups = [g for g, ok in enumerate(safe) if ok and distinct[g]]
        starts = [self._tail_start(distinct[g]) for g in safe_groups]
        whole = self._encode_texts([distinct[g] for g in safe_groups])
        tails = self._encode_texts([distinct[g][s:] for g, s in zip(safe_groups, starts)])
        for g, s, (ids, _), (tail, _) in zip(safe_groups, starts, whole, tails):
            k = len(ids) - len(tail)
            # The context's ids must end with its tail's own ids; else s is no token boundary.
            if k < 0 or ids[k:] != tail:
                safe[g] = False
                continue
            heads[g] = (list(ids[:k]), k, s)
        texts, plan = [], []  # plan: (request index, group, chars cut off the front)
        for i, r in enumerate(requests):
            g = contexts[r.context]
            if safe[g] and not self._has_added(r.continuation):
                s = heads[g][2]
                texts.append(r.context[s:] + r.continuation)
                plan.append((i, g, s))
            else:
                texts.append(r.context + r.continuation)
                plan.append((i, -1, 0))
        out: list[Encoded | None] = [None] * len(requests)
        for (i, g, s), (ids, offsets) in zip(plan, self._encode_texts(texts)):
            n_context = len(requests[i].context) - s
            first = next((j for j, (_, end) in enumerate(offsets) if end > n_context), len(ids))
            if g < 0:
                out[i] = self._finish(list(ids), first)
            else:
                head, k, _ = heads[g]
                out[i] = self._finish(head + list(ids), k + first, k)
        return out  # type: ignore[return-value]


def _byte_level_bpe(backend) -> bool:
    """Is ``backend`` a byte-level BPE without normalizer, whose pre-tokens are regex splits?"""
    import json

    try:
        spec = json.loads(backend.to_str())
    except Exception:  # a tokenizer that cannot describe itself: use the safe path
        return False
    normalizer = spec.get("normalizer")
    # An empty normalizer sequence changes nothing: transformers 5.17's GGUF conversion
    # writes one where later releases write none.
    if normalizer is not None and normalizer != {"type": "Sequence", "normalizers": []}:
        return False
    if (spec.get("model") or {}).get("type") != "BPE":
        return False
    pre = spec.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    if not parts:
        return False
    for part in parts:
        kind = part.get("type")
        if kind == "ByteLevel":
            if part.get("add_prefix_space"):
                return False
        elif kind == "Split":
            if part.get("behavior") != "Isolated" or part.get("invert"):
                return False
        elif kind != "Digits":
            return False
    return any(part.get("type") == "ByteLevel" for part in parts)


def encode_score_requests(
    encoder: BatchEncoder,
    requests: Sequence[ScoreRequest],
    *,
    window: int | None,
    reserve: int = 0,
) -> list[Encoded]:
    """:class:`BatchEncoder` with the checks of :func:`encode_score_request`."""
    for index, request in enumerate(requests):
        _check_request(index, request)
    encoded = encoder.encode(requests)
    for index, (request, enc) in enumerate(zip(requests, encoded)):
        _check_encoded(index, request, enc, window, reserve)
    return encoded


def prompt_ids(tokenizer, request: GenerateRequest, *, add_bos: bool, start: int) -> list[int]:
    """Token ids of a generation prompt, through the chat template when ``request.chat``."""
    text = request.prompt
    if request.chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": request.prompt}], add_generation_prompt=True, tokenize=False
        )
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if add_bos and (not ids or ids[0] != tokenizer.bos_token_id):
        ids = [tokenizer.bos_token_id] + ids
    return ids or [start]


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the earliest occurrence of any stop string."""
    cut = len(text)
    for s in stop:
        if s:
            found = text.find(s)
            if found != -1:
                cut = min(cut, found)
    return text[:cut]


class TokenizedBackend:
    """The tokenizer-facing part both local backends share.

    A backend mixing this in sets ``_tokenizer``, ``_label``, ``add_bos``,
    ``_start_token`` and ``max_length`` (None: unbounded); ``_window_reserve`` tokens of
    the window stay free for what the engine must generate after a scored prompt.
    """

    _window_reserve = 0

    @property
    def name(self) -> str:
        return self._label

    @property
    def tokenizer(self):
        return self._tokenizer

    def encode(self, context: str, continuation: str) -> tuple[list[int], int]:
        """Token ids of context + continuation (with this model's BOS policy) and the index
        of the first continuation token."""
        enc = self._encode(context, continuation)
        return enc.ids, enc.boundary

    def _encode(self, context: str, continuation: str) -> Encoded:
        return encode_pair(self._tokenizer, context, continuation, add_bos=self.add_bos, start=self._start_token)

    def _encode_all(self, requests: Sequence[ScoreRequest]) -> list[Encoded]:
        """Every request encoded with few tokenizer calls (:class:`BatchEncoder`), checked."""
        encoder = getattr(self, "_batch_encoder", None)
        if encoder is None or encoder.tokenizer is not self._tokenizer:
            encoder = self._batch_encoder = BatchEncoder(self._tokenizer, add_bos=self.add_bos, start=self._start_token)
        return encode_score_requests(encoder, requests, window=self.max_length, reserve=self._window_reserve)

    def _prompt_ids(self, request: GenerateRequest) -> list[int]:
        return prompt_ids(self._tokenizer, request, add_bos=self.add_bos, start=self._start_token)
