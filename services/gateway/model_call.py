"""One model call through the gateway core: splice, sample, parse tool calls, commit, record — provider-neutral.

``ModelCall.start()`` plans the prompt (``splice``: choose a chain tip from digests, load its ids, render the
suffix — on the event loop where that is small, else in a worker thread: ``on_the_loop_or_in_a_thread``), checks
the context length, sends the ids to the rollout's inference replica and waits for the first sampled chunk; every
failure up to there is a ``ProviderError`` with the caller's status and **nothing is recorded**. ``ModelCall.events()`` then yields ``TextDelta`` / ``ReasoningDelta`` / ``ToolCallEvent``
as vLLM produces text, commits the chain's new tip to Redis (compare-and-set; it also marks the call pending),
hands the call's record to the write-behind ``Recorder`` and only then yields ``Finish`` — so the next call of the
rollout, in this process or another, always sees the new tip, and the record is written after the reply.
``aclose()`` (after the reply's last bytes were written, or the client went away) tells the recorder the reply
is done; the call stops being pending once its rows are in as well (``recorder.py``).

Concurrency: the handler's task owns a ``ModelCall``; nothing is locked while sampling, so a rollout's parallel
calls (sub-agents) sample concurrently, and the tip's compare-and-set decides which of two racing extensions wins
(the other becomes a ``retry`` fork). What the commit needs but the request does not — the new tip's message
digests — and the retemplate drift check run alongside sampling (a task started once the request is out: on the
loop where small, else in a thread); when the drift check is not done by the commit, the record waits for it in the
writer, off the reply's path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from services.gateway.binding import BoundRollout, Recheck, binding_errors
from services.gateway.capture import CallRecord
from services.gateway.chat_format import TooLongForTheLoop, on_the_loop
from services.gateway.conversation import (
    Completion,
    Conversation,
    Finish,
    Message,
    ProviderError,
    StreamEvent,
)
from services.gateway.splice import Choice, ConversationDigest, RetemplateCut, SplicePlan
from services.gateway.state import GatewayState
from services.gateway.tips import RolloutClosed, RolloutState, TipMoved
from services.gateway.toolcalls import ToolCallParser, new_call_id
from shared import metrics
from shared.adapters import adapter_version
from shared.busy_time import GENERATION_NOTE, generation_stamp
from shared.ids import unique_hex
from shared.inference_client import (
    ContextTooLong,
    InferenceError,
    InferenceOverloaded,
    InferenceUnavailable,
    PromptIds,
    Sampled,
    SampledChunk,
)
from shared.run_config import TeacherConfig
from shared.sampling_seed import call_seed
from shared.trajectory import POLICY, TEACHER

log = logging.getLogger("harnessrl.gateway")
T = TypeVar("T")
Drift = tuple[bool, RetemplateCut | None]
"""The drift check's answer: whether a from-scratch render would have given other ids, and where the next resumes."""

# The status each vendor answers "overloaded" with (Anthropic's own 529); everything else uses 503.
OVERLOADED_STATUS = {"anthropic_messages": 529}


def context_length_error(adapter: ModuleType, limit: int, requested: int) -> ProviderError:
    make = getattr(adapter, "context_length_error", None)
    if make is not None:
        error: ProviderError = make(limit, requested)
    else:
        error = ProviderError(
            400,
            f"prompt is too long: {requested} tokens, the served context is {limit}",
            code="context_length_exceeded",
        )
    error.context_overflow = (requested, limit)
    return error


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


@dataclass(kw_only=True)
class Timings:
    """Monotonic times of one call's stages (the app sets ``bound`` and ``parsed``)."""

    arrived: float
    bound: float = 0.0
    parsed: float = 0.0
    planned: float = 0.0
    upstream_sent: float = 0.0
    first_token: float = 0.0
    last_token: float = 0.0
    committed: float = 0.0
    first_byte: float | None = None

    def ms(self, start: float, end: float) -> float:
        return max(0.0, (end - start) * 1000.0)

    def stages_ms(self) -> dict[str, float]:
        """Where the call's time went, in order (``notes.gateway_ms``; ``docs/perf/gateway.md`` reads them):
        bind (Redis state, or the database) → parse (body, JSON, adapter) → plan (digests, tip ids, suffix render
        and tokenization) → send (pool check, request) → upstream first token → sampling → commit (tip
        compare-and-set, queueing the record)."""
        marks = [
            ("bind", self.bound),
            ("parse", self.parsed),
            ("plan", self.planned),
            ("send", self.upstream_sent),
            ("upstream_first_token", self.first_token),
            ("sampling", self.last_token),
            ("commit", self.committed),
        ]
        out, previous = {}, self.arrived
        for name, mark in marks:
            if mark:
                out[name] = round(self.ms(previous, mark), 3)
                previous = mark
        return out


