"""``measure``: run a planned suite and record it (the run folder, through results/).

Everything here was decided by ``plan.plan_run``; this holds the clocks, the interrupt guard, the run
writer, the runner (in process, isolated, split, or a worker per GPU) and the console, and turns how
the suite ended into the exit code. ``execute`` is the whole of ``run``: plan, then measure (or the
external profiler's child, or the engine listing).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from hipdnn_trace import backends
from hipdnn_trace.bench import gpus as gpu_pool
from hipdnn_trace.bench.forkserver import ForkServer
from hipdnn_trace.bench.interrupts import Interrupted, InterruptGuard
from hipdnn_trace.bench.isolation import DEFAULT_TIMEOUT_S, IsolatedRunner
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.records import FAILED, OK, GraphRun
from hipdnn_trace.bench.split import SplitRunner
from hipdnn_trace.bench.stats import THROTTLE_RECOVERY_S
from hipdnn_trace.bench.suite import SuiteCallbacks, SuiteOutcome, exit_code_for, run_suite
from hipdnn_trace.console import Progress, Reporter, escape
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.device.clock_lock import ClockLock, reference_clock
from hipdnn_trace.errors import UserError
from hipdnn_trace.results.oracle import summary_lines as oracle_lines
from hipdnn_trace.results.run_record import Profile
from hipdnn_trace.results.rundir import RunWriter, clear_stranded
from hipdnn_trace.results.runlock import releasing
from hipdnn_trace.runs import plan_builders
from hipdnn_trace.runs.estimates import estimate_note
from hipdnn_trace.runs.phases import PhaseClock
from hipdnn_trace.runs.plan import EngineListing, ExternalProfile, RunPlan, clock_samplers, plan_run
from hipdnn_trace.runs.request import RunRequest

#: A graph that finishes within this long of the last commit (or before the writing's share is due, below) is
#: committed with the next ones: each commit rewrites the run's tables, so committing every graph made a
#: suite of N fast graphs cost O(N^2) in writes (2,000 never-loading graphs: 190 ms a graph on the 2-core
#: box). A kill loses at most these uncommitted graphs, which --resume runs again. The variable
#: HIPDNN_TRACE_COMMIT_EVERY_S sets it (0: a commit per graph, as the commit-order test needs).
COMMIT_EVERY_S = float(os.environ.get("HIPDNN_TRACE_COMMIT_EVERY_S", "0.5"))
#: at most this share of the suite's time goes to commits: the next one is due once the time since the last
#: is the last one's duration / WRITE_SHARE (a 25 ms commit: every 1.25 s). At twice a commit's duration, as
#: before issue 36's second round, writing was 4.7-5.3% of a warm graphs/perf run on an H100.
WRITE_SHARE = 0.02


def commit_due(since_last_s: float, last_commit_s: float) -> bool:
    """Whether the graphs noted since the last commit are committed now."""
    return COMMIT_EVERY_S <= 0 or since_last_s >= max(COMMIT_EVERY_S, last_commit_s / WRITE_SHARE)

#: how often the progress line redraws on its own (a graph may spend minutes in one numpy call)
PROGRESS_TICK_S = 1.0


@dataclass(frozen=True)
class Finished:
    """How a run ended: its folder (None when it made none: --engine list) and its exit code."""

    folder: Path | None
    exit_code: int


@releasing
def execute(request: RunRequest) -> Finished:
    """The whole of ``run``: plan (refusals first), then measure and record."""
    clock = PhaseClock()
    clock.mark("before_plan")
    plan = plan_run(request)
    clock.mark("plan")
    if isinstance(plan, ExternalProfile):
        from hipdnn_trace.profilers.external import run_external

        code = run_external(plan.profiler, request, list(request.argv))
        folder = request.out / request.run_id if request.run_id else None
        _explain_pairs(request, folder)
        return _into_store(request, Finished(folder, code))
    if isinstance(plan, EngineListing):
        return Finished(None, list_engines(plan))
    return _into_store(request, Finished(plan.folder, measure(plan, clock)))


def _explain_pairs(request: RunRequest, folder: Path | None) -> None:
    """``run --oracle`` or an A/B under a counter profiler: why the tuned plan (or B) differs, kernel by kernel
    (compare/why.py), printed when the counters are in; ``compare RUN --why`` prints it again."""
    if request.quiet or folder is None or not (request.oracle or request.a) or not (folder / "run.json").is_file():
        return
    from hipdnn_trace.compare.why_sections import one_run
    from hipdnn_trace.results.rundir import load_run

    try:
        text, found = one_run(load_run(folder), 0.05)
    except UserError as exc:
        print(f"hipdnn-trace run: warning: no kernel-level explanation: {exc}", file=sys.stderr)
        return
    if found:
        print("\n".join(escape(line) for line in text.split("\n")), end="")


def _into_store(request: RunRequest, finished: Finished) -> Finished:
    """``--db``: the finished run into the results store. A failed import leaves the run as it is (its
    folder is complete; ``hipdnn-trace db import`` can be run again) and is said on stderr."""
    if not request.db or request.profile_child or finished.folder is None or \
            not (finished.folder / "summary.csv").is_file():
        return finished
    from hipdnn_trace.history.importer import import_into

    try:
        note = import_into(request.db, finished.folder)
    except UserError as exc:
        print(f"hipdnn-trace run: warning: --db: the run is recorded in {finished.folder} but not imported: {exc}",
              file=sys.stderr)
        return finished
    if not request.quiet:
        print(note)
    return finished


def measure(plan: RunPlan, clock: PhaseClock | None = None) -> int:
    """Run the plan's suite with the clocks held as asked; the exit code (``clock``: the phases so far)."""
    request = plan.request
    if plan.stranded:
        clear_stranded(plan.folder)
    record = plan.record
    with InterruptGuard() as guard, ClockLock(request.clocks, plan.vendor, request.device,
                                              run_dir=str(plan.folder)) as clocks:
        guard.raise_pending()   # a signal during planning that a library swallowed: stop before the folder exists
        plan.settings.loop = throttle_rule(plan.settings.loop, clocks, record.gpu)
        record.clocks = clocks.record()
        # a signal while the folder opens (a resume rewrites run.json "running" first) or the suite starts
        # waits until the suite can end as interrupted: run.json never stays "running" after it
        with guard.protect(raise_pending=False):
            exclusive = request.resume is None and not request.profile_child   # mkdir: one run per folder
            writer = RunWriter(plan.folder, record, formats=request.format, trace=request.trace,
                               resume=plan.resuming, exclusive=exclusive)
            if plan.gpus is not None:   # graphs finish out of order: the tables stay in suite order
                writer.suite_order = {name: i for i, name in enumerate(record.graphs)}
            suite = _Suite(plan, writer, guard, clocks, clock or PhaseClock())
        return suite.run()


