"""Llama-family decoders (SmolLM2 and the like), from a GGUF file or a Hugging Face directory.

Causal; grouped-query attention; rotary positions (RoPE); RMSNorm before attention and MLP;
a SwiGLU MLP. A layer (pre-norm):
    h' = h + attention(RMSNorm(h) * w_attn)
    h'' = h' + W_down (silu(W_gate x) * W_up x),   x = RMSNorm(h') * w_ffn

Source tensors, Hugging Face name | GGUF name, shape as read (out, in):
    model.embed_tokens.weight                   | token_embd.weight        (vocab, d)
    model.layers.{i}.input_layernorm.weight     | blk.{i}.attn_norm.weight (d,)
    model.layers.{i}.self_attn.q_proj.weight    | blk.{i}.attn_q.weight    (h*e, d)  GGUF: rows reordered
    model.layers.{i}.self_attn.k_proj.weight    | blk.{i}.attn_k.weight    (g*e, d)  GGUF: rows reordered
    model.layers.{i}.self_attn.v_proj.weight    | blk.{i}.attn_v.weight    (g*e, d)
    model.layers.{i}.self_attn.o_proj.weight    | blk.{i}.attn_output.weight (d, h*e)
    model.layers.{i}.post_attention_layernorm.weight | blk.{i}.ffn_norm.weight (d,)
    model.layers.{i}.mlp.{gate,up}_proj.weight  | blk.{i}.ffn_{gate,up}.weight (f, d)
    model.layers.{i}.mlp.down_proj.weight       | blk.{i}.ffn_down.weight  (d, f)
GGUF files store q and k with llama.cpp's row order for interleaved RoPE; readers.unpermute_qk_rows
puts them back in the rotate-half order that trace() and Hugging Face use.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config import AttentionConfig
from ..trace import rms_norm
from ..weights import AttentionWeights
from .errors import CheckpointError
from .forward import Architecture, check_layer_held, check_shape, linear, per_head, silu
from .readers import GGUFFile, SafetensorsCheckpoint, unpermute_qk_rows

HF_NAMES = {
    "embed": "model.embed_tokens.weight",
    "attn_norm": "model.layers.{i}.input_layernorm.weight",
    "q": "model.layers.{i}.self_attn.q_proj.weight",
    "k": "model.layers.{i}.self_attn.k_proj.weight",
    "v": "model.layers.{i}.self_attn.v_proj.weight",
    "o": "model.layers.{i}.self_attn.o_proj.weight",
    "ffn_norm": "model.layers.{i}.post_attention_layernorm.weight",
    "gate": "model.layers.{i}.mlp.gate_proj.weight",
    "up": "model.layers.{i}.mlp.up_proj.weight",
    "down": "model.layers.{i}.mlp.down_proj.weight",
}
GGUF_NAMES = {
    "embed": "token_embd.weight",
    "attn_norm": "blk.{i}.attn_norm.weight",
    "q": "blk.{i}.attn_q.weight",
    "k": "blk.{i}.attn_k.weight",
    "v": "blk.{i}.attn_v.weight",
    "o": "blk.{i}.attn_output.weight",
    "ffn_norm": "blk.{i}.ffn_norm.weight",
    "gate": "blk.{i}.ffn_gate.weight",
    "up": "blk.{i}.ffn_up.weight",
    "down": "blk.{i}.ffn_down.weight",
}


@dataclass(frozen=True)
class Sizes:
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ffn: int
    n_layers: int
    eps: float  # of the RMSNorms
    rope_theta: float
    max_positions: int | None


def hf_sizes(cfg: dict, where: str, defaults: dict | None = None) -> dict:
    """The sizes every decoder family reads alike from a Hugging Face config, as Sizes' keywords.
    defaults: the family's own for keys the config leaves out (transformers uses them too)."""
    cfg = {**(defaults or {}), **cfg}
    d, h = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    return {
        "d_model": d,
        "n_heads": h,
        "n_kv_heads": int(cfg.get("num_key_value_heads") or h),
        "d_head": head_width(d, h, cfg.get("head_dim"), f"{where}/config.json: hidden_size", "num_attention_heads", "head_dim"),
        "d_ffn": int(cfg["intermediate_size"]),
        "n_layers": int(cfg["num_hidden_layers"]),
        "eps": float(cfg.get("rms_norm_eps") or 1e-6),  # null: not given
        "max_positions": cfg.get("max_position_embeddings"),
    }


