"""A small Python client of the REST API (the CLI's ``run``/``rollout`` commands use it; so can notebooks).

Errors come back as ``ApiClientError`` carrying the HTTP status and the api's ``Error`` document, so a caller
can print "body.grpo.clip_low: Input should be less than 1" instead of a traceback.
"""

from __future__ import annotations

from typing import Any

import httpx

from shared.settings import Settings


class ApiClientError(Exception):
    def __init__(self, status: int, message: str, detail: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.detail = detail or []

    def __str__(self) -> str:
        lines = [self.message] + [f"  {d['loc']}: {d['msg']}" for d in self.detail[1:]]
        return "\n".join(lines)


def default_api_url(settings: Settings) -> str:
    # A server bound to all interfaces is reached on loopback.
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{host}:{settings.api_port}"


class ApiClient:
    def __init__(self, url: str, token: str, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiClientError(
                0, f"cannot reach the api at {self.url} ({exc}); is `harnessrl up` running?"
            ) from None
        if response.status_code >= 400:
            try:
                error = response.json()
                raise ApiClientError(response.status_code, error["message"], error.get("detail"))
            except (ValueError, KeyError):
                raise ApiClientError(
                    response.status_code, f"HTTP {response.status_code}: {response.text[:500]}"
                ) from None
        return response

    def create_run(self, body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._request("POST", "/v1/runs", json=body, headers=headers).json()  # type: ignore[no-any-return]

    def list_runs(
        self, limit: int = 50, cursor: str | None = None, status: str | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        if status:
            params["status"] = status
        return self._request("GET", "/v1/runs", params=params).json()  # type: ignore[no-any-return]

    def get_run(self, run_id: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/runs/{run_id}").json()  # type: ignore[no-any-return]

    def plot(self, run_id: str) -> bytes:
        return self._request("GET", f"/v1/runs/{run_id}/plot").content

    def add_tasks(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", f"/v1/runs/{run_id}/tasks", json=body).json()  # type: ignore[no-any-return]

    def stop_run(self, run_id: str) -> dict[str, Any]:
        return self._request("POST", f"/v1/runs/{run_id}/stop").json()  # type: ignore[no-any-return]

    def create_eval(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", "/v1/evals", json=body).json()  # type: ignore[no-any-return]

    def create_sft(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", "/v1/sft", json=body).json()  # type: ignore[no-any-return]

    def get_eval(self, eval_id: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/evals/{eval_id}").json()  # type: ignore[no-any-return]

    def get_eval_samples(self, eval_id: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/evals/{eval_id}/samples").json()  # type: ignore[no-any-return]

    def get_rollout(self, rollout_id: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/rollouts/{rollout_id}").json()  # type: ignore[no-any-return]
