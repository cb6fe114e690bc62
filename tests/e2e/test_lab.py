"""The attention lab in headless Chromium: editing, causal mask, GQA/MQA, costs, links, static export."""

from __future__ import annotations

import itertools
import json
import re
from urllib.parse import unquote

import httpx
import numpy as np
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from mha_explorer.export import export_site
from mha_explorer.schema import BINARY_MEDIA_TYPE, TracePayload, payload_arrays, to_numpy
from mha_explorer.walkthrough import fmt

from .pagecheck import BARE_SIGN, check_numbers, file_page, open_link, routed, through_history, times_ten

pytestmark = pytest.mark.e2e



def arrays_of(payload: TracePayload) -> dict[str, np.ndarray]:
    arrays = payload_arrays(payload)
    arrays |= {name: to_numpy(a) for name, a in payload.weights.items()}
    return arrays



def link(page) -> str:
    """The page's URL once it holds the latest change (the page writes it when idle)."""
    page.wait_for_function("() => !window.mhaExplorer.linkPending")
    return page.url


def lab_state(page) -> dict:
    """The request the page's link stands for, rebuilt from the URL (seed only, no edits)."""
    params = dict(re.findall(r"([a-z_]+)=([^&]*)", link(page).split("#", 1)[1]))
    config = {k: int(params[k]) for k in ("d_model", "n_heads", "n_kv_heads", "d_head", "d_v")}
    config |= {"causal": params["causal"] == "1", "bias": params["bias"] == "1"}
    return {"config": config, "tokens": params["tokens"].replace("+", " ").replace("%20", " ").split(), "seed": int(params["seed"])}


def open_lab(page, server_url):
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Attention lab").click()
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('GQA')")
    settle(page)


NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 10)))"


def settle(page):
    """Wait until the lab has no computation under way, and the link is written (after a frame)."""
    page.wait_for_function("() => !document.getElementById('lab').dataset.busy")
    page.evaluate(NEXT_FRAME)


def edit(page, matrix, key, value):
    """Type value into the cell key of the matrix chosen, and wait for the lab to take it."""
    page.get_by_label("Edit the values of").select_option(matrix)
    cell = page.locator(f'.edit-grid input[data-key="{key}"]')
    cell.fill(value)
    cell.blur()
    settle(page)


def set_field(page, label, value):
    field = page.get_by_label(label, exact=True)
    field.fill(str(value))
    field.blur()  # the browser fires change, as when a person tabs away
    settle(page)


def wait_kind(page, text):
    page.wait_for_function("(t) => document.querySelector('.outputs .hint')?.textContent.includes(t)", arg=text)


def test_lab_numbers_equal_the_api_for_causal_gqa_and_mqa(page, server_url):
    open_lab(page, server_url)
    for n_kv, kind in ((1, "MQA"), (2, "GQA"), (4, "MHA")):  # each one a change from the last
        with page.expect_response(lambda r: r.url.endswith("api/trace")) as answer:
            set_field(page, "n_kv_heads", n_kv)
        # the page reads the raw arrays of a binary answer; below, its numbers meet the JSON answer's
        assert answer.value.headers["content-type"] == BINARY_MEDIA_TYPE
        wait_kind(page, kind)
        body = lab_state(page)
        assert body["config"]["causal"]
        assert page.locator(".outputs .hint").inner_text().endswith(" · causal")  # the line that says what the layer is
        payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=body).json())
        arrays = arrays_of(payload)
        stages = page.get_by_label("Calculation stage").locator("option").all_inner_texts()
        assert stages == ["Projections", "Scores", "Mask", "Weights", "Value mixing", "Concatenation", "Output projection"]
        for head in (0, 3):
            page.get_by_label("Inspect head").select_option(label=f"Head {head}")
            for title in stages:
                page.get_by_label("Calculation stage").select_option(label=title)
                check_numbers(page, ".stage", arrays)
            check_numbers(page, ".outputs", arrays)


def test_a_token_that_occurs_twice_is_told_apart_by_its_position(page, server_url):
    open_lab(page, server_url)  # the preset's tokens: the cat sat on the mat
    options = page.get_by_label("Query token").locator("option").all_inner_texts()
    assert options == ["the @0", "cat", "sat", "on", "the @4", "mat"]
    page.get_by_label("Query token").select_option(label="the @4")
    assert page.locator(".stage h2").inner_text().endswith("· query “the @4”")
    assert page.locator(".outputs h2").first.inner_text() == "Head outputs for “the @4”"


def test_a_long_token_is_cut_with_an_ellipsis_inside_its_menu(page, server_url, artifacts):
    open_lab(page, server_url)
    set_field(page, "Tokens (separated by spaces)", "cats extraordinarilylongtokenthatgoesonandon warm milk")
    menu = page.get_by_label("Query token")
    menu.select_option(label="extraordinarilylongtokenthatgoesonandon")
    expect(page.locator(".stage h2")).to_contain_text("extraordinarilylongtokenthatgoesonandon")
    shown = menu.evaluate("""(m) => {
        const box = m.getBoundingClientRect(), label = m.querySelector("selectedcontent") || m;
        return { inside: m.scrollWidth <= m.clientWidth, cut: label.scrollWidth > label.clientWidth,
                 ellipsis: getComputedStyle(label).textOverflow, width: box.width };
    }""")
    # the name stays inside the menu's box (whose arrow stays in sight), cut with "…" as a system menu does
    assert shown["inside"] and shown["cut"] and shown["ellipsis"] == "ellipsis", shown
    menu.screenshot(path=str(artifacts / "lab-long-token-menu.png"))


def test_new_tokens_of_the_same_count_are_the_ones_named(page, server_url):
    """Other words, as many as before: the values drawn are the same (they depend on the count),
    but every menu, title and table names the new words."""
    open_lab(page, server_url)  # the cat sat on the mat
    before = page.locator(".layout").inner_text()
    set_field(page, "Tokens (separated by spaces)", "the dog sat on the rug")
    expect(page.get_by_label("Query token").locator("option")).to_have_text(["the @0", "dog", "sat", "on", "the @4", "rug"])
    expect(page.locator(".stage h2")).to_contain_text("query “dog”")
    words = lambda text: set(re.findall(r"\w+", text))  # noqa: E731
    assert {"cat", "mat"} <= words(before) and not {"cat", "mat"} & words(page.locator(".layout").inner_text())


def test_causal_mask_stage_shows_masked_cells_with_zero_weight(page, server_url, artifacts):
    open_lab(page, server_url)
    page.get_by_label("Query token").select_option(index=1)
    # the scores say which keys the mask hides next
    page.get_by_label("Calculation stage").select_option(label="Scores")
    marked = page.locator(".stage table.calc-table tbody tr").evaluate_all("(rows) => rows.map((r) => r.classList.contains('masked') && r.textContent.includes('masked next'))")
    assert marked == [False, False, True, True, True, True]
    page.get_by_label("Calculation stage").select_option(label="Mask")
    rows = page.locator(".stage tbody tr")
    assert rows.count() == 6
    for j in range(6):
        masked = "masked" in (rows.nth(j).get_attribute("class") or "")
        assert masked == (j > 1)
        if masked:
            assert rows.nth(j).locator(".num").last.inner_text() == "−∞"
    page.get_by_label("Calculation stage").select_option(label="Weights")
    full = page.evaluate("() => Array.from(document.querySelectorAll('.stage .bar-row .num')).map(e => e.dataset.full)")
    assert full[2:] == ["0"] * 4 and all(float(v) > 0 for v in full[:2])
    page.screenshot(path=str(artifacts / "lab-causal-weights.png"), full_page=True)
    page.get_by_label("Causal mask").uncheck()
    page.wait_for_function("() => !Array.from(document.querySelectorAll('select option')).some(o => o.textContent === 'Mask')")
    # the mask turned off with its stage on screen: the page keeps a section for each stage it has, no more
    page.get_by_role("checkbox", name="Causal mask").check()
    page.get_by_label("Calculation stage").select_option(label="Mask")
    expect(page.locator(".stage h2")).to_contain_text("Mask")
    page.get_by_role("checkbox", name="Causal mask").uncheck()
    page.wait_for_function("() => !Array.from(document.querySelectorAll('select option')).some(o => o.textContent === 'Mask')")
    expect(page.locator(".stage h2")).not_to_contain_text("Mask")
    sections = page.evaluate("() => [document.querySelectorAll('.mha-explorer .layout > section').length, document.querySelectorAll('.mha-explorer .steps li').length]")
    assert sections[0] == sections[1], sections


def test_gqa_sharing_and_costs_are_shown(page, server_url):
    open_lab(page, server_url)
    assert page.get_by_role("button", name="Reset example").is_hidden()  # it would leave the lab
    # every query head says which K/V head it reads and with whom (head 0 too)
    assert "Its keys and values come from K/V head 0, shared with head 1." in page.locator(".stage").inner_text()
    c = lab_state(page)["config"]  # the line under the head outputs says what makes it GQA
    assert page.locator(".outputs .hint").inner_text() == f"GQA · d_model {c['d_model']} · {c['n_heads']} heads, {c['n_kv_heads']} K/V heads · d_head {c['d_head']} · causal"
    page.locator("summary", has_text="Cost of this configuration").click()
    figure = page.locator("svg.sharing")
    assert figure.get_attribute("aria-label").startswith("4 query heads reading 2 key/value heads")
    assert "head 3 reads K/V 1" in figure.get_attribute("aria-label")
    # drawn at its own size (4 heads: 220 by 96), not blown up to the figure's width
    box = figure.bounding_box()
    assert box["height"] <= 100 and box["width"] <= 230, box
    payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=lab_state(page)).json())
    costs = payload.costs
    for kind, kv in (("GQA", costs.kv_cache), ("MHA", costs.kv_cache_mha), ("MQA", costs.kv_cache_mqa)):
        cells = page.locator(f'.cost tr[data-kind="{kind}"] td').all_inner_texts()
        assert cells[:2] == [str(kv.n_kv_heads), str(kv.numbers_per_token)]
    assert costs.kv_cache_mha.numbers == 2 * costs.kv_cache.numbers == 4 * costs.kv_cache_mqa.numbers
    assert f"{costs.attention_entries:,}" in page.locator(".costs .entries").inner_text()
    # the arithmetic says what it counts, and that a causal layer's masked entries are counted too
    rows = {r.split("\t")[0]: r.split("\t")[1:] for r in page.locator("table.cost:has(caption:text('Arithmetic')) tbody tr").all_inner_texts()}
    assert rows["scaled"] == [f"{costs.multiply_adds['scaled']:,}", "divisions by √d_head, one per score (computed as multiplies by 1/√d_head)"]
    assert rows["q"] == [f"{costs.multiply_adds['q']:,}", "multiply-adds"]
    # the total adds operations of different kinds: it says so, after the multiply-adds alone (what
    # a FLOP count is made of: a class read the total as one)
    macs = sum(v for name, v in costs.multiply_adds.items() if name in ("q", "k", "v", "scores", "z", "output"))
    assert rows["multiply-adds"] == [f"{macs:,}", f"the multiply-add rows added (q, k, v, scores, z, output): about {2 * macs:,} floating-point operations"]
    assert rows["total"] == [f"{sum(costs.multiply_adds.values()):,}", "every stage's row added, each in its own unit: a softmax entry, its exponential and its division, counts as one"]
    assert "masked ones too" in page.locator(".costs .hint", has_text="Every entry is counted").inner_text()


def test_many_heads_sharing_is_said_in_words(page, server_url):
    """Past 12 query heads the diagram's circles would be too small to read: a sentence says which
    query heads read which K/V head."""
    open_lab(page, server_url)
    set_field(page, "n_heads", 64)
    set_field(page, "n_kv_heads", 8)
    kind = "(k) => [...document.querySelectorAll('.outputs p.hint')].some((e) => e.textContent.startsWith(k))"
    page.wait_for_function(kind, arg="GQA · d_model 8 · 64 heads, 8 K/V heads")
    page.locator("summary", has_text="Cost of this configuration").click()
    assert page.locator("svg.sharing").count() == 0
    assert page.locator(".sharing-text").inner_text() == (
        "Each of the 8 key/value heads is read by 8 query heads in a row (GQA): heads 0–7 read K/V 0, heads 8–15 read K/V 1, "
        "heads 16–23 read K/V 2, heads 24–31 read K/V 3, heads 32–39 read K/V 4, heads 40–47 read K/V 5, heads 48–55 read K/V 6, "
        "heads 56–63 read K/V 7."
    )
    set_field(page, "n_kv_heads", 1)
    page.wait_for_function(kind, arg="MQA")
    assert page.locator("details.costs").get_attribute("open") is not None  # the panel opened stays open for the new numbers
    assert page.locator(".sharing-text").inner_text() == "All 64 query heads read the one key/value head (MQA)."


def test_a_layer_with_biases_shows_them_where_they_are_added(page, server_url, artifacts):
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=1&tokens=the+cat+sat+on+the+mat&seed=0&stage=projections&head=2&query=2")
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('GQA')")
    settle(page)
    payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=lab_state(page)).json())
    arrays = arrays_of(payload)
    assert page.locator(".stage .formula").inner_html().count("<mo>+</mo><msubsup><mi>b</mi>") == 3  # + b^Q, + b^K, + b^V
    shown = check_numbers(page, ".stage", arrays)
    # head 2 reads K/V head 1: its own b^Q, and K/V head 1's b^K and b^V, each beside its W
    assert {"b_Q:2,0", "b_Q:2,1", "b_K:1,0", "b_V:1,1"} <= shown
    # each bias's one row has a name a screen reader reads (an empty row header read as nothing)
    named = page.locator(".stage table.matrix:has([data-src^='b_']) tbody th").evaluate_all("(ths) => ths.map((th) => th.textContent)")
    assert len(named) >= 3 and set(named) == {"bias"}, named
    # the hover sum adds the bias as a number, so that it checks by hand
    page.locator(".stage .equation [data-src='q:2,2,0']").first.hover()
    calc = page.locator(".stage .calc").inner_text()
    assert not re.search(BARE_SIGN, calc), calc  # "0.50×(-1.25)": a negative factor in brackets
    terms = re.findall(r"\(?(-?\d+\.\d+)\)?×\(?(-?\d+\.\d+)\)?", calc)
    bias = float(re.search(r"\+ \(?(-?\d+\.\d+)\)? \(bias\)", calc).group(1))
    assert bias == round(float(arrays["b_Q"][2, 0]), 2)
    by_hand = sum(float(a) * float(b) for a, b in terms) + bias
    assert abs(by_hand - arrays["q"][2, 2, 0]) < 0.05, calc  # two-decimal factors
    page.locator(".stage").screenshot(path=str(artifacts / "lab-bias-projections.png"))
    # the packed view adds the packed biases too, so its product is q
    page.locator("summary", has_text="Packed view").click()
    shown = check_numbers(page, ".packed", arrays)
    assert {"b_Q:0,0", "b_Q:3,1", "q:3,2,1", "x:2,7"} <= shown
    # the matrices list every bias, b^O included
    page.get_by_text("Matrices", exact=True).click()
    page.locator(".matrices-body").wait_for(state="visible")  # built when first opened
    shown = check_numbers(page, ".matrices", arrays)
    assert {"b_Q:3,1", "b_K:0,0", "b_V:1,0", "b_O:7"} <= shown
    # GQA: each K/V head's W^K and W^V once, beside the W^Q of the query heads that read it
    titles = page.locator(".matrices .head-matrices h3").all_inner_texts()
    assert titles == ["WQ of query heads 0, 1 · WK and WV of K/V head 0, which they share", "WQ of query heads 2, 3 · WK and WV of K/V head 1, which they share"]
    assert page.locator(".matrices [data-src='W_K:1,0,0']").count() == 1
    # the output stage's formula adds b^O once
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    assert page.locator(".stage .formula").inner_html().count("<mi>b</mi><mi>O</mi>") == 2  # concat W^O + b^O = sum + b^O


# each output component's row of the chart: its segments (signed, in the chart's units) and the
# total's tick, both measured from the axis
CHART_ROWS = """() => {
    const chart = document.querySelector(".stage svg.chart");
    const zero = Number(chart.querySelector("line.axis").getAttribute("x1"));
    const ticks = [...chart.querySelectorAll("line.total-tick")].slice(0, -1);  // the last is the legend's
    return ticks.map((tick) => {
        const [top, bottom] = [Number(tick.getAttribute("y1")), Number(tick.getAttribute("y2"))];
        const segments = [...chart.querySelectorAll("rect.seg-rect")].filter((r) => { const y = Number(r.getAttribute("y")); return y > top && y < bottom; });
        const signed = segments.map((r) => { const x = Number(r.getAttribute("x")), w = Number(r.getAttribute("width")); return x >= zero ? w : -w; });
        return { tick: Number(tick.getAttribute("x1")) - zero, sum: signed.reduce((a, b) => a + b, 0), bias: segments.filter((r) => r.classList.contains("bias")).length };
    });
}"""


@pytest.mark.parametrize("bias", [0, 1])
def test_the_output_chart_stacks_every_part_of_y_so_its_bars_end_at_the_tick(page, server_url, bias):
    """With a bias, b^O is a part of y as much as each head's contribution: it has its own bar."""
    edits = "&edits=b_O%3A1%3D5" if bias else ""
    page.goto(server_url + f"#mode=lab&d_model=4&n_heads=2&n_kv_heads=2&d_head=2&d_v=2&causal=1&tokens=we+like+tea&seed=0&bias={bias}&stage=output&query=2{edits}")
    expect(page.locator(".stage h2")).to_contain_text("query “tea”")
    settle(page)
    rows = page.evaluate(CHART_ROWS)
    assert len(rows) == 4
    for row in rows:
        assert row["bias"] == bias and abs(row["sum"] - row["tick"]) < 1, rows  # the parts add up to the total, in pixels
    assert ("bias bᴼ (b)" in page.locator(".stage svg.chart").inner_html()) == bool(bias)


def test_a_wide_layers_output_map_has_the_bias_row_between_the_heads_and_their_sum(page, server_url):
    page.goto(server_url + "#mode=lab&d_model=20&n_heads=4&n_kv_heads=4&d_head=5&d_v=5&causal=0&bias=1&tokens=a+b&seed=0&stage=output&query=1")
    canvas = page.get_by_role("application", name=re.compile(r"^Each head's contribution to each output component \(rows: heads, the bias, then the output\): 6 × 20"))
    expect(canvas).to_be_visible()
    settle(page)
    arrays = arrays_of(TracePayload.model_validate(httpx.post(server_url + "api/trace", json=lab_state(page)).json()))
    canvas.focus()
    for key in ["ArrowDown"] * 8 + ["ArrowUp"]:  # down to the last row (the output), then one up
        page.keyboard.press(key)
    readout = page.locator(".stage .readout").last.inner_text()  # the output map's (the first is concat's)
    at = re.match(r"bias bᴼ · y\[(\d+)\]: (-?\d+\.\d+)", readout)
    assert at and at.group(2) == fmt(arrays["b_O"][int(at.group(1))]), readout
    page.keyboard.press("ArrowDown")
    assert page.locator(".stage .readout").last.inner_text().startswith(f"output y · y[{at.group(1)}]: {fmt(arrays['output'][1, int(at.group(1))])}")


def test_a_maps_home_end_and_page_keys_move_its_cell_not_the_page(page, server_url):
    """Home, End, Page Up and Page Down scrolled the page away from the focused map, and its last
    cell took a key press a cell: they move the map's readout, as in a table."""
    page.goto(server_url + "#mode=lab&d_model=20&n_heads=4&n_kv_heads=4&d_head=5&d_v=5&causal=0&bias=1&tokens=a+b&seed=0&stage=output&query=1")
    canvas = page.get_by_role("application", name=re.compile(r"^Each head's contribution to each output component"))
    expect(canvas).to_be_visible()
    settle(page)
    canvas.focus()
    scrolled = page.evaluate("() => scrollY")
    readout = lambda: page.locator(".stage .readout").last.inner_text()  # noqa: E731 - the output map's (the first is concat's)
    page.keyboard.press("End")
    assert readout().startswith("head 0 · y[19]:"), readout()
    page.keyboard.press("Home")
    assert readout().startswith("head 0 · y[0]:"), readout()
    page.keyboard.press("PageDown")  # ten rows down, no further than the last (the output)
    assert readout().startswith("output y · y[0]:"), readout()
    page.keyboard.press("PageUp")
    assert readout().startswith("head 0 · y[0]:"), readout()
    page.keyboard.press("Control+End")
    assert readout().startswith("output y · y[19]:"), readout()
    assert page.evaluate("() => scrollY") == scrolled  # the page stayed where it was


def test_a_labelless_button_lines_up_with_the_inputs_beside_it(page, server_url):
    """Draw new values (and Trace, and Undo) stand under an empty label, a space that collapsed: they
    sat some 20 px above the Seed box beside them, level with its label."""
    open_lab(page, server_url)
    tops = page.evaluate("""() => [document.getElementById('lab-seed'), [...document.querySelectorAll('.lab button')].find((b) => b.textContent === 'Draw new values')]
        .map((e) => Math.round(e.getBoundingClientRect().top))""")
    assert tops[0] == tops[1], tops
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    tops = page.evaluate("() => [document.getElementById('model-layer'), [...document.querySelectorAll('#models button')].find((b) => b.textContent === 'Trace')].map((e) => Math.round(e.getBoundingClientRect().top))")
    assert tops[0] == tops[1], tops  # Trace beside the layer menu, level with it
    # on a tablet, where the row wraps, Trace stays beside the text it traces (it went alone to a line of its own)
    for width in (820, 390):
        page.set_viewport_size({"width": width, "height": 1000})
        text, trace = page.evaluate("() => [document.getElementById('model-text'), [...document.querySelectorAll('#models button')].find((b) => b.textContent === 'Trace')].map((e) => e.getBoundingClientRect().toJSON())")
        assert round(text["top"]) == round(trace["top"]) and 0 < trace["left"] - text["right"] <= 12, (width, text, trace)


def test_a_lab_result_that_comes_after_another_mode_is_picked_waits_for_the_lab(page, server_url):
    """Tokens typed, then the teaching example's button: the field's change is computed as it loses
    the focus, and its result came after the teaching example was shown. It took the teaching
    example's place, under its button and address. It is shown when the lab is next, on its view."""
    open_lab(page, server_url)
    held = []
    page.route("**/api/trace", lambda route: held.append(route))
    page.get_by_label("Tokens (separated by spaces)", exact=True).fill("x y z typed")
    page.get_by_role("button", name="Teaching example").click()
    routed(page, held, 1)
    held[0].continue_()
    page.unroute("**/api/trace")
    settle(page)
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["cats", "like", "warm", "milk"]
    expect(page.locator(".outputs .hint")).to_contain_text("MHA · d_model 4")
    assert page.evaluate("location.hash").startswith("#mode=teaching")
    page.get_by_role("button", name="Attention lab").click()
    expect(page.locator(".outputs .hint")).to_contain_text("GQA")
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["x", "y", "z", "typed"]
    page.wait_for_function("() => location.hash.startsWith('#mode=lab') && location.hash.includes('tokens=x+y+z+typed')")


def test_a_lab_whose_settings_are_refused_gets_its_address_back_when_opened_again(page, server_url):
    """n_heads "abc", then the teaching example and the lab again: the lab showed its last result
    under the teaching example's address, so that a reload or a copied link lost it."""
    open_lab(page, server_url)
    field = page.get_by_label("n_heads", exact=True)
    field.fill("abc")
    field.press("Enter")
    expect(page.locator("#lab-error-n_heads")).not_to_have_text("")
    page.get_by_role("button", name="Teaching example").click()
    page.wait_for_function("() => location.hash.startsWith('#mode=teaching')")
    page.get_by_role("button", name="Attention lab").click()
    page.wait_for_function("() => location.hash.startsWith('#mode=lab')")
    assert page.get_by_label("n_heads", exact=True).input_value() == "abc"  # what was typed stays, to be mended


def test_the_models_text_box_grows_with_its_lines_up_to_eight(page, server_url):
    """A text of three lines (a snippet of code) had its first line cut in half in a box two lines
    high, scrolled to the caret. The box grows with the text, up to eight lines; then it scrolls."""
    page.goto(server_url + "#mode=model")
    box = page.get_by_label("Text", exact=True)
    expect(box).to_be_visible()
    line = page.evaluate("() => parseFloat(getComputedStyle(document.getElementById('model-text')).lineHeight)")
    height = lambda: page.evaluate("() => { const t = document.getElementById('model-text'); return [t.clientHeight, t.scrollHeight]; }")  # noqa: E731
    box.fill("one line")
    two_lines, _ = height()
    assert 2 * line <= two_lines < 3 * line, (two_lines, line)  # two lines at the least, as before
    box.fill("def add(a, b):\n    return a + b\nprint(add(2, 3))")
    shown, held = height()
    assert held <= shown and shown >= 3 * line, (shown, held, line)  # all three lines in sight, nothing to scroll
    box.fill("\n".join(f"line {i}" for i in range(20)))
    shown, held = height()
    assert 8 * line <= shown < 9 * line and held > shown, (shown, held, line)  # eight, then it scrolls


