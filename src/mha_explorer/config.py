"""The shape of one attention layer, validated on construction."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

import numpy as np

DEFAULT_NORM_EPS = 1e-6  # the q/k RMS norm's epsilon when a config does not give one


class ConfigError(ValueError):
    """A configuration that cannot describe an attention layer; the message says what to change."""


@dataclass(frozen=True)
class AttentionConfig:
    """The shape of one attention layer: d_model, n_heads, and what defaults leave out.

    n_kv_heads: K/V heads; n_heads (the default) is MHA, fewer GQA (each K/V head serves
    n_heads / n_kv_heads query heads), 1 MQA. d_head: the width of q and k per head (default
    d_model // n_heads); d_v: of v (default d_head). causal: a query sees no later key. bias: the
    Q, K, V and output projections add biases. The rest is what real layers add: qk_norm (RMS norm
    of every q and k row, with norm_eps), rope_theta (rotary positions), sliding_window (a query
    sees only the keys less than this far back), scale (replaces 1 / sqrt(d_head)).
    PRESETS holds small ones by name: "mha", "causal", "gqa", "mqa", "teaching"."""

    d_model: int  # width of each token's vector, X is (n, d_model)
    n_heads: int  # number of query heads h
    n_kv_heads: int | None = None  # key/value heads: n_heads = MHA, fewer = GQA, 1 = MQA
    d_head: int | None = None  # width of q and k per head; default d_model // n_heads
    d_v: int | None = None  # width of v per head; default d_head
    causal: bool = False  # mask key positions after the query
    bias: bool = False  # add biases to the Q, K, V and output projections
    # What real architectures add; each defaults to "absent", and an absent stage is not recorded.
    qk_norm: bool = False  # RMS-normalize every q and k row (over d_head) and scale it by q_norm / k_norm
    norm_eps: float | None = None  # epsilon of that RMS norm; DEFAULT_NORM_EPS when qk_norm and not given
    rope_theta: float | None = None  # rotary positions on q and k (after any q/k norm), base theta
    sliding_window: int | None = None  # key j visible to query i only if i - sliding_window < j
    scale: float | None = None  # multiplies the scores; default 1 / sqrt(d_head)
    kv_group: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._plain_numbers()
        for name in ("d_model", "n_heads"):
            _check_positive_int(name, getattr(self, name))
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        _check_positive_int("n_kv_heads", self.n_kv_heads)
        divisors = [d for d in range(1, self.n_heads + 1) if self.n_heads % d == 0]
        if self.n_kv_heads > self.n_heads:
            raise ConfigError(
                f"n_kv_heads={self.n_kv_heads} is more than n_heads={self.n_heads}: "
                f"use at most {self.n_heads} key/value heads, one of {divisors}"
            )
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}: "
                f"choose n_kv_heads from {divisors}"
            )
        if self.d_head is None:
            if self.d_model % self.n_heads:
                raise ConfigError(
                    f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: "
                    f"set d_head explicitly or choose n_heads dividing {self.d_model}"
                )
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)
        _check_positive_int("d_head", self.d_head)
        if self.d_v is None:
            object.__setattr__(self, "d_v", self.d_head)
        _check_positive_int("d_v", self.d_v)
        for name in ("causal", "bias", "qk_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be true or false")
        self._check_architecture_fields()
        # head i reads key/value head i // (n_heads / n_kv_heads)
        group_size = self.n_heads // self.n_kv_heads
        object.__setattr__(self, "kv_group", tuple(i // group_size for i in range(self.n_heads)))

    def _plain_numbers(self) -> None:
        """NumPy integers, booleans and floats (from a shape, a comparison, an array) stand for
        Python ones: the config keeps the Python values, so it prints and serializes plainly."""
        for f in fields(self):
            if not f.init:
                continue
            value = getattr(self, f.name)
            if isinstance(value, np.bool_):
                object.__setattr__(self, f.name, bool(value))
            elif isinstance(value, np.integer):
                object.__setattr__(self, f.name, int(value))
            elif isinstance(value, np.floating):
                object.__setattr__(self, f.name, float(value))

    def _check_architecture_fields(self) -> None:
        if self.norm_eps is not None:
            if not self.qk_norm:
                raise ConfigError(f"norm_eps={self.norm_eps!r} is only used with qk_norm=True: set both or neither")
            _check_positive_float("norm_eps", self.norm_eps)
        if self.rope_theta is not None:
            _check_positive_float("rope_theta", self.rope_theta)
            if self.d_head % 2:
                raise ConfigError(
                    f"rope_theta needs an even d_head to rotate pairs of components; d_head={self.d_head} is odd"
                )
        if self.sliding_window is not None:
            _check_positive_int("sliding_window", self.sliding_window)
        if self.scale is not None:
            _check_positive_float("scale", self.scale)

    @property
    def kind(self) -> str:
        """MHA, GQA or MQA, by how many key/value heads the query heads share."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def qk_norm_eps(self) -> float | None:
        """The epsilon the q/k norm uses (norm_eps, else DEFAULT_NORM_EPS); None with no q/k norm."""
        if not self.qk_norm:
            return None
        return DEFAULT_NORM_EPS if self.norm_eps is None else self.norm_eps

    @property
    def own_scale(self) -> float | None:
        """The scale the scores are multiplied by, where the config sets one other than the usual
        1/sqrt(d_head); else None (none set, or one equal to it: Gemma's query_pre_attn_scalar)."""
        if self.scale is None or math.isclose(self.scale, 1 / math.sqrt(self.d_head)):
            return None
        return float(self.scale)

    @property
    def masked(self) -> bool:
        """Whether some keys are hidden from some queries: causal, a sliding window, or both."""
        return self.causal or self.sliding_window is not None

    def to_dict(self) -> dict:
        """The fields to rebuild this config; the architecture fields only when present."""
        d = asdict(self)
        d.pop("kv_group")
        for name in _ABSENT_WHEN:
            if d[name] == _ABSENT_WHEN[name]:
                d.pop(name)
        return d


# The architecture fields and the value that means "this layer does not have it".
_ABSENT_WHEN = {"qk_norm": False, "norm_eps": None, "rope_theta": None, "sliding_window": None, "scale": None}


def _check_positive_float(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}={value!r} must be a number such as 1e-6")
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name}={value} must be a finite number above 0")


