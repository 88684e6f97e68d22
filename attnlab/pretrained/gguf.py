"""GGUF, the file format of llama.cpp, read with numpy: header, metadata, tensor table, weights.

A GGUF file is a little-endian header (magic "GGUF", version, tensor and metadata counts), the
metadata as typed key/value pairs (architecture, sizes, the tokenizer's vocabulary and merges),
a table giving each tensor's name, shape, number type and offset, then the tensors' bytes,
aligned. The header is read through a memory map; a tensor's bytes are read only when it is
asked for, with a plain read, so that loading a model never holds the file and the weights in
memory at once.

Weights are stored in blocks of 32 numbers that share a scale (`dequantize` says how for the
two kinds SmolLM2-135M uses, Q8_0 and Q4_1); `GGUF.tensor` returns them as float32 torch
tensors in PyTorch's (rows, columns) order. GGUF lists a shape fastest dimension first
(ne[0] = the columns), so a (d_out, d_in) weight is stored as [d_in, d_out].
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

MAGIC = b"GGUF"
BLOCK = 32  # numbers per quantisation block

# metadata value types (gguf.h: enum gguf_type) -> struct format
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9

# tensor number types (ggml.h: enum ggml_type) -> (name, bytes per block of BLOCK, or per number)
F32, F16, Q4_1, Q8_0 = 0, 1, 3, 8
_TYPES = {F32: ("F32", 4), F16: ("F16", 2), Q4_1: ("Q4_1", 2 + 2 + BLOCK // 2),
          Q8_0: ("Q8_0", 2 + BLOCK)}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]   # PyTorch order: the slowest dimension first
    type: int                # a ggml_type
    offset: int              # from the start of the file

    @property
    def type_name(self) -> str:
        return _TYPES[self.type][0]

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        per = _TYPES[self.type][1]
        return self.numel * per if self.type in (F32, F16) else self.numel // BLOCK * per


class _Reader:
    """Sequential little-endian reads from the start of a memory-mapped file."""

    def __init__(self, buf: np.ndarray, path: Path):
        self.buf, self.pos, self.path = memoryview(buf), 0, path

    def take(self, fmt: str, count: int = 1) -> tuple:
        fmt = f"<{count}{fmt}"
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise ValueError(f"{self.path} ends inside its header: a truncated GGUF file")
        out = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return out

    def scalar(self, fmt: str):
        return self.take(fmt)[0]

    def string(self) -> str:
        n = self.scalar("Q")
        if self.pos + n > len(self.buf):
            raise ValueError(f"{self.path} ends inside its header: a truncated GGUF file")
        out = str(self.buf[self.pos:self.pos + n], "utf-8", errors="replace")
        self.pos += n
        return out

    def value(self, kind: int):
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, n = self.scalar("I"), self.scalar("Q")
            if item == _STRING:
                return [self.string() for _ in range(n)]
            if item in _SCALARS:
                return list(self.take(_SCALARS[item], n))
            return [self.value(item) for _ in range(n)]
        if kind not in _SCALARS:
            raise ValueError(f"{self.path}: unknown GGUF metadata type {kind}")
        return self.scalar(_SCALARS[kind])


class GGUF:
    """One GGUF file: `metadata` (dict), `tensors` (name -> TensorInfo), `tensor(name)`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        buf = np.memmap(self.path, dtype=np.uint8, mode="r")
        self.size = len(buf)
        r = _Reader(buf, self.path)
        if bytes(buf[:4]) != MAGIC:
            raise ValueError(f"{self.path} is not a GGUF file (it does not start with b'GGUF')")
        r.pos = 4
        self.version = r.scalar("I")
        if self.version not in (2, 3):
            raise ValueError(f"{self.path}: GGUF version {self.version}; this reader knows 2 and 3")
        n_tensors, n_kv = r.scalar("Q"), r.scalar("Q")
        self.metadata: dict = {}
        for _ in range(n_kv):
            key = r.string()
            self.metadata[key] = r.value(r.scalar("I"))
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            dims = r.take("Q", r.scalar("I"))
            kind, offset = r.scalar("I"), r.scalar("Q")
            infos.append((name, tuple(reversed(dims)), kind, offset))
        align = self.metadata.get("general.alignment", 32)
        start = -(-r.pos // align) * align  # the tensor data begins at the next aligned byte
        del r, buf  # the map is closed: what the header held is now Python objects
        self.tensors = {n: TensorInfo(n, s, k, start + o) for n, s, k, o in infos}
        for t in self.tensors.values():
            if t.type not in _TYPES:
                raise ValueError(f"{self.path}: tensor {t.name} has ggml type {t.type}; this "
                                 f"reader knows {sorted(v[0] for v in _TYPES.values())}")
            if t.offset + t.nbytes > self.size:
                raise ValueError(f"{self.path} ends inside tensor {t.name}: a truncated file")

    def raw(self, name: str) -> np.ndarray:
        """The stored bytes of one tensor, read from the file."""
        t = self._info(name)
        return np.fromfile(self.path, dtype=np.uint8, count=t.nbytes, offset=t.offset)

    def tensor(self, name: str) -> torch.Tensor:
        """One tensor as float32, shape in PyTorch order (a weight is (d_out, d_in))."""
        t = self._info(name)
        return torch.from_numpy(dequantize(self.raw(name), t.type).reshape(t.shape))

    def _info(self, name: str) -> TensorInfo:
        if name not in self.tensors:
            raise KeyError(f"{self.path} has no tensor {name!r}; it has "
                           f"{len(self.tensors)}, e.g. {list(self.tensors)[:4]}")
        return self.tensors[name]


def dequantize(raw: np.ndarray, kind: int) -> np.ndarray:
    """Stored bytes -> float32 numbers (flat), for the number types SmolLM2's file uses.

    Q8_0: each block of 32 numbers is a float16 scale d and 32 signed bytes q: x = d·q.
    Q4_1: a float16 scale d, a float16 minimum m and 16 bytes holding 32 four-bit q (0..15):
    the low halves of the 16 bytes are numbers 0..15 of the block, the high halves 16..31;
    x = d·q + m. Four bits a number (plus 32 bits a block for d and m): 5 bits instead of 32.
    """
    if kind == F32:
        return raw.view("<f4").copy()
    if kind == F16:
        return raw.view("<f2").astype(np.float32)
    per = _TYPES[kind][1]
    blocks = raw.reshape(-1, per)                                  # (n_blocks, bytes per block)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)        # (n_blocks, 1)
    if kind == Q8_0:
        x = blocks[:, 2:].view(np.int8).astype(np.float32)         # (n_blocks, 32)   q
        x *= d                                                     # in place: one float copy
        return x.reshape(-1)
    m = blocks[:, 2:4].copy().view("<f2").astype(np.float32)       # (n_blocks, 1)
    packed = blocks[:, 4:]                                         # (n_blocks, 16)
    x = np.empty((len(blocks), BLOCK), np.float32)                 # (n_blocks, 32)
    x[:, :BLOCK // 2], x[:, BLOCK // 2:] = packed & 0x0F, packed >> 4  # q: low halves, then high
    x *= d
    x += m
    return x.reshape(-1)
