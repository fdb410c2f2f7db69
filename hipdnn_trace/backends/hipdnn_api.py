"""What the installed ``hipdnn_frontend`` can do, and hipDNN's engine ids.

The Python bindings changed a lot between builds (docs/hipdnn-format.md section 6;
``python/frontend_bindings/src/*.cpp`` in ROCm/rocm-libraries): the oldest have no
``Graph.from_json``; the next add it but select engines only softly
(``set_preferred_engine_id_ext``); newer ones add hard selection
(``create_execution_plan_ext``), read-back (``get_execution_plan_engine_id``) and the
ranked engine list (``get_ranked_engine_ids``). HIP events came first as functions
(``hip_event_create`` ...) next to a ``HipEvent`` class, later as the class only, with
a ``HipStallGate`` for staged timing. Everything here is feature detection with
``hasattr`` so one harness drives every generation and says which one it found.

Engine ids are 64-bit FNV-1a hashes of the engine name, read as signed int64
(``data_sdk/.../EngineIdHash.hpp``), so ``--engine`` takes a name, a decimal id or a
hex id and they all mean the same engine.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any

from hipdnn_trace.errors import ToolMissingError, UnsupportedError, UserError

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1

#: Names registered with HIPDNN_REGISTER_ENGINE (EngineNames.hpp, two generations).
KNOWN_ENGINE_NAMES = ("MIOPEN_ENGINE", "MIOPEN_ENGINE_DETERMINISTIC", "HIPBLASLT_ENGINE", "MIOPEN_PLUGIN")

#: ``--engine`` prefixes: hard selection (the default) or a soft preference.
FORCE, PREFER = "force", "prefer"


def to_signed64(value: int) -> int:
    value &= _MASK
    return value - (1 << 64) if value >= 1 << 63 else value


def engine_id_from_name(name: str) -> int:
    """hipDNN's engine id for ``name``: FNV-1a 64 over its bytes, as signed int64 (0 for "")."""
    if not name:
        return 0
    h = FNV_OFFSET
    for byte in name.encode("utf-8"):
        h ^= byte
        h = (h * FNV_PRIME) & _MASK
    return to_signed64(h)


def engine_hex(engine_id: int) -> str:
    """``0xA258541A6DAA1DE3``: how hipDNN's tools print an id."""
    return f"0x{engine_id & _MASK:016X}"


_KNOWN_BY_ID = {engine_id_from_name(n): n for n in KNOWN_ENGINE_NAMES}


def known_engine_name(engine_id: int) -> str:
    return _KNOWN_BY_ID.get(to_signed64(engine_id), "")


@dataclass(frozen=True)
class EngineRequest:
    """What ``--engine`` asked for: one engine id, how firmly, and how it was written."""

    engine_id: int
    mode: str            # FORCE | PREFER
    name: str = ""       # the engine's name when known
    text: str = ""       # as the user typed it

    def label(self) -> str:
        base = self.name or engine_hex(self.engine_id)
        return base if self.mode == FORCE else f"{PREFER}:{base}"