def gguf_sizes(gguf: GGUFFile, a: str) -> dict:
    """The same from a GGUF file's metadata, whose keys start with the architecture's name a."""
    d, h = gguf_number(gguf, f"{a}.embedding_length"), gguf_number(gguf, f"{a}.attention.head_count")
    return {
        "d_model": d,
        "n_heads": h,
        "n_kv_heads": gguf_number(gguf, f"{a}.attention.head_count_kv", h),
        "d_head": head_width(d, h, gguf_number(gguf, f"{a}.attention.key_length", None), f"{gguf.path.name}: {a}.embedding_length", f"{a}.attention.head_count", f"{a}.attention.key_length"),
        "d_ffn": gguf_number(gguf, f"{a}.feed_forward_length"),
        "n_layers": gguf_number(gguf, f"{a}.block_count"),
        "eps": gguf_number(gguf, f"{a}.attention.layer_norm_rms_epsilon", kind=float),
        "max_positions": gguf_number(gguf, f"{a}.context_length", None),
    }


def size_keys(hf: bool, arch: str) -> dict[str, str]:
    """What each of Sizes' widths is called where it was read: config.json's key, or the GGUF
    metadata's (under the architecture's name)."""
    if hf:
        return {"d_model": "hidden_size", "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads", "d_head": "head_dim", "d_ffn": "intermediate_size"}
    return {
        "d_model": f"{arch}.embedding_length",
        "n_heads": f"{arch}.attention.head_count",
        "n_kv_heads": f"{arch}.attention.head_count_kv",
        "d_head": f"{arch}.attention.key_length",
        "d_ffn": f"{arch}.feed_forward_length",
    }


