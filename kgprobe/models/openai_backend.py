"""OpenAI-compatible API backend (vLLM, llama.cpp server, OpenAI, ...) on the ``openai`` package.

Scoring
-------
A score request is one ``/v1/completions`` call with ``prompt = context + continuation``,
``echo=True``, ``logprobs=1`` and ``max_tokens=1``: the server returns, for every prompt
token, its text, its character offset (``text_offset``), its log-probability and the
most likely token at that position. The continuation's tokens are the tokens whose
character span ends after the context, the same rule as the local backends (the server
tokenizes context and continuation together; a token that straddles the boundary
counts as continuation). A token is greedy when its log-probability is the top one.
With ``scoring="prompt_logprobs"`` (vLLM's extra parameter) the same call also asks
for ``prompt_logprobs=0`` and takes each token's log-probability and rank from there
(rank 1 = greedy, exact even for ties); ``echo`` still supplies the offsets.

The server decides tokenization and BOS; ``identity`` says so (``bos=server``). The
first prompt token has no log-probability, so a continuation that starts the prompt
(empty context) cannot be scored through an API and is refused with an InputError.

A chat-only endpoint (``api="chat"``) cannot return log-probs of a given text:
``can_score`` is False and ``score`` raises a ModelError that says so; ``generate``
works and sends every prompt as a user message.

Reliability
-----------
Requests run concurrently (at most ``max_concurrency`` in flight *per server*, so
adding a server adds capacity) on an event loop in a background thread, so the synchronous interface also works inside a running loop
(notebooks). Requests are spread round-robin over ``base_urls``; a request that fails
with 429, 5xx, a timeout or a refused connection is retried on the next URL after an
exponential backoff with jitter (``Retry-After`` is honoured, capped), up to
``max_retries`` retries. 400/401/403/404/422 and malformed responses are not retried.
A batch either returns every result or raises one ModelError; when some requests of it
were answered before another failed for good, or before the round's deadline
(``round_timeout``, ``--round-timeout``) passed, the error is a
:class:`~kgprobe.errors.PartialBatchError` carrying those answers, so the run store (or
the response cache) keeps them and a resume asks only for the rest.

The API key is read from the environment variable ``api_key_env`` when the model is
created and handed to the HTTP client only; it is not part of ``identity``, ``repr``
or any error message (server messages are scrubbed of it). Local servers that need
no key (``vllm serve`` without ``--api-key``) work with the variable unset.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from kgprobe.errors import InputError, ModelError, PartialBatchError
from kgprobe.models.base import (
    GenerateRequest,
    LanguageModel,
    ScoreRequest,
    ScoreResult,
    check_generate_request,
)
from kgprobe.models.tokens import cut_at_stop

#: Sent when the key variable is unset: the client needs a non-empty key, keyless local
#: servers ignore it, and a server that does need a key answers 401 (reported clearly).
_NO_KEY = "EMPTY"
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_APIS = ("completions", "chat")
_SCORING = ("echo", "prompt_logprobs")


class _Retryable(Exception):
    """A failure worth another attempt (on the next base URL, after a backoff)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _PartialRun(Exception):
    """A batch that failed after some of its requests were answered (internal)."""

    def __init__(self, error: ModelError, answered: dict[int, Any], total: int):
        super().__init__(str(error))
        self.error, self.answered, self.total = error, answered, total


@dataclass
class _Call:
    """What one request does: the endpoint and its keyword arguments."""

    endpoint: str  # "completions" or "chat"
    kwargs: dict[str, Any]


