"""The JSON contract, defined once: the API, the CLI's --json, the static site and the widget use it."""

from __future__ import annotations

from dataclasses import asdict
import base64
import json
import math
import struct
from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from .config import AttentionConfig
from .costs import costs
from .narrative import mathml, notes, page_stages
from .trace import STAGES, Trace, hidden_keys, recorded_stages, trace
from .weights import AttentionWeights

SCHEMA_VERSION = 1


class Array(BaseModel):
    """A row-major array of prod(shape) numbers, in one of three encodings.

    `data`: a JSON list, null standing for -inf (a masked score). `b64`: the little-endian
    bytes in base64, which the page decodes straight into a typed array. `offset`: in a binary
    answer (see `Packer`), where the bytes start after the JSON head, for a typed-array view.
    """

    shape: list[int]
    data: list[float | None] | None = None
    b64: str | None = None
    offset: int | None = None
    dtype: Literal["float64", "float32"] = "float64"  # of the b64 bytes
    heads: list[int] | None = Field(
        default=None, description="when set, only these slices of axis 0 (heads) are present, in this order"
    )
    block: int | None = Field(
        default=None,
        description="with heads: rows of axis 0 per head, where each head holds a block of rows (W_O, d_v rows a head) rather than one slice",
    )
    planes: bool | None = Field(
        default=None,
        description="in a binary answer: the bytes are stored by place, every number's first byte, then every second byte, and so on (see Packer)",
    )


class ConfigModel(BaseModel):
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_v: int
    causal: bool
    bias: bool
    kind: Literal["MHA", "GQA", "MQA"]
    qk_norm: bool = False
    norm_eps: float | None = None
    rope_theta: float | None = None
    sliding_window: int | None = None
    scale: float | None = None


def config_model(config: AttentionConfig) -> ConfigModel:
    """The config as the payload states it, with the epsilon its q/k norm uses (given or not)."""
    return ConfigModel(**(config.to_dict() | {"norm_eps": config.qk_norm_eps}), kind=config.kind)


class StageModel(BaseModel):
    name: str
    shape: str
    formula: str
    meaning: str


class PageStageModel(BaseModel):
    id: str
    title: str
    trace_stages: list[str]
    latex: str
    mathml: str
    explanation: str


class Note(BaseModel):
    id: str
    text: str


class KVCacheModel(BaseModel):
    kind: str
    n_kv_heads: int
    numbers_per_token: int
    tokens: int = Field(description="tokens whose keys and values are kept: n, or at most the sliding window")
    numbers: int
    bytes_per_token: dict[str, int]
    bytes: dict[str, int]


class CostsModel(BaseModel):
    n: int
    multiply_adds: dict[str, int]
    attention_entries: int
    kv_cache: KVCacheModel
    kv_cache_mha: KVCacheModel
    kv_cache_mqa: KVCacheModel


class ModelLayer(BaseModel):
    """What a real model's trace adds: which model and layer, and every head's pattern in small."""

    name: str
    title: str
    family: str
    layer: int = Field(description="numbered from 0")
    n_layers: int
    input_note: str = Field(default="", description="what X is: where the layer's attention input comes from")
    output_note: str = Field(default="", description="where the attention's output y goes in the layer")
    norm_note: str = Field(default="", description="what the q/k norm's learned vectors are, when the family stores them otherwise")
    layer_note: str = Field(default="", description="what sets this layer apart from the model's others (a sliding window, a rotary base), where they differ")
    text: str
    special: list[bool] = Field(description="True for tokens the tokenizer added")
    readable: list[str] = Field(description="the text each token stands for")
    labels: list[str] = Field(
        default_factory=list,
        description="each token as the view labels it: its text with ␣ for a space at its start or end; a byte piece of a character as that character and which piece (␣🐱 1/3)",
    )
    kv_cache_all_layers: dict[str, int] = Field(
        default_factory=dict,
        description="bytes of the whole model's KV cache after these tokens, per dtype: every layer with its own K/V heads and window",
    )
    kv_cache_layers: list[tuple[int, int]] = Field(
        default_factory=list,
        description="each layer's KV cache after these tokens, as [tokens it keeps, numbers a token]: a sliding-window layer keeps its window's last tokens only",
    )
    overview: Array = Field(description="(n_heads, m, m): each head's weights, averaged over blocks of tokens")
    head_shares: Array | None = Field(
        default=None,
        description="(n_heads, n): the length of each head's contribution to each query's output, |z_i W^O_i|: which heads the output draws on most",
    )
    overview_block: int = Field(description="tokens per overview cell along each axis")
    whole_weights: bool = Field(
        default=False,
        description="POST /api/model-weights gives every head's weights of this layer, from which the page works out "
        "the other heads while idle: they weigh little (modelview.WHOLE_WEIGHTS) and the layer has no q/k norm",
    )