def shaped(s: Sizes, keys: dict[str, str], *axes: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The shape that axes written as Sizes' names ("n_kv_heads*d_head", "d_model") give, and how the
    keys give each: "num_key_value_heads × head_dim (3 × 8 = 24)", "hidden_size (48)"."""
    shape, said = [], []
    for axis in axes:
        parts = axis.split("*")
        values = [getattr(s, part) for part in parts]
        shape.append(math.prod(values))
        named = " × ".join(keys[part] for part in parts)
        said.append(f"{named} ({values[0]})" if len(parts) == 1 else f"{named} ({' × '.join(map(str, values))} = {shape[-1]})")
    return tuple(shape), tuple(said)


def gguf_number(gguf: GGUFFile, key: str, default=..., kind: type = int):
    """A metadata number, checked as config.json's are: a whole number, 1 or more (kind int), or a
    number above 0 (kind float). default: when the key is absent (none: the key is required)."""
    value = gguf.value(key, default)
    if value is default and default is not ...:
        return default
    if kind is int and isinstance(value, float) and value.is_integer():  # 4096.0: a writer's float for a count
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float)) or not 0 < value < math.inf:
        wanted = "a whole number, 1 or more" if kind is int else "a number above 0"
        raise CheckpointError(f"{gguf.path.name}: metadata {key} is {value!r}; give {wanted}")
    return kind(value)


def head_width(d: int, h: int, given, width_key: str, heads_key: str, head_key: str) -> int:
    """A head's width: the config's, or d_model split evenly among the heads (where it can be)."""
    if given is not None:
        return int(given)
    if d % h:
        raise CheckpointError(f"{width_key} {d} is not divisible by {heads_key} {h}; give a head count that divides it, or the head width as {head_key}")
    return d // h


class Llama(Architecture):
    family = "llama"
    input_note = "X is the residual stream entering the layer, after the layer's RMSNorm: the model normalizes before attention."
    output_note = "y is the attention's output: the layer adds it to the residual stream (its input before the norm), then the MLP."

    def __init__(self, s: Sizes, source, names: dict[str, str], gguf: bool, progress: Callable[[float, str], None]):
        where = str(source.path)
        self.sizes, self.n_layers, self.d_model, self.max_positions = s, s.n_layers, s.d_model, s.max_positions
        d, h, g, e = s.d_model, s.n_heads, s.n_kv_heads, s.d_head
        self.config = AttentionConfig(
            d_model=d, n_heads=h, n_kv_heads=g, d_head=e, causal=True, rope_theta=float(s.rope_theta)
        )

        keys, gives = size_keys(not gguf, "llama"), "the metadata" if gguf else "config.json"

        def get(key: str, i: int, *axes: str) -> np.ndarray:
            name = names[key].format(i=i)
            return check_shape(where, name, source.read(name), *shaped(s, keys, *axes), gives)

        self._source, self._embed_name = source, names["embed"]
        if source.shape(self._embed_name)[1:] != (d,):
            raise CheckpointError(f"{where}: {self._embed_name} has shape {source.shape(self._embed_name)}; expected (vocab, {d}), the model width {gives}'s {keys['d_model']} gives")
        self.n_vocab = source.shape(self._embed_name)[0]
        self.layers = []
        held = "the metadata's block_count" if gguf else "config.json's num_hidden_layers"
        for i in range(s.n_layers):
            progress(i / s.n_layers, f"layer {i}")
            check_layer_held(source, names["q"], i, s.n_layers, held, where)
            W_q, W_k = get("q", i, "n_heads*d_head", "d_model"), get("k", i, "n_kv_heads*d_head", "d_model")  # (h*e, d), (g*e, d)
            if gguf:
                W_q, W_k = unpermute_qk_rows(W_q, h), unpermute_qk_rows(W_k, g)
            attn = AttentionWeights(
                W_Q=per_head(W_q, h),  # (h, d, e)
                W_K=per_head(W_k, g),  # (g, d, e)
                W_V=per_head(get("v", i, "n_kv_heads*d_head", "d_model"), g),  # (g, d, e)
                W_O=np.ascontiguousarray(get("o", i, "d_model", "n_heads*d_head").T),  # (h*e, d)
            )
            attn.check(self.config)
            self.layers.append(
                {
                    "attention": attn.frozen(),  # read-only, so trace() keeps its packed form
                    "attn_norm": get("attn_norm", i, "d_model"),
                    "ffn_norm": get("ffn_norm", i, "d_model"),
                    "gate": get("gate", i, "d_ffn", "d_model"),
                    "up": get("up", i, "d_ffn", "d_model"),
                    "down": get("down", i, "d_model", "d_ffn"),
                }
            )

    def embed(self, ids: np.ndarray) -> np.ndarray:
        return self._source.rows(self._embed_name, ids)  # (n, d)

    def attention_config(self, layer: int) -> AttentionConfig:
        return self.config

    def attention_weights(self, layer: int) -> AttentionWeights:
        return self.layers[layer]["attention"]

    def attention_input(self, h: np.ndarray, layer: int) -> np.ndarray:
        return rms_norm(h, self.layers[layer]["attn_norm"], self.sizes.eps)

    def after_attention(self, h: np.ndarray, attention_output: np.ndarray, layer: int) -> np.ndarray:
        p = self.layers[layer]
        h = h + attention_output  # (n, d)
        x = rms_norm(h, p["ffn_norm"], self.sizes.eps)
        return h + linear(silu(linear(x, p["gate"])) * linear(x, p["up"]), p["down"])  # (n, d)

    def summary(self) -> dict:
        return {"norm": "pre-norm RMSNorm", "mlp": "SwiGLU", "positions": "RoPE", "mask": "causal"}


def from_hf(cfg: dict, tensors: SafetensorsCheckpoint, progress) -> Llama:
    where = str(tensors.path)
    for key, allowed in (("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False)):
        if cfg.get(key) is not None and cfg[key] != allowed:  # null: not given, the default
            raise CheckpointError(f"{where}: {key} is {cfg[key]!r}; the Llama converter supports {allowed!r} only")
    sizes = Sizes(**hf_sizes(cfg, where), rope_theta=hf_rope_theta(cfg, where))
    return Llama(sizes, tensors, hf_names(tensors, HF_NAMES), gguf=False, progress=progress)


def hf_names(tensors: SafetensorsCheckpoint, names: dict[str, str]) -> dict[str, str]:
    """The tensor names of a Hugging Face checkpoint: under model. (a ...ForCausalLM's save), or
    without it (the base model's, as LlamaModel.save_pretrained writes them)."""
    if tensors.has(names["embed"]) or not tensors.has(names["embed"].removeprefix("model.")):
        return names
    return {key: name.removeprefix("model.") for key, name in names.items()}


def from_gguf(gguf: GGUFFile, progress) -> Llama:
    where, a = str(gguf.path), "llama"
    if gguf.value(f"{a}.expert_count", 0):
        raise CheckpointError(f"{where} is a mixture-of-experts model; the Llama converter reads dense models only")
    scaling = gguf.value(f"{a}.rope.scaling.type", "none")
    if scaling != "none":
        raise CheckpointError(f"{where} uses RoPE scaling {scaling!r}; supported: none")
    if gguf.has("blk.0.attn_q.bias"):
        raise CheckpointError(f"{where} has attention biases; the Llama converter reads models without them")
    sizes = Sizes(**gguf_sizes(gguf, a), rope_theta=gguf_number(gguf, f"{a}.rope.freq_base", 10000.0, kind=float))
    rotated = gguf_number(gguf, f"{a}.rope.dimension_count", sizes.d_head)
    if rotated != sizes.d_head:
        raise CheckpointError(f"{where} rotates {rotated} of {sizes.d_head} components per head; only full-width RoPE is supported")
    return Llama(sizes, gguf, GGUF_NAMES, gguf=True, progress=progress)


def hf_rope_theta(cfg: dict, where: str, layer_type: str | None = None, default: float = 10000.0) -> float:
    """The RoPE base of a Hugging Face config, old style (rope_theta, rope_scaling) or new
    (rope_parameters, per layer type for models that mix them); default where it gives none (the
    family's, as transformers has it). Scaled RoPE is refused."""
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and layer_type is not None and layer_type in params:
        params = params[layer_type]
    # a config may hold both keys (transformers applies a scaling under either): each is checked
    for key, entry in (("rope_parameters", params), ("rope_scaling", cfg.get("rope_scaling"))):
        if entry is not None and not isinstance(entry, dict):  # "linear": a scaling named, not given
            raise CheckpointError(f"{where}/config.json: {key} is {entry!r}; transformers writes it as an object ({{\"rope_type\": ...}}), and the explorer supports RoPE without scaling: remove it, or write it so")
        kind = entry.get("rope_type", entry.get("type", "default")) if isinstance(entry, dict) else "default"
        if kind != "default":
            raise CheckpointError(f"{where}: {key} asks for RoPE scaling {kind!r}; supported: default (none)")
    if isinstance(params, dict) and "rope_theta" in params:
        theta = params["rope_theta"]
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not 0 < theta < math.inf:
            raise CheckpointError(f"{where}/config.json: rope_parameters' rope_theta is {theta!r}; give a number above 0")
        return float(theta)
    return float(cfg.get("rope_theta") or default)