_DECIMAL = re.compile(r"^[+-]?\d+$")
_HEX = re.compile(r"^0[xX][0-9a-fA-F]+$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def parse_engine(text: str) -> EngineRequest:
    """``[force:|prefer:]NAME|DECIMAL|0xHEX`` -> EngineRequest; UserError on anything else."""
    raw = text.strip()
    mode, body = FORCE, raw
    head, sep, rest = raw.partition(":")
    if sep and head.lower() in (FORCE, PREFER):
        mode, body = head.lower(), rest.strip()
    if not body:
        raise UserError(f"--engine {text!r}: expected an engine name, decimal id or 0x hex id")
    if _DECIMAL.match(body):
        value = int(body)
        if not -(1 << 63) <= value < (1 << 64):
            raise UserError(f"--engine {text!r}: engine ids are 64-bit")
        engine_id = to_signed64(value)
        return EngineRequest(engine_id, mode, known_engine_name(engine_id), raw)
    if _HEX.match(body):
        value = int(body, 16)
        if value >= 1 << 64:
            raise UserError(f"--engine {text!r}: engine ids are 64-bit (at most 16 hex digits)")
        engine_id = to_signed64(value)
        return EngineRequest(engine_id, mode, known_engine_name(engine_id), raw)
    if not _NAME.match(body):
        raise UserError(f"--engine {text!r}: expected an engine name, decimal id or 0x hex id")
    name = next((n for n in KNOWN_ENGINE_NAMES if n == body.upper()), body)
    return EngineRequest(engine_id_from_name(name), mode, name, raw)


def _has(obj: Any, name: str) -> bool:
    return obj is not None and hasattr(obj, name)


@dataclass(frozen=True)
class FrontendApi:
    """The installed bindings and which generation of each feature they have."""

    module: Any
    version: str
    from_json: bool          # Graph.from_json: the harness cannot run a graph without it
    hard_select: bool        # Graph.create_execution_plan_ext
    read_back: bool          # Graph.get_execution_plan_engine_id
    ranked_ids: bool         # Graph.get_ranked_engine_ids
    plugin_paths: bool       # set_engine_plugin_paths + PluginLoadingMode.ABSOLUTE
    engine_info: bool        # Handle.get_engine_info
    engine_names: bool       # engine_id_to_name (built-in registry)
    events: str | None       # "class" (HipEvent.record/...) | "functions" (hip_event_*) | None
    stall_gate: str | None   # "close" (context manager) | "timed-out" | "destroy" | None

    @classmethod
    def detect(cls, module: Any) -> FrontendApi:
        from hipdnn_trace.device.hip import event_api_kind, stall_gate_kind

        graph = getattr(module, "Graph", None)
        handle = getattr(module, "Handle", None)
        mode = getattr(module, "PluginLoadingMode", None)
        return cls(
            module=module,
            version=frontend_version(module),
            from_json=_has(graph, "from_json"),
            hard_select=_has(graph, "create_execution_plan_ext"),
            read_back=_has(graph, "get_execution_plan_engine_id"),
            ranked_ids=_has(graph, "get_ranked_engine_ids"),
            plugin_paths=_has(module, "set_engine_plugin_paths") and _has(mode, "ABSOLUTE"),
            engine_info=_has(handle, "get_engine_info"),
            engine_names=_has(module, "engine_id_to_name"),
            events=event_api_kind(module),
            stall_gate=stall_gate_kind(module),
        )

    def describe(self) -> str:
        """One line for run.json: which generation of each feature was found."""
        graph = [f for f, ok in (("from_json", self.from_json), ("hard-select", self.hard_select),
                                 ("read-back", self.read_back), ("ranked-ids", self.ranked_ids)) if ok]
        parts = [
            "graph: " + (", ".join(graph) or "no from_json"),
            "engine names: " + ("handle" if self.engine_info else "registry" if self.engine_names else "hash only"),
            "plugin paths: " + ("absolute" if self.plugin_paths else "no"),
            "hip events: " + (self.events or "none"),
            "stall gate: " + (self.stall_gate or "none"),
        ]
        return "; ".join(parts)

    def device_count(self) -> int | None:
        count = getattr(self.module, "hip_get_device_count", None)
        if count is None:
            return None
        try:
            return int(count())
        except Exception:  # a failing probe means no usable device
            return 0


def frontend_version(module: Any) -> str:
    version = getattr(module, "__version__", None)
    if version and version != "0+unknown":
        return str(version)
    try:
        from importlib.metadata import version as dist_version

        return dist_version("hipdnn-frontend")
    except Exception:  # not installed as a distribution
        return str(version or "unknown")


_API: FrontendApi | None = None


def load_frontend() -> FrontendApi:
    """Import ``hipdnn_frontend`` once; ToolMissingError (one line) when it cannot be imported."""
    global _API
    if _API is None:
        try:
            module = importlib.import_module("hipdnn_frontend")
        except ImportError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ToolMissingError(f"hipdnn_frontend is not importable ({first}); install hipDNN's "
                                   "Python bindings (see docs/amd.md)") from None
        _API = FrontendApi.detect(module)
    return _API


def reset_frontend() -> None:
    """Forget the detected bindings (tests swap stand-in modules)."""
    global _API
    _API = None


def error_message(result: Any) -> str:
    getter = getattr(result, "get_message", None)
    text = getter() if callable(getter) else getattr(result, "err_msg", "")
    return " ".join(str(text or "").split()) or "no message"


def is_bad(result: Any) -> bool:
    """hipdnn_frontend ``Error`` objects say is_bad(); None (an old void binding) is fine."""
    if result is None:
        return False
    bad = getattr(result, "is_bad", None)
    if callable(bad):
        return bool(bad())
    good = getattr(result, "is_good", None)
    return not bool(good()) if callable(good) else False


def check(result: Any, what: str, *, unsupported: bool = False) -> None:
    """Raise when a binding returned a bad ``Error``: UnsupportedError where the graph or
    engine is the problem (check_support, hard selection), RuntimeError otherwise."""
    if is_bad(result):
        message = f"{what}: {error_message(result)}"
        if unsupported:
            raise UnsupportedError(message)
        raise RuntimeError(message)
