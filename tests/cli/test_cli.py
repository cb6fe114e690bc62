"""`mha-explorer trace`, through click's CliRunner.

Expected numbers come from the example's JSON file and a plain-loop attention
written here, not from the package's trace().
"""

from __future__ import annotations

import io
import json
import math
import re
from decimal import ROUND_HALF_UP, Decimal
from importlib.resources import files

import numpy as np
import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from mha_explorer import AttentionConfig, AttentionWeights, trace
from mha_explorer.cli import main
from mha_explorer.schema import TracePayload

pytestmark = pytest.mark.cli

TITLES = ["Projections", "Scores", "Weights", "Value mixing", "Concatenation", "Output projection"]
TITLES_CAUSAL = ["Projections", "Scores", "Mask", "Weights", "Value mixing", "Concatenation", "Output projection"]
STAGE_IDS = ["projections", "scores", "weights", "mixing", "concat", "output"]


# --- an independent reference ------------------------------------------------


def example() -> dict:
    return json.loads(files("mha_explorer.examples").joinpath("teaching.json").read_text(encoding="utf-8"))


def loop_attention(ex: dict, causal: bool) -> dict[str, list]:
    """Attention one number at a time on the example's lists (no bias in the example)."""
    x, c = ex["x"], ex["config"]
    n, d, h, e, f = len(x), c["d_model"], c["n_heads"], c["d_head"], c["d_v"]
    assert not c["bias"]

    def proj(W, i, t, width):
        return [sum(x[t][m] * W[i][m][j] for m in range(d)) for j in range(width)]

    q = [[proj(ex["W_Q"], i, t, e) for t in range(n)] for i in range(h)]
    k = [[proj(ex["W_K"], i, t, e) for t in range(n)] for i in range(h)]
    v = [[proj(ex["W_V"], i, t, f) for t in range(n)] for i in range(h)]
    scores = [[[sum(a * b for a, b in zip(q[i][t], k[i][s])) for s in range(n)] for t in range(n)] for i in range(h)]
    weights = []
    for i in range(h):
        rows = []
        for t in range(n):
            visible = [s for s in range(n) if not causal or s <= t]
            scaled = {s: scores[i][t][s] / math.sqrt(e) for s in visible}
            top = max(scaled.values())
            ex_ = {s: math.exp(scaled[s] - top) for s in visible}
            total = sum(ex_.values())
            rows.append([ex_[s] / total if s in ex_ else 0.0 for s in range(n)])
        weights.append(rows)
    z = [[[sum(weights[i][t][s] * v[i][s][j] for s in range(n)) for j in range(f)] for t in range(n)] for i in range(h)]
    concat = [[z[i][t][j] for i in range(h) for j in range(f)] for t in range(n)]
    output = [[sum(concat[t][r] * ex["W_O"][r][m] for r in range(h * f)) for m in range(d)] for t in range(n)]
    return {"q": q, "k": k, "v": v, "scores": scores, "weights": weights, "z": z, "output": output}


def two(v: float) -> str:
    """Two decimals, halves away from zero (JavaScript's toFixed), and no "-0.00"."""
    s = str(Decimal(v).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
    return "0.00" if s == "-0.00" else s


def times_ten(v: float) -> str:
    """Three significant digits times a power of ten, as by hand: 4.44×10⁴, 1.35×10⁻¹ (1.35e-1, in a
    column of e^s, reads as 1.35 times e to the -1)."""
    mantissa, exponent = f"{v:.2e}".split("e")
    return mantissa + "×10" + str(int(exponent)).translate(str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))


def factor(v: float) -> str:
    """A factor of a product as written by hand: a negative one in brackets, "0.50×(-1.25)"."""
    s = two(v)
    return f"({s})" if s.startswith("-") else s


# --- running the command -----------------------------------------------------


def run(*args: str, width: int = 200):
    result = CliRunner().invoke(main, ["trace", *args], env={"COLUMNS": str(width)})
    assert "Traceback" not in result.output
    return result


def ok(*args: str, width: int = 200) -> str:
    result = run(*args, width=width)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stderr == ""
    return result.stdout


def titles(out: str) -> list[str]:
    return re.findall(r"╭─+ (.+?) ─+╮", out)


def cells(out: str) -> list[list[str]]:
    """The cells of every table row, with the panel's own borders dropped."""
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split("│")]  # "│ │ a │ b │   │" -> "", "", a, b, "", ""
        if len(parts) > 4:
            rows.append(parts[2:-2])
    return rows


def unruled(out: str) -> list[list[str]]:
    """Each line inside a panel cut where two spaces or more part it: the cells of a table drawn
    without vertical rules (a terminal under 80 columns), with any empty cells before its first
    dropped. Prose lines come out as one cell."""
    return [re.split(r"\s{2,}", line.strip().strip("│").strip()) for line in out.splitlines()]


def has_row(out: str, expected: list[str]) -> bool:
    """Some table row holds `expected` as consecutive cells."""
    k = len(expected)
    return any(row[i : i + k] == expected for row in cells(out) for i in range(len(row) - k + 1))


# --- the default walkthrough -------------------------------------------------


def test_runner_keeps_stderr_apart():
    """click >= 8.2 captures stderr separately; the error tests rely on it."""
    result = run("--head", "9")
    assert result.stdout == ""
    assert result.stderr.strip() != ""