class TracePayload(BaseModel):
    schema_version: Literal[1] = SCHEMA_VERSION
    config: ConfigModel
    tokens: list[str]
    query: int = Field(description="index of the query token the view starts from")
    positions: list[int] | None = Field(
        default=None, description="each token's position, by which RoPE turns q and k, where a trace was given its own (else the token's index)"
    )
    kv_group: list[int] = Field(description="head i reads key/value head kv_group[i]")
    stage_table: list[StageModel] = Field(description="name, shape and formula of every recorded stage, in order")
    stages: dict[str, Array]
    derived: list[str] = Field(
        default_factory=list, description="stages left out of a binary answer, for the reader to compute (see derive)"
    )
    factors: dict[str, Array] = Field(
        default_factory=dict,
        description="what the reader needs besides the stages to make those left out: q_rms and k_rms, the root mean square of each row of q and k that the q/k norm divides by",
    )
    weights: dict[str, Array] = Field(description="W_Q, W_K, W_V, W_O and biases, per head (a real model's one head: its slices, and its block of rows of W_O)")
    page_stages: list[PageStageModel]
    notes: list[Note]
    costs: CostsModel
    model: ModelLayer | None = Field(default=None, description="present when the trace is a real model's layer")


def held_shape(a: Array) -> list[int]:
    """The shape of what the array holds: its full shape, or only the heads it names (a slice of
    axis 0 each, or a block of rows each)."""
    if a.heads is None:
        return list(a.shape)
    return [len(a.heads) * (a.block or 1), *a.shape[1:]]


def array(a: np.ndarray, encoding: str = "json", dtype: str = "float64", heads: list[int] | None = None) -> Array:
    if encoding == "base64":
        flat = np.asarray(a, dtype="<f4" if dtype == "float32" else "<f8").ravel()
        b64 = base64.b64encode(flat.tobytes()).decode("ascii")
        return Array.model_construct(shape=list(a.shape), b64=b64, dtype=dtype, heads=heads)
    flat = np.asarray(a, dtype="<f8").ravel()
    data = flat.tolist()
    if not np.isfinite(flat).all():
        data = [None if v == -np.inf else v for v in data]
    return Array.model_construct(shape=list(a.shape), data=data)


BINARY_MEDIA_TYPE = "application/vnd.mha-explorer.trace"


class Packer:
    """A binary answer: 8 bytes of little-endian head length, the JSON head (a payload whose arrays
    carry `offset`s), space-padded to a multiple of 8, then every array's little-endian bytes,
    each starting 8-byte aligned. The page views them in place as typed arrays: no decoding.

    With `planes` (an answer to be compressed), each array's bytes are stored by place instead:
    the first byte of every number, then every second byte, and so on. A float's sign and exponent
    then lie together and compress well; its low mantissa bytes, which do not, stay apart. A real
    model's layer compresses to 12% less. The reader puts the bytes back in order (unplane)."""

    def __init__(self, planes: bool = False):
        self.parts: list = []
        self.size = 0
        self.planes = planes

    def array(self, a: np.ndarray, dtype: str = "float64", heads: list[int] | None = None) -> Array:
        flat = np.ascontiguousarray(a, dtype="<f4" if dtype == "float32" else "<f8").reshape(-1)
        offset = self.size
        pad = -flat.nbytes % 8
        if self.planes:
            flat = flat.view(np.uint8).reshape(-1, flat.itemsize).T.copy()  # (bytes per number, numbers)
        self.parts += [flat, bytes(pad)] if pad else [flat]
        self.size += flat.nbytes + pad
        return Array.model_construct(shape=list(a.shape), offset=offset, dtype=dtype, heads=heads, planes=self.planes or None)

    def body(self, head: bytes) -> bytes:
        head += b" " * (-len(head) % 8)
        return b"".join([struct.pack("<Q", len(head)), head, *self.parts])

    def arrays(self) -> bytes:
        """Every array's bytes alone, offsets counted from their start (a widget's binary part)."""
        return b"".join(self.parts)


