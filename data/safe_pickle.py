"""Reading pickle-based dataset files without ever running their code.

Several public graph formats are pickles: the Planetoid ``ind.<name>.*`` files (Python 2
pickles of scipy CSR matrices, numpy arrays and a ``defaultdict`` adjacency list) and the
GraphData ``.npz`` files (0-d object arrays whose ``.npy`` payload is a pickle of a scipy
matrix). A pickle stream can name any importable callable and call it, so
``pickle.load`` on a downloaded file executes whatever the file says. Here every global a
stream names is looked up in a fixed allow-list of numpy/scipy array and sparse-matrix
classes (plus the few builtins the Planetoid graph pickle needs); anything else is refused
with a :class:`DataError` naming the file and the class, before it is imported.

``.npz`` archives are opened with :mod:`zipfile` and every member's ``.npy`` header is read
with :mod:`numpy.lib.format`; plain arrays are read with ``allow_pickle=False`` semantics
and object arrays go through the restricted unpickler.
"""

from __future__ import annotations

import io
import logging
import pickle
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import numpy as np
import scipy.sparse as sp

from gnnpipe.errors import DataError

__all__ = ["RestrictedUnpickler", "safe_pickle_load", "read_npz", "ALLOWED_GLOBALS"]

logger = logging.getLogger(__name__)


def _np_reconstruct() -> Any:
    # numpy 2 moved numpy.core to numpy._core; old pickles still name numpy.core.
    try:
        from numpy._core.multiarray import _reconstruct  # type: ignore[attr-defined]
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
    return _reconstruct


def _np_scalar() -> Any:
    try:
        from numpy._core.multiarray import scalar  # type: ignore[attr-defined]
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import scalar  # type: ignore[no-redef]
    return scalar


def _build_allow_list() -> dict[tuple[str, str], Any]:
    allowed: dict[tuple[str, str], Any] = {}
    reconstruct, scalar = _np_reconstruct(), _np_scalar()
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(mod, "_reconstruct")] = reconstruct
        allowed[(mod, "scalar")] = scalar
    # Protocol-5 pickles of arrays (numpy >= 1.16) rebuild them with numeric._frombuffer.
    try:
        from numpy._core.numeric import _frombuffer  # type: ignore[attr-defined]
    except ImportError:  # numpy < 2
        from numpy.core.numeric import _frombuffer  # type: ignore[no-redef]
    for mod in ("numpy.core.numeric", "numpy._core.numeric"):
        allowed[(mod, "_frombuffer")] = _frombuffer
    allowed[("numpy", "ndarray")] = np.ndarray
    allowed[("numpy", "dtype")] = np.dtype
    # Sparse matrices were pickled from scipy.sparse.<fmt> (old) or scipy.sparse._<fmt>.
    for fmt, cls in (("csr", sp.csr_matrix), ("csc", sp.csc_matrix), ("coo", sp.coo_matrix)):
        for mod in (f"scipy.sparse.{fmt}", f"scipy.sparse._{fmt}", "scipy.sparse"):
            allowed[(mod, f"{fmt}_matrix")] = cls
    # Protocol-2 pickles written by Python 3 store raw bytes (numpy array data) as
    # _codecs.encode(latin1_text, "latin1"): a pure str -> bytes conversion.
    import codecs

    allowed[("_codecs", "encode")] = codecs.encode
    # The Planetoid graph pickle: defaultdict(list) of int -> list of int (Python 2 names).
    allowed[("collections", "defaultdict")] = __import__("collections").defaultdict
    for mod in ("builtins", "__builtin__"):
        allowed[(mod, "list")] = list
        allowed[(mod, "dict")] = dict
        allowed[(mod, "int")] = int
    return allowed


#: (module, name) -> object; the only globals a dataset pickle may name.
ALLOWED_GLOBALS: dict[tuple[str, str], Any] = _build_allow_list()


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only :data:`ALLOWED_GLOBALS` and refuses the rest.

    ``source`` names the file in the error message.
    """

    def __init__(self, file: BinaryIO, *, source: str, encoding: str = "latin1") -> None:
        super().__init__(file, encoding=encoding)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401 - pickle API
        obj = ALLOWED_GLOBALS.get((module, name))
        if obj is None:
            raise DataError(
                f"{self.source}: pickle may only name numpy/scipy array classes, found "
                f"forbidden class {module}.{name}"
            )
        return obj

    def persistent_load(self, pid: Any) -> Any:
        raise DataError(f"{self.source}: pickle may not use persistent ids, found {pid!r}")


def safe_pickle_load(data: bytes | BinaryIO, *, source: str, encoding: str = "latin1") -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler`.

    A truncated or corrupt stream raises :class:`DataError` naming ``source``.
    """
    f = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    try:
        return RestrictedUnpickler(f, source=source, encoding=encoding).load()
    except DataError:
        raise
    except Exception as exc:  # UnpicklingError, EOFError, ValueError, TypeError, ...
        raise DataError(
            f"{source}: expected a readable pickle, found a truncated or corrupt stream "
            f"({type(exc).__name__}: {exc})"
        ) from None


def _read_npy_member(fp: BinaryIO, source: str, pickled_ok: bool) -> Any:
    version = np.lib.format.read_magic(fp)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
    else:  # pragma: no cover - numpy itself only writes 1.0..3.0
        raise DataError(f"{source}: expected .npy format 1.0-3.0, found {version}")
    if dtype.hasobject:
        if not pickled_ok:
            return None
        arr = safe_pickle_load(fp.read(), source=source)
        if not isinstance(arr, np.ndarray):
            raise DataError(f"{source}: expected a pickled object array, found {type(arr).__name__}")
        return arr
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    buf = fp.read(nbytes)
    if len(buf) != nbytes:
        raise DataError(f"{source}: expected {nbytes} bytes of array data, found {len(buf)} (truncated)")
    arr = np.frombuffer(buf, dtype=dtype, count=count)
    # frombuffer on bytes is read-only; copy so callers may own and modify it.
    arr = arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)
    return arr.copy()


def read_npz(path: str | Path, *, keys: Iterable[str] | None = None, pickled_ok: bool = True) -> dict[str, Any]:
    """Read the arrays of an ``.npz`` archive without running any pickle code.

    Plain arrays are read directly. Object arrays (pickled) go through the restricted
    unpickler when ``pickled_ok``; otherwise their value is ``None``. ``keys`` limits the
    members read (names without ``.npy``). A 0-d object array is unwrapped to its item.
    """
    path = Path(path)
    source = str(path)
    wanted = set(keys) if keys is not None else None
    out: dict[str, Any] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if wanted is not None and key not in wanted:
                    continue
                member = f"{source}[{info.filename}]"
                with zf.open(info) as fp:
                    arr = _read_npy_member(fp, member, pickled_ok)
                if isinstance(arr, np.ndarray) and arr.dtype.hasobject and arr.shape == ():
                    arr = arr.item()
                out[key] = arr
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(f"{source}: expected an .npz file, found no such file") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, KeyError) as exc:
        raise DataError(
            f"{source}: expected a readable .npz archive, found a truncated or corrupt file "
            f"({type(exc).__name__}: {exc})"
        ) from None
    return out
