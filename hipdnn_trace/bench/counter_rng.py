"""Counter-based input values: element i of a tensor is a pure function of (seed, graph, uid, i).

Why counter-based: a stream generator (numpy's PCG64) must be run from the start on one
machine, so a GPU run drew every input on the host and uploaded it. Here any element can be
made anywhere, in any order, so the host fills big tensors in cache-sized chunks on every
core, and a GPU backend makes its inputs on the device with the same bits.

Why only exact operations: numpy and torch (CPU or CUDA) must agree bit for bit, so the
per-element work is 32-bit integer arithmetic (exact everywhere) and a table lookup:

* a per-tensor key (the sha256 digest of ``"{seed}:{graph_id}:{uid}"``, as the old PCG64 seed)
  gives an odd Weyl increment ``gamma`` and an offset; hash ``j`` is murmur3's fmix32 of
  ``lo(j) * gamma + offset(hi(j))`` mod 2^32 (SplitMix's construction; ``hi`` starts a new
  offset every 2^32 hashes so huge tensors never repeat);
* each hash is two 16-bit words, element i reading word i (``hash(i >> 1)``'s low half for
  even i): types of 16 bits or fewer look the word up in a 2^16-entry table already in the
  tensor's type (its entries made once on the host by ``round_to``, uploaded as raw bits, so a
  device never converts a value itself);
* float and double read words 2i and 2i+1: the first picks a float32 table entry, the second
  is XORed into its 16 low mantissa bits (sign and exponent stay, so domains hold), which
  gives 2^32 distinct values; double is that float32 widened (exact).

The float32 table holds 2^14 standard-normal quantiles (``statistics.NormalDist``, rounded to
float32) times 2^-2 .. 2^1, so values have both signs and span several binary orders; the
"positive" (|x| + 0.5) and "nonzero" (sign(x) (|x| + 0.25)) domains are tables of their own.
:data:`GENERATOR` names this recipe; any change to the bits must change it (the known-answer
test pins values), because the reference cache and ``--resume`` trust it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import statistics
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from hipdnn_trace.graph import dtypes

#: Name and version of the value recipe (bump on any change to the bits it makes).
GENERATOR = "counter-fmix32-v1"
#: Elements per chunk a host thread fills at a time (its scratch stays in L2).
CHUNK = 1 << 16
#: Elements per chunk on a device (bounds its int64 scratch to a few hundred MB).
DEVICE_CHUNK = 1 << 24
#: Below this many elements a tensor is filled on the calling thread.
THREADED_MIN = 4 * CHUNK
#: Value domains a float table exists for.
DOMAINS = ("any", "positive", "nonzero")
#: Integer ranges [lo, hi) per type (others: [-8, 9)).
INT_RANGES = {"uint8": (0, 16), "boolean": (0, 2)}
#: Types whose elements read two words (a table entry and 16 low mantissa bits).
WIDE = ("float", "double")

_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9
_C1, _C2 = 0x85EBCA6B, 0xC2B2AE35
_QUANTILE_BITS = 14


def fmix32(x: int) -> int:
    """murmur3's 32-bit finalizer on one Python int (keys and offsets)."""
    x &= _M32
    x ^= x >> 16
    x = (x * _C1) & _M32
    x ^= x >> 13
    x = (x * _C2) & _M32
    return x ^ (x >> 16)


@dataclass(frozen=True)
class Stream:
    """One tensor's counter stream: ``key`` seeds the offsets, ``gamma`` is the odd Weyl step."""

    key: int
    gamma: int

    @classmethod
    def of(cls, seed: int, graph_id: str, uid: int) -> Stream:
        """Keyed per (seed, graph, tensor), as the old generator was: adding a tensor changes no other."""
        digest = hashlib.sha256(f"{seed}:{graph_id}:{uid}".encode()).digest()
        return cls(int.from_bytes(digest[:4], "little"), _gamma(int.from_bytes(digest[4:8], "little")))

    def offset(self, hi: int) -> int:
        """What block ``hi`` (hashes hi * 2^32 ..) adds to ``lo * gamma``."""
        return fmix32(self.key + hi * _GOLDEN)