def broken_vectors(out: str) -> list[str]:
    """The lines where a vector, a count or a pair of numbers is cut across lines: a "[" without
    its "]", "(64" without "numbers)" or the other way round, or a table cell ending in "0.28,"."""
    cut = []
    for line in out.splitlines():
        counts = re.findall(r"\((\d+)\s*$|^\W*(numbers|products)\)", line.replace("│", " ").strip())
        cells = [c.strip() for c in re.split("[│┃]", line)[2:-2]]  # a header's cells too
        counts += [c for c in cells if re.fullmatch(r"\(\d+|(numbers|products)\)", c)]
        if line.count("[") != line.count("]") or counts or any(re.search(r"\d,$", c) for c in cells):
            cut.append(line)
    return cut


@pytest.mark.parametrize("width", [60, 80, 120])
def test_at_80_columns_no_vector_is_cut_across_lines(width):
    """x stands in a table of its own when it does not fit beside q, k and v; a sum that does not
    fit on a line puts one term a line. Under 80 columns the tables drop their vertical rules: at
    60, head 1's k, [-0.50, -1.00], and a sum of two products were broken across two lines."""
    for args in ((), ("--causal",)):
        out = ok(*args, width=width)
        assert broken_vectors(out) == []
        assert max(map(cell_len, out.splitlines())) <= width
        assert ("┃" in out) == (width >= 80)  # the rules, where there is room for them
    if width >= 80:
        assert has_row(ok("--stage", "projections", width=80), ["like", "[0.00, 1.00, 0.00, 0.50]"])  # x, in its table
    else:
        rows = unruled(ok(width=width))
        assert ["like", "[-0.75, 1.00]", "[-0.50, -1.00]", "[0.00, 0.00]"] in rows  # head 1's q, k, v of "like"
        assert ["like", "(-0.75)×(-0.50) + 1.00×(-1.00)", "-0.63", "-0.44"] in rows  # head 1's score, its sum whole


def test_the_prose_writes_w_o_as_the_tables_do():
    out = ok("--stage", "output")
    assert "The output matrix W^O mixes the heads" in out and "Wᴼ" not in out


@pytest.mark.parametrize("width", [80, 200], ids=["80-columns", "200-columns"])
def test_default_shows_every_stage_and_both_heads(width):
    out = ok(width=width)
    assert titles(out) == TITLES
    assert "query like (position 1)" in out
    for head in (0, 1):
        assert f"head {head}" in out


def test_score_rows_show_the_dot_product_terms_and_the_scores():
    ex, out = example(), ok()
    ref = loop_attention(ex, causal=False)
    i, e = ex["tokens"].index("like"), ex["config"]["d_head"]
    for h in (0, 1):
        assert f"head {h}: q·k_j, then ÷√{e}" in out
        for j, tok in enumerate(ex["tokens"]):
            terms = " + ".join(f"{factor(a)}×{factor(b)}" for a, b in zip(ref["q"][h][i], ref["k"][h][j]))
            score = ref["scores"][h][i][j]
            assert has_row(out, [tok, terms, two(score), two(score / math.sqrt(e))]), (h, tok, terms)


def test_weights_rows_and_the_summing_line():
    ex, out = example(), ok("--stage", "weights")
    ref = loop_attention(ex, causal=False)
    i = ex["tokens"].index("like")
    for j, tok in enumerate(ex["tokens"]):
        w0, w1 = ref["weights"][0][i][j], ref["weights"][1][i][j]
        assert has_row(out, [tok, f"{two(w0)} {'█' * round(w0 * 20)}".rstrip(), f"{two(w1)} {'█' * round(w1 * 20)}".rstrip()]), tok
    assert has_row(out, ["sum of all 4", "1.00", "1.00"])
    # head 0's shown weights, 0.17 + 0.24 + 0.20 + 0.40, make 1.01: said under the table; head 1's make 1.00
    shown = [round(sum(float(two(ref["weights"][h][i][j])) for j in range(len(ex["tokens"]))), 2) for h in (0, 1)]
    assert shown == [1.01, 1.0]
    assert "As shown, rounded to two decimals, head 0's weights add up to 1.01; in full, each column adds up to 1." in " ".join(
        line.strip("│ ") for line in out.splitlines()
    ).replace("  ", " ")


def test_a_tables_note_runs_as_wide_as_the_terminal_not_the_table():
    """Under a narrow table (one head's weights; the softmax by hand), a note of a sentence or two
    is a line of the panel's width: as the table's caption it wrapped to the table's, four lines
    of a few words each."""
    out = ok("--stage", "weights", "--head", "0", width=120)
    lines = [line.strip("│ ") for line in out.splitlines()]
    assert "As shown, rounded to two decimals, head 0's weights add up to 1.01; in full, each column adds up to 1." in lines
    assert "e^s is worked out from each s as shown, and Σ e^s from the e^s as shown; each weight from the full numbers." in lines


def test_one_heads_weights_table_is_not_stretched_to_a_long_title():
    """One head's table (a key, a weight and its bar) was stretched to keep the several heads' title
    on one line: the key column 24 wide for "cats"."""
    out = ok("--stage", "weights", "--head", "0", width=100)
    header = next(line for line in out.splitlines() if "┃ key" in line)
    key, head = [cell for cell in header.split("┃")[1:3]]
    assert head.strip() == "head 0" and len(key) <= len("sum of all 4") + 4, header  # as wide as its widest cell, and padding
    assert "softmax over keys (sums to 1)" in out


