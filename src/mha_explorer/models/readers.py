"""Weight files read with NumPy: safetensors by hand; GGUF's header by hand, its tensors dequantized
through the `gguf` package; pickles refused.

Every reader checks what a file claims before it trusts it: a safetensors header's size against
the file, every tensor's dtype against a short list and its byte range against the data that is
really there; a GGUF's magic, version, tensor types and data ranges. Failures raise
CheckpointError naming the file and the reason. Arrays come back as float32 in the layout the
libraries use for a linear layer, (out_features, in_features).

Nothing here imports torch, and nothing here runs code from a file: a pickled checkpoint (.bin,
.pt, ...) is refused by its name and never opened. Nor is a file mapped into memory: one cut short
while it is read (saved again in place) would kill the process. Each file is held open from its
header's read on, and its tensors read from it when asked for: a read that comes up short says so,
and a file deleted or replaced since is still the one read (the embedding rows of each text).
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
import threading
import weakref
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CheckpointError

# --- pickles ---------------------------------------------------------------

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def is_pickle(path: str | os.PathLike) -> bool:
    return Path(path).suffix.lower() in PICKLE_SUFFIXES


def refuse_pickle(path: str | os.PathLike) -> CheckpointError:
    """The error for a pickled checkpoint: it is never opened, so nothing in it can run."""
    path = Path(path)
    return CheckpointError(
        f"{path.name} is a pickled checkpoint ({path.suffix}): it is refused and never opened, because "
        "unpickling a file can run any code hidden in it. Convert it to safetensors on a machine you trust "
        "(transformers: model.save_pretrained(dir, safe_serialization=True)), or use a GGUF file."
    )


def _regular(path: Path, mode: int) -> None:
    """A weight file is a file: a pipe (or a device) named as one would hold a read up for ever."""
    if stat.S_ISDIR(mode):
        raise CheckpointError(f"{path.name} is a folder: give the weight file itself")
    if not stat.S_ISREG(mode):
        raise CheckpointError(f"{path.name} is not a regular file (a pipe, a device or a socket): give the checkpoint's own file")


class HeldFile:
    """A weight file, open from its header's read on (closed with the object): its bytes read at
    their places, by one thread at a time."""

    def __init__(self, path: Path):
        self.path = path
        try:
            _regular(path, path.stat().st_mode)  # (before it is opened: opening a pipe waits for a writer)
            self._file = path.open("rb", buffering=0)
            weakref.finalize(self, self._file.close)
            info = os.fstat(self._file.fileno())
        except OSError as e:
            raise CheckpointError(f"cannot read {path}: {e.strerror or e}") from None
        _regular(path, info.st_mode)
        self.size = info.st_size
        self._lock = threading.Lock()

    def spans(self, starts: list[int], size: int) -> np.ndarray:
        """The bytes from each start, size of them: (len(starts), size). A span past the file's end
        (cut short since its header was read) fails."""
        out = np.empty((len(starts), size), dtype=np.uint8)
        try:
            with self._lock:
                for row, start in zip(out, starts):
                    self._file.seek(start)
                    view, got = memoryview(row), 0
                    while got < size and (n := self._file.readinto(view[got:])):
                        got += n
                    if got < size:
                        raise CheckpointError(f"{self.path.name} is cut short: it changed while it was read (saved again in place?); read it again once it is written whole")
        except OSError as e:
            raise CheckpointError(f"cannot read {self.path}: {e.strerror or e}") from None
        return out

    def head(self, size: int) -> bytes:
        """The file's first bytes, size of them at most."""
        return self.spans([0], min(size, self.size)).tobytes()


# --- safetensors -----------------------------------------------------------
# Layout: 8 bytes little-endian header length N, N bytes of JSON, then the data. The JSON maps
# each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, offsets into the data.

MAX_HEADER_BYTES = 100 * 2**20  # 100 MiB; a real header is a few hundred KiB at most
SAFETENSORS_DTYPES: dict[str, str] = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",  # bfloat16: the top half of a float32, widened on read
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


@dataclass(frozen=True)
class TensorEntry:
    dtype: str  # a key of SAFETENSORS_DTYPES
    shape: tuple[int, ...]
    begin: int  # byte offsets into the data section
    end: int