def _gamma(bits: int) -> int:
    """An odd increment with many bit transitions (SplitMix's rule: few transitions mix badly)."""
    g = fmix32(bits) | 1
    return g ^ 0xAAAAAAAA if bin(g ^ (g >> 1)).count("1") < 12 else g


def _segments(start: int, count: int) -> list[tuple[int, int]]:
    """[start, start + count) split where hi(j) changes, as (start, count) pairs."""
    out = []
    while count > 0:
        n = min(count, (1 << 32) - (start & _M32))
        out.append((start, n))
        start, count = start + n, count - n
    return out


# ---------------------------------------------------------------- hashes


def _mix_numpy(x: np.ndarray, t: np.ndarray) -> None:
    """fmix32 in place on uint32 ``x`` (``t``: scratch of the same size)."""
    np.right_shift(x, 16, out=t)
    np.bitwise_xor(x, t, out=x)
    np.multiply(x, np.uint32(_C1), out=x)
    np.right_shift(x, 13, out=t)
    np.bitwise_xor(x, t, out=x)
    np.multiply(x, np.uint32(_C2), out=x)
    np.right_shift(x, 16, out=t)
    np.bitwise_xor(x, t, out=x)


def hashes(stream: Stream, start: int, count: int) -> np.ndarray:
    """Hashes ``start .. start + count - 1`` of ``stream`` (uint32): the reference definition."""
    out = np.empty(count, dtype=np.uint32)
    done = 0
    for s, n in _segments(start, count):
        _hash_segment(stream, s, out[done:done + n], np.empty(n, dtype=np.uint32), None)
        done += n
    return out


def _hash_segment(stream: Stream, start: int, x: np.ndarray, t: np.ndarray, steps: np.ndarray | None) -> None:
    """Hashes of one segment (no 2^32 crossing) into ``x``; ``steps``: arange * gamma, if cached."""
    n = x.size
    if steps is None:
        steps = np.multiply(np.arange(n, dtype=np.uint32), np.uint32(stream.gamma), out=x)
    first = ((start & _M32) * stream.gamma + stream.offset(start >> 32)) & _M32
    np.add(steps[:n], np.uint32(first), out=x)                 # lo(j) * gamma + offset, mod 2^32
    _mix_numpy(x, t)


def _mul32_torch(x: Any, c: int) -> Any:
    """x * c mod 2^32 for int64 tensors holding uint32 values, without int64 overflow."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & _M32


def hashes_torch(stream: Stream, start: int, count: int, device: Any) -> Any:
    """The same hashes as :func:`hashes`, as an int64 torch tensor on ``device`` (torch has no
    full uint32 arithmetic on CUDA; every product is split so it stays below 2^63)."""
    import torch

    parts = []
    for s, n in _segments(start, count):
        lo = torch.arange(s & _M32, (s & _M32) + n, dtype=torch.int64, device=device)
        x = (_mul32_torch(lo, stream.gamma) + stream.offset(s >> 32)) & _M32
        x ^= x >> 16
        x = _mul32_torch(x, _C1)
        x ^= x >> 13
        x = _mul32_torch(x, _C2)
        x ^= x >> 16
        parts.append(x)
    if len(parts) == 1:
        return parts[0]
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64, device=device)


# ---------------------------------------------------------------- tables


@functools.cache
def _quantiles() -> np.ndarray:
    """2^14 standard-normal quantiles at (m + 0.5) / 2^14, rounded to float32 (stdlib only)."""
    dist = statistics.NormalDist()
    n = 1 << _QUANTILE_BITS
    return np.array([dist.inv_cdf((m + 0.5) / n) for m in range(n)], dtype=np.float64).astype(np.float32)


@functools.cache
def float_table(domain: str) -> np.ndarray:
    """The 2^16 float32 values of ``domain``: word w -> quantile (w & 0x3FFF) * 2^((w >> 14) - 2)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}")
    words = np.arange(1 << 16)
    scale = np.exp2((words >> _QUANTILE_BITS) - 2.0)          # exact powers of two
    base = _quantiles()[words & ((1 << _QUANTILE_BITS) - 1)].astype(np.float64) * scale
    if domain == "positive":
        base = np.abs(base) + 0.5
    elif domain == "nonzero":
        base = np.copysign(np.abs(base) + 0.25, base)
    table = base.astype(np.float32)
    table.flags.writeable = False
    return table