def test_the_header_keeps_each_list_on_one_line_at_80_columns():
    lines = ok("--causal", "--stage", "weights", width=80).splitlines()
    assert lines[:3] == ["Multi-head attention · MHA · causal", "d_model=4, n_heads=2, n_kv_heads=2, d_head=2, d_v=2", "query like (position 1)"]
    # a Gemma 3 sliding layer's features: too many for the title's line, on one of their own
    from rich.console import Console

    from mha_explorer.walkthrough import render

    c = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, d_head=4, causal=True, sliding_window=512, qk_norm=True, rope_theta=1e4, scale=0.0625)
    console = Console(width=80, record=True, file=io.StringIO())
    render(trace(np.ones((3, 8)), AttentionWeights.random(c, seed=0), c), ["a", "b", "c"], 1, [0], "weights", console)
    assert console.export_text().splitlines()[:3] == [
        "Multi-head attention · MQA",
        "causal · sliding window 512 · q/k norm · RoPE θ=10000 · scale 0.0625",
        "d_model=8, n_heads=4, n_kv_heads=1, d_head=4, d_v=4",
    ]


def test_mixing_names_each_value_row_by_its_key():
    ex, out = example(), ok("--stage", "mixing", width=200)
    ref = loop_attention(ex, causal=False)
    i = ex["tokens"].index("like")
    for h in (0, 1):
        terms = " + ".join(
            f"{two(ref['weights'][h][i][j])}×v({tok})[{', '.join(two(x) for x in ref['v'][h][j])}]" for j, tok in enumerate(ex["tokens"])
        )
        assert f"head {h}: z_{h} = {terms}" in out, terms


def test_a_small_layers_weights_are_printed_so_every_product_can_be_checked():
    ex = example()
    out = ok("--stage", "projections")
    for h in (0, 1):
        assert f"head {h}'s W^Q, W^K, W^V: row m multiplies x[m]" in out
        for m in range(4):
            rows = [f"[{', '.join(two(v) for v in ex[name][h][m])}]" for name in ("W_Q", "W_K", "W_V")]
            assert has_row(out, [str(m), *rows]), (h, m)
    out = ok("--stage", "output")
    assert "W^O: head i's rows multiply its z_i" in out
    for r in range(4):
        assert has_row(out, [f"head {r // 2} · z[{r % 2}]", *(two(v) for v in ex["W_O"][r])]), r
    assert "a sum or product of the shown decimals may land a little off the shown result: 0.01 or so, more when many numbers are added" in " ".join(out.split())
    # the softmax by hand, which takes the scores as shown, is said where it is printed
    assert "full numbers, so a sum" in " ".join(out.split())
    assert "full numbers (only the softmax by hand takes e^s of the scores as shown), so a sum" in " ".join(ok("--stage", "weights").split())


def test_output_rows_are_the_reference_output():
    ex, out = example(), ok("--stage", "output")
    ref = loop_attention(ex, causal=False)
    i = ex["tokens"].index("like")
    assert has_row(out, ["output y", *(two(y) for y in ref["output"][i])])


# --- options ------------------------------------------------------------------


def test_query_option_changes_the_query():
    ex, out = example(), ok("--query", "cats", "--stage", "scores")
    ref = loop_attention(ex, causal=False)
    assert "query cats (position 0)" in out
    terms = " + ".join(f"{factor(a)}×{factor(b)}" for a, b in zip(ref["q"][1][0], ref["k"][1][3]))
    assert has_row(out, ["milk", terms, two(ref["scores"][1][0][3])])


def test_a_query_position_past_the_text_says_the_range():
    result = run("--query", "14")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == "Error: --query 14 is out of range: the text has 4 tokens, at positions 0 to 3; choose one of those, or a token: cats, like, warm, milk"
    before = run("--query", "-1")  # before the first: out of range too, not an unknown token
    assert before.exit_code == 2 and before.stderr.strip().startswith("Error: --query -1 is out of range: the text has 4 tokens, at positions 0 to 3")
    assert "query cats (position 0)" in ok("--query", "-0")  # -0 is 0, which is in range: it was called out of range


def test_an_empty_model_name_is_said_to_be_empty():
    result = run("--model", "")
    assert result.exit_code == 2 and result.stderr.startswith("Error: the model name is empty: choose one of minilm, smollm2, gemma3"), result.stderr


def test_head_option_shows_only_that_head():
    out = ok("--head", "1", "--stage", "scores")
    assert "head 1: q·k_j" in out
    assert "head 0" not in out
    out = ok("--head", "0", "--stage", "projections")
    assert "head 0" in out and "head 1" not in out


@pytest.mark.parametrize("stage", STAGE_IDS)
def test_stage_option_shows_only_that_stage(stage):
    out = ok("--stage", stage)
    assert titles(out) == [TITLES[STAGE_IDS.index(stage)]]
    assert ok("--stage", stage.upper()) == out  # in any case, as --query takes LIKE for like
    title = TITLES[STAGE_IDS.index(stage)]
    assert ok("--stage", title) == out  # its title too, as the walkthrough heads it ("Value mixing")
    assert ok("--stage", title.replace(" ", "_")) == ok("--stage", title.lower().replace(" ", "-")) == out  # value_mixing, output-projection


