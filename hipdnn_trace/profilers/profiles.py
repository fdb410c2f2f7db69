"""Counter profiles (profiles/<arch>.toml) and the GPU peak table (profiles/peaks.toml).

A profile says, for one GPU architecture and one profiler: which counters exist and
which hardware block each uses (for pass splitting), the per-block limits, how to turn
counters into FLOPs / bytes / named metrics, and named presets (basic, memory, compute,
roofline) that ``--profile`` selects. Loading checks everything a typo could break: a
preset counter without a block, a formula naming an undeclared counter or an unknown
``$constant``, a block without a limit. profiles/README.md documents the format.
"""

from __future__ import annotations

import math
import os
import sys
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.expr import Expr, ExprError, parse

#: ``$constants`` a formula may use; values come from the agent info or the peak table.
CONSTANTS = ("num_xcd", "cu_count", "sm_count", "max_clock_mhz", "wave_size",
             # rocprof-compute's sysinfo facts ($max_waves_per_cu, $lds_banks_per_cu, $total_l2_chan,
             # $hbmBandwidth = max_mclk / 1000 * 32 * num_hbm_channels in GB/s)
             "max_waves_per_cu", "lds_banks_per_cu", "l2_channels", "hbm_gbps")
#: Columns every wide counter frame has besides counters (formulas may read them).
BUILTIN_COLUMNS = ("duration_ns",)
NO_BLOCK = "-"


class ProfileError(UserError):
    """A profile or peak-table file with a problem; the message names file and key."""


def profiles_dir() -> Path:
    """Where the counter profiles live.

    ``$HIPDNN_TRACE_PROFILES`` wins; then ``profiles/`` of a source checkout (editable
    installs); then the copy a wheel installs under ``<prefix>/share/hipdnn-trace/profiles``.
    """
    env = os.environ.get("HIPDNN_TRACE_PROFILES")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2] / "profiles"
    if checkout.is_dir():
        return checkout
    return Path(sys.prefix) / "share" / "hipdnn-trace" / "profiles"


@dataclass(frozen=True)
class CounterSpec:
    name: str
    block: str | None      # hardware block (AMD); None: the tool schedules passes itself
    base: str | None       # derived counter (``TCC_HIT_sum``) -> the hardware counter it costs


@dataclass(frozen=True)
class Metric:
    name: str
    expr: Expr
    unit: str
    help: str


@dataclass(frozen=True)
class Preset:
    name: str
    help: str
    counters: tuple[str, ...]


@dataclass(frozen=True)
class Profile:
    path: Path
    arch: str
    vendor: str
    tool: str
    gpus: tuple[str, ...]
    limits: dict[str, int]
    counters: dict[str, CounterSpec]
    flops: dict[str, Expr]
    iops: dict[str, Expr]
    bytes: dict[str, Expr]
    metrics: dict[str, Metric]
    presets: dict[str, Preset]
    duration: Expr | None = None

    def preset(self, name: str) -> Preset:
        if name not in self.presets:
            raise ProfileError(
                f"{self.path.name}: no preset {name!r} for {self.arch} (choose from {', '.join(self.presets)})"
            )
        return self.presets[name]

    def formulas(self) -> dict[str, Expr]:
        """Every formula by a dotted key (flops.fp16_matrix, metrics.gpu_busy, ...)."""
        out = {f"flops.{k}": v for k, v in self.flops.items()}
        out.update({f"iops.{k}": v for k, v in self.iops.items()})
        out.update({f"bytes.{k}": v for k, v in self.bytes.items()})
        out.update({f"metrics.{k}": m.expr for k, m in self.metrics.items()})
        if self.duration is not None:
            out["duration"] = self.duration
        return out


@dataclass(frozen=True)
class GpuSpec:
    name: str
    vendor: str
    arch: str
    match: tuple[str, ...]
    dram_gbps: float
    tflops: dict[str, float]
    source: str
    cu_count: int | None = None
    sm_count: int | None = None
    max_clock_mhz: int | None = None
    num_xcd: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def constants(self) -> dict[str, float]:
        out = {"cu_count": self.cu_count, "sm_count": self.sm_count, "max_clock_mhz": self.max_clock_mhz,
               "num_xcd": self.num_xcd}
        return {k: float(v) for k, v in out.items() if v is not None}


