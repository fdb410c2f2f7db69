"""Refuse to compare numbers that were measured differently.

A warm-cache median and a cold-cache median, or host-clock and device-event times,
differ for reasons that have nothing to do with the code under test; a verdict on
them would be wrong with high confidence. Iteration counts and stopping rules only
change how many samples there are, which the statistics already account for.
"""

from __future__ import annotations

from typing import Any

from hipdnn_trace.device.clock_lock import POLICIES

#: run.json ``timing`` fields that change what one sample measures (``clock_control`` is a
#: profiler's own, e.g. ncu's; ``--clocks`` policies are checked apart, below).
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


#: ``--clocks`` policies (device/clock_lock.py); runs from before the flag ran unlocked


def clock_policy(meta: dict[str, Any]) -> str:
    """The clock policy a run's numbers were taken under: run.json ``clocks.policy`` when the lock
    held, else ``off`` (a refused lock leaves the GPU boosting freely, as ``off`` does)."""
    clocks = meta.get("clocks") if isinstance(meta, dict) else None
    if isinstance(clocks, dict) and clocks.get("policy") in POLICIES:
        return str(clocks["policy"]) if clocks.get("state") == "locked" else "off"
    return "off"


def clock_difference(meta_a: dict[str, Any], meta_b: dict[str, Any]) -> str | None:
    """``clock policy: 'lock-max' vs 'off'`` when the runs' clocks were under different policies.

    Locked and boosting clocks move a large graph's median by more than most regressions, so
    such a pair is refused unless asked (``--allow-clock-mismatch``)."""
    a, b = clock_policy(meta_a), clock_policy(meta_b)
    if a == b:
        return None
    why = [f"{label} {(m.get('clocks') or {}).get('state')}" for label, m in (("A", meta_a), ("B", meta_b))
           if isinstance(m, dict) and isinstance(m.get("clocks"), dict)
           and str(m["clocks"].get("state", "")).startswith("unlocked")]
    return f"clock policy: {a!r} vs {b!r}" + (f" ({'; '.join(why)})" if why else "")
