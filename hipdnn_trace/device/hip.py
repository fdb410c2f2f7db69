"""HIP event timers over hipdnn_frontend's HIP bindings (both API generations).

The bindings expose HIP events in two generations (``hip_bindings.cpp`` in
ROCm/rocm-libraries ``projects/hipdnn/python/frontend_bindings/src``):

* **functions**: ``hip_event_create() -> event``, ``hip_event_record(event, stream)``,
  ``hip_event_synchronize(event)``, ``hip_event_elapsed_time(start, stop)``,
  ``hip_event_destroy(event)`` (older builds, next to an early ``HipEvent`` class);
* **class**: ``HipEvent()`` with ``.record(stream)``, ``.synchronize()``,
  ``.elapsed_time(stop)``, ``.destroy()`` (newest builds have only this).

Staged timing (``--timing staged``) holds the stream on a ``HipStallGate`` while one
execution is enqueued, so the start->stop span is device time with no host launch
gaps in it (the method of hipDNN's own dnn-benchmarking ``StalledRegionTimer``). The
gate also comes in generations: ``arm/release/destroy``; ``arm/release/timed_out``;
``arm/release/timed_out/close`` (+ context manager). Where there is no gate, or the
device cannot ``hipStreamWaitValue32``, the timer falls back to plain events and says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

CLASS_EVENTS, FUNCTION_EVENTS = "class", "functions"
_FUNCTIONS = ("hip_event_create", "hip_event_record", "hip_event_synchronize", "hip_event_elapsed_time")


def event_api_kind(module: Any) -> str | None:
    """Which HIP event API a hipdnn_frontend module has: "class", "functions" or None."""
    cls = getattr(module, "HipEvent", None)
    if cls is not None and all(hasattr(cls, m) for m in ("record", "synchronize", "elapsed_time")):
        return CLASS_EVENTS
    if all(hasattr(module, f) for f in _FUNCTIONS):
        return FUNCTION_EVENTS
    return None


def stall_gate_kind(module: Any) -> str | None:
    """Which HipStallGate generation exists: "close", "timed-out", "destroy" or None."""
    gate = getattr(module, "HipStallGate", None)
    if gate is None or not all(hasattr(gate, m) for m in ("arm", "release")):
        return None
    if hasattr(gate, "close"):
        return "close"
    if hasattr(gate, "timed_out"):
        return "timed-out"
    return "destroy"


class HipEvents:
    """One interface over both event generations."""

    def __init__(self, module: Any) -> None:
        kind = event_api_kind(module)
        if kind is None:
            raise RuntimeError("hipdnn_frontend has no HIP event bindings (HipEvent or hip_event_*)")
        self.module = module
        self.kind = kind

    def create(self) -> Any:
        return self.module.HipEvent() if self.kind == CLASS_EVENTS else self.module.hip_event_create()

    def record(self, event: Any, stream: int) -> None:
        if self.kind == CLASS_EVENTS:
            event.record(stream)
        else:
            self.module.hip_event_record(event, stream)

    def synchronize(self, event: Any) -> None:
        if self.kind == CLASS_EVENTS:
            event.synchronize()
        else:
            self.module.hip_event_synchronize(event)

    def elapsed_ms(self, start: Any, stop: Any) -> float:
        if self.kind == CLASS_EVENTS:
            ms = float(start.elapsed_time(stop))
        else:
            ms = float(self.module.hip_event_elapsed_time(start, stop))
        # Older bindings pass through what HIP reports, which can be garbage for an
        # event that never completed; newer ones raise. Refuse it either way.
        if not math.isfinite(ms) or ms < 0:
            raise RuntimeError(f"HIP event elapsed time is {ms} ms (event not completed in order)")
        return ms

    def destroy(self, event: Any) -> None:
        if self.kind == CLASS_EVENTS:
            destroy = getattr(event, "destroy", None)
            if destroy is not None:
                destroy()
        elif hasattr(self.module, "hip_event_destroy"):
            self.module.hip_event_destroy(event)


class HipEventTimer:
    """Start/stop events on the session's stream around one execution."""

    kind = "hip-event"
    method = "events"

    def __init__(self, events: HipEvents, stream: int = 0) -> None:
        self.events = events
        self.stream = int(stream)
        self._start = events.create()
        self._stop = events.create()

    def start(self) -> None:
        self.events.record(self._start, self.stream)

    def stop(self) -> None:
        self.events.record(self._stop, self.stream)

    def synchronize(self) -> None:
        self.events.synchronize(self._stop)

    def elapsed_ms(self) -> float:
        self.events.synchronize(self._stop)
        return self.events.elapsed_ms(self._start, self._stop)

    def abort(self) -> None:
        """Undo a start() whose execution failed (nothing to undo for plain events)."""

    def close(self) -> None:
        for event in (self._start, self._stop):
            try:
                self.events.destroy(event)
            except Exception:  # teardown must not hide the run's result
                pass