# Stages a binary answer leaves out, as the reader can make them exactly from others: the scale is
# one IEEE multiply in the scores' own precision, the mask puts -inf where keys are hidden, and a
# head's z is its block of concat's columns. A head's arrays alone (modelview.HeadArrays) hold no
# concat, so they keep their z.
DERIVED = ("scaled", "mask", "z")
FROM_SCORES = ("scaled", "mask")


def unplane(data: bytes | memoryview, itemsize: int) -> bytes:
    """An array's bytes stored by place (Packer with planes) back in the order of its numbers."""
    return np.frombuffer(data, np.uint8).reshape(itemsize, -1).T.tobytes()


def held_bytes(a: Array, buffer: bytes | memoryview, start: int = 0) -> bytes | memoryview:
    """The bytes of what an array of a binary answer holds (held_shape), in its numbers' order:
    `buffer` holds the arrays from `start` on."""
    itemsize = 4 if a.dtype == "float32" else 8
    data = memoryview(buffer)[start + a.offset : start + a.offset + int(np.prod(held_shape(a))) * itemsize]
    return unplane(data, itemsize) if a.planes else data


def left_out(packer: Packer | None, concat: bool = True) -> tuple[str, ...]:
    """The stages an answer leaves out: DERIVED in a binary answer (one with a packer), else none;
    without concat (a head's arrays), those made from the scores only."""
    return () if packer is None else DERIVED if concat else FROM_SCORES


def derive(name: str, scores: np.ndarray, config: ConfigModel) -> np.ndarray:
    """`scaled` or `mask` from the scores (k, n, n) of some heads, as trace() computes them."""
    scale = 1.0 / math.sqrt(config.d_head) if config.scale is None else config.scale
    scaled = scores * np.asarray(scale, scores.dtype)  # in the scores' precision, as trace() multiplies
    if name == "scaled":
        return scaled
    return np.where(hidden_keys(scores.shape[-1], config), -np.inf, scaled).astype(scores.dtype)


def contributions(z: np.ndarray, W_O: np.ndarray, heads: list[int] | None, held: list[int] | None, config: ConfigModel) -> np.ndarray:
    """Each head's part of the output, z_i W^O_i, for the given heads (all, with None), from their z
    (k, n, f) and W^O, whole (h*f, d) or only the blocks of rows of the heads `held`. Summed in
    double precision and rounded to the dtype, as the page works them out (a float32 product is
    exact in a double), so that reader and page agree to the last digit: (k, n, d)."""
    f = config.d_v
    heads = list(range(config.n_heads)) if heads is None else heads
    place = (lambda i: i) if held is None else held.index
    rows = [W_O[place(i) * f : (place(i) + 1) * f].astype(np.float64) for i in heads]
    return np.stack([z[s].astype(np.float64) @ rows[s] for s in range(len(heads))]).astype(z.dtype)  # (k, n, d)


def heads_of_concat(concat: np.ndarray, heads: list[int] | None, config: ConfigModel) -> np.ndarray:
    """z of the given heads (all, with None) from concat (n, n_heads * d_v): (k, n, d_v)."""
    z = concat.reshape(concat.shape[0], config.n_heads, config.d_v).transpose(1, 0, 2)  # (h, n, f)
    return np.ascontiguousarray(z if heads is None else z[heads])