@pytest.mark.parametrize("array, stage", [("z", "mixing"), ("scaled", "scores"), ("q", "projections"), ("contributions", "output")])
def test_stage_option_takes_a_trace_array_for_the_stage_that_shows_it(array, stage):
    assert ok("--stage", array) == ok("--stage", stage)


def test_causal_adds_the_mask_stage_and_masks_later_keys():
    out = ok("--causal", "--query", "cats")
    assert titles(out) == TITLES_CAUSAL
    assert "causal" in out.splitlines()[0]
    for j, tok in enumerate(["cats", "like", "warm", "milk"]):
        visible = "yes" if j == 0 else "no (masked)"
        masked = "−∞" if j > 0 else None
        if masked:
            assert has_row(out, [tok, str(j), visible, "−∞", "−∞"]), tok
        else:
            assert has_row(out, [tok, str(j), visible]), tok
    # the first token can only attend to itself
    assert has_row(out, ["cats", "1.00 " + "█" * 20, "1.00 " + "█" * 20])
    assert has_row(out, ["milk", "masked", "masked"])  # not a weak key's 0.00
    # the softmax by hand, e^s of the s shown: e^-inf is 0, so the hidden keys add nothing to the sum
    ref = loop_attention(example(), causal=True)
    e = math.exp(float(two(ref["scores"][0][0][0] / math.sqrt(2))))
    assert has_row(out, ["cats", two(ref["scores"][0][0][0] / math.sqrt(2)), f"{e:.3f}", f"÷ {e:.3f}", "1.00"])
    assert has_row(out, ["milk", "−∞", "0.000", f"÷ {e:.3f}", "0.00"])


def test_causal_stage_mask():
    out = ok("--causal", "--stage", "mask")
    assert titles(out) == ["Mask"]


# --- --json -------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["non-causal", "causal"])
def test_json_validates_and_its_output_is_the_reference(causal):
    ex = example()
    out = ok("--json", *(["--causal"] if causal else []))
    payload = TracePayload.model_validate_json(out)
    assert payload.tokens == ex["tokens"]
    assert payload.query == ex["tokens"].index("like")
    assert payload.config.causal is causal
    assert ("mask" in payload.stages) is causal
    ref = loop_attention(ex, causal=causal)
    for name in ("q", "k", "v", "scores", "weights", "z", "output"):
        got = payload.stages[name]
        expected = np.array(ref[name])
        assert got.shape == list(expected.shape), name
        np.testing.assert_allclose(np.array(got.data).reshape(got.shape), expected, rtol=0, atol=1e-12, err_msg=name)


def test_json_follows_query_option():
    payload = TracePayload.model_validate_json(ok("--json", "--query", "milk"))
    assert payload.query == 3


# --- mistakes -----------------------------------------------------------------

MISTAKES = {
    "unknown-query": (["--query", "dogs"], "cats, like, warm, milk"),
    "empty-query": (["--query", ""], "cats, like, warm, milk"),
    "head-too-big": (["--head", "2"], "0 to 1"),
    "head-negative": (["--head", "-1"], "0 to 1"),
    "head-not-a-number": (["--head", "first"], "0 to 1"),
    "unknown-stage": (["--stage", "softmax"], ", ".join(STAGE_IDS)),
    "unknown-stage-said-as-typed": (["--stage", "W_O"], "unknown stage 'W_O'"),
    "mask-without-causal": (["--stage", "mask"], "--causal"),
    "json-with-bad-query": (["--json", "--query", "dogs"], "cats, like, warm, milk"),
    "superscript-digit-query": (["--query", "²"], "or a position from 0 to 3"),  # "²".isdigit(), but int("²") fails
    "arabic-indic-digit-query": (["--query", "٣"], "or a position from 0 to 3"),  # no token, and no ASCII position
}