@functools.cache
def table(domain: str, dtype: str) -> np.ndarray:
    """The 2^16 values a word maps to for a tensor of ``dtype`` (its numpy type); wide types get
    the float32 table (their elements add mantissa bits). UnsupportedError for types without a
    host form, as ``round_to`` says."""
    from hipdnn_trace.backends.reference.ops.rounding import round_to

    info = dtypes.lookup(dtype)
    if dtype in WIDE:
        return float_table(domain)
    if info.is_float:
        values = float_table(domain).astype(np.float64)
    else:
        lo, hi = INT_RANGES.get(dtype, (-8, 9))
        values = (lo + ((np.arange(1 << 16, dtype=np.int64) * (hi - lo)) >> 16)).astype(np.float64)
    out = round_to(values, dtype)
    out.flags.writeable = False
    return out


@functools.cache
def table_domain(domain: str) -> str:
    """The table a port's domain draws from: "any" for domains without one (constants)."""
    return domain if domain in DOMAINS else "any"


def drawn(dims: Sequence[int], dtype: str, domain: str, stream: Stream) -> np.ndarray:
    """Counter-generated values (host): element i depends only on (stream, i); ``dtype``'s numpy type."""
    values = table(table_domain(domain), dtype)
    out = np.empty(math.prod(dims), dtype=np.float64 if dtype == "double" else values.dtype)
    fill(out, stream, values, wide=dtype in WIDE)
    return out.reshape(tuple(dims))


def tables_digest() -> str:
    """sha256 of the float tables: the quantiles come from libm's log, so a cache key that holds
    this digest can never mix values made from different tables."""
    digest = hashlib.sha256()
    for domain in DOMAINS:
        digest.update(float_table(domain).tobytes())
    return digest.hexdigest()[:16]


def _raw(a: np.ndarray) -> np.ndarray:
    """``a`` viewed as unsigned integers of its item size (gathers move bits, never values)."""
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


# ---------------------------------------------------------------- host fill


def cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # no affinity API (macOS)
        return os.cpu_count() or 1


