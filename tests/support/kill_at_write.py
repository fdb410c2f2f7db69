"""SIGKILL ``hipdnn-trace run`` at every write step into its run folder, one child process per step.

Usage: ``python kill_at_write.py OUT [--only K,..] -- run ARGS...`` (ARGS without --out/--run-id).

A write step is one of: an atomic write's temp file complete but not yet renamed
(``before:NAME``), renamed into place (``after:NAME``), half of a trace flush on disk
(``torn:trace``) or a whole flush on disk (``flushed:trace``). This process imports the harness
once, then forks a child that runs the command into OUT/whole with nothing killed and records
the steps it took, then for each step K a child that runs it into OUT/kK and kills itself with
SIGKILL at step K (nothing runs after it: no finally, no atexit, no flush of a buffered write).
Prints ``{"steps": [...], "killed": [K, ...]}`` (the steps whose child died by SIGKILL).

The injection wraps ``os.replace`` and the trace writer's file writes in the children only; the
code under test is unchanged. Forking after the imports saves each child ~1 s of imports; the
parent runs no graph and starts no thread pool before forking.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path


def _child(kill_at: int, folder: Path, args: list[str], steps_file: Path | None) -> None:
    """Run ``args`` into ``folder``, SIGKILLing this process at step ``kill_at``; never returns."""
    steps: list[str] = []

    def step(label: str) -> None:
        if len(steps) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        steps.append(label)

    real_replace = os.replace

    def replace(src, dst, *a, **kw):
        target = Path(dst)
        mine = target.resolve().parent == folder
        if mine:
            step(f"before:{target.name}")
        real_replace(src, dst, *a, **kw)
        if mine:
            step(f"after:{target.name}")

    os.replace = replace
    from hipdnn_trace.trace import writer as trace_writer

    real_open = open

    class Watched:
        def __init__(self, fh):
            self._fh = fh

        def write(self, data):
            if len(steps) == kill_at:   # this flush is the step: half of it reaches the disk first
                self._fh.write(bytes(data[: len(data) // 2]))
            step("torn:trace")
            written = self._fh.write(data)
            step("flushed:trace")
            return written

        def __getattr__(self, name):
            return getattr(self._fh, name)

    trace_writer.open = lambda *a, **kw: Watched(real_open(*a, **kw))
    from hipdnn_trace.cli import main as cli_main

    try:
        code = cli_main([*args, "--out", str(folder.parent), "--run-id", folder.name])
        if steps_file is not None:
            steps_file.write_text(json.dumps(steps))
    except BaseException:
        code = 99
    sys.stdout.flush()
    os._exit(code)


def _fork(kill_at: int, folder: Path, args: list[str], steps_file: Path | None = None) -> int:
    """The child's wait status."""
    pid = os.fork()
    if pid == 0:
        _child(kill_at, folder, args, steps_file)
    return os.waitpid(pid, 0)[1]


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    args = sys.argv[sys.argv.index("--") + 1:]
    only = None
    if "--only" in sys.argv[: sys.argv.index("--")]:
        only = {int(k) for k in sys.argv[sys.argv.index("--only") + 1].split(",")}
    import hipdnn_trace.cli  # noqa: F401  (imported once, before forking)
    import hipdnn_trace.commands.run  # noqa: F401
    import hipdnn_trace.results.rundir  # noqa: F401

    out.mkdir(parents=True, exist_ok=True)
    steps_file = out / "steps.json"
    status = _fork(-1, out / "whole", args, steps_file)
    if not steps_file.exists():
        print(json.dumps({"error": f"the uninterrupted run failed (wait status {status})"}))
        return 1
    steps = json.loads(steps_file.read_text())
    killed = []
    for k in range(len(steps)):
        if only is not None and k not in only:
            continue
        status = _fork(k, out / f"k{k}", args)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            killed.append(k)
    print(json.dumps({"steps": steps, "killed": killed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
