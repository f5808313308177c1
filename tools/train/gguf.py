"""Minimal GGUF v3 writer and reader (F32, F16 and Q8_0 tensors), written
from the format description: little-endian header (magic "GGUF", version,
tensor count, KV count), KV pairs, tensor infos (name, dims innermost first,
ggml type, offset into the data section), padding to general.alignment,
then the tensor data, each tensor starting at an aligned offset.
"""

import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3

# gguf value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
SCALAR_FMT = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
              FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

# ggml tensor types
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
QK8_0 = 32
Q8_0_BLOCK_BYTES = 2 + QK8_0


def quantize_q8_0(x):
    """ggml's quantize_row_q8_0_ref on rows of 32: d = amax/127 (float32),
    q = roundf(x * (1/d)) with ties away from zero, d stored as fp16."""
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, QK8_0)
    amax = np.abs(x).max(axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, np.float32(1.0)), np.float32(0.0)).astype(np.float32)
    v = (x * inv[:, None]).astype(np.float32).astype(np.float64)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    out = np.empty((x.shape[0], Q8_0_BLOCK_BYTES), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).reshape(-1, 1).view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def dequantize_q8_0(raw, n):
    blocks = np.frombuffer(raw, dtype=np.uint8, count=n // QK8_0 * Q8_0_BLOCK_BYTES).reshape(-1, Q8_0_BLOCK_BYTES)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
    return (q * d).reshape(-1)


# ggml type -> (values per block, bytes per block), for the types whose
# sizes the reader needs to locate tensors; only F32/F16/Q8_0 are decoded.
BLOCK_SIZES = {GGML_F32: (1, 4), GGML_F16: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
               GGML_Q8_0: (32, 34), 30: (1, 2)}


def tensor_nbytes(ggml_type, n):
    if ggml_type not in BLOCK_SIZES:
        raise ValueError(f"unsupported ggml type {ggml_type}")
    per_block, nbytes = BLOCK_SIZES[ggml_type]
    return n // per_block * nbytes


def _pack_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype, value):
    if vtype == STRING:
        return _pack_string(value)
    if vtype == ARRAY:
        etype, items = value
        out = [struct.pack("<IQ", etype, len(items))]
        out.extend(_pack_value(etype, v) for v in items)
        return b"".join(out)
    return struct.pack(SCALAR_FMT[vtype], value)


class Writer:
    """Collects KV pairs and tensors, then writes the file in one go."""

    def __init__(self, alignment=32):
        self.alignment = alignment
        self.kv = []       # (key, vtype, value)
        self.tensors = []  # (name, ne (innermost first), ggml type, bytes)

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value))

    def add_array(self, key, etype, items):
        self.kv.append((key, ARRAY, (etype, list(items))))

    def add_tensor(self, name, array, ggml_type):
        """array is row-major numpy; GGUF dims are its shape reversed."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        ne = list(reversed(a.shape))
        if ggml_type == GGML_F32:
            data = a.tobytes()
        elif ggml_type == GGML_F16:
            data = a.astype(np.float16).tobytes()
        elif ggml_type == GGML_Q8_0:
            if ne[0] % QK8_0:
                raise ValueError(f"{name}: row length {ne[0]} is not a multiple of {QK8_0}")
            data = quantize_q8_0(a)
        else:
            raise ValueError(f"{name}: unsupported ggml type {ggml_type}")
        self.tensors.append((name, ne, ggml_type, data))

    def write(self, path):
        pad = lambda n: (-n) % self.alignment
        head = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))]
        for key, vtype, value in self.kv:
            head.append(_pack_string(key) + struct.pack("<I", vtype) + _pack_value(vtype, value))
        offset = 0
        for name, ne, ggml_type, data in self.tensors:
            head.append(_pack_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                        + struct.pack("<IQ", ggml_type, offset))
            offset += len(data) + pad(len(data))
        head = b"".join(head)
        with open(path, "wb") as f:
            f.write(head + b"\0" * pad(len(head)))
            for _, _, _, data in self.tensors:
                f.write(data + b"\0" * pad(len(data)))


class Reader:
    """Parses a whole GGUF file into .kv (key -> python value) and .tensors
    (name -> (ne, ggml type, raw bytes)); .array(name) dequantizes to float32
    with numpy shape = ne reversed."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        if self._take(4) != GGUF_MAGIC:
            raise ValueError(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = self._unpack("<IQQ")
        if version != GGUF_VERSION:
            raise ValueError(f"{path}: GGUF version {version}, expected {GGUF_VERSION}")
        self.kv = {}
        self.kv_types = {}
        for _ in range(n_kv):
            key = self._string()
            (vtype,) = self._unpack("<I")
            self.kv[key] = self._value(vtype)
            self.kv_types[key] = vtype
        alignment = self.kv.get("general.alignment", 32)
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            (n_dims,) = self._unpack("<I")
            ne = list(self._unpack(f"<{n_dims}Q"))
            ggml_type, offset = self._unpack("<IQ")
            infos.append((name, ne, ggml_type, offset))
        data_start = self.pos + (-self.pos) % alignment
        self.tensors = {}
        for name, ne, ggml_type, offset in infos:
            if offset % alignment:
                raise ValueError(f"tensor {name}: offset {offset} not aligned to {alignment}")
            n = int(np.prod(ne))
            start = data_start + offset
            if ggml_type not in BLOCK_SIZES:
                self.tensors[name] = (ne, ggml_type, None)
                continue
            end = start + tensor_nbytes(ggml_type, n)
            if end > len(self.buf):
                raise ValueError(f"tensor {name}: data runs past end of file")
            self.tensors[name] = (ne, ggml_type, self.buf[start:end])

    def array(self, name):
        ne, ggml_type, raw = self.tensors[name]
        n = int(np.prod(ne))
        if ggml_type == GGML_F32:
            a = np.frombuffer(raw, dtype=np.float32, count=n).copy()
        elif ggml_type == GGML_F16:
            a = np.frombuffer(raw, dtype=np.float16, count=n).astype(np.float32)
        elif ggml_type == GGML_Q8_0:
            a = dequantize_q8_0(raw, n)
        else:
            raise ValueError(f"tensor {name}: unsupported ggml type {ggml_type}")
        return a.reshape(list(reversed(ne)))

    def _take(self, n):
        if self.pos + n > len(self.buf):
            raise ValueError(f"truncated GGUF at byte {self.pos}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def _unpack(self, fmt):
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))

    def _string(self):
        (n,) = self._unpack("<Q")
        return self._take(n).decode("utf-8")

    def _value(self, vtype):
        if vtype == STRING:
            return self._string()
        if vtype == ARRAY:
            etype, n = self._unpack("<IQ")
            return [self._value(etype) for _ in range(n)]
        return self._unpack(SCALAR_FMT[vtype])[0]