def _successors(pool: gpu_pool.GpuPool) -> dict[str, list[float]] | None:
    """run.json's ``gpus.successor_warm_up_s``: per GPU, each replaced worker child's set-up between graphs."""
    spent = {str(w.gpu): list(getattr(w.runner, "successor_warm_ups", [])) for w in pool.workers}
    return {gpu: s for gpu, s in spent.items() if s} or None


def throttle_rule(loop: LoopSettings, clocks: ClockLock, gpu: dict[str, Any] | None) -> LoopSettings:
    """The loop's reference clock once the lock held or not, and run.json's ``clocks.throttle``."""
    mhz, what = reference_clock(clocks.record(), gpu)
    clocks.info["throttle"] = {"threshold": loop.throttle_threshold, "reference_mhz": mhz, "reference": what,
                               "recovery_s": THROTTLE_RECOVERY_S, "keep": loop.keep_throttled}
    return replace(loop, clock_reference_mhz=mhz)


def notes(plan: RunPlan) -> list[str]:
    """What the header says before the first graph: what was left out, where graphs run, the estimate."""
    request = plan.request
    out = [f"skipped {plan.skipped_perf} graph(s) in folders named 'perf' (GPU-sized) on the CPU reference; "
           "--include-perf runs them"] if plan.skipped_perf else []
    if plan.shard is not None:
        out.append(f"shard {request.shard}: {len(plan.record.graphs)} of the suite's {plan.suite_size} graph(s)")
    if plan.resuming:
        out.append(f"resuming {plan.folder}: {plan.done} graph(s) already recorded, {len(plan.sources)} to run")
    if plan.gpus is not None:
        out.append(f"{len(plan.gpus.pins)} GPU worker(s), longest graphs first: "
                   + ", ".join(f"{plan.gpus.variable}={p.visible}" for p in plan.gpus.pins))
    if plan.timeout is not None:
        out.append("each graph runs in a child process"
                   + (f" (killed after {plan.timeout:g} s)" if plan.timeout else ""))
    note = None if plan.estimates is None else estimate_note(plan.estimates)
    if note is not None:
        out.append(note)
    return out


