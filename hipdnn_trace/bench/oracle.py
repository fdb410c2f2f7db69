"""``run --oracle``: each graph on its out-of-the-box plan and on a tuned plan of the same backend.

The out-of-the-box (ootb) plan is what a plain run times: the backend's default or heuristic
choice. How the tuned plan is had is the backend's, declared by its ``oracle_tuning`` attribute
(ROCm dnn-benchmarking's oracle mode, ``src/dnn_benchmarking/execution/oracle.py`` @ 98fa8fcb):

* ``"autotune"`` (cuDNN): time every candidate plan the backend lists and keep the fastest that
  builds (:func:`hipdnn_trace.bench.engines.autotune`, the ``--autotune`` path);
* ``"backend"`` (torch, hipDNN): the backend reads ``RunOptions.extra["tuned"]``
  (:meth:`Config.run_options`) and tunes itself: torch with ``cudnn.benchmark`` and TunableOp,
  hipDNN with the same engine's ``global.benchmarking`` knob. Both are process-wide, so those
  backends give the tuned configuration its own ``process_key`` and the suite runs it in a child
  of its own (:mod:`hipdnn_trace.bench.split`).

The two are ordinary configurations (``NAME#ootb``, ``NAME#tuned``): both are timed and both are
validated against the float64 reference on the same inputs; ``results/oracle.py`` pairs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hipdnn_trace import backends
from hipdnn_trace.bench.config import ENGINE_ALL, ENGINE_LIST, Config
from hipdnn_trace.errors import UserError

AUTOTUNE, BACKEND = "autotune", "backend"
OOTB_SUFFIX, TUNED_SUFFIX = "#ootb", "#tuned"
#: what each bundled backend's tuned plan is, for the refusal's one line
TUNED_PLANS = "cudnn: autotune over the heuristics' plans; torch: cudnn.benchmark + TunableOp; " \
              "hipdnn: the engine's global.benchmarking knob"


def tuning(backend_name: str) -> str | None:
    """How ``backend_name`` gets its tuned plan (``AUTOTUNE``, ``BACKEND``), None: it has none."""
    how = getattr(backends.get(backend_name), "oracle_tuning", None)
    return how if how in (AUTOTUNE, BACKEND) else None


def oracle_configs(configs: Sequence[Config]) -> list[Config]:
    """The one configuration of a run as its ootb and tuned pair; UserError (one line) where
    there is nothing to pair: an A/B, an engine list, or a backend without a tuned plan."""
    if len(configs) != 1:
        raise UserError("--oracle compares one backend's out-of-the-box and tuned plans; "
                        "it excludes --a/--b and --APath/--AId/--BPath/--BId")
    cfg = configs[0]
    if cfg.autotune:
        raise UserError("--oracle already autotunes where the backend's tuned plan is an autotune; drop --autotune")
    if cfg.engine in (ENGINE_ALL, ENGINE_LIST):
        raise UserError(f"--oracle times one plan and its tuned twin; --engine {cfg.engine} is not allowed")
    how = tuning(cfg.backend)
    if how is None:
        raise UserError(f"--oracle: backend {cfg.backend} has no tuned plan to compare with its out-of-the-box "
                        f"one ({TUNED_PLANS})")
    if how == AUTOTUNE and cfg.engine is not None:
        raise UserError(f"--oracle on {cfg.backend}: the tuned plan is the fastest of all candidates and the "
                        f"out-of-the-box one the heuristic's; drop --engine {cfg.engine}")
    ootb = replace(cfg, name=cfg.name + OOTB_SUFFIX)
    tuned = replace(cfg, name=cfg.name + TUNED_SUFFIX, tuned=True, autotune=how == AUTOTUNE)
    return [ootb, tuned]


def oracle_meta(configs: Sequence[Config]) -> dict[str, Any]:
    """run.json's ``oracle`` block: which configuration is whose tuned twin, and how it is tuned."""
    ootb = [c for c in configs if not c.tuned]
    tuned = [c for c in configs if c.tuned]
    return {"pairs": [{"ootb": a.name, "tuned": b.name} for a, b in zip(ootb, tuned, strict=True)],
            "tuning": {c.backend: tuning(c.backend) for c in tuned}}