def test_past_sixteen_heads_the_head_outputs_name_no_two_heads_by_one_colour(page, server_url):
    """There are 16 head colours: head 16 was drawn in head 0's blue, head 17 in head 1's orange.
    Past 16 heads the inspected head keeps its colour and the others are grey."""
    tokens = "+".join(f"w{i}" for i in range(4))
    page.goto(server_url + f"#mode=lab&d_model=20&n_heads=20&n_kv_heads=20&d_head=1&d_v=1&tokens={tokens}&seed=0&head=17")
    page.wait_for_function("() => document.querySelectorAll('.outputs .head-output').length === 20")
    keys = page.locator(".outputs .head-output .key").evaluate_all("(ks) => ks.map((k) => getComputedStyle(k).backgroundColor)")
    assert len(keys) == 20 and len(set(keys)) == 2, keys  # the inspected head's colour, and grey
    assert keys[17] != keys[0] and keys.count(keys[0]) == 19
    # so do the blocks of concat and the rows of W^O, each head's, where one is a number wide (d_v 1)
    head_of = "(els) => els.map((e) => getComputedStyle(e).getPropertyValue('--head').trim())"
    page.get_by_label("Calculation stage").select_option(label="Concatenation")
    blocks = page.locator(".stage .concat .block").evaluate_all(head_of)
    assert len(blocks) == 20 and len(set(blocks)) == 2 and blocks.count(blocks[0]) == 19 and blocks[17] != blocks[0], blocks
    assert page.locator(".stage .concat .block").nth(17).locator(".block-index").inner_text() == "column 17"
    assert "20 heads × 1 number each (d_v) = 20 numbers" in page.locator(".stage").inner_text()
    # (W^O as a table: 17 heads' rows of 8 numbers)
    open_link(page, server_url + f"#mode=lab&d_model=8&n_heads=17&n_kv_heads=17&d_head=1&d_v=1&tokens={tokens}&seed=0&head=16&stage=output")
    page.wait_for_function("() => document.querySelectorAll('.stage tr.block-row').length === 17")
    rows = page.locator(".stage tr.block-row").evaluate_all(head_of)
    assert len(set(rows)) == 2 and rows.count(rows[0]) == 16 and rows[16] != rows[0], rows
    open_link(page, server_url + f"#mode=lab&d_model=20&n_heads=20&n_kv_heads=20&d_head=1&d_v=1&tokens={tokens}&seed=0&head=17")
    page.wait_for_function("() => document.querySelectorAll('.outputs .head-output').length === 20")
    # the packed view's product is not split into a column of twenty heads, as tall as the page
    page.locator("summary", has_text="Packed view").click()
    assert "split into heads" not in page.locator(".packed").inner_text()
    # up to 16 heads, each its own
    open_link(page, server_url + f"#mode=lab&d_model=16&n_heads=16&n_kv_heads=16&d_head=1&d_v=1&tokens={tokens}&seed=0")
    page.wait_for_function("() => document.querySelectorAll('.outputs .head-output').length === 16")
    keys = page.locator(".outputs .head-output .key").evaluate_all("(ks) => ks.map((k) => getComputedStyle(k).backgroundColor)")
    assert len(set(keys)) == 16, keys


def test_every_map_of_the_projections_keeps_its_canvas_from_query_to_query(page, server_url):
    """Every map of the Projections stays drawn as the query changes. The maps after the keys' and
    values' equations (shared by every query's panel) took other places in the first query's
    panel than in the next ones', so that the packed W^Q of the next query's panel had W^V's: the
    two are the same size here, and the packed view took W^V's canvas from the page."""
    tokens = "+".join(f"t{i}" for i in range(22))
    open_link(page, server_url + f"#mode=lab&d_model=16&n_heads=2&n_kv_heads=2&d_head=8&d_v=16&causal=0&bias=0&tokens={tokens}&seed=0&stage=projections&query=0")
    page.wait_for_selector(".stage figure.heatmap-figure canvas.heatmap")
    settle(page)
    for query in ("t1", "t2", "t0"):
        page.get_by_label("Query token").select_option(label=query)
        expect(page.locator(".stage h2")).to_contain_text(query)
        figures = page.locator(".stage figure.heatmap-figure")
        counts = figures.evaluate_all("(fs) => fs.map((f) => [f.querySelector('figcaption').textContent, f.querySelectorAll('canvas.heatmap').length])")
        assert len(counts) >= 4 and all(n == 1 for _, n in counts), (query, counts)


def test_packed_view_gives_the_same_q(page, server_url):
    open_lab(page, server_url)
    page.locator("summary", has_text="Packed view").click()
    payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=lab_state(page)).json())
    shown = check_numbers(page, ".packed", arrays_of(payload))
    query = int(re.search(r"query=(\d+)", link(page)).group(1))
    assert {f"q:{h},{query},{e}" for h in range(4) for e in range(2)} <= shown
    assert {f"W_Q:{h},{m},{e}" for h in range(4) for m in range(8) for e in range(2)} <= shown
    assert "never sliced" in page.locator(".packed").inner_text()
    # the product reshaped, as the words say: one row a head (it was said, never shown), the
    # inspected head's marked
    split = page.locator(".packed .equation").last.locator("table.matrix")
    assert split.locator("tbody th").all_inner_texts() == ["head 0", "head 1", "head 2", "head 3"]
    assert split.locator("thead th").all_inner_texts()[-2:] == ["q[0]", "q[1]"]
    head = int(re.search(r"[&#]head=(\d+)", link(page)).group(1))
    assert split.locator("tbody tr.inspected th").inner_text() == f"head {head}"
    # K and V are packed too: under GQA into fewer blocks, as the heads share them
    assert "WK and WV are packed the same way, one block per K/V head: 2 blocks where WQ has 4, as the query heads share them." in page.locator(".packed").inner_text()


def test_a_copied_link_reproduces_the_exact_view(page, server_url, browser):
    open_lab(page, server_url)
    set_field(page, "Tokens (separated by spaces)", "we read the old map")
    set_field(page, "n_heads", 2)
    set_field(page, "n_kv_heads", 1)
    set_field(page, "d_head", 3)
    wait_kind(page, "MQA")
    cell = page.locator('.edit-grid input[data-key="x:2,3"]')
    cell.fill("0.25")
    cell.blur()
    settle(page)
    assert "edits=x" in link(page)
    page.get_by_label("Query token").select_option(label="old")
    page.get_by_label("Inspect head").select_option(label="Head 1")
    page.get_by_label("Calculation stage").select_option(label="Scores")
    page.evaluate(NEXT_FRAME)
    url, view = link(page), page.locator(".layout").inner_text()
    other = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    other.goto(url)
    other.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('MQA')")
    settle(other)
    assert other.locator(".layout").inner_text() == view
    assert other.locator('.edit-grid input[data-key="x:2,3"]').input_value() == "0.25"
    other.context.close()


@pytest.mark.parametrize(
    "fragment, words",
    [
        ("#mode=lab&mode=model&stage=scores&stage=weights", "it gives mode twice (“lab”, “model”); keep one"),  # not the first, silently
        ("#mode=teach", "mode=“teach” is not teaching, lab or model"),
    ],
    ids=["a part given twice", "no mode"],
)
def test_a_malformed_link_says_why_and_falls_back(page, server_url, fragment, words):
    page.goto(server_url + fragment)
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    notice = page.locator("#notice").inner_text()
    assert "could not be used" in notice and words in notice and "teaching example" in notice
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('like')")
    assert page.get_by_role("button", name="Teaching example").get_attribute("aria-pressed") == "true"


LAB_LINK = "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&tokens=a+b+c&seed=3&edits=x:1,2=0.5"


@pytest.mark.parametrize(
    "fragment, said, shown",
    [
        ("#head=7&stage=weights", "head 7 is out of range: there are 2 heads, so head 0 is shown.", ("Weights", "head 0", "“like”")),
        ("#stage=nowhere&head=1", "stage “nowhere” is not one of projections, scores, weights, mixing, concat, output, so the first stage is shown.", ("Projections", "head 1", "“like”")),
        (LAB_LINK + "&head=9&query=1", "head 9 is out of range: there are 4 heads, so head 0 is shown.", ("Projections", "head 0", "“b”")),
        (LAB_LINK + "&stage=scores&head=3&query=9", "query 9 is out of range: there are 3 tokens, so query “a” is shown.", ("Scores", "head 3", "“a”")),
        ("#stage=scores&head=1&query=dog", "the query “dog” is not a token here: name one of “cats”, “like”, “warm”, “milk”, or give a position; query “like” is shown.", ("Scores", "head 1", "“like”")),
        (LAB_LINK + "&stage=weights&head=2&query=c@1", "the query “c@1” is not a token here (“c” is at position 2, not 1): name one of “a”, “b”, “c”, or give a position; query “a” is shown.", ("Weights", "head 2", "“a”")),
    ],
    ids=["teaching head", "teaching stage", "lab head", "lab query", "teaching query by an unknown name", "lab query named where it is not"],
)
def test_a_link_part_out_of_range_falls_back_alone(page, server_url, fragment, said, shown):
    """A stage, head or query a link cannot have is replaced by the first view's; the rest of the
    link (the mode, a lab's settings and edits, the other parts of the view) is kept."""
    page.goto(server_url + fragment)
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    notice = page.locator("#notice").inner_text()
    assert notice.startswith("This link could not be used in full: ") and notice.endswith(said), notice
    title = page.locator(".stage h2")
    for words in shown:
        expect(title).to_contain_text(words)
    if "mode=lab" in fragment:
        assert page.get_by_role("button", name="Attention lab").get_attribute("aria-pressed") == "true"
        assert page.get_by_label("n_heads", exact=True).input_value() == "4"
        assert page.locator('.edit-grid input[data-key="x:1,2"]').input_value() == "0.5"
    else:
        assert page.get_by_role("button", name="Teaching example").get_attribute("aria-pressed") == "true"


@pytest.mark.parametrize(
    "fragment, shown",
    [
        ("#mode=teaching&stage=scores&head=1&query=milk", ("Scores", "head 1", "“milk”")),  # as --query milk, and the widget's query="milk"
        ("#mode=teaching&stage=scores&head=1&query=Milk", ("Scores", "head 1", "“milk”")),  # in any case, as the terminal's fallback
        ("#mode=teaching&stage=weights&query=@2", ("Weights", "head 0", "“warm”")),  # a position, as the terminal's @2
        ("#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&tokens=the+cat+sat+on+the+mat&seed=0&stage=weights&head=3&query=the@4", ("Weights", "head 3", "“the @4”")),
    ],
    ids=["teaching", "teaching, in another case", "teaching, a position", "lab, a repeated token at its position"],
)
def test_a_link_may_name_its_query_by_its_token(page, server_url, fragment, shown):
    """A teacher writes a link by hand with the query's word, as the terminal and the notebook take
    it: the view opens on it, the link's stage and head kept, and nothing is said to be wrong. The
    link the page then writes gives its position."""
    page.goto(server_url + fragment)
    title = page.locator(".stage h2")
    for words in shown:
        expect(title).to_contain_text(words)
    assert page.locator("#notice").is_hidden()
    page.wait_for_function("() => /[&#]query=\\d+/.test(location.hash)")


def test_new_values_replace_edits_only_when_the_user_agrees(page, server_url):
    open_lab(page, server_url)
    preset = page.get_by_label("Preset")
    assert preset.input_value() == "gqa"  # the lab opens on the GQA preset, and says so
    cell = page.locator('.edit-grid input[data-key="x:0,0"]')
    drawn = cell.input_value()
    cell.fill("7")
    cell.blur()
    settle(page)
    assert "edited" in cell.get_attribute("class") and "edits=x" in link(page)
    cell.fill(drawn)  # the drawn value again: no longer an edit
    cell.blur()
    settle(page)
    assert "edited" not in (cell.get_attribute("class") or "") and "edits=" not in link(page)
    cell.fill("9")
    cell.blur()
    settle(page)
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.get_by_role("button", name="Draw new values").click()
    settle(page)
    assert asked and "1 value you edited" in asked[0]
    assert cell.input_value() == "9" and "edits=x" in link(page)  # kept
    page.once("dialog", lambda d: d.dismiss())  # a preset declined: the menu still names what the lab is
    preset.select_option("mha")
    settle(page)
    assert preset.input_value() == "gqa" and cell.input_value() == "9"
    # from the keyboard, the arrow keys move through the presets and ask nothing; Enter asks once
    asked.clear()
    decline = lambda d: (asked.append(d.message), d.dismiss())  # noqa: E731
    page.on("dialog", decline)
    preset.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    assert asked == [] and cell.input_value() == "9"
    page.keyboard.press("Enter")
    settle(page)
    assert len(asked) == 1 and preset.input_value() == "gqa" and cell.input_value() == "9"  # declined: nothing changed
    page.remove_listener("dialog", decline)
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Draw new values").click()
    settle(page)
    assert cell.input_value() != "9" and "edits=" not in link(page)
    set_field(page, "n_kv_heads", 4)
    assert preset.input_value() == "causal"  # 4 K/V heads and a causal mask: the causal MHA preset
    set_field(page, "Seed", 2**32 - 1)  # the largest seed: new values start again from 0
    page.get_by_role("button", name="Draw new values").click()
    settle(page)
    assert page.get_by_label("Seed", exact=True).input_value() == "0" and page.locator(".lab-error").first.inner_text() == ""
    # back to the teaching example: its first view, one query at a time
    page.get_by_role("button", name="All queries").click()
    page.get_by_role("button", name="Teaching example").click()
    assert page.get_by_role("button", name="All queries").get_attribute("aria-pressed") == "false"


def test_the_arrow_keys_on_the_preset_menu_keep_the_settings_typed_until_enter(page, server_url):
    """Chromium changes a closed menu with the arrow keys at once: passing over the presets must
    not throw away settings the user typed. The preset reached is applied on Enter; leaving the
    menu on it asks first."""
    open_lab(page, server_url)
    preset = page.get_by_label("Preset")
    for label, value in [("d_model", 12), ("n_heads", 3), ("n_kv_heads", 1), ("d_head", 4), ("d_v", 4)]:
        set_field(page, label, value)
    typed = lab_state(page)["config"]
    assert preset.input_value() == "" and typed["d_model"] == 12  # none of the presets
    asked = []
    page.on("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    preset.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    settle(page)
    assert preset.input_value() == "mha"  # (the teaching example, then MHA: passed over)
    assert asked == [] and page.get_by_label("d_model", exact=True).input_value() == "12" and lab_state(page)["config"] == typed
    page.keyboard.press("Tab")  # left on a preset: asked, and declined
    settle(page)
    assert len(asked) == 1 and "“MHA: 4 heads” replaces the settings you typed" in asked[0]
    assert preset.input_value() == "" and page.get_by_label("n_heads", exact=True).input_value() == "3" and lab_state(page)["config"] == typed
    preset.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")  # applied, with no question
    settle(page)
    assert len(asked) == 1 and preset.input_value() == "mha"
    assert lab_state(page)["config"] == {"d_model": 8, "n_heads": 4, "n_kv_heads": 4, "d_head": 2, "d_v": 2, "causal": False, "bias": False}
    # a setting in error is the user's too: declined, the menu names no preset, as the form is none
    kv = page.get_by_label("n_kv_heads", exact=True)
    kv.fill("3")
    kv.blur()
    settle(page)
    assert preset.input_value() == ""
    preset.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Tab")
    settle(page)
    assert len(asked) == 2 and preset.input_value() == "" and kv.input_value() == "3"
    # an arrow key that changed nothing (the first entry's ArrowUp) leaves a pick after it alone: applied at once
    set_field(page, "n_kv_heads", 1)
    preset.focus()
    page.keyboard.press("Home")
    page.keyboard.press("ArrowUp")
    page.wait_for_timeout(50)
    preset.select_option("causal")
    settle(page)
    assert len(asked) == 2 and lab_state(page)["config"]["n_kv_heads"] == 4 and lab_state(page)["config"]["causal"]


@pytest.mark.parametrize("typed", ["abc", "NaN", "1e999", "", "1e200", "1,5", "1,500", "-2,000,000", "0,125", "1234,567"])  # 1e200: a number, too large to compute with
def test_a_bad_cell_is_reported_there_and_loses_nothing(page, server_url, typed, artifacts):
    open_lab(page, server_url)
    good = page.locator('.edit-grid input[data-key="x:0,0"]')
    good.fill("0.5")
    good.blur()
    page.wait_for_function("() => location.hash.includes('edits=x%3A0%2C0%3D0.5') || location.hash.includes('edits=x:0,0=0.5')")
    before = page.locator(".layout").inner_text()
    bad = page.locator('.edit-grid input[data-key="x:1,2"]')
    bad.fill(typed)
    bad.blur()
    message = bad.locator("xpath=following-sibling::span[contains(@class, 'cell-error')]")
    message.wait_for(state="visible")
    assert message.inner_text()
    if typed == "1,5":  # a decimal comma: the message says how to write it
        assert message.inner_text() == "“1,5” has a decimal comma: write it with a point, 1.5."
    if typed == "1,500":  # a thousands comma, or a decimal one
        assert message.inner_text() == "“1,500” has a comma: write 1500, with no comma (or 1.500, if the comma is a decimal one)."
    if typed == "-2,000,000":
        assert message.inner_text() == "“-2,000,000” has a comma: write -2000000, with no comma."
    if typed in ("0,125", "1234,567"):  # no thousands comma could be meant: a decimal one
        assert message.inner_text() == f"“{typed}” has a decimal comma: write it with a point, {typed.replace(',', '.')}."
    assert bad.get_attribute("aria-invalid") == "true"
    assert bad.input_value() == typed  # what the user typed stays in the cell
    assert good.input_value() == "0.5"  # other edits stay
    assert page.locator(".layout").inner_text() == before  # the last good trace stays
    assert "1%2C2" not in page.url and "1,2=" not in page.url  # and the link holds the values it shows
    if typed == "1e200":
        assert message.inner_text() == "1e200 is too large to compute with: keep it under 1e100."
    if typed == "abc":
        page.screenshot(path=str(artifacts / "lab-bad-cell.png"), full_page=False)
    bad.fill("0.1")
    bad.blur()
    page.wait_for_function("() => location.hash.includes('1%2C2') || location.hash.includes('1,2')")
    assert message.inner_text() == "" and bad.get_attribute("aria-invalid") is None


def test_values_too_large_together_are_refused_at_the_cell_that_made_them_so(page, server_url):
    """Each value under 1e100, but x W^Q times x W^K passes float64's largest: the server refuses
    the last edit, which the cell says (once, there), and the figure and the link keep the rest."""
    open_lab(page, server_url)
    for matrix, key in (("x", "x:1,2"), ("W_Q:0", "W_Q:0,2,0"), ("W_K:0", "W_K:0,2,0")):
        page.get_by_label("Edit the values of").select_option(matrix)
        before = page.locator(".layout").inner_text()
        cell = page.locator(f'.edit-grid input[data-key="{key}"]')
        cell.fill("9e99")
        cell.blur()
        settle(page)
    message = cell.locator("xpath=following-sibling::span[contains(@class, 'cell-error')]")
    expect(message).to_contain_text("too large to compute with together; make the largest of them smaller")
    assert message.inner_text().endswith("smaller, or compute in float64.") or message.inner_text().endswith("smaller.")  # a sentence, as the cell's own messages
    assert cell.get_attribute("aria-invalid") == "true" and cell.input_value() == "9e99"
    assert page.locator(".lab-error").first.inner_text() == ""  # said at the cell, not again above the form
    assert page.locator(".lab-status").first.inner_text() == "That value was not used: the figure still shows the last good result."
    assert page.locator(".layout").inner_text() == before and "W_K" not in page.url and "W_Q%3A0%2C2%2C0" in page.url.replace(":", "%3A").replace(",", "%2C")
    page.console_errors[:] = [e for e in page.console_errors if "status of 422" not in e]  # the browser logs the answer
    # Undo my edits: every cell shows the value in use again, the refused one too (its grid on
    # screen), with no message
    page.get_by_role("button", name="Undo my edits").click()
    settle(page)
    for matrix, key in (("W_K:0", "W_K:0,2,0"), ("x", "x:1,2"), ("W_Q:0", "W_Q:0,2,0")):
        page.get_by_label("Edit the values of").select_option(matrix)
        cell = page.locator(f'.edit-grid input[data-key="{key}"]')
        expect(cell).not_to_have_value("9e99")
        assert cell.get_attribute("aria-invalid") is None and "edited" not in (cell.get_attribute("class") or "")
        assert page.locator(".edit-grid input[aria-invalid]").count() == 0 and page.locator(".edit-grid .cell-error:not(:empty)").count() == 0


LARGEST = "#mode=lab&d_model=64&n_heads=64&n_kv_heads=64&d_head=64&d_v=64&causal=0&bias=0&tokens=" + "+".join(f"t{i}" for i in range(64)) + "&seed=0"


def test_the_largest_configuration_takes_edits(page, server_url):
    """64 heads of width 64: over a million values, more than a request may carry as JSON. The
    page sends the seed and the edited cells, so an edit there is computed like any other."""
    sent = []
    page.on("request", lambda r: sent.append(len(r.post_data_buffer or b"")) if r.url.endswith("api/trace") else None)
    page.goto(server_url + LARGEST + "&edits=W_V:63,63,63=0.5")
    page.wait_for_function("() => window.mhaExplorer?.model.get('payload').config.n_heads === 64")
    settle(page)
    page.get_by_label("Edit the values of").select_option("W_V:63")
    cell = page.locator('.edit-grid input[data-key="W_V:63,0,0"]')
    cell.fill("0.3")
    cell.press("Enter")
    settle(page)
    assert page.locator(".lab-error").first.inner_text() == "" and cell.get_attribute("aria-invalid") is None
    w_v = page.evaluate("() => { const a = window.mhaExplorer.model.get('payload').weights.W_V; return [a.data[0 + 63 * 64 * 64], a.data[a.data.length - 1]]; }")
    assert w_v == [0.3, 0.5]  # both edits are in the values the figure was computed from
    assert "W_V%3A63%2C0%2C0%3D0.3" in link(page).replace(":", "%3A").replace(",", "%2C").replace("=0.3", "%3D0.3")
    assert max(sent) < 10_000, sent


def test_one_bad_cells_message_shows_at_a_time(page, server_url):
    """Bad values side by side in a row: the message shown is the last edited or focused cell's;
    the others keep their red border, and say theirs again when focused."""
    open_lab(page, server_url)
    cells = [page.locator(f'.edit-grid input[data-key="x:1,{c}"]') for c in (1, 2, 3)]
    for cell, typed in zip(cells, ("abc", "1,5", "1e400")):
        cell.fill(typed)
        cell.blur()
    shown = page.locator(".edit-grid .cell-error:visible")
    assert shown.count() == 1 and "1e400 is too large" in shown.inner_text()
    assert all(cell.get_attribute("aria-invalid") == "true" for cell in cells)
    cells[0].focus()
    assert shown.count() == 1 and "“abc” is not a number" in shown.inner_text()


def test_a_long_causal_rows_weights_show_the_hidden_keys_as_masked(page, server_url):
    """30 tokens, causal: the weight strip of query 10 draws keys 11 to 29 grey and struck
    through, as the Mask stage does, not white as a key of weight near 0 would be."""
    open_lab(page, server_url)
    assert page.get_by_label("Causal mask").is_checked()
    set_field(page, "Tokens (separated by spaces)", " ".join(f"w{i}" for i in range(30)))
    page.get_by_label("Query token").select_option(label="w10")
    page.get_by_label("Calculation stage").select_option(label="Weights")
    assert "masked" in page.locator(".stage .heatmap-legend").first.inner_text()
    strip = page.locator(".stage canvas.heatmap").first
    strip.focus()
    for _ in range(29):
        page.keyboard.press("ArrowRight")
    assert page.locator(".stage .readout").first.inner_text().endswith("(masked)")


def test_bad_config_fields_get_inline_messages(page, server_url):
    open_lab(page, server_url)
    before = page.locator(".layout").inner_text()
    boxes = lambda: [(b["x"], b["y"], b["width"]) for b in (page.get_by_label(name, exact=True).bounding_box() for name in ("n_kv_heads", "d_head", "Seed"))]
    placed = boxes()
    set_field(page, "n_kv_heads", 3)
    assert "not a multiple" in page.locator("#lab-error-n_kv_heads").inner_text()
    assert boxes() == placed  # the message hangs below its field: no field moves
    set_field(page, "n_kv_heads", 2)
    # a rule of the two together: said under the one changed, both marked, the figure kept
    set_field(page, "n_heads", 3)
    assert page.locator("#lab-error-n_heads").inner_text() == (
        "n_heads=3 is not a multiple of n_kv_heads=2: each K/V head serves as many query heads as the others."
        " Choose n_kv_heads from 1, 3; or make n_heads a multiple of 2."
    )
    assert page.locator("#lab-error-n_kv_heads").inner_text() == ""
    assert all(page.get_by_label(name, exact=True).get_attribute("aria-invalid") == "true" for name in ("n_heads", "n_kv_heads"))
    assert page.locator(".lab-status").inner_text() == "These settings were not used: the figure still shows the last good result."
    assert page.locator(".layout").inner_text() == before
    set_field(page, "n_heads", 4)
    set_field(page, "d_model", 65)
    assert "is out of range: type a whole number from 1 to 64" in page.locator("#lab-error-d_model").inner_text()
    set_field(page, "Tokens (separated by spaces)", " ".join(["t"] * 65))
    assert "at most 64" in page.locator("#lab-error-tokens").inner_text()
    assert page.locator(".layout").inner_text() == before


def test_all_queries_view_shows_every_query_at_once(page, server_url, artifacts):
    open_lab(page, server_url)
    page.get_by_role("button", name="All queries").click()
    # up to 64 numbers (8 queries by 8 keys) a map is a table of them: the 6 tokens' 6 x 6 weights too
    page.get_by_label("Calculation stage").select_option(label="Weights")
    assert page.locator(".stage canvas.heatmap").count() == 0 and page.locator(".stage .maps table.matrix td .num").count() == 6 * 6
    # beyond, a heatmap: 9 tokens; Z (9 tokens x d_v 2) stays a table of its numbers
    set_field(page, "Tokens (separated by spaces)", "the cat sat on the mat and it slept")
    payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=lab_state(page)).json())
    arrays = arrays_of(payload)
    for title, count in (("Scores", 2), ("Weights", 1), ("Value mixing", 0)):
        page.get_by_label("Calculation stage").select_option(label=title)
        assert page.locator(".stage canvas.heatmap").count() == count
    assert page.locator(".stage .maps table.matrix td .num").count() == 9 * 2
    page.get_by_label("Calculation stage").select_option(label="Weights")
    # a screen reader passes the arrow keys to the map: it is an application, not an image
    canvas = page.get_by_role("application", name=re.compile(r"^Weights A of head 0: .*: 9 × 9; use the arrow keys to read values$"))
    assert canvas.get_attribute("aria-roledescription") == "heatmap"
    check_weight_colours(page, arrays["weights"][0])
    canvas.focus()
    for key in ("ArrowDown", "ArrowDown", "ArrowRight"):
        page.keyboard.press(key)
    query = int(re.search(r"query=(\d+)", link(page)).group(1))
    row = min(query + 2, 8)
    readout = page.locator(".stage .readout").inner_text()
    assert readout.startswith(f"{payload.tokens[row]} · key 1 “{payload.tokens[1]}”: {fmt(arrays['weights'][0, row, 1])}")
    page.screenshot(path=str(artifacts / "lab-all-queries.png"), full_page=True)
    assert page.get_by_role("button", name="All queries").get_attribute("aria-pressed") == "true"


