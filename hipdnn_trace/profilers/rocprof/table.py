"""A profiler CSV read into memory with columns found by name, case-insensitively.

rocprofv3 renamed and added columns between ROCm 6.2 and 7.x (Thread_Id, Dispatch_Id,
Stream_Id, Accum_VGPR_Count, "Agent N" labels), rocpd's converter capitalises some of
them differently (Vgpr_Count) and prepends Guid/Pid. Matching by lower-cased header
name makes one parser serve every generation. Any row whose field count differs from
the header is an error that names the file and line: a silently shifted column would
put numbers under the wrong names.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError

_INT_TAIL = re.compile(r"(-?\d+)\s*$")


class ProfileFormatError(UserError):
    """A profiler file that cannot be parsed; the message names the file and place."""


def read_lines(path: Path, keepends: bool = False) -> list[str]:
    """Text lines of ``path`` (UTF-8, undecodable bytes replaced) or a one-line error.

    CSV parsing keeps the line ends: a quoted field broken over two lines must show
    its line break (and be rejected), not be silently glued back together.
    """
    text = read_gate.read_text(path, read_gate.PROFILER_CAPTURE, errors="replace")
    return text.splitlines(keepends=keepends)


@dataclass
class Table:
    """Header + rows of one CSV file; ``lines[i]`` is the file line of ``rows[i]``."""

    path: Path
    header: list[str]
    rows: list[list[str]]
    lines: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._index: dict[str, int] = {}
        for i, name in enumerate(self.header):
            self._index.setdefault(name.strip().lower(), i)

    @property
    def names(self) -> set[str]:
        """Lower-cased column names."""
        return set(self._index)

    def has(self, *names: str) -> bool:
        return all(n.lower() in self._index for n in names)

    def position(self, *aliases: str) -> int | None:
        """Index of the first alias present (case-insensitive), else None."""
        for alias in aliases:
            i = self._index.get(alias.lower())
            if i is not None:
                return i
        return None

    def require(self, *aliases: str) -> int:
        i = self.position(*aliases)
        if i is None:
            raise ProfileFormatError(
                f"{self.path}: missing column {aliases[0]!r} (header: {', '.join(self.header)})"
            )
        return i

    def _column(self, aliases: tuple[str, ...], required: bool) -> int | None:
        return self.require(*aliases) if required else self.position(*aliases)

    def strings(self, *aliases: str, required: bool = False) -> list[str | None]:
        i = self._column(aliases, required)
        if i is None:
            return [None] * len(self.rows)
        return [row[i] for row in self.rows]

    def ints(self, *aliases: str, required: bool = False) -> list[int | None]:
        """Integers of a column; "Agent 4"/"GPU 3" labels give their number, floats round."""
        return self._parsed(aliases, required, parse_int, "not an integer")  # type: ignore[return-value]

    def floats(self, *aliases: str, required: bool = False) -> list[float | None]:
        return self._parsed(aliases, required, parse_float, "not a number")  # type: ignore[return-value]

    def interval(self, start: tuple[str, ...], end: tuple[str, ...], *,
                 required: bool = False) -> tuple[list[int | None], list[int | None]]:
        """Start and end timestamps (ns) of each row, refused (file, line, column) when one is outside
        0..2**63-1 (a 40-digit one became null in the Int64 column, a negative one broke the trace) or
        the end is before the start (a negative duration is a damaged row, not a kernel)."""
        starts, ends = self.ints(*start, required=required), self.ints(*end, required=required)
        columns = (self._column(start, False), self._column(end, False))
        for r, (s, e) in enumerate(zip(starts, ends)):
            for value, col in zip((s, e), columns):
                if value is None and col is not None and (self.rows[r][col] or "").strip():   # "nan", "inf"
                    raise ProfileFormatError(f"{self.where(r, col)}: not a timestamp: {self.rows[r][col]!r}")
                if value is not None and col is not None and not 0 <= value <= MAX_TIMESTAMP:
                    raise ProfileFormatError(f"{self.where(r, col)}: timestamp outside 0..{MAX_TIMESTAMP}: "
                                             f"{self.rows[r][col]!r}")
            if s is not None and e is not None and e < s and columns[1] is not None:
                raise ProfileFormatError(f"{self.where(r, columns[1])}: ends before it starts ({e} < {s})")
        return starts, ends

    def where(self, r: int, col: int) -> str:
        line = self.lines[r] if self.lines else r + 2
        return f"{self.path}: line {line}: column {self.header[col]!r}"

    def _parsed(self, aliases: tuple[str, ...], required: bool,
                parse: Callable[[str | None], object], what: str) -> list[object]:
        """A column through ``parse``; a cell it cannot read is an error naming file, line and column."""
        i = self._column(aliases, required)
        if i is None:
            return [None] * len(self.rows)
        out = []
        for r, row in enumerate(self.rows):
            value = parse(row[i])
            if value is _BAD:
                raise ProfileFormatError(f"{self.where(r, i)}: {what}: {row[i]!r}")
            out.append(value)
        return out


_BAD = object()
#: the largest timestamp an Int64 column holds (ns since boot: about 292 years)
MAX_TIMESTAMP = 2**63 - 1


def parse_int(text: str | None) -> int | None | object:
    """"12" -> 12, "Agent 4" -> 4, "8.1097E+14" -> 810970000000000, "" -> None, junk -> _BAD."""
    if text is None:
        return None
    s = text.strip()
    if not s:
        return None
    try:
        return int(s)
    except ValueError:
        pass
    if s.lower().startswith("0x"):
        try:
            return int(s, 16)
        except ValueError:
            return _BAD
    try:
        f = float(s)
    except ValueError:
        m = _INT_TAIL.search(s)
        return int(m.group(1)) if m else _BAD
    if math.isnan(f) or math.isinf(f):
        return None
    return int(round(f))


def parse_float(text: str | None) -> float | None | object:
    if text is None:
        return None
    s = text.strip()
    if not s:
        return None
    try:
        return float(s)
    except ValueError:
        return _BAD


def read_table(path: Path, *, overflow_into_first: bool = False, text: Sequence[str] | None = None) -> Table:
    """Parse ``path`` as CSV. Blank lines are skipped; a ragged row is an error.

    ``overflow_into_first`` re-joins extra leading fields into the first column: legacy
    rocprof wrote unquoted kernel names that contain commas in ``results.stats.csv``.
    """
    lines = list(text) if text is not None else read_lines(path, keepends=True)
    if not any(line.strip() for line in lines):
        raise ProfileFormatError(f"{path}: empty file")
    reader = csv.reader(lines)
    header: list[str] | None = None
    rows: list[list[str]] = []
    where: list[int] = []
    try:
        for fields in reader:
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if header is None:
                header = [f.strip() for f in fields]
                _check_header(path, header)
                continue
            if len(fields) != len(header):
                if overflow_into_first and len(fields) > len(header):
                    extra = len(fields) - len(header)
                    fields = [",".join(fields[: extra + 1])] + fields[extra + 1 :]
                else:
                    shown = ",".join(fields)
                    shown = shown if len(shown) <= 60 else shown[:57] + "..."
                    raise ProfileFormatError(
                        f"{path}: line {reader.line_num}: {len(fields)} fields but the header has "
                        f"{len(header)} ({shown!r}); the file is truncated or edited"
                    )
            rows.append(fields)
            where.append(reader.line_num)
    except csv.Error as exc:
        raise ProfileFormatError(f"{path}: line {reader.line_num}: bad CSV: {exc}") from None
    assert header is not None
    return Table(path, header, rows, where)


_HEADER_NAME = re.compile(r"^[A-Za-z0-9_\-\.\[\]\(\) :/%#]*$")


def _check_header(path: Path, header: list[str]) -> None:
    for name in header:
        if "\n" in name or "\r" in name:
            raise ProfileFormatError(
                f"{path}: malformed header: column name {name!r} spans two lines"
            )
        if not _HEADER_NAME.match(name):
            raise ProfileFormatError(f"{path}: malformed header: column name {name!r}")
    if len(header) < 2:
        raise ProfileFormatError(f"{path}: not a profiler CSV (header has one column: {header[0]!r})")
