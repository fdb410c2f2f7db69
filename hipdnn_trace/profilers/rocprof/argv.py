"""Command lines for running the harness child under rocprofv3 or legacy rocprof.

rocprofv3 options are those of rocprofiler-sdk ``source/bin/rocprofv3.py``:
``--kernel-trace``, ``--marker-trace``, ``--hip-runtime-trace``, ``-i/--input``,
``-d/--output-directory``, ``-o/--output-file``, ``-f/--output-format`` (csv json pftrace
otf2, plus rocpd from SDK 1.0.0 = ROCm 7.0, where it became the default). A ``.txt``
input with several ``pmc:`` lines makes rocprofv3 run the application once per line,
writing each run under ``<output-directory>/pmc_<n>`` (``parse_input`` sets
``sub_directory = "pmc_"``); that is how a counter set larger than the hardware allows
in one pass is collected. Legacy rocprof v1 (``rpl_run.sh``) takes the same ``pmc:``
lines in ``-i input.txt``, reruns per line, and writes ``-o results.csv`` plus
``results.stats.csv`` with ``--stats``.

Pass splitting packs counters first-fit-decreasing into passes so that no pass uses more
counters of a hardware block than ``[limits]`` of the arch profile allows (the same
packing rocprofiler-sdk's own ``counter_optimizer.py`` uses). A derived ``*_sum`` counter
costs one counter of its base's block, and two names with one base share it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hipdnn_trace.errors import ToolMissingError, UserError
from hipdnn_trace.profilers.profiles import Profile, ProfileError

#: rocprofv3 output name prefix the harness uses (``-o``): files are ``<name>_kernel_trace.csv``.
OUTPUT_NAME = "hipdnn_trace"
#: rocprofiler-sdk version that added ``--output-format rocpd`` (ROCm 7.0).
ROCPD_SINCE = (1, 0, 0)


@dataclass
class ProfilerCommand:
    """What to run and which files to write first (the counter input file)."""

    argv: list[str]
    output_dir: Path
    passes: list[tuple[str, ...]] = field(default_factory=list)
    files: dict[Path, str] = field(default_factory=dict)

    def write_files(self) -> None:
        for path, text in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def find_tool(name: str, path: str | None = None) -> str:
    """Absolute path of a profiler executable, or a one-line ToolMissingError."""
    exe = shutil.which(path or name)
    if exe is None:
        hint = {
            "rocprofv3": "install rocprofiler-sdk (ROCm >= 6.2) or put /opt/rocm/bin on PATH",
            "rocprof": "legacy rocprof ships with ROCm <= 6.x (rocprofiler package)",
        }.get(name, "install it or put it on PATH")
        raise ToolMissingError(f"{path or name} not found: {hint}")
    return exe


def parse_version(text: str) -> dict[str, str]:
    """``rocprofv3 --version`` lines ``    version: 1.0.0`` -> {"version": "1.0.0", ...}."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    nums = re.findall(r"\d+", version)
    return tuple(int(n) for n in nums[:3]) if nums else None


def rocprofv3_version(exe: str) -> str | None:
    """SDK version of a rocprofv3 executable, None if it does not say."""
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(proc.stdout + proc.stderr).get("version")


def default_formats(version: str | None) -> tuple[str, ...]:
    """CSV always (every parser reads it); rocpd too where rocprofv3 can write it."""
    v = version_tuple(version)
    return ("csv", "rocpd") if v is not None and v >= ROCPD_SINCE else ("csv",)


def counter_cost(name: str, profile: Profile) -> tuple[str | None, str]:
    """(hardware block, hardware counter) a counter occupies; unknown names are an error."""
    spec = profile.counters.get(name)
    if spec is None:
        raise ProfileError(
            f"counter {name!r} is not declared in {profile.path.name} (add it to [counters] with its block)"
        )
    return spec.block, spec.base or name


