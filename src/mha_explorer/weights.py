"""Per-head projection weights, and their packed library layout.

Every head projects the full input: W_Q[i] is (d_model, d_head), so
q_i = x @ W_Q[i]. Libraries store the heads side by side instead; the
converters here move between the two forms without changing a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from .config import AttentionConfig, ConfigError, _numpy, as_array, expect_config


def weight_shapes(config: AttentionConfig) -> dict[str, tuple[int, ...]]:
    """The shape of every array a config needs, by name."""
    c = config
    shapes = {
        "W_Q": (c.n_heads, c.d_model, c.d_head),
        "W_K": (c.n_kv_heads, c.d_model, c.d_head),
        "W_V": (c.n_kv_heads, c.d_model, c.d_v),
        "W_O": (c.n_heads * c.d_v, c.d_model),
    }
    if c.bias:
        shapes |= {
            "b_Q": (c.n_heads, c.d_head),
            "b_K": (c.n_kv_heads, c.d_head),
            "b_V": (c.n_kv_heads, c.d_v),
            "b_O": (c.d_model,),
        }
    if c.qk_norm:
        shapes |= {"q_norm": (c.d_head,), "k_norm": (c.d_head,)}
    return shapes


@dataclass(frozen=True, eq=False)
class AttentionWeights:
    """The arrays of one attention layer, per head (lists and torch tensors are taken):

    W_Q (n_heads, d_model, d_head), W_K (n_kv_heads, d_model, d_head), W_V (n_kv_heads, d_model,
    d_v), W_O (n_heads * d_v, d_model), whose rows i*d_v to (i+1)*d_v take head i's z; with bias,
    b_Q (n_heads, d_head), b_K and b_V (n_kv_heads, ...), b_O (d_model,); with qk_norm, q_norm and
    k_norm (d_head,). AttentionWeights.random(config, seed) draws them; from_packed(state_dict,
    config) reads nn.MultiheadAttention's packed in_proj."""

    W_Q: np.ndarray  # (n_heads, d_model, d_head)
    W_K: np.ndarray  # (n_kv_heads, d_model, d_head)
    W_V: np.ndarray  # (n_kv_heads, d_model, d_v)
    W_O: np.ndarray  # (n_heads * d_v, d_model); rows i*d_v:(i+1)*d_v belong to head i
    b_Q: np.ndarray | None = None  # (n_heads, d_head)
    b_K: np.ndarray | None = None  # (n_kv_heads, d_head)
    b_V: np.ndarray | None = None  # (n_kv_heads, d_v)
    b_O: np.ndarray | None = None  # (d_model,)
    # qk_norm only: the multiplier each normalized q (k) row gets, shared by all heads. It is the
    # effective one: a checkpoint that stores w and multiplies by 1 + w (Gemma) is given 1 + w here.
    q_norm: np.ndarray | None = None  # (d_head,)
    k_norm: np.ndarray | None = None  # (d_head,)

    def __repr__(self) -> str:
        """Each array by its dtype and shape: its numbers would fill the screen (43 KB for a MiniLM layer)."""
        given = ", ".join(f"{name}={a.dtype}{a.shape}" for name, a in self.arrays().items())
        return f"AttentionWeights({given})"

    def check(self, config: AttentionConfig) -> None:
        """Raise ConfigError naming the first array whose shape does not fit the config."""
        expected = weight_shapes(expect_config(config, "check(config)"))
        for name, shape in expected.items():
            got = getattr(self, name)
            if got is None:
                flag = {"q_norm": "qk_norm=True needs", "k_norm": "qk_norm=True needs"}.get(name)
                flag = flag or ("bias=True needs" if name.startswith("b_") else "every layer has")
                raise ConfigError(f"{name} is missing: {flag} an array of shape {shape}")
            if got.shape != shape:
                raise ConfigError(f"{name} has shape {got.shape}; this config needs {shape}")
        for name in ("b_Q", "b_K", "b_V", "b_O"):
            if name not in expected and getattr(self, name) is not None:
                raise ConfigError(f"{name} is given but bias=False: set bias=True or drop {name}")
        for name in ("q_norm", "k_norm"):
            if name not in expected and getattr(self, name) is not None:
                raise ConfigError(f"{name} is given but qk_norm=False: set qk_norm=True or drop {name}")

    def check_finite(self) -> None:
        """Raise ConfigError naming the first array that holds NaN or an infinity."""
        for name, a in self.arrays().items():
            if not np.isfinite(a).all():
                raise ConfigError(f"{name} holds NaN or infinite values; every weight must be a finite number")

    def frozen(self) -> AttentionWeights:
        """These weights, made read-only (a loaded model's): trace() then keeps their packed
        [W^Q | W^K | W^V] between calls instead of building it for every call, and no longer
        checks that they are finite, as it does here once."""
        self.check_finite()
        for a in self.arrays().values():
            a.setflags(write=False)
        object.__setattr__(self, "_frozen", True)
        return self

    def packed_qkv(self) -> tuple[np.ndarray, np.ndarray | None]:
        """[W^Q | W^K | W^V], every head side by side, (d_model, h*d_head + g*d_head + g*d_v), and
        the biases in the same order (or None): x @ W + b gives every q, k and v at once."""
        kept = self.__dict__.get("_packed")
        if kept is not None:
            return kept
        W = np.concatenate([pack_heads(w) for w in (self.W_Q, self.W_K, self.W_V)], axis=1)  # (d_model, h*e + g*e + g*f)
        b = None if self.b_Q is None else np.concatenate([b.reshape(-1) for b in (self.b_Q, self.b_K, self.b_V)])
        if self.__dict__.get("_frozen"):
            W.setflags(write=False)
            if b is not None:
                b.setflags(write=False)
            object.__setattr__(self, "_packed", (W, b))
        return W, b

    def __post_init__(self):
        # lists of numbers are taken as arrays; what holds no numbers is said, naming the array
        for f in fields(self):
            a = getattr(self, f.name)
            if a is not None:
                object.__setattr__(self, f.name, as_array(f.name, a))  # an array stays the same object

    def astype(self, dtype) -> AttentionWeights:
        """The same weights, every array converted to dtype (np.float64: a trace in double precision)."""
        return AttentionWeights(
            **{f.name: None if (a := getattr(self, f.name)) is None else a.astype(dtype) for f in fields(self)}
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays the layer has, by name ("W_Q", "b_Q", ..., "q_norm"): those it lacks (None) left out."""
        return {f.name: a for f in fields(self) if (a := getattr(self, f.name)) is not None}

    @classmethod
    def random(cls, config: AttentionConfig, seed: int = 0, dtype=np.float64) -> AttentionWeights:
        """Uniform in +-1/sqrt(fan_in), like a freshly initialised linear layer."""
        config = expect_config(config, "AttentionWeights.random(config, seed)")
        rng = np.random.default_rng(check_seed(seed))
        arrays = {}
        for name, shape in weight_shapes(config).items():
            if name in ("q_norm", "k_norm"):  # multipliers around 1, as a trained norm has
                arrays[name] = rng.uniform(0.5, 1.5, size=shape).astype(dtype)
                continue
            fan_in = config.n_heads * config.d_v if name == "W_O" else config.d_model
            bound = 1.0 / np.sqrt(fan_in)
            arrays[name] = rng.uniform(-bound, bound, size=shape).astype(dtype)
        return cls(**arrays)

    # --- the packed layout of torch.nn.MultiheadAttention -----------------
    # in_proj_weight is (3*d_model, d_model) and computes x @ in_proj_weight.T,
    # so its first d_model rows are the transpose of all W_Q heads side by side.

    def to_packed(self, config: AttentionConfig) -> dict[str, np.ndarray]:
        """These weights as torch.nn.MultiheadAttention's state_dict holds them: in_proj_weight
        (3*d_model, d_model), out_proj.weight (d_model, d_model), and with bias in_proj_bias and
        out_proj.bias. MHA only, with n_heads * d_head = d_model and d_v = d_head."""
        config = expect_config(config, "to_packed(config)")
        _require_packable(config)
        W, b = self.packed_qkv()  # (d_model, 3*d_model), (3*d_model,) or None
        packed = {
            "in_proj_weight": W.T,  # (3*d_model, d_model)
            "out_proj.weight": self.W_O.T,  # (d_model, h*d_v)
        }
        if config.bias:
            packed["in_proj_bias"] = b
            packed["out_proj.bias"] = self.b_O
        return packed

    @classmethod
    def from_packed(cls, packed: dict[str, np.ndarray], config: AttentionConfig) -> AttentionWeights:
        """Per-head weights from nn.MultiheadAttention's state_dict (NumPy arrays or torch tensors:
        detached, moved to the CPU, bfloat16 widened to float32), copied. The config says whether
        there are biases: biases it would drop are refused."""
        if isinstance(packed, AttentionConfig) and isinstance(config, Mapping):
            raise ConfigError("from_packed(packed, config) takes the packed weights before the config: swap them")
        config = expect_config(config, "from_packed(packed, config)")
        if not isinstance(packed, Mapping):
            raise ConfigError(f"from_packed(packed, config): packed is {type(packed).__name__}; give a dict such as nn.MultiheadAttention's state_dict()")
        packed = {name: _numpy(a) for name, a in packed.items()}
        _require_packable(config)
        d, h = config.d_model, config.n_heads
        # what a self-attention layer of one input cannot be: said, not read past
        if "q_proj_weight" in packed:
            raise ConfigError(
                "the packed weights hold q_proj_weight, k_proj_weight and v_proj_weight in place of in_proj_weight: an "
                "nn.MultiheadAttention made with kdim or vdim other than embed_dim, whose keys and values come from "
                "another input than its queries. A trace follows one input x through every projection: give a module "
                "whose kdim and vdim are embed_dim"
            )
        extra = [name for name in ("bias_k", "bias_v") if packed.get(name) is not None]
        if extra:  # add_bias_kv=True: a learned key and value appended to every sequence
            raise ConfigError(
                f"the packed weights hold {' and '.join(extra)} (add_bias_kv=True), a learned key and value that "
                "nn.MultiheadAttention appends to every sequence: a trace has one key and value per token; "
                "give a module without add_bias_kv"
            )
        needed = ["in_proj_weight", "out_proj.weight", *(["in_proj_bias", "out_proj.bias"] if config.bias else [])]
        missing = [name for name in needed if name not in packed]
        if missing:
            raise ConfigError(f"the packed weights lack {', '.join(missing)}: give {', '.join(needed)} (a state_dict of nn.MultiheadAttention has them)")
        dropped = [name for name in ("in_proj_bias", "out_proj.bias") if not config.bias and packed.get(name) is not None and np.any(np.asarray(packed[name]))]
        if dropped:  # nn.MultiheadAttention has biases unless told bias=False: leaving them out would change every output
            raise ConfigError(
                f"the packed weights have biases that are not zero ({', '.join(dropped)}) and the config has bias=False: "
                "give a config with bias=True to use them, or drop them from the dict if they should not count"
            )
        in_proj = np.asarray(packed["in_proj_weight"])
        if in_proj.shape != (3 * d, d):
            raise ConfigError(f"in_proj_weight has shape {in_proj.shape}; this config needs {(3 * d, d)}")
        W_Q, W_K, W_V = (unpack_heads(w.T, h) for w in np.split(in_proj, 3, axis=0))
        arrays = {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": np.asarray(packed["out_proj.weight"]).T}
        if config.bias:
            b_Q, b_K, b_V = np.split(np.asarray(packed["in_proj_bias"]), 3)
            arrays |= {
                "b_Q": b_Q.reshape(h, -1),
                "b_K": b_K.reshape(h, -1),
                "b_V": b_V.reshape(h, -1),
                "b_O": np.asarray(packed["out_proj.bias"]),
            }
        # fresh C-ordered copies: nothing shared with the caller's arrays (often a live model's
        # parameters), and the same memory layout as random(), so trace() rounds identically
        weights = cls(**{name: np.array(a, order="C") for name, a in arrays.items()})
        weights.check(config)
        return weights


def pack_heads(w: np.ndarray) -> np.ndarray:
    """Per-head (h, d_model, d_head) weights side by side as one (d_model, h*d_head) matrix."""
    h, d_model, d_head = w.shape
    return w.transpose(1, 0, 2).reshape(d_model, h * d_head)  # (d_model, h*d_head)


def unpack_heads(w: np.ndarray, h: int) -> np.ndarray:
    d_model, width = w.shape
    return w.reshape(d_model, h, width // h).transpose(1, 0, 2)  # (h, d_model, d_head)


def _require_packable(config: AttentionConfig) -> None:
    c = config
    if c.qk_norm:
        raise ConfigError("the packed layout has no place for q_norm and k_norm: it needs qk_norm=False")
    if not (c.n_kv_heads == c.n_heads and c.d_v == c.d_head and c.n_heads * c.d_head == c.d_model):
        raise ConfigError(
            "the packed layout needs MHA with n_heads * d_head = d_model and d_v = d_head; "
            f"this config has n_heads={c.n_heads}, n_kv_heads={c.n_kv_heads}, d_head={c.d_head}, "
            f"d_v={c.d_v}, d_model={c.d_model}"
        )


def check_seed(seed) -> int:
    """The seed, if NumPy can draw from it: a whole number, 0 or more."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed={seed!r} cannot seed the random values; give a whole number, 0 or more, such as 0")
    return int(seed)