def normalize_arch(arch: str | None) -> str | None:
    """``gfx942:sramecc+:xnack-`` -> ``gfx942``; ``sm_90a`` -> ``sm_90``; ``9.0`` -> ``sm_90``."""
    if not arch:
        return None
    a = arch.strip().lower().split(":")[0]
    if a.startswith("sm_") and a[-1:].isalpha():
        a = a[:-1]
    if a.replace(".", "").isdigit() and "." in a:
        major, minor = a.split(".", 1)
        a = f"sm_{major}{minor}"
    return a


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = read_gate.read_text(path, read_gate.PROFILE)
    except read_gate.ReadRefused as exc:
        raise ProfileError(str(exc)) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: invalid TOML: {exc}") from None


def _table(path: Path, data: dict[str, Any], key: str, required: bool = True) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        if required:
            raise ProfileError(f"{path.name}: missing [{key}] table")
        return {}
    if not isinstance(value, dict):
        raise ProfileError(f"{path.name}: {key} must be a table")
    return value


def _str(path: Path, data: dict[str, Any], key: str, where: str = "") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ProfileError(f"{path.name}: {where}{key} must be a non-empty string")
    return value


def _formula(path: Path, key: str, text: Any) -> Expr:
    try:
        return parse(text)
    except ExprError as exc:
        raise ProfileError(f"{path.name}: {key}: {exc}") from None


def load_profile(path: Path) -> Profile:
    """Parse and check one profile file."""
    data = _read_toml(path)
    if data.get("schema") != 1:
        raise ProfileError(f"{path.name}: schema must be 1")
    arch = normalize_arch(_str(path, data, "arch"))
    assert arch is not None
    vendor = _str(path, data, "vendor")
    tool = _str(path, data, "tool")
    gpus = data.get("gpus", [])
    if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
        raise ProfileError(f"{path.name}: gpus must be a list of peaks.toml names")

    limits: dict[str, int] = {}
    for block, n in _table(path, data, "limits", required=False).items():
        if not isinstance(n, int) or n < 1:
            raise ProfileError(f"{path.name}: limits.{block} must be a positive integer")
        limits[block] = n

    counters: dict[str, CounterSpec] = {}
    for name, spec in _table(path, data, "counters").items():
        if not isinstance(spec, str) or not spec:
            raise ProfileError(f"{path.name}: counters.{name} must be \"BLOCK\", \"BLOCK:BASE\" or \"-\"")
        if spec == NO_BLOCK:
            counters[name] = CounterSpec(name, None, None)
            continue
        block, _, base = spec.partition(":")
        if block not in limits:
            raise ProfileError(f"{path.name}: counters.{name}: block {block!r} has no entry in [limits]")
        counters[name] = CounterSpec(name, block, base or None)

    def formulas(key: str) -> dict[str, Expr]:
        return {k: _formula(path, f"{key}.{k}", v) for k, v in _table(path, data, key, required=False).items()}

    flops, iops, nbytes = formulas("flops"), formulas("iops"), formulas("bytes")
    metrics: dict[str, Metric] = {}
    for name, spec in _table(path, data, "metrics", required=False).items():
        if not isinstance(spec, dict):
            raise ProfileError(f"{path.name}: metrics.{name} must be a table with expr, unit, help")
        metrics[name] = Metric(
            name,
            _formula(path, f"metrics.{name}.expr", spec.get("expr")),
            str(spec.get("unit", "")),
            str(spec.get("help", "")),
        )
    duration = _formula(path, "duration", data["duration"]) if "duration" in data else None

    presets: dict[str, Preset] = {}
    for name, spec in _table(path, data, "presets").items():
        if not isinstance(spec, dict) or not isinstance(spec.get("counters"), list):
            raise ProfileError(f"{path.name}: presets.{name} needs a counters list")
        names = tuple(spec["counters"])
        unknown = [c for c in names if c not in counters]
        if unknown:
            raise ProfileError(f"{path.name}: presets.{name}: counter(s) not declared in [counters]: "
                               f"{', '.join(unknown)}")
        if len(set(names)) != len(names):
            raise ProfileError(f"{path.name}: presets.{name}: a counter is listed twice")
        presets[name] = Preset(name, str(spec.get("help", "")), names)

    profile = Profile(path, arch, vendor, tool, tuple(gpus), limits, counters, flops, iops, nbytes, metrics, presets,
                      duration)
    for key, expr in profile.formulas().items():
        bad = sorted(n for n in expr.names if n not in counters and n not in BUILTIN_COLUMNS)
        if bad:
            raise ProfileError(f"{path.name}: {key}: formula reads undeclared counter(s) {', '.join(bad)}")
        bad = sorted(c for c in expr.constants if c not in CONSTANTS)
        if bad:
            raise ProfileError(f"{path.name}: {key}: unknown constant(s) ${', $'.join(bad)} "
                               f"(known: {', '.join(CONSTANTS)})")
    return profile