def split_passes(counters: Sequence[str], profile: Profile) -> list[tuple[str, ...]]:
    """Pack counters into as few passes as the per-block limits allow (first-fit decreasing).

    Within a pass counters keep the order they were asked in; passes are deterministic.
    """
    wanted = list(dict.fromkeys(counters))
    if not wanted:
        return []
    cost = {c: counter_cost(c, profile) for c in wanted}
    if all(block is None for block, _ in cost.values()):
        return [tuple(wanted)]  # the tool replays as often as it needs (ncu)
    per_block: dict[str, set[str]] = defaultdict(set)
    for block, hw in cost.values():
        if block is not None:
            per_block[block].add(hw)
    pressure = {b: len(hws) / profile.limits[b] for b, hws in per_block.items()}
    order = sorted(
        wanted,
        key=lambda c: (-pressure.get(cost[c][0] or "", 0.0), cost[c][0] or "", wanted.index(c)),
    )
    passes: list[dict[str, set[str]]] = []
    members: list[list[str]] = []
    for counter in order:
        block, hw = cost[counter]
        placed = False
        for used, names in zip(passes, members):
            if block is None or hw in used[block] or len(used[block]) < profile.limits[block]:
                if block is not None:
                    used[block].add(hw)
                names.append(counter)
                placed = True
                break
        if not placed:
            used = defaultdict(set)
            if block is not None:
                used[block].add(hw)
            passes.append(used)
            members.append([counter])
    return [tuple(sorted(names, key=wanted.index)) for names in members]


def pmc_input(passes: Sequence[Sequence[str]]) -> str:
    """The ``input.txt`` both rocprofv3 and rocprof v1 read: one ``pmc:`` line per pass."""
    lines = ["# hipdnn-trace counter passes: the application runs once per pmc line"]
    lines += [f"pmc: {' '.join(p)}" for p in passes]
    return "\n".join(lines) + "\n"


def rocprofv3_command(
    child: Sequence[str],
    output_dir: Path,
    *,
    counters: Sequence[str] = (),
    profile: Profile | None = None,
    formats: Sequence[str] = ("csv",),
    exe: str = "rocprofv3",
    api_trace: bool = False,
    output_name: str = OUTPUT_NAME,
) -> ProfilerCommand:
    """``rocprofv3 --kernel-trace --marker-trace [-i passes.txt] -f csv -d DIR -o NAME -- child``.

    With counters, outputs land in ``DIR/pmc_<n>/`` (one directory per pass), else in DIR.
    ``api_trace`` adds ``--hip-runtime-trace`` so the iteration join can use the launching
    call (exact even for kernels that start after their iteration's range closed).
    """
    if not child:
        raise UserError("rocprofv3: no command to profile")
    bad = [f for f in formats if f not in ("csv", "json", "pftrace", "otf2", "rocpd")]
    if bad or not formats:
        raise UserError(f"rocprofv3: unsupported output format(s) {', '.join(bad) or '(none)'}")
    if "csv" not in formats:
        raise UserError("rocprofv3: csv output is required (the parsers read it)")
    argv = [exe, "--kernel-trace", "--marker-trace"]
    if api_trace:
        argv.append("--hip-runtime-trace")
    files: dict[Path, str] = {}
    passes: list[tuple[str, ...]] = []
    if counters:
        if profile is None:
            raise UserError("rocprofv3: counters need an arch profile to split them into passes")
        passes = split_passes(counters, profile)
        input_path = output_dir / f"{output_name}_counters.txt"
        files[input_path] = pmc_input(passes)
        argv += ["-i", str(input_path)]
    argv += ["--output-format", *formats, "-d", str(output_dir), "-o", output_name, "--", *child]
    return ProfilerCommand(argv, output_dir, passes, files)


def rocprof_command(
    child: Sequence[str],
    output_dir: Path,
    *,
    counters: Sequence[str] = (),
    profile: Profile | None = None,
    exe: str = "rocprof",
) -> ProfilerCommand:
    """Legacy ``rocprof [-i input.txt --timestamp on] --stats -d DIR/data -o DIR/results.csv child``.

    Without counters rocprof's kernel trace (``--stats``) already has Begin/End timestamps;
    with counters ``--timestamp on`` adds them to the counter rows.
    """
    if not child:
        raise UserError("rocprof: no command to profile")
    argv = [exe]
    files: dict[Path, str] = {}
    passes: list[tuple[str, ...]] = []
    if counters:
        if profile is None:
            raise UserError("rocprof: counters need an arch profile to split them into passes")
        passes = split_passes(counters, profile)
        input_path = output_dir / "input.txt"
        files[input_path] = pmc_input(passes)
        argv += ["-i", str(input_path), "--timestamp", "on"]
    argv += ["--stats", "-d", str(output_dir / "data"), "-o", str(output_dir / "results.csv"), *child]
    return ProfilerCommand(argv, output_dir, passes, files)
