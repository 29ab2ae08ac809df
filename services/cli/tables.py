"""Tables for people at any terminal width: ids, statuses and numbers are never cut.

Rich shrinks every column of a table wider than the terminal, cutting ids and statuses to a few characters
(``eval_5…``, ``comple…``). A ``Listing`` instead keeps the columns marked ``whole`` at their full width, lets
text columns wrap, and leaves out the least important columns (last in ``drop``-order) until the rest fits;
it says which it left out (``--json`` has everything). If even the columns that must stay do not fit, the
table is printed wider than the terminal (lines wrap in the terminal, nothing is cut).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console, JustifyMethod
from rich.table import Table

WRAP_MIN = 8  # the narrowest a wrapping column is let get before columns are left out instead


@dataclass(frozen=True)
class Col:
    """One column: ``whole`` cells are never cut or wrapped (ids, statuses, numbers); ``keep`` columns are
    never left out; ``drop`` orders the others (higher is left out first)."""

    header: str
    whole: bool = False
    keep: bool = False
    drop: int = 0
    justify: JustifyMethod = "left"


@dataclass
class Listing:
    """Rows of strings under ``cols``, printed by ``render`` to fit ``console``'s width."""

    cols: Sequence[Col]
    title: str | None = None
    rows: list[list[str]] = field(default_factory=list)

    def add_row(self, *cells: str) -> None:
        assert len(cells) == len(self.cols), (cells, self.cols)
        self.rows.append([str(cell) for cell in cells])

    def _need(self, index: int) -> int:
        """The width a column needs (cell text only): its widest cell for a whole column, else the widest
        word up to ``WRAP_MIN``."""
        texts = [self.cols[index].header, *(row[index] for row in self.rows)]
        if self.cols[index].whole:
            return max(len(line) for text in texts for line in text.splitlines() or [""])
        widest = max((len(word) for text in texts for word in text.split()), default=1)
        return min(widest, WRAP_MIN)

    def fitted(self, width: int) -> tuple[list[int], list[str]]:
        """The indexes of the columns that fit ``width`` (in their order) and the headers left out."""
        shown = list(range(len(self.cols)))

        def total(indexes: list[int]) -> int:  # cells + 2 padding each + the borders between and around
            return sum(self._need(i) for i in indexes) + 3 * len(indexes) + 1

        droppable = sorted(
            (i for i in shown if not self.cols[i].keep), key=lambda i: (-self.cols[i].drop, -i)
        )
        left_out: list[str] = []
        for index in droppable:
            if total(shown) <= width:
                break
            shown.remove(index)
            left_out.append(self.cols[index].header)
        return shown, left_out

    def table(self, shown: list[int]) -> Table:
        table = Table(title=self.title)
        for i in shown:
            col = self.cols[i]
            table.add_column(col.header, no_wrap=col.whole, overflow="fold", justify=col.justify)
        for row in self.rows:
            table.add_row(*(row[i] for i in shown))
        return table

    def fitted_table(self, width: int) -> Table:
        """The table of the columns that fit ``width`` (for a view that prints it itself)."""
        return self.table(self.fitted(width)[0])

    def render(self, console: Console | None = None) -> None:
        console = console or Console()
        shown, left_out = self.fitted(console.width)
        table = self.table(shown)
        needed = sum(self._need(i) for i in shown) + 3 * len(shown) + 1
        if needed > console.width:  # only the columns that must stay, and still too wide: never cut them
            console = Console(width=needed, file=console.file, force_terminal=console.is_terminal)
        console.print(table)
        if left_out:
            console.print(
                f"(left out for width: {', '.join(left_out)}; a wider terminal or --json shows them)"
            )
