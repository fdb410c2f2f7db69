"""Refuse to compare numbers that were measured differently.

A warm-cache median and a cold-cache median, or host-clock and device-event times,
differ for reasons that have nothing to do with the code under test; a verdict on
them would be wrong with high confidence. Iteration counts and stopping rules only
change how many samples there are, which the statistics already account for.
"""

from __future__ import annotations

from typing import Any

#: run.json ``timing`` fields that change what one sample measures.
METHOD_FIELDS = {
    "timer": "timer",
    "cache": "cache mode",
    "clock_control": "clock control",
    "cuda_graph": "CUDA graph replay",
    "staged": "staged timing",
}


def method_differences(meta_a: dict[str, Any], meta_b: dict[str, Any]) -> list[str]:
    """One phrase per timing-method field that differs, e.g. ``cache mode: warm vs cold``.

    A run without run.json (a bare iterations.parquet) has no timing block; that is
    reported as a difference too, since nothing says the methods agree.
    """
    timing_a = meta_a.get("timing") if isinstance(meta_a, dict) else None
    timing_b = meta_b.get("timing") if isinstance(meta_b, dict) else None
    if not isinstance(timing_a, dict) or not isinstance(timing_b, dict):
        missing = "A" if not isinstance(timing_a, dict) else "B"
        return [f"timing method unknown for run {missing} (no run.json timing block)"]
    return [
        f"{label}: {timing_a.get(field)!r} vs {timing_b.get(field)!r}"
        for field, label in METHOD_FIELDS.items()
        if timing_a.get(field) != timing_b.get(field)
    ]


def run_status_notes(meta: dict[str, Any], label: str) -> list[str]:
    """A warning for a run that did not finish (its suite may be partial)."""
    status = meta.get("status") if isinstance(meta, dict) else None
    if status in (None, "complete"):
        return []
    return [f"run {label} is {status!r}: its suite may be incomplete"]