class ModelCall:
    def __init__(
        self,
        state: GatewayState,
        rollout: BoundRollout,
        rollout_state: RolloutState,
        conversation: Conversation,
        adapter: ModuleType,
        raw_request: bytes,
        arrived: float,
        serving: str | None = None,
        recheck: Recheck | None = None,
    ) -> None:
        self.state = state
        self.serving = serving
        """This call's mark in the rollout's pending set while it is served (replaced by its id on commit)."""
        self.recheck = recheck
        """A stale binding's re-read (``RolloutDirectory.resolve_deferred``): run while the model works on the
        prompt; the call answers only once it passed."""
        self.rollout = rollout
        self.rollout_state = rollout_state
        self.conversation = conversation
        self.adapter = adapter
        self.raw_request = raw_request
        self.timings = Timings(arrived=arrived)
        self.digest: ConversationDigest | None = None
        self.plan: SplicePlan | None = None
        self.call_id: int | None = None
        self._tip_ids: PromptIds | None = None
        self._upstream: AsyncIterator[SampledChunk] | None = None
        self._first: SampledChunk | None = None
        self._drift: asyncio.Future[Drift | None] | None = None
        """The work done while the model reads the prompt (``_while_the_model_reads``)."""
        self._labelled_version: int | None = None
        self._lora_adapter: str | None = None
        self.context_limit = state.settings.max_model_len
        self.record: CallRecord | None = None
        """The call's record once committed (queued for the writer)."""

    def mark_first_byte(self) -> None:
        if self.timings.first_byte is None:
            self.timings.first_byte = time.monotonic()

    async def _plan(self) -> SplicePlan:
        state, conversation, key = self.state, self.conversation, self.rollout.rollout_key
        splicer = state.splicer
        self.digest = digest = ConversationDigest(conversation)
        choice = splicer.choose(digest, self.rollout_state.tips)
        if (needed := choice.needs_ids) is not None:
            try:
                self._tip_ids = await state.tips.ids(key, needed)
            except TipMoved:  # the chain's ids expired from Redis: start over rather than guess
                choice = Choice(extends=None, newest=None, fork_reason=None, reuse_prompt=False)

        def build() -> SplicePlan:
            return splicer.plan(conversation, digest, choice, self._tip_ids)

        try:
            return await on_the_loop_or_in_a_thread(conversation, build)
        except Exception as exc:  # the template refused this conversation (e.g. a role it cannot render)
            raise ProviderError(400, f"cannot format this conversation for the model: {exc}") from exc

    async def start(self) -> None:
        """Plan, check, send, and wait for the first sampled chunk and for a stale binding's re-read; raises
        ``ProviderError``, records nothing."""
        state, conversation = self.state, self.conversation
        self.plan = plan = await self._plan()
        self.timings.planned = time.monotonic()
        limit = self.context_limit = await state.context_limit()
        requested = len(plan.prompt)
        if requested >= limit:
            raise context_length_error(self.adapter, limit, requested)
        # The run's sampling settings win over what the harness asks for: the learner's importance ratios assume
        # the policy sampled at the run's temperature/top_p, and the run caps every completion's length.
        run_sampling = self.rollout.sampling
        budget = conversation.max_tokens or state.settings.default_max_tokens
        if run_sampling.max_tokens is not None:
            budget = min(budget, run_sampling.max_tokens)
        max_tokens = max(1, min(budget, limit - requested))
        self.timings.upstream_sent = time.monotonic()
        if self.rollout.teacher is not None:
            # A teacher answers instead of the policy (``teacher.py``); the rest of the call is a policy call's.
            self._upstream = self._from_teacher(self.rollout.teacher, max_tokens)
        else:
            self._upstream = await self._from_policy(plan.prompt, max_tokens)
        # Made before the first ``anext`` sends the request, the re-read's task starts once the request is out.
        checking = asyncio.create_task(self.recheck()) if self.recheck is not None else None
        self._drift = self._while_the_model_reads(plan)
        try:
            self._first = await anext(self._upstream)
            self.timings.first_token = time.monotonic()
        except StopAsyncIteration:
            self._cancel_drift()
            raise ProviderError(502, "the inference service returned no tokens", "api_error") from None
        except InferenceError as exc:
            self._cancel_drift()
            raise upstream_provider_error(exc, self.adapter, requested, limit) from exc
        finally:
            refused = await _outcome(checking)
        if refused is not None:
            self._cancel_drift()
            with binding_errors():
                raise refused

    async def _from_policy(self, prompt: PromptIds, max_tokens: int) -> AsyncIterator[SampledChunk]:
        """The policy's sample of ``prompt`` from the rollout's inference replica, as it streams."""
        state, conversation, run_sampling = self.state, self.conversation, self.rollout.sampling
        client = state.upstream.client_for(self.rollout.rollout_id)
        if self.rollout.lora:
            # A LoRA run samples with its newest served adapter; the name carries the version, and a name is never
            # reloaded with other weights, so the call's version is exact. None yet: the base model, version 0.
            self._lora_adapter = await state.served_adapter(self.rollout.run_id)
        sampling: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": run_sampling.temperature,
            "top_p": run_sampling.top_p,
            "extra_sampling": {"stop": conversation.stop} if conversation.stop else None,
            "model": self._lora_adapter,
            # A seeded run: the rollout's n-th call samples with a seed of its own (calls made in parallel share n).
            "seed": None
            if self.rollout.seed is None
            else call_seed(self.rollout.seed, self.rollout_state.calls),
        }
        # A streaming caller gets text as it is sampled; a plain one waits for the whole reply anyway, and one
        # upstream response instead of a chunk per token saves a process wake-up per token.
        if conversation.stream:
            return client.stream(prompt, **sampling)
        return _whole(client.complete(prompt, **sampling))

    async def _from_teacher(self, teacher: TeacherConfig, max_tokens: int) -> AsyncIterator[SampledChunk]:
        """The teacher's reply as one chunk of student ids (no logprobs: ``shared/trajectory.py``); a teacher that
        cannot answer raises ``ProviderError`` here, before anything is committed."""
        sample = await self.state.teachers.sample(
            teacher,
            rollout_id=self.rollout.rollout_id,
            harness=self.rollout.harness,
            conversation=self.conversation,
            max_tokens=max_tokens,
        )
        yield SampledChunk(ids=sample.ids, logprobs=[], text=sample.text, finish_reason="stop")

    def _while_the_model_reads(self, plan: SplicePlan) -> asyncio.Future[Drift | None]:
        """Work the request does not wait for, run while the model works on the prompt: the new tip's message
        digests (the commit's; the digests of a chain's first prompt cost ~0.1 ms at 2k tokens), then, in splice
        mode where it is measured, the retemplate drift check (None where not). On the event loop right after the
        request went out where it is small (``on_the_loop_or_in_a_thread``; a conversation with more than
        ``LOOP_DIGEST_CHARS`` characters to digest counts as large), else in a thread."""
        state, digest, conversation, tip_ids = self.state, self.digest, self.conversation, self._tip_ids
        assert digest is not None
        measured = state.checks_drift

        def work() -> Drift | None:
            digest.digests()
            return state.splicer.drift(conversation, plan, tip_ids) if measured else None

        small = digest.undigested_chars() <= LOOP_DIGEST_CHARS
        return asyncio.ensure_future(
            on_the_loop_or_in_a_thread(conversation, work, text=plan.text, small=small)
        )

    def _cancel_drift(self) -> None:
        if self._drift is not None:
            self._drift.cancel()

    async def events(self) -> AsyncIterator[StreamEvent]:
        """Deltas as they are sampled, then the record, then ``Finish``."""
        assert self._upstream is not None and self._first is not None and self.plan is not None
        parser = ToolCallParser(
            tools=self.conversation.tools,
            new_id=getattr(self.adapter, "new_tool_call_id", None) or new_call_id,
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
                exc, self.adapter, len(self.plan.prompt), self.context_limit
            ) from exc
        self.timings.last_token = time.monotonic()
        for event in parser.finish():
            yield event
        completion = Completion(
            id=unique_hex(32),
            model=self.conversation.model or self.state.settings.served_model_name,
            text=parser.text,
            reasoning=parser.reasoning or None,
            tool_calls=list(parser.calls),
            finish_reason="tool_calls" if parser.calls else ("length" if finish == "length" else "stop"),
            prompt_tokens=len(self.plan.prompt),
            completion_tokens=len(sampled_ids),
            parse_error=parser.parse_error,
        )
        reply = Message(
            role="assistant",
            content=parser.text,
            tool_calls=list(parser.calls),
            reasoning=parser.reasoning or None,
        )
        await self._commit(completion, reply, sampled_ids, logprobs)
        yield Finish(completion)

    async def _commit(
        self, completion: Completion, reply: Message, sampled_ids: list[int], logprobs: list[float]
    ) -> None:
        """Advance the chain tip (before the reply's last bytes) and queue the record (written after them)."""
        state, timings, key = self.state, self.timings, self.rollout.rollout_key
        plan, digest = self.plan, self.digest
        assert plan is not None and digest is not None
        drifted, cut, pending_drift = self._take_drift()
        policy_version, version_source = self._policy_version()
        try:
            call_id = await state.call_ids.take()
            chain_id = plan.extends.chain_id if plan.extends is not None else await state.chain_ids.take()
            ids = plan.prompt + sampled_ids
            tip = state.splicer.new_tip(plan, digest, reply, sampled_ids, chain_id, call_id, cut)
            appended = len(plan.suffix_ids) + len(sampled_ids) if plan.extends is not None else len(ids)
            try:
                await state.tips.commit(key, tip, plan.extends, ids, appended, self.serving)
            except TipMoved:  # another call extended this tip first (rule 4)
                plan = state.splicer.as_retry_fork(plan)
                chain_id = await state.chain_ids.take()
                tip = state.splicer.new_tip(plan, digest, reply, sampled_ids, chain_id, call_id, cut)
                await state.tips.commit(key, tip, None, ids, len(ids), self.serving)
        except RolloutClosed as exc:
            raise ProviderError(401, str(exc), "authentication_error") from exc
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(503, f"the gateway could not commit this call: {exc}", "api_error") from exc
        self.plan, self.call_id = plan, call_id
        timings.committed = time.monotonic()
        late = None
        if pending_drift is not None:
            late = asyncio.ensure_future(self._late_drift(pending_drift, tip.chain_id, tip.position))
        adapter, conversation = self.adapter, self.conversation
        self.record = CallRecord(
            rollout_key=key,
            rollout_id=self.rollout.rollout_id,
            run_id=self.rollout.run_id,
            call_id=call_id,
            chain_id=chain_id,
            new_chain=plan.extends is None,
            parent_chain_id=plan.parent_chain_id,
            parent_call_id=plan.parent_call_id,
            position=plan.position,
            fork_reason=plan.fork_reason,
            provider_api=adapter.API,
            model_alias=conversation.model,
            stream=conversation.stream,
            prompt_tokens=len(plan.prompt),
            suffix_ids=plan.suffix_ids,
            sampled_ids=sampled_ids,
            sampled_logprobs=logprobs,
            finish_reason=completion.finish_reason,
            tool_call_count=len(completion.tool_calls),
            parse_error=completion.parse_error,
            policy_version=policy_version,
            source=POLICY if self.rollout.teacher is None else TEACHER,
            queue_ms=timings.ms(timings.arrived, timings.upstream_sent),
            inference_ms=timings.ms(timings.upstream_sent, timings.last_token),
            total_ms=timings.ms(timings.arrived, timings.committed),
            ttfb_ms=timings.ms(timings.arrived, timings.first_byte) if timings.first_byte else None,
            raw_request=self.raw_request,
            response=lambda: adapter.render(completion, conversation),
            retemplate_drift=drifted,
            drift=late,
            notes=self._notes(version_source),
        )
        state.recorder.submit(self.record)
        if plan.fork_reason:
            metrics.FORKS.labels(self.rollout.harness, plan.fork_reason).inc()
        if timings.first_byte is not None:
            metrics.CALL_TTFB_SECONDS.labels(self.adapter.API).observe(timings.first_byte - timings.arrived)

    def _take_drift(self) -> tuple[bool | None, RetemplateCut | None, asyncio.Future[Drift | None] | None]:
        """The drift check's outcome if it is done (drifted, resume cut), else the check still running.

        The drift check must not delay the reply: if the from-scratch render is still running, the writer waits
        for it and the resume point for the next check is stored when it ends."""
        pending, self._drift = self._drift, None
        if pending is not None and pending.done():
            if not pending.cancelled() and pending.exception() is None:
                drifted, cut = pending.result() or (None, None)
                return drifted, cut, None
            return None, None, None
        if not self.state.checks_drift:
            return None, None, None  # only the digests were left: the commit computes what they lack
        return None, None, pending

    async def _late_drift(self, pending: asyncio.Future[Drift | None], chain_id: int, position: int) -> bool:
        """A drift check that outlived the reply: its flag goes into the record (the writer awaits this), its
        resume point onto the tip it belongs to."""
        result = await pending
        assert result is not None  # a job that measures no drift is never waited for
        drifted, cut = result
        if cut is not None:
            try:
                await self.state.tips.set_retemplate(self.rollout.rollout_key, chain_id, position, cut)
            except Exception:  # only makes the next drift check slower
                log.warning("could not store the retemplate cut of chain %d", chain_id, exc_info=True)
        return drifted

    def _policy_version(self) -> tuple[int, str]:
        """The version that sampled this call: the engine's own label when it gave one (exact), else the
        version the updater had announced when the call arrived (a call sampled before any labelled swap), else
        0 (the base model). A teacher's call records the version the policy was at (``shared/trajectory.py``)."""
        if self.rollout.teacher is not None:
            served = self.rollout_state.served
            return (served.version if served is not None and served.ready else 0), "teacher"
        if self.rollout.lora:
            version = adapter_version(self._lora_adapter) if self._lora_adapter else 0
            return (version or 0), "adapter" if self._lora_adapter else "base"
        if self._labelled_version is not None:
            return self._labelled_version, "engine"
        served = self.rollout_state.served  # as the call arrived
        return (served.version, "announced") if served is not None and served.ready else (0, "base")

    def _notes(self, version_source: str) -> dict[str, Any]:
        timings = self.timings
        to_unix = time.time() - time.monotonic()  # timings are monotonic; the stamp is read on other hosts
        notes: dict[str, Any] = {
            "policy_version_source": version_source,
            "gateway_ms": timings.stages_ms(),
            GENERATION_NOTE: generation_stamp(timings.upstream_sent + to_unix, timings.last_token + to_unix),
        }
        if self.conversation.notes:
            notes["conversation"] = self.conversation.notes
        if (teacher := self.rollout.teacher) is not None:
            notes["teacher"] = teacher.kind if teacher.model is None else f"{teacher.kind}:{teacher.model}"
        return notes

    async def aclose(self) -> None:
        """After the reply (written, or abandoned by its client): tell the recorder, release the upstream stream
        and the drift task."""
        if self.call_id is not None:
            self.state.recorder.reply_done(self.rollout.rollout_key, self.call_id)
        elif self.serving is not None:
            self.state.track(self.state.tips.served(self.rollout.rollout_key, self.serving))
        self._cancel_drift()
        if self._upstream is not None:
            await self._upstream.aclose()  # type: ignore[attr-defined]


