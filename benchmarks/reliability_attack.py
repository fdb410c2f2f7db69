"""Issue 25's reliability attack, as a regression check: every command fed hostile input as a user would.

Each case runs the real CLI (``python -m hipdnn_trace ...``) in a subprocess with a bounded timeout and is
judged against what it should do:

* ``error``: a clean refusal (exit 1 or 2, no traceback);
* ``ok``: a result (exit 0), plus a case-specific check where one applies (files whole, nothing lost);
* custom checks for kills + resume (every graph once in every table and in the trace, no temporaries).

Observed outcomes: ``clean``, ``traceback`` (a Python traceback or a crash by signal), ``hang`` (the
timeout), ``silent accept`` (exit 0 where a refusal or a word was due, or inspect and run disagree),
``lost/mixed`` (rows lost or doubled), ``refused`` (a valid input refused). The table prints by category;
the exit code is 1 when any case is not clean.

Run as root to get the tmpfs cases (a full and a read-only file system); without root they are skipped.

    python benchmarks/reliability_attack.py                    # everything, 3 cases at a time
    python benchmarks/reliability_attack.py --only kills -v    # one category, every case's line
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CATEGORIES = {
    "graphs": "malformed graphs (inspect + run)",
    "paths": "hostile paths and archives",
    "kills": "kills + resume",
    "outputs": "output folders",
    "inputs": "compare / report / merge / ingest / recipe / slurm / calibrate / reference cache (/ repro) inputs",
}
OUTCOMES = ("clean", "traceback", "hang", "silent accept", "lost/mixed", "refused")
SUITE = ["pointwise/bias_add_broadcast_nhwc_fp32.json", "matmul/matmul_2d_fp32.json",
         "pointwise/bias_add_broadcast_nhwc_fp16.json", "matmul/matmul_2d_fp16.json"]
QUICK = ["-i", "3", "-w", "1", "--min-time-ms", "0", "-q"]


@dataclass
class Proc:
    """One finished (or timed-out) CLI call."""

    argv: list[str]
    rc: int | None
    out: str
    err: str
    hung: bool


@dataclass
class Case:
    """One attack: ``act`` runs in a private folder and returns (outcome, detail)."""

    category: str
    name: str
    act: Callable[[Path], tuple[str, str]]
    outcome: str = ""
    detail: str = ""
    seconds: float = 0.0


@dataclass
class World:
    """Shared inputs made once: a suite, finished runs, shards, a reference cache, tmpfs mounts."""

    root: Path
    timeout: float
    suite: Path = field(init=False)
    run_a: Path = field(init=False)
    run_b: Path = field(init=False)
    shards: list[Path] = field(default_factory=list)
    cache: Path | None = None
    full: Path | None = None
    readonly: Path | None = None
    run_seconds: float = 5.0


def env() -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
             HIPDNN_TRACE_PROGRESS="off", COLUMNS="200")
    e.pop("CUDA_VISIBLE_DEVICES", None)
    return e


def cli(argv: list[str], cwd: Path, timeout: float, **popen) -> Proc:
    """Run ``hipdnn-trace argv``; a run past ``timeout`` has its whole session killed (a hang)."""
    p = subprocess.Popen([sys.executable, "-m", "hipdnn_trace", *argv], cwd=cwd, env=env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         text=True, errors="replace", start_new_session=True, **popen)
    try:
        out, err = p.communicate(timeout=timeout)
        return Proc(argv, p.returncode, out, err, False)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Proc(argv, None, out, err, True)


def last_line(p: Proc) -> str:
    lines = [ln for ln in (p.err + "\n" + p.out).splitlines() if ln.strip()]
    err_lines = [ln for ln in lines if "error" in ln.lower()]
    return ((err_lines or lines or [""])[-1])[:160]


def judge(p: Proc, expect: str) -> tuple[str, str]:
    """The outcome of one call that should end in ``expect`` (``error`` or ``ok``)."""
    if p.hung:
        return "hang", f"no exit within the timeout: {last_line(p)}"
    if "Traceback (most recent call last)" in p.err + p.out:
        tail = [ln for ln in p.err.splitlines() if ln.strip()][-1:] or [""]
        return "traceback", tail[0][:160]
    if p.rc is not None and p.rc < 0 or p.rc in (134, 137, 139):
        return "traceback", f"crashed (exit {p.rc})"
    if expect == "error":
        if p.rc == 0:
            return "silent accept", f"exit 0: {last_line(p)}"
        return "clean", last_line(p)
    if p.rc != 0:
        return "refused", f"exit {p.rc}: {last_line(p)}"
    return "clean", last_line(p)


def expect(argv: list[str], want: str, prep: Callable[[Path], None] | None = None,
           check: Callable[[Proc, Path], tuple[str, str] | None] | None = None,
           timeout: float | None = None) -> Callable[[Path], tuple[str, str]]:
    """An act: ``prep`` the folder, run ``argv`` (``{d}`` is the folder), judge, then ``check``."""
    def act(d: Path) -> tuple[str, str]:
        if prep is not None:
            prep(d)
        p = cli([a.replace("{d}", str(d)) for a in argv], d, timeout or WORLD.timeout)
        outcome = judge(p, want)
        if outcome[0] == "clean" and check is not None:
            return check(p, d) or outcome
        return outcome
    return act


WORLD: World   # set by main before any case runs


# ---------------------------------------------------------------- graphs (malformed, inspect + run)

def base_graph(name: str = "pointwise/bias_add_broadcast_nhwc_fp32.json") -> dict:
    return json.loads((REPO / "graphs" / name).read_text())


def _mut(f: Callable[[dict], object]) -> Callable[[], bytes]:
    def make() -> bytes:
        g = base_graph()
        f(g)
        return json.dumps(g).encode()
    return make


def _set(path: list, value: object) -> Callable[[dict], None]:
    def f(g: dict) -> None:
        node = g
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return f


def _del(path: list) -> Callable[[dict], None]:
    def f(g: dict) -> None:
        node = g
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
    return f


def _cycle(g: dict) -> None:
    g["nodes"].append(json.loads(json.dumps(g["nodes"][0])))
    g["nodes"][1]["inputs"]["in_0_tensor_uid"] = 3
    g["nodes"][1]["outputs"]["out_0_tensor_uid"] = 1


MALFORMED: dict[str, Callable[[], bytes]] = {
    "empty file": lambda: b"",
    "binary": lambda: bytes(range(256)) * 8,
    "truncated JSON": lambda: json.dumps(base_graph()).encode()[:300],
    "top-level list": lambda: b"[1, 2, 3]",
    "deeply nested": lambda: b"[" * 200_000 + b"]" * 200_000,
    "NaN literal dim": lambda: json.dumps(base_graph()).replace("[4, 16, 16, 16]", "[NaN, 16, 16, 16]", 1).encode(),
    "utf-16 bytes": lambda: json.dumps(base_graph()).encode("utf-16"),
    "no tensors": _mut(_del(["tensors"])),
    "no nodes": _mut(_set(["nodes"], [])),
    "dim as string": _mut(_set(["tensors", 0, "dims", 0], "4")),
    "negative dim": _mut(_set(["tensors", 0, "dims", 0], -4)),
    "zero dim": _mut(_set(["tensors", 0, "dims", 0], 0)),
    "dim 2**62 (bomb)": _mut(_set(["tensors", 0, "dims", 0], 2**62)),
    "dim 10**30": _mut(_set(["tensors", 0, "dims", 0], 10**30)),
    "dim float": _mut(_set(["tensors", 0, "dims", 0], 4.5)),
    "strides too short": _mut(_set(["tensors", 0, "strides"], [1])),
    "overlapping strides": _mut(_set(["tensors", 0, "strides"], [0, 0, 0, 0])),
    "unknown op": _mut(_set(["nodes", 0, "inputs", "operation"], "frobnicate")),
    "unknown node type": _mut(_set(["nodes", 0, "type"], "WarpDriveAttributes")),
    "dangling uid": _mut(_set(["nodes", 0, "inputs", "in_0_tensor_uid"], 99)),
    "duplicate uid": _mut(_set(["tensors", 1, "uid"], 1)),
    "uid as string": _mut(_set(["tensors", 0, "uid"], "one")),
    "unknown data type": _mut(_set(["tensors", 0, "data_type"], "float128")),
    "cycle": _mut(_cycle),
    "output is input": _mut(_set(["nodes", 0, "outputs", "out_0_tensor_uid"], 1)),
    "virtual output": _mut(_set(["tensors", 2, "virtual"], True)),
    "name 1 MB": _mut(_set(["name"], "n" * 1_000_000)),
    "tensors is an object": _mut(_set(["tensors"], {"a": 1})),
    "300k unused tensors": _mut(lambda g: g["tensors"].extend(
        dict(g["tensors"][0], uid=100 + i, name=f"u{i}") for i in range(300_000))),
}


def malformed_cases() -> list[Case]:
    cases = []
    for name, make in MALFORMED.items():
        def prep(d: Path, make=make) -> None:
            (d / "g.json").write_bytes(make())
        want = "ok" if name in ("300k unused tensors", "name 1 MB") else "error"
        slow = 150.0 if name == "300k unused tensors" else None   # 60 MB of JSON: linear, about a minute here
        cases.append(Case("graphs", f"inspect: {name}", expect(["inspect", "g.json"], want, prep, timeout=slow)))
        cases.append(Case("graphs", f"run: {name}", expect(["run", "g.json", "--out", "runs", *QUICK], want, prep,
                                                           timeout=slow)))
    return cases


def _agreement(make: Callable[[], dict], backend: str) -> Callable[[Path], tuple[str, str]]:
    """inspect's verdict for ``backend`` and run's outcome agree (can run -> passes; refused -> not run)."""
    def act(d: Path) -> tuple[str, str]:
        (d / "g.json").write_text(json.dumps(make()))
        ins = cli(["inspect", "--json", "g.json"], d, WORLD.timeout)
        if ins.rc != 0:
            verdict = None
            bad = judge(ins, "error")
        else:
            bad = judge(ins, "ok")
            row = next(b for b in json.loads(ins.out)[0]["backends"] if b["name"] == backend)
            verdict = row["supported"] and row["available"]
        if bad[0] != "clean":
            return bad
        run = cli(["run", "g.json", "-b", backend, "--out", "runs", *QUICK], d, WORLD.timeout)
        outcome = judge(run, "ok" if verdict else "error")
        passed = run.rc == 0 and " 1 passed" in run.out
        if outcome[0] in ("traceback", "hang"):
            return outcome
        if verdict and not passed:
            return "silent accept", f"inspect: can run; run: {last_line(run)}"
        if not verdict and passed:
            return "silent accept", "inspect refused it, run passed it"
        return "clean", ("both run it" if verdict else "both refuse it: " + last_line(ins if ins.rc else run))
    return act


def _matmul(dtype: str) -> Callable[[], dict]:
    def make() -> dict:
        g = base_graph("matmul/matmul_2d_fp32.json")
        for t in g["tensors"]:
            t["data_type"] = dtype
        g["io_data_type"] = dtype
        return g
    return make


def _layernorm(**change: object) -> Callable[[], dict]:
    """layernorm_fp32 in INFERENCE (it cannot produce its mean output) or with epsilon set."""
    def make() -> dict:
        g = base_graph("norm/layernorm_fp32.json")
        if "phase" in change:
            g["nodes"][0]["attributes"]["forward_phase"] = change["phase"]
        if "epsilon" in change:
            next(t for t in g["tensors"] if t["name"] == "layernorm_epsilon")["value"] = change["epsilon"]
        return g
    return make


def _relu_clip() -> dict:
    g = base_graph()
    g["nodes"][0]["inputs"].update(operation="relu_fwd", in_1_tensor_uid=None, relu_lower_clip=5.0,
                                   relu_upper_clip=1.0)
    g["tensors"] = [t for t in g["tensors"] if t["uid"] != 2]
    return g


def _noted(make: Callable[[], dict], word: str) -> Callable[[Path], tuple[str, str]]:
    """inspect prints a note naming ``word`` on a dubious attribute (a graph that still loads)."""
    def check(p: Proc, d: Path) -> tuple[str, str] | None:
        return None if word in p.out + p.err else ("silent accept", f"no note about {word}")
    return expect(["inspect", "g.json"], "ok", lambda d: (d / "g.json").write_text(json.dumps(make())), check)


def agreement_cases() -> list[Case]:
    made = {"fp4 matmul": _matmul("fp4_e2m1"), "boolean matmul": _matmul("boolean"),
            "int8 matmul": _matmul("int8"), "layernorm INFERENCE asked for mean": _layernorm(phase="INFERENCE"),
            "relu lower clip > upper": _relu_clip}
    cases = [Case("graphs", f"inspect = run ({b}): {n}", _agreement(m, b))
             for n, m in made.items() for b in ("reference", "torch")]
    cases.append(Case("graphs", "inspect notes relu lower clip > upper", _noted(_relu_clip, "relu_lower_clip")))
    cases.append(Case("graphs", "inspect notes epsilon -1", _noted(_layernorm(epsilon=-1.0), "epsilon")))
    return cases


# ---------------------------------------------------------------- hostile paths and archives

def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **kw) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    for k, v in kw.items():
        setattr(info, k, v)
    return info, (data if kind == tarfile.REGTYPE else None)


def _good() -> bytes:
    return (REPO / "graphs" / SUITE[0]).read_bytes()


def _corrupt_second_header() -> bytes:
    data = bytearray(_tar([_member("a.json", _good()), _member("b.json", _good())]))
    second = 512 + (len(_good()) + 511) // 512 * 512
    data[second + 148:second + 156] = b"XXXXXXXX"   # the header's checksum field
    return bytes(data)


def _truncated_at_block() -> bytes:
    data = _tar([_member("a.json", _good()), _member("b.json", _good())])
    return data[:512 + (len(_good()) + 511) // 512 * 512 + 512]


def _gz_bomb() -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1) as z:
        header = tarfile.TarInfo("big.json")
        header.size = 3 * 2**30
        z.write(header.tobuf())
        chunk = b" " * 2**20
        for _ in range(200):   # 200 MiB of the 3 GiB promised: a bomb that also ends early
            z.write(chunk)
    return buf.getvalue()


ARCHIVES: dict[str, Callable[[], bytes]] = {
    "tar with ../ member": lambda: _tar([_member("../../escape.json", _good())]),
    "tar with absolute member": lambda: _tar([_member("/tmp/abs.json", _good())]),
    "tar with symlink member": lambda: _tar([_member("l.json", kind=tarfile.SYMTYPE, linkname="/etc/passwd")]),
    "tar with hardlink member": lambda: _tar([_member("h.json", kind=tarfile.LNKTYPE, linkname="/etc/passwd")]),
    "tar with device member": lambda: _tar([_member("d.json", kind=tarfile.CHRTYPE, devmajor=1, devminor=5)]),
    "tar with FIFO member": lambda: _tar([_member("f.json", kind=tarfile.FIFOTYPE)]),
    "tar member claims 3 GiB": lambda: _tar([_member("a.json", _good())])[:124] + b"%011o\0" % (3 * 2**30),
    "tar, corrupt 2nd header": _corrupt_second_header,
    "tar, truncated at a block": _truncated_at_block,
    "tar, truncated mid-member": lambda: _tar([_member("a.json", _good())])[:700],
    "tar.gz truncated": lambda: gzip.compress(_tar([_member("a.json", _good())]))[:-20],
    "tar.gz, CRC damaged": lambda: gzip.compress(_tar([_member("a.json", _good())]))[:-8] + b"\0" * 8,
    "tar.gz bomb (3 GiB member)": _gz_bomb,
    "tar, 20000 empty members": lambda: _tar([_member(f"m{i}.json") for i in range(20000)]),
    "garbage named .tar": lambda: os.urandom(4096),
    "empty .tar.gz": lambda: b"",
}


def _special(kind: str) -> Callable[[Path], None]:
    def prep(d: Path) -> None:
        target = d / "g.json"
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "dir-fifo":
            (d / "s").mkdir()
            (d / "s" / "a.json").write_bytes(_good())
            os.mkfifo(d / "s" / "b.json")
        elif kind == "loop":
            os.symlink("g.json", target)
        elif kind == "dirloop":
            (d / "s").mkdir()
            (d / "s" / "a.json").write_bytes(_good())
            os.symlink("..", d / "s" / "up")
        elif kind == "dir-devzero":
            (d / "s").mkdir()
            os.symlink("/dev/zero", d / "s" / "z.json")
        elif kind == "huge":
            with open(target, "wb") as f:
                f.truncate(8 * 2**30)   # sparse 8 GiB
        elif kind == "suite":
            os.symlink(WORLD.suite, target)
        else:
            os.symlink(kind, target)
    return prep


def path_cases() -> list[Case]:
    cases = []
    specials = {"symlink to /dev/zero": "/dev/zero", "symlink to /dev/urandom": "/dev/urandom",
                "symlink to /dev/null": "/dev/null", "symlink to /dev/tty": "/dev/tty", "FIFO": "fifo",
                "symlink loop": "loop", "sparse 8 GiB file": "huge", "symlink to a suite folder": "suite",
                "folder with a FIFO": "dir-fifo", "folder with a symlink loop": "dirloop",
                "folder with /dev/zero link": "dir-devzero", "missing file": "/nonexistent/x.json"}
    for name, kind in specials.items():
        target = "s" if kind.startswith("dir") else "g.json"
        want = "ok" if kind in ("dirloop", "suite") else "error"
        for cmd in ("inspect", "run"):
            argv = ["inspect", target] if cmd == "inspect" else ["run", target, "--out", "runs", *QUICK]
            cases.append(Case("paths", f"{cmd}: {name}", expect(argv, want, _special(kind))))
    for name, make in ARCHIVES.items():
        suffix = ".tar.gz" if "gz" in name else ".tar"
        def prep(d: Path, make=make, suffix=suffix) -> None:
            (d / f"a{suffix}").write_bytes(make())
        # 20,000 graphs, each an error row: linear now (runs/measure.py commits fast graphs together), about
        # 50 s on the 2-core box; it ran for hours while every graph rewrote every table
        slow = 150.0 if "20000" in name else None
        cases.append(Case("paths", f"run: {name}", expect(["run", f"a{suffix}", "--out", "runs", *QUICK],
                                                          "error", prep, timeout=slow)))
    cases.append(Case("paths", "inspect: tar, corrupt 2nd header", expect(
        ["inspect", "a.tar"], "error", lambda d: (d / "a.tar").write_bytes(_corrupt_second_header()))))
    cases.append(Case("paths", "run --config FIFO", expect(["run", "--config", "r.toml", "--out", "runs"], "error",
                                                          lambda d: os.mkfifo(d / "r.toml"))))
    cases.append(Case("paths", "run --config /dev/zero", expect(["run", "--config", "/dev/zero", "--out", "runs"],
                                                               "error")))
    cases.append(Case("paths", "run --golden /dev/zero", expect(
        ["run", str(REPO / "graphs" / SUITE[0]), "--golden", "/dev/zero", "--out", "runs", *QUICK], "error")))
    cases.append(Case("paths", "run --peaks FIFO", expect(
        ["run", str(REPO / "graphs" / SUITE[0]), "--peaks", "p.toml", "--out", "runs", *QUICK], "error",
        lambda d: os.mkfifo(d / "p.toml"))))
    return cases


# ---------------------------------------------------------------- kills + resume

KILL_FLAGS = ["-i", "20", "-w", "1", "--min-time-ms", "400", "-q", "--seed", "0"]


def verify_run(folder: Path, graphs: int) -> str | None:
    """None when ``folder`` holds every graph once in every table and the trace, and nothing stale."""
    import polars as pl

    from hipdnn_trace.results.rundir import load_run
    from hipdnn_trace.trace import read_trace

    run = load_run(folder)
    keys = run.summary.select("source", "config").rows()
    if len(keys) != graphs or len(set(keys)) != graphs:
        return f"summary.csv holds {len(keys)} rows for {len(set(keys))} of {graphs} graphs"
    for name in ("breakdown", "validation"):
        got = getattr(run, name).select("source", "config", *(["output_uid"] if name == "validation" else [])).rows()
        if len(got) != len(set(got)) or {g[:2] for g in got} != set(keys):
            return f"{name}.csv: {len(got)} rows for {len({g[:2] for g in got})} graphs (want {graphs}, each once)"
    trace = read_trace(folder / "trace.pftrace")
    names = trace.slices.filter(pl.col("name").str.starts_with("graph ")).get_column("name").to_list()
    if len(names) != graphs or len(set(names)) != graphs or trace.truncated:
        return f"trace: {len(names)} graph slices for {graphs} graphs (truncated: {trace.truncated})"
    stale = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    if stale:
        return f"left behind: {', '.join(stale)}"
    status = json.loads((folder / "run.json").read_text()).get("status")
    return None if status == "complete" else f"run.json status {status!r}"


def _start(argv: list[str], d: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hipdnn_trace", *argv], cwd=d, env=env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _appears(path: Path, p: subprocess.Popen, limit: float = 60.0) -> float:
    """Wait until ``path`` exists (or ``p`` ends, or ``limit``); the monotonic time it appeared."""
    end = time.monotonic() + limit
    while not path.exists() and p.poll() is None and time.monotonic() < end:
        time.sleep(0.01)
    return time.monotonic()


def _kill_after(p: subprocess.Popen, seconds: float, sig: int, after: Path | None = None) -> tuple[int | None, str]:
    """Signal ``p`` ``seconds`` after ``after`` appears (the run folder's run.json: imports take half of a
    short run, so the kill points are placed in the part that writes the folder)."""
    if after is not None:
        _appears(after, p)
    time.sleep(seconds)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, sig) if sig == signal.SIGKILL else os.kill(p.pid, sig)
    try:
        out, err = p.communicate(timeout=15)
        return p.returncode, err
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None, "did not exit within 15 s of the signal"


def _resume_and_verify(d: Path, folder: Path) -> tuple[str, str]:
    p = cli(["run", "--resume", str(folder.relative_to(d))], d, WORLD.timeout * 2)
    if not folder.exists():
        return judge(p, "error")
    outcome = judge(p, "ok")
    if outcome[0] != "clean":
        return outcome
    bad = verify_run(folder, len(SUITE))
    return ("lost/mixed", bad) if bad else ("clean", "resumed to every graph once")


def kill_case(sig: int, frac: float, *, again: float | None = None, twice: bool = False,
              isolate: bool = False, early: bool = False) -> Callable[[Path], tuple[str, str]]:
    def act(d: Path) -> tuple[str, str]:
        argv = ["run", str(WORLD.suite), "--out", "runs", "--run-id", "r", *KILL_FLAGS,
                *(["--isolate"] if isolate else [])]
        folder = d / "runs" / "r"
        rc, err = _kill_after(_start(argv, d), frac * WORLD.run_seconds, sig, None if early else folder / "run.json")
        if rc is None:
            return "hang", err
        if "Traceback (most recent" in err:
            return "traceback", err.strip().splitlines()[-1][:160]
        # -15 (the default action) only before the harness set its handler, which it does before mkdir
        if sig == signal.SIGTERM and rc not in (0, 143) and not (rc == -signal.SIGTERM and not folder.exists()):
            return "lost/mixed", f"SIGTERM gave exit {rc} (run folder {'made' if folder.exists() else 'absent'})"
        if again is not None and folder.exists():
            rc, err = _kill_after(_start(["run", "--resume", "runs/r"], d), again * WORLD.run_seconds, sig)   # no wait:
            # the resume's own imports are part of what a kill may hit
            if rc is None or "Traceback (most recent" in err:
                return ("hang" if rc is None else "traceback"), err.strip()[-160:]
        if twice and folder.exists():
            both = [_start(["run", "--resume", "runs/r"], d) for _ in range(2)]
            done = [(q.communicate(timeout=WORLD.timeout * 2), q.returncode) for q in both]
            if any("Traceback (most recent" in e for (_, e), _ in done):
                return "traceback", "a concurrent resume"
            if sorted(rc for _, rc in done) not in ([0, 0], [0, 1]):
                return "lost/mixed", f"two resumes exited {[rc for _, rc in done]}"
            bad = verify_run(folder, len(SUITE))
            return ("lost/mixed", bad) if bad else ("clean", f"two resumes exited {[rc for _, rc in done]}")
        return _resume_and_verify(d, folder)
    return act


def kill_cases(rng: random.Random) -> list[Case]:
    cases = [Case("kills", f"SIGKILL at {f:.0%} of the run, --resume", kill_case(signal.SIGKILL, f))
             for f in sorted(rng.uniform(0.2, 1.0) for _ in range(4))]
    cases += [Case("kills", f"SIGTERM at {f:.0%} of the run, --resume", kill_case(signal.SIGTERM, f))
              for f in sorted(rng.uniform(0.3, 1.0) for _ in range(2))]
    f, g = rng.uniform(0.4, 0.8), rng.uniform(0.4, 0.7)
    cases.append(Case("kills", f"SIGKILL at {f:.0%}, resume SIGKILLed at {g:.0%}, --resume",
                      kill_case(signal.SIGKILL, f, again=g)))
    f = rng.uniform(0.4, 0.8)
    cases.append(Case("kills", f"SIGKILL at {f:.0%}, two --resume at once", kill_case(signal.SIGKILL, f, twice=True)))
    f = rng.uniform(0.5, 0.9)
    cases.append(Case("kills", f"SIGKILL of an --isolate run at {f:.0%}, --resume",
                      kill_case(signal.SIGKILL, f, isolate=True)))
    cases.append(Case("kills", "SIGKILL before the folder exists, --resume",
                      kill_case(signal.SIGKILL, 0.3, early=True)))
    return cases


# ---------------------------------------------------------------- output folders

def _afile(d: Path) -> None:
    (d / "afile").write_text("x")


def output_cases() -> list[Case]:
    g = str(REPO / "graphs" / SUITE[0])
    run = ["run", g, *QUICK]
    cases = [
        Case("outputs", "run --out a file", expect([*run, "--out", "afile"], "error", _afile)),
        Case("outputs", "run --out /dev/null", expect([*run, "--out", "/dev/null"], "error")),
        Case("outputs", "run --out a FIFO", expect([*run, "--out", "f"], "error", lambda d: os.mkfifo(d / "f"))),
        Case("outputs", "run --out under a file", expect([*run, "--out", "afile/x"], "error", _afile)),
        Case("outputs", "run --out a symlink to a folder", expect(
            [*run, "--out", "l"], "ok", lambda d: ((d / "t").mkdir(), os.symlink("t", d / "l")))),
        Case("outputs", "run --save-tensors a file", expect([*run, "--out", "r", "--save-tensors", "afile"],
                                                           "error", _afile)),
        Case("outputs", "run --save-tensors /dev/null", expect([*run, "--out", "r", "--save-tensors", "/dev/null"],
                                                              "error")),
        Case("outputs", "merge --out a file", expect(["merge", *map(str, WORLD.shards), "--out", "afile"],
                                                     "error", _afile)),
        Case("outputs", "merge --out /dev/null", expect(["merge", *map(str, WORLD.shards), "--out", "/dev/null"],
                                                        "error")),
        Case("outputs", "report -o a folder", expect(["report", str(WORLD.run_a), "-o", "t.html"], "error",
                                                     lambda d: (d / "t.html").mkdir())),
        Case("outputs", "report -o under a file", expect(["report", str(WORLD.run_a), "-o", "afile/r.html"],
                                                         "error", _afile)),
        Case("outputs", "compare --csv a folder", expect(["compare", str(WORLD.run_a), str(WORLD.run_b), "--csv",
                                                          "t"], "error", lambda d: (d / "t").mkdir())),
        Case("outputs", "compare --json under a file", expect(
            ["compare", str(WORLD.run_a), str(WORLD.run_b), "--json", "afile/x.json"], "error", _afile)),
        Case("outputs", "ingest --out a file", expect(["ingest", str(INGEST_OK), "--out", "afile"], "error", _afile)),
        Case("outputs", "slurm --out a file", expect(["slurm", g, "--array", "2", "--out", "afile"], "error",
                                                     _afile)),
        Case("outputs", "calibrate --out a folder", expect(["calibrate", "--out", "t"], "error",
                                                           lambda d: (d / "t").mkdir())),
    ]
    for rid in ("../escape", "a\nb", "x" * 300, "", ".hidden", "a/b"):
        cases.append(Case("outputs", f"run --run-id {rid[:20]!r}", expect([*run, "--out", "r", "--run-id", rid],
                                                                         "error")))
    for where, fs in (("read-only", WORLD.readonly), ("full", WORLD.full)):
        if fs is None:
            continue
        cases += [
            Case("outputs", f"run --out on a {where} fs", expect([*run, "--out", f"{fs}/runs"], "error")),
            Case("outputs", f"merge --out on a {where} fs", expect(
                ["merge", *map(str, WORLD.shards), "--out", f"{fs}/m"], "error")),
            Case("outputs", f"report -o on a {where} fs", expect(["report", str(WORLD.run_a), "-o", f"{fs}/r.html"],
                                                                 "error")),
            Case("outputs", f"compare --csv on a {where} fs", expect(
                ["compare", str(WORLD.run_a), str(WORLD.run_b), "--csv", f"{fs}/c.csv"], "error")),
            Case("outputs", f"ingest --out on a {where} fs", expect(["ingest", str(INGEST_OK), "--out",
                                                                     f"{fs}/i"], "error")),
            Case("outputs", f"slurm --out on a {where} fs", expect(["slurm", g, "--array", "2", "--out",
                                                                    f"{fs}/s"], "error")),
        ]
    if WORLD.full is not None:
        def noted(p: Proc, d: Path) -> tuple[str, str] | None:
            return None if "not saved" in p.out + p.err else ("silent accept", "no word that tensors were not saved")
        cases.append(Case("outputs", "run --save-tensors on a full fs", expect(
            ["run", g, "-i", "3", "-w", "1", "--out", "r", "--save-tensors", f"{WORLD.full}/t"], "ok", check=noted)))
        cases.append(Case("outputs", "run --reference-cache on a full fs", expect(
            [*run, "--out", "r", "--reference-cache", f"{WORLD.full}/c"], "ok")))
    return cases


# ---------------------------------------------------------------- compare / report / merge / ingest / recipe / ...

INGEST_OK = REPO / "tests" / "data" / "rocprof" / "v7_harness" / "hipdnn_trace_kernel_trace.csv"
DNB_OK = REPO / "tests" / "data" / "dnnbench" / "newest-layout.json"
DEEP = b"[" * 200_000 + b"]" * 200_000


def _edit_csv(name: str, f: Callable[[list[list[str]]], list[list[str]]]) -> Callable[[Path], None]:
    import csv

    def edit(folder: Path) -> None:
        path = folder / name
        rows = list(csv.reader(path.read_text().splitlines()))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(f(rows))
        path.write_text(buf.getvalue())
    return edit


def _cell(column: str, value: str) -> Callable[[list[list[str]]], list[list[str]]]:
    def f(rows: list[list[str]]) -> list[list[str]]:
        i = rows[0].index(column)
        for r in rows[1:]:
            r[i] = value
        return rows
    return f


def _replace(name: str, what: bytes | str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / name
        path.unlink(missing_ok=True)
        if what == "FIFO":
            os.mkfifo(path)
        elif isinstance(what, str):
            os.symlink(what, path)
        else:
            path.write_bytes(what)
    return edit


RUN_DAMAGE: dict[str, Callable[[Path], None]] = {
    "run.json empty": _replace("run.json", b""),
    "run.json binary": _replace("run.json", bytes(range(256)) * 4),
    "run.json a list": _replace("run.json", b"[1]"),
    "run.json deeply nested": _replace("run.json", DEEP),
    "run.json -> /dev/zero": _replace("run.json", "/dev/zero"),
    "run.json a FIFO": _replace("run.json", "FIFO"),
    "run.json wrong types": lambda f: (f / "run.json").write_text(json.dumps(
        {**json.loads((f / "run.json").read_text()), "configs": 5, "timing": "x", "seed": [1]})),
    "summary.csv binary": _replace("summary.csv", os.urandom(2048)),
    "summary.csv empty": _replace("summary.csv", b""),
    "summary.csv without median": _edit_csv("summary.csv", lambda r: [x[:r[0].index("median")] +
                                                                      x[r[0].index("median") + 1:] for x in r]),
    "summary.csv rows twice": _edit_csv("summary.csv", lambda r: r + r[1:]),
    "summary.csv median NaN": _edit_csv("summary.csv", _cell("median", "nan")),
    "summary.csv n a word": _edit_csv("summary.csv", _cell("n", "many")),
    "summary.csv median 1e400": _edit_csv("summary.csv", _cell("median", "1e400")),
    "iterations.parquet garbage": _replace("iterations.parquet", os.urandom(4096)),
    "iterations.parquet -> /dev/zero": _replace("iterations.parquet", "/dev/zero"),
}
REPORT_TOO = {"run.json -> /dev/zero", "run.json a FIFO", "run.json binary", "summary.csv median NaN",
              "summary.csv rows twice", "iterations.parquet garbage", "summary.csv without median"}


def _damaged_copy(src: Path, damage: Callable[[Path], None]) -> Callable[[Path], None]:
    def prep(d: Path) -> None:
        shutil.copytree(src, d / "B", symlinks=True)
        damage(d / "B")
    return prep


def run_input_cases() -> list[Case]:
    cases = []
    for name, damage in RUN_DAMAGE.items():
        cases.append(Case("inputs", f"compare: {name}", expect(["compare", str(WORLD.run_a), "B"], "error",
                                                               _damaged_copy(WORLD.run_b, damage))))
        if name in REPORT_TOO:
            cases.append(Case("inputs", f"report: {name}", expect(["report", "B", "-o", "r.html"], "error",
                                                                  _damaged_copy(WORLD.run_b, damage))))
        if name.startswith("summary") or name in ("run.json a FIFO", "run.json wrong types"):
            def prep(d: Path, damage=damage) -> None:
                shutil.copytree(WORLD.shards[0], d / "s1")
                damage(d / "s1")
            cases.append(Case("inputs", f"merge: {name}", expect(["merge", "s1", str(WORLD.shards[1]), "--out", "m"],
                                                                 "error", prep)))
    cases.append(Case("inputs", "merge: one shard twice", expect(
        ["merge", str(WORLD.shards[0]), str(WORLD.shards[0]), "--out", "m"], "error")))
    cases.append(Case("inputs", "merge: the shards (valid)", expect(
        ["merge", *map(str, WORLD.shards), "--out", "m"], "ok")))
    cases.append(Case("inputs", "compare: the two runs (valid)", expect(["compare", str(WORLD.run_a),
                                                                         str(WORLD.run_b)], "ok")))
    return cases


def _dnb(f: Callable[[dict], object]) -> Callable[[Path], None]:
    def prep(d: Path) -> None:
        data = json.loads(DNB_OK.read_text())
        f(data)
        (d / "b.json").write_text(json.dumps(data))
    return prep


def _first_result(data: dict) -> dict:
    return data["graphs"][0]["results"][0]


def dnb_cases() -> list[Case]:
    damage: dict[str, Callable[[Path], None]] = {
        "graphs an object": _dnb(lambda x: x.update(graphs={"a": 1})),
        "graphs absent": _dnb(lambda x: x.pop("graphs")),
        "a graph a number": _dnb(lambda x: x["graphs"].__setitem__(0, 7)),
        "results a string": _dnb(lambda x: x["graphs"][0].update(results="none")),
        "kernel a list": _dnb(lambda x: _first_result(x)["ootb"].update(kernel=[1])),
        "timing a string": _dnb(lambda x: _first_result(x)["ootb"].update(timing="fast")),
        "engine a number": _dnb(lambda x: _first_result(x).update(engine=3)),
        "n a string": _dnb(lambda x: _walk_set(x, "n", "ten")),
        "n 10**30": _dnb(lambda x: _walk_set(x, "n", 10**30)),
        "median_ms a string": _dnb(lambda x: _walk_set(x, "median_ms", "fast")),
        "median_ms -1": _dnb(lambda x: _walk_set(x, "median_ms", -1)),
        "median_ms 1e308": _dnb(lambda x: _walk_set(x, "median_ms", 1e308)),
        "NaN literal": lambda d: (d / "b.json").write_text(
            DNB_OK.read_text().replace('"median_ms": ', '"median_ms": NaN, "x": ', 1)),
        "deeply nested": _replace("b.json", DEEP),
        "binary": _replace("b.json", os.urandom(4096)),
        "empty": _replace("b.json", b""),
        "results twice": _dnb(lambda x: x["graphs"][0]["results"].extend(x["graphs"][0]["results"])),
    }
    return [Case("inputs", f"compare dnnbench: {name}", expect(["compare", str(DNB_OK), "b.json"], "error", prep))
            for name, prep in damage.items()]


def _walk_set(x: object, key: str, value: object) -> None:
    if isinstance(x, dict):
        for k in x:
            if k == key:
                x[k] = value
            else:
                _walk_set(x[k], key, value)
    elif isinstance(x, list):
        for v in x:
            _walk_set(v, key, value)


def ingest_cases() -> list[Case]:
    def csv_with(f: Callable[[list[list[str]]], list[list[str]]]) -> Callable[[Path], None]:
        def prep(d: Path) -> None:
            (d / "in").mkdir()
            shutil.copy(INGEST_OK, d / "in" / "kernel_trace.csv")
            _edit_csv("kernel_trace.csv", f)(d / "in")
        return prep

    def swap(rows: list[list[str]]) -> list[list[str]]:
        s, e = rows[0].index("Start_Timestamp"), rows[0].index("End_Timestamp")
        for r in rows[1:]:
            r[s], r[e] = r[e], r[s]
        return rows
    damage = {
        "negative start": csv_with(_cell("Start_Timestamp", "-5")),
        "end before start": csv_with(swap),
        "40-digit timestamp": csv_with(_cell("End_Timestamp", "9" * 40)),
        "start a word": csv_with(_cell("Start_Timestamp", "soon")),
        "no End_Timestamp column": csv_with(lambda r: [x[:-12] for x in r]),
        "NaN timestamp": csv_with(_cell("Start_Timestamp", "nan")),
        "binary": lambda d: ((d / "in").mkdir(), (d / "in" / "kernel_trace.csv").write_bytes(os.urandom(4096))),
        "FIFO": lambda d: ((d / "in").mkdir(), os.mkfifo(d / "in" / "kernel_trace.csv")),
        "-> /dev/zero": lambda d: ((d / "in").mkdir(), os.symlink("/dev/zero", d / "in" / "kernel_trace.csv")),
        "results.json deeply nested": lambda d: ((d / "in").mkdir(), (d / "in" / "results.json").write_bytes(DEEP)),
    }
    cases = [Case("inputs", f"ingest: {n}", expect(["ingest", "in/kernel_trace.csv" if "json" not in n else "in",
                                                     "--out", "o"], "error", p)) for n, p in damage.items()]
    cases.append(Case("inputs", "ingest: the capture (valid)", expect(["ingest", str(INGEST_OK), "--out", "o"], "ok")))
    cases.append(Case("inputs", "ingest: header only (0 kernels, said)", expect(
        ["ingest", "in/kernel_trace.csv", "--out", "o"], "ok", csv_with(lambda r: r[:1]),
        lambda p, d: None if "0 kernels" in p.out else ("silent accept", "no word of 0 kernels"))))
    return cases


def recipe_cases() -> list[Case]:
    g = str(REPO / "graphs" / SUITE[0])
    bad = {
        "min_time_ms = nan": "min_time_ms = nan", "min_time_ms = inf": "min_time_ms = inf",
        "iters = 1e17": "iters = 1e17", "iters = 10**17": "iters = 100000000000000000",
        "iters = -3": "iters = -3", "iters = 'x'": "iters = 'x'", "graphs = [1, 2]": "graphs = [1, 2]",
        "backend = 5": "backend = 5", "unknown key": "frobnicate = 1", "seed = 'zero'": "seed = 'zero'",
        "out = []": "out = []", "nested tables": "a = " + "{b = " * 5000 + "1" + "}" * 5000,
        "rtol = nan": "rtol = nan", "warmup = true": "warmup = true",
        "reference_cache_max = -1": "reference_cache_max = -1",
    }
    cases = [Case("inputs", f"recipe: {n}", expect(["run", g, "--config", "r.toml", "--out", "runs", *QUICK], "error",
                                                   lambda d, t=t: (d / "r.toml").write_text(t + "\n")))
             for n, t in bad.items()]
    for n, data in {"binary": os.urandom(2048), "empty (no graphs)": b"", "not TOML": b"[[[x"}.items():
        cases.append(Case("inputs", f"recipe: {n}", expect(["run", "--config", "r.toml", "--out", "runs"], "error",
                                                           lambda d, b=data: (d / "r.toml").write_bytes(b))))
    cases.append(Case("inputs", "recipe: sparse 8 GiB", expect(["run", "--config", "r.toml"], "error",
                                                              lambda d: os.truncate(_touch(d / "r.toml"), 8 * 2**30))))
    return cases


def _touch(p: Path) -> Path:
    p.write_bytes(b"")
    return p


def slurm_cases() -> list[Case]:
    g = str(REPO / "graphs" / SUITE[0])
    base = ["slurm", g, "--out", "s"]
    bad = {
        "--time with a newline": ["--array", "2", "--time", "1:00\n#SBATCH --x=1"],
        "--job-name with a newline": ["--array", "2", "--job-name", "a\nrm -rf /"],
        "--sbatch-arg with a newline": ["--array", "2", "--sbatch-arg", "--mem=1\nid"],
        "--partition with a CR": ["--array", "2", "--partition", "gpu\rid"],
        "--array 100000000": ["--array", "100000000"], "--array 0": ["--array", "0"],
        "--array -1": ["--array", "-1"], "--array nan": ["--array", "nan"],
        "--hipdnn-trace unterminated": ["--array", "2", "--hipdnn-trace", '"unterminated'],
        "run option with a newline": ["--array", "2", "--", "--run-id", "a\nid"],
    }
    cases = [Case("inputs", f"slurm {n}", expect([*base, *a], "error")) for n, a in bad.items()]
    cases.append(Case("inputs", "slurm (valid)", expect([*base, "--array", "2"], "ok")))
    return cases


def calibrate_cases() -> list[Case]:
    bad = {"--size -1": ["--size", "-1"], "--size 10**20": ["--size", "100000000000000000000"],
           "--dtypes bogus": ["--dtypes", "bogus"], "--copy-gib nan": ["--copy-gib", "nan"],
           "--device 99": ["--device", "99"], "no GPU": []}
    return [Case("inputs", f"calibrate {n}", expect(["calibrate", "--out", "p.toml", *a], "error"))
            for n, a in bad.items()]


def repro_cases() -> list[Case]:
    """``repro`` (a newer command) fed what every reader must refuse, when this tree has it."""
    probe = subprocess.run([sys.executable, "-m", "hipdnn_trace", "--help"], env=env(), capture_output=True,
                           text=True, cwd=REPO)
    if " repro " not in probe.stdout:
        return []
    damaged = {"/dev/zero": lambda d: None, "FIFO": lambda d: os.mkfifo(d / "x"),
               "a missing path": lambda d: None, "binary file": lambda d: (d / "x").write_bytes(os.urandom(4096)),
               "run folder with run.json -> /dev/zero": _damaged_copy(WORLD.run_b, _replace("run.json", "/dev/zero"))}
    target = {"/dev/zero": "/dev/zero", "a missing path": "missing", "run folder with run.json -> /dev/zero": "B"}
    return [Case("inputs", f"repro: {n}", expect(["repro", target.get(n, "x")], "error", prep))
            for n, prep in damaged.items()]


def _cache_damage(f: Callable[[Path, Path], None]) -> Callable[[Path], None]:
    def prep(d: Path) -> None:
        shutil.copytree(WORLD.cache, d / "cache", symlinks=True)
        entry = next(p for p in (d / "cache").rglob("entry.json")).parent
        f(entry, next(entry.glob("*.npy")))
    return prep


def _zero_data(entry: Path, npy: Path) -> None:
    raw = bytearray(npy.read_bytes())
    start = len(raw) - (len(raw) - 128) // 8 * 8   # past the header (npy v1 headers are multiples of 64)
    raw[start:] = bytes(len(raw) - start)
    npy.write_bytes(bytes(raw))


def _one_element(entry: Path, npy: Path) -> None:
    raw = bytearray(npy.read_bytes())
    raw[-3] ^= 0x40
    npy.write_bytes(bytes(raw))


def cache_cases() -> list[Case]:
    if WORLD.cache is None:
        return []
    g = str(REPO / "graphs" / SUITE[0])
    argv = ["run", g, "--out", "runs", "--reference-cache", "cache", *QUICK]

    def recomputed(p: Proc, d: Path) -> tuple[str, str] | None:
        meta = json.loads(next((d / "runs").glob("*/run.json")).read_text())
        origin = json.dumps(meta.get("reference_cache", {}).get("graphs"))
        if " 1 passed" not in p.out:
            return "silent accept", f"not passed: {last_line(p)}"
        return None if '"cache"' not in origin else ("silent accept", f"damaged entry used: {origin}")
    damage = {
        "npy data zeroed (header intact)": _zero_data, "npy one element changed": _one_element,
        "npy truncated": lambda e, n: n.write_bytes(n.read_bytes()[:200]),
        "npy a FIFO": lambda e, n: (n.unlink(), os.mkfifo(n)),
        "npy -> /dev/zero": lambda e, n: (n.unlink(), os.symlink("/dev/zero", n)),
        "entry.json binary": lambda e, n: (e / "entry.json").write_bytes(os.urandom(512)),
        "entry.json deeply nested": lambda e, n: (e / "entry.json").write_bytes(DEEP),
        "entry.json wrong types": lambda e, n: (e / "entry.json").write_text('{"format": "x", "files": 5}'),
        "entry.json a FIFO": lambda e, n: ((e / "entry.json").unlink(), os.mkfifo(e / "entry.json")),
    }
    cases = [Case("inputs", f"reference cache: {n}", expect(argv, "ok", _cache_damage(f), recomputed))
             for n, f in damage.items()]
    cases.append(Case("inputs", "reference cache: folder is a file", expect(
        ["run", g, "--out", "runs", "--reference-cache", "afile", *QUICK], "error", _afile)))
    cases.append(Case("inputs", "reference cache: --reference-cache-max nan", expect(
        [*argv, "--reference-cache-max", "nan"], "error")))
    return cases


# ---------------------------------------------------------------- the world, the runner, the table

def _mount(root: Path, name: str, options: str) -> Path | None:
    """A tmpfs at ``root/name`` (root only); ``full`` is filled to its last byte."""
    if os.geteuid() != 0:
        return None
    where = root / name
    where.mkdir()
    size = "ro,size=1m" if options == "ro" else "size=256k"
    if subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(where)], capture_output=True).returncode:
        return None
    if options == "full":
        with contextlib.suppress(OSError), open(where / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    return where


def build_world(root: Path, timeout: float) -> World:
    """The suite, two finished runs, two shards of one sweep and a reference cache entry (in parallel)."""
    w = World(root, timeout)
    w.suite = root / "suite"
    w.suite.mkdir()
    for name in SUITE:
        shutil.copy(REPO / "graphs" / name, w.suite / name.replace("/", "_"))
    jobs = {
        "a": ["run", str(w.suite), "--out", "runs", "--run-id", "A", *KILL_FLAGS],
        "b": ["run", str(w.suite), "--out", "runs", "--run-id", "B", *QUICK],
        "s1": ["run", str(w.suite), "--out", "shards", "--run-id", "s1", "--shard", "1/2", *QUICK],
        "s2": ["run", str(w.suite), "--out", "shards", "--run-id", "s2", "--shard", "2/2", *QUICK],
        "cache": ["run", str(REPO / "graphs" / SUITE[0]), "--out", "runs", "--run-id", "C", "--reference-cache",
                  "cache", *QUICK],
    }

    def one(argv: list[str]) -> tuple[Proc, float]:
        t0 = time.monotonic()
        return cli(argv, root, timeout * 3), time.monotonic() - t0
    with ThreadPoolExecutor(3) as pool:
        done = dict(zip(jobs, pool.map(one, jobs.values())))
    for name, (p, _) in done.items():
        if p.rc != 0:
            raise SystemExit(f"setup run {name} failed (exit {p.rc}): {p.err[-2000:]}")
    p = _start(["run", str(w.suite), "--out", "runs", "--run-id", "T", *KILL_FLAGS], root)
    t0 = _appears(root / "runs" / "T" / "run.json", p)
    p.communicate(timeout=timeout * 3)
    w.run_seconds = time.monotonic() - t0   # from the folder's first file to the exit: where kills land
    w.run_a, w.run_b = root / "runs" / "A", root / "runs" / "B"
    w.shards = [root / "shards" / "s1", root / "shards" / "s2"]
    w.cache = root / "cache" if any((root / "cache").rglob("entry.json")) else None
    w.full, w.readonly = _mount(root, "full", "full"), _mount(root, "ro", "ro")
    return w


def all_cases(seed: int) -> list[Case]:
    rng = random.Random(seed)
    return [*malformed_cases(), *agreement_cases(), *path_cases(), *kill_cases(rng), *output_cases(),
            *run_input_cases(), *dnb_cases(), *ingest_cases(), *recipe_cases(), *slurm_cases(),
            *calibrate_cases(), *cache_cases(), *repro_cases()]


def run_case(case: Case, root: Path, index: int) -> Case:
    d = root / "cases" / f"{index:03d}"
    d.mkdir(parents=True)
    t0 = time.monotonic()
    try:
        case.outcome, case.detail = case.act(d)
    except Exception as e:   # the attack's own failure to set a case up: shown, counted as not clean
        case.outcome, case.detail = "traceback", f"(attack script) {type(e).__name__}: {e}"[:200]
    case.seconds = time.monotonic() - t0
    with contextlib.suppress(OSError):
        shutil.rmtree(d)
    return case


def table(cases: list[Case]) -> str:
    head = "| category | tried | " + " | ".join(OUTCOMES) + " |"
    lines = [head, "|---" * (len(OUTCOMES) + 2) + "|"]
    for key, title in CATEGORIES.items():
        mine = [c for c in cases if c.category == key]
        if mine:
            counts = [sum(c.outcome == o for c in mine) for o in OUTCOMES]
            lines.append(f"| {title} | {len(mine)} | " + " | ".join(map(str, counts)) + " |")
    total = [sum(c.outcome == o for c in cases) for o in OUTCOMES]
    lines.append(f"| **all** | {len(cases)} | " + " | ".join(map(str, total)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=3, help="cases at a time (default 3)")
    ap.add_argument("--timeout", type=float, default=40.0, help="seconds before a case counts as a hang")
    ap.add_argument("--only", choices=list(CATEGORIES), action="append", help="only these categories")
    ap.add_argument("--match", default="", help="only cases whose name contains this")
    ap.add_argument("--seed", type=int, default=25, help="seed of the kill points")
    ap.add_argument("-v", "--verbose", action="store_true", help="every case's line, not only the bad ones")
    ap.add_argument("--json", type=Path, help="write every case's outcome here")
    args = ap.parse_args(argv)
    global WORLD
    root = Path(tempfile.mkdtemp(prefix="hipdnn-attack-"))
    t0 = time.monotonic()
    try:
        WORLD = build_world(root, args.timeout)
        cases = [c for c in all_cases(args.seed) if (not args.only or c.category in args.only)
                 and args.match in c.name]
        with ThreadPoolExecutor(args.jobs) as pool:
            done = list(pool.map(lambda ic: run_case(ic[1], root, ic[0]), enumerate(cases)))
    finally:
        for m in ("full", "ro"):
            if (root / m).is_mount():
                subprocess.run(["umount", str(root / m)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    for c in done:
        if args.verbose or c.outcome != "clean":
            print(f"[{c.category}] {c.name!r}: {c.outcome} ({c.seconds:.1f} s) {c.detail}")
    print()
    print(table(done))
    print(f"\n{len(done)} cases in {time.monotonic() - t0:.0f} s, {args.jobs} at a time, timeout {args.timeout:g} s")
    if args.json:
        args.json.write_text(json.dumps([c.__dict__ | {"act": None} for c in done], indent=1))
    return 0 if all(c.outcome == "clean" for c in done) else 1


if __name__ == "__main__":
    sys.exit(main())
