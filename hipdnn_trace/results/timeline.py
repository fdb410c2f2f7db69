"""A finished graph -> slices and counters in the run's Perfetto trace.

Host phases go on the harness's thread track: ``graph <name>`` containing load,
reference and one ``<config>`` slice per configuration, which contains init,
warmup (a ``warmup iter`` slice per warmup iteration) and execute (an ``iter`` slice per timed
iteration, its index in the ``iteration`` arg: static names are Perfetto's advice, and they let
the UI aggregate all iterations of a run; markers keep ``iter <i>``). Counter
tracks per configuration carry iteration time and TFLOPS. Each timed iteration
starts a flow whose id is a hash of (run, graph, config, iteration), so kernels
added later by a profiler (same process or a parsed child run) link to it.

GPU tracks come from profiler frames (``results.schemas.KERNELS``, from CUPTI, rocprofv3 or
ncu): kernels become slices on one track per device and stream, grouped under "GPU <device>";
per-kernel counters (``COUNTERS``) become one counter track per device and counter name,
holding the value while its kernel runs and 0 in between. Timestamps must already be on the
trace clock (CLOCK_BOOTTIME ns): the profiler parsers convert them. These live here, not in
trace/, because they are built from results' schemas and run keys; trace/ is the Perfetto
writer and reader and knows nothing of runs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from hipdnn_trace.bench.records import ConfigRun, GraphRun
from hipdnn_trace.device import clock
from hipdnn_trace.errors import UserError
from hipdnn_trace.results.schemas import COUNTERS, KERNELS, KEY, conform
from hipdnn_trace.trace.writer import TraceWriter

PROCESS_NAME = "hipdnn-trace"
#: thread ids of the per-GPU tracks of a --gpus run (above Linux's largest pid, 2^22)
LANE_TID = 1 << 22


_MASK63 = (1 << 63) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _flow_base(run_id: str, graph_id: str | None, config: str) -> int:
    digest = hashlib.blake2b(f"{run_id}|{graph_id}|{config}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & _MASK63


def flow_ids(run_id: str, graph_id: str | None, config: str, iterations: np.ndarray) -> np.ndarray:
    """Deterministic non-zero 63-bit flow ids of timed iterations (vectorised)."""
    base = np.uint64(_flow_base(run_id, graph_id, config))
    with np.errstate(over="ignore"):
        ids = (base ^ (iterations.astype(np.uint64) * np.uint64(_GOLDEN))) & np.uint64(_MASK63)
    return np.where(ids == 0, np.uint64(1), ids)


def flow_id(run_id: str, graph_id: str | None, config: str, iteration: int) -> int:
    """The flow id of one timed iteration: what its kernels link to."""
    return int(flow_ids(run_id, graph_id, config, np.array([iteration]))[0])


def graphs_in_trace(path: Path) -> tuple[set[str], int | None]:
    """Sources of the ``graph <name>`` slices in a run's trace, and the trace's last timestamp.

    A scan of the packets alone (interned names resolved per sequence), about ten times
    faster than :func:`hipdnn_trace.trace.read_trace`, which builds every slice: a resume
    reads the whole trace of a run that may hold millions of iterations.
    """
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    begin_types = (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_INSTANT)
    cleared = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    events: dict[int, dict[int, str]] = {}
    args: dict[int, dict[int, str]] = {}
    sources: set[str] = set()
    last: int | None = None
    for packet in pb.Trace.FromString(path.read_bytes()).packet:
        seq = packet.trusted_packet_sequence_id
        if packet.sequence_flags & cleared:
            events[seq], args[seq] = {}, {}
        if packet.HasField("interned_data"):
            events.setdefault(seq, {}).update((e.iid, e.name) for e in packet.interned_data.event_names)
            args.setdefault(seq, {}).update((a.iid, a.name) for a in packet.interned_data.debug_annotation_names)
        if not packet.HasField("track_event"):
            continue
        last = packet.timestamp if last is None else max(last, packet.timestamp)
        event = packet.track_event
        if event.type not in begin_types:
            continue
        name = event.name or events.get(seq, {}).get(event.name_iid, "")
        if not name.startswith("graph "):
            continue
        for a in event.debug_annotations:
            if (a.name or args.get(seq, {}).get(a.name_iid)) == "source" and a.HasField("string_value"):
                sources.add(a.string_value)
    return sources, last


def _stretches(g: GraphRun) -> dict[int, list[tuple[int, int]]]:
    """Per configuration (its index), the stretches of time its phases ran with no other configuration's
    in between: one for a configuration measured alone, one per run of blocks in an interleaved A/B, so
    the configuration slices on the harness track nest instead of overlapping."""
    marks = sorted((p.start_ns, p.end_ns, i) for i, c in enumerate(g.configs) for p in c.phases)
    out: dict[int, list[tuple[int, int]]] = {}
    last = None
    for start, end, i in marks:
        runs = out.setdefault(i, [])
        if last == i:
            runs[-1] = (runs[-1][0], max(runs[-1][1], end))
        else:
            runs.append((start, end))
        last = i
    return out


class Timeline:
    """Writes graphs as they finish; one per run directory."""

    def __init__(self, writer: TraceWriter, run_id: str) -> None:
        self.writer = writer
        self.run_id = run_id
        self.process = writer.process_track(PROCESS_NAME, os.getpid())
        self.host = writer.thread_track("harness", self.process)

    def add_graph(self, g: GraphRun, lane: int | None = None) -> None:
        """``lane``: the GPU of a --gpus run; its graphs overlap others in time, so each GPU gets its
        own thread track (``harness gpu N``) where its slices nest."""
        if lane is None:
            self._add_graph(g)
            return
        host = self.host
        self.host = self.writer.thread_track(f"harness gpu {lane}", self.process, tid=LANE_TID + lane)
        try:
            self._add_graph(g)
        finally:
            self.host = host

    def _add_graph(self, g: GraphRun) -> None:
        w = self.writer
        spans = [p for p in g.phases] + [p for c in g.configs for p in c.phases]
        args = {"graph": g.name, "graph_id": g.graph_id or "", "source": g.source}
        if not spans:   # refused before any phase (a file that never loaded): an instant, as a resume
            w.instant(self.host, f"graph {g.name}", clock.now_ns(), args=args)   # rebuilds it
            w.flush()
            return
        start = min(p.start_ns for p in spans)
        end = max(p.end_ns for p in spans)
        w.slice(self.host, f"graph {g.name}", start, end, args=args)
        for p in g.phases:
            w.slice(self.host, p.name, p.start_ns, p.end_ns)
        stretches = _stretches(g)
        for i, c in enumerate(g.configs):
            self._add_config(g, c, stretches.get(i, []))
        w.flush()

    def _add_config(self, g: GraphRun, c: ConfigRun, stretches: list[tuple[int, int]]) -> None:
        w = self.writer
        if not c.phases:
            return
        args = {"config": c.config.name, "backend": c.config.backend, "engine": c.engine,
                "status": c.status}
        for start, end in stretches:
            w.slice(self.host, c.config.name, start, end, args=args)
        for p in c.phases:
            w.slice(self.host, p.name, p.start_ns, p.end_ns)
        s = c.samples
        if s is None or not len(s):
            return
        extra = {key: np.array([np.nan if v is None else v for v in values], dtype=np.float64)
                 for key, values in s.extra.items()}
        self._iterations(g.graph_id, c.config.name, g.graph_flops(), np.array(s.phase),
                         np.array(s.start_ns, dtype=np.int64), np.array(s.end_ns, dtype=np.int64),
                         np.array(s.iteration, dtype=np.int64), np.array(s.kernel_ms, dtype=np.float64), extra)
        if isinstance(c.kernels, pl.DataFrame) and c.kernels.height:
            self.add_kernels(c.kernels, g.graph_id, c.config.name)

    def _iterations(self, graph_id: str | None, config: str, flops: float | None, phase: np.ndarray,
                    starts: np.ndarray, ends: np.ndarray, iters: np.ndarray, kernel_ms: np.ndarray,
                    extra: dict[str, np.ndarray]) -> None:
        """Iteration slices (timed ones with their flows) and the per-configuration counter tracks."""
        w = self.writer
        warm = phase == "warmup"
        if warm.any():
            w.slices(self.host, "warmup iter", starts[warm], ends[warm], args={"iteration": iters[warm]})
        timed = ~warm
        if not timed.any():
            return
        # per-slice args go in as columns: far cheaper than a dict per iteration
        flows = flow_ids(self.run_id, graph_id, config, iters[timed])
        kernel_ms = kernel_ms[timed]
        w.slices(self.host, "iter", starts[timed], ends[timed],
                 flow_ids=flows, args={"iteration": iters[timed], "kernel_ms": kernel_ms})
        time_track = w.counter_track(f"{config} iteration ms", unit="ms", parent=self.process)
        w.counters(time_track, starts[timed], kernel_ms)
        if flops:
            tflops_track = w.counter_track(f"{config} TFLOPS", parent=self.process)
            with np.errstate(divide="ignore"):
                tflops = np.where(kernel_ms > 0, flops / (kernel_ms * 1e-3) / 1e12, 0.0)
            w.counters(tflops_track, starts[timed], tflops)
        for key, vals in extra.items():
            if key == "block":   # an interleaved A/B's block index: a column, not a measurement
                continue
            if vals.size == phase.size and np.isfinite(vals[timed]).any():
                track = w.counter_track(f"{key}", parent=self.process)
                w.counters(track, starts[timed], vals[timed])

    def add_recorded(self, summary: pl.DataFrame, iterations: pl.DataFrame, kernels: pl.DataFrame, *,
                     at_ns: int | None = None) -> None:
        """Graphs known only from the run's tables: what a kill between a graph's summary rename and
        its trace flush kept out of the trace, rebuilt on ``--resume``.

        Graph, configuration and iteration slices (with their flows), counter tracks and kernels
        come back from the iterations and kernels tables; phases (load, init, warmup, ...) are not
        recorded there, so they stay missing, and the graph slice says so in its ``rebuilt`` arg. A
        graph without iterations (an error row) becomes an instant at ``at_ns`` (the trace's end).
        """
        w = self.writer
        for source in summary.get_column("source").unique(maintain_order=True).to_list():
            rows = summary.filter(pl.col("source") == source).to_dicts()
            first = rows[0]
            its = iterations.filter((pl.col("source") == source) & pl.col("start_ns").is_not_null())
            args = {"graph": first["graph"], "graph_id": first["graph_id"] or "", "source": source,
                    "rebuilt": "from the tables on --resume; phases not recorded"}
            if not its.height:
                w.instant(self.host, f"graph {first['graph']}", clock.now_ns() if at_ns is None else at_ns,
                          args=args)
                continue
            its = its.with_columns(end_ns=pl.col("start_ns") + (
                pl.coalesce("host_ms", "kernel_ms", pl.lit(0.0)) * 1e6).round().cast(pl.Int64))
            w.slice(self.host, f"graph {first['graph']}", its["start_ns"].min(), its["end_ns"].max(), args=args)
            for row in rows:
                mine = its.filter(pl.col("config") == row["config"])
                if not mine.height:
                    continue
                # an interleaved A/B's configurations alternate: one slice per block, so they nest
                parts = mine.partition_by("block", maintain_order=True) \
                    if mine.get_column("block").is_not_null().any() else [mine]
                for part in parts:
                    w.slice(self.host, row["config"], part["start_ns"].min(), part["end_ns"].max(),
                            args={"config": row["config"], "backend": row["backend"] or "",
                                  "engine": row["engine"] or "", "status": row["status"] or ""})
                extra = {key: mine.get_column(key).cast(pl.Float64).fill_null(np.nan).to_numpy()
                         for key in ("sm_clock_mhz", "mem_clock_mhz") if mine.get_column(key).is_not_null().any()}
                self._iterations(row["graph_id"], row["config"], row["flops"],
                                 mine.get_column("phase").to_numpy(), mine.get_column("start_ns").to_numpy(),
                                 mine.get_column("end_ns").to_numpy(), mine.get_column("iteration").to_numpy(),
                                 mine.get_column("kernel_ms").cast(pl.Float64).fill_null(np.nan).to_numpy(), extra)
                ks = kernels.filter((pl.col("graph_id") == row["graph_id"]) & (pl.col("config") == row["config"]))
                if ks.height:
                    self.add_kernels(ks, row["graph_id"], row["config"])
        w.flush()

    def add_kernels(self, kernels: pl.DataFrame, graph_id: str | None, config: str) -> None:
        """Kernel slices on device/stream tracks, each linked to its iteration's host slice."""
        iterations = np.array(kernels.get_column("iteration").drop_nulls().unique().to_list()
                              if "iteration" in kernels.columns else [], dtype=np.int64)
        flows = dict(zip(iterations.tolist(), flow_ids(self.run_id, graph_id, config, iterations).tolist()))
        add_kernels(self.writer, kernels, flows_from=flows)


_JOIN = [*KEY, "source", "correlation_id"]


def _timed_kernels(kernels: pl.DataFrame) -> pl.DataFrame:
    """Kernels with usable start/end, device and stream defaulted to 0."""
    missing = {"name", "start_ns", "end_ns"} - set(kernels.columns)
    if missing:
        raise UserError(f"kernels frame: missing column(s) {', '.join(sorted(missing))}")
    return (
        conform(kernels, KERNELS)
        .filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
        .filter(pl.col("end_ns") >= pl.col("start_ns"))
        .with_columns(pl.col("device").fill_null(0), pl.col("stream").fill_null(0))
    )


def _lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane per kernel (sorted by start) so no two kernels in a lane overlap.

    Kernels of one stream run one after another, but profiler clocks can make
    neighbours overlap by a few ns; Perfetto requires slices on a track to
    nest, so an overlapping kernel goes to a sibling track instead of being
    moved in time.
    """
    if start.size < 2 or bool(np.all(start[1:] >= end[:-1])):
        return np.zeros(start.size, dtype=np.int64)
    lane_end: list[int] = []
    lanes = np.empty(start.size, dtype=np.int64)
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        for lane, busy_until in enumerate(lane_end):  # noqa: B007 - the lane found is used after the loop
            if s >= busy_until:
                break
        else:
            lane = len(lane_end)
            lane_end.append(0)
        lane_end[lane] = e
        lanes[i] = lane
    return lanes


def _dims(prefix: str) -> pl.Expr:
    """"64x2x1" from <prefix>_x/_y/_z (missing y, z count as 1); null without x."""
    x, y, z = (pl.col(f"{prefix}_{axis}") for axis in "xyz")
    return (
        pl.when(x.is_not_null())
        .then(pl.concat_str([x, pl.lit("x"), y.fill_null(1), pl.lit("x"), z.fill_null(1)]))
        .otherwise(None)
    )


def add_kernels(
    writer: TraceWriter, kernels: pl.DataFrame, *, flows_from: Mapping[int, int] | None = None
) -> int:
    """Write kernels as slices on their device/stream tracks; returns how many.

    Slice args: grid, block, correlation_id, iteration, source. Kernels without
    start/end (e.g. ncu replay) are skipped. ``flows_from`` maps an iteration
    to the flow id its host slice carries (``flow_ids=[id]``); that iteration's
    kernels carry it too, so Perfetto draws host slice -> first kernel -> next
    kernel ... in time order. Pass one graph's kernels with that graph's map:
    iteration numbers restart with every graph.
    """
    frame = (
        _timed_kernels(kernels)
        .sort("device", "stream", "start_ns", "end_ns")
        .with_columns(_dims("grid").alias("_grid"), _dims("block").alias("_block"))
    )
    written = 0
    for (device, stream), group in frame.group_by(["device", "stream"], maintain_order=True):
        start = group["start_ns"].to_numpy()
        end = group["end_ns"].to_numpy()
        lanes = _lanes(start, end)
        names = group["name"].fill_null("<unnamed kernel>").to_list()
        columns = {
            key: (series.to_numpy() if series.null_count() == 0 and series.dtype.is_integer() else series.to_list())
            for key, series in (
                ("grid", group["_grid"]),
                ("block", group["_block"]),
                ("correlation_id", group["correlation_id"]),
                ("iteration", group["iteration"]),
                ("source", group["source"]),
            )
        }
        flows = None
        if flows_from:
            known = pl.DataFrame(
                {"iteration": list(flows_from), "_flow": list(flows_from.values())},
                schema={"iteration": pl.Int64(), "_flow": pl.UInt64()},
            )
            flows = group.select("iteration").join(known, on="iteration", how="left", maintain_order="left")
            flows = flows["_flow"].fill_null(0).to_numpy()
        for lane in np.unique(lanes).tolist():
            name = f"stream {stream}" if lane == 0 else f"stream {stream} (overlap {lane})"
            track = writer.device_track(int(device), int(stream), name)
            if lane == 0 and lanes.max() == 0:  # the usual case: no overlap, no picking
                writer.slices(track, names, start, end, flow_ids=flows, args=columns)
                written += len(names)
                continue
            idx = np.flatnonzero(lanes == lane)
            pick = idx.tolist()
            writer.slices(
                track,
                [names[i] for i in pick],
                start[idx],
                end[idx],
                flow_ids=flows[idx] if flows is not None else None,
                args={k: (v[idx] if isinstance(v, np.ndarray) else [v[i] for i in pick]) for k, v in columns.items()},
            )
            written += idx.size
    return written


def _join_key(df: pl.DataFrame) -> pl.DataFrame:
    """Join columns as non-null strings: ``KEY`` columns are null outside a run."""
    return df.with_columns(pl.col(c).cast(pl.String).fill_null("") for c in _JOIN)


#: above this many counters on one GPU, counter tracks are grouped per hardware block
#: (a rocprof-compute capture has thousands: one flat list is unreadable)
GROUP_COUNTERS_ABOVE = 16


def counter_block(name: str) -> str:
    """The hardware block of a raw counter name (SQ_WAVES -> SQ, TCC_HIT[3] -> TCC), else "other"."""
    head = name.split("[", 1)[0]
    return head.split("_", 1)[0] if "_" in head else "other"


def counter_unit(name: str) -> str:
    """A unit for a counter its profiler gave none: cycles or bytes where the name says so, else a count."""
    upper = name.upper()
    if "CYCLE" in upper:
        return "cycles"
    if "BYTE" in upper:
        return "bytes"
    return "count"


def add_counters(writer: TraceWriter, counters: pl.DataFrame, kernels: pl.DataFrame) -> int:
    """Write per-kernel counters as counter tracks under "GPU <device>".

    Counters carry no time of their own: each row is placed on the kernel with
    the same correlation_id, source and run keys (``KEY``). The track holds the
    value from the kernel's start and drops to 0 at its end, unless the next
    kernel with that counter has already started. Returns the number of
    counter rows placed; rows without a timed kernel are skipped.
    """
    missing = {"counter", "value", "correlation_id"} - set(counters.columns)
    if missing:
        raise UserError(f"counters frame: missing column(s) {', '.join(sorted(missing))}")
    timed = _join_key(_timed_kernels(kernels)).select(*_JOIN, "device", "start_ns", "end_ns")
    timed = timed.unique(subset=_JOIN, keep="first", maintain_order=True)
    placed = (
        _join_key(conform(counters, COUNTERS).select(list(COUNTERS)))   # profiler extras (own times) dropped
        .filter(pl.col("counter").is_not_null() & pl.col("value").is_not_null())
        .join(timed, on=_JOIN, how="inner")
        .sort("device", "counter", "start_ns", "end_ns")
    )
    per_device = dict(placed.group_by("device").agg(pl.col("counter").n_unique()).iter_rows())
    for (device, name), group in placed.group_by(["device", "counter"], maintain_order=True):
        units = group["unit"].drop_nulls()
        parent = writer.gpu_track(int(device))
        if per_device[device] > GROUP_COUNTERS_ABOVE:   # hundreds of raw counters: one folder per block
            parent = writer.group_track(f"counters {counter_block(str(name))}", parent)
        track = writer.counter_track(
            str(name), unit=units[0] if units.len() else counter_unit(str(name)), parent=parent
        )
        start = group["start_ns"].to_numpy()
        end = group["end_ns"].to_numpy()
        value = group["value"].to_numpy().astype(np.float64)
        reset = np.append(end[:-1] < start[1:], True)
        ts = np.concatenate([start, end[reset]])
        vals = np.concatenate([value, np.zeros(int(reset.sum()))])
        # Value at i's start, then its reset; stable sort keeps a reset before
        # a value at the same time.
        seq = np.concatenate([2 * np.arange(start.size), 2 * np.flatnonzero(reset) + 1])
        order = np.lexsort((seq, ts))
        writer.counters(track, ts[order], vals[order])
    return placed.height


def append_profile_tracks(trace_path: Path, run_id: str, kernels: pl.DataFrame, counters: pl.DataFrame) -> None:
    """Add a profiler's kernel tracks (per graph and configuration) and counter tracks to a run's
    finished trace.pftrace (results/profile_fold.py)."""
    with TraceWriter(trace_path, append=True) as writer:
        timeline = Timeline(writer, run_id)
        for (graph_id, config), part in kernels.group_by(["graph_id", "config"], maintain_order=True):
            timeline.add_kernels(part, graph_id, config)
        if counters.height:
            add_counters(writer, counters, kernels)