def _looked_up(file: Path, name: str, shape: tuple[int, ...], ids: np.ndarray) -> np.ndarray:
    """ids, a list of whole numbers, as row numbers of a 2-D tensor, each within it."""
    if len(shape) != 2:
        raise CheckpointError(f"{file.name}: {name} has shape {shape}; a row lookup needs 2 dimensions")
    ids = np.asarray(ids)
    if ids.ndim != 1 or not (ids.size == 0 or np.issubdtype(ids.dtype, np.integer)):
        raise TypeError(f"row numbers are a list of whole numbers, not {ids.dtype} of shape {ids.shape}")
    if ids.size and not (0 <= ids.min() and ids.max() < shape[0]):  # (a tokenizer of more tokens than the table: refused at load)
        raise CheckpointError(f"{file.name}: {name} has {shape[0]} rows; row {int(ids.max() if ids.max() >= shape[0] else ids.min())} was asked for")
    return ids.astype(np.int64)


class SafetensorsFile:
    """One .safetensors file: a validated header, and tensors read from the file when asked for."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._file = HeldFile(self.path)
        self.entries, self.metadata, self._data_start = _read_safetensors_header(self._file)

    def names(self) -> list[str]:
        return list(self.entries)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entry(name).shape

    def read(self, name: str) -> np.ndarray:
        """The whole tensor, as float32 for floating dtypes (an array of its own)."""
        return _widen(self._raw(name), self._entry(name).dtype)

    def rows(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows ids of a 2-D tensor (an embedding lookup) without reading the rest."""
        e = self._entry(name)
        ids = _looked_up(self.path, name, e.shape, ids)
        dtype = np.dtype(SAFETENSORS_DTYPES[e.dtype])
        row = e.shape[1] * dtype.itemsize
        raw = self._file.spans([self._data_start + e.begin + int(i) * row for i in ids], row)
        return _widen(raw.view(dtype).reshape(len(ids), e.shape[1]), e.dtype)

    def _entry(self, name: str) -> TensorEntry:
        try:
            return self.entries[name]
        except KeyError:
            raise CheckpointError(f"{self.path.name} has no tensor {name!r}: {_WHOLE_SAVE}") from None

    def _raw(self, name: str) -> np.ndarray:
        e = self._entry(name)
        dtype = np.dtype(SAFETENSORS_DTYPES[e.dtype])
        if e.end == e.begin:
            return np.zeros(e.shape, dtype=dtype)
        return self._file.spans([self._data_start + e.begin], e.end - e.begin).view(dtype).reshape(e.shape)


def _widen(a: np.ndarray, dtype: str) -> np.ndarray:
    """a, read from the file (an array of its own), as float32 for floating dtypes."""
    if dtype == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    if dtype in ("F64", "F32", "F16"):
        return a.astype(np.float32, copy=False)
    return a


def _read_safetensors_header(file: HeldFile) -> tuple[dict[str, TensorEntry], dict[str, str], int]:
    """Parse and check the header; nothing is allocated from a size the file has not backed."""
    name, size = file.path.name, file.size
    if size < 8:
        raise CheckpointError(f"{name} has {size} bytes: too short to be a safetensors file")
    n = int.from_bytes(file.head(8), "little")
    if n > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"{name}: the header claims {n} bytes; at most {MAX_HEADER_BYTES} are accepted, "
            "so this is not a safetensors file or it is damaged"
        )
    if 8 + n > size:
        raise CheckpointError(
            f"{name}: the header claims {n} bytes but the file has only {size - 8} after the length; "
            "the file is truncated or not safetensors"
        )
    raw = file.spans([8], n).tobytes()
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError as e:  # (UnicodeDecodeError, JSONDecodeError, and an integer of thousands of digits)
        raise CheckpointError(f"{name}: the header is not valid JSON ({e}); the file is damaged") from None
    except RecursionError:
        raise CheckpointError(f"{name}: the header is JSON nested too deep to read; the file is damaged") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{name}: the header is not a JSON object")

    data_size = size - 8 - n
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise CheckpointError(f"{name}: __metadata__ is not a JSON object")
    entries: dict[str, TensorEntry] = {}
    for tensor, info in header.items():
        entries[tensor] = _check_entry(name, tensor, info, data_size)
    spans = sorted((e.begin, e.end, t) for t, e in entries.items() if e.end > e.begin)
    for (_, end_a, a), (begin_b, _, b) in zip(spans, spans[1:]):
        if begin_b < end_a:
            raise CheckpointError(f"{name}: tensors {a!r} and {b!r} overlap in the data section")
    return entries, {str(k): str(v) for k, v in metadata.items()}, 8 + n