@pytest.mark.parametrize(("args", "allowed"), MISTAKES.values(), ids=MISTAKES.keys())
def test_mistakes_exit_2_with_one_line_naming_what_is_allowed(args, allowed):
    result = run(*args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert allowed in lines[0], lines[0]
    assert isinstance(result.exception, SystemExit)


def test_a_terminal_narrower_than_the_tables_is_told_that_vectors_wrap_and_numbers_are_cut():
    """Below 60 columns a cell too narrow for its vector wraps it over lines ("[0.00," then
    "-1.25]"), and one too narrow for a number cuts it ("-1.…"): said once, on stderr."""
    narrow = run("--stage", "scores", width=40)
    assert narrow.exit_code == 0 and "…" in narrow.stdout  # what the note warns of
    assert any(line.rstrip(" │").endswith(",") for line in run("--stage", "projections", width=45).stdout.splitlines())  # a vector cut after a comma
    assert narrow.stderr.splitlines() == ["Note: the terminal is 40 columns wide, and the tables need 60: a vector may wrap over lines, and a number that does not fit is cut (…); widen it, or set COLUMNS=60"]
    assert ok("--stage", "scores", width=60)  # (no note: ok checks stderr is empty)


def test_superscript_digit_head_is_a_clean_mistake():
    result = run("--head", "²")
    assert result.exit_code == 2, (result.exit_code, repr(result.exception))
    assert len(result.stderr.splitlines()) == 1


def test_query_heads_sharing_a_kv_head_show_its_normed_and_rotated_k_once():
    """An MQA layer with a q/k norm and RoPE, as Gemma 3's: four query heads read one K/V head,
    whose k (normed, then rotated) is shown with the first query head alone."""
    from rich.console import Console

    from mha_explorer.config import AttentionConfig
    from mha_explorer.trace import trace
    from mha_explorer.walkthrough import fmt, render, vec
    from mha_explorer.weights import AttentionWeights

    config = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, d_head=4, qk_norm=True, rope_theta=10000.0, causal=True)
    x = np.random.default_rng(0).normal(size=(3, 8))
    w = AttentionWeights.random(config, seed=1)
    t = trace(x, w, config)
    # the rotation turns the normed q and k: its columns say so
    for stage, columns, k_columns in (("qk_norm", ["q", "rms(q)", "q normed"], ["k", "rms(k)", "k normed"]), ("rope", ["position", "q normed", "q rotated"], ["k normed", "k rotated"])):
        console = Console(width=200, record=True, highlight=False)
        render(t, ["a", "b", "c"], 2, [0, 1, 2, 3], stage, console, w)
        out = console.export_text()
        tables = [[c.strip() for c in line.split("┃")[1:-1]] for line in out.splitlines() if "┃" in line]
        assert tables.count(["token", *columns, *k_columns]) == 1, tables
        assert tables.count(["token", *columns]) == 3, tables
        assert all(f"head {h}: " in out and "k as head 0's above" in out for h in (1, 2, 3))
        if stage == "qk_norm":  # q normed = q ÷ rms(q) × w^q, every factor shown
            q = t["q"][0, 2]
            rms = re.search(r"│ c +│ \[[^]]*\] +│ (\S+) +│", out)[1]  # head 0's row of the query: q, then rms(q)
            assert rms == fmt(float(np.sqrt(np.mean(q.astype(float) ** 2) + config.qk_norm_eps)), 3)
            # and every key's rms(k), so that k normed can be checked as q normed is
            for j, name in enumerate("abc"):
                k_rms = fmt(float(np.sqrt(np.mean(t["k"][0, j].astype(float) ** 2) + config.qk_norm_eps)), 3)
                assert re.search(rf"│ {name} +│.*│ \[[^]]*\] +│ {re.escape(k_rms)} +│ \[[^]]*\] +│", out), (name, k_rms)
            lines = [line.strip("│ ") for line in out.splitlines()]  # the multipliers a line each: no vector broken
            at = lines.index("learned multipliers, shared by every head:")
            assert lines[at + 1 : at + 4] == [f"w^q = {vec(w.q_norm)}", f"w^k = {vec(w.k_norm)}", "ε = 0.000001"]


@pytest.mark.parametrize("width", [60, 80])
def test_a_narrow_terminal_cuts_no_number_of_the_norm_and_rotary_stages(width):
    """A Gemma-sized head (d_head 256, q/k norm, RoPE) at 60 columns: q's and k's columns come as
    two tables, and the pairs turned by hand as two lines each, rather than numbers cut with "…"."""
    from rich.console import Console

    from mha_explorer.config import AttentionConfig
    from mha_explorer.trace import trace
    from mha_explorer.walkthrough import fmt, render
    from mha_explorer.weights import AttentionWeights

    config = AttentionConfig(d_model=640, n_heads=4, n_kv_heads=1, d_head=256, qk_norm=True, rope_theta=1e6, causal=True)
    w = AttentionWeights.random(config, seed=2)
    tokens = ["<bos>", "The", "␣cat", "␣sat", "␣on", "␣the", "␣mat", "␣because", "␣it", "␣was", "␣warm", "."]
    t = trace(np.random.default_rng(3).normal(size=(len(tokens), 640)), w, config)
    query = 6
    for stage in ("qk_norm", "rope"):
        console = Console(width=width, record=True, highlight=False)
        render(t, tokens, query, [0], stage, console, w)
        out = console.export_text()
        assert max(map(cell_len, out.splitlines())) <= width
        assert broken_vectors(out) == [], broken_vectors(out)
        cut = [line for line in out.splitlines() if re.search(r"\S…", line)]  # "0.2…", "posit…", "␣beca…"
        assert cut == [], cut
        # the header rows: above the rule under them, one or two lines (as rich draws them at 80
        # columns; at 60, with no vertical rules, each line's cells as they stand)
        lines = out.splitlines()
        headers = [[c.strip() for c in line.split("┃")[1:-1]] for line in lines if "┃" in line]
        headers += [unruled(line)[0] for i, line in enumerate(lines) for under in lines[i + 1 : i + 3] if "━" not in line and re.fullmatch(r"│ ─+ *│", under)]
        q, k = ("q rotated", "k rotated") if stage == "rope" else ("q normed", "k normed")
        # q and k in one table where they fit (the rotation's at 80 columns; the norm's, with the rms
        # of each, not), else in two, each with every token it had
        assert any(q in row and k in row for row in headers) == (width == 80 and stage == "rope"), headers
        assert any(q in row for row in headers) and any(k in row for row in headers), headers
        assert all(f"│ {name} " in out for name in ("<bos>", "␣because", "."))
    # the pairs turned by hand: each number whole, a pair's two numbers on two lines where they do not fit on one
    a, b = float(t["q_normed"][0, query, 0]), float(t["q_normed"][0, query, 128])
    angle = query * 1e6 ** 0
    by_hand = fmt(a * np.cos(angle) - b * np.sin(angle)), fmt(a * np.sin(angle) + b * np.cos(angle))
    if width == 60:  # no vertical rules: the pair's second line starts with no pair of its own
        lines = out.splitlines()
        at = next(i for i, line in enumerate(lines) if "(0, 128)" in line)
        first, second = unruled("\n".join(lines[at : at + 2]))
        assert first[0] == "(0, 128)" and not second[0].startswith("(")
        assert (first[-1], second[-1]) == by_hand
    else:
        rows = [[c.strip() for c in line.split("│")[2:-2]] for line in out.splitlines() if line.count("│") > 4]
        pair = next(i for i, row in enumerate(rows) if row and row[0].startswith("(0, "))
        assert rows[pair][4] == ", ".join(by_hand)