class _Suite:
    """One suite's run: the runner, the callbacks after each graph, how it ended."""

    def __init__(self, plan: RunPlan, writer: RunWriter, guard: InterruptGuard, clocks: ClockLock,
                 phases: PhaseClock) -> None:
        request = plan.request
        self.plan, self.writer, self.guard, self.clocks, self.phases = plan, writer, guard, clocks, phases
        sources, configs = plan.sources, plan.configs
        self.reporter = Reporter(verbose=request.verbose, quiet=request.quiet, suite=len(sources) > 1,
                                 name_width=max((len(Path(s.name).stem) for s in sources), default=0),
                                 config_width=max((len(c.name) for c in configs), default=0))
        self.progress = _progress(plan)
        self.reporter.header(configs=[c.name for c in configs], graphs=len(sources), warmup=request.warmup,
                             iters=request.iters, folder=str(writer.folder), notes=notes(plan))
        self.builders = plan_builders.start(plan)   # cuDNN plans the cache lacks, built beside the set-up
        self.runner, self.pool = self._runner()
        ForkServer.discard_early()   # servers started for what the plan did not choose (bench/early.py)
        self._pending: list[tuple[int, GraphRun]] = []   # noted, not yet committed (after)
        self._last_commit, self._commit_s = time.monotonic(), 0.0

    def _runner(self) -> tuple[object | None, gpu_pool.GpuPool | None]:
        """(the suite's runner: None in process, the isolated, split or per-GPU one; the GPU pool)."""
        plan, request = self.plan, self.plan.request
        resident = not request.fresh_child
        runner = IsolatedRunner(plan.timeout, resident=resident) if plan.timeout is not None else None
        split = plan.split is not None
        if split:   # e.g. two hipDNN plugin builds: one process each
            runner = SplitRunner(runner or IsolatedRunner(DEFAULT_TIMEOUT_S, resident=resident))
        if plan.gpus is None:
            if isinstance(runner, IsolatedRunner) and plan.sources:
                runner.start_server(plan.configs, plan.settings)   # imports while the header prints
            return runner, None
        pool = _pool(plan, split)
        return pool, pool

    def after(self, index: int, g: GraphRun) -> None:
        """A finished graph (one process or an isolated child): noted now, committed with the graphs
        that finish before the next commit is due (:func:`commit_due`), printed when committed."""
        with self.guard.protect():
            self._note(g)
        g.ready_ns = g.ready_ns or now_ns()   # from here until its commit, the breakdown's t_queue_ms
        self._pending.append((index, g))
        if commit_due(time.monotonic() - self._last_commit, self._commit_s):
            self.commit_pending()

    def commit_pending(self) -> None:
        """Commit the graphs noted since the last commit (the suite's end and an interrupt call it too)."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        started, at = time.monotonic(), now_ns()
        for _, g in batch:
            g.queue_ms = max(0, at - (g.ready_ns or at)) / 1e6
        self._write(batch)
        self._last_commit = time.monotonic()
        self._commit_s = self._last_commit - started

    def after_batch(self, batch: list[tuple[int, GraphRun]]) -> None:
        """--gpus: the graphs that waited for the writer together, noted and committed at once."""
        with self.guard.protect():
            for _, g in batch:
                self._note(g)
        self._write(batch)

    def _write(self, batch: list[tuple[int, GraphRun]]) -> None:
        """One commit of ``batch`` (where each ran, run.json, the tables, the trace), then its lines."""
        record, pool = self.writer.record, self.pool
        with self.guard.protect():
            self.progress.clear()
            lanes = []
            for _, g in batch:
                handout = pool.handouts.get(g.source) if pool is not None else None
                lanes.append(None if handout is None else handout.gpu)
                if handout is not None:
                    record.add_handout(g.source, handout)
                    record.gpus.warm_up_s = {str(gpu): spent for gpu, spent in pool.warm_ups.items()}
                    record.gpus.successor_warm_up_s = _successors(pool)
            if isinstance(self.runner, IsolatedRunner | SplitRunner) and self.runner.successor_warm_ups:
                record.isolation.successor_warm_up_s = list(self.runner.successor_warm_ups)
            for runner in [w.runner for w in pool.workers] if pool is not None else [self.runner]:
                record.versions.update(getattr(runner, "versions", None) or {})   # as the children loaded them
            if pool is not None:   # where each graph ran survives a kill too (one small atomic write), written
                with contextlib.suppress(OSError):   # before its rows: a kill between the two re-runs the graph
                    self.writer.write_record()
            self.writer.add_graphs([(g, lane) for (_, g), lane in zip(batch, lanes)])
            for index, g in batch:
                self.reporter.graph(index, len(self.plan.sources), g)
                if self.plan.settings.ab:
                    line = ab_line(g)
                    if line:
                        self.reporter.ab(line)

    def _note(self, g: GraphRun) -> None:
        """What run.json keeps of a finished graph: the profilers' blocks, sessions, reference, tensors."""
        record = self.writer.record
        for hook in self.plan.settings.hooks:
            finish = getattr(hook, "finish_graph", None)
            if finish is not None:
                finish(g)
            details = getattr(hook, "profile", None)
            details = details() if callable(details) else None   # an in-process profiler's block so far
            if details:
                record.profile = Profile.of(hook.name, details)
        record.add_sessions(g)
        record.add_reference(g)
        if g.saved_tensors is not None:   # --save-tensors: the bundle, or why it is missing
            record.saved_tensors = {**(record.saved_tensors or {}), g.name: g.saved_tensors}
        if g.golden is not None:          # an integration-test bundle: its golden data, support claims, disagreements
            record.bundles = {**(record.bundles or {}), g.source: {"graph": g.name, "golden": g.golden,
                                                                   "notes": list(g.bundle_notes)}}

    def _suite(self) -> SuiteOutcome:
        plan, progress = self.plan, self.progress
        before = (lambda i, s: progress.graph(i - 1, Path(s.name).stem))
        if isinstance(self.runner, IsolatedRunner | SplitRunner) and plan.sources:   # children set up before graph 1
            self.writer.record.isolation.warm_up_s = self.runner.warm(plan.configs, plan.settings)
            started = getattr(getattr(self.runner, "server", None), "started_at", None)
            if started is not None:
                self.writer.record.isolation.server_started_s = self.phases.since_start(started)
        self.phases.mark("set_up")
        if self.pool is not None:   # progress per iteration means nothing with several GPUs at once
            order = [gpu_pool.estimate_s(s, allow_unknown=plan.request.allow_unknown_fields) for s in plan.sources]
            return self.pool.run_suite(plan.sources, plan.configs, plan.settings, plan.timing.markers,
                                       SuiteCallbacks(before_graph=before, after_graph=self.after,
                                                      after_graphs=self.after_batch), order)
        builders = self.builders   # a graph waits only for its own plan (runs/plan_builders.py)
        outcome = run_suite(plan.sources, plan.configs, plan.settings, plan.timing.markers, SuiteCallbacks(
            before_graph=before, after_graph=self.after, on_iteration=progress.iteration, on_stage=progress.stage,
            before_start=None if builders is None else (lambda i: builders.ready(i - 1))), runner=self.runner)
        if builders is not None:
            self.writer.record.plan_builders = builders.wait()
            self.builders = None
        return outcome

    def run(self) -> int:
        """The suite, then the files finished whatever happened; the exit code."""
        started = time.monotonic()
        status, interrupted, outcome = "error", None, None
        try:
            self.guard.raise_pending()   # a signal that came while the folder opened
            outcome = self._suite()
            status = "complete"
            if self.pool is not None and self.pool.set_up_at is not None:
                self.phases.mark("set_up", at=self.pool.set_up_at)
            self.phases.mark("graphs")
        except Interrupted as exc:
            status, interrupted = "interrupted", exc
        except KeyboardInterrupt:
            status, interrupted = "interrupted", Interrupted(signal.SIGINT)
        except BrokenPipeError:   # `... | head`: the reader left; stop like a signal, keep what finished
            _silence_stdout()
            status, interrupted = "interrupted", Interrupted(signal.SIGPIPE)
        finally:
            self._close(status, started)
        if interrupted is not None:
            return self._interrupted(interrupted)
        with self.guard.protect(raise_pending=False):   # recorded complete: a signal now ends nothing half-done
            self._final_table(outcome, started)
        statuses = self.writer.frame("summary").get_column("status").to_list()
        if not statuses and self.plan.request.shard is not None:
            return 0   # more shards than graphs: an empty slice is not a failure
        return exit_code_for(statuses)

    def _final_table(self, outcome: SuiteOutcome | None, started: float) -> None:
        try:
            self.reporter.final(outcome.runs if outcome else [], str(self.writer.folder), time.monotonic() - started)
            if self.plan.request.oracle:   # -q: the geomean line alone
                for line in oracle_lines(self.writer.frame("oracle"))[:1 if self.plan.request.quiet else None]:
                    self.reporter.print(line)
        except BrokenPipeError:   # every graph finished; only the table had no reader
            _silence_stdout()

    def _close(self, status: str, started: float) -> None:
        with self.guard.protect(raise_pending=False):
            self.progress.close()
            if self.builders is not None:   # interrupted while they built
                self.builders.close()
            if self.runner is not None:
                self.runner.close()   # type: ignore[attr-defined]
            for hook in self.plan.settings.hooks:
                close = getattr(hook, "close", None)
                if close is not None:
                    close()   # an in-process profiler stops tracing with the run
            try:
                self.commit_pending()   # finished graphs not yet committed: before the run's end is written
            except BrokenPipeError:   # only their lines had no reader; the commit came first
                _silence_stdout()
            if self.clocks is not None:   # clocks back before run.json is final: it records how that went
                self.clocks.restore()
                self.writer.record.clocks = self.clocks.record()
            self.phases.mark("close")
            self.writer.finish(status, elapsed_s=round(time.monotonic() - started, 3), phases_s=self.phases.seconds())

    def _interrupted(self, interrupted: Interrupted) -> int:
        folder = self.writer.folder
        done = self.writer.frame("summary").get_column("source").n_unique()
        print(f"hipdnn-trace run: interrupted by {signal.Signals(interrupted.signum).name}; "
              f"{done} graph(s) recorded in {escape(folder)} (finish with --resume {escape(folder)})", file=sys.stderr)
        return interrupted.exit_code


