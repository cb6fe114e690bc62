"""Gemma 3 text decoders (Gemma 3 270M and the like), from a GGUF file or a Hugging Face directory.

Causal; multi-query or grouped-query attention; q and k RMS-normalized per head before RoPE;
most layers see only a sliding window of recent tokens, every sixth sees all (and has its own
RoPE base); scores scaled by query_pre_attn_scalar^-1/2. RMSNorms multiply by (1 + w): the
effective multiplier is used throughout, which is what a GGUF file stores. A layer:
    h'  = h + RMSNorm_post_attn(attention(RMSNorm_in(h)))
    h'' = h' + RMSNorm_post_ffn(W_down (gelu_tanh(W_gate x) * W_up x)),  x = RMSNorm_pre_ffn(h')
The embeddings are scaled by sqrt(d_model).

Source tensors, Hugging Face name | GGUF name (prefix model.layers.{i}. | blk.{i}.):
    model.embed_tokens.weight         | token_embd.weight          (vocab, d)
    input_layernorm.weight            | attn_norm.weight           (d,)
    self_attn.{q,k,v}_proj.weight     | attn_{q,k,v}.weight        (h*e | g*e, d)
    self_attn.{q,k}_norm.weight       | attn_{q,k}_norm.weight     (e,)
    self_attn.o_proj.weight           | attn_output.weight         (d, h*e)
    post_attention_layernorm.weight   | post_attention_norm.weight (d,)
    pre_feedforward_layernorm.weight  | ffn_norm.weight            (d,)
    post_feedforward_layernorm.weight | post_ffw_norm.weight       (d,)
    mlp.{gate,up,down}_proj.weight    | ffn_{gate,up,down}.weight
A GGUF file holds no layer pattern, local RoPE base or score scale; they are taken as llama.cpp
takes them for this architecture: every sixth layer global, local base 10000, scale
1/sqrt(d_head) (1/sqrt(d_model/n_heads) for the 62-layer model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config import AttentionConfig
from ..trace import rms_norm
from ..weights import AttentionWeights
from .errors import CheckpointError
from .forward import Architecture, check_layer_held, check_shape, gelu_tanh, linear, per_head
from . import llama
from .readers import GGUFFile, SafetensorsCheckpoint

NORMS = ("attn_norm", "post_attn_norm", "ffn_norm", "post_ffn_norm", "q_norm", "k_norm")
# Llama's names, with the norms Gemma adds; its MLP's first norm has another name in HF files
HF_NAMES = llama.HF_NAMES | {
    "q_norm": "model.layers.{i}.self_attn.q_norm.weight",
    "k_norm": "model.layers.{i}.self_attn.k_norm.weight",
    "post_attn_norm": "model.layers.{i}.post_attention_layernorm.weight",
    "ffn_norm": "model.layers.{i}.pre_feedforward_layernorm.weight",
    "post_ffn_norm": "model.layers.{i}.post_feedforward_layernorm.weight",
}
GGUF_NAMES = llama.GGUF_NAMES | {
    "q_norm": "blk.{i}.attn_q_norm.weight",
    "k_norm": "blk.{i}.attn_k_norm.weight",
    "post_attn_norm": "blk.{i}.post_attention_norm.weight",
    "post_ffn_norm": "blk.{i}.post_ffw_norm.weight",
}
# what transformers' Gemma3TextConfig takes for a key its config.json leaves out
HF_DEFAULTS = {"head_dim": 256, "num_key_value_heads": 4, "query_pre_attn_scalar": 256, "rope_theta": 1_000_000.0, "sliding_window": 4096}
GGUF_GLOBAL_EVERY = 6  # llama.cpp: layer i is global when (i + 1) % 6 == 0
GGUF_LOCAL_ROPE_THETA = 10000.0


@dataclass(frozen=True)
class Sizes(llama.Sizes):
    rope_theta: dict[str, float]  # per layer type
    scale: float  # query_pre_attn_scalar ** -0.5
    sliding_window: int
    layer_types: tuple[str, ...]  # "sliding_attention" or "full_attention", per layer


class Gemma3(Architecture):
    family = "gemma3"
    input_note = llama.Llama.input_note  # pre-norm, as Llama
    output_note = "y is the attention's output: the layer normalizes it (RMSNorm) and adds it to the residual stream, then the MLP."
    norm_note = (
        "Gemma's RMSNorm multiplies by 1 + g, where g is the weight Hugging Face checkpoints store (GGUF files store 1 + g): "
        "the learned w shown here for q and k is that 1 + g, the multiplier itself."
    )

    def __init__(self, s: Sizes, source, names: dict[str, str], norm_offset: float, progress: Callable[[float, str], None]):
        where = str(source.path)
        self.sizes, self.n_layers, self.d_model, self.max_positions = s, s.n_layers, s.d_model, s.max_positions
        d, h, g, e = s.d_model, s.n_heads, s.n_kv_heads, s.d_head
        if len(s.layer_types) != s.n_layers or set(s.layer_types) - {"sliding_attention", "full_attention"}:
            raise CheckpointError(f'{where}: layer_types {list(s.layer_types)} do not give one of "sliding_attention" and "full_attention" for each of the {s.n_layers} layer{"" if s.n_layers == 1 else "s"}')
        self.configs = {
            kind: AttentionConfig(
                d_model=d,
                n_heads=h,
                n_kv_heads=g,
                d_head=e,
                causal=True,
                qk_norm=True,
                norm_eps=s.eps,
                rope_theta=s.rope_theta[kind],
                sliding_window=s.sliding_window if kind == "sliding_attention" else None,
                scale=s.scale,
            )
            for kind in set(s.layer_types)
        }

        hf = source.path.is_dir()  # a Hugging Face directory, else a GGUF file: how an error names the config's keys
        keys, gives = llama.size_keys(hf, "gemma3"), "config.json" if hf else "the metadata"

        def get(key: str, i: int, *axes: str) -> np.ndarray:
            name = names[key].format(i=i)
            a = check_shape(where, name, source.read(name), *llama.shaped(s, keys, *axes), gives)
            return a + np.float32(norm_offset) if key in NORMS else a  # the effective multiplier 1 + w

        self._source, self._embed_name = source, names["embed"]
        if source.shape(self._embed_name)[1:] != (d,):
            raise CheckpointError(f"{where}: {self._embed_name} has shape {source.shape(self._embed_name)}; expected (vocab, {d}), the model width {gives}'s {keys['d_model']} gives")
        self.n_vocab = source.shape(self._embed_name)[0]
        # the reference keeps sqrt(d_model) as a float32 number and multiplies in float32
        self.embed_scale = np.float32(np.sqrt(d))
        self.layers = []
        held = "config.json's num_hidden_layers" if hf else "the metadata's block_count"
        for i in range(s.n_layers):
            progress(i / s.n_layers, f"layer {i}")
            check_layer_held(source, names["q"], i, s.n_layers, held, where)
            attn = AttentionWeights(
                W_Q=per_head(get("q", i, "n_heads*d_head", "d_model"), h),  # (h, d, e)
                W_K=per_head(get("k", i, "n_kv_heads*d_head", "d_model"), g),  # (g, d, e)
                W_V=per_head(get("v", i, "n_kv_heads*d_head", "d_model"), g),  # (g, d, e)
                W_O=np.ascontiguousarray(get("o", i, "d_model", "n_heads*d_head").T),  # (h*e, d)
                q_norm=get("q_norm", i, "d_head"),
                k_norm=get("k_norm", i, "d_head"),
            )
            attn.check(self.attention_config(i))
            self.layers.append(
                {"attention": attn.frozen()}  # read-only, so trace() keeps its packed form
                | {key: get(key, i, "d_model") for key in ("attn_norm", "post_attn_norm", "ffn_norm", "post_ffn_norm")}
                | {"gate": get("gate", i, "d_ffn", "d_model"), "up": get("up", i, "d_ffn", "d_model"), "down": get("down", i, "d_model", "d_ffn")}
            )

    def embed(self, ids: np.ndarray) -> np.ndarray:
        return self._source.rows(self._embed_name, ids) * self.embed_scale  # (n, d)

    def attention_config(self, layer: int) -> AttentionConfig:
        return self.configs[self.sizes.layer_types[layer]]

    def attention_weights(self, layer: int) -> AttentionWeights:
        return self.layers[layer]["attention"]

    def attention_input(self, h: np.ndarray, layer: int) -> np.ndarray:
        return rms_norm(h, self.layers[layer]["attn_norm"], self.sizes.eps)

    def after_attention(self, h: np.ndarray, attention_output: np.ndarray, layer: int) -> np.ndarray:
        p, eps = self.layers[layer], self.sizes.eps
        h = h + rms_norm(attention_output, p["post_attn_norm"], eps)  # (n, d)
        x = rms_norm(h, p["ffn_norm"], eps)
        mlp = linear(gelu_tanh(linear(x, p["gate"])) * linear(x, p["up"]), p["down"])  # (n, d)
        return h + rms_norm(mlp, p["post_ffn_norm"], eps)

    def layer_note(self, layer: int) -> str:
        """A local layer (a sliding window) or a global one, beside the others; with the rotary base of each."""
        s = self.sizes
        full = [i for i, kind in enumerate(s.layer_types) if kind == "full_attention"]
        if len(full) in (0, s.n_layers):  # every layer alike
            return ""
        theta = {kind: f"{base:,.0f}" for kind, base in s.rope_theta.items()}
        listed = ", ".join(map(str, full))
        if s.layer_types[layer] == "full_attention":
            return (
                f"Layer {layer} is one of the model's {len(full)} global layers ({listed}): its queries see every token before them, "
                f"with no window, and its rotary base θ is {theta['full_attention']}. The other {s.n_layers - len(full)} layers are local: "
                f"their queries see only the last {s.sliding_window} tokens (their sliding window), and θ is {theta['sliding_attention']}. "
                "A larger θ turns each pair more slowly, so that positions far apart stay told apart."
            )
        return (
            f"Layer {layer} is one of the model's {s.n_layers - len(full)} local layers: its queries see only the last {s.sliding_window} "
            f"tokens (its sliding window), and its rotary base θ is {theta['sliding_attention']}. Layers {listed} are global: their "
            f"queries see every token before them, and θ is {theta['full_attention']}."
        )

    def summary(self) -> dict:
        s = self.sizes
        return {
            "norm": "pre- and post-norm RMSNorm, multiplying by 1 + g (g: the weight Hugging Face checkpoints store; GGUF files store 1 + g)",
            "mlp": "GeGLU (tanh GELU)",
            "positions": "RoPE",
            "mask": f"causal; sliding window of {s.sliding_window} (local layers) except on full-attention (global) layers",
            "full_attention_layers": [i for i, t in enumerate(s.layer_types) if t == "full_attention"],
            "rope_theta": s.rope_theta,
            "scale": s.scale,
        }


def from_hf(cfg: dict, tensors: SafetensorsCheckpoint, progress) -> Gemma3:
    where = str(tensors.path)
    for key in ("attn_logit_softcapping", "use_bidirectional_attention", "attention_bias"):
        if cfg.get(key):
            raise CheckpointError(f"{where}: {key} is {cfg[key]!r}; the Gemma 3 converter supports models without it")
    act = cfg.get("hidden_activation") or cfg.get("hidden_act") or "gelu_pytorch_tanh"
    if act != "gelu_pytorch_tanh":
        raise CheckpointError(f"{where}: hidden_activation is {act!r}; the Gemma 3 converter supports gelu_pytorch_tanh")
    common = llama.hf_sizes(cfg, where, HF_DEFAULTS)
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params and not params.keys() & {"full_attention", "sliding_attention"}:
        # transformers reads Gemma 3's per layer type: one flat base it leaves unused (1e6 and 1e4 stand)
        raise CheckpointError(
            f"{where}/config.json: rope_parameters gives one rope_theta ({params['rope_theta']!r}) for every layer; Gemma 3's is per "
            'layer type, {"full_attention": {"rope_theta": ...}, "sliding_attention": {"rope_theta": ...}} (transformers leaves a flat '
            "one unused and keeps 1000000 and 10000): write it in that form"
        )
    types = cfg.get("layer_types")
    if types is not None and not isinstance(types, list):
        raise CheckpointError(f'{where}/config.json: layer_types is {types!r}; give a list, one "sliding_attention" or "full_attention" per layer')
    if not types:
        every = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or GGUF_GLOBAL_EVERY)
        types = _pattern(common["n_layers"], every)
    sizes = Sizes(
        **common,
        rope_theta={
            "full_attention": llama.hf_rope_theta(cfg, where, "full_attention", HF_DEFAULTS["rope_theta"]),
            "sliding_attention": _local_theta(cfg, where),
        },
        scale=float(cfg.get("query_pre_attn_scalar") or HF_DEFAULTS["query_pre_attn_scalar"]) ** -0.5,
        sliding_window=int(cfg.get("sliding_window") or HF_DEFAULTS["sliding_window"]),
        layer_types=tuple(types),
    )
    return Gemma3(sizes, tensors, llama.hf_names(tensors, HF_NAMES), norm_offset=1.0, progress=progress)


def from_gguf(gguf: GGUFFile, progress) -> Gemma3:
    where, a = str(gguf.path), "gemma3"
    scaling = gguf.value(f"{a}.rope.scaling.type", "none")
    if scaling != "none":
        raise CheckpointError(f"{where} uses RoPE scaling {scaling!r}; supported: none")
    if gguf.has("blk.0.attn_q.bias"):
        raise CheckpointError(f"{where} has attention biases; the Gemma 3 converter reads models without them")
    common = llama.gguf_sizes(gguf, a)
    d, h, n, e = common["d_model"], common["n_heads"], common["n_layers"], common["d_head"]
    if llama.gguf_number(gguf, f"{a}.attention.value_length", e) != e:
        raise CheckpointError(f"{where}: key and value widths differ; the Gemma 3 converter expects them equal")
    sizes = Sizes(
        **common,
        rope_theta={
            "full_attention": llama.gguf_number(gguf, f"{a}.rope.freq_base", 1_000_000.0, kind=float),
            "sliding_attention": GGUF_LOCAL_ROPE_THETA,
        },
        scale=float(d // h if n == 62 else e) ** -0.5,
        sliding_window=llama.gguf_number(gguf, f"{a}.attention.sliding_window"),
        layer_types=_pattern(n, GGUF_GLOBAL_EVERY),
    )
    return Gemma3(sizes, gguf, GGUF_NAMES, norm_offset=0.0, progress=progress)


def _pattern(n_layers: int, every: int) -> tuple[str, ...]:
    return tuple("full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(n_layers))


def _local_theta(cfg: dict, where: str) -> float:
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and "sliding_attention" in params:
        return llama.hf_rope_theta(cfg, where, "sliding_attention")
    return float(cfg.get("rope_local_base_freq") or GGUF_LOCAL_ROPE_THETA)  # null: not given
