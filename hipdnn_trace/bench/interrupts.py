"""SIGINT and SIGTERM during a suite: stop at a safe point and leave complete files.

Python turns SIGINT into KeyboardInterrupt wherever the main thread happens to be,
and SIGTERM (what Slurm and ``kill`` send) ends the process without running any
``finally``. Inside :class:`InterruptGuard` both raise :class:`Interrupted` instead,
except while a :meth:`~InterruptGuard.protect` block runs (writing one graph's
results; opening the run folder and starting the suite): there the signal waits until the block is
done. The run command then marks run.json ``interrupted`` and exits 128 + the signal number (130, 143).
Outside a guard, the command line's own handler (``cli.run_and_exit``) turns both into one line and
the same exit codes, from the process's first moments until the command returns.
SIGKILL cannot be caught; atomic writes and trace repair cover it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType, TracebackType

SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: signals the command line's own handler (``cli.run_and_exit``) raised outside a guard. A library can turn the
#: exception into one of its own (a C extension's import gives "ImportError: PyCapsule_Import could not import
#: module", which an optional import then swallows), so the signal is kept here too: a guard opened later
#: raises it, and the command line reports it instead of the error it became.
RECEIVED: list[int] = []


class Interrupted(BaseException):
    """A suite stopped by a signal (a BaseException, so ``except Exception`` in a
    backend's error handling cannot swallow it)."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        super().__init__(signal.Signals(self.signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class InterruptGuard:
    """Context manager: SIGINT/SIGTERM -> :class:`Interrupted`, deferred inside :meth:`protect`.

    Does nothing outside the main thread (only it may install signal handlers).
    """

    def __init__(self) -> None:
        self._depth = 0
        self._pending: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
            if RECEIVED:   # one that came before the guard and was lost in a library: raised at raise_pending
                self._pending = RECEIVED[-1]
                RECEIVED.clear()   # this guard's now: the suite reports it
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)   # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._depth:
            self._pending = self._pending or signum
            return
        raise Interrupted(signum)

    @property
    def pending(self) -> int | None:
        """A signal that arrived during a protected block and was not raised."""
        return self._pending

    def raise_pending(self) -> None:
        """Raise the signal a ``protect(raise_pending=False)`` block deferred, now that it can be handled."""
        if self._pending is not None and not self._depth:
            signum, self._pending = self._pending, None
            raise Interrupted(signum)

    @contextlib.contextmanager
    def protect(self, *, raise_pending: bool = True) -> Iterator[None]:
        """Run the block whole; a signal that arrives meanwhile is raised at its end."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if raise_pending:
            self.raise_pending()
