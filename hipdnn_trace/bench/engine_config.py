"""A dnn-providers per-engine test config (``config/<ENGINE>.toml``): how that engine's tests are judged.

Each provider keeps one TOML per engine (``dnn-providers/miopen-provider/config/MIOPEN_ENGINE.toml``, ...),
passed to its integration tests as ``--test-config``; ``run --test-config FILE`` reads the same file
(ROCm/rocm-libraries ``dnn-providers/integration-tests/docs/file-formats.md`` @ 6ed0dc19, "Per-engine test
config"; schema ``src/harness/TestSettings.hpp``):

* ``[meta]``: ``version = 1`` required; ``engine`` (optional) names the engine it is for.
* ``[[tolerance_overrides]]``: ``filters`` (globs over the full test name), ``atol``, ``rtol``; later entries win.
* ``[[validator_overrides]]``: ``filters``, ``tensors`` (globs over the output's label: its name, or ``uid=N``),
  ``validator`` = ``allclose`` | ``allclose_matching_infinities`` | ``rms`` (``rms_threshold`` required and
  positive for ``rms``, forbidden otherwise); later entries win.
* ``[[test_skips]]``: ``filters``, ``reason``, optional ``archs`` (substrings of the raw ``gcnArchName``) and
  ``platforms`` (``linux`` / ``windows``); the first matching entry wins.

Globs use ``*`` and ``?`` only, case-sensitive (upstream's Linux ``fnmatch``). The test name is the row's
graph name, which for dnn-providers bundles and sweeps is upstream's GTest name (graph/test_names.py). An
engine's config describes how far *that engine* may drift: it applies to hipDNN rows only, and with
``[meta].engine`` set, to rows asking for that engine.
"""

from __future__ import annotations

import fnmatch
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hipdnn_trace.errors import UserError

__all__ = ["VALIDATORS", "EngineConfig", "EngineConfigError", "Skip", "ValidatorOverride", "load_engine_config"]

VALIDATORS = ("allclose", "allclose_matching_infinities", "rms")
_GLOB_SPECIALS = re.compile(r"[\[\]]")


class EngineConfigError(UserError):
    """A test config that cannot be used: names the file and the field."""

    def __init__(self, path: Path, field: str, problem: str) -> None:
        super().__init__(f"{path}: {field}: {problem}" if field else f"{path}: {problem}")


@dataclass(frozen=True)
class Tolerance:
    filters: tuple[str, ...]
    atol: float
    rtol: float
    where: str          # "FILE tolerance_overrides[i]", for the row's note


@dataclass(frozen=True)
class ValidatorOverride:
    filters: tuple[str, ...]
    tensors: tuple[str, ...]
    validator: str
    rms_threshold: float | None
    where: str


@dataclass(frozen=True)
class Skip:
    filters: tuple[str, ...]
    reason: str
    archs: tuple[str, ...]
    platforms: tuple[str, ...]
    where: str


def _match(name: str, patterns: tuple[str, ...]) -> bool:
    """``*`` and ``?`` only: a ``[`` is literal, as upstream's globs have no sets."""
    return any(fnmatch.fnmatchcase(name, _GLOB_SPECIALS.sub(lambda m: f"[{m.group(0)}]", p)) for p in patterns)


@dataclass(frozen=True)
class EngineConfig:
    engine: str | None
    tolerances: tuple[Tolerance, ...]
    validators: tuple[ValidatorOverride, ...]
    skips: tuple[Skip, ...]

    def applies(self, backend: str, engine: str | None) -> bool:
        """An engine's config judges hipDNN rows, and only its own engine's when it names one."""
        if backend != "hipdnn":
            return False
        return self.engine is None or (engine or "").split(":")[-1] == self.engine

    def tolerance(self, test: str) -> Tolerance | None:
        """The last matching tolerance override (later entries win)."""
        return next((t for t in reversed(self.tolerances) if _match(test, t.filters)), None)

    def validator(self, test: str, tensor: str) -> ValidatorOverride | None:
        """The last override matching the test and the output's label (later entries win)."""
        return next((v for v in reversed(self.validators) if _match(test, v.filters) and _match(tensor, v.tensors)),
                    None)

    def skip(self, test: str, arch: str | None, platform: str | None = None) -> str | None:
        """The first matching skip's message, ``[arch <gcnArchName>] <reason>`` as upstream's harness words it."""
        here = platform or ("windows" if sys.platform.startswith("win") else "linux")
        for s in self.skips:
            if not _match(test, s.filters):
                continue
            if s.archs and not (arch and any(a in arch for a in s.archs)):
                continue
            if s.platforms and here not in s.platforms:
                continue
            return f"[arch {arch or 'none'}] {s.reason} ({s.where})"
        return None