def test_a_causal_layers_scores_say_which_keys_the_mask_hides_next():
    out = ok("--causal", "--stage", "scores", "--head", "0")  # query "like", at position 1
    rows = [row for row in cells(out) if len(row) == 4 and row[0].split()[0] in ("cats", "like", "warm", "milk")]
    assert [row[0] for row in rows] == ["cats", "like", "warm (masked next)", "milk (masked next)"]
    assert all(re.fullmatch(r"-?\d+\.\d\d", row[3]) for row in rows)  # the scaled scores, numbers alone


def test_a_long_causal_texts_mixing_counts_the_keys_the_query_sees():
    from rich.console import Console

    from mha_explorer.config import AttentionConfig
    from mha_explorer.trace import trace
    from mha_explorer.walkthrough import render
    from mha_explorer.weights import AttentionWeights

    config = AttentionConfig(d_model=8, n_heads=2, causal=True)
    t = trace(np.random.default_rng(3).normal(size=(30, 8)), AttentionWeights.random(config, seed=3), config)
    console = Console(width=200, record=True, highlight=False)
    render(t, [f"w{j}" for j in range(30)], 4, [0], "mixing", console)
    assert "(5 visible keys of 30; the 3 largest weights shown)" in " ".join(console.export_text().split())


def test_a_softmax_of_large_scores_writes_every_exponential_one_way():
    """Scores up to about 12: e^s past 100,000. Every e^s and their sum then has three significant
    digits and its exponent (as on the page), not some with three decimals and some with e."""
    from rich.console import Console

    from mha_explorer.config import AttentionConfig
    from mha_explorer.trace import trace
    from mha_explorer.walkthrough import fmt, render
    from mha_explorer.weights import AttentionWeights

    config = AttentionConfig(d_model=2, n_heads=1, d_head=2)
    x = np.array([[2.0, 2.0], [1.0, 0.5], [0.0, 0.1]])
    t = trace(x, AttentionWeights(W_Q=np.eye(2)[None] * 3, W_K=np.eye(2)[None], W_V=np.eye(2)[None], W_O=np.eye(2)), config)
    console = Console(width=200, record=True, highlight=False)
    render(t, ["a", "b", "c"], 0, [0], "weights", console)
    rows = [r for r in cells(console.export_text()) if len(r) == 5 and r[0] in ("a", "b", "c")]
    e = [math.exp(float(fmt(s))) for s in t["scaled"][0, 0]]
    assert sum(e) >= 1e5
    total = sum(float(f"{v:.2e}") for v in e)  # each as written: three significant digits
    assert [(r[2], r[3]) for r in rows] == [(times_ten(v), f"÷ {times_ten(total)}") for v in e], rows
    assert rows[0][2] == "2.34×10⁷", rows  # e^16.97, written out


@pytest.mark.parametrize("encoding, power", [("utf-8", "×10⁻¹⁰"), ("cp1252", "×10^-10"), ("ascii", "x10^-10")])  # cp1252 has ×
def test_a_power_of_ten_is_written_whole_in_any_terminal(encoding, power):
    """cp1252 has ¹²³ but not ⁰ or ⁻: a power of ten spelled sign by sign read 10^-¹^0. A terminal
    without every superscript gets 10^-10."""
    from rich.console import Console

    import mha_explorer.cli  # noqa: F401  (registers the spelling of signs the terminal lacks)
    from mha_explorer.config import AttentionConfig
    from mha_explorer.trace import trace
    from mha_explorer.walkthrough import render
    from mha_explorer.weights import AttentionWeights

    config = AttentionConfig(d_model=2, n_heads=1, d_head=2, causal=True)
    x = np.array([[2.0, 2.0], [1.0, 0.5], [0.0, 0.1]])
    t = trace(x, AttentionWeights(W_Q=np.eye(2)[None] * -4, W_K=np.eye(2)[None], W_V=np.eye(2)[None], W_O=np.eye(2)), config)
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="mha-explorer-ascii")
    render(t, ["a", "b", "c"], 0, [0], "weights", Console(file=stream, width=200, highlight=False, color_system=None))
    stream.flush()
    text = raw.getvalue().decode(encoding)
    assert re.search(rf"\| 1\.49{re.escape(power)} +\|", text.replace("│", "|")), text  # e^-22.63, in its cell