def test_64_tokens_and_width_64_stay_usable(page, server_url, artifacts):
    open_lab(page, server_url)
    set_field(page, "Tokens (separated by spaces)", " ".join(f"t{i}" for i in range(64)))
    set_field(page, "d_model", 64)
    set_field(page, "n_heads", 8)
    set_field(page, "n_kv_heads", 8)
    set_field(page, "d_head", 8)
    set_field(page, "d_v", 8)
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.includes('d_model 64 · 8 heads · d_head 8')")
    for title in ("Projections", "Scores", "Weights", "Output projection"):
        page.get_by_label("Calculation stage").select_option(label=title)
    page.screenshot(path=str(artifacts / "lab-64-tokens.png"), full_page=False)


def test_leaving_the_lab_and_coming_back_keeps_one_canvas_per_map(page, server_url):
    page.goto(server_url + "#mode=lab&d_model=32&n_heads=4&n_kv_heads=4&d_head=8&d_v=8&causal=0&bias=0&tokens=a+b+c+d+e+f+g+h&seed=0")
    page.wait_for_function("() => document.querySelectorAll('.stage canvas.heatmap').length > 0")
    canvases = "() => [...document.querySelectorAll('.stage figure.heatmap-figure')].map((f) => f.querySelectorAll('canvas.heatmap').length)"
    first = page.evaluate(canvases)
    assert first and set(first) == {1}
    for _ in range(3):
        page.get_by_role("button", name="Teaching example").click()
        page.get_by_role("button", name="Attention lab").click()
        settle(page)
        assert page.evaluate(canvases) == first
    # and the map answers the pointer: the readout names the cell under it
    canvas = page.locator(".stage canvas.heatmap >> visible=true").first  # (the folded W maps are not shown)
    canvas.hover(position={"x": canvas.bounding_box()["width"] - 3, "y": 3})
    assert ":" in canvas.locator("xpath=ancestor::figure[1]").locator(".readout").inner_text()


BIG = "#mode=lab&d_model=64&n_heads=8&n_kv_heads=8&d_head=8&d_v=8&causal=1&bias=0&tokens=" + "+".join(f"t{i}" for i in range(64)) + "&seed=0"

# Points across the grid's box, below the column numbers and right of the row labels: what is at
# each one. Every point must show a drawn cell, never a skipped ("far") row or block of columns.
SEEN_IN_BOX = """() => {
  const box = document.querySelector('.grid-box');
  const r = box.getBoundingClientRect();
  const top = r.top + document.querySelector('.grid-head').offsetHeight + 4;
  const left = r.left + document.querySelector('.grid-head .row-head').offsetWidth + 4;
  const seen = [];
  for (let y = top; y < r.top + box.clientHeight - 4; y += 13)
    for (let x = left; x < r.left + box.clientWidth - 4; x += 29) {
      const hit = document.elementFromPoint(x, y);
      seen.push(Boolean(hit.closest('.cell')) && !hit.closest('.far'));
    }
  return seen;
}"""


def active_key(page):
    return page.evaluate("() => document.activeElement.dataset.key")


def test_a_64_by_64_grid_keeps_every_cell_but_draws_only_what_the_box_shows(page, server_url):
    page.goto(server_url + BIG)
    wait_kind(page, "d_model 64")
    settle(page)
    assert page.locator(".edit-grid input[data-key]").count() == 64 * 64
    drawn = "() => Array.from(document.querySelectorAll('.edit-grid input')).filter((i) => i.checkVisibility({ contentVisibilityAuto: true })).length"
    assert 0 < page.evaluate(drawn) < 64 * 64 / 4
    # what is not drawn is still read: the last row's cells, far below the box, are in the table
    assert 'textbox "x t63, column 63"' in page.locator(".edit-grid").aria_snapshot()
    assert [v["id"] for v in Axe().run(page, context=".grid-box").response["violations"]] == []
    seen = page.evaluate(SEEN_IN_BOX)
    assert len(seen) > 100 and all(seen)
    page.locator(".grid-box").evaluate("(box) => { box.scrollTop = box.scrollHeight; box.scrollLeft = box.scrollWidth; }")
    page.evaluate(NEXT_FRAME)
    seen = page.evaluate(SEEN_IN_BOX)
    assert len(seen) > 100 and all(seen)
    assert page.locator('.edit-grid input[data-key="x:63,63"]').evaluate("(i) => i.checkVisibility()")
    assert 0 < page.evaluate(drawn) < 64 * 64 / 4


def test_the_values_fold_away_to_bring_the_figure_onto_a_projectors_first_screen(page, server_url):
    """At 1024 × 768 the settings and the grid of X filled the first screen: the stage began at
    y = 913. Folded, the values keep their edits; shown again, the grid is drawn."""
    page.set_viewport_size({"width": 1024, "height": 768})
    open_lab(page, server_url)
    edit(page, "x", "x:0,0", "0.5")
    title_top = "() => document.querySelector('.stage h2').getBoundingClientRect().top"
    assert page.evaluate(title_top) > 768
    toggle = page.get_by_role("button", name="Hide the values")
    assert toggle.get_attribute("aria-expanded") == "true"
    toggle.click()
    assert page.locator("#lab-values-body").is_hidden() and page.evaluate(title_top) < 768 - 100
    shown = page.get_by_role("button", name="Show the values (X and the weights) to edit them")
    assert shown.get_attribute("aria-expanded") == "false"
    shown.click()
    expect(page.locator('.edit-grid input[data-key="x:0,0"]')).to_be_visible()
    assert page.locator('.edit-grid input[data-key="x:0,0"]').input_value() == "0.5"


def test_the_keyboard_can_skip_the_grid(page, server_url):
    page.goto(server_url + BIG)
    wait_kind(page, "d_model 64")
    settle(page)
    page.get_by_label("Edit the values of").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent").startswith("Skip the grid")
    assert page.locator(".skip-grid").is_visible()
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.labels?.[0]?.textContent") == "Query token"


def test_the_keyboard_reaches_every_cell_and_an_edit_keeps_the_focus(page, server_url):
    page.goto(server_url + BIG)
    wait_kind(page, "d_model 64")
    settle(page)
    page.locator('.edit-grid input[data-key="x:0,6"]').focus()
    for _ in range(3):
        page.keyboard.press("Tab")
    assert active_key(page) == "x:0,9"  # into the next block of columns
    for _ in range(20):
        page.keyboard.press("ArrowDown")
    assert active_key(page) == "x:20,9"  # rows that were far below the box
    for _ in range(10):
        page.keyboard.press("Shift+Tab")
    assert active_key(page) == "x:19,63"  # back across the row's start, to the end of the row above
    page.keyboard.press("Tab")
    assert active_key(page) == "x:20,0"
    assert page.evaluate("() => document.activeElement.checkVisibility()")
    page.keyboard.press("Control+A")
    page.keyboard.type("0.7")
    page.keyboard.press("Tab")  # change fires as the focus leaves
    settle(page)
    assert re.search(r"edits=x(:|%3A)20(,|%2C)0(=|%3D)0\.7", link(page))
    assert active_key(page) == "x:20,1"
    page.keyboard.press("Control+A")
    page.keyboard.type("-0.4")
    page.keyboard.press("Enter")  # change fires, the focus stays
    settle(page)
    assert re.search(r"x(:|%3A)20(,|%2C)1(=|%3D)-0\.4", link(page))
    assert active_key(page) == "x:20,1"  # the recompute left the focus in the edited cell
    assert page.evaluate("() => document.activeElement.value") == "-0.4"
    row = page.locator('.edit-grid input[data-key="x:20,1"]').evaluate("(i) => i.getBoundingClientRect().top")
    box = page.locator(".grid-box").bounding_box()
    assert box["y"] <= row <= box["y"] + box["height"]


def test_a_cell_reached_by_tab_or_up_and_down_has_its_value_selected_so_typing_replaces_it(page, server_url):
    """(← and → keep the caret at the value's edge instead: test_left_and_right_move_between_cells_from_a_values_edge.)"""
    open_lab(page, server_url)
    page.locator('.edit-grid input[data-key="x:0,0"]').focus()
    for key, to in (("Tab", "x:0,1"), ("ArrowDown", "x:1,1"), ("ArrowUp", "x:0,1")):
        page.keyboard.press(key)
        assert active_key(page) == to
        value = page.evaluate("() => document.activeElement.value")
        assert page.evaluate("() => [document.activeElement.selectionStart, document.activeElement.selectionEnd]") == [0, len(value)], key
    page.keyboard.type("9")  # was "90.8" and the like: the 9 went before the value
    page.keyboard.press("Enter")
    settle(page)
    assert page.locator('.edit-grid input[data-key="x:0,1"]').input_value() == "9"


def test_an_edit_survives_a_seed_that_draws_its_value(page, server_url):
    """Another seed may draw the value an edit holds; back on the first seed, the edit is still there."""
    open_lab(page, server_url)
    set_field(page, "Seed", 12)
    drawn = page.locator('.edit-grid input[data-key="x:0,0"]').input_value()  # what seed 12 draws there
    set_field(page, "Seed", 0)
    cell = page.locator('.edit-grid input[data-key="x:0,0"]')
    assert cell.input_value() != drawn
    cell.fill(drawn)
    cell.blur()
    settle(page)
    for seed in (12, 0):
        set_field(page, "Seed", seed)
        cell = page.locator('.edit-grid input[data-key="x:0,0"]')
        assert cell.input_value() == drawn and "edited" in cell.get_attribute("class"), seed
    assert re.search(r"edits=x(:|%3A)0(,|%2C)0(=|%3D)", link(page))


def test_a_bad_cell_keeps_its_text_through_recomputes_and_a_matrix_switch(page, server_url):
    open_lab(page, server_url)
    bad = page.locator('.edit-grid input[data-key="x:1,2"]')
    bad.fill("abc")
    bad.blur()
    good = page.locator('.edit-grid input[data-key="x:0,0"]')
    good.fill("0.5")
    good.blur()
    settle(page)
    page.get_by_label("Causal mask").uncheck()  # a config change updates the values in place
    page.wait_for_function("() => !Array.from(document.querySelectorAll('select option')).some(o => o.textContent === 'Mask')")
    settle(page)
    for _ in range(2):
        cell = page.locator('.edit-grid input[data-key="x:1,2"]')
        assert cell.input_value() == "abc"
        assert cell.get_attribute("aria-invalid") == "true"
        assert "not a number" in cell.locator("xpath=following-sibling::span[contains(@class, 'cell-error')]").inner_text()
        page.get_by_label("Edit the values of").select_option("W_Q:0")
        assert page.locator('.edit-grid input[data-key="x:1,2"]').count() == 0
        page.get_by_label("Edit the values of").select_option("x")  # a new grid, built again
    assert page.locator('.edit-grid input[data-key="x:0,0"]').input_value() == "0.5"


def test_exported_site_works_from_file_with_the_network_blocked(browser, tmp_path, artifacts):
    export_site(tmp_path / "site")
    context, page, requests, errors = file_page(browser)
    page.goto((tmp_path / "site" / "index.html").as_uri())
    page.wait_for_selector(".mha-explorer .stage h2")
    assert "like" in page.locator(".stage h2").inner_text()
    page.get_by_role("button", name="Next").click()
    assert "Scores" in page.locator(".stage h2").inner_text()
    page.get_by_role("button", name="Attention lab").click()
    assert "static copy" in page.locator(".lab-static").inner_text()
    assert page.get_by_label("d_model").is_disabled() and page.locator(".edit-grid input").first.is_disabled()
    assert page.locator("#lab-grid-caption").inner_text() == "x: 6 × 8"  # no editing hint (and no "null")
    chooser = page.get_by_label("Values of", exact=True)  # (not "Edit the values of": the grid is read-only)
    assert chooser.is_enabled()  # every matrix can still be read
    chooser.select_option(index=chooser.locator("option").count() - 1)
    assert page.locator("#lab-grid-caption").inner_text() != "x: 6 × 8"
    # the teaching example's values are offered only where they can be edited
    assert page.get_by_label("Preset").locator("option").all_inner_texts()[1:] == ["MHA: 4 heads", "Causal MHA", "Causal GQA: 4 query heads, 2 K/V heads", "Causal MQA: 4 query heads, 1 K/V head"]
    for preset, kind in (("mha", "MHA"), ("causal", "MHA"), ("gqa", "GQA"), ("mqa", "MQA")):
        page.get_by_label("Preset").select_option(preset)
        wait_kind(page, kind)
        stages = page.get_by_label("Calculation stage").locator("option").count()
        page.get_by_label("Calculation stage").select_option(index=0)
        for _ in range(stages - 1):
            page.get_by_role("button", name="Next").click()
        assert page.get_by_role("button", name="Next").is_disabled()
        assert ("Mask" in page.get_by_label("Calculation stage").locator("option").all_inner_texts()) == (preset != "mha")
    # the last stage sends the reader where a copy can go: its presets, its settings being fixed
    expect(page.locator(".stage .next-steps")).to_contain_text("or change the configuration (heads, widths, a causal mask) with the Attention lab's presets (mha-explorer serve computes any other).")
    page.screenshot(path=str(artifacts / "static-site-mqa.png"), full_page=True)
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    assert errors == []
    context.close()