def _check_entry(file: str, tensor: str, info: Any, data_size: int) -> TensorEntry:
    where = f"{file}: tensor {tensor!r}"
    if not isinstance(info, dict):
        raise CheckpointError(f"{where} has no dtype/shape/data_offsets record")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in SAFETENSORS_DTYPES:
        raise CheckpointError(f"{where} has dtype {dtype!r}; supported: {', '.join(SAFETENSORS_DTYPES)}")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise CheckpointError(f"{where} has shape {shape!r}; a shape is a list of whole numbers >= 0")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)):
        raise CheckpointError(f"{where} has data_offsets {offsets!r}; expected [begin, end]")
    begin, end = offsets
    if not begin <= end <= data_size:
        raise CheckpointError(
            f"{where} lies at bytes {begin}..{end}, outside the {data_size} bytes of data the file holds"
            + ("; the file is cut short: copy or download it again" if begin <= end else "")
        )
    expected = math.prod(shape) * np.dtype(SAFETENSORS_DTYPES[dtype]).itemsize
    if end - begin != expected:
        raise CheckpointError(f"{where}: shape {shape} of {dtype} needs {expected} bytes, the offsets give {end - begin}")
    return TensorEntry(dtype, tuple(shape), begin, end)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# --- GGUF ------------------------------------------------------------------

GGUF_MAGIC = b"GGUF"
# tensor types read here; gguf's dequantize turns each into float32
GGUF_TYPES = (
    "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
)  # fmt: skip
# a metadata value's type, by its number in the format: a number's struct format; 8 is a string
# (its length, u64, then UTF-8), 9 an array (its items' type, u32, their count, u64, the items)
GGUF_NUMBERS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
GGML_MAX_DIMS = 4


class _CutShort(Exception):
    """A GGUF header read past the end of its file, or holding what its format does not allow."""


class _ReadMore(Exception):
    """A GGUF header longer than the bytes read of it: its reading goes on past `end`."""

    def __init__(self, end: int):
        self.end = end


