"""The OpenAPI 3.1 document of the REST API, generated from the pydantic schemas in ``schemas.py``.

Paths, parameters and status codes are listed here by hand next to the schema references; the test suite runs
schemathesis against the served document (no 500s, responses conform) and checks that every status listed
here actually occurs, so the document cannot drift from the handlers silently.
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from services.api import schemas
from shared.statuses import RUN_STATUSES

REF = "#/components/schemas/{model}"
MAX_PAGE = 200


def _ref(model: type) -> dict[str, str]:
    return {"$ref": REF.format(model=model.__name__)}


def _json(description: str, model: type) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {
        401: "Missing or wrong bearer token.",
        404: "No such object.",
        409: "Conflicts with the object's state or an earlier request.",
        422: "A parameter or body field is invalid; 'detail' names each by its path.",
    }
    return {str(s): _json(words[s], schemas.Error) for s in statuses}


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[A-Za-z0-9_\-]+$"},
    }


RUN_ID = _path_param("run_id", "Run id (run_...).")
ROLLOUT_ID = _path_param("rollout_id", "Rollout id (ro_...).")
EVAL_ID = _path_param("eval_id", "Eval id (eval_...).")
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Repeat a create safely: the same key and body return the first result.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[\x21-\x7e]+$"},
}


def _body(model: type) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": _ref(model)}}}


def build_openapi() -> dict[str, Any]:
    _, top = models_json_schema(
        [
            (schemas.RunCreate, "validation"),
            (schemas.TasksAdd, "validation"),
            (schemas.EvalCreate, "validation"),
            (schemas.SFTCreate, "validation"),
            (schemas.EvalDetail, "serialization"),
            (schemas.EvalSamples, "serialization"),
            (schemas.Error, "serialization"),
            (schemas.Health, "serialization"),
            (schemas.RunPage, "serialization"),
            (schemas.RunSummary, "serialization"),
            (schemas.RunDetail, "serialization"),
            (schemas.TasksAdded, "serialization"),
            (schemas.RolloutDetail, "serialization"),
        ],
        ref_template=REF,
    )
    components = top["$defs"]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "harnessrl",
            "version": "1",
            "description": "Create and watch GRPO runs of unmodified coding-agent harnesses, fine-tune on recorded "
            "trajectories (SFT); read trajectories.",
        },
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/health": {
                "get": {
                    "operationId": "health",
                    "security": [],
                    "responses": {"200": _json("The api is up.", schemas.Health)},
                }
            },
            "/metrics": {
                "get": {
                    "operationId": "metrics",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Prometheus exposition format.",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "responses": {
                        "200": {
                            "description": "This document.",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        **_errors(401),
                    },
                }
            },
            "/v1/runs": {
                "post": {
                    "operationId": "createRun",
                    "parameters": [IDEMPOTENCY_KEY],
                    "requestBody": _body(schemas.RunCreate),
                    "responses": {
                        "201": _json("Run created; step 0's rollouts are queued.", schemas.RunDetail),
                        "200": _json(
                            "Replay of an earlier request with this Idempotency-Key.", schemas.RunDetail
                        ),
                        **_errors(401, 409, 422),
                    },
                },
                "get": {
                    "operationId": "listRuns",
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 50},
                        },
                        {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}},
                        {
                            "name": "status",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string", "enum": list(RUN_STATUSES)},
                        },
                    ],
                    "responses": {
                        "200": _json("A page of runs, newest first.", schemas.RunPage),
                        **_errors(401, 422),
                    },
                },
            },
            "/v1/runs/{run_id}": {
                "get": {
                    "operationId": "getRun",
                    "parameters": [RUN_ID],
                    "responses": {
                        "200": _json("Progress, per-step metrics, reward curve.", schemas.RunDetail),
                        **_errors(401, 404),
                    },
                }
            },
            "/v1/runs/{run_id}/plot": {
                "get": {
                    "operationId": "plotRun",
                    "parameters": [RUN_ID],
                    "responses": {
                        "200": {
                            "description": "The reward curve as a PNG image.",
                            "content": {
                                "image/png": {"schema": {"type": "string", "contentMediaType": "image/png"}}
                            },
                        },
                        **_errors(401, 404),
                    },
                }
            },
            "/v1/runs/{run_id}/tasks": {
                "post": {
                    "operationId": "addTasks",
                    "parameters": [RUN_ID],
                    "requestBody": _body(schemas.TasksAdd),
                    "responses": {
                        "200": _json("Tasks attached; later steps sample them.", schemas.TasksAdded),
                        **_errors(401, 404, 409, 422),
                    },
                }
            },
            "/v1/runs/{run_id}/stop": {
                "post": {
                    "operationId": "stopRun",
                    "parameters": [RUN_ID],
                    "responses": {
                        "200": _json("The run is stopping (or already stopped).", schemas.RunSummary),
                        **_errors(401, 404, 409),
                    },
                }
            },
            "/v1/evals": {
                "post": {
                    "operationId": "createEval",
                    "requestBody": _body(schemas.EvalCreate),
                    "responses": {
                        "201": _json(
                            "Eval created, queued for the inference pool; its result comes with GET.",
                            schemas.EvalDetail,
                        ),
                        **_errors(401, 422),
                    },
                }
            },
            "/v1/evals/{eval_id}": {
                "get": {
                    "operationId": "getEval",
                    "parameters": [EVAL_ID],
                    "responses": {
                        "200": _json(
                            "What is evaluated, progress, and pass@1 / pass@k once every rollout ended.",
                            schemas.EvalDetail,
                        ),
                        **_errors(401, 404),
                    },
                }
            },
            "/v1/evals/{eval_id}/samples": {
                "get": {
                    "operationId": "getEvalSamples",
                    "parameters": [EVAL_ID],
                    "responses": {
                        "200": _json(
                            "Every sample: task, index, sampling seed, passed (null until graded).",
                            schemas.EvalSamples,
                        ),
                        **_errors(401, 404),
                    },
                }
            },
            "/v1/sft": {
                "post": {
                    "operationId": "createSFT",
                    "requestBody": _body(schemas.SFTCreate),
                    "responses": {
                        "201": _json(
                            "SFT run created (kind 'sft', running); its learner trains the selected rollouts.",
                            schemas.RunDetail,
                        ),
                        **_errors(401, 422),
                    },
                }
            },
            "/v1/rollouts/{rollout_id}": {
                "get": {
                    "operationId": "getRollout",
                    "parameters": [ROLLOUT_ID],
                    "responses": {
                        "200": _json("Task, calls, chains, patch, reward, log links.", schemas.RolloutDetail),
                        **_errors(401, 404),
                    },
                }
            },
        },
    }


def documented_statuses(document: dict[str, Any]) -> set[tuple[str, str, int]]:
    """Every (METHOD, path, status) the document promises; tests check each occurs."""
    return {
        (method.upper(), path, int(status))
        for path, item in document["paths"].items()
        for method, operation in item.items()
        for status in operation["responses"]
    }