def test_a_copy_given_lab_settings_it_cannot_compute_offers_its_preset_rather_than_an_empty_lab(browser, tmp_path):
    export_site(tmp_path / "site")
    context, page, requests, errors = file_page(browser)
    # a link made on a server's lab, with a view of its own: the copy opens its lab, on the GQA preset
    page.goto((tmp_path / "site" / "index.html").as_uri() + "#mode=lab&d_model=4&n_heads=2&n_kv_heads=2&d_head=2&d_v=2&causal=1&tokens=we+like+tea&seed=0&stage=weights&head=1&query=2")
    expect(page.locator("#notice")).to_have_text(
        "This copy holds the lab's presets only (other settings need mha-explorer serve): the link's configuration (none of the presets)"
        " cannot be shown here. Showing the preset “Causal GQA: 4 query heads, 2 K/V heads” instead, from its first view."
    )
    assert page.get_by_role("button", name="Attention lab").get_attribute("aria-pressed") == "true"
    wait_kind(page, "GQA")
    expect(page.locator(".stage h2")).to_contain_text("query “")
    assert page.get_by_label("Preset").input_value() == "gqa" and page.get_by_label("Tokens (separated by spaces)").input_value() == "the cat sat on the mat"
    # a lab on the teaching example's values (the example needs no server: it is said where it is)
    open_link(page, (tmp_path / "site" / "index.html").as_uri() + "#mode=lab&values=example&stage=weights&head=1")
    expect(page.locator("#notice")).to_have_text(
        "This copy holds the lab's presets only (other settings need mha-explorer serve): the link's lab on the teaching example's values"
        " cannot be shown here. Showing the preset “Causal GQA: 4 query heads, 2 K/V heads” instead, from its first view. The teaching example itself is under Teaching example."
    )
    wait_kind(page, "GQA")
    assert page.locator("#app").is_visible()
    page.wait_for_function("() => location.hash.includes('mode=lab') && location.hash.includes('d_model=8')")  # the link is written when idle
    # printed, the copy gives its view's link without the folders of the computer it sits on
    page.pdf()
    printed = page.locator("#print-link").inner_text()
    assert printed.startswith("This view: index.html#mode=lab&") and printed.endswith(" in this copy of the explorer"), printed
    assert str(tmp_path) not in printed
    # a preset's configuration on another seed, tokens and an edited value: that preset, and what
    # of the link it lacks, said
    open_link(page, (tmp_path / "site" / "index.html").as_uri() + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=1&d_head=2&d_v=2&causal=1&bias=0&tokens=we+like+tea&seed=7&edits=x:0,0=1&stage=weights&head=3&query=2")
    # (the page opens again on an address changed by hand)
    expect(page.locator("#notice")).to_have_text(
        "This copy holds the lab's presets only (other settings need mha-explorer serve): the link's tokens (each preset here is on “the cat sat on the mat”),"
        " seed 7 (the presets here have seed 0's values) and 1 edited value cannot be shown here. Showing the preset “Causal MQA: 4 query heads, 1 K/V head” instead, at the link's stage and head."
    )
    wait_kind(page, "MQA")
    assert page.get_by_label("Preset").input_value() == "mqa"
    # the preset has the link's configuration: its stage and head are shown; its query was another
    # token's, and the preset's second token is
    expect(page.locator(".stage h2")).to_have_text("4. Weights · head 3 · query “cat”")
    # the preset's own tokens on another seed: the link's query as well
    open_link(page, (tmp_path / "site" / "index.html").as_uri() + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=1&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat+sat+on+the+mat&seed=7&stage=mixing&head=2&query=4")
    expect(page.locator("#notice")).to_contain_text("the link's seed 7 (the presets here have seed 0's values) cannot be shown here. Showing the preset “Causal MQA: 4 query heads, 1 K/V head” instead, at the link's stage, head and query.")
    expect(page.locator(".stage h2")).to_have_text("5. Value mixing · head 2 · query “the @4”")
    # a head the preset lacks as well: both are said, what the copy cannot show first
    open_link(page, (tmp_path / "site" / "index.html").as_uri() + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=1&d_head=2&d_v=2&causal=1&bias=0&tokens=we+like+tea&seed=7&stage=weights&head=9")
    expect(page.locator("#notice")).to_have_text(re.compile(
        r"^This copy holds the lab's presets only .* seed 7 .* Showing the preset “Causal MQA: 4 query heads, 1 K/V head” instead, at the link's stage and head\. "
        r"This link could not be used in full: head 9 is out of range"
    ))
    # settings no server computes either: why, in the lab's words
    open_link(page, (tmp_path / "site" / "index.html").as_uri() + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=3&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat&seed=0")
    expect(page.locator("#notice")).to_contain_text("the link's settings (no server computes them either: n_heads=4 is not a multiple of n_kv_heads=3")
    expect(page.locator("#notice")).to_contain_text("Showing the preset “Causal GQA: 4 query heads, 2 K/V heads” instead")
    # and what of the link was left out, with why: a d_head the width gives none of
    open_link(page, (tmp_path / "site" / "index.html").as_uri() + "#mode=lab&n_heads=3")
    expect(page.locator("#notice")).to_contain_text(
        "instead, from its first view. This link could not be used in full: it gives no d_model (the GQA preset's 8 is used); "
        "it gives no d_head, and d_model 8 does not split evenly among 3 heads: type d_head and d_v in the lab."
    )
    assert errors == []
    context.close()


def test_the_labs_view_is_kept_while_another_mode_is_shown(page, server_url):
    page.goto(server_url + "#mode=lab&d_model=4&n_heads=2&n_kv_heads=2&d_head=2&d_v=2&causal=1&tokens=we+like+tea&seed=0&stage=weights&head=1&query=2")
    expect(page.locator(".stage h2")).to_have_text("4. Weights · head 1 · query “tea”")
    settle(page)
    page.get_by_role("button", name="Teaching example").click()
    expect(page.locator(".stage h2")).to_have_text("1. Projections · head 0 · query “like”")  # the teaching example's first view
    page.get_by_role("button", name="Attention lab").click()
    expect(page.locator(".stage h2")).to_have_text("4. Weights · head 1 · query “tea”")
    page.wait_for_function("() => ['mode=lab', 'stage=weights', 'head=1', 'query=2'].every((part) => location.hash.includes(part))")


def test_back_returns_to_the_mode_left_and_changes_within_a_mode_are_not_steps(page, server_url):
    page.goto(server_url)
    expect(page.locator(".stage h2")).to_contain_text("query “like”")
    page.get_by_role("button", name="Next").click()
    page.wait_for_function("() => location.hash.includes('stage=scores')")
    page.get_by_role("button", name="Attention lab").click()
    wait_kind(page, "GQA")
    page.wait_for_function("() => location.hash.includes('mode=lab')")
    expect(page.locator(".stage h2")).to_contain_text("2. Scores")  # the lab opens at the stage the example was at
    page.get_by_role("button", name="Next").click()  # a step within the lab: the link is replaced
    page.wait_for_function("() => location.hash.includes('mode=lab') && location.hash.includes('stage=mask')")
    page.go_back()
    expect(page.locator(".stage h2")).to_have_text("2. Scores · head 0 · query “like”")  # the teaching example where it was left
    assert page.get_by_role("button", name="Teaching example").get_attribute("aria-pressed") == "true"
    page.go_forward()
    wait_kind(page, "GQA")
    expect(page.locator(".stage h2")).to_contain_text("3. Mask")
    # the page loaded anew on the lab's link: the example's button opens it where it was left, not
    # at the first view the page held for it before it turned to the lab
    page.get_by_role("button", name="Teaching example").click()
    expect(page.locator(".stage h2")).to_have_text("2. Scores · head 0 · query “like”")
    page.wait_for_function("() => location.hash.includes('mode=teaching') && location.hash.includes('stage=scores')")


def test_a_copy_without_its_data_file_says_what_to_upload(browser, tmp_path):
    """A copy whose static/data.js was left behind says so, and asks no server for anything."""
    export_site(tmp_path / "site")
    (tmp_path / "site" / "static" / "data.js").unlink()
    context, page, requests, errors = file_page(browser)
    page.goto((tmp_path / "site" / "index.html").as_uri())
    expect(page.locator("#app .error")).to_have_text(
        "This copy of the explorer could not read its data, static/data.js: put the whole static folder beside index.html, as mha-explorer export-site wrote it."
    )
    assert not any("api/" in u for u in requests), requests
    assert [e for e in errors if "data.js" not in e and "ERR_FILE_NOT_FOUND" not in e] == [], errors
    context.close()


def test_a_copy_of_its_page_alone_says_its_folder_is_missing(browser, tmp_path):
    """index.html copied by itself: its script, which would say what is wrong, is missing too; the
    page says so rather than "Loading…" for good."""
    export_site(tmp_path / "site")
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "index.html").write_text((tmp_path / "site" / "index.html").read_text())
    context, page, requests, errors = file_page(browser)
    page.goto((alone / "index.html").as_uri())
    expect(page.locator("#app")).to_have_text(  # (as it reads: its "Loading…" hidden)
        "This copy of the explorer could not read its script, static/app.js: put the whole static folder beside index.html, as mha-explorer export-site wrote it.",
        use_inner_text=True,
    )
    expect(page.locator("#app .no-static")).to_be_visible()
    context.close()


def test_a_copy_served_under_the_servers_content_security_policy_runs_and_says_a_missing_script(browser, tmp_path):
    """A host that sends the policy the server sends (no inline script, nothing from elsewhere):
    the copy's page held an inline onerror handler, which the policy refused, with an error in the
    console on every load. It holds none now: the copy runs with no error, and a copy whose
    static/app.js alone is missing still says so."""
    from mha_explorer.server import SECURITY_HEADERS

    export_site(tmp_path / "site")
    types = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}

    def host(route):
        path = tmp_path / "site" / route.request.url.removeprefix("http://copy.test/").split("#")[0]
        if not path.is_file():
            return route.fulfill(status=404, body="not found")
        route.fulfill(status=200, body=path.read_bytes(), headers={"Content-Type": types[path.suffix], "Content-Security-Policy": SECURITY_HEADERS["Content-Security-Policy"]})

    for missing in (False, True):
        if missing:
            (tmp_path / "site" / "static" / "app.js").unlink()
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route("**/*", lambda route: host(route) if route.request.url.startswith("http://copy.test/") else route.abort())
        page = context.new_page()
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.goto("http://copy.test/index.html")
        if missing:  # said by static/data.js (the page's own word, the same, is hidden by its stylesheet)
            expect(page.locator("#app .error:not(.no-static)")).to_have_text(
                "This copy of the explorer could not read its script, static/app.js: put the whole static folder beside index.html, as mha-explorer export-site wrote it."
            )
            expect(page.locator("#app .error")).to_have_count(1)
            assert [e for e in errors if "404" not in e] == [], errors
        else:
            expect(page.locator(".stage h2")).to_have_text("1. Projections · head 0 · query “like”")
            page.get_by_role("button", name="Next").click()
            expect(page.locator(".stage h2")).to_contain_text("2. Scores")
            assert errors == [] and not page.locator(".no-static").is_visible(), errors
        context.close()


PIXELS = """() => {
  const canvas = document.querySelector(".stage canvas.heatmap");
  const ratio = canvas.width / parseFloat(canvas.style.width);
  const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  const mark = document.querySelector(".stage .heatmap-mark");
  return { width: canvas.width, height: canvas.height, ratio, data: Array.from(data),
           mark: mark.hidden ? null : [parseFloat(mark.style.top), parseFloat(mark.style.height)] };
}"""


def check_weight_colours(page, weights):
    """The weights map's pixels: white to blue with the weight, masked cells grey, labels left of
    the cells (76 px); the query's row is outlined by an element over the canvas, not in it."""
    shot = page.evaluate(PIXELS)
    n = weights.shape[0]
    left = 76 * shot["ratio"]
    cw, ch = (shot["width"] - left) / n, shot["height"] / n
    pixels = np.array(shot["data"]).reshape(shot["height"], shot["width"], 4)
    for r in range(n):
        for c in range(n):
            got = pixels[int((r + 0.5) * ch), int(left + (c + 0.5) * cw)]
            if c > r:  # after the query: masked
                expected = [228, 230, 234]
            else:
                shade = round(weights[r, c] * 255) / 255
                expected = [round(255 + (blue - 255) * shade) for blue in (29, 78, 160)]
            assert np.abs(got[:3] - expected).max() <= 1 and got[3] == 255, (r, c, got, expected)
    query = int(re.search(r"query=(\d+)", link(page)).group(1))
    top, height = shot["mark"]
    assert top == pytest.approx(query * ch / shot["ratio"]) and height == pytest.approx(ch / shot["ratio"])


def test_a_half_worked_out_by_hand_is_rounded_as_a_person_rounds_it(page, server_url):
    """d_head = 4 divides by 2: "sat" scores 0.61, and 0.61 ÷ 2 = 0.305 is 0.31 by hand, while the
    layer's own scaled score (0.6099… ÷ 2) is 0.30. The double 0.305 reads 0.30499…, which hid it."""
    link = "#mode=lab&d_model=8&n_heads=1&n_kv_heads=1&d_head=4&d_v=4&causal=0&bias=0&tokens=the+cat+sat&seed=3&stage=scores&query=0"
    page.goto(server_url + link)
    row = page.locator(".stage table.calc-table tbody tr", has_text="sat")
    expect(row.locator("td").nth(1)).to_have_text("0.61")
    assert row.locator("td").nth(3).inner_text() == "0.30"
    expect(page.locator(".stage p", has_text="Worked from the rounded numbers")).to_contain_text("the scaled score of “sat” comes to 0.31 (shown: 0.30)")


def test_a_softmax_of_large_scores_writes_every_exponential_one_way(page, server_url):
    """A query whose e^s add up past 100,000: every e^s and their sum with three significant digits
    and the exponent (as in the terminal): 2.34e7, 5.78e2, 1.52e0, not 578.186 beside 2.34e7."""
    edits = {f"x:{r},{c}": v for r, row in enumerate([[2, 2], [1, 0.5], [0, 0.1]]) for c, v in enumerate(row)}
    edits |= {f"W_{m}:0,{i},{j}": (3 if m == "Q" else 1) * (i == j) for m in "QK" for i in range(2) for j in range(2)}
    said = ";".join(f"{k}={v}" for k, v in edits.items())
    page.goto(server_url + f"#mode=lab&d_model=2&n_heads=1&n_kv_heads=1&d_head=2&d_v=2&causal=0&bias=0&tokens=a+b+c&seed=0&stage=weights&query=0&edits={said}")
    rows = page.locator(".stage table.softmax tbody tr")
    expect(rows).to_have_count(3)
    request = lab_state(page) | {"edits": edits}
    arrays = arrays_of(TracePayload.model_validate(httpx.post(server_url + "api/trace", json=request).json()))
    e = [float(np.exp(float(fmt(s)))) for s in arrays["scaled"][0, 0]]
    assert sum(e) >= 1e5
    total = sum(float(f"{v:.2e}") for v in e)  # each as written: three significant digits
    shown = [r.split("\t")[2:4] for r in rows.all_inner_texts()]
    assert shown == [[times_ten(v), f"÷ {times_ten(total)}"] for v in e], shown
    # the notation is said once, in the caption, and an exponent is set larger than its superscript digits
    expect(page.locator(".stage table.softmax caption")).to_contain_text("each to three digits times a power of ten (1.35×10⁻¹ is 0.135)")
    exponent = page.locator(".stage table.softmax tbody .num .exp").first
    assert exponent.inner_text() == "⁷" and exponent.evaluate("(e) => parseFloat(getComputedStyle(e).fontSize) > parseFloat(getComputedStyle(e.parentElement).fontSize)")


def test_a_softmax_whose_only_visible_key_scores_very_low_is_still_worked_out(page, server_url):
    """Query 0 of a causal layer sees key 0 alone, at s = -22.63: its e^s (1.5e-10) is written with
    its exponent, not as 0.000 over a sum of 0.000, and no row is said to miss its weight."""
    edits = {f"x:{r},{c}": v for r, row in enumerate([[2, 2], [1, 0.5], [0, 0.1]]) for c, v in enumerate(row)}
    edits |= {f"W_{m}:0,{i},{j}": (-4 if m == "Q" else 1) * (i == j) for m in "QK" for i in range(2) for j in range(2)}
    said = ";".join(f"{k}={v}" for k, v in edits.items())
    page.goto(server_url + f"#mode=lab&d_model=2&n_heads=1&n_kv_heads=1&d_head=2&d_v=2&causal=1&bias=0&tokens=a+b+c&seed=0&stage=weights&query=0&edits={said}")
    rows = page.locator(".stage table.softmax tbody tr")
    expect(rows).to_have_count(3)
    arrays = arrays_of(TracePayload.model_validate(httpx.post(server_url + "api/trace", json=lab_state(page) | {"edits": edits}).json()))
    e = float(np.exp(float(fmt(arrays["mask"][0, 0, 0]))))
    written = times_ten(e)  # 1.46×10⁻¹⁰
    assert [r.split("\t")[1:] for r in rows.all_inner_texts()] == [
        [fmt(arrays["mask"][0, 0, 0]), written, f"÷ {written}", "1.00"],
        ["−∞", "0", f"÷ {written}", "0.00"],
        ["−∞", "0", f"÷ {written}", "0.00"],
    ]
    assert page.locator(".stage p.hint", has_text="Worked from the rounded numbers").count() == 0


SMALL_LAB = "#mode=lab&d_model=4&n_heads=2&n_kv_heads=2&d_head=2&d_v=2&causal={causal}&bias=0&tokens={tokens}&seed=0"


def test_a_one_token_text_names_k_and_v_as_such(page, server_url):
    """With one token, K and V have one row, as q has: their products are still called K and V."""
    page.goto(server_url + SMALL_LAB.format(causal=0, tokens="solo") + "&stage=projections")
    expect(page.locator(".stage h2")).to_contain_text("query “solo”")
    captions = page.locator(".stage table > caption").all_inner_texts()
    assert captions[:9] == ["xsolo", "W0Q", "q0", "X", "W0K", "K0", "X", "W0V", "V0"], captions
    # a query past the one token is said with the right number
    open_link(page, server_url + SMALL_LAB.format(causal=0, tokens="solo") + "&query=5")
    expect(page.locator("#notice")).to_have_text("This link could not be used in full: query 5 is out of range: there is 1 token, so query “solo” is shown.")


def test_huge_values_show_their_power_of_ten_at_every_stage(page, server_url):
    """A value of 1e99 (the lab takes values under 1e100): every number derived from it shows three
    significant digits and its power of ten, as the terminal does, never seventeen digits."""
    page.goto(server_url + SMALL_LAB.format(causal=0, tokens="a+b+c") + "&query=0&edits=x:0,0=1e99")
    expect(page.locator(".stage h2")).to_contain_text("query “a”")
    stage = page.get_by_label("Calculation stage")
    for name in ("projections", "scores", "weights", "mixing", "concat", "output"):
        stage.select_option(name)
        expect(page.locator(".stage .figure")).to_have_attribute("data-stage", name)
        shown = page.locator(".layout").inner_text()
        assert not re.search(r"\d{8}|e\+", shown), (name, re.findall(r"\S*(?:\d{8}|e\+)\S*", shown)[:5])
        assert re.search(r"-?\d\.\d\de9\d", shown), name
    assert fmt(1e99) == "1.00e99" and fmt(-2.9999999999999995e98) == "-3.00e98" and fmt(9995000.0) == "1.00e7"
    # a note on rounding says how such numbers are rounded
    open_link(page, server_url + SMALL_LAB.format(causal=0, tokens="a+b+c") + "&edits=x:0,0=1234567.891&stage=scores&query=0")  # q and k past a million
    note = page.locator(".stage p.hint", has_text="Worked from the rounded numbers")
    expect(note).to_contain_text("Every number here is rounded: to two decimals, from a million on to three significant digits, and each result")
    out = page.locator(".stage")  # the contributions table stays inside its card
    assert page.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1", out.element_handle())


def test_a_lab_link_without_a_configuration_opens_the_lab(page, server_url):
    page.goto(server_url + "#mode=lab")
    expect(page.get_by_role("button", name="Attention lab")).to_have_attribute("aria-pressed", "true")
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('GQA')")
    assert page.locator("#notice").is_hidden()


def test_an_early_causal_query_of_a_long_text_sees_only_the_keys_listed(page, server_url):
    """Query 1 of 30 causal tokens sees two keys, both among the largest listed: no "other 0 keys"."""
    tokens = "+".join(f"w{i}" for i in range(30))
    page.goto(server_url + SMALL_LAB.format(causal=1, tokens=tokens) + "&stage=weights&query=1")
    expect(page.locator(".stage h2")).to_contain_text("query “w1”")
    assert page.locator(".stage p.lead").last.inner_text() == "These are all the keys it sees. The 28 masked keys get exactly 0."


def test_a_token_of_invisible_characters_is_named_by_its_code_points(page, server_url):
    page.goto(server_url + SMALL_LAB.format(causal=0, tokens="a+%E2%80%8B+b") + "&query=1")
    expect(page.locator(".stage h2")).to_contain_text("query “U+200B”")
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["a", "U+200B", "b"]
    assert page.locator(".edit-grid .row-head").all_inner_texts()[1:] == ["a", "U+200B", "b"]  # after the corner
    # heads wider than 8: the scores table (sums too long to write out) names each key as the menu does
    open_link(page, server_url + "#mode=lab&d_model=16&n_heads=1&n_kv_heads=1&d_head=16&d_v=16&causal=0&bias=0&tokens=a+%E2%80%8B+b&seed=0&stage=scores")
    expect(page.locator(".stage h2")).to_contain_text("Scores")
    assert page.locator(".stage table.calc-table tbody th").all_inner_texts() == ["a", "U+200B", "b"]


# where, on screen, the "@" of a label lies against its token's first letter (both in one element)
AT_AFTER_TOKEN = """(label) => {
  const range = document.createRange();
  const walk = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
  const rects = {};
  for (let node; (node = walk.nextNode()); )
    for (const [name, at] of [["at", node.data.indexOf("@")], ["token", node.data.search(/\\p{L}/u)], ["hash", node.data.indexOf("#")]])
      if (at >= 0 && !rects[name]) {
        range.setStart(node, at);
        range.setEnd(node, at + 1);
        rects[name] = range.getBoundingClientRect().left;
      }
  return rects.at > rects.token && (rects.hash === undefined || rects.hash < rects.token);
}"""


def test_a_right_to_left_tokens_position_is_written_after_it(page, server_url):
    """A Hebrew or Arabic token is drawn right to left, but its position still follows it:
    "שלום @1", not "1@ שלום", in the menus, titles, tables and the canvas labels' text."""
    page.goto(server_url + SMALL_LAB.format(causal=0, tokens="a+%D7%A9%D7%9C%D7%95%D7%9D+%D7%A9%D7%9C%D7%95%D7%9D") + "&query=1&stage=weights")
    # the lab's trace, not the teaching example drawn first (its title says "query “like”" too)
    expect(page.locator(".stage h2")).to_contain_text("שלום")
    assert [o.replace("\u2068", "").replace("\u2069", "") for o in page.get_by_label("Query token").locator("option").all_inner_texts()] == ["a", "שלום @1", "שלום @2"]
    rows = page.locator(".stage .bar-row .tok")
    assert rows.count() == 3
    assert [rows.nth(j).evaluate(AT_AFTER_TOKEN) for j in (1, 2)] == [True, True]
    assert page.locator(".stage h2 .where").evaluate(AT_AFTER_TOKEN)
    # a WordPiece's "##" stays before the letters it continues
    open_link(page, server_url + SMALL_LAB.format(causal=0, tokens="a+%23%23%D7%A9%D7%9C%D7%95%D7%9D+%23%23%D7%A9%D7%9C%D7%95%D7%9D") + "&query=1&stage=weights")
    expect(page.locator(".stage .bar-row .tok")).to_have_count(3)
    assert [page.locator(".stage .bar-row .tok").nth(j).evaluate(AT_AFTER_TOKEN) for j in (1, 2)] == [True, True]


def test_left_and_right_move_between_cells_from_a_values_edge(page, server_url):
    """← and → move the caret inside a value, as in any text box, and to the next cell only from
    its end (→) or start (←); the caret then waits at the edge it would leave by."""
    open_lab(page, server_url)
    page.locator('.edit-grid input[data-key="x:0,0"]').focus()
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    assert active_key(page) == "x:0,0"  # inside the value: the caret moved
    page.keyboard.press("End")
    page.keyboard.press("ArrowRight")
    assert active_key(page) == "x:0,1"
    page.keyboard.press("ArrowRight")
    assert active_key(page) == "x:0,2"  # one press a cell going on
    page.keyboard.press("ArrowLeft")
    assert active_key(page) == "x:0,2"  # the caret was at the end: it moves inside first
    page.keyboard.press("Home")
    page.keyboard.press("ArrowLeft")
    assert active_key(page) == "x:0,1"
    page.keyboard.press("ArrowLeft")
    assert active_key(page) == "x:0,0"
    page.keyboard.press("Shift+End")
    page.keyboard.press("ArrowRight")  # with text selected, → only collapses the selection
    assert active_key(page) == "x:0,0"
    assert "arrow keys move between cells" in page.locator(".grid-caption").inner_text()


def test_an_empty_seed_is_refused_not_taken_as_zero(page, server_url):
    open_lab(page, server_url)
    set_field(page, "Seed", 5)
    before = page.locator(".layout").inner_text()
    assert "seed=5" in link(page)
    set_field(page, "Seed", "")
    assert page.locator("#lab-error-seed").inner_text() == "The seed is empty: type a whole number from 0 to 4294967295."
    assert page.get_by_label("Seed", exact=True).get_attribute("aria-invalid") == "true"
    assert page.locator(".layout").inner_text() == before and "seed=5" in link(page)


@pytest.mark.parametrize(
    "field, typed, said",
    [("d_head", "2,5", "“2,5” is not a whole number: type d_head as one from 1 to 64."),
     ("d_model", "abc", "“abc” is not a whole number: type d_model as one from 1 to 64."),
     ("Seed", "1.5", "“1.5” is not a whole number: type the seed as one from 0 to 4294967295."),
     ("n_heads", "1e9", "“1e9” is written with an exponent: type n_heads in plain digits, from 1 to 64.")],
)
def test_a_setting_that_is_no_whole_number_is_kept_as_typed_and_said(page, server_url, field, typed, said):
    """A browser's number field read "2,5" as 25 and computed with it, and dropped letters: the
    settings are text fields that keep what was typed and say why it is not used."""
    open_lab(page, server_url)
    before, address = page.locator(".layout").inner_text(), link(page)
    set_field(page, field, typed)
    key = "seed" if field == "Seed" else field
    assert page.get_by_label(field, exact=True).input_value() == typed
    assert page.locator(f"#lab-error-{key}").inner_text() == said
    assert page.get_by_label(field, exact=True).get_attribute("aria-invalid") == "true"
    assert page.locator(".layout").inner_text() == before and link(page) == address  # nothing computed with it


@pytest.mark.parametrize(
    "typed, said",
    [("a " + "x" * 70 + " b", f"The token “{'x' * 12}…” is 70 characters long; a token has at most 64: shorten it, or split it with spaces."),
     (" ".join(f"t{i}" for i in range(66)), "66 tokens: the lab takes at most 64; remove 2.")],
)
def test_tokens_the_lab_cannot_take_are_said_with_what_to_change(page, server_url, typed, said):
    """"A token is longer than 64 characters." named no token and said nothing of what to do."""
    open_lab(page, server_url)
    set_field(page, "Tokens (separated by spaces)", typed)
    assert page.locator("#lab-error-tokens").inner_text() == said
    assert page.get_by_label("Tokens (separated by spaces)").input_value() == typed  # kept as typed


def test_the_arrow_keys_step_a_setting_within_its_range(page, server_url):
    open_lab(page, server_url)
    field = page.get_by_label("d_head", exact=True)
    start = int(field.input_value())
    field.focus()
    page.keyboard.press("ArrowUp")
    settle(page)
    assert field.input_value() == str(start + 1) and f"d_head={start + 1}" in link(page)
    field.fill("1")
    page.keyboard.press("ArrowDown")  # not below the smallest
    assert field.input_value() == "1"


def test_a_value_typed_while_the_settings_have_an_error_waits_for_them(page, server_url):
    """A cell edited while a field above is wrong is not lost: the cell says it waits, and the value
    is used as soon as the settings work again."""
    open_lab(page, server_url)
    set_field(page, "d_model", "")
    assert page.locator("#lab-error-d_model").inner_text() != ""
    cell = page.locator('.edit-grid input[data-key="x:0,1"]')
    cell.fill("5")
    cell.blur()
    settle(page)
    note = cell.locator("xpath=following-sibling::span[contains(@class, 'cell-error')]")
    assert note.inner_text() == "Not used yet: the settings above have an error. This value is used once they are fixed."
    assert "x:0,1" not in link(page)
    set_field(page, "d_model", 8)
    assert cell.input_value() == "5" and "edited" in cell.get_attribute("class") and note.inner_text() == ""
    assert "edits=x%3A0%2C1%3D5" in link(page) or "edits=x:0,1=5" in link(page)
    state = lab_state(page)
    payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=state | {"edits": {"x:0,1": 5}}, timeout=30).json())
    check_numbers(page, ".stage", arrays_of(payload))


def test_a_waiting_value_equal_to_the_one_drawn_is_no_edit(page, server_url):
    """Typed while the settings are wrong, a value that turns out to be the one the fixed settings
    draw is not kept as an edit, as the same value typed when the settings work is not."""
    open_lab(page, server_url)
    cell = page.locator('.edit-grid input[data-key="x:0,1"]')
    drawn = cell.input_value()
    set_field(page, "d_model", "")
    for typed in ("9", drawn):  # another value first, then back: each waits
        cell.fill(typed)
        cell.blur()
    settle(page)
    assert "edited" in cell.get_attribute("class")  # waiting, as any value typed then
    set_field(page, "d_model", 8)
    assert cell.input_value() == drawn and "edited" not in (cell.get_attribute("class") or "")
    assert "edits=" not in link(page)


def test_a_refused_lab_link_shows_no_figure_in_the_lab_until_it_is_fixed(page, server_url):
    link = "#mode=lab&d_model=8&n_heads=4&n_kv_heads=3&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat+sat&seed=0&stage=weights&head=3&query=2"
    page.goto(server_url + link)
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    # the lab stays open on the link's settings, the one refused marked, and the address keeps the link
    expect(page.get_by_role("button", name="Attention lab")).to_have_attribute("aria-pressed", "true")
    assert page.locator("#notice").inner_text() == (
        "This link's lab settings were rejected (n_heads=4 is not a multiple of n_kv_heads=3: each K/V head serves as many query heads"
        " as the others. Choose n_kv_heads from 1, 2, 4; or make n_heads a multiple of 3). They are in the lab below: change the ones"
        " marked, and the lab computes them."
    )
    assert page.get_by_label("n_kv_heads", exact=True).input_value() == "3"
    assert page.get_by_label("n_kv_heads", exact=True).get_attribute("aria-invalid") == "true"
    assert page.locator("#lab-error-n_kv_heads").inner_text() != ""
    assert page.locator("#app").is_hidden() and page.locator(".lab-values").is_hidden()
    page.wait_for_timeout(300)  # a link written when idle would have been written by now
    assert page.evaluate("() => location.hash") == link
    set_field(page, "n_kv_heads", 2)
    wait_kind(page, "GQA")
    page.wait_for_function("() => location.hash.includes('n_kv_heads=2') && !window.mhaExplorer.linkPending")
    # the link's view, waiting meanwhile, is the one shown once its settings compute
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 3 · query “sat”")
    assert "stage=weights&head=3&query=2" in page.evaluate("() => location.hash")
    assert page.locator("#app").is_visible() and page.locator(".lab-values").is_visible()
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["the", "cat", "sat"]
    # mended, the settings' refusal is no longer said
    assert page.locator("#notice").is_hidden() and page.locator("#notice").inner_text() == ""


def test_a_links_notice_speaks_in_its_own_mode_and_goes_once_the_view_is_changed(page, server_url):
    """A notice said of the teaching example's link stood over the lab and a real model, and after
    another head was picked; a lab link's refusal stood over the teaching example."""
    page.goto(server_url + "#head=5&stage=scores")
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    said = page.locator("#notice").inner_text()
    assert said.startswith("This link could not be used in full: head 5")
    page.get_by_role("button", name="Attention lab").click()
    wait_kind(page, "GQA")
    assert page.locator("#notice").is_hidden()  # not the lab's
    page.get_by_role("button", name="Teaching example").click()
    expect(page.locator("#notice")).to_be_visible()  # its view is back, and so is what was said of it
    assert page.locator("#notice").inner_text() == said
    # the lab's own view put back (a stage on from the teaching example's) is no change of this one's
    page.get_by_role("button", name="Attention lab").click()
    page.get_by_role("button", name="Next").click()
    page.get_by_role("button", name="Teaching example").click()
    page.get_by_role("button", name="Attention lab").click()
    expect(page.locator("#notice")).to_be_hidden()
    page.get_by_role("button", name="Teaching example").click()
    expect(page.locator("#notice")).to_have_text(said)
    page.get_by_label("Inspect head").select_option(label="Head 1")
    expect(page.locator("#notice")).to_be_hidden()  # picked: the link's head is history
    # a lab link refused: said in the lab, not over the teaching example; the lab opened again has
    # the link as its address (it had the teaching example's), and Back and Forward keep it
    refused = "#mode=lab&d_model=7&n_heads=2&tokens=a+b&seed=0"
    open_link(page, server_url + refused)
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    assert "lab settings were rejected" in page.locator("#notice").inner_text()
    page.get_by_role("button", name="Teaching example").click()
    expect(page.locator(".stage h2")).to_contain_text("query “like”")
    assert page.locator("#notice").is_hidden()
    page.wait_for_function("() => location.hash.startsWith('#mode=teaching')")
    page.get_by_role("button", name="Attention lab").click()
    page.wait_for_function("(link) => location.hash === link", arg=refused)
    expect(page.locator("#notice")).to_contain_text("lab settings were rejected")
    through_history(page, page.go_back)
    page.wait_for_function("() => location.hash.startsWith('#mode=teaching')")
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Attention lab").click()
    page.wait_for_function("(link) => location.hash === link", arg=refused)
    expect(page.get_by_label("d_model", exact=True)).to_have_value("7")