class _Header:
    """A GGUF file's header read in order from its first bytes (buffer) of a file of size bytes:
    never past the file's end, and every count checked against the bytes left before anything is
    made of it. (gguf.GGUFReader reads the same into a NumPy view per item: 36 of the 42 s Gemma 3's
    262,144-token vocabulary took.)"""

    def __init__(self, buffer: bytes, at: int, size: int):
        self.buffer, self.at, self.size = buffer, at, size

    def take(self, size: int) -> int:
        if size < 0 or self.at + size > self.size:
            raise _CutShort
        if self.at + size > len(self.buffer):
            raise _ReadMore(self.at + size)
        self.at += size
        return self.at - size

    def number(self, kind: int) -> int | float | bool:
        fmt = GGUF_NUMBERS[kind]
        return struct.unpack_from(fmt, self.buffer, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        size = self.number(10)
        start = self.take(size)
        try:
            return self.buffer[start : start + size].decode("utf-8")
        except UnicodeDecodeError:
            raise _CutShort from None

    def value(self, kind: int) -> Any:
        """A metadata value as a Python str, int, float, bool or list."""
        if kind == GGUF_STRING:
            return self.string()
        if kind == GGUF_ARRAY:
            item, count = self.number(4), self.number(10)
            if item in GGUF_NUMBERS:  # read at once
                dtype = np.dtype(GGUF_NUMBERS[item])
                return np.frombuffer(self.buffer, dtype, count, self.take(count * dtype.itemsize)).tolist()
            if count > self.size - self.at:  # every string or array item takes a byte at least
                raise _CutShort
            return [self.value(item) for _ in range(count)]
        if kind not in GGUF_NUMBERS:
            raise _CutShort
        return self.number(kind)


@dataclass(frozen=True)
class GGUFTensor:
    """A tensor's entry in a GGUF file: its type, its dimensions in ggml's order (the fastest
    first), and where its bytes lie: rows of row_bytes each from byte start."""

    qtype: Any  # gguf.GGMLQuantizationType
    dims: tuple[int, ...]
    start: int
    rows: int
    row_bytes: int


HEADER_READ = 16 * 2**20  # bytes read for a GGUF's header at first (Gemma 3's vocabulary takes 6 MB); more if it needs more
MAX_GGUF_HEADER = 1 << 30  # and at most: a header that claims more is damaged (a count gone wrong)


class GGUFFile:
    """One GGUF file: its header and tensor table read here from its first bytes, its tensors
    read when asked for and dequantized by gguf's quants."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        name = self.path.name
        self._file = HeldFile(self.path)
        size = self._file.size
        head = self._file.head(HEADER_READ)
        if head[:4] != GGUF_MAGIC:
            raise CheckpointError(f"{name} is not a GGUF file: it does not start with the bytes 'GGUF'")
        if len(head) < 24:
            raise CheckpointError(f"{name} is cut short: {size} bytes, not even a GGUF header (24 bytes)")
        version = int.from_bytes(head[4:8], "little")
        if version not in (2, 3):
            raise CheckpointError(f"{name} is GGUF version {version}; versions 2 and 3 (little-endian) are read")
        damaged = f"{name} is not a readable GGUF file: its metadata or tensor table is damaged or cut short; write or download it again"
        while True:
            try:
                entries, self._values = self._header(head, size)
                break
            except _ReadMore as more:  # twice as many bytes, or as many as it needs: the rest read after those read
                if more.end > MAX_GGUF_HEADER:
                    raise CheckpointError(damaged) from None
                head += self._file.spans([len(head)], min(size, max(more.end, 2 * len(head))) - len(head)).tobytes()
            except (_CutShort, KeyError, struct.error, RecursionError):  # (arrays of arrays thousands deep)
                raise CheckpointError(damaged) from None
        self.tensors = self._place(entries, size)

    def _header(self, head: bytes, size: int) -> tuple[list, dict[str, Any]]:
        """The tensor table, (name, dims, type number, offset) each, and the metadata, from the
        file's first bytes (head) of its size."""
        header = _Header(head, 8, size)
        n_tensors, n_values = header.number(10), header.number(10)
        values = {}
        for _ in range(n_values):
            key = header.string()
            values[key] = header.value(header.number(4))
        if n_tensors > size:  # each entry takes more than a byte
            raise _CutShort
        entries = []
        for _ in range(n_tensors):
            tensor = header.string()
            n_dims = header.number(4)
            if not 1 <= n_dims <= GGML_MAX_DIMS:
                raise _CutShort
            dims = tuple(header.number(10) for _ in range(n_dims))
            entries.append((tensor, dims, header.number(4), header.number(10)))
        align = values.get("general.alignment", 32)
        if not isinstance(align, int) or align < 1:
            raise _CutShort
        self._data_start = -(-header.at // align) * align
        return entries, values

    def _place(self, entries: list, size: int) -> dict[str, GGUFTensor]:
        """Each tensor's type checked, and its bytes found in the file."""
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

        name = self.path.name
        tensors = {}
        for tensor, dims, number, offset in entries:
            qtype = GGMLQuantizationType._value2member_map_.get(number)
            if qtype is None or qtype.name not in GGUF_TYPES:
                raise CheckpointError(f"{name}: tensor {tensor} has type {qtype.name if qtype else number}; supported: {', '.join(GGUF_TYPES)}")
            block, block_bytes = GGML_QUANT_SIZES[qtype]
            if dims[0] % block:
                raise CheckpointError(f"{name}: tensor {tensor} has rows of {dims[0]} numbers, not whole blocks of {block} ({qtype.name}); the file is damaged")
            rows, row_bytes = math.prod(dims[1:]), dims[0] // block * block_bytes
            start = self._data_start + offset
            if start + rows * row_bytes > size:
                raise CheckpointError(
                    f"{name} is cut short: tensor {tensor} lies at bytes {start}..{start + rows * row_bytes}, "
                    f"past the end of the {size}-byte file; write or download it again"
                )
            tensors[tensor] = GGUFTensor(qtype, dims, start, rows, row_bytes)
        return tensors

    def storage(self) -> str:
        """How the weights are stored, as the page says it: the file's type (general.file_type, else
        the type most matrices have), the matrices' types when they differ, and what reading them
        does: "GGUF Q4_K_M (matrices in Q5_0, Q4_K, Q8_0, Q6_K), dequantized to float32"; "GGUF F32"."""
        matrices = Counter(t.qtype.name for t in self.tensors.values() if len(t.dims) == 2)
        if not matrices:
            return "GGUF"
        from gguf import LlamaFileType

        kind = self.value("general.file_type", None)
        known = isinstance(kind, int) and kind in LlamaFileType._value2member_map_
        named = LlamaFileType(kind).name.removeprefix("MOSTLY_") if known else matrices.most_common(1)[0][0]
        mixed = f" (matrices in {', '.join(name for name, _ in matrices.most_common())})" if len(matrices) > 1 else ""
        kept = "" if set(matrices) == {"F32"} else ", widened to float32" if set(matrices) <= {"F32", "F16", "BF16"} else ", dequantized to float32"
        return f"GGUF {named}{mixed}{kept}"

    def has(self, name: str) -> bool:
        """Whether the file has a tensor of this name."""
        return name in self.tensors

    def names(self) -> list[str]:
        """The tensor names."""
        return list(self.tensors)

    def value(self, key: str, default: Any = ...) -> Any:
        """A metadata value as a Python str, int, float, bool or list."""
        if key not in self._values:
            if default is ...:
                raise CheckpointError(f"{self.path.name} has no metadata {key!r}: {_WHOLE_GGUF}")
            return default
        return self._values[key]

    def shape(self, name: str) -> tuple[int, ...]:
        """In NumPy order: a linear layer is (out_features, in_features)."""
        return tuple(reversed(self._tensor(name).dims))

    def read(self, name: str) -> np.ndarray:
        """The whole tensor, dequantized to float32."""
        t = self._tensor(name)
        data = self._file.spans([t.start], t.rows * t.row_bytes).reshape(t.rows, t.row_bytes)
        return self._dequantize(data, t).reshape(self.shape(name))

    def rows(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows ids of a 2-D tensor, dequantized alone: an embedding lookup never widens the whole table."""
        t = self._tensor(name)
        shape = self.shape(name)
        ids = _looked_up(self.path, name, shape, ids)
        data = self._file.spans([t.start + int(i) * t.row_bytes for i in ids], t.row_bytes)
        return self._dequantize(data, t).reshape(len(ids), shape[1])

    def _tensor(self, name: str) -> GGUFTensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise CheckpointError(f"{self.path.name} has no tensor {name!r}: {_WHOLE_GGUF}") from None

    @staticmethod
    def _dequantize(data: np.ndarray, t: GGUFTensor) -> np.ndarray:  # (rows, bytes per row) -> (rows, numbers per row)
        from gguf.quants import dequantize

        return np.asarray(dequantize(data, t.qtype), dtype=np.float32)


def unpermute_qk_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's reordering of a Llama q or k projection, (n_heads*d_head, d_in).

    For its interleaved rotary layout, llama.cpp's converter stores each head's rows so that the
    two components RoPE turns together, m and m + d_head/2, sit next to each other: row 2m holds
    original row m and row 2m + 1 original row m + d_head/2. This puts them back, so that
    rotate-half RoPE (the Hugging Face convention, and trace()'s) applies.
    """
    rows, cols = w.shape
    if rows % n_heads or (rows // n_heads) % 2:
        raise CheckpointError(f"a q/k projection of {rows} rows cannot hold {n_heads} heads of even width")
    d_head = rows // n_heads
    # stored: (head, m, pair member); original: (head, pair member, m)
    return w.reshape(n_heads, d_head // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


class SafetensorsCheckpoint:
    """The .safetensors files of one checkpoint directory (one file, or shards), read as one."""

    def __init__(self, paths: list[Path]):
        if not paths:
            raise CheckpointError("no .safetensors files given")
        self.files = [SafetensorsFile(p) for p in sorted(paths)]
        self._where: dict[str, SafetensorsFile] = {}
        for f in self.files:
            for name in f.names():
                if name in self._where:
                    raise CheckpointError(f"tensor {name!r} is in both {self._where[name].path.name} and {f.path.name}")
                self._where[name] = f
        self.path = self.files[0].path.parent

    def names(self) -> list[str]:
        return list(self._where)

    def storage(self) -> str:
        """How the weights are stored: "safetensors F32", "safetensors BF16, widened to float32", or F64 narrowed."""
        dtypes = Counter(e.dtype for f in self.files for e in f.entries.values())
        dtype = dtypes.most_common(1)[0][0]
        return f"safetensors {dtype}" + ("" if dtype == "F32" else ", narrowed to float32" if dtype == "F64" else ", widened to float32")

    def has(self, name: str) -> bool:
        return name in self._where

    def shape(self, name: str) -> tuple[int, ...]:
        return self._file(name).shape(name)

    def read(self, name: str) -> np.ndarray:
        return self._file(name).read(name)

    def rows(self, name: str, ids: np.ndarray) -> np.ndarray:
        return self._file(name).rows(name, ids)

    def _file(self, name: str) -> SafetensorsFile:
        try:
            return self._where[name]
        except KeyError:
            raise CheckpointError(f"{self.path}: the checkpoint has no tensor {name!r}: {_WHOLE_SAVE}") from None


# what to do when a tensor or a key the family needs is missing
_WHOLE_SAVE = "the checkpoint is incomplete, or of a layout the converter does not read; give the whole checkpoint as transformers saves it (save_pretrained)"
_WHOLE_GGUF = "the file is incomplete, or not of the architecture it names; convert the whole model again (llama.cpp's convert_hf_to_gguf.py)"