@pytest.mark.parametrize("query", ["cats", "like", "warm", "milk"])
def test_the_softmax_by_hand_names_the_rows_that_do_not_land_on_the_weight(query):
    """e^s of each shown s, over their sum as shown, rounded by hand (half up): where that is not the
    weight shown, the table says so under it, as the page does; where every row lands, nothing."""

    ref = loop_attention(example(), causal=False)
    i = ["cats", "like", "warm", "milk"].index(query)
    out = " ".join(ok("--query", query, "--stage", "weights").replace("│", " ").split())  # the note's lines, read across the panel's edges
    for h in (0, 1):
        s = [two(x / math.sqrt(2)) for x in ref["scores"][h][i]]
        e = [f"{math.exp(float(x)):.3f}" for x in s]
        total = Decimal(f"{sum(float(x) for x in e):.3f}")
        weights = [two(w) for w in ref["weights"][h][i]]
        by_hand = [str((Decimal(x) / total).quantize(Decimal("0.01"), ROUND_HALF_UP)) for x in e]
        off = [f"the weight of “{tok}” comes to {b} (shown: {w})" for tok, b, w in zip(["cats", "like", "warm", "milk"], by_hand, weights) if b != w]
        said = f"Worked from e^s ÷ Σ e^s as shown instead, {'; '.join(off)}."
        table = out.split(f"head {h}: the softmax by hand")[1].split("head 1: the softmax by hand")[0]
        # which columns come from the numbers as shown is said under every table (the footer's "full numbers" is not all)
        assert "e^s is worked out from each s as shown, and Σ e^s from the e^s as shown; each weight from the full numbers." in table
        assert (said in table) == bool(off), (h, off, table)
        if not off:
            assert "Worked from" not in table


def hand(total: Decimal) -> str:
    """A result worked out by hand from two-decimal numbers: exactly, then rounded half away from zero."""
    s = str(total.quantize(Decimal("0.01"), ROUND_HALF_UP))
    return "0.00" if s == "-0.00" else s


@pytest.mark.parametrize("query", ["cats", "like", "warm", "milk"])
def test_scores_mixing_and_output_name_the_results_the_shown_numbers_do_not_give(query):
    """A student works each result from the numbers printed: q·k from q and k, the scaled score as the
    q·k shown ÷ √2, z from the weights and value rows shown, each head's part of y from z and W^O, and
    y as the sum of the heads' rows (concat, printed above W^O, gives each head's z). Where that lands
    off the number printed, the stage says so, as the page does; where every one lands, it says nothing."""
    ex = example()
    ref = loop_attention(ex, causal=False)
    i, names = ["cats", "like", "warm", "milk"].index(query), ["cats", "like", "warm", "milk"]
    d, f = ex["config"]["d_model"], ex["config"]["d_v"]
    D = lambda v: Decimal(two(v))  # noqa: E731 - a number as printed
    expected = {"scores": [], "mixing": [], "output": []}
    for h in (0, 1):
        off = []
        for j in range(4):
            qk = hand(sum(D(a) * D(b) for a, b in zip(ref["q"][h][i], ref["k"][h][j])))
            if qk != two(ref["scores"][h][i][j]):
                off.append(f"q·k of “{names[j]}” comes to {qk} (shown: {two(ref['scores'][h][i][j])})")
            scaled = hand(D(ref["scores"][h][i][j]) / Decimal(2).sqrt())
            if scaled != two(ref["scores"][h][i][j] / math.sqrt(2)):
                off.append(f"the scaled score of “{names[j]}” comes to {scaled} (shown: {two(ref['scores'][h][i][j] / math.sqrt(2))})")
        expected["scores"].append(off)
        z = [hand(sum(D(ref["weights"][h][i][j]) * D(ref["v"][h][j][e]) for j in range(4))) for e in range(f)]
        expected["mixing"].append([f"z_{h}[{e}] comes to {z[e]} (shown: {two(ref['z'][h][i][e])})" for e in range(f) if z[e] != two(ref["z"][h][i][e])])
    parts = [[sum(ref["z"][h][i][e] * ex["W_O"][h * f + e][m] for e in range(f)) for m in range(d)] for h in (0, 1)]
    for h in (0, 1):
        for m in range(d):
            by_hand = hand(sum(D(ref["z"][h][i][e]) * D(ex["W_O"][h * f + e][m]) for e in range(f)))
            if by_hand != two(parts[h][m]):
                expected["output"].append(f"head {h}'s part of y[{m}] comes to {by_hand} (shown: {two(parts[h][m])})")
    for m in range(d):
        y = hand(sum(D(parts[h][m]) for h in (0, 1)))
        if y != two(ref["output"][i][m]):
            expected["output"].append(f"y[{m}] comes to {y} (shown: {two(ref['output'][i][m])})")
    assert any(expected["output"]) or query != "like"  # the example's own query has three: y[1], y[2], y[3]
    for stage in ("scores", "mixing", "output"):
        out = " ".join(ok("--query", query, "--stage", stage).replace("│", " ").split())
        notes = re.findall(r"Each result is worked out from the full numbers; from the rounded numbers shown, (.*?)\.(?= |$)", out)
        per_table = [expected[stage]] if stage == "output" else expected[stage]  # one note under each head's table; output's under y
        wanted = ["; ".join(misses) for misses in per_table if misses]
        assert notes == wanted, (stage, notes, wanted)


