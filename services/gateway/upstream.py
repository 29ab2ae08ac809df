"""The gateway's way to the inference replicas: one ``shared.inference_client.InferenceClient`` per replica.

All clients share the gateway's one HTTP session. ``Upstream.client_for(rollout_id)`` routes every call of a
rollout to the same replica (its prefix cache holds the chain so far) by a stable hash of the rollout id, which
also spreads rollouts evenly over replicas. The protocol (token ids in; sampled ids, logprobs and the weight
version that produced them out, streamed) is the inference client's.
"""

from __future__ import annotations

import hashlib

import aiohttp

from shared.inference_client import InferenceClient, InferenceUnavailable


def replica_for(rollout_id: str, urls: list[str]) -> str:
    """The replica a rollout's calls go to: a stable hash of the rollout id over the replica list."""
    if not urls:
        raise InferenceUnavailable("no inference replicas configured (HARNESSRL_INFERENCE_URLS)")
    digest = hashlib.sha256(rollout_id.encode()).digest()
    return urls[int.from_bytes(digest[:8], "big") % len(urls)]


class Upstream:
    def __init__(self, session: aiohttp.ClientSession, urls: list[str], model: str) -> None:
        self.urls = [url.rstrip("/") for url in urls]
        self.clients = {url: InferenceClient(url, model, session=session) for url in self.urls}

    def client_for(self, rollout_id: str) -> InferenceClient:
        return self.clients[replica_for(rollout_id, self.urls)]

    async def max_model_len(self, session: aiohttp.ClientSession) -> int | None:
        """The smallest context any replica reports (vLLM's ``/v1/models`` ``max_model_len``); None when none
        answers with one (a replica that is down, or an upstream that does not say)."""
        limits = []
        for url in self.urls:
            try:
                async with session.get(
                    f"{url}/v1/models", timeout=aiohttp.ClientTimeout(total=5)
                ) as response:
                    models = (await response.json()).get("data") or []
            except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
                continue
            limits += [
                int(m["max_model_len"]) for m in models if isinstance(m, dict) and m.get("max_model_len")
            ]
        return min(limits) if limits else None
