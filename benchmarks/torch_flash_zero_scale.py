"""Library-only repro (no hipdnn-trace code): torch's flash SDPA kernel with ``scale=0.0`` returns NaN for
some key lengths (those that leave a partial key block) and is finite for others; torch's math kernel and
any nonzero scale (1e-30) are finite. Issue 33 item 2; results in docs/benchmarks.md.

    python benchmarks/torch_flash_zero_scale.py     # needs an NVIDIA GPU and torch
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name())
torch.manual_seed(0)
for sk in (64, 128, 192, 200, 256, 255, 579, 640):
    for d in (64, 128):
        q = torch.randn(1, 2, 128, d, device="cuda", dtype=torch.float16)
        k = torch.randn(1, 2, sk, d, device="cuda", dtype=torch.float16)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            o = F.scaled_dot_product_attention(q, k, k, scale=0.0)
        bad = (~torch.isfinite(o)).sum().item()
        print(f"MHA fp16 Sq=128 Sk={sk} d={d} scale=0.0 flash: nonfinite {bad} of {o.numel()}")
        with sdpa_kernel([SDPBackend.MATH]):
            m = F.scaled_dot_product_attention(q, k, k, scale=0.0)
        print(f"{'':>45s} math: nonfinite {(~torch.isfinite(m)).sum().item()}")