def unpack(body: bytes, answer: type[BaseModel] = TracePayload) -> BaseModel:
    """A binary answer back as `answer` (a trace, unless told: modelview.HeadArrays for
    /api/model-head) with base64 arrays and every stage, the same as a base64 answer: for tests
    and Python clients."""
    (size,) = struct.unpack_from("<Q", body)
    head = answer.model_validate_json(body[8 : 8 + size])
    start = 8 + size

    def inline(a: Array) -> None:
        a.b64 = base64.b64encode(held_bytes(a, body, start)).decode("ascii")
        a.offset = a.planes = None

    def walk(node) -> None:
        if isinstance(node, Array):
            inline(node)
        elif isinstance(node, BaseModel):
            for name in type(node).model_fields:
                walk(getattr(node, name))
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(head)
    derived = getattr(head, "derived", [])
    if derived:
        scores = head.stages["scores"]

        def values(a: Array) -> np.ndarray:
            return np.frombuffer(base64.b64decode(a.b64), dtype="<f4" if a.dtype == "float32" else "<f8")

        made = {}
        for name in derived:
            if name == "z":  # the heads the scores hold
                concat = head.stages["concat"]
                z = heads_of_concat(values(concat).reshape(concat.shape), scores.heads, head.config)  # (k, n, f)
                made[name] = array(z, "base64", concat.dtype, scores.heads)
                made[name].shape = [head.config.n_heads, *z.shape[1:]]
            elif name in ("q_normed", "k_normed"):  # as trace.rms_norm makes them: each row / its rms, times the multiplier
                side = name[0]
                rows, rms = head.stages[side], head.factors[f"{side}_rms"]
                multiplier = values(head.weights[f"{side}_norm"])
                normed = values(rows).reshape(held_shape(rows)) / values(rms).reshape(held_shape(rms))[..., None] * multiplier
                made[name] = array(normed, "base64", rows.dtype, rows.heads)
                made[name].shape = list(rows.shape)
            elif name == "contributions":  # after z, which it is made from
                z = head.stages.get("z") or made["z"]
                W_O = head.weights["W_O"]
                parts = contributions(values(z).reshape(held_shape(z)), values(W_O).reshape(held_shape(W_O)), scores.heads, W_O.heads, head.config)
                made[name] = array(parts, "base64", z.dtype, scores.heads)
                made[name].shape = [head.config.n_heads, z.shape[1], head.config.d_model]
            else:
                made[name] = array(derive(name, values(scores).reshape(-1, *scores.shape[1:]), head.config), "base64", scores.dtype, scores.heads)
                made[name].shape = list(scores.shape)
        order = [s.name for s in STAGES]
        head.stages = {name: head.stages.get(name) or made[name] for name in order if name in head.stages or name in made}
        head.derived = []
        head.factors = {}
    return head


def teaching_payload(encoding: str = "json") -> TracePayload:
    """The teaching example's trace, as the server, a static copy and the widget send it."""
    from .examples import load_teaching_example

    example = load_teaching_example()
    t = trace(example.x, example.weights, example.config)
    return trace_payload(t, list(example.tokens), example.weights, example.tokens.index(example.query), encoding)


def query_out_of_range(query: int, n: int) -> str:
    """What the lab and a real model's layer say of a query position that is not one of n tokens."""
    return f"query={query} is out of range; choose 0 to {n - 1}" if n > 1 else f"query={query} is out of range: there is 1 token; choose 0"


def trace_payload(
    t: Trace,
    tokens: list[str],
    weights: AttentionWeights,
    query: int = 0,
    encoding: str = "json",
    encode=None,
    model: ModelLayer | None = None,
    derived: tuple[str, ...] = (),
    factors: dict[str, Array] | None = None,
) -> TracePayload:
    """The payload of a trace. `encode(name, array) -> Array` may slice or narrow arrays (real models);
    the stages named in `derived` are left out, for the reader to compute (binary answers)."""
    encode = encode or (lambda name, a: array(a, encoding))
    config = t.config
    return TracePayload(
        config=config_model(config),
        tokens=list(tokens),
        query=query,
        positions=None if t.positions is None else list(t.positions),
        kv_group=list(config.kv_group),
        stage_table=[StageModel(**asdict(s)) for s in recorded_stages(t)],
        stages={name: encode(name, a) for name, a in t.stages.items() if name not in derived},
        derived=[name for name in t.stages if name in derived],
        factors=factors or {},
        weights={name: encode(name, a) for name, a in weights.arrays().items()},
        page_stages=[
            PageStageModel(**asdict(s) | {"trace_stages": list(s.trace_stages)}, mathml=mathml(s.latex))
            for s in page_stages(config)
        ],
        notes=[Note(id=i, text=text) for i, text in notes(config)],
        costs=CostsModel(**asdict(costs(config, t.n))),
        model=model,
    )


def payload_arrays(payload: TracePayload) -> dict[str, np.ndarray]:
    """Every stage of a payload as NumPy (see to_numpy)."""
    return {name: to_numpy(a) for name, a in payload.stages.items()}


def to_numpy(a: Array | dict, arrays: bytes | memoryview | None = None) -> np.ndarray:
    """The array as NumPy; with `heads`, only the present head slices (in `heads` order). An array
    with an `offset` reads its bytes from `arrays` (a widget payload's `buffer`, see Packer.arrays).
    `a` may be the plain dict of parsed JSON (a widget's payload, `trace --json`)."""
    if isinstance(a, dict):
        a = Array.model_validate(a)
    shape = held_shape(a)
    dtype = "<f4" if a.dtype == "float32" else "<f8"
    if a.offset is not None:
        if arrays is None:
            raise ValueError("this array's bytes are in a binary part: give it as `arrays` (the payload's buffer)")
        return np.frombuffer(held_bytes(a, arrays), dtype=dtype).astype(np.float64).reshape(shape)
    if a.b64 is not None:
        return np.frombuffer(base64.b64decode(a.b64), dtype=dtype).astype(np.float64).reshape(shape)
    return np.array([-np.inf if v is None else v for v in a.data], dtype=np.float64).reshape(shape)