def load_profiles(directory: Path | None = None) -> dict[str, Profile]:
    """Every ``<arch>.toml`` in the profiles directory, by architecture."""
    directory = directory or profiles_dir()
    if not directory.is_dir():
        raise ProfileError(f"{directory}: profiles directory not found (set HIPDNN_TRACE_PROFILES)")
    out: dict[str, Profile] = {}
    for path in sorted(directory.glob("*.toml")):
        if path.name == "peaks.toml":
            continue
        profile = load_profile(path)
        if profile.arch in out:
            raise ProfileError(f"{path.name}: arch {profile.arch} already defined by {out[profile.arch].path.name}")
        out[profile.arch] = profile
    return out


@lru_cache(maxsize=8)
def _cached_profiles(directory: str) -> dict[str, Profile]:
    return load_profiles(Path(directory))


def profile_for_arch(arch: str, directory: Path | None = None) -> Profile:
    key = normalize_arch(arch)
    profiles = _cached_profiles(str(directory or profiles_dir()))
    if key not in profiles:
        raise ProfileError(f"no counter profile for {arch} (profiles exist for {', '.join(sorted(profiles))})")
    return profiles[key]  # type: ignore[index]


def _peak(path: Path, key: str, value: object) -> float:
    """A finite positive peak: ``inf`` or ``1e400`` made every speed of light 0 ms."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ProfileError(f"{path.name}: {key} must be a positive finite number, not {value!r:.40}")
    return float(value)


def load_peaks(path: Path | None = None) -> dict[str, GpuSpec]:
    path = path or profiles_dir() / "peaks.toml"
    data = _read_toml(path)
    gpus = _table(path, data, "gpus")
    out: dict[str, GpuSpec] = {}
    for name, spec in gpus.items():
        where = f"gpus.{name}."
        if not isinstance(spec, dict):
            raise ProfileError(f"{path.name}: gpus.{name} must be a table")
        tflops = spec.get("tflops")
        if not isinstance(tflops, dict) or not tflops:
            raise ProfileError(f"{path.name}: {where}tflops table missing")
        for k, v in tflops.items():
            _peak(path, f"{where}tflops.{k}", v)
        dram = _peak(path, f"{where}dram_gbps", spec.get("dram_gbps"))
        for key in ("cu_count", "sm_count", "max_clock_mhz", "num_xcd"):
            v = spec.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                raise ProfileError(f"{path.name}: {where}{key} must be a positive integer, not {v!r:.40}")
        match = spec.get("match", [name])
        if not isinstance(match, list) or not all(isinstance(m, str) for m in match):
            raise ProfileError(f"{path.name}: {where}match must be a list of strings")
        out[name] = GpuSpec(
            name=name,
            vendor=_str(path, spec, "vendor", where),
            arch=normalize_arch(_str(path, spec, "arch", where)) or "",
            match=tuple(match),
            dram_gbps=float(dram),
            tflops={k: float(v) for k, v in tflops.items()},
            source=_str(path, spec, "source", where),
            cu_count=spec.get("cu_count"),
            sm_count=spec.get("sm_count"),
            max_clock_mhz=spec.get("max_clock_mhz"),
            num_xcd=spec.get("num_xcd"),
        )
    return out


def select_gpu(
    peaks: dict[str, GpuSpec],
    arch: str | None,
    product: str | None = None,
    cu_count: int | None = None,
    name: str | None = None,
) -> GpuSpec | None:
    """The peak-table entry for a GPU: by explicit name, else product-name match, else
    CU count within the architecture, else the architecture's only entry. None when unsure."""
    if name:
        if name not in peaks:
            raise ProfileError(f"--gpu {name}: not in peaks.toml (known: {', '.join(peaks)})")
        return peaks[name]
    arch = normalize_arch(arch)
    candidates = [g for g in peaks.values() if arch is None or g.arch == arch]
    if product:
        low = product.lower()
        hits = [g for g in candidates if any(m.lower() in low for m in g.match)]
        if hits and cu_count:
            # "MI250X/MI250" names both parts; an H100 PCIe also says "H100": count decides.
            hits = [g for g in hits if cu_count in (g.cu_count, g.sm_count)]
            return hits[0] if hits else None
        if hits:
            return hits[0]
    if cu_count:
        hits = [g for g in candidates if cu_count in (g.cu_count, g.sm_count)]
        if len(hits) == 1:
            return hits[0]
        return None
    if arch is not None and len(candidates) == 1:
        return candidates[0]
    return None