LOOP_MESSAGES = 16
"""A conversation of at most this many messages may be planned (rendered, cut, tokenized) on the event loop: the
template renders ~13 µs a message here (jinja), so ≤ ~0.2 ms."""
LOOP_TEXT_CHARS = 64_000
"""…and its rendering, when the caller has it, at most this long (the drift check hashes it)."""
LOOP_DIGEST_CHARS = 8_192
"""…and at most this many characters of messages digested there after the request is out (~0.12 ms: digests cost
~15 ns a character here, a quarter of the tokenizer's ~60)."""
LOOP_TOKENIZE_CHARS = 2_048
"""…of which at most this many characters are tokenized there (~0.1 ms through tiktoken). A thread hop costs more
than that on a busy 2-core VM (a futex wake, a GIL hand-off, the loop's wake-up); anything bigger — a chain's first
prompt, a long tool output, a long conversation — still goes to a thread (``docs/perf/gateway.md``)."""


async def on_the_loop_or_in_a_thread(
    conversation: Conversation, work: Callable[[], T], text: str | None = None, small: bool = True
) -> T:
    """``work()`` (planning or the drift check: jinja and tokenizer work) on the event loop where it is small —
    ``conversation`` has at most ``LOOP_MESSAGES`` messages, ``text`` (its rendering, if known) at most
    ``LOOP_TEXT_CHARS`` characters, the caller does not know it to be large (``small``), and ``work`` tokenizes at
    most ``LOOP_TOKENIZE_CHARS`` of them — else all of it in a thread. Awaited at once it runs before the caller's
    next step; as a task, at the loop's next turn."""
    if (
        small
        and len(conversation.messages) <= LOOP_MESSAGES
        and (text is None or len(text) <= LOOP_TEXT_CHARS)
    ):
        try:
            with on_the_loop(LOOP_TOKENIZE_CHARS):
                return work()
        except TooLongForTheLoop:
            pass
    return await asyncio.to_thread(work)


async def _outcome(task: asyncio.Task[Any] | None) -> BaseException | None:
    """The exception ``task`` ended with, once it has ended (None: it passed, or there was none)."""
    if task is None:
        return None
    await asyncio.wait([task])
    return None if task.cancelled() else task.exception()


async def _whole(sampled: Awaitable[Sampled]) -> AsyncIterator[SampledChunk]:
    """A non-streamed completion as the one chunk of a stream."""
    whole = await sampled
    yield SampledChunk(
        whole.ids, whole.logprobs, whole.text, whole.finish_reason, whole.stop_reason, whole.weight_versions
    )
