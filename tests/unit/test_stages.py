"""The recorded stages: their exact names, their order and their shapes."""

from __future__ import annotations

import numpy as np
import pytest

from mha_explorer.config import AttentionConfig
from mha_explorer.trace import STAGE_NAMES, STAGES, trace
from mha_explorer.weights import AttentionWeights

from ._support import shape_of

pytestmark = pytest.mark.unit

NON_CAUSAL = ["x", "q", "k", "v", "scores", "scaled", "weights", "z", "concat", "output", "contributions"]
CAUSAL = ["x", "q", "k", "v", "scores", "scaled", "mask", "weights", "z", "concat", "output", "contributions"]

CONFIGS = {
    "mha": AttentionConfig(d_model=8, n_heads=4),
    "gqa": AttentionConfig(d_model=12, n_heads=6, n_kv_heads=2),
    "mqa": AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1),
    "dv-ne-dhead": AttentionConfig(d_model=6, n_heads=3, d_head=4, d_v=5),
    "causal": AttentionConfig(d_model=8, n_heads=2, causal=True),
    "bias": AttentionConfig(d_model=8, n_heads=2, bias=True),
    "one-head": AttentionConfig(d_model=3, n_heads=1),
    "gqa-causal-bias-odd-widths": AttentionConfig(
        d_model=5, n_heads=4, n_kv_heads=2, d_head=3, d_v=2, causal=True, bias=True
    ),
    "rope": AttentionConfig(d_model=8, n_heads=2, rope_theta=10000.0),
    "qk-norm-rope-window-gqa": AttentionConfig(
        d_model=8, n_heads=4, n_kv_heads=2, qk_norm=True, rope_theta=10000.0, sliding_window=2
    ),
}


def run(config: AttentionConfig, n: int, seed: int = 0):
    x = np.random.default_rng(seed).standard_normal((n, config.d_model))
    return trace(x, AttentionWeights.random(config, seed=seed), config)


# every stage a layer can have: the optional q/k norm and RoPE stages sit between v and the scores
ALL = ["x", "q", "k", "v", "q_normed", "k_normed", "q_rotated", "k_rotated", *CAUSAL[4:]]


def test_stage_table_is_pinned():
    assert list(STAGE_NAMES) == ALL
    assert STAGE_NAMES == tuple(s.name for s in STAGES)
    assert len(set(STAGE_NAMES)) == len(STAGE_NAMES)
    for s in STAGES:
        assert s.shape and s.formula and s.meaning, s


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_trace_records_exactly_the_named_stages_in_order(config):
    t = run(config, n=5)
    if config.qk_norm or config.rope_theta is not None or config.sliding_window is not None:
        optional = {
            "q_normed": config.qk_norm,
            "k_normed": config.qk_norm,
            "q_rotated": config.rope_theta is not None,
            "k_rotated": config.rope_theta is not None,
            "mask": config.causal or config.sliding_window is not None,
        }
        assert list(t.stages) == [name for name in ALL if optional.get(name, True)]
    else:
        assert list(t.stages) == (CAUSAL if config.causal else NON_CAUSAL)


@pytest.mark.parametrize("n", [1, 2, 7], ids=lambda n: f"n={n}")
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_every_stage_has_the_shape_its_table_row_states(config, n):
    t = run(config, n)
    table = {s.name: s.shape for s in STAGES}
    for name, array in t.stages.items():
        assert array.shape == shape_of(table[name], config, n), name
    assert t.n == n


def test_shape_strings_mean_what_they_say():
    # a hand-evaluated check of the parser the shape test relies on
    c = AttentionConfig(d_model=7, n_heads=6, n_kv_heads=3, d_head=2, d_v=5)
    assert shape_of("(n_heads, n, d_head)", c, 4) == (6, 4, 2)
    assert shape_of("(n_kv_heads, n, d_v)", c, 4) == (3, 4, 5)
    assert shape_of("(n, n_heads*d_v)", c, 4) == (4, 30)
    assert shape_of("(n, d_model)", c, 1) == (1, 7)


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_kv_group_of_the_trace_is_the_configs(config):
    t = run(config, n=3)
    assert t.kv_group.tolist() == list(config.kv_group)
    assert t.config is config


@pytest.mark.parametrize("causal", [True, False])
def test_a_window_of_two_is_said_in_the_singular(causal):
    """A window of 2 keeps one key before the query: "the 1 token", "more than 1 position"."""
    from mha_explorer.narrative import page_stages

    def said(w):
        return next(s.explanation for s in page_stages(AttentionConfig(d_model=4, n_heads=2, causal=causal, sliding_window=w)) if s.id == "mask")

    assert ("at most the 1 token before it" if causal else "more than 1 position before") in said(2)
    assert ("at most the 3 tokens before it" if causal else "more than 3 positions before") in said(4)


def test_the_pages_order_of_stages_is_the_narratives():
    """page.js falls back from a stage a layer lacks to the one before it, by its own list of every
    stage in order: it must be the narrative's."""
    import re
    from pathlib import Path

    from mha_explorer.narrative import PAGE_STAGE_IDS

    source = (Path(__file__).resolve().parents[2] / "src/mha_explorer/web/page.js").read_text(encoding="utf-8")
    listed = re.search(r"const STAGE_ORDER = \[([^\]]*)\]", source)
    assert listed, "page.js has no STAGE_ORDER"
    assert tuple(re.findall(r'"([a-z_]+)"', listed[1])) == PAGE_STAGE_IDS


def test_the_page_says_why_a_layer_lacks_a_stage_as_the_narrative_does():
    """A link's stage the layer lacks is said on the page by the stage's title and why the layer
    lacks it (LACKED, LACKS in page.js): the narrative's titles and reasons, word for word."""
    import json
    import re
    from pathlib import Path

    from mha_explorer.narrative import LACKS, PAGE_STAGES

    source = (Path(__file__).resolve().parents[2] / "src/mha_explorer/web/page.js").read_text(encoding="utf-8")

    def table(name):
        found = re.search(rf"const {name} = (\{{[^}}]*\}});", source)
        assert found, f"page.js has no {name}"
        return json.loads(re.sub(r"(\w+):", r'"\1":', found[1]))

    assert table("LACKS") == LACKS
    assert table("LACKED") == {s.id: s.title for s in PAGE_STAGES if s.id in LACKS}


@pytest.mark.parametrize("n_heads, said", [(4, "heads 0 and 1 read K/V head 0"), (6, "heads 0 to 2 read K/V head 0")])
def test_the_query_heads_of_a_kv_head_are_said_as_a_pair_or_a_range(n_heads, said):
    """"heads 0 to 1" of a pair read oddly: two are "0 and 1"."""
    from mha_explorer.narrative import page_stages

    text = next(s.explanation for s in page_stages(AttentionConfig(d_model=12, n_heads=n_heads, n_kv_heads=2, d_head=2)) if s.id == "projections")
    assert said in text
