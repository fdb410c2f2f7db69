"""The GPU peak table behind speed of light: dense TFLOPS per data type and HBM bandwidth.

The table ships in the package (``peaks.toml`` beside this module, every value cited to its vendor
document); a user file of the same format replaces it (``--peaks FILE``), and ``hipdnn-trace calibrate``
writes one with rates measured on the machine. The row is picked by name (``--peaks h100-sxm``) or from the
GPU's own name (NVML / torch / run.json ``gpu.name``); a GPU no row matches gets no speed of light, never a
guess (docs/speed-of-light.md).
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError

#: the data-type classes a peak is given for, widest first
CLASSES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")
TABLE = Path(__file__).with_name("peaks.toml")
_TEXT_KEYS = ("vendor", "label", "source", "url", "printed")


@dataclass(frozen=True)
class Peaks:
    """One GPU's peaks: ``tflops`` by class (dense, TOPS for int8) and ``hbm_tbs`` (TB/s)."""

    name: str
    tflops: dict[str, float]
    hbm_tbs: float
    source: str
    url: str = ""
    label: str = ""
    vendor: str = ""
    printed: str = ""
    match: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    origin: str = "table"          # "table" (the package's), a user file's path, or "calibrated ..."
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """What run.json and ``inspect --json`` say about the peaks used."""
        return {"name": self.name, "label": self.label or self.name, "tflops": dict(self.tflops),
                "hbm_tbs": self.hbm_tbs, "source": self.source, "url": self.url, "origin": self.origin}


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _number(path: Path, where: str, value: Any) -> float:
    """A peak is finite and positive: ``inf`` (TOML's ``inf`` or ``1e400``) gave a speed of light of 0 ms."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise UserError(f"{path}: {where} must be a positive finite number, not {value!r:.40}")
    return float(value)


def _strings(path: Path, where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UserError(f"{path}: {where} must be a list of non-empty strings")
    return tuple(value)


def _entry(path: Path, name: str, spec: Any, origin: str) -> Peaks:
    where = f"gpus.{name}"
    if not isinstance(spec, dict):
        raise UserError(f"{path}: {where} must be a table")
    tflops = spec.get("tflops")
    if not isinstance(tflops, dict) or not tflops:
        raise UserError(f"{path}: {where}.tflops must be a table of data type = TFLOPS")
    unknown = sorted(set(tflops) - set(CLASSES))
    if unknown:
        raise UserError(f"{path}: {where}.tflops: unknown data type {unknown[0]!r} (known: {', '.join(CLASSES)})")
    texts = {k: spec.get(k, "") for k in _TEXT_KEYS}
    for k, v in texts.items():
        if not isinstance(v, str):
            raise UserError(f"{path}: {where}.{k} must be a string")
    if not texts["source"]:
        raise UserError(f"{path}: {where}.source must name where the numbers come from")
    return Peaks(name=name, tflops={k: _number(path, f"{where}.tflops.{k}", v) for k, v in tflops.items()},
                 hbm_tbs=_number(path, f"{where}.hbm_tbs", spec.get("hbm_tbs")),
                 match=_strings(path, f"{where}.match", spec.get("match", [])),
                 exclude=_strings(path, f"{where}.exclude", spec.get("exclude", [])),
                 origin=str(spec.get("origin", origin)), **texts)


def load(path: Path | None = None) -> dict[str, Peaks]:
    """Every row of a peaks file (the package's table without ``path``), by lower-case name."""
    path = path or TABLE
    origin = "table" if path == TABLE else str(path)
    try:
        data = tomllib.loads(read_gate.read_text(path, read_gate.PEAKS))
    except read_gate.ReadRefused as exc:
        raise UserError(f"{path}: cannot read the peaks file ({exc.problem})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the peaks file ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a TOML peaks file ({' '.join(str(exc).split())})") from None
    if data.get("schema") != 1:
        raise UserError(f"{path}: schema must be 1")
    gpus = data.get("gpus")
    if not isinstance(gpus, dict) or not gpus:
        raise UserError(f"{path}: no [gpus.NAME] table")
    return {_key(name): _entry(path, _key(name), spec, origin) for name, spec in gpus.items()}


def for_gpu(rows: dict[str, Peaks], gpu_name: str | None) -> Peaks | None:
    """The row whose ``match`` is the longest substring of the GPU's name; None when none matches."""
    if not gpu_name:
        return None
    low = gpu_name.lower()
    best: tuple[int, Peaks] | None = None
    for row in rows.values():
        if any(x.lower() in low for x in row.exclude):
            continue
        for m in row.match:
            if m.lower() in low and (best is None or len(m) > best[0]):
                best = (len(m), row)
    return best[1] if best else None


def resolve(asked: str | None, gpu_name: str | None) -> tuple[Peaks | None, str]:
    """The peaks to use and a one-line note on how they were chosen (or why there are none).

    ``asked`` is ``--peaks``: a row name of the package's table or a peaks file (one row: that row;
    several: the one matching the GPU). Without it the GPU's name picks the table's row. An unknown
    name or an unreadable file is a :class:`UserError`; an unknown GPU is no peaks, with the note.
    """
    if asked:
        path = Path(asked)
        if path.suffix.lower() == ".toml" or path.is_file():
            rows = load(path)
            row = next(iter(rows.values())) if len(rows) == 1 else for_gpu(rows, gpu_name)
            if row is None:
                return None, f"{path}: no row matches the GPU {gpu_name or '(none recorded)'}: no speed of light"
            return row, f"peaks {row.name} from {path}"
        rows = load()
        row = rows.get(_key(asked))
        if row is None:
            raise UserError(f"--peaks {asked}: not a peaks file nor a GPU of the table "
                            f"(known: {', '.join(rows)})")
        return row, f"peaks {row.name} (asked)"
    if not gpu_name:
        return None, "no GPU recorded: no speed of light (--peaks NAME or FILE gives one)"
    row = for_gpu(load(), gpu_name)
    if row is None:
        return None, (f"GPU {gpu_name!r} is not in the peak table: no speed of light "
                      "(--peaks NAME or FILE, or hipdnn-trace calibrate, gives one)")
    return row, f"peaks {row.name} for GPU {gpu_name!r}"


def to_toml(rows: list[Peaks]) -> str:
    """A peaks file of the table's format (what ``calibrate`` writes; ``load`` reads it back)."""
    lines = ["schema = 1", ""]
    for row in rows:
        lines.append(f"[gpus.{json.dumps(row.name)}]")
        for k in _TEXT_KEYS:
            if getattr(row, k):
                lines.append(f"{k} = {json.dumps(getattr(row, k))}")
        lines.append(f"origin = {json.dumps(row.origin)}")
        if row.match:
            lines.append(f"match = {json.dumps(list(row.match))}")
        lines.append(f"hbm_tbs = {row.hbm_tbs!r}")
        lines += ["", f"[gpus.{json.dumps(row.name)}.tflops]"]
        lines += [f"{k} = {row.tflops[k]!r}" for k in CLASSES if k in row.tflops]
        lines.append("")
    return "\n".join(lines)
