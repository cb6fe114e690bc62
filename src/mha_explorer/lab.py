"""The attention lab: a request (config, tokens, values or a seed) into a trace payload.

Errors are `LabError`s that name the field and say what to change; the server answers them with 422.
"""

from __future__ import annotations

import re

import numpy as np

from .config import AttentionConfig, ConfigError
from .schema import NOT_FINITE, Packer, TracePayload, TraceRequest, left_out, query_out_of_range, trace_payload
from .trace import Overflow, Trace, trace
from .weights import AttentionWeights, weight_shapes


# the lab's tokens where none are given: its presets' on the page (web/lab.js), in a static copy and
# in a notebook's Explorer.from_config
PRESET_TOKENS = ("the", "cat", "sat", "on", "the", "mat")


def field_name(name, longest: int = 40) -> str:
    """A part of a field's name (or a path) as an answer gives it back: one the client made up is
    cut past `longest` characters (a megabyte of key is not sent back)."""
    name = str(name)
    return name if len(name) <= longest else f"{name[: longest - 10]}…"


class LabError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def random_x(n: int, d_model: int, seed: int) -> np.ndarray:
    """Inputs a person can read: uniform in [-1, 1], one decimal."""
    rng = np.random.default_rng([seed, 1])
    return np.round(rng.uniform(-1, 1, size=(n, d_model)), 1)  # (n, d_model)


def random_weights(config: AttentionConfig, seed: int) -> AttentionWeights:
    """Weights a person can read and that attend visibly: uniform in [-1, 1], one decimal."""
    rng = np.random.default_rng([seed, 2])
    return AttentionWeights(
        **{name: np.round(rng.uniform(-1, 1, size=shape), 1) for name, shape in weight_shapes(config).items()}
    )


def wrong_x(shape: tuple[int, ...], n: int, d_model: int, which: str = "") -> str:
    """What an x of another shape than n tokens of width d_model is told; which: how the tokens were
    given, when that is worth saying."""
    tokens = f"{n} token{'s' if n != 1 else ''}{which}"
    return f"x has shape {shape}; {tokens} of width d_model={d_model} need{'' if n != 1 else 's'} {(n, d_model)}"


def lab_inputs(request: TraceRequest) -> tuple[AttentionConfig, np.ndarray, AttentionWeights]:
    try:
        config = AttentionConfig(**request.config.model_dump())
    except ConfigError as e:
        raise LabError("config", str(e)) from None
    n = len(request.tokens)
    if request.query >= n:
        raise LabError("query", query_out_of_range(request.query, n))

    if request.x is None:
        x = random_x(n, config.d_model, request.seed)
    else:
        x = _array("x", request.x)
        if x.shape != (n, config.d_model):
            raise LabError("x", wrong_x(x.shape, n, config.d_model))

    if request.weights is None:
        weights = random_weights(config, request.seed)
    else:
        shapes = weight_shapes(config)
        unknown = sorted(set(request.weights) - set(shapes))
        if unknown:
            raise LabError(f"weights.{field_name(unknown[0])}", f"not a weight of this config; give {', '.join(shapes)}")
        missing = [name for name in shapes if name not in request.weights]
        if missing:
            raise LabError(f"weights.{missing[0]}", f"missing; this config needs {', '.join(shapes)}")
        arrays = {name: _array(f"weights.{name}", request.weights[name]) for name in shapes}
        for name, shape in shapes.items():
            if arrays[name].shape != shape:
                raise LabError(f"weights.{name}", f"has shape {arrays[name].shape}; this config needs {shape}")
        weights = AttentionWeights(**arrays)
    if request.edits:
        x, weights = edited(request.edits, x, weights)
    return config, x, weights


EDIT_KEY = re.compile(r"(\w+):([0-9]+(?:,[0-9]+)*)", re.ASCII)


def edited(edits: dict[str, float], x: np.ndarray, weights: AttentionWeights) -> tuple[np.ndarray, AttentionWeights]:
    """x and the weights with single values set: edits maps "name:i,j,..." to the new value."""
    arrays = {"x": x.copy()} | {name: a.copy() for name, a in weights.arrays().items()}
    for key, value in edits.items():
        field = f"edits.{field_name(key)}"  # the page's keys are short; a megabyte is not sent back
        match = EDIT_KEY.fullmatch(key)
        if match and re.fullmatch(r"b_[QKVO]", match[1]) and match[1] not in arrays:  # a bias of a layer without biases
            raise LabError(field, f"{match[1]} is a bias, and this config has none: set bias to true, or edit one of {', '.join(arrays)}")
        if not match or match[1] not in arrays:
            raise LabError(field, f"an edit is keyed name:i,j (as W_Q:0,1,1), with name one of {', '.join(arrays)}")
        a = arrays[match[1]]
        digits = match[2].split(",")
        # an index of 10 digits or more is past any array's end (and Python reads no int of 4,300
        # digits: its leading zeros are left out before it is read)
        index = tuple(int(i.lstrip("0") or "0") if len(i.lstrip("0")) < 10 else np.iinfo(np.int64).max for i in digits)
        if len(index) != a.ndim or any(i >= size for i, size in zip(index, a.shape)):
            raise LabError(field, f"{match[1]} has shape {a.shape}: give {a.ndim} indices, each below its size")
        a[index] = value
    x = arrays.pop("x")
    return x, AttentionWeights(**arrays)


def lab_payload(request: TraceRequest, packer: Packer | None = None) -> TracePayload:
    """The trace the request asks for. With a packer (encoding "binary"), its arrays go to the
    packer and the payload holds their offsets."""
    config, x, weights = lab_inputs(request)
    t, too_large = checked_trace(x, weights, config)
    if too_large:
        raise LabError(largest_given(request, x, weights), too_large)
    encode = None if packer is None else (lambda name, a: packer.array(a))
    return trace_payload(t, request.tokens, weights, request.query, request.encoding, encode, derived=left_out(packer))


def largest_given(request: TraceRequest, x: np.ndarray, weights: AttentionWeights) -> str:
    """The field of the request that gave the largest value (edits, x or weights): what an overflow
    is said of. A seed draws none so large."""
    given = {"x": np.abs(x).max() if request.x is not None else 0.0}
    if request.weights is not None:
        given["weights"] = max(float(np.abs(a).max()) for a in weights.arrays().values())
    if request.edits:
        given["edits"] = max(abs(v) for v in request.edits.values())
    return max(given, key=given.get)


def checked_trace(x: np.ndarray, weights: AttentionWeights, config: AttentionConfig) -> tuple[Trace | None, str | None]:
    """trace(), or what to change if a stage of it passed float64's range (trace() finds it, a
    masked score's too)."""
    try:
        return trace(x, weights, config), None
    except Overflow as error:
        return None, str(error)


def _array(field: str, values) -> np.ndarray:
    try:
        a = np.array(values, dtype=np.float64)
    except (ValueError, TypeError):
        raise LabError(field, "must be a rectangular array of numbers (every row the same length)") from None
    if not np.isfinite(a).all():
        raise LabError(field, f"every value must be {NOT_FINITE}")
    return a