def _pool(plan: RunPlan, split: bool) -> gpu_pool.GpuPool:
    """A worker per GPU of the plan's pins, each pinned to its GPU before it starts."""
    assert plan.gpus is not None
    settings, resident = plan.settings, not plan.request.fresh_child
    workers = []
    for pin in plan.gpus.pins:
        isolated = IsolatedRunner(DEFAULT_TIMEOUT_S if plan.timeout is None else plan.timeout,
                                  env=pin.env(plan.gpus.variable), resident=resident)
        mine = settings
        if settings.samplers:   # NVML counts physical GPUs: sample this worker's GPU, when its entry is an index
            samplers = clock_samplers(plan.vendor, int(pin.visible))[0] if pin.visible.isdigit() else ()
            mine = replace(settings, samplers=samplers)
        if not split and plan.sources:
            isolated.start_server(plan.configs, mine)   # each worker's imports begin now, side by side
        workers.append(gpu_pool.GpuWorker(pin.index, SplitRunner(isolated) if split else isolated, mine))
    return gpu_pool.GpuPool(workers)


def _progress(plan: RunPlan) -> Progress:
    """The progress line: -q means the final line only, so none unless asked for by name."""
    request, loop, estimates = plan.request, plan.settings.loop, plan.estimates
    return Progress(len(plan.sources),
                    enabled={"on": True, "off": False}.get(request.progress, False if request.quiet else None),
                    estimates=None if estimates is None else [e.seconds for e in estimates],
                    iters=None if loop.min_time_ms or loop.max_rel_ci else loop.iters, tick_s=PROGRESS_TICK_S)


