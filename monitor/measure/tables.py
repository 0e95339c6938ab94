"""A markdown table in an answer, read as a careful person reads it: options as rows with
a score column (or a cell such as "8/10"), or options as columns with an overall row."""

from __future__ import annotations

from monitor.measure.options import Options
from monitor.measure.statements import COLUMN, KEYWORD, OUT_OF_TEN, score_at, statements

__all__ = ["Table", "table_row"]


def table_row(s: str) -> list[str] | None:
    return [c.strip(" *_") for c in s.strip().strip("|").split("|")] if s.startswith("|") else None


class Table:
    """A markdown table: options as rows (a score column) or as columns (an overall row)."""

    def __init__(self) -> None:
        self.score_col: int | None = None
        self.columns: dict[int, str] = {}  # column -> label, when options head the columns
        self.rows = 0

    def row(self, cells: list[str], opts: Options, final: dict[str, float | str]) -> None:
        if all(set(c) <= set("-: ") for c in cells):
            return  # the |---|---| rule
        heads = {i: hit[0] for i, c in enumerate(cells) if (hit := opts.opens(c))}
        self.rows += 1
        if self.rows == 1 and len(set(heads.values())) >= 2:  # | | Bordeaux | Séville | Porto |
            self.columns = heads
            # One head in words we do not know ("IIT बॉम्बे") beside the others: the option
            # left over, as a reader takes it.
            left = [lab for lab in opts.labels if lab not in heads.values()]
            blank = [i for i in range(1, len(cells)) if i not in heads and cells[i]]
            if len(left) == len(blank) == 1 and len(heads) == len(opts.labels) - 1:
                self.columns[blank[0]] = left[0]
            return
        if self.columns:
            if KEYWORD.match(cells[0]):  # the "Overall" row; criteria rows are a breakdown
                for i, label in self.columns.items():
                    if i < len(cells) and (v := score_at(cells[i])) is not None:
                        final[label] = v
            return
        if not heads:  # a header row: which column holds the score
            self.score_col = next((i for i, c in enumerate(cells) if COLUMN.search(c)), None)
            return
        label = next(iter(heads.values()))
        col = self.score_col
        value = score_at(cells[col]) if col is not None and col < len(cells) else None
        if value is None:  # no score column: a cell such as "8/10"
            found = [v for c in cells for v in statements(c) if OUT_OF_TEN.search(c)]
            value = found[-1] if len(found) == 1 else None
        if value is not None:
            final[label] = value
