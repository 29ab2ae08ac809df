"""Smoke run of ``harnessrl bench providers``: the table and the JSON object carry every figure, per API."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from services.cli.main import cli

pytestmark = [pytest.mark.unit, pytest.mark.bench]


def test_bench_providers_json_and_table() -> None:
    result = CliRunner().invoke(cli, ["bench", "providers", "--json", "--repeat", "2"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert [row["api"] for row in figures["rows"]] == [
        "openai_chat",
        "openai_responses",
        "anthropic_messages",
        "gemini",
    ]
    for row in figures["rows"]:
        assert row["messages"] == 42  # system + task + 20 round trips parsed, nothing dropped
        assert row["json_loads_us"] > 0 and row["parse_us"] > 0 and row["stream_us_per_delta"] > 0
        assert row["parse_over_json_loads"] == pytest.approx(row["parse_us"] / row["json_loads_us"], rel=0.05)
    table = CliRunner().invoke(cli, ["bench", "providers", "--repeat", "2"])
    assert (
        table.exit_code == 0
        and "parse_over_json_loads" in table.output
        and "anthropic_messages" in table.output
    )
