"""Reads and writes the key/value section of GGUF files (no tensors), with no dependencies.

Used by tests/reference/make-bpe-reference.sh to cut a vocabulary-only GGUF out of a model file
and to write synthetic BPE vocabularies. Values are kept as (type, value) pairs so that a file
read and written again carries the same types.
"""
from __future__ import annotations

import struct

# GGUF value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
           U64: "<Q", I64: "<q", F64: "<d"}


class _Reader:
    def __init__(self, f):
        self.f = f

    def take(self, fmt):
        size = struct.calcsize(fmt)
        data = self.f.read(size)
        if len(data) != size:
            raise ValueError("truncated GGUF file")
        return struct.unpack(fmt, data)[0]

    def string(self):
        n = self.take("<Q")
        return self.f.read(n).decode("utf-8", errors="surrogateescape")

    def value(self, vtype):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            etype = self.take("<I")
            n = self.take("<Q")
            return (etype, [self.value(etype) for _ in range(n)])
        return self.take(_SCALAR[vtype])


def read_kv(path):
    """The key/value pairs of a GGUF file, in order: [(key, type, value)]; arrays as (elem_type, list)."""
    with open(path, "rb") as f:
        r = _Reader(f)
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        r.take("<I")  # version
        r.take("<Q")  # tensor count
        n_kv = r.take("<Q")
        out = []
        for _ in range(n_kv):
            key = r.string()
            vtype = r.take("<I")
            out.append((key, vtype, r.value(vtype)))
        return out


def _pack_string(s):
    b = s.encode("utf-8", errors="surrogateescape")
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype, value):
    if vtype == STRING:
        return _pack_string(value)
    if vtype == ARRAY:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(_pack_value(etype, v) for v in items)
    return struct.pack(_SCALAR[vtype], value)


def write_kv(path, kv):
    """Writes a GGUF v3 file holding the key/value pairs [(key, type, value)] and no tensors."""
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for key, vtype, value in kv:
        body += _pack_string(key) + struct.pack("<I", vtype) + _pack_value(vtype, value)
    body += b"\0" * (-len(body) % 32)  # the (empty) data section starts aligned
    with open(path, "wb") as f:
        f.write(body)
