"""Backend names and where each lives ("module:class"), importing nothing (not even the backends package,
whose ``__init__`` loads numpy): a command line looks a name up here before numpy loads (``bench/early.py``
starts a fork server from it in the command's first milliseconds)."""

from __future__ import annotations

#: name -> "module:class"
REGISTRY: dict[str, str] = {
    "reference": "hipdnn_trace.backends.reference:ReferenceBackend",
    "torch": "hipdnn_trace.backends.torch_backend:TorchBackend",
    "cudnn": "hipdnn_trace.backends.cudnn:CudnnBackend",
    "hipdnn": "hipdnn_trace.backends.hipdnn:HipdnnBackend",
}
