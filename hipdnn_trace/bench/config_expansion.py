"""Which configurations of one graph run, and why each other one cannot, decided before any input exists.

Each requested configuration becomes (config, engine, problem): ``--engine all`` expands to every engine the
backend lists, ``--engine NAME`` resolves to one, and a configuration that cannot run carries its row's
(status, message) instead: a ``--test-config`` skip, a backend that is not available, ``inspect``'s verdict
(``bench/verdict.py`` ``refusal``) or a refusal the backend knows without building (its optional
``known_refusal``). ``bench/graph_run.py`` makes inputs and the reference only for a graph where some
configuration is left to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hipdnn_trace import backends
from hipdnn_trace.backends.base import Engine
from hipdnn_trace.bench import engines as engine_choice
from hipdnn_trace.bench.bundle_support import gpu_arch
from hipdnn_trace.bench.config import ENGINE_ALL, Config
from hipdnn_trace.bench.records import ERROR, UNSUPPORTED
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.bench.verdict import SUPPORT, TIME, Limits, refusal
from hipdnn_trace.errors import UnsupportedError, UserError
from hipdnn_trace.graph.model import Graph

__all__ = ["Expanded", "expand_configs"]

#: one concrete configuration: (config, its engine or None, None or the (status, message) of a row that cannot run)
Expanded = tuple[Config, Engine | None, tuple[str, str] | None]


def _skipped(cfg: Config, settings: RunSettings, graph: Graph) -> str | None:
    """A ``--test-config`` skip for this hipDNN row on this GPU, in upstream's words (the first match wins)."""
    config = settings.engine_config
    if config is None or not config.skips or not config.applies(cfg.backend, cfg.engine):
        return None
    said = config.skip(graph.label, gpu_arch())
    return None if said is None else f"skipped by --test-config: {said}"


def expand_configs(graph: Graph, configs: Sequence[Config], settings: RunSettings, limits: Limits, source: str,
                   timed_out: list[str] | None = None) -> list[Expanded]:
    """(config, engine, problem) per concrete configuration, a problem being (status, message)
    for a configuration that cannot run: ``inspect``'s verdict for its backend (``bench/verdict.py``
    ``refusal``, an unsupported row, or an error row naming the file; ``timed_out`` collects the
    reference-time refusals; ``source`` names the file in an error row); ``--engine all`` expands here."""
    out: list[Expanded] = []
    for cfg in configs:
        options = cfg.run_options(settings.options)
        skipped = _skipped(cfg, settings, graph)
        if skipped is not None:
            out.append((cfg, None, (UNSUPPORTED, skipped)))
            continue
        try:
            backend = backends.get(cfg.backend)
            available = backend.available()
            if not available:
                out.append((cfg, None, (UNSUPPORTED, f"backend {cfg.backend} not available: {available.reason}")))
                continue
            refused = refusal(graph, cfg.backend, backend, limits)
            if refused is not None:
                problem = (UNSUPPORTED, refused.reason) if refused.kind == SUPPORT else \
                    (ERROR, f"{source}: {refused.reason}")
                if refused.kind == TIME and timed_out is not None:
                    timed_out.append(problem[1])
                out.append((cfg, None, problem))
                continue
            if cfg.engine == ENGINE_ALL:
                listed = backend.engines(graph, options)
                if not listed:
                    out.append((cfg, None, None))
                for e in listed:
                    out.append((cfg.with_engine(e.label()), e, None))
            else:
                engine = None if cfg.engine is None else engine_choice.select(backend, graph, cfg.engine, options)
                known = _known_refusal(backend, graph, cfg, engine, options)
                out.append((cfg, engine, None if known is None else (UNSUPPORTED, known)))
        except UserError as exc:
            out.append((cfg, None, (ERROR, str(exc))))
    return out


def _known_refusal(backend: Any, graph: Graph, cfg: Config, engine: Engine | None, options: Any) -> str | None:
    """The refusal a backend's ``known_refusal`` gives without building (cuDNN: a known crash, a refusal its
    plan cache remembers), so a row that cannot run costs no inputs and no reference; None when it has no
    such hook, when autotuning picks the engine later, or when asking failed (``prepare`` then says why)."""
    ask = getattr(backend, "known_refusal", None)
    if ask is None or cfg.autotune:
        return None
    try:
        return ask(graph, engine, options)
    except UnsupportedError as exc:   # what prepare would raise: the same row
        return str(exc)
    except Exception:   # asking must never cost a row: prepare builds and reports
        return None