# ---- requests ---------------------------------------------------------------------------

LAB_MAX_TOKENS = 64
LAB_MAX_WIDTH = 64
LAB_MAX_HEADS = 64
MAX_TOKEN_CHARS = 64

Finite = Annotated[float, Field(allow_inf_nan=False)]
Matrix = list[list[Finite]]
FLOAT64_MAX = int(np.finfo(np.float64).max)
# what x, the edits and the API's numbers are told when one is NaN or past float64 (JSON's 1e400)
NOT_FINITE = "a finite number: no NaN, and none past the largest float64 (about 1.8e308, beyond which JSON's numbers read as infinite)"


def numbers_only(values: list, where: str = "") -> list:
    """Nested lists whose every entry is a finite JSON number (true and "4" are not): a weight
    of any rank. The first entry that is not names itself, as "[0][2][1]"."""
    for i, value in enumerate(values):
        at = f"{where}[{i}]"
        if isinstance(value, list):
            numbers_only(value, at)
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            message = "entry {at} is {given}, not a number; send JSON numbers such as 0.5"
            raise PydanticCustomError("number_type", message, {"at": at, "given": json.dumps(value)})
        elif isinstance(value, int) and abs(value) > FLOAT64_MAX:  # a whole number past float64: no float, no isfinite
            message = "entry {at} is a whole number of about {digits} digits, past the largest float64 (about 1.8e308); send a smaller one"
            raise PydanticCustomError("too_large", message, {"at": at, "digits": int(value.bit_length() * math.log10(2)) + 1})
        elif math.isnan(value):
            message = "entry {at} is NaN: every value must be a finite number"
            raise PydanticCustomError("not_finite", message, {"at": at})
        elif not math.isfinite(value):  # 1e400 (or Infinity) in the JSON: past float64, read as infinite
            message = "entry {at} is past the largest float64 (about 1.8e308), so it reads as infinite; send a smaller one"
            raise PydanticCustomError("not_finite", message, {"at": at})
    return values


Values = Annotated[list, AfterValidator(numbers_only)]


class ConfigIn(BaseModel):
    # strict: a flag is JSON true or false, a width a JSON whole number ("4" and 4.0 are refused)
    model_config = ConfigDict(extra="forbid", strict=True)
    d_model: int = Field(ge=1, le=LAB_MAX_WIDTH)
    n_heads: int = Field(ge=1, le=LAB_MAX_HEADS)
    n_kv_heads: int | None = Field(default=None, ge=1, le=LAB_MAX_HEADS)
    d_head: int | None = Field(default=None, ge=1, le=LAB_MAX_WIDTH)
    d_v: int | None = Field(default=None, ge=1, le=LAB_MAX_WIDTH)
    causal: bool = False
    bias: bool = False


class TraceRequest(BaseModel):
    """A configuration, its tokens, and either explicit values or a seed to draw them from."""

    model_config = ConfigDict(extra="forbid", strict=True)
    config: ConfigIn
    tokens: list[Annotated[str, Field(min_length=1, max_length=MAX_TOKEN_CHARS)]] = Field(
        min_length=1, max_length=LAB_MAX_TOKENS
    )
    x: Matrix | None = Field(default=None, description="(n, d_model); drawn from the seed when absent")
    weights: dict[str, Values] | None = Field(
        default=None, description="W_Q, W_K, W_V, W_O (and b_Q, b_K, b_V, b_O when bias); drawn from the seed when absent"
    )
    edits: dict[str, Finite] = Field(
        default_factory=dict,
        description="single values set after x and the weights are drawn (or given), keyed name:i,j as in a link, "
        'e.g. {"W_Q:0,1,1": 0.5, "x:2,0": -1}: what the page sends when cells are edited',
    )
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    query: int = Field(default=0, ge=0)
    encoding: Literal["json", "base64", "binary"] = Field(
        default="json",
        description=f"binary: the answer is {BINARY_MEDIA_TYPE}, a JSON head and the raw arrays (see schema.Packer)",
    )
