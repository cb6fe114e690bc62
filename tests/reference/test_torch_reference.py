"""trace() against PyTorch, float64, stage by stage, at 1e-10.

Two references:
- torch.nn.MultiheadAttention, loaded through `AttentionWeights.to_packed`, for every
  configuration that layout can hold (MHA, n_heads * d_head = d_model, d_v = d_head);
- torch.nn.functional.scaled_dot_product_attention (enable_gqa=True when K/V heads are
  shared) for every configuration, with q, k, v and the output projection computed
  by torch from the same per-head weights and a torch softmax for the weights.

The cases are drawn once from fixed seeds, so every run checks the same 60 layers.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mha_explorer.config import AttentionConfig
from mha_explorer.trace import attention, trace
from mha_explorer.weights import AttentionWeights

pytestmark = pytest.mark.reference

TOL = dict(rtol=0, atol=1e-10)


@dataclass(frozen=True)
class Case:
    config: AttentionConfig
    n: int
    seed: int

    @property
    def id(self) -> str:
        c = self.config
        parts = [c.kind.lower(), f"d{c.d_model}", f"h{c.n_heads}"]
        if c.kind != "MHA":
            parts.append(f"kv{c.n_kv_heads}")
        parts.append(f"e{c.d_head}")
        if c.d_v != c.d_head:
            parts.append(f"v{c.d_v}")
        parts.append(f"n{self.n}")
        parts += [p for p, on in (("causal", c.causal), ("bias", c.bias)) if on]
        return "-".join(parts + [f"s{self.seed}"])

    def inputs(self) -> tuple[np.ndarray, AttentionWeights]:
        rng = np.random.default_rng(self.seed)
        x = rng.standard_normal((self.n, self.config.d_model))
        return x, AttentionWeights.random(self.config, seed=self.seed)


def _packable_cases() -> list[Case]:
    """MHA that torch.nn.MultiheadAttention can hold: 6 per (causal, bias) pair, one of them n = 1."""
    rng = random.Random(20240601)
    cases = []
    for causal in (False, True):
        for bias in (False, True):
            for k in range(6):
                h, e = rng.choice([1, 2, 3, 4, 6, 8]), rng.choice([1, 2, 4, 5, 8])
                n = 1 if k == 0 else rng.randint(2, 12)
                cases.append(Case(AttentionConfig(d_model=h * e, n_heads=h, causal=causal, bias=bias), n, len(cases)))
    return cases


def _any_cases() -> list[Case]:
    """GQA, MQA, d_v != d_head and odd widths: 3 of each kind per (causal, bias) pair, one with n = 1."""
    rng = random.Random(20240602)
    cases = []
    for kind in ("gqa", "mqa", "dv"):
        for causal in (False, True):
            for bias in (False, True):
                for k in range(3):
                    if kind == "gqa":
                        h, kv = rng.choice([(4, 2), (6, 2), (6, 3), (8, 4), (8, 2)])
                    elif kind == "mqa":
                        h, kv = rng.choice([2, 3, 4, 8]), 1
                    else:
                        h = rng.choice([1, 2, 3, 4])
                        kv = rng.choice([d for d in range(1, h + 1) if h % d == 0])
                    d_head = rng.randint(1, 8)
                    d_v = rng.choice([v for v in range(1, 9) if v != d_head]) if kind == "dv" else rng.randint(1, 8)
                    config = AttentionConfig(
                        d_model=rng.randint(1, 16), n_heads=h, n_kv_heads=kv, d_head=d_head, d_v=d_v, causal=causal, bias=bias
                    )
                    n = 1 if k == 0 and kind != "dv" else rng.randint(2, 12)
                    cases.append(Case(config, n, 1000 + len(cases)))
    return cases


# Long enough (n_heads * n * n >= 2**18) that trace() runs its heads on parallel threads.
LONG_PACKABLE = [
    Case(AttentionConfig(d_model=32, n_heads=8, causal=True, bias=True), 200, 2001),
    Case(AttentionConfig(d_model=48, n_heads=12), 160, 2002),
]
LONG_ANY = [
    Case(AttentionConfig(d_model=32, n_heads=8, n_kv_heads=2, causal=True), 192, 2003),
    Case(AttentionConfig(d_model=24, n_heads=8, n_kv_heads=1, d_v=5, bias=True), 182, 2004),
]
PACKABLE = _packable_cases() + LONG_PACKABLE
ANY = _any_cases() + LONG_ANY


def test_the_cases_cover_what_they_claim():
    every = PACKABLE + ANY
    assert len(every) >= 50
    assert len({c.id for c in every}) == len(every)
    kinds = {(c.config.kind, c.config.causal, c.config.bias) for c in every}
    assert kinds == {(k, causal, bias) for k in ("MHA", "GQA", "MQA") for causal in (False, True) for bias in (False, True)}
    assert any(c.config.d_v != c.config.d_head for c in ANY)
    assert any(c.n == 1 and c.config.kind == kind for c in every for kind in ("MHA", "GQA", "MQA"))


def test_the_long_cases_run_in_parallel(monkeypatch):
    from mha_explorer import parallel

    ran = []
    monkeypatch.setattr(parallel, "in_parallel", lambda task, items: ran.append(task.__name__) or [task(i) for i in items])
    for case in LONG_PACKABLE + LONG_ANY:
        ran.clear()
        trace(*case.inputs(), case.config)
        assert "one_head" in ran, f"{case.id} ran serially"


def test_scores_too_large_for_a_plain_exp_get_the_row_max_shift():
    """float32 exp overflows above 88.7: scores of several hundred must still give exact weights."""
    config = AttentionConfig(d_model=8, n_heads=2, causal=True)
    w = AttentionWeights.random(config, seed=5, dtype=np.float32)
    x = (np.random.default_rng(5).standard_normal((6, 8)) * 60).astype(np.float32)
    t = trace(x, w, config)
    assert np.abs(t["scaled"]).max() > 200
    with torch.no_grad():
        logits = torch.from_numpy(t["scaled"]).masked_fill(causal_mask(6), -math.inf)
        expected = torch.softmax(logits, dim=-1).numpy()
    assert np.isfinite(t["weights"]).all()
    np.testing.assert_allclose(t["weights"], expected, rtol=0, atol=1e-6)


def t64(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a, dtype=np.float64))  # a fresh, writable copy


def check(ours: np.ndarray, theirs: torch.Tensor, name: str) -> None:
    theirs = theirs.detach().numpy()
    assert ours.shape == theirs.shape, f"{name}: {ours.shape} vs torch {theirs.shape}"
    assert ours.dtype == np.float64, name
    np.testing.assert_allclose(ours, theirs, **TOL, err_msg=name)


def causal_mask(n: int) -> torch.Tensor:
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)  # (n, n), True = may not attend


@pytest.mark.parametrize("case", PACKABLE, ids=[c.id for c in PACKABLE])
def test_matches_torch_multihead_attention(case: Case):
    c, n = case.config, case.n
    x, w = case.inputs()
    t = trace(x, w, c)

    mha = torch.nn.MultiheadAttention(c.d_model, c.n_heads, bias=c.bias, batch_first=True, dtype=torch.float64)
    packed = w.to_packed(c)
    assert set(packed) == {name for name, _ in mha.named_parameters()}
    with torch.no_grad():
        for name, a in packed.items():
            mha.get_parameter(name).copy_(t64(a))
    mha.eval()

    xt = t64(x)[None]  # (1, n, d_model)
    mask = causal_mask(n) if c.causal else None
    with torch.no_grad():
        y, attn = mha(xt, xt, xt, need_weights=True, average_attn_weights=False, attn_mask=mask)
    check(t["output"], y[0], "output")
    check(t["weights"], attn[0], "weights")

    # the intermediates, from torch's own packed parameters
    h, e = c.n_heads, c.d_head
    with torch.no_grad():
        qkv = F.linear(xt[0], mha.in_proj_weight, mha.in_proj_bias)  # (n, 3*d_model)
        q, k, v = (a.reshape(n, h, e).transpose(0, 1) for a in qkv.chunk(3, dim=-1))  # (h, n, e) each
        scores = q @ k.transpose(1, 2)  # (h, n, n)
        z = attn[0] @ v  # (h, n, e)
        concat = z.transpose(0, 1).reshape(n, h * e)
        # torch's own output is its out_proj applied to this concat: the intermediates are its
        np.testing.assert_allclose(
            F.linear(concat, mha.out_proj.weight, mha.out_proj.bias).numpy(), y[0].numpy(), **TOL
        )
        contributions = torch.stack(
            [z[i] @ mha.out_proj.weight[:, i * e : (i + 1) * e].T for i in range(h)]
        )  # (h, n, d_model)
    for name, theirs in [("q", q), ("k", k), ("v", v), ("scores", scores), ("z", z), ("concat", concat)]:
        check(t[name], theirs, name)
    check(t["scaled"], scores / math.sqrt(e), "scaled")
    check(t["contributions"], contributions, "contributions")
    if c.causal:
        expected = (scores / math.sqrt(e)).masked_fill(causal_mask(n), -math.inf)
        np.testing.assert_array_equal(np.isneginf(t["mask"]), np.isneginf(expected.numpy()))
        check(t["mask"], expected, "mask")


@pytest.mark.parametrize("case", PACKABLE + ANY, ids=[c.id for c in PACKABLE + ANY])
def test_attention_alone_gives_the_traced_output(case: Case):
    """attention() skips the stages nobody looks at, and gives trace()'s output."""
    x, w = case.inputs()
    np.testing.assert_allclose(attention(x, w, case.config), trace(x, w, case.config)["output"], **TOL)


