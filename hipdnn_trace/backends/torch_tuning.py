"""``run --oracle``'s tuned torch: ``cudnn.benchmark`` and TunableOp, switched on for the tuned twin.

Both are process-wide (torch keeps its convolution algorithm choices in a cache whose key ignores
``cudnn.benchmark``; TunableOp keeps its GEMM choices for the process), so the tuned configuration
runs in a process of its own (``TorchBackend.process_key``) and the out-of-the-box one never sees
them. As ROCm dnn-benchmarking's tuned PyTorch child (``src/dnn_benchmarking/common/pytorch_tuning.py``:
``PYTORCH_TUNABLEOP_ENABLED=1``, ``PYTORCH_TUNABLEOP_TUNING=1``, ``torch.backends.cudnn.benchmark =
True``): the search runs on the first executions, which are the warm-up's, not the timed ones. TunableOp
reads and writes no results file here (a file named for this process, never written on exit), so no
earlier tuning is reused and nothing lands in the working folder.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from hipdnn_trace.graph.model import Graph

#: the environment dnn-benchmarking gives its tuned child, set before torch's first GEMM of the process
TUNED_ENV = {"PYTORCH_TUNABLEOP_ENABLED": "1", "PYTORCH_TUNABLEOP_TUNING": "1"}
#: node types whose torch kernels the search reaches (convolutions: cudnn.benchmark / MIOpen find;
#: matmul: TunableOp), as upstream's ``_PYTORCH_TUNABLE_OPS``
TUNABLE_NODES = frozenset({"ConvolutionFwdAttributes", "ConvolutionBwdAttributes", "ConvolutionWrwAttributes",
                           "MatmulAttributes"})


def enable_tuning(torch: Any, graph: Graph, gpu: bool) -> dict[str, Any]:
    """Switch the tuned settings on in this process; what was switched on, for the session's info."""
    os.environ.update(TUNED_ENV)
    torch.backends.cudnn.benchmark = True
    tunable = getattr(getattr(torch, "cuda", None), "tunable", None)
    switched = ["torch.backends.cudnn.benchmark=True"]
    if tunable is not None and gpu:
        tunable.enable(True)
        tunable.tuning_enable(True)
        if hasattr(tunable, "write_file_on_exit"):
            tunable.set_filename(os.path.join(tempfile.gettempdir(), f"hipdnn-trace-tunableop-{os.getpid()}.csv"))
            tunable.write_file_on_exit(False)
        switched.append("TunableOp on (PYTORCH_TUNABLEOP_ENABLED=1, PYTORCH_TUNABLEOP_TUNING=1)")
    reached = gpu and any(node.type in TUNABLE_NODES for node in graph.nodes)
    return {"detail": ", ".join(switched), "available": reached}
