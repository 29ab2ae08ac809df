"""One model call through the gateway core: splice, sample, parse tool calls, record — provider-neutral.

``ModelCall.start()`` plans the prompt (``splice``), checks the context length, sends the ids to the rollout's
inference replica and waits for the first sampled chunk; every failure up to there is a ``ProviderError`` with the
caller's status and **nothing is recorded**. ``ModelCall.events()`` then yields ``TextDelta`` / ``ReasoningDelta``
/ ``ToolCallEvent`` as vLLM produces text, records the call (``capture.record_call``) and moves the chain tip, and
only then yields ``Finish`` — so a harness never receives a complete answer that was not recorded, and the next
call of the rollout always sees the new tip.

Concurrency: the handler's task owns a ``ModelCall``. The rollout's lock (``Splicer.rollout_lock``) is held while
planning and while recording + committing the tip, never while sampling, so a rollout's parallel calls (sub-agents)
sample concurrently. The retemplate drift check runs in a worker thread alongside sampling; when it is not done
by the time the call is recorded it is written later (``capture.record_drift``), off the reply's path.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from services.gateway.binding import BoundRollout
from services.gateway.capture import CallRecord, Recorded, record_call, record_drift
from services.gateway.conversation import (
    Completion,
    Conversation,
    Finish,
    Message,
    ProviderError,
    StreamEvent,
)
from services.gateway.splice import ChainTip, Retemplate, SplicePlan
from services.gateway.state import GatewayState
from services.gateway.toolcalls import ToolCallParser
from shared import metrics
from shared.inference_client import (
    ContextTooLong,
    InferenceError,
    InferenceOverloaded,
    InferenceUnavailable,
    Sampled,
    SampledChunk,
)

# The status each vendor answers "overloaded" with (Anthropic's own 529); everything else uses 503.
OVERLOADED_STATUS = {"anthropic_messages": 529}


def context_length_error(adapter: ModuleType, limit: int, requested: int) -> ProviderError:
    make = getattr(adapter, "context_length_error", None)
    if make is not None:
        return make(limit, requested)  # type: ignore[no-any-return]
    return ProviderError(
        400,
        f"prompt is too long: {requested} tokens, the served context is {limit}",
        code="context_length_exceeded",
    )


def upstream_provider_error(
    exc: InferenceError, adapter: ModuleType, requested: int, limit: int
) -> ProviderError:
    """The caller's error for an inference failure: context errors are the caller's, the rest retryable."""
    if isinstance(exc, ContextTooLong):
        return context_length_error(adapter, exc.limit, exc.requested)
    if isinstance(exc, InferenceOverloaded):
        return ProviderError(OVERLOADED_STATUS.get(adapter.API, 503), str(exc), "overloaded_error")
    if isinstance(exc, InferenceUnavailable):
        return ProviderError(503, str(exc), "api_error")
    return ProviderError(502, str(exc), "api_error")


@dataclass
class Timings:
    arrived: float
    upstream_sent: float = 0.0
    last_token: float = 0.0
    first_byte: float | None = None

    def ms(self, start: float, end: float) -> float:
        return max(0.0, (end - start) * 1000.0)


class ModelCall:
    def __init__(
        self,
        state: GatewayState,
        rollout: BoundRollout,
        conversation: Conversation,
        adapter: ModuleType,
        raw_request: Any,
        arrived: float,
    ) -> None:
        self.state = state
        self.rollout = rollout
        self.conversation = conversation
        self.adapter = adapter
        self.raw_request = raw_request
        self.timings = Timings(arrived)
        self.plan: SplicePlan | None = None
        self.recorded: Recorded | None = None
        self._upstream: AsyncIterator[SampledChunk] | None = None
        self._first: SampledChunk | None = None
        self._drift: asyncio.Task[tuple[bool, Retemplate]] | None = None
        self._labelled_version: int | None = None

    def mark_first_byte(self) -> None:
        if self.timings.first_byte is None:
            self.timings.first_byte = time.monotonic()

    async def start(self) -> None:
        """Plan, check, send, and wait for the first sampled chunk; raises ``ProviderError``, records nothing."""
        state, conversation = self.state, self.conversation
        lock = state.splicer.rollout_lock(self.rollout.session)
        async with lock:
            try:
                plan = await asyncio.to_thread(state.splicer.plan, self.rollout.session, conversation)
            except Exception as exc:  # the template refused this conversation (e.g. a role it cannot render)
                raise ProviderError(400, f"cannot format this conversation for the model: {exc}") from exc
        self.plan = plan
        limit = state.settings.max_model_len
        requested = len(plan.prompt_ids)
        if requested >= limit:
            raise context_length_error(self.adapter, limit, requested)
        # The run's sampling settings win over what the harness asks for: the learner's importance ratios assume
        # the policy sampled at the run's temperature/top_p, and the run caps every completion's length.
        run_sampling = self.rollout.sampling
        budget = conversation.max_tokens or state.settings.default_max_tokens
        if run_sampling.get("max_tokens"):
            budget = min(budget, int(run_sampling["max_tokens"]))
        temperature = run_sampling.get("temperature", conversation.temperature)
        top_p = run_sampling.get("top_p", conversation.top_p)
        if state.measure_drift and state.splicer.mode == "splice":
            self._drift = asyncio.create_task(asyncio.to_thread(state.splicer.drift, conversation, plan))
        self.timings.upstream_sent = time.monotonic()
        client = state.upstream.client_for(self.rollout.rollout_id)
        sampling: dict[str, Any] = {
            "max_tokens": max(1, min(budget, limit - requested)),
            "temperature": 1.0 if temperature is None else float(temperature),
            "top_p": 1.0 if top_p is None else float(top_p),
            "extra_sampling": {"stop": conversation.stop} if conversation.stop else None,
        }
        # A streaming caller gets text as it is sampled; a plain one waits for the whole reply anyway, and one
        # upstream response instead of a chunk per token saves a process wake-up per token.
        if conversation.stream:
            self._upstream = client.stream(plan.prompt_ids, **sampling)
        else:
            self._upstream = _whole(client.complete(plan.prompt_ids, **sampling))
        try:
            self._first = await anext(self._upstream)
        except StopAsyncIteration:
            self._cancel_drift()
            raise ProviderError(502, "the inference service returned no tokens", "api_error") from None
        except InferenceError as exc:
            self._cancel_drift()
            raise upstream_provider_error(exc, self.adapter, requested, limit) from exc

    def _cancel_drift(self) -> None:
        if self._drift is not None:
            self._drift.cancel()

    async def events(self) -> AsyncIterator[StreamEvent]:
        """Deltas as they are sampled, then the record, then ``Finish``."""
        assert self._upstream is not None and self._first is not None and self.plan is not None
        parser = ToolCallParser(
            self.conversation.tools, new_id=getattr(self.adapter, "new_tool_call_id", None) or _call_id
        )
        sampled_ids: list[int] = []
        logprobs: list[float] = []
        finish: str | None = None
        chunk: SampledChunk | None = self._first
        try:
            while chunk is not None:
                sampled_ids += chunk.ids
                logprobs += chunk.logprobs
                finish = chunk.finish_reason or finish
                if chunk.weight_versions is not None:
                    self._labelled_version = chunk.policy_version
                for event in parser.feed(chunk.text):
                    yield event
                chunk = await anext(self._upstream, None)
        except InferenceError as exc:
            self._cancel_drift()
            raise upstream_provider_error(
                exc, self.adapter, len(self.plan.prompt_ids), self.state.settings.max_model_len
            ) from exc
        self.timings.last_token = time.monotonic()
        for event in parser.finish():
            yield event
        completion = Completion(
            id=uuid.uuid4().hex,
            model=self.conversation.model or self.state.settings.served_model_name,
            text=parser.text,
            reasoning=parser.reasoning or None,
            tool_calls=list(parser.calls),
            finish_reason="tool_calls" if parser.calls else ("length" if finish == "length" else "stop"),
            prompt_tokens=len(self.plan.prompt_ids),
            completion_tokens=len(sampled_ids),
            parse_error=parser.parse_error,
        )
        reply = Message("assistant", parser.text, list(parser.calls), reasoning=parser.reasoning or None)
        await self._record(completion, reply, sampled_ids, logprobs)
        yield Finish(completion)

    async def _record(
        self, completion: Completion, reply: Message, sampled_ids: list[int], logprobs: list[float]
    ) -> None:
        state, plan, timings = self.state, self.plan, self.timings
        assert plan is not None
        # The drift check must not delay the reply: if the from-scratch render is still running, the row is
        # written with NULL and updated when it finishes.
        drift: bool | None = None
        rendered: Retemplate | None = None
        pending_drift = self._drift
        if pending_drift is not None and pending_drift.done():
            if not pending_drift.cancelled():
                drift, rendered = pending_drift.result()
            pending_drift = None
        self._drift = None
        policy_version, version_source = await self._policy_version()
        rollout_id, session = self.rollout.rollout_id, self.rollout.session
        async with state.splicer.rollout_lock(session):
            if not state.splicer.still_extendable(session, plan):
                plan = state.splicer.as_retry_fork(plan)
            now = time.monotonic()
            record = CallRecord(
                rollout_id=rollout_id,
                run_id=self.rollout.run_id,
                provider_api=self.adapter.API,
                model_alias=self.conversation.model,
                stream=self.conversation.stream,
                position=plan.position,
                chain_id=plan.extends.chain_id if plan.extends else None,
                parent_chain_id=plan.parent_chain_id,
                parent_call_id=plan.parent_call_id,
                fork_reason=plan.fork_reason,
                prompt_tokens=len(plan.prompt_ids),
                segment_prompt_ids=plan.segment_prompt_ids,
                sampled_ids=sampled_ids,
                sampled_logprobs=logprobs,
                finish_reason=completion.finish_reason,
                tool_call_count=len(completion.tool_calls),
                parse_error=completion.parse_error,
                policy_version=policy_version,
                retemplate_drift=drift,
                queue_ms=timings.ms(timings.arrived, timings.upstream_sent),
                inference_ms=timings.ms(timings.upstream_sent, timings.last_token),
                total_ms=timings.ms(timings.arrived, now),
                ttfb_ms=timings.ms(timings.arrived, timings.first_byte) if timings.first_byte else None,
                raw_request=self.raw_request,
                raw_response=self.adapter.render(completion, self.conversation),
                notes=self._notes(version_source),
            )
            try:
                self.recorded = await record_call(state.sessions, state.store, record)
            except Exception as exc:
                raise ProviderError(
                    503, f"the gateway could not record this call: {exc}", "api_error"
                ) from exc
            tip = state.splicer.commit(
                session,
                plan,
                self.conversation,
                reply,
                sampled_ids,
                self.recorded.chain_id,
                self.recorded.call_id,
            )
            if rendered is not None:
                tip.retemplate = rendered.compact()
        self.plan = plan
        if pending_drift is not None:
            state.track(self._late_drift(tip, self.recorded.call_id, pending_drift))
        metrics.CALLS_CAPTURED.labels(self.adapter.API, completion.finish_reason).inc()
        if plan.fork_reason:
            metrics.FORKS.labels(self.rollout.harness, plan.fork_reason).inc()
        if timings.first_byte is not None:
            metrics.CALL_TTFB_SECONDS.labels(self.adapter.API).observe(timings.first_byte - timings.arrived)

    async def _late_drift(
        self, tip: ChainTip, call_id: int, pending: asyncio.Task[tuple[bool, Retemplate]]
    ) -> None:
        drifted, rendered = await pending
        tip.retemplate = rendered.compact()
        await record_drift(self.state.sessions, call_id, drifted)

    async def _policy_version(self) -> tuple[int, str]:
        """The version that sampled this call: the engine's own label when it gave one (exact), else the
        version the updater announced (a call sampled before any labelled swap), else 0 (the base model)."""
        if self._labelled_version is not None:
            return self._labelled_version, "engine"
        announced = await self.state.served_policy_version()
        return (announced, "announced") if announced is not None else (0, "base")

    def _notes(self, version_source: str) -> dict[str, Any]:
        notes: dict[str, Any] = {"policy_version_source": version_source}
        if self.conversation.notes:
            notes["conversation"] = self.conversation.notes
        return notes

    async def aclose(self) -> None:
        """Release the upstream stream and the drift task when a call ends early (client gone, error)."""
        self._cancel_drift()
        if self._upstream is not None:
            await self._upstream.aclose()  # type: ignore[attr-defined]


async def _whole(sampled: Awaitable[Sampled]) -> AsyncIterator[SampledChunk]:
    """A non-streamed completion as the one chunk of a stream."""
    whole = await sampled
    yield SampledChunk(
        whole.ids, whole.logprobs, whole.text, whole.finish_reason, whole.stop_reason, whole.weight_versions
    )


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]