def test_a_line_break_or_tab_in_a_lab_links_tokens_parts_them(page, server_url):
    """"one two\nthree four\tfive" in a link (a text pasted into it by hand): "two" and "three" were
    run together, "twothree", with nothing said. A line break or a tab parts tokens, as in the lab's box."""
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=2&n_kv_heads=2&d_head=4&d_v=4&tokens=one+two%0Athree+four%09five&seed=0")
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('MHA · d_model 8')")
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["one", "two", "three", "four", "five"]
    assert page.locator("#notice").is_hidden()


def test_a_lab_link_without_tokens_takes_the_labs_own(page, server_url):
    """A link written by hand with a configuration and no tokens opens on the tokens the lab opens
    with, as #mode=lab alone does: it was refused, the Tokens box left empty and red."""
    page.goto(server_url + "#mode=lab&n_heads=4&n_kv_heads=2&d_model=8&d_head=2&d_v=2&stage=scores&head=3")
    wait_kind(page, "GQA")
    expect(page.locator(".stage h2")).to_contain_text("Scores · head 3 · query “cat”")  # the second token, as a link without a query opens
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["the @0", "cat", "sat", "on", "the @4", "mat"]
    assert page.locator("#notice").is_hidden()
    # tokens given empty are still refused, said mid-sentence without a capital
    open_link(page, server_url + "#mode=lab&n_heads=4&n_kv_heads=2&d_model=8&d_head=2&d_v=2&tokens=&seed=0")
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    assert page.locator("#notice").inner_text().startswith("This link's lab settings were rejected (type at least one token")


@pytest.mark.parametrize(
    "part, field, said",
    [
        ("d_model=-8", "d_model", "d_model -8 is out of range: type a whole number from 1 to 64."),
        ("seed=-1", "Seed", "The seed -1 is out of range: type a whole number from 0 to 4294967295."),
        # a typo, no number at all, as the lab takes one typed (it opened the teaching example)
        ("d_model=abc", "d_model", "“abc” is not a whole number: type d_model as one from 1 to 64."),
        ("seed=x1", "Seed", "“x1” is not a whole number: type the seed as one from 0 to 4294967295."),
        # too large for a number: said in its digits, not as JavaScript prints 1e+23
        ("d_model=99999999999999999999999", "d_model", "d_model 99999999999999999999… is out of range: type a whole number from 1 to 64."),
    ],
)
def test_a_negative_lab_setting_in_a_link_is_said_as_out_of_range_and_the_rest_kept(page, server_url, part, field, said):
    settings = dict(p.split("=") for p in "d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&tokens=a+b+c&seed=3".split("&"))
    key, value = part.split("=")
    settings[key] = value
    page.goto(server_url + "#mode=lab&" + "&".join(f"{k}={v}" for k, v in settings.items()))
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    assert "lab settings were rejected" in page.locator("#notice").inner_text()
    assert page.locator("#lab").is_visible()  # open on them, with no click
    assert page.get_by_label(field, exact=True).input_value() == value
    assert page.get_by_label("n_heads", exact=True).input_value() == "4"  # the link's, not a preset's
    assert page.locator(f"#lab-error-{key}").inner_text() == said


def test_a_negative_head_in_a_link_is_called_negative(page, server_url):
    page.goto(server_url + "#head=-1&stage=scores")
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    assert page.locator("#notice").inner_text() == "This link could not be used in full: head=“-1” is negative: it must be 0 or more (0 is used)."
    expect(page.locator(".stage h2")).to_contain_text("Scores · head 0")  # the rest of the link is used


@pytest.mark.parametrize(
    "fragment, said, shown",
    [
        ("#stage=scores&head=abc&what=1", "it has an unknown part “what” (left out); head=“abc” is not a whole number (0 is used)", "Scores · head 0 · query “like”"),
        ("#stage=weights&all=yes", "all=“yes” must be 0 or 1 (0 is used)", "Weights · head 0 · query “like”"),
        ("#stage=weights&head=99999999999999999999999", "head=“99999999999999999999…” is far too large (0 is used)", "Weights · head 0 · query “like”"),
        (
            "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&tokens=a+b+c&seed=3&causal=yes&edits=x:0,0=0.5;x:0,1=abc;zzz&stage=weights&head=1&query=2",
            "causal=“yes” must be 0 or 1 (0 is used); the edit of x at 0,1: “abc” is not a number: type one such as 0.5 or -1 (left out); the edit “zzz” is not of the form name:i,j=value (left out)",
            "Weights · head 1 · query “c”",
        ),
        ("#mode=lab&tokens=x+y+z&seed=5&causal=1", "it gives no d_model or n_heads (the GQA preset's settings are used where it gives none)", "Projections · head 0 · query “y”"),
        (
            "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&tokens=a+b+c&seed=3&W_Q:0,0,0=0.5&x:1,2=-1",
            "it has 2 edits outside edits= (left out): write them as “edits=W_Q:0,0,0=0.5;x:1,2=-1”",
            "Projections · head 0 · query “b”",
        ),
        (
            "#mode=lab&d_model=4&n_heads=2&n_kv_heads=2&d_head=2&d_v=2&causal=0&bias=0&tokens=cats+like+warm+tea+too&seed=0&values=example&stage=scores&head=1&query=1",
            "values=example, as its settings or its number of tokens are not the teaching example's (left out)",
            "Scores · head 1 · query “like”",
        ),
    ],
    ids=["a head no number, and a part unknown", "a flag no flag", "a head too large for a number", "lab settings kept past a bad flag and a bad edit", "a lab without its sizes", "edits outside edits=", "the example's values on other tokens"],
)
def test_a_links_part_that_cannot_be_read_is_left_out_and_the_rest_used(page, server_url, fragment, said, shown):
    """One bad part threw the whole link away for the teaching example: the lab's settings, tokens
    and good edits were lost, as a real model's text (below)."""
    page.goto(server_url + fragment)
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    assert page.locator("#notice").inner_text() == f"This link could not be used in full: {said}."
    expect(page.locator(".stage h2")).to_contain_text(shown)
    if "mode=lab" in fragment:
        settle(page)
        assert page.get_by_label("n_heads", exact=True).input_value() == ("2" if "n_heads=2" in fragment else "4")
        assert page.get_by_role("button", name="Attention lab").get_attribute("aria-pressed") == "true"
    if "edits" in fragment:
        assert page.locator('.edit-grid input[data-key="x:0,0"]').input_value() == "0.5"  # the good edit kept
        assert page.get_by_label("Tokens (separated by spaces)").input_value() == "a b c"
    if "tokens=x+y+z" in fragment:
        assert page.get_by_label("n_kv_heads", exact=True).input_value() == "2" and page.get_by_label("Tokens (separated by spaces)").input_value() == "x y z"


@pytest.mark.parametrize(
    "given, fields",
    [
        ("d_model=16&n_heads=2", {"n_kv_heads": "2", "d_head": "8", "d_v": "8"}),
        ("d_model=16&n_heads=4&d_head=2", {"n_kv_heads": "4", "d_head": "2", "d_v": "2"}),
        ("d_model=12&n_heads=3&n_kv_heads=1", {"n_kv_heads": "1", "d_head": "4", "d_v": "4"}),
    ],
)
def test_a_lab_link_may_leave_out_what_from_config_works_out(page, server_url, given, fields):
    """As Explorer.from_config takes a config: n_kv_heads = n_heads, d_head = d_model / n_heads,
    d_v = d_head, each from the settings before it (a lab link needed all five)."""
    page.goto(server_url + f"#mode=lab&{given}&tokens=a+b+c")
    wait_kind(page, "")
    settle(page)
    for name, value in fields.items():
        assert page.get_by_label(name, exact=True).input_value() == value, name
    assert page.locator("#notice").is_hidden() and page.locator("[id^='lab-error-']:not(:empty)").count() == 0


def test_a_lab_link_whose_width_the_heads_do_not_split_leaves_d_head_to_be_set(page, server_url):
    """from_config refuses d_model 10 over 4 heads without a d_head; the lab opens on the link, d_head marked."""
    page.goto(server_url + "#mode=lab&d_model=10&n_heads=4&tokens=a+b")
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    notice = page.locator("#notice").inner_text()
    assert "lab settings were rejected" in notice
    assert "it gives no d_head, and d_model 10 does not split evenly among 4 heads: type d_head and d_v in the lab." in notice, notice  # why d_head is blank
    assert page.get_by_label("d_model", exact=True).input_value() == "10" and page.get_by_label("n_heads", exact=True).input_value() == "4"
    assert page.get_by_label("d_head", exact=True).get_attribute("aria-invalid") == "true"


@pytest.mark.parametrize(
    "given, why",
    [
        ("d_model=abc&n_heads=2", "d_model “abc”, no whole number, cannot be split among the heads"),
        ("d_model=8&n_heads=two", "n_heads “two” is no whole number to split d_model 8 by"),
        ("d_model=8&n_heads=0", "n_heads 0 has no head to split d_model 8 among"),
        # (it gave d_head = d_v = 25000, two more fields to mend once d_model was)
        ("d_model=100000&n_heads=4", "d_model 100000 is outside the lab's widths, 1 to 64"),
        ("d_model=-8&n_heads=2", "d_model -8 is outside the lab's widths, 1 to 64"),
    ],
)
def test_a_lab_link_with_no_width_to_split_says_why_d_head_is_blank(page, server_url, given, why):
    """d_head comes from d_model and n_heads: where either is wrong, the notice says why d_head and
    d_v are blank, besides the wrong field's own message."""
    page.goto(server_url + f"#mode=lab&{given}&tokens=a+b")
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    notice = page.locator("#notice").inner_text()
    assert f"it gives no d_head, and {why}: type d_head and d_v in the lab." in notice, notice
    for name in ("d_head", "d_v"):  # blank, and said so
        assert page.get_by_label(name, exact=True).input_value() == "" and page.locator(f"#lab-error-{name}").inner_text() == f"{name} is empty: type a whole number from 1 to 64."


def test_the_shortest_link_to_the_example_in_the_lab_opens_it(page, server_url):
    """#mode=lab&values=example, written by hand, gave GQA's settings and then left the example out
    for them. With no settings or tokens, the example's own are taken."""
    picked = "(s) => s.options[s.selectedIndex].text"
    page.goto(server_url + "#mode=lab&values=example&stage=weights&head=1")
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('MHA')")
    settle(page)
    assert page.get_by_label("Preset").evaluate(picked) == "The teaching example, its own values"
    assert page.get_by_label("Tokens (separated by spaces)").input_value() == "cats like warm milk"
    assert page.locator("#notice").is_hidden()
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 1 · query “like”")
    teaching = TracePayload.model_validate(httpx.get(server_url + "api/example").json())
    check_numbers(page, ".stage", arrays_of(teaching))


def test_a_links_edit_that_does_not_fit_is_named_when_dropped(page, server_url):
    page.goto(server_url + LAB_LINK.replace("x:1,2=0.5", "x:9,0=1;x:1,2=0.5"))
    wait_kind(page, "GQA")
    settle(page)
    assert page.locator(".lab-status").inner_text() == "An edited value does not fit this configuration; it is set aside until it fits again: x row 9, column 0 (x is 3 × 8)."
    assert page.locator('.edit-grid input[data-key="x:1,2"]').input_value() == "0.5"


@pytest.mark.parametrize(
    "edit, said",
    [
        # past 64 tokens: said to be set aside "until it fits again", which no settings would
        ("x:99,0=1", "the edit of x at 99,0 lies outside the largest x the lab makes, 64 × 64 (left out)"),
        ("W_O:4096,0=1", "the edit of W_O at 4096,0 lies outside the largest W_O the lab makes, 4096 × 64 (left out)"),
    ],
)
def test_a_links_edit_that_no_settings_fit_is_left_out_and_said(page, server_url, edit, said):
    page.goto(server_url + LAB_LINK.replace("x:1,2=0.5", f"{edit};x:1,2=0.5"))
    wait_kind(page, "GQA")
    settle(page)
    expect(page.locator("#notice")).to_have_text(f"This link could not be used in full: {said}.")
    assert page.locator(".lab-status").inner_text() == ""  # nothing set aside
    assert page.locator('.edit-grid input[data-key="x:1,2"]').input_value() == "0.5"


def test_a_links_number_edited_twice_says_which_is_used(page, server_url):
    """x:0,0=1;x:0,0=2 showed 2, the 1 dropped without a word (a part given twice is refused aloud)."""
    page.goto(server_url + LAB_LINK.replace("x:1,2=0.5", "x:0,0=1;x:0,0=2"))
    wait_kind(page, "GQA")
    settle(page)
    assert page.locator('.edit-grid input[data-key="x:0,0"]').input_value() == "2"
    expect(page.locator("#notice")).to_have_text("This link could not be used in full: it edits x at 0,0 twice, to 1 and to 2 (2 is used).")
    # another value typed there: what the notice said of the link no longer stands
    cell = page.locator('.edit-grid input[data-key="x:0,0"]')
    cell.fill("0.3")
    cell.blur()
    settle(page)
    expect(page.locator("#notice")).to_be_hidden()


def test_edits_that_stop_fitting_are_set_aside_and_come_back(page, server_url):
    """Unchecking Bias, or taking tokens out, does not lose the values typed there: they come back
    with the settings they fit."""
    page.goto(server_url + LAB_LINK.replace("x:1,2=0.5", "x:2,0=0.75"))  # a b c; x's row 2 edited
    wait_kind(page, "GQA")
    settle(page)
    page.get_by_label("Bias", exact=True).check()
    settle(page)
    page.get_by_label("Edit the values of").select_option("b_O")
    cell = page.locator('.edit-grid input[data-key="b_O:3"]')
    cell.fill("1.5")
    cell.blur()
    settle(page)
    assert "b_O:3=1.5" in unquote(link(page))
    page.get_by_label("Bias", exact=True).uncheck()
    settle(page)
    expect(page.locator(".lab-status")).to_have_text("An edited value does not fit this configuration; it is set aside until it fits again: b_O column 3 (there is no b_O here).")
    assert "b_O" not in unquote(link(page))  # the link holds the values in use
    set_field(page, "Tokens (separated by spaces)", "a b")
    expect(page.locator(".lab-status")).to_have_text("An edited value does not fit this configuration; it is set aside until it fits again: x row 2, column 0 (x is 2 × 8).")
    page.get_by_label("Bias", exact=True).check()
    settle(page)
    expect(page.locator(".lab-status")).to_have_text("An edited value set aside fits again and is back: b_O column 3.")
    page.get_by_label("Edit the values of").select_option("b_O")
    assert page.locator('.edit-grid input[data-key="b_O:3"]').input_value() == "1.5"
    # back on another token's row: said, as for an edit kept when its token changes
    set_field(page, "Tokens (separated by spaces)", "a b zebra")
    expect(page.locator(".lab-status")).to_have_text(
        "An edited value set aside fits again and is back: x row 2, column 0. "
        "An edited value keeps its row and column numbers, which now stand for other tokens or components: x row 2, column 0."
    )
    assert "b_O:3=1.5" in unquote(link(page)) and "x:2,0=0.75" in unquote(link(page))
    # the numbers computed are those of the values back in place
    body = lab_state(page)
    body["edits"] = {"b_O:3": 1.5, "x:2,0": 0.75}
    payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=body).json())
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    check_numbers(page, ".stage", arrays_of(payload))
    # drawing new values replaces every edit, those set aside too, and says how many
    page.get_by_label("Bias", exact=True).uncheck()
    settle(page)
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    page.get_by_role("button", name="Draw new values").click()
    settle(page)
    assert asked == ["Drawing new values replaces the 2 values you edited (1 set aside). Go on?"]
    page.get_by_label("Bias", exact=True).check()
    settle(page)
    assert "edits=" not in unquote(link(page)) and page.locator(".lab-status").inner_text() == ""


def test_a_preset_keeps_the_tokens_and_seed_typed(page, server_url):
    open_lab(page, server_url)
    set_field(page, "Tokens (separated by spaces)", "we like green tea")
    set_field(page, "Seed", 7)
    page.get_by_label("Preset").select_option("mqa")
    wait_kind(page, "MQA")
    settle(page)
    assert page.get_by_label("Tokens (separated by spaces)").input_value() == "we like green tea"
    assert page.get_by_label("Seed").input_value() == "7"
    state = lab_state(page)
    assert state["tokens"] == ["we", "like", "green", "tea"] and state["seed"] == 7 and state["config"]["n_kv_heads"] == 1
    expect(page.get_by_label("Query token").locator("option")).to_have_text(["we", "like", "green", "tea"])


def test_edits_kept_where_their_rows_now_mean_other_tokens_or_components_are_named(page, server_url):
    """An edit keeps its row and column numbers: a token taken out, or another d_v, moves what
    they stand for, and the status line says which edits that touched."""
    page.goto(server_url + LAB_LINK)  # x:1,2 edited: the row of token 1
    wait_kind(page, "GQA")
    settle(page)
    tokens = page.get_by_label("Tokens (separated by spaces)")
    words = tokens.input_value().split()
    tokens.fill(" ".join(words + ["d"]))  # a token added at the end: row 1 is the same token
    tokens.blur()
    settle(page)
    assert page.locator(".lab-status").inner_text() == ""
    tokens.fill(" ".join(words[1:] + ["z"]))  # the first token out: row 1 is now another token
    tokens.blur()
    settle(page)
    assert page.locator(".lab-status").inner_text() == "An edited value keeps its row and column numbers, which now stand for other tokens or components: x row 1, column 2."
    assert page.locator('.edit-grid input[data-key="x:1,2"]').input_value() == "0.5"
    set_field(page, "Seed", 4)  # nothing moves: only that the edit stays over the new seed's values is said
    assert page.locator(".lab-status").inner_text() == "Your edited value stays over seed 4's values; Draw new values replaces it."


def test_each_stage_that_reads_keys_or_values_says_whose_a_shared_head_reads(page, server_url):
    base = "#mode=lab&d_model=8&n_heads=4&n_kv_heads={kv}&d_head=2&d_v=2&causal=1&bias=0&tokens=a+b+c+d&seed=0&head=3&query=2&stage={stage}"
    said = {2: "Head 3's keys and values come from K/V head 1, shared with head 2.", 1: "Head 3's keys and values come from K/V head 0, shared with heads 0, 1, 2."}
    for kv, sentence in said.items():
        for stage, title in (("scores", "Scores"), ("mask", "Mask"), ("weights", "Weights"), ("mixing", "Value mixing")):
            page.goto(server_url + base.format(kv=kv, stage=stage))
            page.wait_for_function("(t) => document.querySelector('.stage h2')?.textContent.includes(t)", arg=title)
            wait_kind(page, "GQA" if kv == 2 else "MQA")
            assert sentence in page.locator(".stage p.lead").all_inner_texts(), (kv, stage)
    open_link(page, server_url + base.format(kv=4, stage="scores"))  # MHA: every head has its own
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('MHA')")
    assert "keys and values come from" not in page.locator(".stage").inner_text()


def test_the_arithmetic_says_it_leaves_the_biases_out(page, server_url):
    total = page.locator("table.cost tr.total td.counted")
    said = "the biases' additions, one per number of q, k, v and y, are not counted"
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=1&tokens=a+b+c&seed=0")
    expect(total).to_contain_text(said)  # waits for the lab's trace (the teaching example has no biases)
    # the total is bold; the long sentence on how it was added is not (on a phone it runs to eight lines)
    weights = page.locator("table.cost tr.total td").evaluate_all("(cells) => cells.map((c) => getComputedStyle(c).fontWeight)")
    assert weights == ["700", "400"], weights
    page.get_by_label("Bias").uncheck()
    expect(total).not_to_contain_text(said)
    assert total.text_content().startswith("every stage's row added")


def test_a_links_bad_cell_is_said_with_one_full_stop(page, server_url):
    page.goto(server_url + LAB_LINK.replace("0.5", "abc"))
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    notice = page.locator("#notice").inner_text()
    assert "“abc” is not a number" in notice and ".." not in notice


def test_one_token_is_counted_as_one_and_an_encoders_cache_is_said_to_be_a_decoders(page, server_url):
    open_lab(page, server_url)
    page.get_by_label("Causal mask").uncheck()
    settle(page)
    set_field(page, "Tokens (separated by spaces)", "only")
    page.get_by_text("Cost of this configuration", exact=True).click()
    costs = page.locator(".costs").inner_text()
    assert "1 tokens" not in costs and "float16, 1 token" in costs and "Arithmetic for n = 1 token" in costs
    title = page.locator(".costs .table-title").inner_text()
    assert title.startswith("A layer without the causal mask, as here, sees every token at once and keeps no KV cache; as a causal decoder")
    assert title.endswith("per K/V head per token.")  # a sentence, with its full stop
    # ...set as one: four lines of bold on a phone read as a heading
    assert page.locator(".costs .table-title").evaluate("(p) => getComputedStyle(p).fontWeight") == "400"


def test_a_lab_value_float32_could_hold_is_given_in_full_as_it_is(page, server_url):
    """The lab computes in float64: a value that float32 happens to hold exactly keeps its own
    digits in full, not float32's shortest spelling of it."""
    page.goto(server_url + LAB_LINK.replace("x:1,2=0.5", "x:0,1=0.10000000149011612"))
    wait_kind(page, "GQA")
    settle(page)
    assert page.locator('.stage [data-src="x:0,1"]').first.get_attribute("data-full") == "0.10000000149011612"


# every map of the stage has its canvas; the maps whose readout says how to read a map
MAPS = """() => {
  const figures = [...document.querySelectorAll('.stage figure.heatmap-figure')];
  return {
    maps: figures.length,
    drawn: figures.filter((f) => f.querySelector('.heatmap-box canvas.heatmap')).length,
    hinted: figures.filter((f) => f.querySelector('.readout').textContent.startsWith('Point at a cell')).length,
  };
}"""


def test_every_query_at_projections_draws_every_map_and_says_once_how_to_read_them(page, server_url):
    """A head's K and V maps are shared by its queries' panels: the maps after them (the packed
    view's) keep their own canvases, and only the first map of a panel says how to read a map."""
    tokens = "+".join(f"t{i}" for i in range(32))
    page.goto(server_url + f"#mode=lab&d_model=32&n_heads=4&n_kv_heads=4&d_head=8&d_v=8&causal=0&bias=0&tokens={tokens}&seed=0&stage=projections&head=0&query=0")
    wait_kind(page, "MHA")
    settle(page)
    page.get_by_text("Packed view: all heads in one matrix").click()
    for query in ("t1", "t2", "t3", "t0"):
        page.get_by_label("Query token").select_option(label=query)
        expect(page.locator(".stage h2")).to_contain_text(f"query “{query}”")
        maps = page.evaluate(MAPS)
        assert maps["maps"] >= 6 and maps["drawn"] == maps["maps"] and maps["hinted"] == 1, (query, maps)


