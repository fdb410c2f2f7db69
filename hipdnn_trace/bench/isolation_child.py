"""What runs inside an isolated child (bench/isolation.py is the parent that starts and watches it): the
job types the parent pickles, the child's entry points for the fork server (``child_main`` for one graph,
``resident_main`` for a child that runs graph after graph), running a job and sending its record back over
the status pipe, and what a resident child frees between graphs. The split follows the process boundary:
nothing here runs in the parent, nothing in isolation.py runs in a child."""

from __future__ import annotations

import faulthandler
import os
import pickle
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

from hipdnn_trace import backends
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.loop import Phase
from hipdnn_trace.bench.records import RELEASE_PHASE, GraphRun
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.errors import describe
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import select as select_markers

#: At most one iteration report per this many seconds (the pipe is not a profiler).
ITERATION_REPORT_S = 0.2


@dataclass
class _Job:
    """Everything a child needs (pickled): the graph source, which the child reads itself,
    so a read that hangs (a hung network file system) is under the child's timeout."""

    source: GraphSource
    configs: list[Config]
    settings: RunSettings
    markers_kind: str
    vendor: str | None
    registry: dict[str, str]           # backends the configs use (tests and plugins register their own)


@dataclass
class _Warm:
    """A resident child's first job when the runner is warmed: set up the process (device context,
    libraries) before any graph, so the first graph's wall is the graph's (bench/warm.py)."""

    configs: list[Config]
    settings: RunSettings
    registry: dict[str, str]


#: Developers' switch: a folder where each isolated child writes a cProfile of its life
#: (``child-<pid>.prof``), to find what the harness itself costs inside children.
PROFILE_CHILDREN_VARIABLE = "HIPDNN_TRACE_PROFILE_CHILDREN"


def _profiled(main: Callable[[bytes, list[int]], int]) -> Callable[[bytes, list[int]], int]:
    """``main`` under cProfile when PROFILE_CHILDREN_VARIABLE names a folder, else ``main`` itself."""
    def run(payload: bytes, fds: list[int]) -> int:
        folder = os.environ.get(PROFILE_CHILDREN_VARIABLE)
        if not folder:
            return main(payload, fds)
        import cProfile

        profile = cProfile.Profile()
        try:
            return profile.runcall(main, payload, fds)
        finally:
            profile.dump_stats(os.path.join(folder, f"child-{os.getpid()}.prof"))
    return run


@_profiled
def child_main(payload: bytes, fds: list[int]) -> int:
    """Entry point of the child (called by the fork server): run the graph, send the record."""
    status_fd, output_fd = fds
    status = _child_setup(status_fd, output_fd)
    return run_job(payload, status)


@_profiled
def resident_main(payload: bytes, fds: list[int]) -> int:
    """Entry point of a resident child: run graph after graph, each job read from the job pipe,
    until the pipe closes (0) or a job fails to send its record (1: its state is suspect)."""
    status_fd, output_fd, jobs_fd = fds
    status = _child_setup(status_fd, output_fd)
    jobs = Connection(jobs_fd, writable=False)
    released: Phase | None = None
    while True:
        if run_job(payload, status, released) != 0:
            return 1
        began = now_ns()
        _release_device_caches()
        released = Phase(RELEASE_PHASE, began, now_ns())   # the next graph's job may wait for it
        try:
            payload = jobs.recv_bytes()
        except (EOFError, OSError):
            return 0


def _release_device_caches() -> None:
    """Between two graphs in one child: memory a framework keeps cached goes back to the device,
    so the next graph (maybe another backend) finds what a fresh process would.

    A full ``gc.collect()`` walks every object: with torch and cuDNN loaded that took 100-230 ms
    (measured with HIPDNN_TRACE_PROFILE_CHILDREN on an H200: 107 ms after each graph), paid by the
    next graph's wall (its job waited for it). Whatever survives a collection (modules imported on
    first use, backends' caches, the last graph's long-lived objects) is frozen out of later
    collections (``gc.freeze`` after every one), so each walks only what one graph made; a
    resident child retires when its resident set has grown by RETIRE_GROWTH_BYTES (or after
    MAX_JOBS_PER_CHILD graphs), which bounds what freezing keeps."""
    import gc

    gc.collect()
    gc.freeze()
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        except Exception:  # best effort
            pass


def _child_setup(status_fd: int, output_fd: int) -> Connection:
    """Output to the parent's pipe, faulthandler on; the status connection."""
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    faulthandler.enable()   # a crash prints the Python stack into the output tail
    return Connection(status_fd, readable=False)


def run_job(payload: bytes, status: Connection, released: Phase | None = None) -> int:
    """Run one pickled job and send its record over ``status``; 0 when a record was sent. ``released``:
    this child freeing the previous graph's memory, which the job may have waited for (breakdown's
    ``t_release_ms``)."""
    def send(kind: str, value: Any) -> None:
        try:
            status.send((kind, value))
        except OSError:
            os._exit(1)   # the parent is gone

    last = [0.0]

    def on_iteration(i: int) -> None:
        now = time.monotonic()
        if now - last[0] >= ITERATION_REPORT_S:
            last[0] = now
            send("iter", i)

    if payload[:1] == b"W":
        return _warm_job(payload[1:], status)
    send("phase", "read")
    try:
        job: _Job = pickle.loads(payload)
        backends.REGISTRY.update(job.registry)
        markers = select_markers(job.markers_kind, vendor=job.vendor)
        reader = job.source.read

        def read() -> bytes:
            data = reader()
            # the parent keeps the bytes: if this child dies later, its rows still name the graph
            send("read", data)
            send("phase", "load")
            return data

        source = replace(job.source, read=read)
        run = run_graph(source, job.configs, job.settings, markers, on_iteration=on_iteration,
                        on_stage=lambda stage: send("phase", stage))
        if not job.settings.keep_outputs:
            run.drop_arrays()
        if released is not None:
            run.phases.insert(0, released)
        send("phase", "send result")
        status.send_bytes(b"R" + _pickle_run(run))
        return 0
    except MemoryError as exc:
        send("failed", f"out of memory ({describe(exc)})")
    except Exception as exc:   # reported, with its traceback in the output tail
        import traceback

        traceback.print_exc()
        send("failed", describe(exc))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 1


def _warm_job(payload: bytes, status: Connection) -> int:
    """Run a :class:`_Warm` job; its answer is ``W`` + (the seconds each part took, the backends'
    versions as loaded)."""
    from hipdnn_trace.bench.warm import loaded_versions, warm_process

    try:
        job: _Warm = pickle.loads(payload)
        backends.REGISTRY.update(job.registry)
        spent = warm_process(job.configs, job.settings)
        answer = (spent, loaded_versions(job.configs))
        status.send_bytes(b"W" + pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        return 0
    except OSError:
        os._exit(1)   # the parent is gone
    except Exception:
        import traceback

        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _pickle_run(run: GraphRun) -> bytes:
    try:
        return pickle.dumps(run, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        for c in run.configs:   # an exotic object in session info: keep its text
            c.info = {k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)
                      for k, v in c.info.items()}
        return pickle.dumps(run, protocol=pickle.HIGHEST_PROTOCOL)