def _check_positive_int(name: str, value: object) -> None:
    if isinstance(value, float) and value.is_integer():  # a whole number, but a float: said how to write it
        raise ConfigError(f"{name}={value!r} must be an int: write {int(value)}, not {value!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}={value!r} must be a whole number such as 4")
    if value < 1:
        raise ConfigError(f"{name}={value} must be at least 1")


def as_array(name: str, values) -> np.ndarray:
    """values as an array of real numbers (lists and torch tensors of them are taken), or a
    ConfigError naming it."""
    try:
        a = np.asarray(_numpy(values))
    except ValueError:  # rows of different lengths
        raise ConfigError(f"{name} is not a rectangular array: give every row the same length") from None
    if a.dtype.kind == "c":
        raise ConfigError(f"{name} holds complex numbers: attention here is over real numbers, give those")
    if a.dtype.kind not in "biuf":
        what = {"U": "text", "S": "bytes", "O": "Python objects"}.get(a.dtype.kind, f"{a.dtype} values")
        raise ConfigError(f"{name} holds {what}, not numbers: give an array of numbers")
    return a


def _numpy(a):
    """A torch tensor as NumPy: detached from autograd, on the CPU, bfloat16 widened to float32
    (NumPy has no bfloat16). Anything else as it is."""
    if hasattr(a, "detach") and hasattr(a, "cpu"):
        a = a.detach().cpu()
        return (a.float() if str(a.dtype) == "torch.bfloat16" else a).numpy()
    return a


PRESETS: dict[str, AttentionConfig] = {
    "teaching": AttentionConfig(d_model=4, n_heads=2),
    "mha": AttentionConfig(d_model=8, n_heads=4),
    "causal": AttentionConfig(d_model=8, n_heads=4, causal=True),
    "gqa": AttentionConfig(d_model=8, n_heads=4, n_kv_heads=2, causal=True),
    "mqa": AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, causal=True),
}


def expect_config(config: object, call: str) -> AttentionConfig:
    """config, if it is an AttentionConfig; else a ConfigError saying what call takes (a preset's
    name given as a str is pointed to PRESETS)."""
    if isinstance(config, AttentionConfig):
        return config
    if isinstance(config, str) and config.lower() in PRESETS:
        hint = f'PRESETS["{config.lower()}"]'
    else:
        hint = 'an AttentionConfig(d_model=..., n_heads=...) or one of PRESETS ("mha", "gqa", ...)'
    raise ConfigError(f"{call}: config is {type(config).__name__}, not an AttentionConfig: give {hint}")
