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
    """One score request as token ids; ``boundary`` is the index of the first scored token."""

    ids: list[int]
    boundary: int


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
    if not request.continuation:
        raise InputError(
            f"score request {index} has an empty continuation (context {request.context[-40:]!r}); "
            "there is nothing to score. Drop the request or give the option text."
        )
    enc = encode_pair(tokenizer, request.context, request.continuation, add_bos=add_bos, start=start)
    if enc.boundary >= len(enc.ids):
        raise InputError(f"score request {index}: the continuation {request.continuation!r} produced no tokens.")
    if window is not None and len(enc.ids) + reserve > window:
        raise InputError(
            f"score request {index} is {len(enc.ids)} tokens long, more than the model window of "
            f"{window} tokens allows; kgprobe does not truncate contexts (it would silently drop "
            "examples). Use fewer in-context examples or shorter prompts."
        )
    return enc


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

    def _encode_checked(self, index: int, request: ScoreRequest) -> Encoded:
        return encode_score_request(
            self._tokenizer, index, request, add_bos=self.add_bos, start=self._start_token,
            window=self.max_length, reserve=self._window_reserve,
        )

    def _prompt_ids(self, request: GenerateRequest) -> list[int]:
        return prompt_ids(self._tokenizer, request, add_bos=self.add_bos, start=self._start_token)
