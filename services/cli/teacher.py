"""``--teacher`` of ``harnessrl run create`` and ``harnessrl eval``: who answers the model calls instead of the
policy (``shared/run_config.py: TeacherConfig``), checked here before the request is sent.

``--teacher reference`` (the built-in demonstrator of each task's reference fix; the api refuses it on eval splits
and on tasks without a reference fix) or ``--teacher URL`` (an OpenAI-compatible chat endpoint's base URL, with
``--teacher-model`` and ``--teacher-key-env``: the name of the gateway's environment variable that holds its API
key — the key itself is never sent to the api or stored). A bad value is a usage error (exit 2, nothing sent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from shared.run_config import TeacherConfig

F = TypeVar("F", bound=Callable[..., Any])


def teacher_options(command: F) -> F:
    """The three options, in help order."""
    for option in reversed(
        [
            click.option(
                "--teacher",
                default=None,
                metavar="reference|URL",
                help="Answer the model calls with a teacher instead of the policy: 'reference' (the task's "
                "reference fix, acted out; train splits only) or an OpenAI-compatible base URL.",
            ),
            click.option("--teacher-model", default=None, help="With --teacher URL: the model to ask for."),
            click.option(
                "--teacher-key-env",
                default=None,
                metavar="NAME",
                help="With --teacher URL: the gateway's environment variable holding the endpoint's API key.",
            ),
        ]
    ):
        command = option(command)
    return command


def teacher_section(teacher: str | None, model: str | None, key_env: str | None) -> dict[str, Any] | None:
    """The request's ``teacher`` section (None: no teacher); ``click.BadParameter`` for a value it cannot be."""
    if teacher is None:
        if model is not None or key_env is not None:
            raise click.BadParameter(
                "--teacher-model and --teacher-key-env need --teacher URL", param_hint="--teacher"
            )
        return None
    try:
        config = TeacherConfig.parse(teacher)
        if model is not None or key_env is not None:
            config = TeacherConfig.model_validate(
                {**config.model_dump(exclude_none=True), "model": model, "api_key_env": key_env}
            )
    except ValidationError as exc:
        raise click.BadParameter(
            "; ".join(str(error["msg"]).removeprefix("Value error, ") for error in exc.errors()),
            param_hint="--teacher",
        ) from None
    return config.model_dump(mode="json", exclude_none=True)