def load_engine_config(path: Path) -> EngineConfig:
    """The file read and checked (one-line errors naming the field; a bad config stops the run before
    any graph, as upstream's binary exits 1)."""
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise EngineConfigError(path, "", exc.strerror or str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise EngineConfigError(path, "", f"not TOML ({exc})") from None
    meta = doc.get("meta")
    if not isinstance(meta, dict) or meta.get("version") != 1 or isinstance(meta.get("version"), bool):
        raise EngineConfigError(path, "[meta].version", "must be 1 (a missing or other version is refused)")
    engine = meta.get("engine")
    if engine is not None and not isinstance(engine, str):
        raise EngineConfigError(path, "[meta].engine", f"{engine!r}: must be a string")
    return EngineConfig(engine,
                        tuple(_tolerance(path, i, e) for i, e in _entries(path, doc, "tolerance_overrides")),
                        tuple(_validator(path, i, e) for i, e in _entries(path, doc, "validator_overrides")),
                        tuple(_skip(path, i, e) for i, e in _entries(path, doc, "test_skips")))


def _entries(path: Path, doc: dict[str, Any], table: str) -> list[tuple[int, dict[str, Any]]]:
    entries = doc.get(table, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise EngineConfigError(path, f"[[{table}]]", "must be an array of tables")
    return list(enumerate(entries))


def _strings(path: Path, field: str, value: Any, *, required: bool = True) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise EngineConfigError(path, field, f"{value!r}: must be a non-empty array of strings")
    return tuple(value)


def _number(path: Path, field: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (positive and value <= 0):
        kind = "positive" if positive else "non-negative"
        raise EngineConfigError(path, field, f"{value!r}: must be a {kind} number")
    return float(value)


def _tolerance(path: Path, i: int, e: dict[str, Any]) -> Tolerance:
    at = f"tolerance_overrides[{i}]"
    return Tolerance(_strings(path, f"{at}.filters", e.get("filters")), _number(path, f"{at}.atol", e.get("atol")),
                     _number(path, f"{at}.rtol", e.get("rtol")), f"{path.name} {at}")


def _validator(path: Path, i: int, e: dict[str, Any]) -> ValidatorOverride:
    at = f"validator_overrides[{i}]"
    name = e.get("validator")
    if name not in VALIDATORS:
        raise EngineConfigError(path, f"{at}.validator", f"{name!r}: must be one of {', '.join(VALIDATORS)}")
    threshold = e.get("rms_threshold")
    if name == "rms":
        threshold = _number(path, f"{at}.rms_threshold", threshold, positive=True)
    elif threshold is not None:
        raise EngineConfigError(path, f"{at}.rms_threshold", f"only the rms validator takes one (this is {name})")
    return ValidatorOverride(_strings(path, f"{at}.filters", e.get("filters")),
                             _strings(path, f"{at}.tensors", e.get("tensors")), name, threshold, f"{path.name} {at}")


def _skip(path: Path, i: int, e: dict[str, Any]) -> Skip:
    at = f"test_skips[{i}]"
    reason = e.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise EngineConfigError(path, f"{at}.reason", "required: a non-empty string")
    platforms = _strings(path, f"{at}.platforms", e.get("platforms"), required=False)
    bad = [p for p in platforms if p not in ("linux", "windows")]
    if bad:
        raise EngineConfigError(path, f"{at}.platforms", f"{bad[0]!r}: must be linux or windows")
    archs = _strings(path, f"{at}.archs", e.get("archs") or None, required=False)
    return Skip(_strings(path, f"{at}.filters", e.get("filters")), reason, archs, platforms, f"{path.name} {at}")
