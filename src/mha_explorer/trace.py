"""The one place that computes attention: every stage, every head, every query.

Shapes use these letters:
    n       tokens (query and key positions)
    d       d_model, the width of each token vector
    h       n_heads (query heads)      g  n_kv_heads (key/value heads)
    e       d_head (width of q and k)  f  d_v (width of v)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from . import parallel
from .config import AttentionConfig, ConfigError, as_array, expect_config
from .weights import AttentionWeights


@dataclass(frozen=True)
class Stage:
    name: str
    shape: str  # in the config's names, "(n_heads, n, d_head)" (the code's comments use the letters above)
    formula: str  # LaTeX, for the docs and the payload's stage_table
    meaning: str


# The recorded stages, in order. The optional ones are present only when the layer has them:
# `q_normed`/`k_normed` with qk_norm, `q_rotated`/`k_rotated` with rope_theta, `mask` when causal
# or with a sliding window. The scores are taken from the last q and k recorded before them.
STAGES: tuple[Stage, ...] = (
    Stage("x", "(n, d_model)", r"X", "the input: one row per token"),
    Stage("q", "(n_heads, n, d_head)", r"Q_i = X W_i^Q", "queries, one set per head"),
    Stage("k", "(n_kv_heads, n, d_head)", r"K_g = X W_g^K", "keys, one set per key/value head"),
    Stage("v", "(n_kv_heads, n, d_v)", r"V_g = X W_g^V", "values, one set per key/value head"),
    Stage(
        "q_normed",
        "(n_heads, n, d_head)",
        r"\hat{Q}_i = \frac{Q_i}{\mathrm{rms}(Q_i)} \odot w^q",
        "each query row divided by its root mean square over d_head, times the learned q_norm",
    ),
    Stage(
        "k_normed",
        "(n_kv_heads, n, d_head)",
        r"\hat{K}_g = \frac{K_g}{\mathrm{rms}(K_g)} \odot w^k",
        "each key row divided by its root mean square over d_head, times the learned k_norm",
    ),
    Stage(
        "q_rotated",
        "(n_heads, n, d_head)",
        r"\tilde{Q}_i = Q_i \odot \cos\Theta + \mathrm{rot}(Q_i) \odot \sin\Theta",
        "queries rotated by position p (RoPE): pair (m, m + d_head/2) turns by p * theta^(-2m/d_head)",
    ),
    Stage(
        "k_rotated",
        "(n_kv_heads, n, d_head)",
        r"\tilde{K}_g = K_g \odot \cos\Theta + \mathrm{rot}(K_g) \odot \sin\Theta",
        "keys rotated by their position, the same way, so q . k depends on the distance between positions",
    ),
    Stage("scores", "(n_heads, n, n)", r"S_i = Q_i K_{g(i)}^\top", "every query dotted with every key"),
    Stage("scaled", "(n_heads, n, n)", r"S_i / \sqrt{d_{head}}", "scores divided by the square root of d_head"),
    Stage(
        "mask",
        "(n_heads, n, n)",
        r"S_i / \sqrt{d_{head}} + M",
        "scaled scores with hidden keys (after the query; outside a sliding window) set to -inf",
    ),
    Stage("weights", "(n_heads, n, n)", r"A_i = \mathrm{softmax}(\cdot)", "softmax over keys: each row sums to 1"),
    Stage("z", "(n_heads, n, d_v)", r"Z_i = A_i V_{g(i)}", "each head's weighted sum of value rows"),
    Stage("concat", "(n, n_heads*d_v)", r"[Z_0 \mid \dots \mid Z_{h-1}]", "head outputs side by side, in head order"),
    Stage("output", "(n, d_model)", r"Y = \mathrm{concat}\, W^O", "the output projection"),
    Stage(
        "contributions",
        "(n_heads, n, d_model)",
        r"C_i = Z_i W^O_{[i]}",
        "head i's share of the output: z_i times its rows of W^O",
    ),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)


@dataclass(frozen=True, eq=False)
class Trace:
    """Every stage of one attention layer, as trace() records it: t["weights"] is (n_heads, n, n),
    row = query, column = key; t.stages lists them in order, STAGES gives each one's shape."""

    config: AttentionConfig
    stages: dict[str, np.ndarray]  # stage name -> array, in STAGES order
    positions: tuple[int, ...] | None = None  # each token's position, where trace() was given them; else its index

    def position(self, i: int) -> int:
        """The position of token i, by which RoPE turned its q and k."""
        return i if self.positions is None else self.positions[i]

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.stages[name]
        except KeyError:
            raise KeyError(f"this trace has no {name!r} stage; it has: {', '.join(self.stages)}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.stages

    def keys(self):
        """The stage names, in order: a trace reads as a dict of its stages (dict(t) works)."""
        return self.stages.keys()

    def items(self):
        """(stage name, array) pairs, in order, as a dict's."""
        return self.stages.items()

    def values(self):
        """The stages' arrays, in the order of keys(), as a dict's values()."""
        return self.stages.values()

    def __iter__(self):
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    @property
    def kv_group(self) -> np.ndarray:
        """(n_heads,): the K/V head each query head reads (all 0 in MQA, i for i in MHA)."""
        return np.asarray(self.config.kv_group)

    @property
    def n(self) -> int:
        """The number of tokens traced: x's rows."""
        return self.stages["x"].shape[0]

    def __repr__(self) -> str:
        # the shapes, not the numbers: a real layer's stages hold millions
        shapes = ", ".join(f"{name}={a.shape}" for name, a in self.stages.items())
        return f"Trace({self.config!r}, n={self.n}, stages: {shapes})"



# The term a layer with biases adds to a stage (its formula above is the layer's without them)
BIAS_TERMS = {"q": r" + b_i^Q", "k": r" + b_g^K", "v": r" + b_g^V", "output": r" + b^O"}


def recorded_stages(t: "Trace") -> list[Stage]:
    """The stages t recorded, in order, their formulas with the biases its layer adds and the
    scale it multiplies by, where its config sets one other than 1/sqrt(d_head)."""
    config, stages = t.config, []
    own = config.own_scale
    for s in STAGES:
        if s.name not in t.stages:
            continue
        if config.bias and s.name in BIAS_TERMS:
            s = replace(s, formula=s.formula + BIAS_TERMS[s.name])
        if own is not None and s.name in ("scaled", "mask"):
            s = replace(s, formula=s.formula.replace(r"/ \sqrt{d_{head}}", rf"\times {own:g}"))
            if s.name == "scaled":
                s = replace(s, meaning=f"scores times the scale the config sets, {own:g}, instead of 1/sqrt(d_head)")
        stages.append(s)
    return stages

def trace(
    x: np.ndarray, weights: AttentionWeights, config: AttentionConfig, positions: np.ndarray | None = None
) -> Trace:
    """Run one attention layer on x and record every stage (see STAGES).

    positions: the position of each token, (n,) integers, default 0..n-1. Only RoPE reads them;
    the causal and sliding-window masks compare token indices.
    """
    stages = _run(x, weights, config, positions, record=True)  # positions checked there
    return Trace(config=config, stages=stages, positions=None if positions is None else tuple(int(p) for p in np.asarray(positions)))


def attention(x: np.ndarray, weights: AttentionWeights, config: AttentionConfig) -> np.ndarray:
    """The layer's output alone, (n, d_model): what trace() computes, without keeping the other
    stages. Positions 0..n-1. (A real model's layers before the traced one are run together by
    attention_layers().)"""
    return _run(x, weights, config, None, record=False)["output"]


def attention_layers(
    h: np.ndarray,
    layers: Sequence[tuple[AttentionWeights, AttentionConfig]],
    before: Callable[[int, np.ndarray], np.ndarray],
    after: Callable[[int, np.ndarray, np.ndarray], np.ndarray],
) -> list[np.ndarray]:
    """A stack of layers as a real model runs them before the traced one: for each (weights, config)
    in layers, numbered i from 0, x = before(i, h) and h = after(i, h, attention(x)). before and
    after work row by row (row r of what they return depends on row r of their arguments alone:
    norms, MLPs, residuals). Returns h after each layer, (n, d) each. Positions 0..n-1.

    The computation is attention()'s, layer by layer, and so are the numbers, up to rounding in the
    last bits where a product is cut into blocks of rows. Only the work is grouped otherwise: from
    one layer's output projection to the next one's q, k, v projection, every step is row-wise, so
    a block of rows goes through all of them as one task, in its core's cache, and the cores wait
    for each other twice a layer instead of five times."""
    h = as_array("h", h)
    if not layers:
        return []
    if h.ndim != 2 or h.shape[0] < 1 or h.shape[1] != layers[0][1].d_model:
        raise ConfigError(f"h has shape {h.shape}; the first layer needs (n, {layers[0][1].d_model}) with n >= 1")
    dtype = _checked_dtype("h", h, layers, "attention")
    n = h.shape[0]
    positions = np.arange(n)
    packed = [w.packed_qkv() for w, _ in layers]  # (d, h*e + g*e + g*f) and its bias, per layer
    many_heads = any(config.n_heads * n * n >= PARALLEL_ENTRIES for _, config in layers)
    streams: list[np.ndarray] = []
    with parallel.cores(n >= PARALLEL_ROWS or many_heads) as each, np.errstate(over="ignore", invalid="ignore"):
        blocks = [slice(0, n)] if each is parallel.serially else parallel.row_blocks(n)

        def project(i: int, h_rows: np.ndarray, qkv_rows: np.ndarray) -> None:  # (r, d) -> (r, h*e + g*e + g*f), in place
            np.matmul(before(i, h_rows), packed[i][0], out=qkv_rows)
            if layers[i][1].bias:
                qkv_rows += packed[i][1]

        qkv = _qkv_of(n, layers[0][1], dtype)  # (n, h*e + g*e + g*f)
        each(lambda rows: project(0, h[rows], qkv[rows]), blocks)
        for i, (w, config) in enumerate(layers):
            heads_each = each if config.n_heads * n * n >= PARALLEL_ENTRIES else parallel.serially
            stages, bounded = _heads(*_split(qkv, config, record=False), w, config, positions, heads_each, record=False)
            if not bounded:
                raise Overflow(past_range("scores", dtype, "may go"))
            concat = stages["z"].transpose(1, 0, 2).reshape(n, config.n_heads * config.d_v)  # (n, h*f)
            qkv = _qkv_of(n, layers[i + 1][1], dtype) if i + 1 < len(layers) else None
            parts: list = [None] * len(blocks)  # (r, d) each: h after this layer, by block of rows
            overflowed: list[str] = []  # where the numbers passed the dtype's range, if they did

            def finish(b: int) -> None:
                rows = blocks[b]
                y = concat[rows] @ w.W_O  # (r, d)
                if config.bias:
                    y = _add(y, w.b_O)
                if not np.isfinite(y).all():
                    overflowed.append(past_range("output", dtype))
                    return
                parts[b] = after(i, h[rows], y)
                if not np.isfinite(parts[b]).all():
                    overflowed.append(past_range(None, dtype, step="what the layer does after attention (norms, MLP, residual)"))
                elif qkv is not None:
                    project(i + 1, parts[b], qkv[rows])

            each(finish, range(len(blocks)))
            if overflowed:
                raise Overflow(overflowed[0])
            h = parts[0] if len(parts) == 1 else np.concatenate(parts)  # (n, d)
            streams.append(h)
    return streams


def _qkv_of(n: int, config: AttentionConfig, dtype) -> np.ndarray:
    """An empty (n, h*e + g*e + g*f) for a layer's projections."""
    return np.empty((n, config.n_heads * config.d_head + config.n_kv_heads * (config.d_head + config.d_v)), dtype)


# From this many tokens on, attention_layers() runs its row-wise work on every core.
PARALLEL_ROWS = 64


def _run(x, weights: AttentionWeights, config: AttentionConfig, positions, record: bool) -> dict[str, np.ndarray]:
    """Check that x, the positions and the weights fit the config, then attend, on every core
    when the layer is big enough."""
    if isinstance(weights, AttentionConfig) and isinstance(config, AttentionWeights):
        raise ConfigError("trace(x, weights, config) takes the weights before the config: swap them")
    config = expect_config(config, "trace(x, weights, config)")
    if not isinstance(weights, AttentionWeights):
        raise ConfigError(f"trace(x, weights, config): weights is {type(weights).__name__}, not AttentionWeights: give AttentionWeights(W_Q=..., W_K=..., W_V=..., W_O=...) or AttentionWeights.random(config)")
    given = x
    x = as_array("x", x)
    # a trace's X is its own: the caller's array (or a torch tensor's memory), changed later, would change it alone
    if record and (not isinstance(given, np.ndarray) or np.may_share_memory(x, given)):
        x = x.copy()
    if x.ndim != 2 or x.shape[1] != config.d_model:
        raise ConfigError(f"x has shape {x.shape}; this config needs (n, {config.d_model}) with n >= 1")
    if x.shape[0] < 1:
        raise ConfigError("x has no tokens: give at least one row")
    finite = np.isfinite(x)  # (n, d)
    if not finite.all():
        at = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise ConfigError(f"x[{at[0]}, {at[1]}] is {x[at]}; every value of x must be a finite number, no NaN or infinity")
    dtype = _checked_dtype("x", x, [(weights, config)], "trace")
    n = x.shape[0]
    positions = _positions(positions, n)
    # numbers past the dtype's range are said (Overflow), not warned about and carried on as NaN
    with parallel.cores(config.n_heads * n * n >= PARALLEL_ENTRIES) as each, np.errstate(over="ignore", invalid="ignore"):
        stages, bounded = _attend(x, weights, config, positions, each, record)
    problem = None
    if not bounded:  # a score may have passed the range: an infinite one would pass for a masked key
        problem = overflowed(stages) or (None if record else past_range("scores", dtype, "may go"))
    if problem is None and not np.isfinite(stages["output"]).all():  # a stage that overflowed leaves NaN or infinity here
        problem = overflowed(stages) or past_range("output", dtype)
    if problem:
        raise Overflow(problem)
    return stages


def _checked_dtype(name: str, a: np.ndarray, layers: Sequence[tuple[AttentionWeights, AttentionConfig]], who: str):
    """The dtype attention computes in for input a (named name) and layers' weights, once each
    weight fits its config and holds finite numbers; who computes, for the message."""
    for w, config in layers:
        w.check(config)
        if not w.__dict__.get("_frozen"):  # frozen weights (a loaded model's) were checked once, by frozen()
            w.check_finite()
    dtype = np.result_type(a, *(array for w, _ in layers for array in w.arrays().values()))
    if dtype not in (np.float32, np.float64):  # float16's range is too small for the softmax's exponentials
        raise ConfigError(f"{name} and the weights make {dtype}; {who} computes in float32 or float64: cast them, e.g. {name}.astype(np.float32)")
    return dtype


class Overflow(ConfigError):
    """A stage passed the largest number of its dtype: x and the weights are too large together."""


def overflowed(stages: dict[str, np.ndarray]) -> str | None:
    """What to change when a stage passed its dtype's range (inf or NaN where a number should be;
    the mask's -inf is meant), naming the first such stage; else None."""
    for name, a in stages.items():
        bad = np.isnan(a) | (a == np.inf) if name == "mask" else ~np.isfinite(a)
        if bad.any():
            return past_range(name, a.dtype)
    return None


def past_range(stage: str | None, dtype, goes: str = "goes", step: str = "") -> str:
    """What to change when a stage (or a step said otherwise) passes the dtype's range."""
    kind = np.finfo(dtype)
    largest = f"{kind.max:.1e}".replace("e+", "e")  # 1.8e308
    wider = ", or compute in float64" if kind.dtype == np.float32 else ""
    return (
        f"{step or f'the {stage} stage'} {goes} past the largest {kind.dtype} (about {largest}): these values of X and "
        f"the weights are too large to compute with together; make the largest of them smaller{wider}"
    )


def _attend(
    x: np.ndarray, w: AttentionWeights, config: AttentionConfig, positions: np.ndarray, each: parallel.Each, record: bool
) -> tuple[dict[str, np.ndarray], bool]:
    """The body of trace(): every stage in STAGES order, or with record=False only those the
    output needs (the scores are then scaled in place and no contributions are formed)."""
    q, k, v = _split(_project(x, w, config, each), config, record)  # (h, n, e), (g, n, e), (g, n, f)
    stages, bounded = _heads(q, k, v, w, config, positions, each, record)
    z = stages["z"]  # (h, n, f)
    concat = z.transpose(1, 0, 2).reshape(x.shape[0], config.n_heads * config.d_v)  # (n, h*f)
    output = parallel.matmul(concat, w.W_O, each)  # (n, d)
    if config.bias:
        output = _add(output, w.b_O)
    if not record:
        return {"output": output}, bounded
    stages = {"x": x} | stages
    stages |= {"concat": concat, "output": output, "contributions": stages.pop("contributions")}
    return stages, bounded


def _heads(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, w: AttentionWeights, config: AttentionConfig, positions: np.ndarray, each: parallel.Each, record: bool
) -> tuple[dict[str, np.ndarray], bool]:
    """From q, k and v to every head's z: the stages in between (all of them with record, else z
    alone), and whether no score can pass the dtype's range."""
    n = q.shape[1]
    group = np.asarray(config.kv_group)
    stages = {"q": q, "k": k, "v": v}

    if config.qk_norm:
        q = rms_norm(q, w.q_norm, config.qk_norm_eps)  # (h, n, e)
        k = rms_norm(k, w.k_norm, config.qk_norm_eps)  # (g, n, e)
        stages |= {"q_normed": q, "k_normed": k}
    if config.rope_theta is not None:
        cos, sin = _rotary(positions, config.d_head, config.rope_theta, q.dtype)  # (n, e) each
        q = q * cos + _rotate_half(q) * sin  # (h, n, e)
        k = k * cos + _rotate_half(k) * sin  # (g, n, e)
        stages |= {"q_rotated": q, "k_rotated": k}

    scale = 1.0 / math.sqrt(config.d_head) if config.scale is None else float(config.scale)
    hidden = hidden_keys(n, config) if config.masked else None  # (n, n) or None
    dtype = np.result_type(q, k, v)
    weights_ = np.empty((config.n_heads, n, n), dtype)  # (h, n, n): row = query, column = key
    # without record, the scaled scores are masked and exponentiated in place, in one (h, n, n) array
    scores = np.empty_like(weights_) if record else weights_  # (h, n, n)
    scaled = np.empty_like(weights_) if record else weights_  # (h, n, n)
    logits = np.empty_like(weights_) if record and config.masked else scaled  # (h, n, n)
    z = np.empty((config.n_heads, n, config.d_v), dtype)  # (h, n, f)
    W_O = w.W_O.reshape(config.n_heads, config.d_v, config.d_model)  # (h, f, d): head i's rows of W^O
    contributions = np.empty((config.n_heads, n, config.d_model), np.result_type(z, W_O)) if record else None  # (h, n, d)

    # Cauchy-Schwarz bounds each row's scores by |q_i| times the longest key row it may see. A
    # causal row's bound uses only keys up to its own, so later tokens cannot change its rounding.
    q_norms = np.sqrt(np.einsum("hne,hne->hn", q, q))  # (h, n)
    k_norms = np.sqrt(np.einsum("gne,gne->gn", k, k))  # (g, n)
    if config.causal:
        k_norms = np.maximum.accumulate(k_norms, axis=1)  # (g, n): the longest key row up to each position
    else:
        k_norms = np.broadcast_to(k_norms.max(axis=1, keepdims=True), k_norms.shape)  # (g, n)
    ones = np.ones(n, dtype)  # (n,)
    # no score, scaled or not, can pass the dtype's range while this bound is in it (False for NaN too)
    bounded = max(1.0, abs(scale)) * float(q_norms.max()) * float(k_norms.max()) < float(np.finfo(dtype).max)

    # without record, the scale goes into q (a pass over (h, n, e), not (h, n, n)) and the
    # normalization into z (n x f, not n x n): the weights' rows are only summed, never divided
    q_scaled = None if record else q * np.asarray(scale, q.dtype)  # (h, n, e)

    # the (rows, keys) blocks each head works on: the whole square when recording; without record, a
    # masked layer's blocks of rows, each with only the keys one of its rows may see (causal: a
    # block's keys end at its last row): 5/8 of the square's work at 512 tokens, in 4 blocks
    blocks = [(slice(0, n), slice(0, n))] if record or hidden is None else _seen_blocks(n, config)

    def one_head(part: tuple[int, slice, slice]) -> None:
        """Every stage from the scores to head i's contribution, for queries rows against keys
        cols (the keys none of those rows may see weigh 0, and are left out). Heads and blocks of
        rows are independent, so they run in parallel, and each part's arrays stay in the core's
        cache between stages."""
        i, rows, cols = part
        g = group[i]
        a = weights_[i][rows, cols]  # (r, c), filled in place
        if record:
            np.matmul(q[i], k[g].T, out=scores[i])
            np.multiply(scores[i], scale, out=scaled[i])
        else:
            np.matmul(q_scaled[i][rows], k[g][cols].T, out=a)
        logit = logits[i][rows, cols]  # (r, c)
        if hidden is not None:
            if logits is not scaled:
                np.copyto(logits[i], scaled[i])
            logit[hidden[rows, cols]] = -np.inf
        # softmax over keys. Subtracting the row max changes nothing but avoids overflow; it is
        # needed only in rows where some |score| could pass _EXP_SAFE. Other rows subtract an
        # exact 0, so each row's numbers depend on that row's bound alone.
        unsafe = abs(scale) * q_norms[i][rows] * k_norms[g][rows] > _EXP_SAFE  # (r,)
        if unsafe.any():
            if unsafe.all():
                shift = logit.max(axis=-1, keepdims=True)  # (r, 1)
            else:
                shift = np.zeros((len(unsafe), 1), a.dtype)  # (r, 1)
                shift[unsafe] = logit[unsafe].max(axis=-1, keepdims=True)
            np.subtract(logit, shift, out=a)
            np.exp(a, out=a)
        else:
            np.exp(logit, out=a)
        row_sums = a @ ones[cols]  # (r,): a matrix-vector product is the fastest row sum
        np.reciprocal(row_sums, out=row_sums)
        if record:
            np.multiply(a, row_sums[:, None], out=a)  # each row / its sum
            np.matmul(a, v[g], out=z[i])
            np.matmul(z[i], W_O[i], out=contributions[i])
        else:
            zi = z[i][rows]  # (r, f)
            np.matmul(a, v[g][cols], out=zi)
            zi *= row_sums[:, None]

    # the largest parts first, so that the cores finish together (9 heads on 2 cores left one idle
    # for a head's time)
    parts = sorted(((i, rows, cols) for i in range(config.n_heads) for rows, cols in blocks), key=lambda p: -(p[1].stop - p[1].start) * (p[2].stop - p[2].start))
    each(one_head, parts)
    if not record:
        return {"z": z}, bounded
    stages |= {"scores": scores, "scaled": scaled}
    if config.masked:
        stages["mask"] = logits
    stages |= {"weights": weights_, "z": z, "contributions": contributions}
    return stages, bounded


def _seen_blocks(n: int, config: AttentionConfig) -> list[tuple[slice, slice]]:
    """A masked layer's queries in blocks of about SEEN_BLOCK rows, each with the keys its rows may
    see at all: up to its last row when causal, and from the first key inside its first row's
    window when windowed (hidden_keys() hides the rest of them, row by row)."""
    edges = np.linspace(0, n, max(1, round(n / SEEN_BLOCK)) + 1).round().astype(int)
    window = config.sliding_window
    return [
        (slice(r0, r1), slice(0 if window is None else max(0, r0 - window + 1), r1 if config.causal else n))
        for r0, r1 in zip(edges[:-1].tolist(), edges[1:].tolist())
    ]


# a masked layer's blocks of query rows when only its output is wanted (_seen_blocks)
SEEN_BLOCK = 128


# exp() of every scaled score up to this size is far from float32's overflow (88.7) and
# underflow (-87.3), so its softmax needs no row-max shift.
_EXP_SAFE = 60.0


def _project(x: np.ndarray, w: AttentionWeights, config: AttentionConfig, each) -> np.ndarray:
    """Q, K and V of every head as one product with the packed [W^Q | W^K | W^V], the way
    nn.MultiheadAttention computes them: (n, d) -> (n, h*e + g*e + g*f)."""
    packed, bias = w.packed_qkv()  # (d, h*e + g*e + g*f), (h*e + g*e + g*f,) or None
    qkv = parallel.matmul(x, packed, each)  # (n, h*e + g*e + g*f)
    return _add(qkv, bias) if config.bias else qkv


def _split(qkv: np.ndarray, config: AttentionConfig, record: bool) -> tuple[np.ndarray, ...]:
    """(n, h*e + g*e + g*f) -> q, k and v per head: (h, n, e), (g, n, e), (g, n, f). Recorded
    stages are contiguous copies; otherwise they are views into the one product (BLAS reads a
    head's strided (n, e) block as it is)."""
    h, g, e, f = config.n_heads, config.n_kv_heads, config.d_head, config.d_v
    n = qkv.shape[0]
    q, k, v = np.split(qkv, np.cumsum([h * e, g * e]), axis=1)
    split = (a.reshape(n, heads, width).transpose(1, 0, 2) for a, heads, width in ((q, h, e), (k, g, e), (v, g, f)))
    return tuple(np.ascontiguousarray(a) if record else a for a in split)


# Heads run in parallel once a layer's attention matrices hold this many entries (h * n * n).
PARALLEL_ENTRIES = 1 << 18


def _add(fresh: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """fresh + bias, in place when that keeps the dtype: fresh is a new array nobody else holds,
    and every array trace() does not allocate is one the system need not page in."""
    if np.result_type(fresh, bias) == fresh.dtype:
        fresh += bias
        return fresh
    return fresh + bias


def hidden_keys(n: int, config: AttentionConfig) -> np.ndarray:
    """(n, n) booleans, True where query i may not see key j: j > i when causal, and
    j <= i - sliding_window with a sliding window. Every query always sees itself."""
    i = np.arange(n)[:, None]  # (n, 1) query index
    j = np.arange(n)[None, :]  # (1, n) key index
    hidden = np.zeros((n, n), dtype=bool)
    if config.causal:
        hidden |= j > i
    if config.sliding_window is not None:
        hidden |= j <= i - config.sliding_window
    return hidden


def _positions(positions: np.ndarray | None, n: int) -> np.ndarray:
    if positions is None:
        return np.arange(n)
    positions = np.asarray(positions)
    if positions.shape != (n,) or not np.issubdtype(positions.dtype, np.integer):
        raise ConfigError(
            f"positions has shape {positions.shape} and dtype {positions.dtype}; give ({n},) integers, one per token"
        )
    return positions


def row_rms(a: np.ndarray, eps: float) -> np.ndarray:
    """The root mean square of each row of a (..., e), eps added under the root: (..., 1)."""
    return np.sqrt(np.mean(a * a, axis=-1, keepdims=True) + eps)


def rms_norm(a: np.ndarray, multiplier: np.ndarray, eps: float) -> np.ndarray:
    """Each row of a (..., e) divided by its root mean square, then times the multiplier (e,): the
    q/k norm here, and the models' RMSNorm layers. Gemma's multiplier is the effective 1 + w.
    A row whose squares pass the dtype's range raises Overflow: divided by an infinite root mean
    square it would come out as zeros, numbers that look like any others."""
    with np.errstate(over="ignore"):
        rms = row_rms(a, eps)  # (..., 1)
    if not np.isfinite(rms).all():
        raise Overflow(past_range(None, a.dtype, step="a row's squares, in an RMS norm,"))
    return a / rms * multiplier.astype(a.dtype, copy=False)  # (..., e)


def _rotary(positions: np.ndarray, d_head: int, theta: float, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the RoPE angles, (n, e) each, in the "rotate half" layout: component m and
    m + e/2 form a pair that turns by positions * theta^(-2m/e). Computed in the dtype of q, step by
    step as the reference implementations do in float32; the power is rounded from float64, as a
    correctly rounded float32 power would be (at position 800, one unit in the last place of a
    frequency already moves an angle by 5e-5)."""
    dtype = np.dtype(dtype)
    exponents = np.arange(0, d_head, 2).astype(dtype) / dtype.type(d_head)  # (e/2,)
    powers = (np.float64(theta) ** exponents.astype(np.float64)).astype(dtype)  # (e/2,)
    inv_freq = dtype.type(1.0) / powers  # (e/2,)
    angles = positions.astype(dtype)[:, None] * inv_freq[None, :]  # (n, e/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (n, e)
    return np.cos(angles), np.sin(angles)


def _rotate_half(a: np.ndarray) -> np.ndarray:
    """(..., e): [a1 | a2] -> [-a2 | a1], the 90-degree turn of every pair (m, m + e/2)."""
    half = a.shape[-1] // 2
    return np.concatenate([-a[..., half:], a[..., :half]], axis=-1)  # (..., e)
