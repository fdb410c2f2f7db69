"""The environment variables that change what a run computes, as run.json records them.

A failure someone else must reproduce depends on more than the flags: which GPU the process saw
(the vendors' visibility variables), the libraries' own switches (``HIPDNN_*``, ``CUDNN_*``,
``MIOPEN_*``, ``TORCH_*``, cuBLAS/hipBLASLt settings, ``NVIDIA_TF32_OVERRIDE``) and the CPU
reference's thread counts (a BLAS's summation order). ``repro`` writes them back into a bundle's
``run.sh``. Names that look like credentials are never recorded.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: exact names that matter
NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
    "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "NVIDIA_TF32_OVERRIDE",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "AMD_SERIALIZE_KERNEL",
    "AMD_SERIALIZE_COPY", "HSA_OVERRIDE_GFX_VERSION", "LD_LIBRARY_PATH", "LD_PRELOAD",
})
#: prefixes of library switches that matter
PREFIXES = ("HIPDNN_", "CUDNN_", "TORCH_", "PYTORCH_", "CUBLAS_", "CUBLASLT_", "HIPBLASLT_", "ROCBLAS_",
            "MIOPEN_", "HIPBLAS_")
#: never recorded, whatever the prefix
SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|AUTH", re.IGNORECASE)


#: names the prefixes would take that are no library switch: the tool's own launcher (repro's run.sh)
NOT_RECORDED = frozenset({"HIPDNN_TRACE"})


def matters(name: str) -> bool:
    return (name in NAMES or name.startswith(PREFIXES)) and not SECRET.search(name) and name not in NOT_RECORDED


def recorded_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """run.json's ``environment``: the folder the run started in (its relative paths are relative to
    it) and the variables that matter, sorted by name."""
    env = os.environ if environ is None else environ
    return {"cwd": str(Path.cwd()), "python": sys.executable,   # repro's run.sh falls back to it
            "variables": {k: env[k] for k in sorted(env) if matters(k)}}
