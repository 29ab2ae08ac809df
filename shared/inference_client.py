"""Typed async client for the policy's inference server (vLLM): token ids in, sampled ids and logprobs out.

Used by the gateway (one ``InferenceClient`` per replica, shared by all its requests) and by the benchmark.

Protocol: vLLM's token-in/token-out endpoint ``POST /inference/v1/generate`` (enabled by ``--enable-scale-out``,
see ``services/inference/launch.py``). It takes the prompt as token ids and returns, per choice, the sampled
``token_ids``, one logprob per sampled id, ``finish_reason`` / ``stop_reason``, the detokenized text (with
``output_mode: "text"``) and ``weight_versions``: spans of output-token indexes, each labelled with the weight
version the engine held when it produced those tokens. It is the same engine path as ``/v1/completions`` with a
token-id prompt; its one addition is that label, which is why we use it.

Policy-version invariant (why attribution is exact, not a guess):
  1. vLLM's engine core stamps every step's outputs with its current weight version
     (``EngineCore._attach_weight_version``); the output processor turns the stamps into spans per request.
  2. The updater (``services/inference/updater.py``) swaps as ``/pause?mode=wait`` → load weights →
     ``/finish_weight_update {"weight_version": "<n>"}`` → ``/resume``. While paused no step runs, so no token
     is ever produced by new weights under the old label, or by old weights under the new label.
  3. ``mode=wait`` lets in-flight requests finish on the old weights before the swap, so with this updater a
     response has exactly one span and ``Sampled.policy_version`` is that span's version. A response with
     several spans (another tool paused with ``mode=keep``) keeps all of them in ``weight_versions`` and
     ``policy_version`` is None: a caller must not attribute it to one version.
Labels that are not integers (vLLM's initial ``"default"``, before the updater labels the base model ``0``)
give ``policy_version=None``.

Errors: connection refused / reset / timeout or a 5xx → ``InferenceUnavailable``; 429 or 503 →
``InferenceOverloaded``; a prompt longer than the served context → ``ContextTooLong(limit, requested)``; any
other 4xx → ``InferenceRequestError`` with vLLM's message.
"""

from __future__ import annotations

import json
import re
import threading
from array import array
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np

GENERATE_PATH = "/inference/v1/generate"
JSON_HEADERS = {"Content-Type": "application/json"}
KEEPALIVE_S = 15.0
"""How long an idle pooled connection is reused. Must stay below the server's keep-alive (vLLM's
``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``, set by ``services/inference/launch.py``), or a request can go out on a socket
the server is just closing ("Server disconnected"). aiohttp checks the age when it takes a connection from the
pool, so this holds even when the caller's event loop was blocked meanwhile."""
_CONTEXT_TOO_LONG = re.compile(r"prompt \(length (\d+)\) is longer than the maximum model length of (\d+)")


class InferenceError(Exception):
    """Base of every error this client raises."""


class InferenceUnavailable(InferenceError):
    """The inference server cannot be reached or failed internally; retry elsewhere or later."""


class InferenceOverloaded(InferenceError):
    """The inference server refused the request for load (429/503); back off and retry."""


