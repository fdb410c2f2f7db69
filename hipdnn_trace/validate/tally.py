"""What a comparison returns, and the per-chunk tallies both comparison paths merge into it.

``compare.py`` (numpy, on the host) and ``device_compare.py`` (any Array API namespace, e.g. torch
on a GPU) judge an output chunk by chunk; each chunk becomes a :class:`ChunkResult` and the chunks
are merged in index order by :class:`Tally`, so both paths give the same :class:`TensorComparison`
for any chunk size or thread count. Kept apart so neither path imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hipdnn_trace.graph.dtypes import is_integer
from hipdnn_trace.validate.stored import conversion_words

TOP = 10


@dataclass(frozen=True)
class Element:
    index: tuple[int, ...]
    actual: float
    expected: float
    reference: float | None
    abs_err: float
    rel_err: float
    allowed: float = 0.0      # the error it was allowed (atol + rtol*|expected|; 0 for integer outputs):
                              # the worst list is ordered by abs_err / allowed, so a report can show that


@dataclass
class TensorComparison:
    total: int
    mismatches: int
    nonfinite: int
    unwritten: int
    max_abs: float
    max_rel: float
    worst_index: tuple[int, ...] | None
    atol: float
    rtol: float
    worst: list[Element] = field(default_factory=list)
    shape_problem: str | None = None
    ignored: int = 0          # elements outside the output's defined region (padded attention rows)
    integer: str | None = None   # the type the output was judged in by its stored values (validate/stored.py)
    finite: int = 0           # compared elements with a finite actual and expected value: those the
                              # maxima cover (none: the maxima are NaN, not a misleading 0)
    rule: str | None = None   # another validator's verdict in words (an engine config's rms: bench/output_check.py)
    rule_passed: bool | None = None

    @property
    def passed(self) -> bool:
        if self.rule_passed is not None:
            return self.shape_problem is None and self.rule_passed
        return self.shape_problem is None and self.mismatches == 0 and self.nonfinite == 0 \
            and self.unwritten == 0

    def message(self) -> str:
        """One line: what failed and by how much."""
        if self.shape_problem:
            return self.shape_problem
        if self.rule is not None:
            return self.rule
        skipped = f"; {self.ignored} padded element(s) not compared" if self.ignored else ""
        within = "fractional values within" if self.integer and is_integer(self.integer) else "within"
        if self.integer and self.passed:
            return (f"every element {_article(self.integer)} {self.integer} conversion of the reference "
                    f"({conversion_words(self.integer)}; {within} atol {self.atol:g} rtol {self.rtol:g}){skipped}")
        if self.passed:
            return (f"max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g} within atol {self.atol:g} "
                    f"rtol {self.rtol:g}{skipped}")
        parts = []
        if self.unwritten:
            parts.append(f"all {self.total} elements never written (still poisoned)" if self.unwritten == self.total
                         else f"{self.unwritten} element(s) never written (still poisoned)")
        if self.nonfinite:
            parts.append(f"all {self.total} elements NaN/Inf" if self.nonfinite == self.total
                         else f"{self.nonfinite} NaN/Inf element(s)")
        if self.mismatches and self.integer:
            parts.append(f"{self.mismatches}/{self.total} elements that no {self.integer} conversion of the reference "
                         f"gives (atol {self.atol:g} rtol {self.rtol:g}"
                         f"{' on fractional values' if is_integer(self.integer) else ''})")
        elif self.mismatches:
            parts.append(f"{self.mismatches}/{self.total} elements outside atol {self.atol:g} rtol {self.rtol:g}")
        worst = f"; worst at {list(self.worst_index)}" if self.worst_index is not None else ""
        if not self.finite:   # maxima over nothing: say so instead of "max abs 0"
            return ", ".join(parts) + f" (no element with finite values to measure an error on{worst}{skipped})"
        over = f" over the {self.finite} finite element(s)" if self.finite < self.total else ""
        return ", ".join(parts) + f" (max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}{over}{worst}{skipped})"


def shape_mismatch(actual_shape: tuple[int, ...], expected_shape: tuple[int, ...], atol: float,
                   rtol: float) -> TensorComparison:
    """The comparison of outputs whose shapes differ: nothing is judged."""
    return TensorComparison(int(np.prod(expected_shape)), 0, 0, 0, np.nan, np.nan, None, atol, rtol,
                            shape_problem=f"shape {list(actual_shape)} differs from expected "
                            f"{list(expected_shape)}")


@dataclass(frozen=True)
class Candidate:
    """A failing element that may be among the worst: its flat index, score and values."""

    flat: int
    score: float
    actual: float
    expected: float
    abs_err: float
    rel_err: float
    allowed: float                # atol + rtol*|expected| (0 for integer outputs): Element.allowed


@dataclass
class ChunkResult:
    mismatches: int
    nonfinite: int
    unwritten: int
    ignored: int
    finite: int                   # judged elements with finite actual and expected: what the maxima cover
    max_abs: float
    max_rel: float
    ranked: list[Candidate]       # failing elements with a score, at most ``top``
    unranked: list[Candidate]     # failing elements whose score is NaN, first ``top`` by index
    all_failed: bool


def passing_chunk(ignored: int, finite: int, max_abs: float, max_rel: float) -> ChunkResult:
    """A non-empty chunk in which no element failed."""
    return ChunkResult(0, 0, 0, ignored, finite, max_abs, max_rel, [], [], False)


@dataclass
class Tally:
    """Sums, maxima and worst-element candidates over the chunks of one output, added in index order."""

    top: int
    mismatches: int = 0
    nonfinite: int = 0
    unwritten: int = 0
    ignored: int = 0
    finite: int = 0
    max_abs: list[float] = field(default_factory=list)
    max_rel: list[float] = field(default_factory=list)
    ranked: list[Candidate] = field(default_factory=list)
    unranked: list[Candidate] = field(default_factory=list)
    all_failed: bool = True

    def add(self, chunk: ChunkResult) -> None:
        self.mismatches += chunk.mismatches
        self.nonfinite += chunk.nonfinite
        self.unwritten += chunk.unwritten
        self.ignored += chunk.ignored
        self.finite += chunk.finite
        self.max_abs.append(chunk.max_abs)     # np.max over these: a NaN propagates as over the whole
        self.max_rel.append(chunk.max_rel)
        if chunk.ranked:     # self.ranked is already best()'s answer
            self.ranked = best(self.ranked + chunk.ranked, self.top)
        self.unranked = (self.unranked + chunk.unranked)[:self.top]
        self.all_failed = self.all_failed and chunk.all_failed

    def worst(self) -> list[Candidate]:
        """Highest score first, ties by index; NaN scores rank below every passing element, so
        they are listed only when no element passed (the order one stable sort of -score gives)."""
        if self.all_failed:
            return (self.ranked + self.unranked)[:self.top]
        return self.ranked

    def comparison(self, shape: tuple[int, ...], size: int, atol: float, rtol: float, reference: Any,
                   integer: str | None) -> TensorComparison:
        """The output's comparison once every chunk was added; ``reference`` (numpy or a device
        array, or None) is indexed at the worst elements only."""
        total = size - self.ignored
        worst = []
        for c in self.worst():
            index = tuple(int(i) for i in np.unravel_index(c.flat, shape))
            worst.append(Element(index, c.actual, c.expected, _reference_at(reference, index), c.abs_err, c.rel_err,
                                 c.allowed))
        measured = total and self.finite     # no finite pair: no maximum (NaN), not 0
        return TensorComparison(
            total=total,
            mismatches=self.mismatches,
            nonfinite=self.nonfinite,
            unwritten=self.unwritten,
            max_abs=float(np.max(self.max_abs)) if measured else (np.nan if total else 0.0),
            max_rel=float(np.max(self.max_rel)) if measured else (np.nan if total else 0.0),
            worst_index=worst[0].index if worst else None,
            atol=atol,
            rtol=rtol,
            worst=worst,
            ignored=self.ignored,
            integer=integer,
            finite=self.finite,
        )


def best(candidates: list[Candidate], top: int) -> list[Candidate]:
    order = sorted(candidates, key=lambda c: (-c.score, c.flat))
    return order[:top]


def _reference_at(reference: Any, index: tuple[int, ...]) -> float | None:
    if reference is None:
        return None
    if isinstance(reference, np.generic) or not hasattr(reference, "shape"):
        reference = np.asarray(reference)      # a numpy scalar (a 0-d output's reference) cannot be indexed
    return float(reference[index])


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"