def test_the_weights_sum_row_is_no_tokens_name():
    """A text holding the word "sum": its row and the total's were both "sum" (0.01 above 1.00)."""
    from rich.console import Console

    from mha_explorer.walkthrough import render

    config = AttentionConfig(d_model=4, n_heads=1)
    t = trace(np.random.default_rng(0).normal(size=(3, 4)), AttentionWeights.random(config, seed=0), config)
    console = Console(width=200, record=True, highlight=False)
    render(t, ["the", "sum", "is"], 0, [0], "weights", console)
    labels = [row[0] for row in cells(console.export_text()) if row]
    assert labels.count("sum") == 2 and "sum of all 3" in labels  # the token, in both tables; the total, once


def test_a_real_models_output_checks_y_only_where_the_page_does():
    """y summed by hand from a dozen rounded rows lands 0.01 to 0.03 off at every turn in a real
    layer: as the page, the terminal checks it only up to a d_model of 16, each head's part always."""
    from rich.console import Console

    from mha_explorer.walkthrough import render

    for d_model, checked in ((16, True), (32, False)):
        config = AttentionConfig(d_model=d_model, n_heads=16, d_head=2, d_v=1)
        t = trace(np.random.default_rng(1).normal(size=(5, d_model)) * 3, AttentionWeights.random(config, seed=1), config)
        console = Console(width=200, record=True, highlight=False)
        render(t, [f"w{j}" for j in range(5)], 2, list(range(16)), "output", console)
        out = " ".join(console.export_text().split())
        assert ("y[0] comes to" in out or "y[1] comes to" in out or "y[2] comes to" in out) == checked, out[-600:]


def test_a_softmax_whose_only_visible_key_scores_very_low_is_still_worked_out():
    """Query 0 of a causal layer sees key 0 alone, at s = -22.63: e^s is 1.5e-10, which three decimals
    would write 0.000 (and its sum 0, a division by zero). Every e^s then has its exponent."""
    from rich.console import Console

    from mha_explorer.config import AttentionConfig
    from mha_explorer.trace import trace
    from mha_explorer.walkthrough import fmt, render
    from mha_explorer.weights import AttentionWeights

    config = AttentionConfig(d_model=2, n_heads=1, d_head=2, causal=True)
    x = np.array([[2.0, 2.0], [1.0, 0.5], [0.0, 0.1]])
    t = trace(x, AttentionWeights(W_Q=np.eye(2)[None] * -4, W_K=np.eye(2)[None], W_V=np.eye(2)[None], W_O=np.eye(2)), config)
    console = Console(width=200, record=True, highlight=False)
    render(t, ["a", "b", "c"], 0, [0], "weights", console)
    rows = [r for r in cells(console.export_text()) if len(r) == 5 and r[0] in ("a", "b", "c")]
    e = math.exp(float(fmt(t["scaled"][0, 0, 0])))
    written = times_ten(e)  # 1.46×10⁻¹⁰
    assert written.endswith("×10⁻¹⁰"), written
    assert rows == [["a", fmt(t["scaled"][0, 0, 0]), written, f"÷ {written}", "1.00"], ["b", "−∞", "0", f"÷ {written}", "0.00"], ["c", "−∞", "0", f"÷ {written}", "0.00"]], rows


def test_a_long_texts_weights_list_the_top_keys_of_one_head_and_three_of_each_of_many():
    """One head shown: its 8 largest weights, as its other tables list keys. Several side by side:
    3 of each, whose rows add up."""
    from rich.console import Console

    from mha_explorer.config import AttentionConfig
    from mha_explorer.trace import trace
    from mha_explorer.walkthrough import render
    from mha_explorer.weights import AttentionWeights

    config = AttentionConfig(d_model=8, n_heads=2)
    n = 40
    t = trace(np.random.default_rng(5).normal(size=(n, 8)), AttentionWeights.random(config, seed=5), config)
    tokens = [f"w{j}" for j in range(n)]
    for heads, title, each in (([1], "the 8 largest weights", 8), ([0, 1], "each head's 3 largest weights", 3)):
        console = Console(width=200, record=True, highlight=False)
        render(t, tokens, 7, heads, "weights", console)  # query w7
        text = console.export_text()
        assert title in " ".join(text.split())
        listed = set(re.findall(r"│ (w\d+ @\d+) +│", text))  # past 24 tokens, each key with its position
        top = set().union(*({f"w{j} @{j}" for j in np.argsort(-t["weights"][h, 7])[:each]} for h in heads))
        assert listed == top, (listed, top)


def test_an_early_causal_query_lists_the_keys_it_sees_and_says_the_rest_are_masked():
    from rich.console import Console

    from mha_explorer.config import AttentionConfig
    from mha_explorer.trace import trace
    from mha_explorer.walkthrough import render
    from mha_explorer.weights import AttentionWeights

    config = AttentionConfig(d_model=8, n_heads=2, causal=True)
    t = trace(np.random.default_rng(5).normal(size=(40, 8)), AttentionWeights.random(config, seed=5), config)
    console = Console(width=120, record=True, highlight=False)
    render(t, [f"w{j}" for j in range(40)], 2, [0], "weights", console)  # query w2 sees w0, w1, w2
    out = console.export_text()
    text = " ".join(out.split())
    assert "the 3 largest weights" in text and "… 37 other keys, 37 of them masked" in text
    assert set(re.findall(r"│ (w\d+ @\d+) +│", out)) == {"w0 @0", "w1 @1", "w2 @2"}
