"""The seeded fill every standalone repro program carries (torch's and cuDNN's, ``repro``).

Each program must run on its own (no hipdnn-trace import), so the function is emitted as source into
each; it lives here once so the two programs fill their inputs the same way.
"""

#: ``fill(t, gen)``: seeded values of ``t``'s type written into it in place (its strides kept)
FILL_SOURCE = '''\
def fill(t, gen):
    """Seeded values of the tensor's type, written into it in place (its strides kept)."""
    dims = list(t.shape)
    if t.dtype.is_floating_point:
        t.copy_(torch.randn(dims, generator=gen).to(t.dtype))
    elif t.dtype == torch.bool:
        t.copy_(torch.randint(0, 2, dims, generator=gen).bool())
    else:
        t.copy_(torch.randint(0, 8, dims, generator=gen).to(t.dtype))
    return t
'''
