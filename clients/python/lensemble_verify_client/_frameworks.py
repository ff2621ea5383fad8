"""What load_verified hands back for each tensor, over the verified
buffers: NumPy arrays, PyTorch tensors, plain Tensor objects or
memoryviews; and the import of an optional package, which fails with
MissingPackage naming the package and how to install it."""

import struct
import sys

from ._errors import need

FRAMEWORKS = ("auto", "numpy", "torch", "plain", None)
_TOKEN = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def _reshape(flat, shape):
    """A flat list as nested lists of `shape` (a scalar for shape ())."""
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    if step == 0:               # a zero dimension further in
        return [_reshape([], shape[1:]) for _ in range(shape[0])]
    return [_reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


class Tensor:
    """A tensor without NumPy or PyTorch: what load_verified returns with
    ``framework="plain"``, and by default when NumPy cannot be imported.

    - ``dtype``: "float32", "float16" or "bfloat16", as stored;
    - ``shape``: a tuple of ints, () for a scalar;
    - ``data``: a read-only memoryview (format "B", ``nbytes`` long) of
      the tensor's little-endian bytes in the verified buffer: the bytes
      hashed, not a copy;
    - ``nbytes``, ``size`` (the number of elements);
    - ``tobytes()``: those bytes; ``tolist()``: the values as Python
      floats nested like ``shape`` (float16 and bfloat16 decoded exactly;
      a float for shape ()).
    """

    __slots__ = ("dtype", "shape", "data")

    def __init__(self, dtype, shape, data):
        self.dtype = dtype
        self.shape = tuple(shape)
        self.data = data

    @property
    def nbytes(self):
        return self.data.nbytes

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def tobytes(self):
        return self.data.tobytes()

    def tolist(self):
        n = self.size
        if self.dtype == "float32":
            flat = struct.unpack("<%df" % n, self.data)
        elif self.dtype == "float16":
            flat = struct.unpack("<%de" % n, self.data)
        elif self.dtype == "bfloat16":
            # a bfloat16 is the upper half of a float32
            wide = bytearray(4 * n)
            wide[2::4] = self.data[0::2]
            wide[3::4] = self.data[1::2]
            flat = struct.unpack("<%df" % n, wide)
        else:
            raise ValueError("unknown dtype %r" % (self.dtype,))
        return _reshape(list(flat), self.shape)

    def __repr__(self):
        return "Tensor(dtype=%r, shape=%r, nbytes=%d)" % (self.dtype, self.shape, self.nbytes)


def _numpy(np):
    # Explicitly little-endian, as safetensors stores them: right on any host.
    dts = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}

    def decode(buf, off, t, n):
        return np.frombuffer(buf, dtype=dts[t.dtype], count=n, offset=off).reshape(t.shape)
    return decode


def _torch(torch):
    dts = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}

    def decode(buf, off, t, n):
        dt = dts[t.dtype]
        if n == 0:
            return torch.empty(t.shape, dtype=dt)
        if off % _SIZE[t.dtype]:
            # Not aligned for its dtype where the file stores it: copied
            # into memory of PyTorch's own, which its kernels may assume.
            out = torch.empty(t.shape, dtype=dt)
            out.reshape(-1).view(torch.uint8).copy_(
                torch.frombuffer(buf, dtype=torch.uint8, count=t.nbytes, offset=off))
            return out
        return torch.frombuffer(buf, dtype=dt, count=n, offset=off).reshape(t.shape)
    return decode


def _plain(buf, off, t, n):
    return Tensor(_TOKEN[t.dtype], t.shape, memoryview(buf)[off:off + t.nbytes].toreadonly())


_FMT = {"F32": "f", "F16": "H", "BF16": "H"}


def _memoryview(buf, off, t, n):
    mv = memoryview(buf)[off:off + t.nbytes]
    if n == 0:
        return mv.cast(_FMT[t.dtype])
    return mv.cast(_FMT[t.dtype], t.shape)


def decoder(framework):
    """(the framework chosen, a function (buffer, offset, tensor, elements)
    -> tensor). Imported up front, so that a missing package fails before
    anything is read."""
    if framework not in FRAMEWORKS:
        raise ValueError("framework must be 'auto', 'numpy', 'torch', 'plain' or None, not %r"
                         % (framework,))
    if framework == "auto":
        try:
            import numpy
        except ImportError:
            return "plain", _plain
        return "numpy", _numpy(numpy)
    if framework == "numpy":
        return "numpy", _numpy(need("numpy", 'framework="numpy"'))
    if framework == "plain":
        return "plain", _plain
    # torch.frombuffer and memoryview.cast read in the host's byte order.
    if sys.byteorder != "little":
        raise ValueError("framework=%r needs a little-endian host; use 'numpy' or 'plain'"
                         % (framework,))
    if framework == "torch":
        return "torch", _torch(need("torch", 'framework="torch"'))
    return None, _memoryview