@pytest.mark.parametrize("case", PACKABLE + ANY, ids=[c.id for c in PACKABLE + ANY])
def test_matches_torch_scaled_dot_product_attention(case: Case):
    c, n = case.config, case.n
    x, w = case.inputs()
    t = trace(x, w, c)
    h, g, e = c.n_heads, c.n_kv_heads, c.d_head

    xt = t64(x)
    with torch.no_grad():
        q = torch.einsum("nd,hde->hne", xt, t64(w.W_Q))  # (h, n, e)
        k = torch.einsum("nd,gde->gne", xt, t64(w.W_K))  # (g, n, e)
        v = torch.einsum("nd,gdf->gnf", xt, t64(w.W_V))  # (g, n, f)
        if c.bias:
            q, k, v = q + t64(w.b_Q)[:, None], k + t64(w.b_K)[:, None], v + t64(w.b_V)[:, None]
        z = F.scaled_dot_product_attention(
            q[None], k[None], v[None], is_causal=c.causal, enable_gqa=g < h
        )[0]  # (h, n, f)
        concat = z.transpose(0, 1).reshape(n, h * c.d_v)  # (n, h*f)
        y = concat @ t64(w.W_O)  # (n, d_model)
        if c.bias:
            y = y + t64(w.b_O)
        W_O_heads = t64(w.W_O).reshape(h, c.d_v, c.d_model)
        contributions = torch.einsum("hnf,hfd->hnd", z, W_O_heads)

        # the weights SDPA does not return: torch's softmax on K repeated for each query head
        k_h = k.repeat_interleave(h // g, dim=0)  # (h, n, e)
        v_h = v.repeat_interleave(h // g, dim=0)
        scores = q @ k_h.transpose(1, 2)  # (h, n, n)
        scaled = scores / math.sqrt(e)
        logits = scaled.masked_fill(causal_mask(n), -math.inf) if c.causal else scaled
        weights = torch.softmax(logits, dim=-1)
        # SDPA's z is that softmax times V: the two torch paths agree with each other
        np.testing.assert_allclose((weights @ v_h).numpy(), z.numpy(), **TOL)

    for name, theirs in [
        ("q", q), ("k", k), ("v", v), ("scores", scores), ("scaled", scaled), ("weights", weights),
        ("z", z), ("concat", concat), ("output", y), ("contributions", contributions),
    ]:  # fmt: skip
        check(t[name], theirs, name)
    if c.causal:
        np.testing.assert_array_equal(np.isneginf(t["mask"]), np.isneginf(logits.numpy()))
        check(t["mask"], logits, "mask")
        assert (t["weights"][:, causal_mask(n).numpy()] == 0.0).all()


@pytest.mark.parametrize("causal, window", [(True, None), (True, 100), (False, 100)], ids=["causal", "causal-window", "window"])
def test_a_long_masked_layer_worked_in_blocks_of_rows_matches_torch(causal: bool, window: int | None):
    """attention() of a masked layer works each block of query rows against the keys its rows may
    see (_seen_blocks): here three blocks, the later ones' keys cut by the window at their start."""
    from mha_explorer.trace import _seen_blocks

    n, config = 400, AttentionConfig(d_model=16, n_heads=4, n_kv_heads=2, causal=causal, sliding_window=window, bias=True)
    blocks = _seen_blocks(n, config)
    assert len(blocks) == 3 and (window is None) == all(cols.start == 0 for _, cols in blocks)
    x, w = Case(config, n, 3001).inputs()
    x[250:] *= 40  # scores large enough that these rows take the row-max shift, in the middle of a block
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    hidden = (j > i if causal else torch.zeros(n, n, dtype=torch.bool)) | ((j <= i - window) if window else False)  # (n, n)
    h, g = config.n_heads, config.n_kv_heads
    xt = t64(x)
    with torch.no_grad():
        q = torch.einsum("nd,hde->hne", xt, t64(w.W_Q)) + t64(w.b_Q)[:, None]  # (h, n, e)
        k = torch.einsum("nd,gde->gne", xt, t64(w.W_K)) + t64(w.b_K)[:, None]  # (g, n, e)
        v = torch.einsum("nd,gdf->gnf", xt, t64(w.W_V)) + t64(w.b_V)[:, None]  # (g, n, f)
        z = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=~hidden, enable_gqa=g < h)[0]  # (h, n, f)
        y = z.transpose(0, 1).reshape(n, -1) @ t64(w.W_O) + t64(w.b_O)  # (n, d_model)
    check(attention(x, w, config), y, "output")
    check(trace(x, w, config)["output"], y, "the traced output")