def ab_line(g: GraphRun) -> str | None:
    """B's median time over A's with its CI: the ratio, direction and name ``compare`` and ``report``
    use (compare/result.py), so one number never reads two ways. Interleaved: the paired interval
    and verdict of ab.csv; one after the other: a bootstrap of the two sample sets."""
    ran = [c for c in g.configs if c.status in (OK, FAILED) and c.samples is not None]
    if len(ran) != 2:
        return None
    from hipdnn_trace.compare.result import RATIO_LABEL, fmt_change
    from hipdnn_trace.compare.stats import median_ratio

    if g.ab is not None:
        r = g.ab
        return (f"   A/B {g.name}: {RATIO_LABEL} {r.ratio:.3f} [{r.confidence:.1%} CI {r.ci_low:.3f}, "
                f"{r.ci_high:.3f}], {r.verdict} (band +-{r.band * 100:g}%, {r.blocks} blocks); "
                f"A = {ran[0].config.name}, B = {ran[1].config.name}")

    a, b = (c.samples.statistic_kernel_ms() for c in ran)
    if not len(a) or not len(b) or min(a.min(), b.min()) <= 0:
        return None
    est = median_ratio(a, b, n_boot=2000, rng=np.random.default_rng(0))
    return (f"   A/B {g.name}: {RATIO_LABEL} {est.ratio:.3f} [95% CI {est.ci_low:.3f}, {est.ci_high:.3f}], "
            f"{fmt_change(est.ratio)}; A = {ran[0].config.name}, B = {ran[1].config.name}")