def test_a_value_waiting_for_the_settings_outlives_a_visit_to_another_mode(page, server_url):
    open_lab(page, server_url)
    set_field(page, "d_model", "")
    cell = page.locator('.edit-grid input[data-key="x:0,1"]')
    cell.fill("5")
    cell.blur()
    page.get_by_role("button", name="Teaching example").click()
    expect(page.locator(".stage h2")).to_contain_text("“like”")
    page.get_by_role("button", name="Attention lab").click()
    wait_kind(page, "GQA")  # the last good result
    settle(page)
    assert page.locator("#lab-error-d_model").inner_text() != ""  # the form still says what is wrong
    assert cell.input_value() == "5"
    assert cell.locator("xpath=following-sibling::span[contains(@class, 'cell-error')]").inner_text().startswith("Not used yet")
    # the preset menu's arrow keys move through the presets without asking, as with any edit
    asked = []
    page.on("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.get_by_label("Preset").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert asked == []
    page.get_by_label("Preset").evaluate("(s) => s.blur()")  # applies the preset reached: it asks once
    assert len(asked) == 1
    set_field(page, "d_model", 8)
    assert cell.input_value() == "5" and "edited" in cell.get_attribute("class")
    assert "x%3A0%2C1%3D5" in link(page) or "x:0,1=5" in link(page)


def test_on_a_phone_a_wide_maps_caption_and_readout_stay_in_sight(browser, server_url):
    """A map wider than a phone scrolls in its box; its caption, legend and readout wrap at the
    box's width and stay in sight wherever the map is scrolled, as does the figure's opening line."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    tokens = "+".join(f"tok{i}" for i in range(12))
    page.goto(server_url + f"#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens={tokens}&seed=0&stage=weights&head=3&query=5&all=1")
    page.wait_for_selector(".stage canvas.heatmap")
    texts = ".stage .heatmap-figure > figcaption, .stage .heatmap-figure > .heatmap-legend, .stage .heatmap-figure > .readout, .stage p.lead"
    assert page.locator(".stage p.lead").first.inner_text().startswith("Every query at once")
    inside = """(selector) => {
      const box = document.querySelector('.stage .figure').getBoundingClientRect();
      return [...document.querySelectorAll(selector)].map((e) => e.getBoundingClientRect()).every((r) => r.left >= box.left - 1 && r.right <= box.right + 1);
    }"""
    # the maps scroll, each in its own box; the stage's figure, and its text, stays put
    scrollers = ".stage .figure .heatmap-figure"
    assert page.evaluate("(s) => [...document.querySelectorAll(s)].some((f) => f.scrollWidth > f.clientWidth)", scrollers)
    assert page.evaluate("() => { const f = document.querySelector('.stage .figure'); return f.scrollWidth <= f.clientWidth; }")
    assert page.evaluate(inside, texts)
    page.evaluate("(s) => { for (const f of document.querySelectorAll(s)) f.scrollLeft = f.scrollWidth; }", scrollers)
    page.evaluate(NEXT_FRAME)
    assert page.evaluate(inside, texts)
    page.close()


def test_the_rows_of_w_o_of_many_heads_are_named_in_a_round_step(page, server_url):
    """W^O of 64 heads one row each, drawn as a map, has room for a name every few rows: they ran
    head 0, 3, 5, 7, as they fitted, and heads 1 and 2 seemed to be missing. They go in a round
    step of heads now, as the rows of a long text's maps do."""
    page.add_init_script("""(() => {
        window.written = [];
        const fillText = CanvasRenderingContext2D.prototype.fillText;
        CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) { window.written.push(String(text)); return fillText.call(this, text, ...rest); };
    })()""")
    tokens = "+".join(f"w{i}" for i in range(4))
    page.goto(server_url + f"#mode=lab&d_model=64&n_heads=64&n_kv_heads=64&d_head=1&d_v=1&tokens={tokens}&seed=0&stage=output&head=0")
    page.wait_for_selector(".stage canvas.heatmap")
    page.wait_for_function("() => window.written.some((t) => t.startsWith('head '))")
    heads = [int(t.split()[1]) for t in page.evaluate("window.written") if re.fullmatch(r"head \d+", t)]
    assert heads, heads
    named = sorted(set(heads))
    step = named[1] - named[0]
    assert named[0] == 0 and step in (1, 2, 5, 10, 20) and named == list(range(0, 64, step))[: len(named)] and len(named) >= 64 // step - 1, named


def test_on_a_phone_a_long_token_wraps_in_its_tables_and_notes(browser, server_url):
    """A token of 49 letters (64 are allowed) named a row 416 px wide on a 390 px phone: the row's
    numbers lay off the screen, never beside its name. It wraps in its row's name now, as in the
    bars, and in a rounding note's lines; the tables fit the stage. A word that fits stays whole:
    the table squeezed "because" to "becaus" and "e" on the next line."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    tokens = "supercalifragilisticexpialidocious_and_more_words+because+Ω+x"
    for stage in ("scores", "weights", "mixing"):
        page.goto(server_url + f"#mode=lab&d_model=8&n_heads=2&n_kv_heads=2&d_head=4&d_v=4&causal=0&bias=0&tokens={tokens}&seed=0&stage={stage}&head=0&query=1")
        page.wait_for_selector(".stage table.calc-table tbody th .tok")
        names = page.locator(".stage table.calc-table tbody th .tok").evaluate_all("(ts) => ts.map((t) => t.getBoundingClientRect().width)")
        assert max(names) <= 0.35 * 390 + 1, (stage, names)
        lines = page.locator(".stage table.calc-table tbody th .tok").evaluate_all("(ts) => ts.map((t) => Math.round(t.getBoundingClientRect().height / parseFloat(getComputedStyle(t).lineHeight)))")
        assert lines[1] == 1 and lines[0] > 1, (stage, lines)  # "because" on one line; the long one wraps
        fits = page.evaluate("() => [...document.querySelectorAll('.stage table.calc-table, .stage .hint.misses .miss')].map((e) => e.getBoundingClientRect().right <= document.querySelector('.stage').getBoundingClientRect().right + 1)")
        assert all(fits), (stage, fits)
    page.close()


def test_on_a_phone_a_wide_tables_caption_wraps_short_of_the_fade(browser, server_url):
    """A table wider than a phone fades at the box's right edge (more to scroll): its caption,
    read at rest, wraps before that fade."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat+sat+on+the+mat+all+day&seed=0&stage=weights&head=3&query=5&all=1")  # 8 keys: wider than a phone
    expect(page.locator(".stage h2")).to_contain_text("query “mat”")  # the lab's view, not the teaching example drawn first
    page.wait_for_selector(".stage table.matrix caption")
    figure = page.locator(".stage .figure")
    assert figure.evaluate("(f) => f.scrollWidth > f.clientWidth && getComputedStyle(f).maskImage !== 'none'")
    right = figure.evaluate("(f) => f.getBoundingClientRect().left + f.clientWidth")
    caption = page.locator(".stage table.matrix caption").evaluate("(c) => c.getBoundingClientRect().right")
    assert caption <= right - 24 + 0.5, (caption, right)
    page.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_a_bad_cells_message_is_all_in_sight_wherever_its_cell_is(browser, server_url, width):
    """A bad cell's message opens under it, as wide as the grid's box shows (narrower than its
    usual 30em on a phone), moved left where the cell is near the box's right side."""
    page = browser.new_page(viewport={"width": width, "height": 844})
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=2&n_kv_heads=2&d_head=4&d_v=4&causal=0&bias=0&tokens=a+b+c&seed=0")
    page.wait_for_selector(".edit-grid input")
    in_sight = """(message) => {
      const box = message.closest('.grid-box'), b = box.getBoundingClientRect(), r = message.getBoundingClientRect();
      const names = box.querySelector('.grid-row .row-head').getBoundingClientRect().right;
      return { inside: r.left >= names - 1 && r.right <= b.left + box.clientLeft + box.clientWidth + 1 && r.width > 100, left: r.left, right: r.right, names, box: [b.left, b.right] };
    }"""
    for column in (0, 4, 7):
        cell = page.locator(f'.edit-grid input[data-key="x:1,{column}"]')
        cell.scroll_into_view_if_needed()
        cell.fill("a rather long typo")
        cell.blur()
        message = cell.locator("xpath=following-sibling::span[contains(@class, 'cell-error')]")
        expect(message).to_contain_text("is not a number")
        placed = message.evaluate(in_sight)
        assert placed["inside"], (column, placed)
    page.close()


def test_a_printed_lab_leaves_its_form_out_and_prints_the_link_that_reproduces_the_view(page, server_url, artifacts):
    page.goto(server_url + "#mode=lab&d_model=4&n_heads=2&n_kv_heads=2&d_head=2&d_v=2&causal=1&tokens=we+like+tea&seed=0&stage=weights&edits=x%3A0%2C1%3D0.5")
    expect(page.locator(".stage h2")).to_contain_text("4. Weights · head 0 · query “like”")  # the lab's view (causal: a Mask stage first)
    settle(page)
    page.emulate_media(media="print")
    shown = lambda selector: page.locator(selector).first.evaluate("(e) => getComputedStyle(e).display") != "none"  # noqa: E731
    assert not shown("#lab") and not shown("footer .screen-only")
    assert shown("#print-link") and shown(".mha-explorer .stage")
    pdf = page.pdf()
    assert page.locator("#print-link").inner_text() == f"This view: {page.url}" and "edits=x" in page.url
    (artifacts / "lab-print.pdf").write_bytes(pdf)
    page.emulate_media(media="screen")
    assert shown("#lab") and shown("#lab .lab-row") and not shown("#print-link")


SEEN_NOT_MASKED = "#mode=lab&d_model=8&n_heads=4&n_kv_heads=4&d_head=2&d_v=2&causal=0&bias=0&tokens=the+cat+sat+on+the+mat&seed=0&stage=weights&head=0&query=1&edits="


def test_a_weight_that_underflows_to_zero_is_not_called_masked(page, server_url):
    """Without a mask, a key whose eˢ underflows gets a weight of exactly 0: it is still a key the
    query sees, not a masked one."""
    edits = ";".join(f"x:1,{c}={20 if c % 2 else -20}" for c in range(8))  # cat's row: its own score is -1651.80
    page.goto(server_url + SEEN_NOT_MASKED + edits)
    wait_kind(page, "MHA")
    settle(page)
    cat = page.locator(".stage table.softmax tbody tr").nth(1)
    assert cat.locator("td").all_inner_texts()[::2] == ["-1651.80", "÷ 4.29×10²¹"]  # s, then the sum: its eˢ underflowed
    assert cat.locator("td").last.inner_text() == "0.00"
    assert page.locator(".stage .bar-row.masked, .stage tr.masked").count() == 0


def test_scores_too_large_for_their_exponential_are_shifted_by_the_largest(page, server_url):
    """e^s of a score of 4.81e99 is past any float: the softmax by hand takes the largest score off
    first, says so, and lands on the layer's weights."""
    page.goto(server_url + SEEN_NOT_MASKED + "x:1,0=1e50")
    wait_kind(page, "MHA")
    settle(page)
    table = page.locator(".stage table.softmax")
    assert "Infinity" not in table.inner_text() and "NaN" not in table.inner_text()
    expect(table.locator("caption")).to_contain_text("the largest score, m = 4.81e99, is taken off first (the weights stay the same)")
    assert table.locator("thead th").all_inner_texts() == ["key", "scaled score\u00a0s", "e^(s − m)", "÷ Σ", "weight"]
    shifted = [row[1] for row in (r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all())]
    assert shifted == ["0.000", "1.000", "0.000", "0.000", "0.000", "0.000"]
    body = lab_state(page) | {"edits": {"x:1,0": 1e50}}
    payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=body).json())
    check_numbers(page, ".stage", arrays_of(payload))
    # three scores of 709, each eˢ a number but their sum past the largest: shifted too
    one = "#mode=lab&d_model=1&n_heads=1&n_kv_heads=1&d_head=1&d_v=1&causal=0&bias=0&tokens=a+b+c&seed=0&stage=weights&query=0"
    open_link(page, server_url + one + "&edits=x:0,0=1;x:1,0=1;x:2,0=1;W_Q:0,0,0=709;W_K:0,0,0=1;W_V:0,0,0=1;W_O:0,0=1")
    expect(table.locator("caption")).to_contain_text("m = 709.00, is taken off first")
    assert "Infinity" not in table.inner_text() and "the weight of" not in page.locator(".stage").inner_text()  # no row said to miss
    assert [r.locator("td").all_inner_texts()[1] for r in table.locator("tbody tr").all()] == ["1.000", "1.000", "1.000"]


def test_tokens_typed_before_the_teaching_example_come_back_with_the_next_preset(page, server_url):
    """The teaching example's preset put its own tokens in place of those typed, and the next
    preset kept the example's: what was typed was gone. Typed again meanwhile, the new ones stay."""
    open_lab(page, server_url)
    set_field(page, "Tokens (separated by spaces)", "one two three four five")
    page.get_by_label("Preset").select_option("example")
    wait_kind(page, "MHA")
    settle(page)
    tokens = page.get_by_label("Tokens (separated by spaces)")
    assert tokens.input_value() == "cats like warm milk"
    page.get_by_label("Preset").select_option("mha")
    settle(page)
    assert tokens.input_value() == "one two three four five"
    assert page.get_by_label("Query token").locator("option").all_inner_texts()[:2] == ["one", "two"]
    page.get_by_label("Preset").select_option("example")
    settle(page)
    set_field(page, "Tokens (separated by spaces)", "red green blue")
    page.get_by_label("Preset").select_option("gqa")
    settle(page)
    assert tokens.input_value() == "red green blue"


def test_the_teaching_example_opens_in_the_lab_with_its_own_values(page, server_url):
    """A preset brings the teaching example into the lab, its numbers the same to the last digit,
    so that one of them can be changed; its own values are not marked as the user's edits."""
    open_lab(page, server_url)
    cell = page.locator('.edit-grid input[data-key="x:0,0"]')  # an edit of the user's, which the example replaces
    cell.fill("0.25")
    cell.blur()
    settle(page)
    # an edit on another preset: the example, picked, brings its own values, as its entry says
    assert page.locator("#lab-preset option[value=example]").inner_text() == "The teaching example, its own values"
    page.get_by_label("Query token").select_option(label="sat")  # position 2, "warm" in the example
    page.get_by_label("Inspect head").select_option(label="Head 3")
    page.once("dialog", lambda d: d.accept())
    page.get_by_label("Preset").select_option("example")
    wait_kind(page, "MHA")
    settle(page)
    # replaced, not "kept at the same numbers"; the tokens typed before are said to come back
    assert page.locator(".lab-status").inner_text() == "The teaching example brings its own tokens; yours, “the cat sat on the mat”, come back with the next preset you pick."
    # the example's own view: query "like" and head 0, as on its first screen, not position 2 kept
    assert "head 0 · query “like”" in page.locator(".stage h2").inner_text()
    assert page.get_by_label("Preset").input_value() == "example"
    picked = "(select) => select.selectedOptions[0].text"
    assert page.get_by_label("Preset").evaluate(picked) == "The teaching example, its own values"
    assert page.get_by_label("Tokens (separated by spaces)").input_value() == "cats like warm milk"
    assert page.locator(".edit-grid input.edited").count() == 0
    example = TracePayload.model_validate(httpx.get(server_url + "api/example").json())
    arrays = arrays_of(example)
    page.get_by_label("Query token").select_option(label="like")
    for head in ("Head 0", "Head 1"):
        page.get_by_label("Inspect head").select_option(label=head)
        for title in page.get_by_label("Calculation stage").locator("option").all_inner_texts():
            page.get_by_label("Calculation stage").select_option(label=title)
            check_numbers(page, ".stage", arrays)
    # another seed draws other values, but the example's stay: every one of them, even those the
    # first seed happened to draw alike
    set_field(page, "Seed", 5)
    assert page.get_by_label("Preset").input_value() == "example" and page.locator(".edit-grid input.edited").count() == 0
    check_numbers(page, ".stage", arrays)
    set_field(page, "Seed", 0)
    # one number of W^O changed: that cell alone is marked, and the output is computed with it
    page.get_by_label("Edit the values of").select_option("W_O")
    cell = page.locator('.edit-grid input[data-key="W_O:0,0"]')
    cell.fill("2")
    cell.blur()
    settle(page)
    assert page.locator(".edit-grid input.edited").count() == 1 and "edited" in cell.get_attribute("class")
    assert page.get_by_label("Preset").input_value() == "example"  # still the example, one value changed
    assert page.get_by_label("Preset").evaluate(picked) == "The teaching example, with your edits"
    # the link holds the example by name and the one value changed (all 80 ran to 3,500 characters),
    # and opened again it asks the server for the very trace on screen
    url = link(page)
    assert "values=example" in url and unquote(url).split("edits=")[1].split("&")[0] == "W_O:0,0=2" and len(url) < 300, url
    other = page.context.new_page()
    reopened = []
    other.on("request", lambda r: r.url.endswith("api/trace") and reopened.append(json.loads(r.post_data)))
    other.goto(url)
    other.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('MHA')")
    settle(other)
    assert other.get_by_label("Preset").evaluate(picked) == "The teaching example, with your edits"
    other.get_by_label("Edit the values of").select_option("W_O")
    assert other.locator(".edit-grid input.edited").count() == 1 and other.locator("#notice").is_hidden()
    body = {key: value for key, value in reopened[-1].items() if key != "encoding"}  # (the page asks for binary)
    assert body["edits"]["W_O:0,0"] == 2 and len(body["edits"]) == 80  # the example's 80 values, one changed
    payload = TracePayload.model_validate(httpx.post(server_url + "api/trace", json=body).json())
    assert to_numpy(payload.weights["W_O"])[0, 0] == 2
    other.close()
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    check_numbers(page, ".stage", arrays_of(payload))
    # another preset asks about the one value changed, not about the example's own
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.get_by_label("Preset").select_option("mha")
    assert asked == ["A preset replaces the 1 value you edited. Go on?"]
    # new values drawn: the example's go (picking it again brings them back), and the menu says so
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Draw new values").click()
    settle(page)
    assert page.get_by_label("Preset").input_value() == "" and "edits=" not in link(page)


def test_the_teaching_example_with_a_token_renamed_stays_the_example(page, server_url):
    """A token of the example renamed takes the example's row of x: its values stay the example's,
    not the user's edits (said as such, not counted), and the link still names the example."""
    open_lab(page, server_url)
    page.get_by_label("Preset").select_option("example")
    wait_kind(page, "MHA")
    settle(page)
    edit(page, "W_O", "W_O:0,0", "2")
    set_field(page, "Tokens (separated by spaces)", "cats like hot milk")
    assert page.locator(".lab-status").inner_text() == "The teaching example's values stay in place: x row 2 (“warm”'s) is now “hot”'s."
    picked = "(select) => select.selectedOptions[0].text"
    assert page.get_by_label("Preset").evaluate(picked) == "The teaching example, with your edits"
    page.get_by_label("Edit the values of").select_option("x")
    assert page.locator(".edit-grid input.edited").count() == 0
    example = arrays_of(TracePayload.model_validate(httpx.get(server_url + "api/example").json()))
    assert [float(page.locator(f'.edit-grid input[data-key="x:2,{m}"]').input_value()) for m in range(4)] == example["x"][2].tolist()
    # the link names the example and the one value changed, and opens on the same
    url = link(page)
    assert "values=example" in url and "tokens=cats+like+hot+milk" in url and unquote(url).split("edits=")[1].split("&")[0] == "W_O:0,0=2", url
    other = page.context.new_page()
    other.goto(url)
    wait_kind(other, "MHA")
    settle(other)
    assert other.get_by_label("Preset").evaluate(picked) == "The teaching example, with your edits"
    assert other.locator("#notice").is_hidden()
    for matrix, edited in (("x", 0), ("W_O", 1)):
        other.get_by_label("Edit the values of").select_option(matrix)
        assert other.locator(".edit-grid input.edited").count() == edited
    other.close()
    # the user's own edit on a renamed token's row is said as theirs
    edit(page, "x", "x:3,0", "0.75")
    set_field(page, "Tokens (separated by spaces)", "cats like hot tea")
    assert page.locator(".lab-status").inner_text() == (
        "An edited value keeps its row and column numbers, which now stand for other tokens or components: x row 3, column 0. "
        "The teaching example's values stay in place: x row 3 (“milk”'s) is now “tea”'s."
    )


def test_on_a_phone_a_grid_rows_label_is_level_with_its_cells(browser, server_url):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat+sat+on+the+mat&seed=0")
    wait_kind(page, "GQA")
    middles = page.evaluate("""() => [...document.querySelectorAll('.edit-grid .grid-row')].slice(0, 3).map((row) => {
        const text = document.createRange();
        text.selectNodeContents(row.querySelector('.row-head'));
        const t = text.getBoundingClientRect(), cell = row.querySelector('input').getBoundingClientRect();
        return [t.top + t.height / 2, cell.top + cell.height / 2, cell.height];
    })""")
    for label, cell, height in middles:
        assert height >= 44 and abs(label - cell) <= 3, middles  # cells a finger tall, each label beside its cells' middle
    # a touch screen is not told about keys it has not got
    assert not page.locator(".grid-caption .grid-keys").is_visible() and page.locator(".grid-caption").is_visible()
    context.close()


def test_on_a_phone_a_grid_wider_than_its_box_fades_at_the_right_while_more_lies_there(browser, server_url):
    """A phone shows no scrollbar until the grid is touched: its last column, cut at the box's
    edge, fades, and stops fading once the grid is scrolled to its end. A grid that fits has none."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(server_url + "#mode=lab")
    wait_kind(page, "GQA")
    box = page.locator(".grid-box").first
    fade = "(b) => getComputedStyle(b).maskImage"
    assert box.evaluate("(b) => b.scrollWidth > b.clientWidth") and "linear-gradient" in box.evaluate(fade)
    box.evaluate("(b) => { b.scrollLeft = b.scrollWidth; }")
    page.wait_for_function(f"() => ({fade})(document.querySelector('.grid-box')) === 'none'")
    page.get_by_label("Edit the values of").select_option("W_Q:0")  # 8 rows of 2: it fits
    page.wait_for_function("() => !document.querySelector('.edit-grid [data-key^=\"x:\"]')")
    assert box.evaluate("(b) => b.scrollWidth <= b.clientWidth") and box.evaluate(fade) == "none"
    context.close()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(server_url + "#mode=lab")
    wait_kind(page, "GQA")
    box = page.locator(".grid-box").first
    assert box.evaluate("(b) => b.scrollWidth <= b.clientWidth") and box.evaluate(fade) == "none"
    page.close()


def test_a_labs_projections_keep_to_one_line_on_a_laptop(page, server_url):
    """The lab's default (an 8-wide x, six tokens) at 1366 px: X × W = K is one line, its cells a
    little closer than the teaching example's, which keeps its own spacing."""
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(server_url + "#mode=lab")
    page.wait_for_selector(".mha-explorer .stage h2")
    one_line = """() => [...document.querySelectorAll('.stage .equation:not(details .equation)')].map((e) =>
        e.getBoundingClientRect().height <= Math.max(...[...e.children].map((c) => c.getBoundingClientRect().height)) + 1)"""
    assert page.evaluate(one_line) == [True, True, True]
    assert page.locator(".stage .equation.many-columns:not(details .equation)").count() == 3
    page.get_by_role("button", name="Teaching example").click()
    page.wait_for_function("() => document.querySelector('.stage h2').textContent.includes('“like”')")
    assert page.locator(".stage .equation:not(details .equation)").count() == 3
    assert page.locator(".stage .equation.many-columns").count() == 0  # its packed view too
    padding = page.locator(".stage .equation table.matrix td").first.evaluate("(td) => getComputedStyle(td).paddingLeft")
    assert padding == "6px" and page.evaluate(one_line) == [True, True, True]


def test_the_breakdown_of_a_projection_sits_under_the_numbers_that_can_be_pointed_at(page, server_url):
    """Twelve tokens with d_head 16 and d_v 2: K is a map (no numbers), V a table. The breakdown of a
    number pointed at stays below V, and the hint names q and V only; with V a map too, it sits
    under q and names q alone."""
    tokens = "+".join(f"t{i}" for i in range(12))
    page.goto(server_url + f"#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=16&d_v=2&tokens={tokens}&stage=projections")
    page.wait_for_selector(".mha-explorer .stage h2")
    order = "(p) => [...p.parentElement.children].filter((e) => e === p || e.matches('.equation')).map((e) => (e === p ? 'calc' : 'equation'))"
    calc = page.locator(".stage .figure p.calc")
    assert calc.evaluate(order) == ["equation", "equation", "equation", "calc"]
    assert calc.inner_text() == "Point at a number of q or V to see the row of X and the column of W that made it."
    page.locator(".stage .num[data-src^='v:']").first.hover()
    assert calc.inner_text().startswith("v[t0][0] = ")
    open_link(page, server_url + f"#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=16&d_v=16&tokens={tokens}&stage=projections")
    page.wait_for_function("() => document.querySelector('.stage .figure p.calc')?.textContent.startsWith('Point at a number of q to')")
    assert calc.evaluate(order) == ["equation", "calc", "equation", "equation"]


def test_undo_my_edits_brings_back_the_values_before_them(page, server_url):
    """A teacher who changed numbers gets the values back in one press: the seed's, or the
    teaching example's own, with those set aside; the button shows only while there are edits."""
    open_lab(page, server_url)
    undo = page.get_by_role("button", name="Undo my edits")
    expect(undo).to_be_hidden()
    cell = page.locator('.edit-grid input[data-key="x:0,0"]')
    drawn = cell.input_value()
    edit(page, "x", "x:0,0", "0.25")
    expect(undo).to_be_visible()
    assert "edits=" in link(page)
    undo.focus()
    page.keyboard.press("Enter")
    settle(page)
    assert cell.input_value() == drawn and page.locator(".edit-grid input.edited").count() == 0
    assert "edits=" not in link(page)
    expect(undo).to_be_hidden()
    assert page.evaluate("() => document.activeElement.textContent") == "Draw new values"  # the focus stays beside it
    assert page.locator(".lab-status").inner_text().endswith("Your edits are undone: the seed's values are back.")  # said, in a status region
    # on the teaching example's own values: back to those (not the seed's), one edit set aside too
    page.get_by_label("Preset").select_option("example")
    wait_kind(page, "MHA")
    settle(page)
    example = TracePayload.model_validate(httpx.get(server_url + "api/example").json())
    edit(page, "W_O", "W_O:0,0", "2")
    set_field(page, "Tokens (separated by spaces)", "cats like warm milk now")
    settle(page)
    edit(page, "x", "x:4,0", "3")
    set_field(page, "Tokens (separated by spaces)", "cats like warm milk")  # x[4] is set aside
    settle(page)
    undo.click()
    settle(page)
    assert page.get_by_label("Preset").input_value() == "example" and page.locator(".edit-grid input.edited").count() == 0
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    check_numbers(page, ".stage", arrays_of(example))  # the example's numbers, to the last digit
    set_field(page, "Tokens (separated by spaces)", "cats like warm milk now")
    settle(page)
    assert page.locator('.edit-grid input[data-key="x:4,0"]').input_value() != "3"  # the value set aside went too


