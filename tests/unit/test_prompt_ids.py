"""``shared/inference_client.py``: a prompt's ids as JSON text, from the id-text table, read back as the ids."""

from __future__ import annotations

import json
import random
from array import array

import pytest

from shared.inference_client import ID_TEXT_MAX, PromptIds, ids_json


@pytest.mark.parametrize(
    "ids",
    [
        array("i", [random.Random(0).randrange(200_000) for _ in range(3000)]),
        [0, 1, 2, 49151],
        [7],
        [],
        [-1, 5],  # never a token id, but never silently the table's last entry either
        [ID_TEXT_MAX, 3],
    ],
)
def test_ids_json_reads_back_as_the_ids(ids) -> None:  # type: ignore[no-untyped-def]
    assert json.loads(b"[" + ids_json(ids) + b"]") == list(ids)


def test_a_prompt_extended_by_a_suffix_keeps_its_json_in_step() -> None:
    prompt = PromptIds.of(array("i", [5, 6, 7])) + [8, 9000]
    assert json.loads(b"[" + prompt.json + b"]") == list(prompt.ids) == [5, 6, 7, 8, 9000]
    assert json.loads(b"[" + (PromptIds.of([]) + [3]).json + b"]") == [3]