class StagedHipTimer(HipEventTimer):
    """Events behind a stall gate: arm, start event, enqueue, stop event, release.

    The stream waits on the gate while the host enqueues, so the event span holds only
    device work. The harness synchronizes after every iteration, which retires the
    gate's wait packet before the next arm (the binding's documented precondition).
    """

    method = "staged"

    def __init__(self, events: HipEvents, gate: Any, stream: int = 0,
                 device_synchronize: Callable[[], None] | None = None) -> None:
        super().__init__(events, stream)
        self.gate = gate
        self._device_synchronize = device_synchronize
        self._armed = False
        self._drained = False
        self.timeouts = 0
        self.staged = True   # switched off by the loop for its unstaged latency block

    def start(self) -> None:
        if not self.staged:   # the loop's latency side block: plain events, no hold
            super().start()
            return
        if not self._drained and self._device_synchronize is not None:
            self._device_synchronize()      # arm a clean stream the first time
        self._drained = True
        self.gate.arm(self.stream)
        self._armed = True
        self.events.record(self._start, self.stream)

    def stop(self) -> None:
        self.events.record(self._stop, self.stream)
        if self._armed:
            self.gate.release()
            self._armed = False

    def elapsed_ms(self) -> float:
        ms = super().elapsed_ms()
        timed_out = getattr(self.gate, "timed_out", None)
        if callable(timed_out) and timed_out():
            self.timeouts += 1   # the watchdog, not release(), ended the stall: host time leaked in
        return ms

    def abort(self) -> None:
        if self._armed:
            self.gate.release()
            self._armed = False
            if self._device_synchronize is not None:
                try:
                    self._device_synchronize()
                except Exception:  # the execution error is what matters
                    pass

    def close(self) -> None:
        self.abort()
        for name in ("close", "destroy"):
            teardown = getattr(self.gate, name, None)
            if callable(teardown):
                try:
                    teardown()
                except Exception:
                    pass
                break
        super().close()


class TimedExecuteTimer(HipEventTimer):
    """hipDNN's own timed execution (``Graph.execute_timed_ext``, ROCm/rocm-libraries PR #11813).

    While ``staged`` is on, the session's execute() runs the plan once through
    ``execute_timed_ext`` (it arms hipDNN's stall gate, records the events, waits) and hands the
    returned ``ExecutionTiming`` to :meth:`record`: ``elapsed_ms`` is the reading, ``quality``
    says whether the gate held (DEVICE_ONLY) or plain events were used (UNSTALLED). With
    ``staged`` off (the loop's latency side block) the inherited plain events time an ordinary
    execute.
    """

    kind = "hipdnn-timed-execute"
    method = "timed-execute"

    def __init__(self, events: HipEvents, stream: int = 0) -> None:
        super().__init__(events, stream)
        self.staged = True
        self._pending = False
        self._elapsed: float | None = None
        self.qualities: dict[str, int] = {}
        self.timeouts = 0

    def start(self) -> None:
        if self.staged:
            self._pending, self._elapsed = True, None
        else:
            super().start()

    def stop(self) -> None:
        if not self.staged:
            super().stop()

    def take(self) -> bool:
        """True once per start() while staged: this execute goes through execute_timed_ext."""
        pending, self._pending = self._pending, False
        return pending

    def record(self, timing: Any) -> None:
        """Keep one ``ExecutionTiming`` (counts its quality and watchdog releases for run.json)."""
        quality = str(getattr(timing, "quality", "unknown")).rsplit(".", 1)[-1]
        self.qualities[quality] = self.qualities.get(quality, 0) + 1
        if getattr(timing, "timed_out", False):
            self.timeouts += 1   # the watchdog ended the stall: host time leaked into this reading
        value = getattr(timing, "elapsed_ms", None)
        self._elapsed = None if value is None else float(value)

    def elapsed_ms(self) -> float:
        if not self.staged:
            return super().elapsed_ms()
        if self._elapsed is None:
            raise RuntimeError("hipDNN's timed execute returned no time (quality INVALID)")
        return self._elapsed

    def abort(self) -> None:
        self._pending = False


def open_stall_gate(module: Any) -> tuple[Any | None, str]:
    """(gate, "") when staged timing can work here, else (None, why not)."""
    if stall_gate_kind(module) is None:
        return None, "this hipdnn_frontend has no HipStallGate"
    can_wait = getattr(module, "hip_can_use_stream_wait_value", None)
    if can_wait is not None:
        try:
            if not can_wait():
                return None, "the device cannot hipStreamWaitValue32"
        except Exception as exc:
            return None, f"hip_can_use_stream_wait_value failed: {exc}"
    try:
        return module.HipStallGate(), ""
    except Exception as exc:  # the constructor raises when unsupported
        return None, f"HipStallGate could not be created: {' '.join(str(exc).split())}"


def make_hip_timer(module: Any, stream: int = 0, staged: bool = False,
                   timed_execute: bool = False) -> tuple[HipEventTimer, dict[str, Any]]:
    """The timer a session uses and what run.json should say about it: hipDNN's timed execute
    where the graph has one (``timed_execute``), else events behind the bindings' stall gate,
    else plain events."""
    events = HipEvents(module)
    info: dict[str, Any] = {"timer": HipEventTimer.kind, "hip_event_api": events.kind, "staged": False}
    if staged and timed_execute:
        info.update(timer=TimedExecuteTimer.kind, staged=True)
        return TimedExecuteTimer(events, stream), info
    if staged:
        gate, reason = open_stall_gate(module)
        if gate is not None:
            info["staged"] = True
            info["stall_gate"] = stall_gate_kind(module)
            return StagedHipTimer(events, gate, stream, getattr(module, "hip_device_synchronize", None)), info
        info["staged_fallback"] = f"plain events: {reason}"
    return HipEventTimer(events, stream), info