def test_every_query_at_the_mask_greys_the_minus_infinities_its_caption_calls_grey(page, server_url):
    """The All queries table of the Mask stage says "grey = −∞": every −∞ cell is striped grey, the
    query's row too, and no other cell is."""
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat+sat+on+the+mat&seed=0&stage=mask&head=0&query=1")
    page.wait_for_selector(".mha-explorer .stage h2")
    settle(page)
    page.get_by_role("button", name="All queries").click()
    table = page.locator(".stage table.matrix").filter(has=page.locator("caption", has_text="grey = −∞"))
    cells = table.locator("tbody td").evaluate_all(
        "tds => tds.map(td => [td.textContent, getComputedStyle(td).backgroundImage.startsWith('repeating-linear-gradient')])"
    )
    assert len(cells) == 36 and sum(text == "−∞" for text, _ in cells) == 15  # 6 tokens: 5 + 4 + ... + 0 keys after each query
    assert all(grey == (text == "−∞") for text, grey in cells), cells


def test_a_long_token_in_the_weights_bars_keeps_to_one_line_and_the_bars_stay_aligned(page, server_url):
    """The label column is as wide as its longest label needs (up to 14em): "extraordinarily" was
    cut mid-word into "extraordina / rily" by a fixed 7em column. Every bar still starts at one x."""
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=0&bias=0&tokens=the+extraordinarily+cat&seed=0&stage=weights&head=0&query=2")
    page.wait_for_selector(".mha-explorer .stage h2")
    settle(page)
    rows = page.locator(".stage .bars .bar-row").evaluate_all(
        "rows => rows.map(r => { const t = r.querySelector('.tok'); return [t.textContent, t.getClientRects().length === 1 && t.getBoundingClientRect().height < 1.6 * parseFloat(getComputedStyle(t).lineHeight), Math.round(r.querySelector('.bar-track').getBoundingClientRect().left)]; })"
    )
    assert [text for text, _, _ in rows] == ["the", "extraordinarily", "cat"]
    assert all(one_line for _, one_line, _ in rows), rows
    assert len({left for _, _, left in rows}) == 1, rows


def test_a_weight_set_aside_is_named_as_the_grid_names_its_cell(page, server_url):
    """W_Q[3,0,0] read as three bare numbers; the status line names the head, row and column, as the
    grid's cells are named (their names now say the head too)."""
    open_lab(page, server_url)  # GQA: 4 query heads
    page.get_by_label("Edit the values of").select_option(label="W_Q head 3")
    cell = page.get_by_label("W_Q head 3, row 0, column 0", exact=True)
    cell.fill("0.5")
    cell.blur()
    settle(page)
    set_field(page, "n_kv_heads", 1)
    set_field(page, "n_heads", 2)
    assert page.locator(".lab-status").inner_text() == (
        "An edited value does not fit this configuration; it is set aside until it fits again: "
        "W_Q head 3, row 0, column 0 (W_Q is 2 heads of 8 × 2)."
    )


def test_a_head_or_stage_the_settings_took_away_comes_back_with_them(page, server_url):
    """Head 3 of 4 heads, then 2 heads: head 0 is shown; 4 heads again: head 3 again (it stayed at 0).
    The Mask stage, the mask unchecked and checked again, likewise. A head picked meanwhile wins."""
    open_lab(page, server_url)  # GQA: 4 heads, 2 K/V heads, causal
    page.get_by_label("Inspect head").select_option("3")
    page.get_by_label("Calculation stage").select_option(label="Mask")
    set_field(page, "n_kv_heads", 1)
    set_field(page, "n_heads", 2)
    assert page.get_by_label("Inspect head").input_value() == "0"
    # said, not done silently: what went, what stands in for it, and that it comes back
    status = page.locator(".lab-status")
    assert status.inner_text() == "Not in these settings: head 3 (head 0 is shown). It comes back with the first settings that have it."
    set_field(page, "n_heads", 4)
    assert page.get_by_label("Inspect head").input_value() == "3" and "head=3" in link(page)
    assert "Mask" in page.locator(".stage h2").inner_text() and status.inner_text() == ""
    # the mask unchecked on its stage: the stage before it, Scores (the scaled scores it would
    # have masked), not the first; other settings changed meanwhile keep it there
    page.get_by_label("Causal mask", exact=True).uncheck()
    settle(page)
    assert "Scores" in page.locator(".stage h2").inner_text()
    assert status.inner_text() == "Not in these settings: the Mask stage (Scores is shown). It comes back with the first settings that have it."
    set_field(page, "Seed", 5)
    assert "Scores" in page.locator(".stage h2").inner_text()
    page.get_by_label("Causal mask", exact=True).check()
    settle(page)
    assert "Mask" in page.locator(".stage h2").inner_text()
    set_field(page, "n_heads", 2)
    page.get_by_label("Inspect head").select_option("1")  # picked meanwhile: kept
    set_field(page, "n_heads", 4)
    assert page.get_by_label("Inspect head").input_value() == "1"
    # a pick that comes back to the stand-in is a pick too: Mask, no mask (Scores), Projections,
    # Scores again, the mask again: Scores stays
    page.get_by_label("Calculation stage").select_option(label="Mask")
    page.get_by_label("Causal mask", exact=True).uncheck()
    settle(page)
    page.get_by_label("Calculation stage").select_option(label="Projections")
    page.get_by_label("Calculation stage").select_option(label="Scores")
    page.get_by_label("Causal mask", exact=True).check()
    settle(page)
    assert "Scores" in page.locator(".stage h2").inner_text()


def test_what_was_typed_is_said_back_cut_with_an_ellipsis_and_kept_apart_from_the_message(page, server_url):
    """A cell of 400 nines was said back as 1e20 (cut silently) "is too large: keep it under 1e100".
    A direction override typed before a cell's text (U+202E) turned the whole message around, and a
    token holding one turned the headings around its name: each is isolated (U+2068 ... U+2069)."""
    open_lab(page, server_url)
    cell = page.locator('.edit-grid input[data-key="x:1,2"]')
    message = cell.locator("xpath=following-sibling::span[contains(@class, 'cell-error')]")
    cell.fill("9" * 400)
    cell.blur()
    expect(message).to_have_text("99999999999999999999… is too large to compute with: keep it under 1e100.")
    cell.fill("\u202e5 abc")
    cell.blur()
    expect(message).to_have_text("“\u2068\u202e5 abc\u2069” is not a number: type one such as 0.5 or -1.")
    cell.fill("\u2069\u202e5 abc")  # a closing isolate of its own would end the isolation early: left out
    cell.blur()
    expect(message).to_have_text("“\u2068\u202e5 abc\u2069” is not a number: type one such as 0.5 or -1.")
    cell.fill("0.5")
    cell.blur()
    settle(page)
    set_field(page, "Tokens (separated by spaces)", "\u202eabc def")
    wait_kind(page, "GQA")
    page.get_by_label("Query token").select_option(index=0)
    expect(page.locator(".stage h2")).to_contain_text("query “\u2068\u202eabc\u2069”")
    assert page.locator(".outputs h2, .outputs h3").first.inner_text().endswith("“\u2068\u202eabc\u2069”")
    # the status that says a query went away names it so too
    set_field(page, "Tokens (separated by spaces)", "a b \u202ezz")
    page.get_by_label("Query token").select_option(index=2)
    set_field(page, "Tokens (separated by spaces)", "a")
    expect(page.locator(".lab-status")).to_contain_text("the query at position 2 “\u2068\u202ezz\u2069” (“a” is shown)")


def test_a_lab_links_tokens_with_a_broken_escape_are_used_as_read_and_said_to_be_damaged(page, server_url):
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens=cats+%E0%A4%A+milk&seed=0")
    wait_kind(page, "GQA")
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: its tokens have a broken %-escape (the link was cut, or changed by hand), read as “\ufffd”: copy the link again from where it was made."
    )
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["cats", "\ufffd%A", "milk"]
    open_link(page, server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens=100%+sure&seed=0")
    wait_kind(page, "GQA")
    assert page.locator("#notice").is_hidden()  # a "%" that starts no escape is the token's own


def test_the_lab_says_whether_the_heads_split_the_models_width(page, server_url):
    open_lab(page, server_url)  # GQA: d_model 8, 4 heads of 2
    note = page.locator(".lab-widths")
    assert note.inner_text() == "n_heads × d_head = 4 × 2 = 8 = d_model: the heads split the model's width, as in most real layers."
    set_field(page, "d_model", 10)
    wait_kind(page, "d_model 10")
    assert note.inner_text().startswith("n_heads × d_v = 4 × 2 = 8, not d_model 10: concat is 8 wide, and WO maps it back to 10. Most real layers split")
    set_field(page, "d_model", 8)
    set_field(page, "d_head", 4)
    wait_kind(page, "d_head 4")
    assert note.inner_text().startswith("n_heads × d_v = 4 × 2 = 8 = d_model, but d_head 4 is its own: each head's q and k are 4 wide.")
    # settings that cannot be used: the figure keeps the last good ones, but the note, beside the
    # fields, would contradict the field just typed; it comes back with the next good settings
    set_field(page, "n_heads", 3)
    assert page.locator("#lab-error-n_heads").is_visible() and note.is_hidden()
    set_field(page, "n_heads", 4)
    expect(note).to_be_visible()
    assert note.inner_text().startswith("n_heads × d_v = 4 × 2 = 8 = d_model, but d_head 4")


def test_kv_head_counts_that_do_not_fit_say_which_to_choose_and_one_head_is_said_as_one(page, server_url):
    open_lab(page, server_url)  # GQA: 4 heads, 2 K/V heads
    set_field(page, "n_kv_heads", 8)
    assert page.locator("#lab-error-n_kv_heads").inner_text() == (
        "n_kv_heads=8 is more than n_heads=4: a layer has at most as many K/V heads as query heads."
        " Choose n_kv_heads from 1, 2, 4; or make n_heads a multiple of 8."
    )
    assert page.get_by_label("n_kv_heads", exact=True).input_value() == "8"  # what was typed stays
    # shrinking the heads below the K/V heads: said where it was typed, with both ways out
    set_field(page, "n_kv_heads", 2)
    wait_kind(page, "GQA")
    set_field(page, "n_heads", 1)
    assert page.locator("#lab-error-n_heads").inner_text().endswith("Choose n_kv_heads from 1; or make n_heads a multiple of 2.")
    # one head: "1 head", and its cost table has no MQA row beside MHA, as the two are one layer
    set_field(page, "n_kv_heads", 1)
    wait_kind(page, "MHA")
    assert "· 1 head ·" in page.locator(".outputs .hint").inner_text()
    assert page.locator(".cost tr[data-kind]").evaluate_all("rows => rows.map((r) => r.querySelector('th').textContent)") == ["MHA (this)"]
    # two query heads on one K/V head: "both", not "all 2"
    set_field(page, "n_heads", 2)
    wait_kind(page, "MQA")
    page.get_by_label("Calculation stage").select_option(label="Projections")
    assert "but both query heads share one key matrix and one value matrix" in page.locator(".stage").first.inner_text()
    # a whole number written with a decimal point is that number
    set_field(page, "d_head", "4.0")
    wait_kind(page, "d_head 4")
    assert page.locator("#lab-error-d_head").inner_text() == ""


def test_on_a_phone_a_long_label_leaves_the_bars_room_and_wide_tables_scroll_each_in_its_own_box(browser, server_url):
    """At 390 px: a label column as wide as "supercalifragilisticexpialidocious_token" left the bars
    22 px; it takes at most 40% of the row. A 16-wide lab's tables (x, W, q) each scroll in their
    own box, the equation's first one too: the figure itself does not scroll sideways."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(server_url + "#mode=lab&d_model=8&n_heads=2&n_kv_heads=2&d_head=4&d_v=4&causal=1&bias=0&tokens=the+supercalifragilisticexpialidocious_token+cat+sat&seed=0&stage=weights&head=0&query=2")
        page.wait_for_selector(".mha-explorer .stage h2")
        settle(page)
        tracks = page.locator(".stage .bars .bar-track").evaluate_all("(ts) => ts.map((t) => t.getBoundingClientRect().width)")
        assert len(tracks) == 4 and min(tracks) > 80, tracks
        open_link(page, server_url + "#mode=lab&d_model=16&n_heads=2&n_kv_heads=2&d_head=8&d_v=8&causal=0&bias=0&tokens=the+cat+sat&seed=0&stage=projections&head=0&query=0")
        page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('Projections')")
        settle(page)
        figure = page.locator(".stage .figure").evaluate("(f) => [f.scrollWidth, f.clientWidth]")
        assert figure[0] <= figure[1], figure
        first = page.locator(".stage .equation > table.matrix").first.evaluate("(t) => [t.scrollWidth, t.clientWidth]")
        assert first[0] > first[1], first  # x of 16 numbers scrolls by itself
    finally:
        page.close()


def test_a_links_edit_of_other_indices_than_its_array_has_is_named_as_written(page, server_url):
    """W_Q:5 (one index of three) cannot be named "W_Q head 5, column …": it is named as the link
    wrote it, and left out, as no settings fit it (it was set aside "until it fits again")."""
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens=a+b+c&seed=0&edits=W_Q:5=1;x:1,2,3=0.5")
    page.wait_for_selector(".mha-explorer .stage h2")
    settle(page)
    assert page.locator(".lab-status").inner_text() == ""
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: the edit of W_Q at 5 names 1 index, where W_Q takes 3 (left out);"
        " the edit of x at 1,2,3 names 3 indices, where x takes 2 (left out)."
    )


def test_the_current_stage_tab_wraps_no_more_than_the_others(browser, server_url):
    """Seven stages at 1366 px: "7 Output projection" fits its tab in the others' weight; in bold,
    as the current stage, it wrapped onto two lines, the one tab taller than the rest."""
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    try:
        page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=1&tokens=the+cat+sat&seed=0&stage=output&head=0&query=2")
        page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.startsWith('7. Output projection')")
        heights = page.locator(".steps button").evaluate_all("(bs) => bs.map((b) => [b.textContent, b.getAttribute('aria-current'), Math.round(b.getBoundingClientRect().height)])")
        assert len(heights) == 7 and heights[-1][1] == "step"
        assert len({height for _, _, height in heights}) == 1, heights
        line = page.locator(".steps button").last.evaluate("(b) => parseFloat(getComputedStyle(b).lineHeight)")
        assert heights[-1][2] < 2 * line + 10, heights  # one line and its padding
    finally:
        page.close()


# every label a map writes, with the map it is written on: window.labelsOf.get(canvas)
RECORD_CANVAS_TEXT = """(() => {
  const fill = CanvasRenderingContext2D.prototype.fillText;
  window.labelsOf = new Map();
  CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
    if (!window.labelsOf.has(this.canvas)) window.labelsOf.set(this.canvas, []);
    window.labelsOf.get(this.canvas).push(String(text));
    return fill.call(this, text, ...rest);
  };
})()"""


def test_a_thin_rowed_maps_row_labels_come_in_a_round_step_with_none_left_out(browser, server_url):
    """W^Q of d_model 64 is a map of 5 px rows: its labels read 0, 4, 6, 8, … (the 2 fell under the
    0, moved down inside the map, and was left out). They come in a round step now, all of them."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    try:
        page.add_init_script(RECORD_CANVAS_TEXT)
        page.goto(server_url + "#mode=lab&d_model=64&n_heads=8&n_kv_heads=8&d_head=8&d_v=8&causal=0&bias=0&tokens=a+b+c&seed=0&stage=projections&head=0&query=0")
        page.wait_for_selector(".mha-explorer .stage h2")
        settle(page)
        page.locator(".stage details.folded-map summary").first.click()  # (a W of 64 rows is folded to a line)
        figure = page.locator(".stage figure.heatmap-figure", has=page.locator("figcaption", has_text="W")).first
        figure.wait_for()
        labels = figure.locator("canvas.heatmap").evaluate("(c) => window.labelsOf.get(c) ?? []")
        numbers = [int(x) for x in labels if x.isdigit()]
        assert numbers[:3] == [0, 5, 10], labels  # 5 px rows and 8 px labels: one in five rows
        step = numbers[1] - numbers[0]
        assert numbers == list(range(0, 64, step))[: len(numbers)] and len(numbers) >= 64 // step - 1, labels
    finally:
        page.close()


def test_the_teaching_example_keeps_its_place_while_the_lab_is_shown(page, server_url):
    """A teacher who shows the lab mid-lesson comes back to the stage, head and query left, as the
    lab and a real model do; it was the first view again. Reset example still gives that."""
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_label("Calculation stage").select_option(label="Weights")
    page.get_by_label("Inspect head").select_option(label="Head 1")
    page.get_by_label("Query token").select_option(label="milk")
    expect(page.locator(".stage h2")).to_have_text("3. Weights · head 1 · query “milk”")
    page.get_by_role("button", name="Attention lab").click()
    wait_kind(page, "GQA")
    page.get_by_role("button", name="Teaching example").click()
    expect(page.locator(".stage h2")).to_have_text("3. Weights · head 1 · query “milk”")
    page.wait_for_function("() => !location.hash.includes('mode=lab') && ['stage=weights', 'head=1', 'query=3'].every((part) => location.hash.includes(part))")
    page.get_by_role("button", name="Reset example").click()
    expect(page.locator(".stage h2")).to_have_text("1. Projections · head 0 · query “like”")


def test_another_seed_keeps_the_edits_and_says_so(page, server_url):
    """Draw new values asks before it replaces the edits; a seed typed keeps them over its values,
    which it did in silence."""
    open_lab(page, server_url)
    edit(page, "x", "x:0,1", "0.5")
    set_field(page, "Seed", 5)
    assert page.locator(".lab-status").inner_text() == "Your edited value stays over seed 5's values; Draw new values replaces it."
    assert page.locator('.edit-grid input[data-key="x:0,1"]').input_value() == "0.5" and "seed=5" in link(page)
    set_field(page, "Seed", 6)  # still kept, still said
    assert page.locator(".lab-status").inner_text().startswith("Your edited value stays over seed 6's values")


def test_a_focused_grid_cell_has_its_ring_inside_where_no_neighbour_covers_it(page, server_url):
    open_lab(page, server_url)
    cell = page.locator(".edit-grid input").nth(1)
    cell.click()
    ring = cell.evaluate("(c) => [c.matches(':focus-visible'), getComputedStyle(c).outlineOffset, getComputedStyle(c).outlineWidth]")
    assert ring == [True, "-3px", "3px"], ring


@pytest.mark.parametrize("width", [390, 1366])
def test_a_settings_message_is_under_its_setting_on_a_phone_and_under_the_row_elsewhere(browser, server_url, width):
    """On a phone the settings' row wraps into four lines: d_model's message came under the last
    of them, about 250 px below the field (out of sight with the keyboard open). It comes right
    under d_model's own line now; a wide screen keeps the messages under the whole row."""
    page = browser.new_page(viewport={"width": width, "height": 844})
    try:
        open_lab(page, server_url)
        field = page.get_by_label("d_model", exact=True)
        field.fill("2,5")
        field.blur()
        message = page.locator("#lab-error-d_model")
        expect(message).to_have_text("“2,5” is not a whole number: type d_model as one from 1 to 64.")
        under = message.bounding_box()["y"] - (field.bounding_box()["y"] + field.bounding_box()["height"])
        lowest = max(b["y"] + b["height"] for b in (page.get_by_label(name, exact=True).bounding_box() for name in ("d_v", "Seed")))
        if width == 390:
            assert 0 <= under < 12 and message.bounding_box()["y"] < lowest, (under, lowest)
        else:
            assert message.bounding_box()["y"] >= lowest, (message.bounding_box(), lowest)  # under the whole row, as before
    finally:
        page.close()