def fill(out: np.ndarray, stream: Stream, values: np.ndarray, *, wide: bool, start: int = 0,
         chunk: int = CHUNK, threads: int | None = None) -> None:
    """Fill flat contiguous ``out`` with elements ``start .. start + out.size - 1`` of ``stream``.

    ``values``: :func:`table`'s array (out's type; float32 when ``wide``, out then float32 or
    float64). Chunks go to ``threads`` workers (default: :func:`cores`); numpy's ufuncs and
    ``take`` release the GIL. The bits never depend on ``chunk`` or ``threads``.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be at least one element, not {chunk}")
    offsets = list(range(0, out.size, chunk))
    threads = min(threads or cores(), len(offsets))
    job = _Job(out, stream, values, wide, start, chunk)
    if threads <= 1 or out.size < THREADED_MIN:
        job.run(offsets)
        return
    groups = [offsets[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="inputs") as pool:
        for _ in pool.map(job.run, groups):
            pass


class _Job:
    """One tensor's fill; :meth:`run` handles a list of chunk offsets with its own scratch."""

    def __init__(self, out: np.ndarray, stream: Stream, values: np.ndarray, wide: bool, start: int,
                 chunk: int) -> None:
        self.out, self.stream, self.wide, self.start, self.chunk = out, stream, wide, start, chunk
        self.raw_values = values.view(np.uint32) if wide else _raw(values)
        self.raw_out = None if out.dtype == np.float64 and wide else _raw(out)

    def run(self, offsets: list[int]) -> None:
        per = self.chunk if self.wide else self.chunk // 2 + 1      # most hashes one chunk needs
        x, t = np.empty(per, dtype=np.uint32), np.empty(per, dtype=np.uint32)
        index = np.empty(2 * per, dtype=np.intp)
        steps = np.multiply(np.arange(per, dtype=np.uint32), np.uint32(self.stream.gamma))
        for p in offsets:
            q = min(self.out.size, p + self.chunk)
            if self.wide:
                self._wide(p, q, x, t, index, steps)
            else:
                self._narrow(p, q, x, t, index, steps)

    def _hash(self, first: int, count: int, x: np.ndarray, t: np.ndarray, steps: np.ndarray) -> np.ndarray:
        done = 0
        for s, n in _segments(first, count):
            _hash_segment(self.stream, s, x[done:done + n], t[done:done + n], steps if done == 0 else None)
            done += n
        return x[:count]

    def _narrow(self, p: int, q: int, x: np.ndarray, t: np.ndarray, index: np.ndarray, steps: np.ndarray) -> None:
        a, b = self.start + p, self.start + q                     # elements a .. b - 1: words a .. b - 1
        h = self._hash(a // 2, (b - 1) // 2 - a // 2 + 1, x, t, steps)
        words = index[:2 * h.size]
        if np.little_endian:        # word 2k is hash k's low half: one widening copy
            words[...] = h.view(np.uint16)
        else:
            words[0::2] = h & 0xFFFF
            words[1::2] = h >> 16
        np.take(self.raw_values, words[a % 2:a % 2 + q - p], out=self.raw_out[p:q])   # type: ignore[index]

    def _wide(self, p: int, q: int, x: np.ndarray, t: np.ndarray, index: np.ndarray, steps: np.ndarray) -> None:
        n = q - p
        h = self._hash(self.start + p, n, x, t, steps)
        idx = index[:n]
        np.bitwise_and(h, np.uint32(0xFFFF), out=t[:n])
        idx[...] = t[:n]
        np.right_shift(h, 16, out=h)                              # the low mantissa bits
        if self.raw_out is not None:                              # float32: straight into out's bits
            bits = self.raw_out[p:q]
            np.take(self.raw_values, idx, out=bits)
            np.bitwise_xor(bits, h, out=bits)
        else:                                                     # double: float32 widened
            np.take(self.raw_values, idx, out=t[:n])
            np.bitwise_xor(t[:n], h, out=t[:n])
            self.out[p:q] = t[:n].view(np.float32)


# ---------------------------------------------------------------- device fill


def fill_torch(out: Any, stream: Stream, values: Any, *, wide: bool, start: int = 0,
               chunk: int = DEVICE_CHUNK) -> None:
    """:func:`fill` on a flat torch tensor: ``out`` raw bits (float64 for a wide double),
    ``values`` :func:`table`'s bits on out's device (int32 when ``wide``)."""
    import torch

    n = out.numel()
    for p in range(0, n, chunk):
        q = min(n, p + chunk)
        a, b = start + p, start + q
        if wide:
            h = hashes_torch(stream, a, b - a, out.device)
            bits = values[h & 0xFFFF] ^ (h >> 16).to(torch.int32)
            out[p:q] = bits.view(torch.float32).to(torch.float64) if out.dtype == torch.float64 else bits
        else:
            h = hashes_torch(stream, a // 2, (b - 1) // 2 - a // 2 + 1, out.device)
            words = torch.stack((h & 0xFFFF, h >> 16), dim=1).reshape(-1)
            out[p:q] = values[words[a % 2:a % 2 + q - p]]
