"""A timer whose readings are set in advance (loop tests): stopping rules and throttle flags see exact
numbers, not a clock that a busy machine can stretch."""

from __future__ import annotations


class ScriptedTimer:
    """Each ``stop`` takes the next of ``readings_ms``; ``elapsed_ms`` returns it."""

    kind = "scripted"

    def __init__(self, readings_ms: list[float]) -> None:
        self._readings = iter(readings_ms)
        self._last = 0.0

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self._last = next(self._readings)

    def elapsed_ms(self) -> float:
        return self._last