def test_every_querys_table_breaks_a_keys_heading_only_before_its_name(page, server_url):
    """On a phone, All queries' table of weights has narrow columns: a key's heading wraps between
    "key 0" and its quoted name, never inside the name. A repeated token ("the", at 0 and 4) is
    named there as the one-query maps name a key: its position said once, in "key 4"."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_lab(page, server_url)
    page.get_by_label("Calculation stage").select_option(label="Weights")
    page.get_by_role("button", name="All queries").click()
    lines = page.locator(".stage table.matrix thead th").evaluate_all("""(cells) => cells.filter((th) => th.textContent.includes("“")).map((th) => {
      const text = th.firstChild, start = text.data.indexOf("“");
      const name = document.createRange();
      name.setStart(text, start);
      name.setEnd(text, text.data.length);
      return [th.textContent, new Set([...name.getClientRects()].map((r) => Math.round(r.top))).size];
    })""")
    assert len(lines) == 6 and all(count == 1 for _, count in lines), lines
    assert [text.replace("\u00a0", " ") for text, _ in lines] == ["key 0 “the”", "key 1 “cat”", "key 2 “sat”", "key 3 “on”", "key 4 “the”", "key 5 “mat”"]
    rows = page.locator(".stage table.matrix tbody th").all_inner_texts()
    assert rows[0] == "the @0" and rows[4] == "the @4", rows  # a row is a query: named as the menu names it


def test_cells_typed_while_a_run_computes_are_all_kept(page, server_url):
    """Each cell typed starts a run; one typed before the last came back was built on the edits
    that had landed, so the run before it (and its cell) was dropped: the grid showed six edits,
    the figure and the link one."""
    open_lab(page, server_url)
    keys = ["x:0,0", "x:0,1", "x:1,0", "x:2,3"]
    page.evaluate(
        """(keys) => keys.forEach((key, i) => {  // one after the other, none waiting for a run to land
            const cell = document.querySelector(`.edit-grid input[data-key="${key}"]`);
            cell.value = String(1.25 + i);
            cell.dispatchEvent(new Event("change", { bubbles: true }));
        })""",
        keys,
    )
    settle(page)
    shown = link(page)
    for i, key in enumerate(keys):
        assert f"{key}={1.25 + i}" in shown.replace("%3A", ":").replace("%2C", ",").replace("%3D", "="), (key, shown)
    # every value typed is in the x the figure was computed from
    x = page.evaluate("() => { const x = window.mhaExplorer.model.get('payload').stages.x; return { shape: x.shape, data: Array.from(x.data) }; }")
    cols = x["shape"][1]
    values = [x["data"][int(key[2:].split(",")[0]) * cols + int(key.split(",")[1])] for key in keys]
    assert values == [1.25 + i for i in range(len(keys))], values


def test_a_link_to_the_teaching_examples_values_opens_as_that_preset(page, server_url, browser):
    """The example's own values travel in a link as 80 edits: a colleague's page counted them all as
    the user's, and Undo threw the example away for seed 0's values."""
    open_lab(page, server_url)
    page.get_by_label("Preset").select_option("example")
    wait_kind(page, "MHA")
    settle(page)
    edit(page, "W_O", "W_O:0,0", "0.3")
    shared = link(page)
    other = browser.new_page()
    try:
        other.goto(shared)
        other.wait_for_selector("#lab .edit-grid")
        settle(other)
        assert other.get_by_label("Preset").input_value() == "example"
        asked = []
        other.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
        other.get_by_role("button", name="Draw new values").click()
        assert asked == ["Drawing new values replaces the 1 value you edited. Go on?"]
        other.get_by_role("button", name="Undo my edits").click()
        settle(other)
        # back to the example's own values, not a seed's
        assert other.get_by_label("Preset").input_value() == "example"
        example = TracePayload.model_validate(httpx.get(server_url + "api/example").json())
        w_o = other.evaluate("() => Array.from(window.mhaExplorer.model.get('payload').weights.W_O.data)")
        np.testing.assert_array_equal(np.array(w_o).reshape(4, 4), arrays_of(example)["W_O"])
    finally:
        other.close()


def test_small_lab_mends_a_typeset_minus_a_tiny_value_a_bad_seed_and_the_bias_in_the_summary(page, server_url):
    open_lab(page, server_url)
    # a minus sign as typeset (copied from a paper) is a minus
    edit(page, "x", "x:0,0", "\u22120.5")
    assert "x:0,0=-0.5" in link(page).replace("%3A", ":").replace("%2C", ",").replace("%3D", "=")
    # a value below float64's smallest is said, not made 0 in silence
    cell = page.locator('.edit-grid input[data-key="x:0,1"]')
    cell.fill("1e-400")
    cell.blur()
    message = cell.locator("xpath=following-sibling::span[contains(@class, 'cell-error')]")
    assert message.inner_text() == "1e-400 is too small for a computer's numbers (it would be 0): type 0, or a larger one, such as 1e-300."
    # Draw new values with a seed that is no number keeps it as typed, and says why nothing was drawn
    seed = page.get_by_label("Seed", exact=True)
    seed.fill("abc")
    page.get_by_role("button", name="Draw new values").click()
    assert seed.input_value() == "abc" and seed.get_attribute("aria-invalid") == "true"
    assert page.evaluate("() => document.activeElement.id") == seed.get_attribute("id")
    # ...and so with another setting wrong: nothing is drawn, the wrong field keeps its text
    set_field(page, "Seed", 0)
    set_field(page, "d_model", "x")
    page.get_by_role("button", name="Draw new values").click()
    assert seed.input_value() == "0" and page.get_by_label("d_model", exact=True).input_value() == "x"
    assert page.evaluate("() => document.activeElement.id") == page.get_by_label("d_model", exact=True).get_attribute("id")
    # the line that tells configurations apart names the bias
    set_field(page, "d_model", 8)
    page.get_by_label("Bias").check()
    settle(page)
    assert page.locator(".outputs .hint").inner_text().endswith(" · causal · bias")


def test_while_a_setting_is_wrong_the_preset_menu_names_none_and_picking_one_applies_it(page, server_url):
    """It showed "GQA: 4 query heads, 2 K/V heads" beside n_kv_heads 3, and picking GQA then did nothing."""
    open_lab(page, server_url)
    assert page.get_by_label("Preset").input_value() == "gqa"
    set_field(page, "n_kv_heads", 3)
    assert page.get_by_label("n_kv_heads", exact=True).get_attribute("aria-invalid") == "true"
    assert page.get_by_label("Preset").input_value() == ""
    page.get_by_label("Preset").select_option("gqa")
    settle(page)
    assert page.get_by_label("n_kv_heads", exact=True).input_value() == "2"
    assert page.get_by_label("n_kv_heads", exact=True).get_attribute("aria-invalid") is None
    assert page.get_by_label("Preset").input_value() == "gqa"


def test_a_cell_typed_before_one_the_server_refuses_is_still_used(page, server_url):
    """Cell A's run is overtaken by cell B's, which carries A too; the server refuses B (scores past
    float64 only together). A was then in neither the figure nor the link, though marked edited."""
    open_lab(page, server_url)
    edit(page, "W_Q:0", "W_Q:0,0,0", "9e99")
    edit(page, "W_K:0", "W_K:0,0,0", "9e99")
    page.get_by_label("Edit the values of").select_option("x")
    page.evaluate(
        """() => [["x:1,1", "0.5"], ["x:0,0", "9e99"]].forEach(([key, value]) => {
            const cell = document.querySelector(`.edit-grid input[data-key="${key}"]`);
            cell.value = value;
            cell.dispatchEvent(new Event("change", { bubbles: true }));
        })"""
    )
    refused = page.locator('.edit-grid input[data-key="x:0,0"]')
    expect(refused).to_have_attribute("aria-invalid", "true")
    settle(page)
    shown = link(page).replace("%3A", ":").replace("%2C", ",").replace("%3D", "=")
    assert "x:1,1=0.5" in shown and "x:0,0=" not in shown, shown
    x = page.evaluate("() => { const x = window.mhaExplorer.model.get('payload').stages.x; return Array.from(x.data).slice(0, x.shape[1] * 2); }")
    assert x[8 + 1] == 0.5 and x[0] != 9e99
    page.console_errors[:] = [e for e in page.console_errors if "status of 422" not in e]  # the browser logs the refusal


def test_the_values_menu_names_a_head_with_its_own_k_and_v_a_head(page, server_url):
    """Under MHA each head has its own W^K and W^V: the menu and the cells said "K/V head" as under
    GQA, where the explorer says "head"."""
    open_lab(page, server_url)
    menu = page.get_by_label("Edit the values of")
    assert "W_K K/V head 1" in menu.locator("option").all_inner_texts()  # GQA: 2 K/V heads
    page.get_by_label("Preset").select_option("mha")
    wait_kind(page, "MHA")
    settle(page)
    options = menu.locator("option").all_inner_texts()
    assert "W_K head 1" in options and "W_V head 0" in options and not any("K/V" in o for o in options), options
    menu.select_option("W_K:1")
    assert page.locator('.edit-grid input[data-key="W_K:1,0,0"]').get_attribute("aria-label").startswith("W_K head 1, ")


def test_a_table_wider_than_the_stage_scrolls_by_itself_its_caption_in_sight(page, server_url):
    """At 911 px (a 1366 px laptop at 150%) the lab's 8 output components make the table of each
    head's contribution wider than the stage: the whole figure scrolled sideways, the explanation
    under it too, and the table's caption was cut at the figure's edge. The table scrolls by
    itself, and its caption wraps to the width in sight and stays there."""
    page.set_viewport_size({"width": 911, "height": 900})
    open_lab(page, server_url)
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    page.wait_for_selector(".stage table.contributions")
    box = page.evaluate("""() => {
      const table = document.querySelector(".stage table.contributions"), scroller = table.parentElement, figure = table.closest(".figure");
      scroller.scrollLeft = scroller.scrollWidth;
      const [caption, edge] = [table.caption.getBoundingClientRect(), figure.getBoundingClientRect()];
      const names = [...table.tBodies[0].rows].map((row) => row.cells[0].getBoundingClientRect());
      return { wider: table.offsetWidth > figure.clientWidth, scrolls: scroller.scrollWidth > scroller.clientWidth && scroller.scrollLeft > 0,
               figureStill: figure.scrollWidth <= figure.clientWidth, caption: [caption.left >= edge.left - 0.5, caption.right <= edge.right + 0.5],
               names: names.every((name) => Math.abs(name.left - scroller.getBoundingClientRect().left) < 1) };
    }""")
    # the rows' names ("head 0 (inspected)") stay in sight too, at the table's left edge
    assert box == {"wider": True, "scrolls": True, "figureStill": True, "caption": [True, True], "names": True}, box


@pytest.mark.parametrize("n_heads", [12, 20, 64])
def test_the_output_charts_legend_names_each_head_it_colours_without_overlap(page, server_url, n_heads):
    """Past 16 heads the colours would repeat (head 0 and head 16 alike): the inspected head keeps its
    own and the others are one grey, said so in the legend. Its entries never run into each other
    ("head 12 (h12" was cut by the next one)."""
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(server_url + f"#mode=lab&d_model=8&n_heads={n_heads}&n_kv_heads=1&d_head=2&d_v=2&causal=1&bias=1&tokens=the+cat+sat+on&seed=0&head=3&query=3&stage=output")
    page.wait_for_selector(".chart-figure svg")
    labels = page.locator(".chart-figure svg text.label").evaluate_all(
        "(ts) => ts.filter((t) => !/^y\\[/.test(t.textContent)).map((t) => { const r = t.getBBox(); return [t.textContent, r.x, r.y, r.x + r.width, r.y + r.height]; })"
    )
    names = [label[0] for label in labels]
    if n_heads <= 16:
        assert names == [f"head {i} (h{i})" for i in range(n_heads)] + ["bias bᴼ (b)", "total y"]
    else:
        assert names == ["head 3 (h3)", f"the other {n_heads - 1} heads", "bias bᴼ (b)", "total y"]
        grey = page.locator(".chart-figure .seg-rect.other-head").count()
        assert grey == (n_heads - 1) * 8 + 1  # every other head a segment of its own in each of y's 8 rows, and the legend's key
    for a, b in itertools.combinations(labels, 2):
        apart = a[3] + 14 <= b[1] or b[3] + 14 <= a[1] or a[4] <= b[2] or b[4] <= a[2]  # 14: the next entry's key
        assert apart, (a, b)


def test_a_setting_typed_says_it_waits_for_enter_until_it_is_used(page, server_url):
    """A number typed is used on Enter or when the focus leaves (16 passes through 1 on the way):
    until then the line under the settings says so, in place of how the old widths add up."""
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat+sat&seed=0")
    page.wait_for_selector(".mha-explorer .stage h2")
    note = page.locator(".lab-widths")
    expect(note).to_have_text(re.compile(r"^n_heads × d_head = 4 × 2 = 8 = d_model"))
    heads = page.get_by_label("n_heads", exact=True)
    heads.fill("2")
    expect(note).to_have_text("Press Enter, or leave the field, to use what you typed.")
    assert "n_heads=4" in page.evaluate("location.hash")  # nothing used yet
    heads.fill("4")  # back to the value in use: nothing waits
    expect(note).to_have_text(re.compile(r"^n_heads × d_head = 4 × 2 = 8 = d_model"))
    page.get_by_label("Tokens (separated by spaces)").fill("the cat sat down")
    expect(note).to_have_text("Press Enter, or leave the field, to use what you typed.")
    page.get_by_label("Tokens (separated by spaces)").press("Enter")
    page.wait_for_function("() => location.hash.includes('tokens=the+cat+sat+down')")
    expect(note).to_have_text(re.compile(r"^n_heads × d_head = 4 × 2 = 8 = d_model"))
    # a number used as read ("07" is seed 7): nothing waits after it, whatever else is typed and undone
    seed = page.get_by_label("Seed")
    seed.fill("07")
    seed.press("Enter")
    page.wait_for_function("() => location.hash.includes('seed=7')")
    tokens = page.get_by_label("Tokens (separated by spaces)")
    tokens.press("End")
    tokens.press_sequentially("x")
    expect(note).to_have_text("Press Enter, or leave the field, to use what you typed.")
    tokens.press("Backspace")
    expect(note).to_have_text(re.compile(r"^n_heads × d_head = 4 × 2 = 8 = d_model"))
    # refused on Enter: its message says why, and nothing is said to wait for Enter
    page.get_by_label("n_kv_heads", exact=True).fill("3")
    page.get_by_label("n_kv_heads", exact=True).press("Enter")
    expect(page.locator("#lab-error-n_kv_heads")).not_to_be_empty()
    tokens.press_sequentially("y")
    tokens.press("Backspace")
    expect(note).to_be_hidden()


def test_a_lab_link_without_a_query_starts_at_the_second_token_as_the_labs_button_does(page, server_url):
    """The first token under a causal mask sees only itself (under MQA every head's z alike): a link
    that names no query opens on the second, as the lab opened from its button keeps the example's."""
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=1&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat+sat+on&seed=0&stage=weights")
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.startsWith('4. Weights')")
    assert page.evaluate("() => window.mhaExplorer.model.get('query')") == 1
    expect(page.get_by_label("Query token")).to_have_value("1")
    open_link(page, server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=1&d_head=2&d_v=2&causal=1&bias=0&tokens=alone&seed=0")
    page.wait_for_function("() => document.querySelector('.stage h2') !== null && window.mhaExplorer.model.get('payload').tokens[0] === 'alone'")
    assert page.evaluate("() => window.mhaExplorer.model.get('query')") == 0  # one token: the only query


@pytest.mark.parametrize("width", [530, 555, 700, 900, 1000])
def test_seven_stage_tabs_stay_at_least_9em_wide_in_rows_of_equal_count(page, server_url, width):
    """The causal lab's seven tabs: no more a row than have room for 9em each (four at 530 px were
    117 px each; "6 Concatenation" needs 134 px), in as few rows as that allows, and no title runs
    past its tab."""
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(server_url + SMALL_LAB.format(causal=1, tokens="a+b+c"))
    page.wait_for_selector(".mha-explorer .stage h2")
    assert page.locator(".steps li").count() == 7
    boxes = page.evaluate("() => [...document.querySelectorAll('.steps li')].map((li) => { const r = li.getBoundingClientRect(); return [Math.round(r.top), r.width]; })")
    narrowest = page.evaluate("() => 9 * parseFloat(getComputedStyle(document.querySelector('.steps')).fontSize)")
    assert min(w for _, w in boxes) >= narrowest - 0.5, (boxes, narrowest)
    cut = page.locator(".steps li").evaluate_all("(lis) => lis.filter((li) => li.firstChild.getBoundingClientRect().right > li.getBoundingClientRect().right + 0.5).map((li) => li.textContent)")
    assert cut == [], cut
    room = page.evaluate("() => document.querySelector('.steps').clientWidth")
    fit = int((room + 4) // (narrowest + 4))  # 4: the gap between tabs
    tops = [top for top, _ in boxes]
    assert len(set(tops)) == -(-7 // fit), (tops, fit)


@pytest.mark.parametrize("width", [700, 1000])
def test_a_stage_tabs_number_stays_beside_its_title(page, server_url, width):
    """A title too long for its tab ("Concatenation" in a Gemma-sized row of tabs) wrapped after its
    number: "8" alone on the first line, the title under it. The title now wraps beside it."""
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(server_url + SMALL_LAB.format(causal=1, tokens="a+b+c"))
    page.wait_for_selector(".mha-explorer .stage h2")
    lines = page.evaluate("""() => [...document.querySelectorAll('.steps button')].map((b) => {
      const n = b.querySelector('.n');
      const walker = document.createTreeWalker(b, NodeFilter.SHOW_TEXT);
      let text;
      while ((text = walker.nextNode()) && n.contains(text));  // the title's first text, after the number's
      const first = document.createRange();
      first.setStart(text, 0);
      first.setEnd(text, 1);
      const wrapped = b.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(b).lineHeight);
      return [text.textContent, Math.round(n.getBoundingClientRect().top), Math.round(first.getBoundingClientRect().top), wrapped];
    })""")
    assert any(wrapped for *_, wrapped in lines) or width == 1000, lines  # (at 700 px some titles wrap)
    assert all(abs(n_top - title_top) <= 2 for _, n_top, title_top, _ in lines), lines


def test_every_querys_map_labels_its_sampled_rows_with_their_positions(browser, server_url):
    """64 tokens in 5-px rows: one row in several is labelled, and each label says where its row is
    ("w20 @20"), not only repeated tokens; a lone word was hard to place on the axis."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    try:
        page.add_init_script(RECORD_CANVAS_TEXT)
        tokens = "+".join(f"w{i}" for i in range(64))
        page.goto(server_url + f"#mode=lab&d_model=8&n_heads=2&n_kv_heads=2&d_head=4&d_v=4&causal=0&bias=0&tokens={tokens}&seed=0&stage=weights&head=0&query=3&all=1")
        figure = page.locator(".stage figure.heatmap-figure").first
        figure.wait_for()
        labels = figure.locator("canvas.heatmap").evaluate("(c) => window.labelsOf.get(c) ?? []")
        rows = [label for label in labels if label.startswith("w")]
        assert len(rows) >= 4 and len(rows) < 64, labels  # sampled
        for label in rows:
            word, at = re.fullmatch(r"(w\d+) @(\d+)", label).groups()
            assert word == f"w{at}", label
    finally:
        page.close()


@pytest.mark.parametrize("width", [320, 360, 390])
def test_the_labs_menus_fit_a_phone(page, server_url, width):
    """The preset menu's longest name set its width (344 px): past the panel's edge at 390 px, past
    the screen's, its arrow cut off, at 360 and 320."""
    page.set_viewport_size({"width": width, "height": 800})
    open_lab(page, server_url)
    panel = page.locator("#lab").bounding_box()
    for menu in page.locator("#lab select:visible").all():
        box = menu.bounding_box()
        assert box["x"] >= panel["x"] and box["x"] + box["width"] <= panel["x"] + panel["width"], (menu.get_attribute("id"), box, panel)
        # a name cut short says so with "…" ("Causal GQA: 4 query heads, 2 K/…", not "2 K/V h")
        assert menu.evaluate("(s) => getComputedStyle(s).textOverflow") == "ellipsis"
    assert page.evaluate("document.documentElement.scrollWidth") == width


def test_many_heads_are_listed_in_a_box_that_scrolls_and_wo_frames_the_inspected_heads_block(page, server_url):
    """64 heads of one number each: the head outputs were 64 cards, 5,000 px, beside a main
    column a third as tall, and W^O, drawn as a map, neither framed nor named head 10's row."""
    for d_v, head in ((1, 10), (4, 5)):
        heads = 64 if d_v == 1 else 8
        page.goto(server_url + f"#mode=lab&d_model={heads * d_v}&n_heads={heads}&n_kv_heads=8&d_head=1&d_v={d_v}&causal=1&bias=0&tokens=a+b+c+d&seed=0&stage=output&head={head}&query=2")
        expect(page.locator(".stage h2")).to_contain_text(f"head {head} inspected")
        settle(page)
        listed = page.locator(".outputs .head-list")
        if heads == 64:
            assert "compact" in listed.get_attribute("class") and listed.evaluate("(l) => l.scrollHeight > l.clientHeight && l.clientHeight < innerHeight")
            assert listed.locator(".inspected").evaluate("(e) => { const l = e.parentElement.getBoundingClientRect(), r = e.getBoundingClientRect(); return r.top >= l.top && r.bottom <= l.bottom; }")
            assert listed.locator(".inspected .vec").count() == 1  # each head's z is still there, one number
        wo = page.locator(".stage figure", has=page.locator("canvas.heatmap")).first
        expect(wo.locator(".heatmap-mark-label")).to_have_text(f"head {head} · z[0]" if d_v == 1 else f"head {head}")
        frame = wo.locator(".heatmap-mark").evaluate("(m) => m.getBoundingClientRect().height")
        cell = wo.locator("canvas.heatmap").evaluate("(c) => c.getBoundingClientRect().height") / (heads * d_v)
        framed = d_v * cell + (4 if d_v * cell < 8 else 0)  # (a block thinner than 8 px is framed around, 2 px out)
        assert abs(frame - framed) < 1.5, (frame, cell)  # the whole block: d_v rows


def test_many_heads_contributions_are_coloured_on_their_own_scale(page, server_url):
    """With 64 heads the output y (their sum) is several times any head's part: on y's scale every
    head's row was almost white. The map takes the heads' scale; y beyond it is full colour, said.
    Its last row, y, is labelled, whatever the step of the heads' labels."""
    page.add_init_script(RECORD_CANVAS_TEXT)
    page.goto(server_url + "#mode=lab&d_model=64&n_heads=64&n_kv_heads=64&d_head=1&d_v=2&causal=0&bias=0&tokens=cats+like+warm+milk&seed=0&stage=output&head=40&query=1")
    figure = page.locator(".stage figure", has_text="Each head's contribution to each output component")
    expect(figure).to_be_visible()
    payload = page.evaluate("() => { const p = window.mhaExplorer.model.get('payload'); return { c: Array.from(p.stages.contributions.data), y: Array.from(p.stages.output.data) }; }")
    c = np.array(payload["c"]).reshape(64, 4, 64)[:, 1]  # (heads, d_model) for query 1
    y = np.array(payload["y"]).reshape(4, 64)[1]
    heads_peak, y_peak = np.abs(c).max(), np.abs(y).max()
    assert y_peak > 2 * heads_peak
    legend = figure.locator(".heatmap-legend").inner_text()
    assert f"+{heads_peak:.2f}; beyond ±{heads_peak:.2f} (up to ±{y_peak:.2f}), full colour" in legend, legend
    labels = figure.locator("canvas.heatmap").evaluate("(c) => window.labelsOf.get(c) ?? []")
    assert labels[0] == "head 0" and "head 60" in labels and labels[-1] == "output y", labels
    # concat beside it, two columns wide: its axis names the first and last column under the map, no wider
    concat = page.locator(".stage figure", has_text="concat for").first
    canvas, axis = concat.locator("canvas.heatmap").bounding_box(), concat.locator(".heatmap-axis").bounding_box()
    assert axis["x"] >= canvas["x"] and axis["x"] + axis["width"] <= canvas["x"] + canvas["width"] + 0.5, (axis, canvas)
    assert concat.locator(".heatmap-axis").inner_text().split() == ["[0]", "[1]"]


def test_a_link_with_refused_settings_says_what_else_it_left_out_at_once(page, server_url):
    """The parts of the link left out were said only once the refused settings were mended."""
    page.goto(server_url + "#mode=lab&d_model=abc&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&tokens=a+b&seed=0&what=1")
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    said = page.locator("#notice").inner_text()
    assert "lab settings were rejected" in said and said.endswith("This link could not be used in full: it has an unknown part “what” (left out).")
    set_field(page, "d_model", 8)  # mended: computed, and not said a second time
    wait_kind(page, "GQA")
    assert page.locator("#notice").inner_text().count("unknown part") <= 1


def test_the_labels_of_the_rows_in_view_stay_at_the_left_as_a_large_grid_scrolls(page, server_url):
    """A 64 × 64 grid scrolled sideways keeps the labels of the rows in view at its left edge, and
    of rows scrolled in from far below too; those of the rows within 160 px of the view stick too,
    ready for a quick scroll. The labels of the rows farther away do not: out of sight, sticking
    cost each lab edit's frame 10 to 20 ms of Chromium's compositing."""
    tokens = "+".join(f"t{i}" for i in range(64))
    page.goto(server_url + f"#mode=lab&d_model=64&n_heads=8&n_kv_heads=8&d_head=8&d_v=8&causal=1&bias=0&tokens={tokens}&seed=0")
    page.wait_for_selector(".edit-grid input")
    settle(page)
    labels = """() => {
      const box = document.querySelector('.grid-box'), b = box.getBoundingClientRect();
      const head = box.querySelector('.grid-head').getBoundingClientRect().bottom;
      const rows = [...box.querySelectorAll('.grid-row')].filter((r) => { const y = r.getBoundingClientRect(); return y.top >= head - 1 && y.bottom <= b.bottom; });
      return { names: rows.map((r) => r.querySelector('.row-head').textContent), lefts: rows.map((r) => r.querySelector('.row-head').getBoundingClientRect().left - b.left - box.clientLeft) };
    }"""
    box = page.locator(".grid-box")
    for top in (0, 1000):  # rows t0 on, then rows far below them before this scroll
        box.evaluate("(b, top) => { b.scrollTop = top; b.scrollLeft = 900; }", top)
        page.evaluate(NEXT_FRAME)
        page.evaluate(NEXT_FRAME)
        shown = page.evaluate(labels)
        assert len(shown["names"]) >= 6 and all(abs(x) < 1 for x in shown["lefts"]), shown
        assert (shown["names"][0] == "t0") == (top == 0), shown
        # the rows within 160 px below the view stick too
        below = page.evaluate("""() => {
          const box = document.querySelector('.grid-box'), bottom = box.getBoundingClientRect().bottom;
          return [...box.querySelectorAll('.grid-row')].filter((r) => { const top = r.getBoundingClientRect().top; return top > bottom && top < bottom + 160 - 28; })
            .map((r) => getComputedStyle(r.querySelector('.row-head')).position);
        }""")
        assert len(below) >= 4 and set(below) == {"sticky"}, below
    far = page.evaluate("() => [...document.querySelectorAll('.grid-row.far:not(.labelled) .row-head')].map((h) => getComputedStyle(h).position)")
    assert len(far) >= 30 and set(far) == {"static"}, far[:3]


def edit_then_next_with_a_late_answer(page, server_url, late_ms):
    """A small lab at its Scores stage, whose answers come late_ms late: a cell is edited, then
    Next is pressed at once, while the server computes the edit."""
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=2&n_kv_heads=2&d_head=4&d_v=4&causal=0&bias=0&tokens=a+b+c&seed=0&stage=scores")
    page.wait_for_selector(".edit-grid input")
    settle(page)
    page.evaluate("""(late) => {
      const real = window.fetch;
      window.fetch = async (...args) => {
        const answer = await real(...args);
        if (String(args[0]).includes('api/trace')) await new Promise((done) => setTimeout(done, late));
        return answer;
      };
      const cell = document.querySelector('.edit-grid input[data-key="x:1,2"]');
      cell.value = '0.25';
      cell.dispatchEvent(new Event('change', { bubbles: true }));
      [...document.querySelectorAll('.mha-explorer button')].find((b) => b.textContent.trim() === 'Next').click();
    }""", late_ms)
    expect(page.locator(".stage h2")).to_contain_text("Weights")


def test_the_link_waits_for_a_lab_trace_being_computed_then_says_all_that_changed_meanwhile(page, server_url):
    """Writing the address took the page's thread 1 to 8 ms, which an answer come meanwhile waited
    for: a stage picked while the server computes an edit is written into the link once the edit
    is answered, together with the edit."""
    edit_then_next_with_a_late_answer(page, server_url, 800)
    page.wait_for_timeout(400)
    assert page.evaluate("() => document.getElementById('lab').dataset.busy") == "true"
    assert "stage=scores" in page.url and "edits=" not in page.url  # nothing written while the trace is computed
    settle(page)
    page.wait_for_function("() => location.hash.includes('stage=weights') && location.hash.includes('edits=')")
    assert unquote(page.url).count("x:1,2=0.25") == 1


def test_a_lab_trace_that_takes_long_holds_the_link_back_a_second_at_most(page, server_url):
    """The link's write waits for a lab trace being computed, but not for an answer that does not
    come: a stage picked meanwhile is in the link a second later, the trace still computing."""
    edit_then_next_with_a_late_answer(page, server_url, 4000)
    page.wait_for_function("() => location.hash.includes('stage=weights')", timeout=2500)
    assert page.evaluate("() => document.getElementById('lab').dataset.busy") == "true"  # written while the trace computes
    page.wait_for_function("() => !document.getElementById('lab').dataset.busy", timeout=10_000)
    page.wait_for_function("() => location.hash.includes('edits=')")  # the edit, once answered
