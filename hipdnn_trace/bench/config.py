"""Configurations: which backend, engine and plugin build runs a graph.

A run has one configuration, or two for A/B (``--a``/``--b`` or the seed tool's
``--APath/--AId/--BPath/--BId``). ``--engine all`` and ``--autotune`` are resolved
per graph, since engines depend on the graph. A configuration's name is what the
``config`` column shows and what ``compare`` matches across runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.errors import UserError

ENGINE_ALL = "all"
ENGINE_LIST = "list"


@dataclass(frozen=True)
class Config:
    name: str
    backend: str
    engine: str | None = None        # None (backend default), an index, a name, "all"
    plugin_path: str | None = None
    autotune: bool = False
    tuned: bool = False              # --oracle's tuned plan (bench/oracle.py): the backend tunes it

    def run_options(self, base: RunOptions) -> RunOptions:
        """``base`` as this configuration runs it: its plugin build, and the tuned switch a backend
        reads (``extra["tuned"]``) only when set, so other configurations' options stay as they were."""
        options = replace(base, plugin_path=self.plugin_path)
        return replace(options, extra={**options.extra, "tuned": True}) if self.tuned else options

    def spec(self) -> str:
        out = self.backend
        if self.engine is not None:
            out += f":{self.engine}"
        if self.plugin_path:
            out += f"@{self.plugin_path}"
        return out

    def with_engine(self, engine_label: str, suffix: bool = True) -> Config:
        name = f"{self.name}:{engine_label}" if suffix else self.name
        return replace(self, name=name, engine=engine_label, autotune=False)


_SPEC = re.compile(r"^(?P<backend>[A-Za-z0-9_]+)(?::(?P<engine>[^@]+))?(?:@(?P<path>.+))?$")


def parse_spec(text: str, flag: str) -> Config:
    """``BACKEND[:ENGINE][@PLUGIN_PATH]`` -> Config (named by the spec itself)."""
    m = _SPEC.match(text.strip())
    if not m:
        raise UserError(f"{flag} {text!r}: expected BACKEND[:ENGINE][@PLUGIN_PATH]")
    cfg = Config(name=text.strip(), backend=m["backend"], engine=m["engine"], plugin_path=m["path"])
    return cfg


def default_name(backend: str, engine: str | None, plugin_path: str | None) -> str:
    return Config("", backend, engine, plugin_path).spec()


def build_configs(
    *,
    backend: str,
    engine: str | None,
    autotune: bool,
    a: str | None,
    b: str | None,
    a_path: str | None,
    a_id: str | None,
    b_path: str | None,
    b_id: str | None,
) -> list[Config]:
    """The configurations of one run from the command-line flags."""
    seed_flags = any(v is not None for v in (a_path, a_id, b_path, b_id))
    if (a or b) and seed_flags:
        raise UserError("use either --a/--b or --APath/--AId/--BPath/--BId, not both")
    if a or b:
        if not (a and b):
            raise UserError("A/B needs both --a and --b")
        ca, cb = parse_spec(a, "--a"), parse_spec(b, "--b")
    elif seed_flags:
        if a_id is None and a_path is None or b_id is None and b_path is None:
            raise UserError("A/B needs an engine id or plugin path for both A (--AId/--APath) "
                            "and B (--BId/--BPath)")
        ca = Config(default_name(backend, a_id, a_path), backend, a_id, a_path)
        cb = Config(default_name(backend, b_id, b_path), backend, b_id, b_path)
    else:
        if engine == ENGINE_ALL and autotune:
            raise UserError("--engine all and --autotune exclude each other")
        return [Config(default_name(backend, engine, None), backend, engine, None, autotune)]
    if ca.engine == ENGINE_ALL or cb.engine == ENGINE_ALL:
        raise UserError("A/B compares two single engines; --engine all is not allowed in --a/--b")
    if ca.name == cb.name:   # A/A: same spec twice is legal (noise check); keep rows apart
        ca, cb = replace(ca, name=ca.name + "#A"), replace(cb, name=cb.name + "#B")
    return [replace(ca, autotune=autotune), replace(cb, autotune=autotune)]
