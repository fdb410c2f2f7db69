"""Each worker's fork server, started before the suite process imports the harness.

A fork server imports the harness and the GPU libraries (torch alone took 2.6-3.4 s on the H100/H200
hosts) before it forks the worker's child; the suite process, meanwhile, imported the harness itself
(2 s there) and planned. Started from ``run``'s raw arguments, before those imports, the servers'
imports and the suite process's run side by side instead of one after the other. The plan still decides
everything: a runner adopts the server started for its environment (``ForkServer.adopt``); a guess the
plan did not confirm is killed unused (``ForkServer.discard_early``). Only plain runs are guessed: a
recipe, a resume, A/B pairs, the oracle, a profiler or ``--no-isolate`` leave it to the runner.

The server's imports are the fixed cost's longest path (the suite process's plan is done a second before
them), so its start waits for nothing: a one-GPU run looks the backend up in ``backend_registry.py``
(no numpy) and the server itself works out what to import (``resolved_preload``); deciding that here
(the backends' modules and NVML) had delayed it: it now starts 0.05-0.07 s after the command (run.json
``isolation.server_started_s``) and the suite's wait for it after planning fell from 1.09-1.19 s to 0.91-1.04 s
on an H100 (docs/benchmarks.md, tenth session).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from hipdnn_trace.bench.forkserver import ForkServer

#: what every fork server imports: the harness a child runs
HARNESS_MODULES = ("hipdnn_trace.bench.isolation", "hipdnn_trace.bench.graph_run")


def server_preload(registry: dict[str, str], reference_device: str = "cpu") -> list[str]:
    """What a fork server imports before it forks: the harness, the backends' modules and the libraries
    they declare (``preload``: torch, cuDNN's frontend; importing them makes no device context), and torch
    for a float64 reference on the GPU, so that no child (a successor neither) imports them again."""
    from hipdnn_trace import backends

    wanted = [spec.partition(":")[0] for spec in registry.values()]
    for name in registry:
        wanted.extend(getattr(backends.get(name), "preload", ()))
    if reference_device == "cuda":
        wanted.append("torch")
    return list(dict.fromkeys([*HARNESS_MODULES, *wanted]))


class _QuietParser(argparse.ArgumentParser):
    """A parser that says nothing: what it cannot read, the real parser reports after it."""

    def error(self, message: str):  # type: ignore[override]
        raise ValueError(message)


def _guess_parser() -> argparse.ArgumentParser:
    """The few ``run`` flags that decide the workers (the full parser imports the harness)."""
    p = _QuietParser(add_help=False, allow_abbrev=False)
    p.add_argument("--backend", "-b", default="reference")
    p.add_argument("--gpus")
    p.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--reference-device", default="auto")
    p.add_argument("--validate", default="reference")
    p.add_argument("--profile", default="none")
    p.add_argument("--engine", "-e")
    p.add_argument("--oracle", action="store_true")
    for flag in ("--config", "--resume", "--a", "--b", "--APath", "--BPath", "--AId", "--BId", "--profile-child"):
        p.add_argument(flag)
    return p


def start_servers(argv: Sequence[str]) -> int:
    """Start the fork servers a plain ``run`` (its arguments after ``run``) will use: one per GPU with
    ``--gpus``, else one for the isolated graphs of a GPU backend. How many started; never raises."""
    try:
        return _start(argv)
    except (Exception, SystemExit):   # noqa: BLE001 - a guess; the runner starts its own server anyway
        ForkServer.discard_early()
        return 0


def _start(argv: Sequence[str]) -> int:
    args, _ = _guess_parser().parse_known_args(list(argv))
    if (args.config or args.resume or args.a or args.b or args.APath or args.BPath or args.AId or args.BId
            or args.oracle or args.profile_child or args.profile != "none" or args.isolate is False
            or args.engine == "list"):
        return 0
    from hipdnn_trace.backend_registry import REGISTRY

    if args.backend not in REGISTRY or (args.backend == "reference" and not args.gpus):
        return 0
    if not args.gpus:   # the server works out its own imports: this process goes on without loading numpy
        ForkServer.start_early((), None, resolve=(f"{__name__}:server_imports", args.backend, REGISTRY[args.backend],
                                                  args.validate, args.reference_device))
        return 1
    from hipdnn_trace import backends
    from hipdnn_trace.bench.pins import pin_gpus
    from hipdnn_trace.device import visibility

    vendor = getattr(backends.get(args.backend), "vendor", None)
    preload = resolved_preload(args.backend, REGISTRY[args.backend], args.validate, args.reference_device)
    text = args.gpus.strip()
    indices = list(range(visibility.gpu_count(vendor))) if text == "all" else [int(part) for part in text.split(",")]
    envs = list(pin_gpus(vendor, indices).envs())
    for env in envs:
        ForkServer.start_early(preload, env)
    return len(envs)


def server_imports(backend: str, spec: str, validate: str, reference_device: str) -> list[str]:
    """What a server started early imports (it calls this first): :func:`resolved_preload`, or the harness alone
    when that fails (a backend module that does not import: the child imports it again and reports why)."""
    try:
        return resolved_preload(backend, spec, validate, reference_device)
    except Exception:   # noqa: BLE001 - a guess; the child reports what is wrong
        return list(HARNESS_MODULES)


def resolved_preload(backend: str, spec: str, validate: str, reference_device: str) -> list[str]:
    """:func:`server_preload` for a guessed run: ``backend`` (found at ``spec``, an extra backend's too) and
    torch when the validating reference will run on the GPU (asked only when the backend does not import it
    anyway: the answer reads NVML)."""
    from hipdnn_trace import backends
    from hipdnn_trace.backends.installed import torch_gpu_missing

    backends.REGISTRY.setdefault(backend, spec)
    wanted = server_preload({backend: spec})
    if (validate == "reference" and reference_device != "cpu" and "torch" not in wanted
            and not torch_gpu_missing()):
        wanted.append("torch")
    return wanted
