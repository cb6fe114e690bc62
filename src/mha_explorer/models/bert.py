"""BERT-family encoders (all-MiniLM-L6-v2 and the like) from a Hugging Face directory.

Source tensors (optionally under "bert."):
    embeddings.{word,position,token_type}_embeddings.weight, embeddings.LayerNorm.{weight,bias}
    encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias}     (h*e, d), (h*e,)
    encoder.layer.{i}.attention.output.dense.{weight,bias}              (d, h*e), (d,)
    encoder.layer.{i}.attention.output.LayerNorm.{weight,bias}
    encoder.layer.{i}.intermediate.dense.{weight,bias}, encoder.layer.{i}.output.dense.{weight,bias}
    encoder.layer.{i}.output.LayerNorm.{weight,bias}

A layer (post-norm): a = LayerNorm(h + attention(h)); h' = LayerNorm(a + W2 gelu(W1 a)).
Attention sees every token (no mask): one sentence, no padding.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..config import AttentionConfig
from ..weights import AttentionWeights
from .errors import CheckpointError
from .forward import Architecture, check_layer_held, check_shape, gelu_erf, layer_norm, linear, per_head
from .readers import SafetensorsCheckpoint


class Bert(Architecture):
    family = "bert"
    input_note = "X is the layer's input as it is: the embeddings after their LayerNorm (layer 0), or the output of the layer before, which ends in a LayerNorm."
    output_note = "y is the attention's output: the layer adds it to X and applies a LayerNorm, then the MLP."

    def __init__(self, cfg: dict, tensors: SafetensorsCheckpoint, progress: Callable[[float, str], None]):
        where = str(tensors.path)
        _require(cfg, "hidden_act", "gelu", where)
        _require(cfg, "position_embedding_type", "absolute", where)
        _require(cfg, "is_decoder", False, where)  # a BERT decoder masks causally: read here as an encoder, it would be traced without its mask
        d, h = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        if cfg["max_position_embeddings"] is None:  # BERT's position table has that many rows: no default
            raise CheckpointError(f"{where}/config.json: max_position_embeddings is null; give the rows of the position table")
        self.n_layers, self.d_model, self.max_positions = int(cfg["num_hidden_layers"]), d, int(cfg["max_position_embeddings"])
        self.eps = float(cfg.get("layer_norm_eps") or 1e-12)  # null: not given
        ffn = int(cfg["intermediate_size"])
        p = "bert." if tensors.has("bert.embeddings.word_embeddings.weight") else ""

        def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
            return check_shape(where, p + name, tensors.read(p + name), shape)

        self._tensors, self._word = tensors, p + "embeddings.word_embeddings.weight"
        word = tensors.shape(self._word)
        if len(word) != 2:
            raise CheckpointError(f"{where}: {self._word} has shape {word}; an embedding table is (vocab, hidden_size): the checkpoint is damaged")
        if word[1] != d:
            raise CheckpointError(f"{where}/config.json: hidden_size is {d}, but the embedding table {self._word} is {word[1]} wide; set hidden_size to {word[1]}")
        rows = tensors.shape(p + "embeddings.position_embeddings.weight") if tensors.has(p + "embeddings.position_embeddings.weight") else None
        if rows and len(rows) == 2 and rows[0] != self.max_positions:
            raise CheckpointError(
                f"{where}/config.json: max_position_embeddings is {self.max_positions}, but the position table "
                f"{p}embeddings.position_embeddings.weight has {rows[0]} rows; set max_position_embeddings to {rows[0]}"
            )
        # after the width, which the embeddings tell: a wrong hidden_size is said as that, not as the heads
        if d % h:
            raise CheckpointError(f"{where}/config.json: hidden_size {d} is not divisible by num_attention_heads {h}; give a head count that divides it")
        e = d // h
        self.config = AttentionConfig(d_model=d, n_heads=h, d_head=e, bias=True)
        self.n_vocab = tensors.shape(self._word)[0]
        self.positions = get("embeddings.position_embeddings.weight", (self.max_positions, d))
        self.token_type = get("embeddings.token_type_embeddings.weight", (int(cfg.get("type_vocab_size") or 2), d))[0]
        self.embed_norm = get("embeddings.LayerNorm.weight", (d,)), get("embeddings.LayerNorm.bias", (d,))

        self.layers = []
        for i in range(self.n_layers):
            progress(i / self.n_layers, f"layer {i}")
            L = f"encoder.layer.{i}."
            check_layer_held(tensors, p + "encoder.layer.{i}.attention.self.query.weight", i, self.n_layers, "config.json's num_hidden_layers", where)
            attn = AttentionWeights(
                W_Q=per_head(get(L + "attention.self.query.weight", (d, d)), h),  # (h, d, e)
                W_K=per_head(get(L + "attention.self.key.weight", (d, d)), h),
                W_V=per_head(get(L + "attention.self.value.weight", (d, d)), h),
                W_O=np.ascontiguousarray(get(L + "attention.output.dense.weight", (d, d)).T),  # (h*e, d)
                b_Q=get(L + "attention.self.query.bias", (d,)).reshape(h, e),
                b_K=get(L + "attention.self.key.bias", (d,)).reshape(h, e),
                b_V=get(L + "attention.self.value.bias", (d,)).reshape(h, e),
                b_O=get(L + "attention.output.dense.bias", (d,)),
            )
            attn.check(self.config)
            self.layers.append(
                {
                    "attention": attn.frozen(),  # read-only, so trace() keeps its packed form
                    "attention_norm": (get(L + "attention.output.LayerNorm.weight", (d,)), get(L + "attention.output.LayerNorm.bias", (d,))),
                    "up": (get(L + "intermediate.dense.weight", (ffn, d)), get(L + "intermediate.dense.bias", (ffn,))),
                    "down": (get(L + "output.dense.weight", (d, ffn)), get(L + "output.dense.bias", (d,))),
                    "output_norm": (get(L + "output.LayerNorm.weight", (d,)), get(L + "output.LayerNorm.bias", (d,))),
                }
            )

    def embed(self, ids: np.ndarray) -> np.ndarray:
        n = len(ids)
        words = self._tensors.rows(self._word, ids)  # (n, d)
        h = (words + self.token_type) + self.positions[:n]  # (n, d), in the reference's order of additions
        return layer_norm(h, *self.embed_norm, self.eps)

    def attention_config(self, layer: int) -> AttentionConfig:
        return self.config

    def attention_weights(self, layer: int) -> AttentionWeights:
        return self.layers[layer]["attention"]

    def after_attention(self, h: np.ndarray, attention_output: np.ndarray, layer: int) -> np.ndarray:
        p = self.layers[layer]
        a = layer_norm(attention_output + h, *p["attention_norm"], self.eps)  # (n, d)
        f = gelu_erf(linear(a, *p["up"]))  # (n, ffn)
        return layer_norm(linear(f, *p["down"]) + a, *p["output_norm"], self.eps)  # (n, d)

    def summary(self) -> dict:
        return {"norm": "post-norm LayerNorm", "mlp": "GELU", "positions": "learned absolute", "mask": "none"}


def _require(cfg: dict, key: str, value: str | bool, where: str) -> None:
    got = cfg.get(key)
    if got is not None and got != value:  # null: not given, the default
        raise CheckpointError(f"{where}: {key} is {got!r}; the BERT converter supports {value!r} only")
