"""Reads and writes GGUF files with no dependencies: the key/value section, tensor infos, and
F32 tensors.

Used by tests/reference/make-bpe-reference.sh to cut a vocabulary-only GGUF out of a model file
and to write synthetic BPE vocabularies, and by the imatrix / quantize tests to read and write
importance-matrix files. Values are kept as (type, value) pairs so that a file read and written
again carries the same types.
"""
from __future__ import annotations

import struct

# GGUF value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
F32_TENSOR = 0  # the ggml type of an F32 tensor
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


def read(path):
    """(kv, tensors, data_start) of a GGUF file: kv as read_kv gives it, tensors as
    [(name, dims, ggml_type, offset)] with offsets relative to data_start (alignment 32)."""
    with open(path, "rb") as f:
        r = _Reader(f)
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        r.take("<I")  # version
        n_tensors = r.take("<Q")
        n_kv = r.take("<Q")
        kv = []
        for _ in range(n_kv):
            key = r.string()
            vtype = r.take("<I")
            kv.append((key, vtype, r.value(vtype)))
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            dims = [r.take("<Q") for _ in range(r.take("<I"))]
            tensors.append((name, dims, r.take("<I"), r.take("<Q")))
        return kv, tensors, (f.tell() + 31) // 32 * 32


def read_kv(path):
    """The key/value pairs of a GGUF file, in order: [(key, type, value)]; arrays as (elem_type, list)."""
    return read(path)[0]


def read_f32_tensors(path):
    """{name: tuple of floats} of a GGUF file whose tensors are all F32 (an importance matrix)."""
    _, tensors, start = read(path)
    data = open(path, "rb").read()
    out = {}
    for name, dims, ggml_type, offset in tensors:
        if ggml_type != 0:
            raise ValueError(f"{path}: {name} is not F32")
        n = 1
        for d in dims:
            n *= d
        out[name] = struct.unpack_from(f"<{n}f", data, start + offset)
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


def write_kv(path, kv, f32_tensors=()):
    """Writes a GGUF v3 file holding the key/value pairs [(key, type, value)] and the F32 tensors
    [(name, dims, floats)], each aligned to 32 bytes."""
    body = b"GGUF" + struct.pack("<IQQ", 3, len(f32_tensors), len(kv))
    for key, vtype, value in kv:
        body += _pack_string(key) + struct.pack("<I", vtype) + _pack_value(vtype, value)
    data = b""
    for name, dims, values in f32_tensors:
        body += _pack_string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, F32_TENSOR, len(data))
        data += struct.pack(f"<{len(values)}f", *values)
        data += b"\0" * (-len(data) % 32)
    body += b"\0" * (-len(body) % 32)  # the data section starts aligned
    with open(path, "wb") as f:
        f.write(body + data)
