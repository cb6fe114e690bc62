"""What the page and the terminal say at each stage: titles, formulas, explanations, as data."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from latex2mathml.converter import convert as latex_to_mathml

from .config import AttentionConfig


@dataclass(frozen=True)
class PageStage:
    id: str  # used in URLs, the CLI's --stage and the page
    title: str
    trace_stages: tuple[str, ...]  # the trace arrays this view shows
    latex: str
    explanation: str


# the reason for dividing the scores by √d_head, said of a layer with its own scale as of most layers
USUAL_SCALE = "Dividing by the square root of the key width keeps"

PAGE_STAGES: tuple[PageStage, ...] = (
    PageStage(
        "projections",
        "Projections",
        ("x", "q", "k", "v"),
        r"q_i = x_t\,W_i^Q,\quad k_{i,j} = x_j\,W_i^K,\quad v_{i,j} = x_j\,W_i^V",
        "Each head multiplies the whole input vector of a token by its own three matrices. "
        "The query token t gets a query vector q; every token j, the query included, gets a key k and a value v. "
        "No head sees a slice of x: each one projects all of it.",
    ),
    PageStage(
        "qk_norm",
        "Query/key norm",
        ("q_normed", "k_normed"),
        r"\hat{q}_i = \frac{q_i}{\sqrt{\frac{1}{d_{\text{head}}}\sum_m q_{i,m}^2 + \epsilon}} \odot w^q,\quad"
        r"\hat{k}_{i,j} = \frac{k_{i,j}}{\sqrt{\frac{1}{d_{\text{head}}}\sum_m k_{i,j,m}^2 + \epsilon}} \odot w^k",
        "This layer normalizes every query and key before comparing them: each vector is divided by its "
        "root mean square, then multiplied component by component by a learned vector. "
        "The scores can then no longer grow just because q or k got long.",
    ),
    PageStage(
        "rope",
        "Rotary positions",
        ("q_rotated", "k_rotated"),
        r"\tilde{q}_i = R_{t}\,q_i,\quad \tilde{k}_{i,j} = R_{j}\,k_{i,j},\quad"
        r"\tilde{q}_i \cdot \tilde{k}_{i,j} = q_i^\top R_{j-t}\,k_{i,j}",
        "The layer has no position vectors added to its input. Instead it turns q and k by angles that grow "
        "with the token's position (t for the query, j for a key): components m and m + d_head/2 form a pair, and R_t turns each pair "
        "by its own angle at position t, each pair at its own speed. In a dot product of two turned vectors the positions count only "
        "through how far apart the tokens are, j − t; what q and k hold counts as before. The values v are not turned.",
    ),
    PageStage(
        "scores",
        "Scores",
        ("scores", "scaled"),
        r"s_{i,j} = \frac{q_i \cdot k_{i,j}}{\sqrt{d_{\text{head}}}}",
        "The query is compared with every key by a dot product: multiply matching components and add. "
        + USUAL_SCALE
        + " the scores' typical size from growing with the width "
        "(if the components of q and k are independent, with mean 0 and variance 1, their dot product has a standard deviation "
        "of the square root of d_head), so that a wide head's softmax does not put almost all the weight on one key for that reason alone. "
        "A trained head may still give some keys large scores.",
    ),
    PageStage(
        "mask",
        "Mask",
        ("mask",),
        r"s_{i,j} \leftarrow -\infty \ \text{ for } j > t",
        "A causal decoder may not look ahead: every key j after the query's position t gets minus infinity, "
        "so its weight after the softmax is exactly zero.",
    ),
    PageStage(
        "weights",
        "Weights",
        ("weights",),
        r"a_{i,j} = \frac{e^{s_{i,j}}}{\sum_{m} e^{s_{i,m}}}",
        "The softmax turns the scores into positive weights that sum to 1 over the keys. "
        "A higher score gives a larger share, but every key keeps some weight, however small, unless a mask hides it: "
        "a key shown as 0.00 has a weight below 0.005, rounded.",
    ),
    PageStage(
        "mixing",
        "Value mixing",
        ("z",),
        r"z_i = \sum_{j} a_{i,j}\, v_{i,j}",
        "The head's output is the weighted sum of the value rows: each value vector is scaled by its weight, "
        "then they are added. This is the new vector the head offers for the query token.",
    ),
    PageStage(
        "concat",
        "Concatenation",
        ("concat",),
        r"\mathrm{concat} = [\,z_0 \mid z_1 \mid \dots \mid z_{h-1}\,]",
        "The head outputs are placed side by side in head order. Nothing is added or mixed yet: "
        "the first d_v numbers (d_v is the width of a value vector) come from head 0, the next from head 1, and so on.",
    ),
    PageStage(
        "output",
        "Output projection",
        ("output", "contributions"),
        r"y = \mathrm{concat}\,W^O = \sum_{i} z_i\, W^O_{[i]}",
        "The output matrix Wᴼ mixes the heads. Each output component is a sum over all concatenated numbers, "
        "so every head contributes to every component: head i through its own block of rows of Wᴼ.",
    ),
)

PAGE_STAGE_IDS = tuple(s.id for s in PAGE_STAGES)
STAGE_TITLES = {s.title.casefold(): s.id for s in PAGE_STAGES}
# a trace array named where a stage is asked for ("z") stands for the stage that shows it ("mixing")
SHOWN_IN = {a: s.id for s in PAGE_STAGES for a in s.trace_stages if a not in PAGE_STAGE_IDS}


def stage_id(given: str) -> str:
    """A stage named as its id in any case (WEIGHTS, as LIKE is like), by its title ("Value
    mixing", as the page and the terminal head it) or by a trace array it shows ("z", "scaled"),
    as its id; anything else as given, casefolded."""
    given = " ".join(given.split()).casefold()
    spaced = " ".join(given.replace("_", " ").replace("-", " ").split())  # "value_mixing", "value-mixing"
    return STAGE_TITLES.get(given) or STAGE_TITLES.get(spaced) or SHOWN_IN.get(given, given)


LACKS = {  # why a layer may lack one of the optional stages
    "qk_norm": "it does not normalize q and k",
    "rope": "it has no rotary positions",
    "mask": "it is not causal and has no sliding window",
}

# Points a careful teacher makes beside the figure.
NOTES: tuple[tuple[str, str], ...] = (
    (
        "visibility",
        "Here every token is visible to every query. A causal decoder would mask later positions "
        "before the softmax, so a token could only attend to itself and what came before it.",
    ),
    (
        "roles",
        "Heads have no guaranteed roles. Training may make one head track, say, the previous token, "
        "but nothing forces it, and the same head can do several things at once.",
    ),
    (
        "evidence",
        "A large weight is not proof of a semantic relation. It says where this head read from, "
        "not why, and the value vectors and Wᴼ decide what the reading changes.",
    ),
    (
        "cost",
        "More heads are not free: each head computes its own n×n weight matrix, h·n² entries a layer. "
        "A plain implementation stores them all; a fused kernel (FlashAttention) computes them without storing them.",
    ),
    (
        "mqa",
        "Multi-query attention shares one K/V projection across all query heads, "
        "and grouped-query attention shares one per group, to shrink the KV cache a decoder keeps per token.",
    ),
)


def notes(config: AttentionConfig) -> tuple[tuple[str, str], ...]:
    """The teaching notes, with the first one true to this config's mask."""
    if not config.masked:
        return NOTES
    if not config.causal:  # a window on keys too far back alone: every later key is seen
        window = (
            "visibility",
            f"This layer has a sliding window of {config.sliding_window}: each query sees the keys fewer than "
            f"{config.sliding_window} positions before it, and every key after it. Every other key is set to "
            "minus infinity before the softmax, so its weight is exactly 0.",
        )
        return (window, *NOTES[1:])
    causal = (
        "visibility",
        "This layer is causal: each query sees only itself and the tokens before it. Later keys are "
        "set to minus infinity before the softmax, so their weights are exactly 0.",
    )
    if config.sliding_window is not None:
        causal = (
            "visibility",
            f"This layer is causal with a sliding window of {config.sliding_window}: each query sees itself "
            f"and at most the {config.sliding_window - 1} tokens before it. Every other key is set to minus "
            "infinity before the softmax, so its weight is exactly 0.",
        )
    return (causal, *NOTES[1:])


# Shown only when the layer has the trace stages behind them.
_OPTIONAL = {
    "qk_norm": lambda c: c.qk_norm,
    "rope": lambda c: c.rope_theta is not None,
    "mask": lambda c: c.masked,
}


def page_stages(config: AttentionConfig) -> tuple[PageStage, ...]:
    """The stages of the walkthrough for this config: the mask only when causal or windowed, the
    q/k norm and rotary stages only when the layer has them."""
    stages = tuple(s for s in PAGE_STAGES if _OPTIONAL.get(s.id, lambda c: True)(config))
    if config.bias:
        stages = tuple(_BIASED.get(s.id, s) for s in stages)
    if config.n_kv_heads < config.n_heads:
        stages = tuple(_shared_kv(s, config) if s.id in ("projections", "qk_norm", "mixing") else s for s in stages)
    if config.n_heads == 1:
        stages = tuple(_ONE_HEAD.get(s.id, lambda s, c: s)(s, config) for s in stages)
    stages = tuple(_rope(s, config) if s.id == "rope" else _scores(s, config) if s.id == "scores" else s for s in stages)
    if config.sliding_window is None:
        return stages
    return tuple(_windowed_mask(s, config) if s.id == "mask" else s for s in stages)


def _biased(stage_id: str, latex: str, also: str) -> PageStage:
    stage = next(s for s in PAGE_STAGES if s.id == stage_id)
    return replace(stage, latex=latex, explanation=f"{stage.explanation} {also}")


# A layer with biases adds a learned vector after each product: the formulas show it, so that
# a reader checking a number by hand adds it too.
_BIASED = {
    "projections": _biased(
        "projections",
        r"q_i = x_t\,W_i^Q + b_i^Q,\quad k_{i,j} = x_j\,W_i^K + b_i^K,\quad v_{i,j} = x_j\,W_i^V + b_i^V",
        "Each product then gets the head's bias vector b added.",
    ),
    "output": _biased(
        "output",
        r"y = \mathrm{concat}\,W^O + b^O = \sum_{i} z_i\, W^O_{[i]} + b^O",
        "The bias bᴼ is added once, after the heads' contributions.",
    ),
}


def _shared_kv(stage: PageStage, config: AttentionConfig) -> PageStage:
    """Projections, the q/k norm and value mixing of a layer whose query heads share K/V heads
    (GQA, MQA): head i's keys and values are those of its K/V head g."""
    if stage.id == "mixing":
        return replace(
            stage,
            latex=stage.latex.replace(r"v_{i,j}", r"v_{g,j}"),
            explanation=f"{stage.explanation} The value rows are those of K/V head g, which head i shares with other query heads.",
        )
    if stage.id == "qk_norm":  # the keys normed are those of K/V head g
        return replace(stage, latex=stage.latex.replace("k_{i,j", "k_{g,j").replace("k}_{i,j}", "k}_{g,j}"))
    latex = stage.latex.replace(r"k_{i,j} = x_j\,W_i^K", r"k_{g,j} = x_j\,W_g^K").replace(r"v_{i,j} = x_j\,W_i^V", r"v_{g,j} = x_j\,W_g^V")
    latex = latex.replace("b_i^K", "b_g^K").replace("b_i^V", "b_g^V")
    if config.n_kv_heads == 1:
        every = "both" if config.n_heads == 2 else f"all {config.n_heads}"
        shared = f"{every} query heads share one key matrix and one value matrix (multi-query attention), so every head reads the same keys and values"
    else:
        per = config.n_heads // config.n_kv_heads
        shared = (
            f"the {config.n_heads} query heads share {config.n_kv_heads} pairs of key and value matrices, one pair (a K/V head) to every {per} query heads "
            f"(grouped-query attention): head i reads the keys and values of its K/V head g, i ÷ {per} rounded down (heads 0 {'and' if per == 2 else 'to'} {per - 1} read K/V head 0)"
        )
    text = (
        "Each query head multiplies the whole input vector of a token by its own query matrix to get the query vector q. "
        f"Keys and values are made the same way, but {shared}. Every token, the query included, gets a key k and a value v. "
        "No head sees a slice of x: each one projects all of it."
    )
    if config.bias:
        text += " Each product then gets its bias vector b added."
    return replace(stage, latex=latex, explanation=text)


# A layer of one head: nothing to place side by side, and W^O has one head's rows.
_ONE_HEAD = {
    "concat": lambda stage, c: replace(
        stage,
        latex=r"\mathrm{concat} = z_0",
        explanation="With one head there is nothing to place side by side: the concatenation is z₀ itself.",
    ),
    "output": lambda stage, c: replace(
        stage,
        latex=r"y = z_0\,W^O" + (" + b^O" if c.bias else ""),
        explanation="The output matrix Wᴼ maps the head's output to the model's width: each output component is a "
        "weighted sum of the numbers of z₀." + (" The bias bᴼ is then added." if c.bias else ""),
    ),
}


def _kv(config: AttentionConfig) -> str:
    """Whose keys head i reads in the formulas: its own (i), or those of the K/V head it shares (g)."""
    return "g" if config.n_kv_heads < config.n_heads else "i"


def _rope(stage: PageStage, config: AttentionConfig) -> PageStage:
    """The rotation of head i's query at position t and of the keys it reads (of its K/V head g
    where heads share them), normed first when the layer has a q/k norm."""
    q, k = (r"\hat{q}", r"\hat{k}") if config.qk_norm else ("q", "k")
    kj = f"{{{_kv(config)},j}}"
    latex = (
        rf"\tilde{{q}}_i = R_{{t}}\,{q}_i,\quad \tilde{{k}}_{kj} = R_{{j}}\,{k}_{kj},\quad"
        rf"\tilde{{q}}_i \cdot \tilde{{k}}_{kj} = {q}_i^\top R_{{j-t}}\,{k}_{kj}"
    )
    text = stage.explanation + (" Here it turns the normed q̂ and k̂ of the stage before." if config.qk_norm else "")
    return replace(stage, latex=latex, explanation=text)


def _scores(stage: PageStage, config: AttentionConfig) -> PageStage:
    """The scores of the q and k the layer compares (rotated, or normed, when it has those
    stages), divided by √d_head or multiplied by the layer's own scale."""
    q, k, text = "q", "k", stage.explanation
    own = config.own_scale is not None
    if own:  # the reason for √d_head, said of most layers, not of this one
        text = text.replace(USUAL_SCALE, "Most layers divide by the square root of the key width, which keeps", 1)
    if config.rope_theta is not None:
        q, k = r"\tilde{q}", r"\tilde{k}"
        text += " Here q and k are the rotated ones of the stage before (q̃, k̃), so each score depends on how far apart the two tokens are."
    elif config.qk_norm:
        q, k = r"\hat{q}", r"\hat{k}"
        text += " Here q and k are the normed ones of the stage before (q̂, k̂)."
    if config.scale is not None and not own:  # set by the config (Gemma's query_pre_attn_scalar), equal to the usual one
        text += f" This layer's config sets the scale itself, {config.scale:g}, which here equals 1/√d_head."
    product = rf"{q}_i \cdot {k}_{{{_kv(config)},j}}"  # head i's query against the keys it reads
    if own:
        latex = rf"s_{{i,j}} = {product} \times {config.scale:g}"
        text += f" This layer multiplies by {config.scale:g} instead, a scale its config sets."
    else:
        latex = rf"s_{{i,j}} = \frac{{{product}}}{{\sqrt{{d_{{\text{{head}}}}}}}}"
    return replace(stage, latex=latex, explanation=text)


def _windowed_mask(stage: PageStage, config: AttentionConfig) -> PageStage:
    w = config.sliding_window
    if config.causal:
        latex = r"s_{i,j} \leftarrow -\infty \ \text{ for } j > t \text{ or } j \le t - " + str(w)
        text = (
            f"This layer looks back through a sliding window: a query at position t sees itself and at most the {w - 1} "
            f"token{'' if w == 2 else 's'} before it. Later keys, and keys further back than the window, get minus infinity, "
            "so their weights after the softmax are exactly zero."
        )
    else:
        latex = r"s_{i,j} \leftarrow -\infty \ \text{ for } j \le t - " + str(w)
        text = (
            f"This layer uses a sliding window: keys j more than {w - 1} position{'' if w == 2 else 's'} before the query's position t get "
            "minus infinity, so their weights after the softmax are exactly zero."
        )
    return replace(stage, latex=latex, explanation=text)


# latex2mathml writes -\infty as two operators, which browsers space apart ("− ∞"): a sign and a number
MINUS_INFINITY = ("<mo>&#x02212;</mo><mo>&#x0221E;</mo>", '<mrow><mo form="prefix" lspace="0" rspace="0">&#x02212;</mo><mi>&#x0221E;</mi></mrow>')


@lru_cache(maxsize=None)
def mathml(latex: str) -> str:
    return latex_to_mathml(latex, display="block").replace(*MINUS_INFINITY)
