"""One typed settings class for every harnessrl service.

Values come from the environment (prefix ``HARNESSRL_``) or a ``.env`` file. Every service calls
``get_settings()``; tests build ``Settings(...)`` directly. A malformed value stops the start with one line that
names the setting (``SettingsError``), never a traceback deep inside a service.
"""

from __future__ import annotations

import functools
import ipaddress
import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class SettingsError(ValueError):
    """A setting is malformed; the message names it and says what is expected."""


def default_gateway_workers() -> int:
    """Gateway processes for this machine: half its cores, at least 2 (one can die without stalling rollouts)
    and at most 8."""
    return max(2, min(8, len(os.sched_getaffinity(0)) // 2))


def _default_data_dir() -> Path:
    # As root the sandboxed uid must reach workspaces and the gateway socket under the data dir, and root's home
    # is mode 0700: use the system location then.
    if os.geteuid() == 0:
        return Path("/var/lib/harnessrl")
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "harnessrl"


def default_runner_concurrency(cores: int | None) -> int:
    """Rollouts at once by default: one per core, at least 2 and at most 8."""
    return max(2, min(8, cores or 1))


def default_grader_concurrency(cores: int | None) -> int:
    """Gradings at once by default: one per two cores (a test run is CPU-bound), at least 2 and at most 8."""
    return max(2, min(8, (cores or 1) // 2))


DEFAULT_API_TOKEN = "dev-token"
MIN_API_TOKEN_CHARS = 16
# Secrets this repository ships (settings defaults and compose's defaults): public, hence never secret.
SHIPPED_S3_SECRET_KEYS = frozenset({"minioadmin", "harnessrl-secret"})
SHIPPED_DATABASE_PASSWORDS = frozenset({"harnessrl", "postgres"})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HARNESSRL_", env_file=".env", extra="ignore")

    # --- state ---------------------------------------------------------------------------------------
    database_url: str = Field(
        "postgresql+psycopg://postgres@127.0.0.1:5432/harnessrl",
        description="SQLAlchemy URL of the Postgres database (psycopg 3 driver).",
    )
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0", description="Redis for Celery queues, streams, events."
    )
    object_store_url: str = Field(
        "file://",
        description="Where big things live: 's3://BUCKET' (with s3_endpoint) or 'file:///abs/dir' "
        "(empty path = <data_dir>/objects).",
    )
    s3_endpoint: str = Field("127.0.0.1:9000", description="host:port of the S3 server for s3:// stores.")
    s3_access_key: str = Field("minioadmin", description="S3 access key.")
    s3_secret_key: str = Field("minioadmin", description="S3 secret key.")
    s3_secure: bool = Field(False, description="Use HTTPS to reach the S3 server.")
    s3_region: str = Field("us-east-1", description="S3 region name.")
    data_dir: Path = Field(
        default_factory=_default_data_dir, description="Logs, local objects, embedded DBs."
    )
    model_dir: Path | None = Field(
        None, description="Served model directory; default <data_dir>/models/tiny."
    )

    # --- network -------------------------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Interface the HTTP services bind.")
    api_port: int = Field(8300, description="REST API port.")
    gateway_port: int = Field(8301, description="Gateway TCP port.")
    gateway_socket: Path | None = Field(
        None, description="Gateway Unix socket; default <data_dir>/gateway.sock."
    )
    inference_port: int = Field(8302, description="vLLM port of the first inference replica.")
    inference_max_lora_rank: int = Field(
        0,
        ge=0,
        le=512,
        description="> 0: vLLM serves LoRA runs' adapters up to this rank (loaded at run time).",
    )
    inference_urls: list[str] = Field(
        default_factory=list,
        description="Inference replicas the gateway uses; default http://host:inference_port.",
    )
    gateway_workers: int = Field(
        default_factory=default_gateway_workers,
        description="Gateway processes sharing its sockets (serve gateway --workers); default from the core count.",
    )
    api_token: str = Field(DEFAULT_API_TOKEN, description="Bearer token of the REST API.")
    profile: Literal["dev", "production"] = Field(
        "dev",
        description="'production' refuses to start with a secret this repository ships (the API token "
        "`dev-token` or one under 16 characters, the S3 secret keys `minioadmin`/`harnessrl-secret`, the compose "
        "Postgres password); the compose file sets it unless compose/.env says `dev` (the local quick start). "
        "In every profile the API refuses a non-loopback bind with the default or a short token.",
    )
    served_model_name: str = Field("policy", description="Name vLLM serves the policy under.")

    # --- limits --------------------------------------------------------------------------------------
    max_request_bytes: int = Field(32 * 1024 * 1024, description="Largest request body the gateway accepts.")
    gateway_max_calls_in_flight_per_rollout: int = Field(
        8,
        ge=0,
        description="Model calls one rollout key may have in flight at once, across all gateway workers (a "
        "Redis count); one more is refused at once with the provider's 429 and a retry-after. 0: no limit.",
    )
    max_model_len: int = Field(8192, description="Context length (prompt + completion) served.")
    default_max_tokens: int = Field(1024, description="Completion budget when a request names none.")
    rollout_timeout_s: float = Field(900.0, description="Wall-clock limit of one harness run.")
    grading_timeout_s: float = Field(600.0, description="Wall-clock limit of one grading test run.")
    sandbox_memory_bytes: int = Field(4 * 1024**3, description="Address-space limit inside sandboxes.")
    sandbox_max_processes: int = Field(256, description="Process limit inside sandboxes.")
    sandbox_file_size_bytes: int = Field(256 * 1024**2, description="Largest file a sandbox may write.")
    sandbox_open_files: int = Field(1024, description="Open-file limit inside sandboxes.")
    sandbox_uid: int = Field(10001, description="Unprivileged uid sandboxed processes run as.")
    sandbox_tmpfs_bytes: int = Field(
        256 * 1024**2, description="Size of each in-memory filesystem of a sandbox (/tmp, a throwaway HOME)."
    )
    sandbox_shm_bytes: int = Field(64 * 1024**2, description="Size of /dev/shm inside sandboxes.")
    sandbox_allow_no_seccomp: bool = Field(
        False,
        description="Run sandboxes without their seccomp filter where bubblewrap or the architecture cannot take "
        "it (recorded in the isolation string); otherwise such a host refuses to start sandboxes.",
    )
    task_dir_allowlist: str = Field(
        "",
        description="Host folders (':'-separated absolute paths) under which tasks posted through the REST API "
        "may name a 'dir' source or a local git repository; empty (the default) refuses every host path from a "
        "REST client (bundled datasets, git URLs and object-store sources are unaffected).",
    )
    allow_unsandboxed: bool = Field(
        False, description="Run harnesses without bubblewrap (recorded as unsafe)."
    )
    rollout_retries: int = Field(
        2,
        description="Retries of a rollout whose attempt failed for an infrastructure reason (its runner died, the "
        "gateway lost its records).",
    )
    capture_flush_timeout_s: float = Field(
        60.0, description="How long the runner waits for the gateway to record a finished rollout's calls."
    )
    capture_linger_ms: float = Field(
        10.0,
        ge=0,
        le=1000,
        description="How long the gateway lets a short queue of call records fill before one write (fewer,"
        " fuller transactions under load); 0 writes at once.",
    )
    runner_concurrency: int = Field(
        default_factory=lambda: default_runner_concurrency(os.cpu_count()),
        ge=1,
        le=256,
        description="Rollouts `harnessrl up`'s runner runs at once (default: the machine's cores, 2 to 8, so one "
        "hung harness never holds up every rollout; harnesses mostly wait on the model).",
    )
    grader_concurrency: int = Field(
        default_factory=lambda: default_grader_concurrency(os.cpu_count()),
        ge=1,
        le=64,
        description="Gradings `harnessrl up`'s grader (and `harnessrl worker grader`) runs at once (default: half "
        "the machine's cores, 2 to 8, so one test that hangs until its time limit never holds up every grading).",
    )
    max_policy_lag: int = Field(
        2,
        description="The learner's drop bound for runs that set no `grpo.max_policy_lag` (their sampling stays "
        "on-policy): a group whose oldest token was sampled more versions before the learner's than this is "
        "dropped. On-policy steps produce such groups only when a version was rejected or failed to load. A run's "
        "own `grpo.max_policy_lag` replaces it and also lets sampling run ahead (shared/run_config.py).",
    )
    pin_cpus: bool = Field(
        False,
        description="`harnessrl up` pins inference (vLLM and every process it starts) to the first half of the "
        "CPUs it may use and each learner to the other half (the affinity is set before exec, so children inherit "
        "it), so that sampling running ahead of the learner (`grpo.max_policy_lag` > 0) overlaps on separate cores "
        "instead of time-slicing; the other services stay unpinned. Needs at least 2 CPUs.",
    )
    max_learners: int = Field(
        2,
        ge=1,
        le=64,
        description="Learner processes the learner controller (`harnessrl serve learners`, the compose "
        "`learners` service, `harnessrl up`) runs side by side, one per training run; runs beyond it wait, oldest "
        "first. Each learner holds a copy of the policy and its optimizer in memory (or on the GPUs it is given).",
    )
    learner_max_failures: int = Field(
        5,
        ge=1,
        le=100,
        description="Times in a row a run's learner may die (each restart waits longer: 2, 4, 8 ... up to 60 s) "
        "before the controller marks the run failed with the learner's last words as its error. A learner that "
        "ran for 5 minutes starts the count again.",
    )
    pool_exclusive: bool = Field(
        True,
        description="One run at a time holds the inference pool: a run is created queued, and starts (oldest "
        "first) once no other run is active and the pool serves it at version 0 (the inference updater rebases "
        "to the base weights), so each run's calls carry only its own versions. Off: runs share the pool as it "
        "is (a scripted policy; tests of one service).",
    )
    task_visibility_timeout_s: float | None = Field(
        None,
        description="Seconds before an unacked Celery task of a dead worker is redelivered; must exceed the "
        "longest task. Default: 1.25 x the longest task limit + 60.",
    )

    # --- derived -------------------------------------------------------------------------------------
    @property
    def resolved_model_dir(self) -> Path:
        return self.model_dir or self.data_dir / "models" / "tiny"

    @property
    def small_model_dir(self) -> Path:
        """Where ``harnessrl model init-small`` and the demo keep SmolLM2-135M-Instruct."""
        return self.data_dir / "models" / "small"

    @property
    def resolved_gateway_socket(self) -> Path:
        return self.gateway_socket or self.data_dir / "gateway.sock"

    @property
    def resolved_inference_urls(self) -> list[str]:
        return self.inference_urls or [f"http://{self.host}:{self.inference_port}"]

    @property
    def resolved_visibility_timeout_s(self) -> float:
        longest = max(self.rollout_timeout_s, self.grading_timeout_s)
        return self.task_visibility_timeout_s or longest * 1.25 + 60

    @property
    def object_store_dir(self) -> Path:
        path = urlparse(self.object_store_url).path
        return Path(path) if path else self.data_dir / "objects"

    # --- validation ----------------------------------------------------------------------------------
    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, v: str) -> str:
        scheme = urlparse(v).scheme
        if not scheme.startswith("postgresql") or not (urlparse(v).hostname or "host=" in v):
            raise ValueError("expected postgresql+psycopg://user@host:port/dbname")
        return v

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, v: str) -> str:
        parsed = urlparse(v)
        if parsed.scheme not in ("redis", "rediss", "unix", "redis+socket"):
            raise ValueError("expected redis://host:port/db or unix:///path/redis.sock")
        if parsed.scheme in ("redis", "rediss") and not parsed.hostname:
            raise ValueError("expected redis://host:port/db")
        return v

    @field_validator("object_store_url")
    @classmethod
    def _check_object_store_url(cls, v: str) -> str:
        parsed = urlparse(v)
        if parsed.scheme == "s3":
            if not parsed.netloc:
                raise ValueError("s3:// needs a bucket name, e.g. s3://harnessrl")
        elif parsed.scheme == "file":
            if parsed.netloc or (parsed.path and not parsed.path.startswith("/")):
                raise ValueError("file:// needs an absolute path, e.g. file:///var/lib/harnessrl/objects")
        else:
            raise ValueError(f"unknown object-store scheme {parsed.scheme!r}; use s3://BUCKET or file:///DIR")
        return v

    @field_validator(
        "api_port",
        "gateway_port",
        "inference_port",
    )
    @classmethod
    def _check_port(cls, v: int) -> int:
        if not 0 < v < 65536:
            raise ValueError("a port is 1..65535")
        return v

    @field_validator(
        "max_request_bytes",
        "max_model_len",
        "default_max_tokens",
        "rollout_timeout_s",
        "grading_timeout_s",
        "sandbox_memory_bytes",
        "sandbox_max_processes",
        "sandbox_file_size_bytes",
        "sandbox_open_files",
        "sandbox_tmpfs_bytes",
        "sandbox_shm_bytes",
        "gateway_workers",
        "capture_flush_timeout_s",
    )
    @classmethod
    def _check_positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be positive")
        return v

    @field_validator("rollout_retries", "max_policy_lag", "sandbox_uid")
    @classmethod
    def _check_non_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must not be negative")
        return v

    @field_validator("inference_urls")
    @classmethod
    def _check_urls(cls, v: list[str]) -> list[str]:
        for url in v:
            if urlparse(url).scheme not in ("http", "https") or not urlparse(url).hostname:
                raise ValueError(f"{url!r} is not an http(s) URL")
        return [u.rstrip("/") for u in v]

    @model_validator(mode="after")
    def _check_ports_distinct(self) -> Settings:
        ports = [self.api_port, self.gateway_port, self.inference_port]
        if len(set(ports)) != len(ports):
            raise ValueError("api_port, gateway_port and inference_port must differ")
        longest = max(self.rollout_timeout_s, self.grading_timeout_s)
        if self.task_visibility_timeout_s is not None and self.task_visibility_timeout_s <= longest:
            raise ValueError(
                f"task_visibility_timeout_s ({self.task_visibility_timeout_s}) must exceed the longest task "
                f"limit ({longest}), or a healthy task would run twice"
            )
        return self


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` listens on loopback only (``""`` and ``0.0.0.0`` listen everywhere; a name other
    than ``localhost`` counts as reachable from elsewhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _api_token_problem(api_token: str) -> str | None:
    if api_token == DEFAULT_API_TOKEN:
        return f"the shipped default token ({DEFAULT_API_TOKEN})"
    if len(api_token) < MIN_API_TOKEN_CHARS:
        return f"a token of {len(api_token)} characters"
    return None


def check_api_exposure(host: str, api_token: str) -> None:
    """Refuse (``SettingsError``) to serve the REST API beyond loopback with the shipped or a short token: anyone
    who reaches the port would hold it. ``harnessrl serve api`` and ``harnessrl up`` call this before binding."""
    if is_loopback_host(host) or (problem := _api_token_problem(api_token)) is None:
        return
    raise SettingsError(
        f"refusing to serve the API on {host or 'every interface'} with {problem}: set HARNESSRL_API_TOKEN to a "
        f"secret of {MIN_API_TOKEN_CHARS}+ characters, or bind 127.0.0.1"
    )


def check_shipped_secrets(settings: Settings) -> None:
    """Outside the ``dev`` profile, refuse (``SettingsError``) a secret this repository ships: whoever read the
    repository holds it."""
    if settings.profile == "dev":
        return
    hint = "set a secret of your own (HARNESSRL_PROFILE=dev accepts it, for a local trial only)"
    if (problem := _api_token_problem(settings.api_token)) is not None:
        raise SettingsError(
            f"invalid setting HARNESSRL_API_TOKEN: {problem} in profile {settings.profile}; {hint}"
        )
    if settings.object_store_url.startswith("s3:") and settings.s3_secret_key in SHIPPED_S3_SECRET_KEYS:
        raise SettingsError(
            f"invalid setting HARNESSRL_S3_SECRET_KEY: the shipped default in profile {settings.profile}; {hint}"
        )
    if urlparse(settings.database_url).password in SHIPPED_DATABASE_PASSWORDS:
        raise SettingsError(
            "invalid setting HARNESSRL_DATABASE_URL: its password is the shipped default in profile "
            f"{settings.profile} (compose: POSTGRES_PASSWORD); {hint}"
        )


def load_settings(**overrides: object) -> Settings:
    """Build settings, turning a validation error into one ``SettingsError`` line naming the setting; outside the
    ``dev`` profile a shipped secret is such an error too (``check_shipped_secrets``)."""
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"]) or "settings"
        env = f"HARNESSRL_{name.upper()}" if first["loc"] else "settings"
        msg = first["msg"].removeprefix("Value error, ")
        raise SettingsError(f"invalid setting {env}: {msg}") from None
    check_shipped_secrets(settings)
    return settings


@functools.cache
def get_settings() -> Settings:
    """The process-wide settings (read once)."""
    return load_settings()