def list_engines(listing: EngineListing) -> int:
    """--engine list: each graph's engines on the backend, printed; nothing runs."""
    from hipdnn_trace.bench.verdict import support as verdict_support
    from hipdnn_trace.graph.load import load_bytes
    from hipdnn_trace.runs.plan import timing_options

    request = listing.request
    backend = backends.get(request.backend)
    available = backend.available()
    if not available:
        raise UserError(f"backend {request.backend} not available: {available.reason}")
    for src in listing.sources:
        graph = load_bytes(src.read(), src.name, allow_unknown=request.allow_unknown_fields)
        support = verdict_support(graph, request.backend, backend)   # run's and inspect's words
        print(f"== {escape(graph.label)} ({escape(src.name)})")
        if not support:
            print(f"   unsupported: {escape(support.reason)}")
            continue
        engines = backend.engines(graph, timing_options(request))
        if not engines:
            print(f"   one way to run: the {request.backend} backend has no engines to choose from")
        for e in engines:
            ws = "-" if e.workspace_bytes is None else f"{e.workspace_bytes} B"
            knobs = ", ".join(f"{k}={v}" for k, v in e.knobs.items()) or "-"
            print(f"   {e.index:>4}  {e.name:<40} workspace {ws:<12} knobs {knobs}  {e.detail}")
    return 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's exit flush cannot fail on the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