class OpenAICompatibleModel(LanguageModel):
    """A model behind an OpenAI-compatible HTTP API.

    Args:
        model: the model name the server expects (``vllm serve PATH`` serves it as PATH
            unless ``--served-model-name`` is given).
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        base_urls: several API roots serving the same model; requests are spread
            over them and failed requests move to the next one.
        api_key_env: the environment variable holding the API key.
        api: ``"completions"`` (scoring and raw-text generation) or ``"chat"`` (a
            chat-only endpoint: generation only, ``can_score`` False).
        scoring: ``"echo"`` (standard ``echo`` + ``logprobs``) or ``"prompt_logprobs"``
            (adds vLLM's ``prompt_logprobs`` for exact ranks).
        max_concurrency: requests in flight at once on each base URL (a request retried on
            another URL waits for a place there).
        max_retries: retries of a request after a retryable failure.
        timeout: seconds per HTTP request.
        backoff: first retry delay in seconds; doubles per retry, capped at ``backoff_max``.
        label: the name used in ``identity`` (default: the model name). The servers are not
            part of the identity: any set of servers serving the same model name (the same
            weights) gives the same answers, so a run or cache can move between them.
        round_timeout: seconds one batch (one round's phase) may take in all, retries
            included; ``None``: no limit beyond the per-request ``timeout`` and retries.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        base_urls: Sequence[str] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        api: str = "completions",
        scoring: str = "echo",
        max_concurrency: int = 8,
        max_retries: int = 4,
        timeout: float = 60.0,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        label: str | None = None,
        round_timeout: float | None = None,
    ):
        urls = list(base_urls or []) + ([base_url] if base_url else [])
        if not urls:
            raise InputError("OpenAICompatibleModel needs base_url or base_urls, e.g. http://127.0.0.1:8000/v1.")
        for url in urls:
            if not str(url).startswith(("http://", "https://")):
                raise InputError(f"base URL {url!r} must start with http:// or https://.")
        if not model:
            raise InputError("OpenAICompatibleModel needs the model name the server serves.")
        if api not in _APIS:
            raise InputError(f"api must be one of {_APIS}, not {api!r}.")
        if scoring not in _SCORING:
            raise InputError(f"scoring must be one of {_SCORING}, not {scoring!r}.")
        if max_concurrency < 1 or max_retries < 0 or timeout <= 0:
            raise InputError("max_concurrency must be >= 1, max_retries >= 0 and timeout > 0.")
        self.model = model
        self.base_urls = [str(u).rstrip("/") for u in dict.fromkeys(urls)]
        self.api_key_env = api_key_env
        self.api = api
        self.scoring = scoring
        self.can_score = api == "completions"
        self.max_concurrency = int(max_concurrency)
        self.max_retries = int(max_retries)
        self.timeout = float(timeout)
        self.backoff = float(backoff)
        self.backoff_max = float(backoff_max)
        self._label = label
        if round_timeout is not None and (isinstance(round_timeout, bool) or not isinstance(round_timeout, (int, float))
                                          or not round_timeout > 0):
            raise InputError(f"round_timeout must be a number of seconds > 0, not {round_timeout!r}.")
        self.round_timeout = None if round_timeout is None else float(round_timeout)
        # Read once; kept only in the HTTP clients and in this private attribute, which
        # is used solely to scrub server messages.
        self.__key = os.environ.get(api_key_env) or _NO_KEY
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._clients: list[Any] = []
        self._next_url = 0
        #: Attempts that failed and were retried, since creation (for tests and reports).
        self.retries = 0

    # ------------------------------------------------------------------ interface
    @property
    def identity(self) -> str:
        return f"openai-compatible:{self._label or self.model}|api={self.api}|bos=server"

    @property
    def name(self) -> str:
        return self._label or self.model

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel(model={self.model!r}, base_urls={self.base_urls!r}, api={self.api!r})"

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Log-probabilities of each continuation, one completions call per request."""
        if not self.can_score:
            raise ModelError(
                f"{self.name} is a chat-only endpoint (api='chat'): chat APIs cannot return the "
                "log-probability of a given text, so scoring probes (zero-prompt multiple choice, "
                "yes/no by score) cannot run on it. Use a generation-based probe (wh-questions, "
                "yes/no by generation) or a completions endpoint (api='completions')."
            )
        calls = []
        for index, request in enumerate(requests):
            if not request.continuation:
                raise InputError(
                    f"score request {index} has an empty continuation (context {request.context[-40:]!r}); "
                    "there is nothing to score."
                )
            if not request.context:
                raise InputError(
                    f"score request {index} has an empty context: an API returns no log-probability "
                    "for the first token of a prompt, so its first continuation token cannot be "
                    "scored. Give a context (e.g. a space or an instruction)."
                )
            kwargs: dict[str, Any] = dict(
                model=self.model,
                prompt=request.context + request.continuation,
                echo=True,
                logprobs=1,
                # 1, not 0: some servers reject max_tokens=0; the generated token is ignored.
                max_tokens=1,
                temperature=0.0,
            )
            if self.scoring == "prompt_logprobs":
                kwargs["extra_body"] = {"prompt_logprobs": 0}
            calls.append(_Call("completions", kwargs))
        try:
            responses = self._run(calls)
        except _PartialRun as partial:
            raise self._partial(partial, lambda i, r: self._parse_score(i, requests[i], r)) from None
        return [
            self._parse_score(index, request, response)
            for index, (request, response) in enumerate(zip(requests, responses))
        ]

    def generate(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """Generated text per request; chat requests (or a chat-only API) use chat completions."""
        calls = []
        for index, request in enumerate(requests):
            check_generate_request(index, request)
            kwargs: dict[str, Any] = dict(
                model=self.model, max_tokens=request.max_tokens, temperature=request.temperature
            )
            if request.stop:
                kwargs["stop"] = list(request.stop)
            if request.seed is not None:
                kwargs["seed"] = int(request.seed)
            if request.chat or self.api == "chat":
                kwargs["messages"] = [{"role": "user", "content": request.prompt}]
                calls.append(_Call("chat", kwargs))
            else:
                kwargs["prompt"] = request.prompt
                calls.append(_Call("completions", kwargs))
        def text_of(index: int, response) -> str:
            try:
                choice = response.choices[0]
                text = choice.message.content if calls[index].endpoint == "chat" else choice.text
            except (AttributeError, IndexError, TypeError) as exc:
                raise self._malformed(index, "no choices[0] text") from exc
            # Servers remove stop strings; cut again in case one does not.
            return cut_at_stop(text or "", requests[index].stop)

        try:
            responses = self._run(calls)
        except _PartialRun as partial:
            raise self._partial(partial, text_of) from None
        return [text_of(index, response) for index, response in enumerate(responses)]

    def _partial(self, partial: "_PartialRun", parse) -> ModelError:
        """The batch's error, carrying the answers that did arrive (parsed) when there are any."""
        answered = {}
        for index, response in partial.answered.items():
            try:
                answered[index] = parse(index, response)
            except ModelError:
                pass  # a malformed answer is not worth keeping
        if not answered:
            return partial.error
        return PartialBatchError(f"{partial.error} ({len(answered)} of {partial.total} requests were answered)",
                                 answered)

    def close(self) -> None:
        """Close the HTTP clients and stop the background event loop. Safe to call twice."""
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        clients = self._clients

        async def shutdown():
            for client in clients:
                await client.close()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        except Exception:  # closing is best effort; the loop is stopped below either way
            pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        loop.close()
        self._loop, self._thread, self._clients = None, None, []

    # ------------------------------------------------------------------ parsing
    def _malformed(self, index: int, what: str) -> ModelError:
        return ModelError(
            f"request {index} to {self.name}: the server's answer is malformed ({what}). "
            "Is the base URL an OpenAI-compatible API (it should end in /v1)?"
        )

    def _parse_score(self, index: int, request: ScoreRequest, response) -> ScoreResult:
        try:
            choice = response.choices[0]
            logprobs = choice.logprobs
        except (AttributeError, IndexError, TypeError) as exc:
            raise self._malformed(index, "no choices[0]") from exc
        if logprobs is None or not getattr(logprobs, "text_offset", None):
            raise ModelError(
                f"{self.name} returned no prompt log-probabilities for score request {index} "
                "(completions with echo=True and logprobs=1). This endpoint cannot score; "
                "use a server that supports echo with logprobs (e.g. vLLM) or api='chat' for "
                "generation-only probes."
            )
        try:
            offsets = [int(o) for o in logprobs.text_offset]
            token_logprobs = list(logprobs.token_logprobs)
            top = list(logprobs.top_logprobs or [])
        except (TypeError, ValueError) as exc:
            raise self._malformed(index, "logprobs fields of the wrong type") from exc
        text = request.context + request.continuation
        # Echoed prompt tokens start before the end of the prompt; generated ones after it.
        n_prompt = sum(1 for o in offsets if o < len(text))
        ends = offsets[1:n_prompt] + [len(text)]
        first = next((i for i in range(n_prompt) if ends[i] > len(request.context)), n_prompt)
        if first >= n_prompt:
            raise self._malformed(index, "the echoed tokens do not cover the continuation")
        if first == 0:
            raise ModelError(
                f"score request {index}: the server tokenized the context {request.context!r} into the "
                "first token of the continuation, whose log-probability an API does not return. "
                "Give a longer context."
            )
        if self.scoring == "prompt_logprobs":
            return self._from_prompt_logprobs(index, choice, first, n_prompt)
        values, greedy = [], True
        for i in range(first, n_prompt):
            value = token_logprobs[i] if i < len(token_logprobs) else None
            if value is None or not isinstance(value, (int, float)) or math.isnan(value):
                raise self._malformed(index, f"no log-probability for prompt token {i}")
            values.append(float(value))
            alternatives = top[i] if i < len(top) and top[i] else {}
            if alternatives and float(value) < max(alternatives.values()):
                greedy = False
        return ScoreResult(tuple(values), greedy)

    def _from_prompt_logprobs(self, index: int, choice, first: int, n_prompt: int) -> ScoreResult:
        extra = getattr(choice, "model_extra", None) or {}
        entries = extra.get("prompt_logprobs")
        if not isinstance(entries, list) or len(entries) < n_prompt:
            raise ModelError(
                f"{self.name} did not return vLLM's prompt_logprobs for score request {index}; "
                "use scoring='echo' with servers other than vLLM."
            )
        values, greedy = [], True
        for i in range(first, n_prompt):
            entry = entries[i]
            if not isinstance(entry, dict) or not entry:
                raise self._malformed(index, f"prompt_logprobs[{i}] is empty")
            # With prompt_logprobs=0 the entry holds exactly the prompt token, keyed by its id.
            info = next(iter(entry.values()))
            try:
                values.append(float(info["logprob"]))
                greedy = greedy and int(info["rank"]) == 1
            except (KeyError, TypeError, ValueError) as exc:
                raise self._malformed(index, f"prompt_logprobs[{i}] has no logprob/rank") from exc
        return ScoreResult(tuple(values), greedy)

    # ------------------------------------------------------------------ transport
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            from openai import AsyncOpenAI

            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="kgprobe-openai", daemon=True)
            thread.start()

            async def make_clients():
                # Retries are ours (they move to the next URL); the client's are off.
                return [
                    AsyncOpenAI(base_url=url, api_key=self.__key, max_retries=0, timeout=self.timeout)
                    for url in self.base_urls
                ]

            self._loop, self._thread = loop, thread
            self._clients = asyncio.run_coroutine_threadsafe(make_clients(), loop).result()
        return self._loop

    def _run(self, calls: list[_Call]) -> list[Any]:
        if not calls:
            return []
        loop = self._ensure_loop()
        start = self._next_url
        self._next_url = (start + len(calls)) % len(self.base_urls)
        results: list[Any] = [None] * len(calls)
        done: set[int] = set()
        try:
            asyncio.run_coroutine_threadsafe(self._run_all(calls, start, results, done), loop).result()
        except ModelError as exc:
            if done:
                raise _PartialRun(exc, {i: results[i] for i in sorted(done)}, len(calls)) from None
            raise
        return results

    async def _run_all(self, calls: list[_Call], start: int, results: list[Any], done: set[int]) -> None:
        limits = [asyncio.Semaphore(self.max_concurrency) for _ in self.base_urls]

        async def one(index: int) -> None:
            results[index] = await self._attempts(index, calls[index], start + index, limits)
            done.add(index)

        try:
            async with asyncio.timeout(self.round_timeout):
                async with asyncio.TaskGroup() as group:
                    for index in range(len(calls)):
                        group.create_task(one(index))
        except TimeoutError:
            raise ModelError(
                f"{self.name}: the round's deadline of {self.round_timeout:g} s passed with {len(done)} of "
                f"{len(calls)} requests answered (a server that does not answer?). Raise --round-timeout, "
                "or check the server"
            ) from None
        except BaseExceptionGroup as group_error:
            # The first failure cancels the rest: one clear error (answers so far are kept).
            first = group_error.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise first from None

    async def _attempts(self, index: int, call: _Call, url_index: int, limits: list[asyncio.Semaphore]) -> Any:
        rng = random.Random()
        last: _Retryable | None = None
        for attempt in range(self.max_retries + 1):
            which = (url_index + attempt) % len(self.base_urls)
            try:
                async with limits[which]:  # a place on that server; the backoff below holds none
                    return await self._once(index, call, which)
            except _Retryable as exc:
                last = exc
                if attempt == self.max_retries:
                    break
                self.retries += 1
                delay = min(self.backoff_max, self.backoff * (2**attempt)) * (0.5 + rng.random() / 2)
                if exc.retry_after is not None:
                    delay = max(delay, min(exc.retry_after, self.backoff_max))
                await asyncio.sleep(delay)
        raise ModelError(
            f"request {index} to {self.name} failed after {self.max_retries + 1} attempts over "
            f"{len(self.base_urls)} server(s); last error: {last}. Check that the server is up and "
            "not overloaded, or lower max_concurrency."
        )

    async def _once(self, index: int, call: _Call, which: int) -> Any:
        import openai

        client = self._clients[which]
        url = self.base_urls[which]
        try:
            if call.endpoint == "chat":
                response = await client.chat.completions.create(**call.kwargs)
            else:
                response = await client.completions.create(**call.kwargs)
        except openai.APITimeoutError as exc:
            raise _Retryable(f"timeout after {self.timeout:g} s at {url}") from exc
        except openai.APIConnectionError as exc:
            raise _Retryable(f"cannot connect to {url} ({self._scrub(str(exc.__cause__ or exc))})") from exc
        except openai.APIStatusError as exc:
            raise self._status_error(index, exc, url) from exc
        except openai.APIResponseValidationError as exc:
            raise self._malformed(index, f"from {url}: {self._scrub(str(exc))[:200]}") from exc
        except ValueError as exc:  # a body that is not JSON
            raise self._malformed(index, f"from {url}: not JSON ({type(exc).__name__})") from exc
        if isinstance(response, (str, bytes)) or not hasattr(response, "choices"):
            raise self._malformed(index, f"from {url}: not a completion object")
        return response

    def _status_error(self, index: int, exc, url: str) -> Exception:
        status = exc.status_code
        detail = self._scrub(_server_message(exc))
        if status in _RETRYABLE_STATUS:
            retry_after = None
            try:
                retry_after = float(exc.response.headers.get("retry-after"))
            except (TypeError, ValueError, AttributeError):
                pass
            return _Retryable(f"HTTP {status} from {url}: {detail}", retry_after)
        if status == 401:
            hint = (
                f"the environment variable {self.api_key_env} is not set"
                if self.__key == _NO_KEY
                else f"the key in {self.api_key_env} was rejected"
            )
            return ModelError(
                f"{url} answered 401 Unauthorized: {hint}. Set {self.api_key_env} to a valid API key "
                "(kgprobe reads the key only from that variable)."
            )
        if status == 403:
            return ModelError(f"{url} answered 403 Forbidden: the key in {self.api_key_env} may not use "
                              f"model {self.model!r}. Server said: {detail}")
        if status == 404:
            return ModelError(
                f"{url} answered 404 Not Found for model {self.model!r}: {detail}. Check the model name "
                "(`GET /v1/models` lists what the server serves) and that the base URL ends in /v1; "
                "an endpoint without /completions is chat-only: use api='chat' (generation only)."
            )
        return ModelError(f"request {index} to {url} was rejected with HTTP {status}: {detail}")

    def _scrub(self, text: str) -> str:
        if self.__key != _NO_KEY and self.__key:
            text = text.replace(self.__key, "***")
        return text


def _server_message(exc) -> str:
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else body.get("message")
    return str(message or getattr(exc, "message", "") or exc)[:300]
