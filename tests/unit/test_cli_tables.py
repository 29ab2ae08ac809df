"""``services.cli.tables.Listing``: in any width, ids and statuses are printed whole; text wraps; the least
important columns are left out first, and said so."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from services.cli.tables import Col, Listing

pytestmark = pytest.mark.unit

RUN_ID = "run_5e0c1f2a3b4c5d6e7f80"
EVAL_ID = "eval_0123456789abcdef0123"


def listing() -> Listing:
    table = Listing(
        [Col("id", whole=True, keep=True), Col("name", drop=1), Col("status", whole=True, keep=True),
         Col("harness", drop=2), Col("steps", drop=4), Col("eval", whole=True, drop=3)],
    )  # fmt: skip
    table.add_row(
        RUN_ID, "a rather long run name that wraps", "completed", "claude-code", "3/3 done", EVAL_ID
    )
    table.add_row(RUN_ID[:-1] + "1", "short", "stopping", "shell", "0/1 done, sampling step 1", EVAL_ID)
    return table


def printed(table: Listing, width: int) -> list[str]:
    out = io.StringIO()
    table.render(Console(file=out, width=width, color_system=None))
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [200, 100, 60, 45])
def test_ids_and_statuses_stay_whole_and_the_table_fits(width: int) -> None:
    lines = printed(listing(), width)
    text = "\n".join(lines)
    assert all(len(line) <= width for line in lines), text
    assert "…" not in text
    for whole in (RUN_ID, RUN_ID[:-1] + "1", "completed", "stopping"):
        assert sum(whole in line for line in lines) == 1, (whole, text)


def test_columns_are_left_out_least_important_first_and_named() -> None:
    wide = printed(listing(), 200)
    assert "left out" not in "\n".join(wide) and EVAL_ID in wide[3]
    narrow = "\n".join(printed(listing(), 60))
    assert "left out for width: steps, eval" in narrow
    assert EVAL_ID not in narrow  # a whole column that does not fit is left out, never cut
    assert all(
        word in narrow for word in ("rather", "long", "run", "name", "that", "wraps")
    )  # wrapped, not cut


def test_columns_that_must_stay_are_never_cut_even_wider_than_the_terminal() -> None:
    lines = printed(listing(), 30)
    assert any(RUN_ID in line for line in lines) and any("completed" in line for line in lines)
    assert "…" not in "\n".join(lines)