class InferenceRequestError(InferenceError):
    """The server rejected the request as invalid (4xx); retrying the same request will not help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"inference server answered {status}: {message}")
        self.status = status
        self.message = message


class ContextTooLong(InferenceRequestError):
    """The prompt does not fit the served context length."""

    def __init__(self, limit: int, requested: int, message: str = "") -> None:
        super().__init__(400, message or f"prompt of {requested} tokens exceeds the context of {limit}")
        self.limit = limit
        self.requested = requested


ID_TEXT_MAX = 1 << 20
"""Token ids below this have their decimal text in a table (grown to the largest id seen: a vocabulary's size)."""
_id_text: list[str] = []
_id_text_lock = threading.Lock()


def ids_json(ids: Sequence[int]) -> bytes:
    """``1,2,3``: token ids as the inside of a JSON array, joined from a table of each id's text: 2,300 ids in
    52 µs against 116 for ``json.dumps`` of the list (measured alone) — a chain's first prompt is most of a
    request body."""
    if not len(ids):
        return b""
    if isinstance(ids, array) and ids.typecode == "i":
        packed = np.frombuffer(ids, np.int32)
        low, high = int(packed.min()), int(packed.max())
    else:
        low, high = min(ids), max(ids)
    if low < 0 or high >= ID_TEXT_MAX:
        return ",".join(map(str, ids)).encode()
    if high >= len(_id_text):
        with _id_text_lock:
            if high >= len(_id_text):
                _id_text.extend([str(i) for i in range(len(_id_text), high + 1)])
    table = _id_text
    return ",".join([table[i] for i in ids]).encode()


class PromptIds:
    """Prompt token ids packed as int32, with their JSON text (``1,2,3``, no brackets) made once.

    A chain's prompt grows by appending; ``tip + suffix`` reuses the tip's JSON text, so a 60k-token prompt is not
    re-encoded as JSON on every call (it is most of a request body)."""

    __slots__ = ("ids", "_json")

    def __init__(self, ids: array[int], json_text: bytes | None = None) -> None:
        self.ids = ids
        self._json = json_text

    @classmethod
    def of(cls, ids: Iterable[int]) -> PromptIds:
        return cls(ids if isinstance(ids, array) and ids.typecode == "i" else array("i", ids))

    @property
    def json(self) -> bytes:
        if self._json is None:
            self._json = ids_json(self.ids)
        return self._json

    def __len__(self) -> int:
        return len(self.ids)

    def __add__(self, more: Sequence[int]) -> PromptIds:
        if not more:
            return PromptIds(self.ids, self._json)
        tail = ids_json(more)
        joined = self.json + b"," + tail if self.ids else tail
        return PromptIds(self.ids + array("i", more), joined)


@dataclass(frozen=True)
class VersionSpan:
    """Output tokens ``[start, end)`` were produced by weights labelled ``version``."""

    version: str
    start: int
    end: int


@dataclass
class Sampled:
    """One finished completion: what the policy sampled, exactly as the engine produced it."""

    ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str | None
    stop_reason: int | str | None
    weight_versions: list[VersionSpan] = field(default_factory=list)

    @property
    def policy_version(self) -> int | None:
        """The policy version that produced every token, or None if unlabeled, mixed or not an integer."""
        return policy_version_of(self.weight_versions)


@dataclass(frozen=True)
class SampledChunk:
    """A piece of a streamed completion: new ids with their logprobs and text. The last chunk carries
    ``finish_reason``, ``stop_reason`` and the whole output's ``weight_versions``."""

    ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    weight_versions: list[VersionSpan] | None = None

    @property
    def policy_version(self) -> int | None:
        return policy_version_of(self.weight_versions or [])


def policy_version_of(spans: Sequence[VersionSpan]) -> int | None:
    versions = {span.version for span in spans}
    if len(versions) != 1:
        return None
    (version,) = versions
    return int(version) if version.isdigit() else None


def _spans(raw: list[dict[str, Any]] | None) -> list[VersionSpan]:
    return [VersionSpan(str(s["version"]), int(s["start"]), int(s["end"])) for s in raw or []]


def _logprobs(choice: dict[str, Any], n_ids: int) -> list[float]:
    content = (choice.get("logprobs") or {}).get("content") or []
    values = [float(entry["logprob"]) for entry in content]
    if len(values) != n_ids:
        raise InferenceUnavailable(f"server returned {len(values)} logprobs for {n_ids} sampled ids")
    return values


class InferenceClient:
    """Talks to one vLLM replica. Create it inside a running event loop; ``await close()`` when done."""

    def __init__(
        self,
        base_url: str,
        model: str = "policy",
        timeout_s: float = 600.0,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=10)
        self._session = session
        self._owns_session = session is None

    async def __aenter__(self) -> InferenceClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # vLLM handles many concurrent requests per replica; aiohttp's default cap of 100 connections
            # would queue the 101st agent call inside this client instead.
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S)
            )
            self._owns_session = True
        return self._session

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()

    def _body(
        self,
        prompt_ids: Sequence[int] | PromptIds,
        max_tokens: int,
        temperature: float,
        top_p: float,
        stop_token_ids: Sequence[int] | None,
        seed: int | None,
        stream: bool,
        ignore_eos: bool,
        extra_sampling: dict[str, Any] | None,
        model: str | None = None,
    ) -> bytes:
        if not len(prompt_ids):
            raise InferenceRequestError(400, "prompt_ids is empty")
        if max_tokens < 1:
            raise InferenceRequestError(400, f"max_tokens must be at least 1, got {max_tokens}")
        sampling: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "logprobs": 1,
            "ignore_eos": ignore_eos,
            "skip_special_tokens": True,
            **(extra_sampling or {}),
        }
        if stop_token_ids:
            sampling["stop_token_ids"] = list(stop_token_ids)
        if seed is not None:
            sampling["seed"] = seed
        prompt = prompt_ids if isinstance(prompt_ids, PromptIds) else PromptIds.of(prompt_ids)
        rest = json.dumps(
            {
                "model": model or self.model,
                "sampling_params": sampling,
                "output_mode": "text",
                "stream": stream,
            }
        )
        return b'{"token_ids":[' + prompt.json + b"]," + rest[1:].encode()

    async def _raise_for_status(self, response: aiohttp.ClientResponse) -> None:
        if response.status < 400:
            return
        text = await response.text()
        try:
            message = str(json.loads(text)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = text[:500]
        if response.status in (429, 503):
            raise InferenceOverloaded(f"inference server answered {response.status}: {message}")
        if response.status >= 500:
            raise InferenceUnavailable(f"inference server answered {response.status}: {message}")
        if match := _CONTEXT_TOO_LONG.search(message):
            raise ContextTooLong(limit=int(match[2]), requested=int(match[1]), message=message)
        raise InferenceRequestError(response.status, message)

    async def complete(
        self,
        prompt_ids: Sequence[int] | PromptIds,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop_token_ids: Sequence[int] | None = None,
        seed: int | None = None,
        ignore_eos: bool = False,
        extra_sampling: dict[str, Any] | None = None,
        model: str | None = None,
    ) -> Sampled:
        """Sample one completion of ``prompt_ids``. A stop or EOS id that ended it is the last of ``ids``.
        ``model``: a LoRA adapter's name (``shared.adapters.adapter_name``) instead of the base model."""
        body = self._body(
            prompt_ids,
            max_tokens,
            temperature,
            top_p,
            stop_token_ids,
            seed,
            False,
            ignore_eos,
            extra_sampling,
            model,
        )
        try:
            async with self.session.post(
                self.base_url + GENERATE_PATH, data=body, headers=JSON_HEADERS
            ) as response:
                await self._raise_for_status(response)
                payload = await response.json()
        except aiohttp.ClientError as exc:
            raise InferenceUnavailable(f"{self.base_url}: {exc}") from exc
        except TimeoutError as exc:
            raise InferenceUnavailable(f"{self.base_url}: timed out") from exc
        choice = payload["choices"][0]
        ids = [int(i) for i in choice.get("token_ids") or []]
        return Sampled(
            ids=ids,
            logprobs=_logprobs(choice, len(ids)),
            text=choice.get("text") or "",
            finish_reason=choice.get("finish_reason"),
            stop_reason=choice.get("stop_reason"),
            weight_versions=_spans(choice.get("weight_versions")),
        )

    async def stream(
        self,
        prompt_ids: Sequence[int] | PromptIds,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop_token_ids: Sequence[int] | None = None,
        seed: int | None = None,
        ignore_eos: bool = False,
        extra_sampling: dict[str, Any] | None = None,
        model: str | None = None,
    ) -> AsyncIterator[SampledChunk]:
        """Yield chunks as vLLM produces them; the same seed gives the same ids as ``complete``."""
        body = self._body(
            prompt_ids,
            max_tokens,
            temperature,
            top_p,
            stop_token_ids,
            seed,
            True,
            ignore_eos,
            extra_sampling,
            model,
        )
        try:
            async with self.session.post(
                self.base_url + GENERATE_PATH, data=body, headers=JSON_HEADERS
            ) as response:
                await self._raise_for_status(response)
                async for raw_line in response.content:
                    line = raw_line.strip()
                    if not line.startswith(b"data:"):
                        continue
                    data = line[len(b"data:") :].strip()
                    if data == b"[DONE]":
                        return
                    event = json.loads(data)
                    if "error" in event:
                        raise InferenceUnavailable(f"{self.base_url}: stream failed: {event['error']}")
                    for choice in event.get("choices") or []:
                        ids = [int(i) for i in choice.get("token_ids") or []]
                        yield SampledChunk(
                            ids=ids,
                            logprobs=_logprobs(choice, len(ids)),
                            text=choice.get("text") or "",
                            finish_reason=choice.get("finish_reason"),
                            stop_reason=choice.get("stop_reason"),
                            weight_versions=_spans(choice["weight_versions"])
                            if choice.get("weight_versions") is not None
                            else None,
                        )
        except aiohttp.ClientError as exc:
            raise InferenceUnavailable(f"{self.base_url}: {exc}") from exc
        except TimeoutError as exc:
            raise InferenceUnavailable(f"{self.base_url}: timed out") from exc

    async def served_version(self) -> str:
        """The weight-version label the server holds now (``GET /weight_info``)."""
        try:
            async with self.session.get(self.base_url + "/weight_info") as response:
                await self._raise_for_status(response)
                return str((await response.json())["weight_version"])
        except aiohttp.ClientError as exc:
            raise InferenceUnavailable(f"{self.base_url}: {exc}") from exc
