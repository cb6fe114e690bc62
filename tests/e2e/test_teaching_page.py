"""The teaching page in headless Chromium: every control, every number, keyboard, accessibility."""

from __future__ import annotations

import itertools
import json
import re
from decimal import ROUND_HALF_UP, Decimal

import httpx
import numpy as np
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from mha_explorer import AttentionConfig, trace
from mha_explorer.lab import random_weights, random_x
from mha_explorer.schema import TracePayload, payload_arrays, trace_payload
from mha_explorer.walkthrough import fmt

from .pagecheck import BARE_SIGN, SETTLED, check_numbers, factor, open_link

pytestmark = pytest.mark.e2e

STAGES = ["Projections", "Scores", "Weights", "Value mixing", "Concatenation", "Output projection"]
STAGE_IDS = ["projections", "scores", "weights", "mixing", "concat", "output"]



@pytest.fixture(scope="module")
def api(server_url):
    payload = TracePayload.model_validate(httpx.get(server_url + "api/example").json())
    arrays = payload_arrays(payload)
    for name, a in payload.weights.items():
        arrays[name] = np.array(a.data, dtype=np.float64).reshape(a.shape)
    return payload, arrays




def required_sources(stage: str, query: int, head: int, payload) -> set[str]:
    c = payload.config
    g = payload.kv_group[head]
    n = len(payload.tokens)
    rng = range
    if stage == "projections":
        return (
            {f"q:{head},{query},{e}" for e in rng(c.d_head)}
            | {f"k:{g},{j},{e}" for j in rng(n) for e in rng(c.d_head)}
            | {f"v:{g},{j},{e}" for j in rng(n) for e in rng(c.d_v)}
            | {f"x:{j},{m}" for j in rng(n) for m in rng(c.d_model)}
            | {f"W_Q:{head},{m},{e}" for m in rng(c.d_model) for e in rng(c.d_head)}
        )
    if stage == "scores":
        return {f"{s}:{head},{query},{j}" for s in ("scores", "scaled") for j in rng(n)}
    if stage == "weights":
        return {f"weights:{head},{query},{j}" for j in rng(n)}
    if stage == "mixing":
        return {f"z:{head},{query},{e}" for e in rng(c.d_v)} | {f"v:{g},{j},{e}" for j in rng(n) for e in rng(c.d_v)}
    if stage == "concat":
        return {f"concat:{query},{m}" for m in rng(c.n_heads * c.d_v)}
    if stage == "output":
        return (
            {f"output:{query},{m}" for m in rng(c.d_model)}
            | {f"contributions:{i},{query},{m}" for i in rng(c.n_heads) for m in rng(c.d_model)}
            | {f"W_O:{r},{m}" for r in rng(c.n_heads * c.d_v) for m in rng(c.d_model)}
        )
    raise AssertionError(stage)


def open_page(page, server_url):
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")


def select(page, label, option):
    page.get_by_label(label).select_option(label=option)


# every node put in the page from now on, counted in window.inserted
COUNT_INSERTED = """() => {
  window.inserted = 0;
  new MutationObserver((records) => { for (const r of records) window.inserted += r.addedNodes.length; })
    .observe(document.querySelector('.mha-explorer .layout'), { childList: true, subtree: true });
}"""
IDLE = "() => new Promise((done) => requestIdleCallback(() => requestIdleCallback(done, { timeout: 500 }), { timeout: 500 }))"


def test_the_next_stage_and_a_stage_gone_back_to_are_shown_as_laid_out(page, server_url, api):
    """The stage after the one on screen is put in the page while it is idle, hidden, at the stage's
    width, and laid out there; a stage left stays so. Showing either puts nothing in anew (taken out
    and put back, or put in for the first time, the Projections panel was laid out anew, 6 to 15 ms).
    Only the stage on screen is the "stage" section, seen and heard, and only its title has the id
    the section is labelled by."""
    open_page(page, server_url)
    page.wait_for_timeout(400)  # at rest: the stages around it built ahead
    for _ in range(3):
        page.evaluate(IDLE)
    ahead = page.evaluate("""() => [...document.querySelectorAll('.mha-explorer .layout > section:not(.stage)')]
      .map((s) => [s.querySelector(':scope > h2')?.textContent.slice(0, 9) ?? null, s.querySelector(':scope > h2')?.id ?? null, s.querySelector(':scope > h2')?.checkVisibility() ?? null])""")
    assert ["2. Scores", "", False] in ahead, ahead
    page.evaluate("() => { window.firstTitle = document.querySelector('.mha-explorer .stage h2'); }")
    page.evaluate(COUNT_INSERTED)
    page.get_by_role("button", name="Next", exact=True).click()
    expect(page.locator(".stage h2")).to_contain_text("2. Scores")
    left = page.evaluate("""() => {
      const title = window.firstTitle, stage = document.querySelector('.mha-explorer .stage');
      return [window.inserted, title.isConnected, title.checkVisibility(), title.id, document.querySelectorAll('.mha-explorer .stage').length,
              document.getElementById(stage.getAttribute('aria-labelledby')) === stage.querySelector('h2'), stage.style.width]; }""")
    assert left == [0, True, False, "", 1, True, ""]
    expect(page.get_by_role("heading", name=re.compile(r"^1\. Projections"))).to_have_count(0)
    page.evaluate(COUNT_INSERTED)
    page.get_by_role("button", name="Previous", exact=True).click()
    expect(page.locator(".stage h2")).to_contain_text("1. Projections")
    back = page.evaluate("""() => [document.querySelector('.mha-explorer .stage h2') === window.firstTitle,
      window.firstTitle.checkVisibility(), window.inserted, document.querySelectorAll('.mha-explorer .stage').length]""")
    assert back == [True, True, 0, 1]
    expect(page.get_by_role("heading", name=re.compile(r"^2\. Scores"))).to_have_count(0)
    expect(page.get_by_role("heading", name=re.compile(r"^1\. Projections"))).to_have_count(1)
    # the panel laid out ahead is the one shown: as wide as the stage, its numbers the stage's own
    page.get_by_role("button", name="Next", exact=True).click()
    expect(page.locator(".stage h2")).to_contain_text("2. Scores")
    widths = page.evaluate("() => { const s = document.querySelector('.mha-explorer .stage'); return [s.clientWidth, s.querySelector('.figure').getBoundingClientRect().width]; }")
    assert widths[1] > widths[0] - 60, widths
    assert required_sources("scores", 1, 0, api[0]) <= check_numbers(page, ".stage", api[1])


def test_first_view_and_controls(page, server_url):
    open_page(page, server_url)
    for name in ("Previous", "Next", "Reset example"):
        assert page.get_by_role("button", name=name).is_visible()
    stage = page.get_by_role("combobox", name="Calculation stage")
    head = page.get_by_role("combobox", name="Inspect head")
    query = page.get_by_role("combobox", name="Query token")
    assert stage.locator("option").all_inner_texts() == STAGES
    assert head.locator("option").all_inner_texts() == ["Head 0", "Head 1"]
    assert query.locator("option").all_inner_texts() == ["cats", "like", "warm", "milk"]
    assert query.evaluate("e => e.selectedOptions[0].text") == "like"
    assert head.evaluate("e => e.selectedOptions[0].text") == "Head 0"
    assert stage.evaluate("e => e.selectedOptions[0].text") == "Projections"
    assert page.get_by_role("button", name="Previous").is_disabled()
    assert "Projections" in page.locator(".stage h2").inner_text()


def test_the_numbered_stages_head_names_and_address_lead_to_views(page, server_url):
    open_page(page, server_url)
    # the numbered stages above the figure are buttons
    page.locator(".steps button", has_text="Value mixing").click()
    assert "Value mixing" in page.locator(".stage h2").inner_text()
    assert page.locator('.steps button[aria-current="step"]').inner_text().endswith("Value mixing")
    # a head picked by keyboard in the head outputs keeps the focus on its entry
    page.locator(".outputs button[data-pick-head='1']").focus()
    page.keyboard.press("Enter")
    assert "head 1" in page.locator(".stage h2").inner_text()
    assert page.evaluate("() => document.activeElement.closest('.head-output')?.dataset.head") == "1"
    # another address typed or pasted into the same tab shows its view
    page.goto(server_url + "#mode=teaching&stage=weights&head=0&query=0")
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('query “cats”')")
    assert "Weights" in page.locator(".stage h2").inner_text() and "head 0" in page.locator(".stage h2").inner_text()
    # the full value of a number in the figure's first row shows below it, inside the figure
    first = page.locator(".stage .bars .num").first
    first.focus()
    assert "tip-below" in first.get_attribute("class")
    tip_top = first.evaluate("(e) => getComputedStyle(e, '::after').top")
    assert tip_top != "auto"
    last = page.locator(".stage .bars .num").last
    last.focus()
    assert "tip-below" not in (last.get_attribute("class") or "")


def test_every_number_on_every_view_equals_the_api(page, server_url, api, artifacts):
    payload, arrays = api
    open_page(page, server_url)
    for (query, token), head, (title, stage) in itertools.product(
        enumerate(payload.tokens), range(payload.config.n_heads), zip(STAGES, STAGE_IDS)
    ):
        select(page, "Query token", token)
        select(page, "Inspect head", f"Head {head}")
        select(page, "Calculation stage", title)
        heading = page.locator(".stage h2").inner_text()
        assert title in heading and f"head {head}" in heading and token in heading
        shown = check_numbers(page, ".stage", arrays)
        missing = required_sources(stage, query, head, payload) - shown
        assert not missing, f"{token}, head {head}, {title}: not shown: {sorted(missing)}"
        check_numbers(page, ".outputs", arrays)
        if token == "like":
            page.screenshot(path=str(artifacts / f"teaching-{stage}-head{head}.png"), full_page=True)


def test_both_head_outputs_stay_visible(page, server_url, api):
    payload, arrays = api
    open_page(page, server_url)
    query = payload.query
    before = page.locator(".outputs").inner_text()
    for title in STAGES:
        select(page, "Calculation stage", title)
        for head in range(payload.config.n_heads):
            select(page, "Inspect head", f"Head {head}")
            outputs = page.locator(".outputs")
            for i in range(payload.config.n_heads):
                assert outputs.locator(f'[data-head="{i}"]').is_visible()
            shown = check_numbers(page, ".outputs", arrays)
            d_v = payload.config.d_v
            wanted = {f"concat:{query},{i * d_v + e}" for i in range(payload.config.n_heads) for e in range(d_v)}
            assert wanted <= shown
            # inspecting another head never changes an output number
            text = page.locator(".outputs").inner_text().replace("inspected", "")
            assert text == before.replace("inspected", "")
    # a new query updates both heads
    select(page, "Query token", "milk")
    shown = check_numbers(page, ".outputs", arrays)
    milk = payload.tokens.index("milk")
    assert {f"concat:{milk},{i * payload.config.d_v}" for i in range(payload.config.n_heads)} <= shown
    assert page.locator(".outputs").inner_text() != before
    # a head's name there inspects that head
    select(page, "Inspect head", "Head 0")
    page.locator(".outputs").get_by_role("button", name="Head 1").click()
    assert "head 1" in page.locator(".stage h2").inner_text()
    assert page.get_by_role("combobox", name="Inspect head").evaluate("e => e.selectedOptions[0].text") == "Head 1"
    assert page.locator(".outputs").get_by_role("button", name="Head 1").count() == 0  # the inspected one is no button


def test_next_and_previous_walk_the_stages(page, server_url):
    open_page(page, server_url)
    nxt = page.get_by_role("button", name="Next")
    prev = page.get_by_role("button", name="Previous")
    for i, title in enumerate(STAGES):
        assert title in page.locator(".stage h2").inner_text()
        assert page.locator('.steps button[aria-current="step"]').inner_text().endswith(title)
        assert page.locator(".sr-only[aria-live]").inner_text() == ("" if i == 0 else f"Stage {i + 1} of 6: {title}. Head 0, query like.")
        if i < len(STAGES) - 1:
            nxt.click()
    assert nxt.is_disabled()
    # at the last stage Enter on Next does nothing: the focus stays there and the stage with it
    nxt.focus()
    page.keyboard.press("Enter")
    assert STAGES[-1] in page.locator(".stage h2").inner_text()
    assert page.evaluate("() => document.activeElement.textContent") == "Next"
    prev.click()
    # the last two stages take both heads' outputs: the title says so, and which head is inspected
    assert page.locator(".stage h2").inner_text() == "5. Concatenation · all heads (head 0 inspected) · query “like”"
    # the blocks, read left to right, are concat: z_0 then z_1, the numbers in that order
    assert "the blocks below are that one vector" in page.locator(".stage p.lead").first.inner_text()
    shown = page.locator(".stage .concat .num").evaluate_all("(nums) => nums.map((n) => n.dataset.src)")
    assert shown == [f"concat:1,{i}" for i in range(4)]


def test_reset_restores_the_example(page, server_url):
    open_page(page, server_url)
    first = page.locator(".layout").inner_text()
    for _ in range(2):
        select(page, "Query token", "warm")
        select(page, "Inspect head", "Head 1")
        select(page, "Calculation stage", "Weights")
        page.get_by_text("Matrices", exact=True).click()  # and the panels a learner opened
        page.get_by_text("Cost of this configuration", exact=True).click()
        assert page.locator(".mha-explorer details[open]").count() == 2
        assert page.locator(".layout").inner_text() != first
        page.get_by_role("button", name="Reset example").click()
        assert page.locator(".mha-explorer details[open]").count() == 0
        assert page.locator(".layout").inner_text() == first
        assert page.get_by_label("Query token").evaluate("e => e.selectedOptions[0].text") == "like"
        assert page.get_by_label("Inspect head").evaluate("e => e.selectedOptions[0].text") == "Head 0"
        assert page.get_by_label("Calculation stage").evaluate("e => e.selectedOptions[0].text") == "Projections"


def test_back_after_reset_returns_to_the_place_it_left(page, server_url):
    """Reset replaced the link as a change of stage does: a learner who pressed it by a slip had
    lost the stage, head and query, and Back left the example."""
    open_page(page, server_url)
    select(page, "Query token", "milk")
    select(page, "Inspect head", "Head 1")
    select(page, "Calculation stage", "Weights")
    page.wait_for_function("() => location.hash.includes('stage=weights') && location.hash.includes('head=1') && location.hash.includes('query=3')")
    steps = page.evaluate("history.length")
    page.get_by_role("button", name="Reset example").click()
    page.wait_for_function("() => location.hash.includes('stage=projections')")
    assert page.evaluate("history.length") == steps + 1
    page.get_by_role("button", name="Reset example").click()  # again, at the first view: no step
    page.wait_for_timeout(300)
    assert page.evaluate("history.length") == steps + 1
    page.go_back()
    expect(page.locator(".stage h2")).to_have_text("3. Weights · head 1 · query “milk”")
    page.go_forward()
    expect(page.locator(".stage h2")).to_have_text("1. Projections · head 0 · query “like”")


def test_reset_closes_a_packed_view_left_open_on_the_first_view(page, server_url):
    """A learner opens the packed view on the first view, moves on, then resets: the first view
    comes back as it first was, its packed view closed."""
    open_page(page, server_url)
    page.get_by_text("Packed view: all heads in one matrix").click()
    assert page.locator(".stage details[open]").count() == 1
    select(page, "Query token", "milk")
    assert page.locator(".stage details[open]").count() == 0
    page.get_by_role("button", name="Reset example").click()
    expect(page.locator(".stage h2")).to_contain_text("query “like”")
    assert page.locator(".mha-explorer details").count() >= 3 and page.locator(".mha-explorer details[open]").count() == 0


# for each row of the contributions chart: the total's tick and the x of each head's label in it
CHART_ROWS = """() => {
  const chart = document.querySelector(".stage svg.chart");
  const ticks = [...chart.querySelectorAll("line.total-tick")].slice(0, -1);  // the last is the legend's
  const labels = [...chart.querySelectorAll("text.seg-label")];
  return ticks.map((tick) => {
    const [top, bottom] = [Number(tick.getAttribute("y1")), Number(tick.getAttribute("y2"))];
    const mine = labels.filter((l) => Number(l.getAttribute("y")) > top && Number(l.getAttribute("y")) < bottom);
    return { tick: Number(tick.getAttribute("x1")), labels: mine.map((l) => [l.textContent, l.getBBox().x, l.getBBox().width]) };
  });
}"""


def test_the_total_tick_never_crosses_a_head_label(page, server_url, api):
    payload, _ = api
    open_page(page, server_url)
    select(page, "Calculation stage", "Output projection")
    seen = 0
    for token in payload.tokens:
        select(page, "Query token", token)
        for row in page.evaluate(CHART_ROWS):
            for name, x, width in row["labels"]:
                seen += 1
                assert not x - 1 <= row["tick"] <= x + width + 1, (token, row)
    assert seen >= 8  # most rows label their segments (milk's y[1] beside its tick)
    # a screen reader hears what the chart is and where its numbers are: in the table before it
    chart = page.locator(".stage svg.chart")
    assert chart.get_attribute("aria-label").endswith("as stacked bars: the table above gives each one")
    assert chart.evaluate("(c) => [...document.querySelectorAll('.stage table')].some((t) => t.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING && t.textContent.includes('head 1'))")


def test_projection_cells_link_to_their_row_and_column(page, server_url, api):
    payload, arrays = api
    open_page(page, server_url)
    # before a number is pointed at, the box says how, set as words (not in the numbers' type)
    font = "(p) => getComputedStyle(p).fontFamily"
    assert page.locator(".figure .calc").inner_text().startswith("Point at a number") and "monospace" not in page.locator(".figure .calc").evaluate(font)
    # the K table is the second equation; its cell (milk, 0) comes from X[milk] and column 0 of W_K[0]
    q_cell = page.locator(".figure .equation").nth(0).locator("table").nth(2).locator('td[data-row="0"][data-col="1"]')
    q_cell.hover()
    assert "monospace" in page.locator(".figure .calc").evaluate(font)  # a sum of numbers now
    assert page.locator(".figure .equation").nth(0).locator("td.hl").count() == 4 + 4 + 1  # x, W^Q's column, q[1]
    k_cell = page.locator('.figure .equation').nth(1).locator('table').nth(2).locator('td[data-row="3"][data-col="0"]')
    k_cell.hover()
    assert page.locator(".figure .equation").nth(0).locator("td.hl").count() == 0  # one derivation lit at a time
    eq = page.locator(".figure .equation").nth(1)
    x_hl = eq.locator("table").nth(0).locator("td.hl .num").all_inner_texts()
    w_hl = eq.locator("table").nth(1).locator("td.hl .num").all_inner_texts()
    assert x_hl == [fmt(v) for v in arrays["x"][3]]
    assert w_hl == [fmt(v) for v in arrays["W_K"][0, :, 0]]
    calc = page.locator(".figure .calc").inner_text()
    assert calc.startswith("k[milk][0] = ") and calc.endswith(f"= {fmt(arrays['k'][0, 3, 0])}")
    products = " + ".join(f"{factor(x)}×{factor(w)}" for x, w in zip(arrays["x"][3], arrays["W_K"][0, :, 0]))
    assert calc.startswith(f"k[milk][0] = {products}"), calc  # the sum as written by hand, no stray commas
    # the pointer off to empty space leaves it lit, to be read; a lit number of it keeps it too
    page.mouse.move(5, 5)
    eq.locator("table").nth(0).locator("td.hl").first.hover()
    assert eq.locator("td.hl").count() == 4 + 4 + 1
    # a number that is no part of it, pointed at or focused, puts it out: V's W, here
    for reach in ("hover", "focus"):
        k_cell.hover()
        other = page.locator(".figure .equation").nth(2).locator("table").nth(1).locator('td[data-row="0"][data-col="0"]')
        getattr(other.locator(".num") if reach == "focus" else other, reach)()
        assert page.locator(".figure td.hl").count() == 0, reach
        assert page.locator(".figure .calc").inner_text().startswith("Point at a number"), reach


def test_all_queries_shows_every_number_as_tables(page, server_url, api):
    """The teaching example's every-query maps are small: tables of checkable numbers, the query's row marked."""
    payload, arrays = api
    open_page(page, server_url)
    page.get_by_role("button", name="All queries").click()
    for title, names in zip(STAGES, (["q", "k", "v"], ["scores", "scaled"], ["weights"], ["z"], ["concat"], ["output"])):
        select(page, "Calculation stage", title)
        assert page.locator(".stage canvas").count() == 0, title
        shown = check_numbers(page, ".stage .maps", arrays)
        assert {src.split(":")[0] for src in shown} == set(names), title
        assert page.locator(".stage .maps tr.inspected th").first.inner_text() == "like"
        if title == "Scores":  # a scaled number that is not the shown score ÷ 1.414, as a person works it, is named, in both heads
            for head in (1, 0):
                select(page, "Inspect head", f"Head {head}")
                worked = lambda i, j: by_hand(Decimal(fmt(arrays["scores"][head, i, j])) / Decimal("1.414"))  # noqa: B023
                off = [
                    f"the scaled score of query “{a}”, key “{b}” comes to {worked(i, j)} (shown: {fmt(arrays['scaled'][head, i, j])})"
                    for (i, a), (j, b) in itertools.product(enumerate(payload.tokens), repeat=2)
                    if worked(i, j) != fmt(arrays["scaled"][head, i, j])
                ]
                hint = page.locator(".stage .maps p.hint")
                if head == 1:
                    assert off, "head 1 has such numbers (-0.63 ÷ 1.414 = -0.45, shown -0.44)"
                    said = "Every number here is rounded to two decimals, the divisor 1.414 to three, and each result is worked out from the full numbers"
                    assert hint.inner_text().startswith(rounding_note(said, off)), hint.inner_text()
                else:
                    assert hint.count() == (1 if off else 0), off
            select(page, "Inspect head", "Head 0")
        if title == "Weights":  # a row whose shown weights do not make 1.00 is named, with what they make
            off = {}
            for q, tok in enumerate(payload.tokens):
                shown = round(sum(float(fmt(w)) for w in arrays["weights"][0, q]), 2)
                if f"{shown:.2f}" != "1.00":
                    off[tok] = f"{shown:.2f}"
            assert off, "the example has such rows"
            hint = page.locator(".stage .maps p.hint").inner_text()
            assert hint.startswith("The weights are rounded to two decimals: as shown, ") and hint.endswith("; in full, every row adds up to 1.")
            assert all(f"the row of “{tok}” adds up to {total}" in hint for tok, total in off.items()), (off, hint)
            assert hint.count("adds up to") == len(off) + 1


def test_formulas_explanations_and_notes(page, server_url):
    open_page(page, server_url)
    for title in STAGES:
        select(page, "Calculation stage", title)
        assert page.locator(".stage .formula math").count() == (3 if title == "Projections" else 1)  # q, k and v's, which wrap apart
        assert len(page.locator(".stage .explain").inner_text()) > 60
    notes = page.locator(".notes").inner_text().lower()
    for phrase in ("every token is visible", "causal", "no guaranteed roles", "not proof", "h·n²", "multi-query", "kv cache"):
        assert phrase in notes, phrase


def test_matrices_view(page, server_url, api):
    payload, arrays = api
    open_page(page, server_url)
    # the closed sections are headings a screen reader lists, and their summaries still open them
    headings = page.locator(".mha-explorer").get_by_role("heading", level=2).all_inner_texts()
    assert {"Matrices", "Cost of this configuration"} <= set(headings), headings
    page.get_by_text("Matrices", exact=True).click()
    body = page.locator(".matrices-body")
    body.wait_for(state="visible")  # built when the view is first opened
    shown = check_numbers(page, ".matrices-body", arrays)
    c = payload.config
    for name, heads, width in (("W_Q", c.n_heads, c.d_head), ("W_K", c.n_kv_heads, c.d_head), ("W_V", c.n_kv_heads, c.d_v)):
        assert {f"{name}:{i},{m},{e}" for i in range(heads) for m in range(c.d_model) for e in range(width)} <= shown
    assert {f"W_O:{r},{m}" for r in range(c.n_heads * c.d_v) for m in range(c.d_model)} <= shown
    assert {f"x:{j},{m}" for j in range(len(payload.tokens)) for m in range(c.d_model)} <= shown
    row_labels = body.locator("tr.block-row th").all_inner_texts()
    assert row_labels == [f"head {r // c.d_v} · z[{r % c.d_v}]" for r in range(c.n_heads * c.d_v)]


def test_full_precision_on_hover_and_focus(page, server_url, api):
    payload, arrays = api
    open_page(page, server_url)
    select(page, "Calculation stage", "Weights")
    number = page.locator(".stage .num").first
    value = arrays["weights"][0, payload.query, 0]
    after = "e => getComputedStyle(e, '::after').content"
    assert number.evaluate(after) == "none"
    number.focus()
    assert number.evaluate(after) == json.dumps(repr(float(value)))
    page.mouse.move(0, 0)
    page.locator(".stage .num").nth(1).hover()
    assert page.locator(".stage .num").nth(1).evaluate(after) == json.dumps(repr(float(arrays["weights"][0, payload.query, 1])))
    # Escape hides the full value, the focused number's and the pointed one's (it covers the number
    # beside it), until the number is left
    page.keyboard.press("Escape")
    assert page.locator(".stage .num").nth(1).evaluate(after) == "none" and number.evaluate(after) == "none"
    page.mouse.move(0, 0)
    page.keyboard.press("ArrowRight")  # the next number shows its own
    assert page.evaluate("() => getComputedStyle(document.activeElement, '::after').content") == json.dumps(repr(float(arrays["weights"][0, payload.query, 1])))
    page.keyboard.press("ArrowLeft")  # and the first shows it again
    assert number.evaluate(after) == json.dumps(repr(float(value)))
    # a mouse user's focus is outside the view: Escape hides the pointed number's all the same
    page.evaluate("() => document.activeElement.blur()")
    page.locator(".stage .num").nth(2).hover()
    assert page.locator(".stage .num").nth(2).evaluate(after) != "none"
    page.keyboard.press("Escape")
    assert page.locator(".stage .num").nth(2).evaluate(after) == "none"


def test_a_focused_number_in_a_vector_keeps_the_commas_beside_it_in_sight(page, server_url):
    """concat = [0.41, 0.18, 0.04, 0.98]: the focus ring on 0.04, 3 px wide and 2 px out, covered
    the comma after it, and the vector read as if a separator were missing."""
    open_page(page, server_url)
    select(page, "Calculation stage", "Output projection")
    page.keyboard.press("Tab")  # (the keyboard in use: a focus shows its ring)
    number = page.locator(".stage .vec .num").nth(2)
    number.focus()
    ring = number.evaluate("(n) => [n.matches(':focus-visible'), getComputedStyle(n).outlineWidth, getComputedStyle(n).outlineOffset]")
    assert ring == [True, "2px", "0px"]
    # the ring's outer edge stays in the first third of the comma's box, short of its glyph (a
    # comma's ink sits in the middle of its monospace cell)
    ring_right, comma_left, comma_width = number.evaluate("""(n) => { const r = document.createRange(); r.setStart(n.nextSibling, 0); r.setEnd(n.nextSibling, 1);
        const s = getComputedStyle(n), c = r.getBoundingClientRect();
        return [n.getBoundingClientRect().right + parseFloat(s.outlineOffset) + parseFloat(s.outlineWidth), c.left, c.width]; }""")
    assert number.evaluate("(n) => n.nextSibling.textContent").startswith(",") and ring_right <= comma_left + comma_width / 3, (ring_right, comma_left, comma_width)


def test_keyboard_only_walkthrough(page, server_url, artifacts):
    open_page(page, server_url)
    page.locator("body").focus()

    def tab_to(label):
        for _ in range(40):
            page.keyboard.press("Tab")
            if page.evaluate("() => { const e = document.activeElement; return (e.labels && e.labels[0] && e.labels[0].textContent) || e.textContent }") == label:
                focused = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
                assert focused != "none", f"{label} has no visible focus"
                return
        raise AssertionError(f"Tab never reached {label}")

    tab_to("Query token")
    page.keyboard.press("ArrowDown")  # like -> warm
    assert "warm" in page.locator(".stage h2").inner_text()
    tab_to("Inspect head")
    page.keyboard.press("ArrowDown")
    assert "head 1" in page.locator(".stage h2").inner_text()
    # the menus say their new values themselves: the page's announcement does not repeat them
    assert page.locator(".sr-only[aria-live]").inner_text() == ""
    tab_to("Next")
    for title in STAGES[1:]:
        page.keyboard.press("Enter")
        assert title in page.locator(".stage h2").inner_text()
        assert title in page.locator(".sr-only[aria-live]").inner_text()
    # a menu's change empties what was said before: the region never holds a view no longer shown
    page.get_by_label("Query token").select_option(label="milk")
    assert "milk" in page.locator(".stage h2").inner_text() and page.locator(".sr-only[aria-live]").inner_text() == ""
    page.screenshot(path=str(artifacts / "keyboard-focus.png"))
    tab_to("Reset example")
    page.keyboard.press("Space")
    assert "Projections" in page.locator(".stage h2").inner_text() and "like" in page.locator(".stage h2").inner_text()


def test_in_a_small_window_next_by_keyboard_keeps_its_focus_in_view_and_the_stage_under_it(browser, server_url):
    """1366 x 768 at 150% (911 x 512 CSS px): the controls scroll with the page, and the stage's title
    lies in the window's last third. Next brings the stage up with the controls above it, so that
    the focused Next stays in view and Enter steps on (the title at the top left it above the window)."""
    context = browser.new_context(viewport={"width": 911, "height": 512}, device_scale_factor=1.5)
    try:
        page = context.new_page()
        page.goto(server_url)
        page.wait_for_selector(".mha-explorer .stage h2")
        next_button = page.get_by_role("button", name="Next")
        next_button.focus()
        for title in ("2. Scores", "3. Weights", "4. Value mixing"):
            page.keyboard.press("Enter")
            expect(page.locator(".stage h2")).to_contain_text(title)
            page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")  # the observer's report
            button, heading = next_button.bounding_box(), page.locator(".stage h2").bounding_box()
            assert page.evaluate("() => document.activeElement.textContent") == "Next"
            assert 0 <= button["y"] and button["y"] + button["height"] <= 512, (title, button)
            assert heading["y"] + heading["height"] <= 512 and page.evaluate("scrollY") > 0, (title, heading)  # brought up, in view
    finally:
        context.close()


@pytest.mark.parametrize("width", [530, 540, 555, 600, 700, 900])
def test_every_stage_tab_holds_its_whole_title(page, server_url, width):
    """A view some 555 px wide (a notebook's panel beside another): "Concatenation" ran 7 px past its
    tab and the view's edge. Each tab is at least as wide as its longest word, and all are as wide."""
    page.set_viewport_size({"width": width, "height": 700})
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    cut = page.evaluate("""() => {
      const edge = document.querySelector(".steps").getBoundingClientRect().right;
      return [...document.querySelectorAll(".steps li button")]
        .filter((b) => b.scrollWidth > b.clientWidth + 1 || b.getBoundingClientRect().right > edge + 0.5)
        .map((b) => b.textContent);
    }""")
    assert cut == [], cut
    # tabs that take two rows stand in columns: the second row's are as wide as the first's, not
    # stretched across the row
    widths = page.evaluate("() => [...document.querySelectorAll('.steps li')].map((li) => li.getBoundingClientRect().width)")
    assert max(widths) - min(widths) < 1, widths
    # and rows of equal count, as near as can be: six tabs go three and three, not four and two
    tops = page.evaluate("() => [...document.querySelectorAll('.steps li')].map((li) => Math.round(li.getBoundingClientRect().top))")
    per_row = [tops.count(top) for top in sorted(set(tops))]
    assert max(per_row) - min(per_row) <= 1, per_row
    # and none narrower than the stylesheet's 9em
    narrowest = page.evaluate("() => 9 * parseFloat(getComputedStyle(document.querySelector('.steps')).fontSize)")
    assert min(widths) >= narrowest - 0.5, (widths, narrowest)


@pytest.mark.parametrize("width", [911, 1007, 1100, 1176, 1280])
def test_each_projection_is_one_line_beside_the_head_outputs(page, server_url, width):
    """A 1366 px laptop at 150% is 911 px wide: with the head outputs beside the stage, "= q" and
    "= K" went to a line of their own, parted from the product they end. Each product, operands and
    result, is one line, and the head outputs stay beside the stage; from 1100 px up, the packed
    view's product too (it wrapped up to 1176)."""
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.locator(".stage details summary", has_text="Packed view").click()
    lines = page.evaluate("""() => [...document.querySelectorAll(".stage .equation")].filter((eq) => eq.checkVisibility()).map((eq) => {
      const tops = [...eq.children].map((c) => c.getBoundingClientRect()).map((r) => [r.top, r.bottom]);
      return tops.every(([top]) => top < tops[0][1]);  // every part starts above the first one's bottom: one line
    })""")
    assert len(lines) == 5 and lines[:3] == [True, True, True], lines
    assert lines[3] or width < 1100, lines  # the packed view's x W^Q, where the stage has room for it (its split under it)
    stage, outputs = (page.locator(f".layout > {part}").bounding_box() for part in (".stage", ".outputs"))
    assert outputs["x"] > stage["x"] + stage["width"] - 1 and outputs["y"] < stage["y"] + 50


# The explorer module as a notebook widget renders it: a model of traits (anywidget's get, set, on,
# off, save_changes), with first_view, the view the cell made (widget.Explorer sets it).
NOTEBOOK_VIEW = """async ([made, other]) => {
  const { default: explorer } = await import("./static/explorer.js");
  const teaching = await (await fetch("api/example?encoding=base64")).json();
  const traits = { payload: teaching, stage: made.stage, head: made.head, query: made.query, all_queries: false, first_view: made };
  const listeners = new Map();
  const model = {
    get: (k) => traits[k],
    set: (k, v) => { if (traits[k] === v) return; traits[k] = v; for (const f of listeners.get(`change:${k}`) || []) f(); },
    save_changes() {},
    on: (e, f) => { if (!listeners.has(e)) listeners.set(e, new Set()); listeners.get(e).add(f); },
    off: (e, f) => listeners.get(e)?.delete(f),
  };
  const el = document.createElement("div");
  document.body.append(el);
  explorer.render({ model, el });
  const reset = () => { el.querySelector("button.reset").click(); return [traits.stage, traits.head, traits.query]; };
  model.set("stage", "scores");
  model.set("query", 0);
  const once = reset();
  // Python gives the widget another payload (it forgets the cell's view), then the reset puts the cell's back
  model.set("payload", { ...teaching, query: other });
  model.set("first_view", null);
  model.set("stage", "scores");
  const twice = reset();
  return { once, twice, same: traits.payload === teaching };
}"""


def test_a_notebooks_reset_brings_back_the_view_its_cell_made_with_its_payload(page, server_url):
    """Explorer(stage="weights", head=1, query="milk"): its reset gave the first stage, head 0 and
    "like". After Python set another payload, the reset put the cell's payload back but not its view."""
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    made = {"stage": "weights", "head": 1, "query": 3, "all_queries": False}
    result = page.evaluate(NOTEBOOK_VIEW, [made, 0])
    assert result == {"once": ["weights", 1, 3], "twice": ["weights", 1, 3], "same": True}, result


def test_a_presentation_clickers_keys_step_the_stages_from_previous_or_next(page, server_url):
    """A clicker sends Page Down and Page Up: on a focused Previous or Next they step the stages (and
    the arrow keys beside them); elsewhere they scroll the page as ever."""
    page.goto(server_url)
    title = page.locator(".stage h2")
    expect(title).to_contain_text("1. Projections")
    page.keyboard.press("PageDown")  # the focus on nothing: the page scrolls, the stage stays
    page.wait_for_function("() => scrollY > 0")
    assert title.inner_text().startswith("1. Projections")
    page.get_by_role("button", name="Next").focus()
    for key, stage in (("PageDown", "2. Scores"), ("PageDown", "3. Weights"), ("PageUp", "2. Scores"), ("ArrowRight", "3. Weights"), ("ArrowLeft", "2. Scores")):
        page.keyboard.press(key)
        expect(title).to_contain_text(stage)
    page.get_by_role("button", name="Previous").focus()
    page.keyboard.press("PageUp")
    expect(title).to_contain_text("1. Projections")
    page.evaluate(SETTLED)  # the step brought into view first
    page.evaluate("() => window.scrollTo(0, 300)")
    page.keyboard.press("PageUp")  # at the first stage: no step, and the page scrolls as the key does elsewhere
    page.wait_for_function("() => scrollY < 300")
    expect(title).to_contain_text("1. Projections")
    assert page.evaluate("() => document.activeElement.textContent") == "Previous"


def test_the_whole_bar_names_a_tenth_and_the_products_are_as_large_as_their_signs(page, server_url, api):
    """Head 1 of "like" weighs like 0.10: its part of the bar that fills one whole is named (it was
    left blank below 0.12). The sums of products of the Scores stage read at the size of the signs
    between them (their numbers were 0.9 of it, 13 px: small on a projector)."""
    page.goto(server_url + "#stage=weights&head=1&query=1")
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 1")
    payload, arrays = api
    names = page.locator(".stage .stack .seg-name").all_inner_texts()
    assert names == [t for t, w in zip(payload.tokens, arrays["weights"][1, 1]) if w >= 0.07] and "like" in names, names
    assert page.locator(".stage .stack .seg-name").evaluate_all("spans => spans.every((s) => s.scrollWidth <= s.clientWidth)")  # whole, not cut
    page.get_by_label("Calculation stage").select_option(label="Scores")
    sizes = page.locator(".stage td.terms").first.evaluate("td => [getComputedStyle(td).fontSize, getComputedStyle(td.querySelector('.num')).fontSize]")
    assert sizes[0] == sizes[1], sizes


def test_each_stage_ends_with_a_way_on_that_opens_the_next_at_its_top(page, server_url):
    """On a phone, Next is a screen or more above a stage's end: a button there goes on to the next
    stage, shown from its title (scrolled to when it is out of sight), which takes the focus (the
    button leaves with its stage)."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, server_url)
    for i, title in enumerate(STAGES[1:], start=2):
        button = page.locator(".stage .go-on button")
        expect(button).to_have_text(f"Go on to {i}. {title} →")
        button.scroll_into_view_if_needed()
        if i % 2:
            button.focus()
            page.keyboard.press("Enter")
        else:
            button.click()
        expect(page.locator(".stage h2")).to_contain_text(f"{i}. {title}")
        seen = page.locator(".stage h2").evaluate("(h) => { const r = h.getBoundingClientRect(); return [r.top >= 0 && r.bottom <= innerHeight, document.activeElement === h]; }")
        assert seen == [True, True], (title, seen)
    assert page.locator(".stage .go-on").count() == 0 and page.locator(".stage .next-steps").count() == 1  # the last stage says where to go from there


def test_on_a_phone_a_head_picked_under_the_stage_brings_the_stage_up(page, server_url):
    """The head outputs lie under the stage in one column: a head picked there changed a stage some
    700 px above, out of sight, and only the "inspected" badge moved. On a wide screen, where they
    are beside it, the page stays where it is."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server_url + "#stage=weights")
    page.wait_for_selector(".mha-explorer .stage h2")
    button = page.locator('.outputs button[data-pick-head="1"]')
    button.scroll_into_view_if_needed()
    assert page.locator(".stage h2").evaluate("(h) => h.getBoundingClientRect().bottom < 0")  # far above
    button.click()
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 1")
    page.wait_for_function("() => { const r = document.querySelector('.stage h2').getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }")
    # the focus comes up with it: left on the button, far below, the next Tab went on from there
    page.wait_for_function("() => document.activeElement === document.querySelector('.stage h2')")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.evaluate("() => window.scrollTo(0, document.querySelector('.stage h2').getBoundingClientRect().top + scrollY)")  # reading down the stage
    y = page.evaluate("() => window.scrollY")
    # the title under the controls, which stay at the top: where a stage picked is brought up
    assert y > 0 and page.evaluate("() => document.querySelector('.stage h2').getBoundingClientRect().top < document.querySelector('.controls').getBoundingClientRect().bottom")
    page.locator('.outputs button[data-pick-head="0"]').evaluate("(b) => b.click()")  # (where it is: a pointer's click would scroll to it first)
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 0")
    page.wait_for_timeout(200)
    assert page.evaluate("() => window.scrollY") == y


def test_tab_goes_from_table_to_table_and_arrows_move_inside(page, server_url, api):
    payload, arrays = api
    open_page(page, server_url)
    focused = "() => document.activeElement.dataset.src || document.activeElement.textContent"
    shown = "() => getComputedStyle(document.activeElement, '::after').content"
    # every table, vector and list of numbers is one Tab stop, however many numbers it holds (the
    # numbers on screen: not those of the stages kept hidden beside it)
    numbers, stops, groups = page.evaluate("""() => {
      const shown = [...document.querySelectorAll('.mha-explorer .num')].filter((n) => !n.closest('.stage-kept'));
      return [shown.length, shown.filter((n) => n.getAttribute('tabindex') === '0').length,
              new Set(shown.map((n) => n.closest('table') || n.parentElement.closest('.bars, .vec, .cells') || n.parentElement)).size]; }""")
    assert numbers > 60 and stops == groups < 20, (numbers, stops, groups)

    page.get_by_role("button", name="Reset example").focus()
    path = []
    for _ in range(60):
        page.keyboard.press("Tab")
        path.append(page.evaluate(focused))
        if path[-1].startswith("Cost of this configuration"):
            break
    buttons = page.locator(".steps button, .outputs button, .stage summary, .stage .go-on button").count()
    assert path[-1].startswith("Cost of this configuration") and len(path) <= stops + buttons + 1, path  # was one Tab per number
    # the first stop of the stage is x's row; then W^Q, then q: move inside q and K with the arrows
    q_stop = next(src for src in path if src.startswith("q:"))
    assert q_stop == f"q:0,{payload.query},0"
    page.locator(f".stage [data-src='{q_stop}']").first.focus()
    page.keyboard.press("ArrowRight")
    assert page.evaluate(focused) == f"q:0,{payload.query},1"
    assert float(json.loads(page.evaluate(shown))) == arrays["q"][0, payload.query, 1]  # its full precision
    page.keyboard.press("ArrowRight")  # the end of q: the focus stays
    assert page.evaluate(focused) == f"q:0,{payload.query},1"
    page.locator(".stage [data-src='k:0,0,1']").first.focus()
    page.keyboard.press("ArrowDown")  # the next row of K, the same column
    assert page.evaluate(focused) == "k:0,1,1"
    page.keyboard.press("End")
    assert page.evaluate(focused) == f"k:0,{len(payload.tokens) - 1},1"
    page.keyboard.press("Home")
    assert page.evaluate(focused) == "k:0,0,0"
    # the number the arrows left is the table's Tab stop now: Tab leaves the table from there
    assert page.locator(".stage .num[tabindex='0'][data-src^='k:']").count() == 1


@pytest.mark.parametrize("width", [390, 360])
def test_a_touch_phone_keeps_every_column_of_the_scores_on_screen(browser, server_url, api, width):
    """A phone's touch screen (larger targets, its own font sizes): the scores' five columns fit, with
    every negative factor of the products in brackets, for each query and head; so do the value
    mixing's, each vector on one line (at 360 px, z was cut at "[0.41, 0.1")."""
    payload, _ = api
    context = browser.new_context(viewport={"width": width, "height": 844}, is_mobile=True, has_touch=True, device_scale_factor=2)
    try:
        page = context.new_page()
        open_page(page, server_url)
        select(page, "Calculation stage", "Scores")
        for query, head in itertools.product(payload.tokens, ("Head 0", "Head 1")):
            select(page, "Query token", query)
            select(page, "Inspect head", head)
            figure = page.locator(".stage .figure").evaluate("(f) => [f.scrollWidth, f.clientWidth]")
            assert figure[0] <= figure[1] + 1, (query, head, figure)
        # the value mixing's rows of two numbers each keep to one line: wrapped, a row read as a column
        select(page, "Calculation stage", "Value mixing")
        for head in ("Head 0", "Head 1"):
            select(page, "Inspect head", head)
            lines = page.locator(".stage table.calc-table .vec").evaluate_all("(vs) => vs.map((v) => new Set([...v.getClientRects()].map((r) => Math.round(r.top))).size)")
            assert len(lines) == 9 and set(lines) == {1}, (head, lines)  # 4 value rows, 4 weighted, z
            figure = page.locator(".stage .figure").evaluate("(f) => [f.scrollWidth, f.clientWidth]")
            assert figure[0] <= figure[1] + 1, (head, figure)
    finally:
        context.close()


EQUATION_RULES = """() => [...document.querySelectorAll('.stage .equation')].map((e) => {
  const style = getComputedStyle(e);
  return { rule: style.borderTopWidth + ' ' + style.borderTopStyle, top: e.getBoundingClientRect().top,
    bottom: e.getBoundingClientRect().bottom, first: e.firstElementChild.getBoundingClientRect().top };
})"""


HEAD_NAME = """() => { const name = document.querySelector('.head-output button.head-name'); const card = name.closest('.head-output');
  return [name.getBoundingClientRect().height, card.getBoundingClientRect().height]; }"""


def test_on_a_touch_screen_a_heads_name_in_the_outputs_is_a_fingers_target_on_the_line_it_had(browser, server_url):
    """The other head's name, a button, was 23 px tall: too small for a finger. On a touch screen
    its target is 40 px and more; its card is laid out as before."""
    sizes = {}
    for touch in (False, True):
        context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=touch, has_touch=touch)
        page = context.new_page()
        open_page(page, server_url)
        sizes[touch] = page.evaluate(HEAD_NAME)
        context.close()
    (name, card), (finger, touch_card) = sizes[False], sizes[True]
    assert name < 30 <= 40 <= finger and card == touch_card, sizes


CARD_SUMMARIES = """() => [...document.querySelectorAll('details.costs > summary, details.matrices > summary')].map((s) => {
  const box = s.getBoundingClientRect(), text = document.createRange();
  text.selectNodeContents(s);
  const line = text.getBoundingClientRect();
  return [box.height, line.top - box.top, box.bottom - line.bottom];
})"""


def test_on_a_touch_screen_a_cards_summary_is_a_fingers_height_its_line_in_the_middle(browser, server_url):
    """Cost and Matrices, folded, are a line each: 44 px tall on a touch screen, their line at the
    top over an empty band of 20 px. It stands in the middle now."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    open_page(page, server_url)
    summaries = page.evaluate(CARD_SUMMARIES)
    assert len(summaries) == 2 and all(height >= 44 and abs(above - below) <= 4 for height, above, below in summaries), summaries
    context.close()


def test_on_a_phone_the_projections_equations_that_wrap_are_ruled_apart(page, server_url):
    """On a phone each product wraps over several lines: without a rule between them, K's X (its
    first line) read as the end of q's product above it. A wide screen, each on one line, has none."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, server_url)
    q, k, v = page.evaluate(EQUATION_RULES)[:3]  # (then the packed view's, folded)
    assert q["rule"].startswith("0px") and k["rule"] == v["rule"] == "1px solid"
    for above, below in [(q, k), (k, v)]:
        assert above["bottom"] <= below["top"] < below["first"] - 5, (above, below)  # the rule, then X a little below it
    # the packed view's heads, under its product, continue it: no rule between them
    page.locator("details.packed > summary").click()
    packed = page.locator("details.packed > .equation").evaluate_all("(es) => es.map((e) => getComputedStyle(e).borderTopStyle)")
    assert packed == ["none", "none"], packed
    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_function("() => getComputedStyle(document.querySelectorAll('.stage .equation')[1]).borderTopStyle === 'none'")


def test_a_phone_shows_every_column_without_scrolling_sideways(page, server_url, artifacts):
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, server_url)
    # the first screen reaches the stage: query and head menus side by side, a line per stage tab
    boxes = page.evaluate("""() => ['Query token', 'Inspect head', 'Calculation stage'].map((label) =>
        [...document.querySelectorAll('.controls select')].find((s) => s.labels[0].textContent === label).getBoundingClientRect())
        .map((r) => [Math.round(r.top), Math.round(r.left), Math.round(r.right)])""")
    (query_top, _, query_right), (head_top, head_left, _), (stage_top, _, _) = boxes
    assert query_top == head_top and query_right < head_left and stage_top > head_top, boxes
    assert page.locator(".stage h2").evaluate("(h) => h.getBoundingClientRect().bottom") < 700
    tabs = page.locator(".steps button").evaluate_all("(bs) => bs.map((b) => b.getBoundingClientRect().height)")
    assert max(tabs) < 50, tabs  # one line each, however long the title ("5 Concatenation")
    # in one row that scrolls sideways, every title whole (cut with "…" three abreast, they could not be read)
    rows = page.locator(".steps button").evaluate_all("(bs) => bs.map((b) => [Math.round(b.getBoundingClientRect().top), b.scrollWidth <= b.clientWidth])")
    assert len({top for top, _ in rows}) == 1 and all(whole for _, whole in rows), rows
    for title in STAGES:
        select(page, "Calculation stage", title)
        # the current stage's tab is brought into the row's box (the row only: the page stays where it is)
        page.wait_for_function("""() => { const row = document.querySelector('.steps').getBoundingClientRect();
          const tab = document.querySelector('.steps [aria-current="step"]').getBoundingClientRect();
          return tab.left >= row.left - 1 && tab.right <= row.right + 1; }""")
        assert page.evaluate("() => window.scrollX") == 0, title
        wide = page.evaluate("""() => [...document.querySelectorAll('.mha-explorer .stage .figure, .mha-explorer .stage, .mha-explorer .outputs')]
            .filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => [e.className, e.scrollWidth, e.clientWidth])""")
        assert wide == [], f"{title}: {wide}"
        # the teaching example's formulas fit a phone whole (a real layer's longer ones scroll)
        assert page.evaluate("() => { const f = document.querySelector('.stage .formula'); return f.scrollWidth <= f.clientWidth + 1; }"), title
        if title == "Weights":  # "Σ = 1.00" and the header "scaled score s" keep to one line each
            assert page.locator(".stage .sum").evaluate("(s) => new Set([...s.getClientRects()].map((r) => Math.round(r.bottom))).size") == 1
            header = page.locator(".stage table.calc-table thead th").nth(1)
            # (the header may wrap, but its s stays on the line of "score")
            tops = header.evaluate("""(th) => { const text = th.firstChild, at = text.data.indexOf("score"), r = document.createRange();
              const top = (i) => { r.setStart(text, i); r.setEnd(text, i + 1); return Math.round(r.getBoundingClientRect().top); };
              return [top(at), top(text.data.length - 1)]; }""")
            assert tops[0] == tops[1], tops
        if title == "Value mixing":
            page.locator(".stage").screenshot(path=str(artifacts / "teaching-phone-mixing.png"))
        if title == "Concatenation":  # z_0 and z_1 side by side, as the one vector they are: wrapped, they read as stacked
            tops = page.locator(".stage .concat .block").evaluate_all("(bs) => bs.map((b) => Math.round(b.getBoundingClientRect().top))")
            assert len(tops) == 2 and len(set(tops)) == 1, tops
        # an equation too wide for a line breaks before an operator, never after one: each × or =
        # sits on the line of the matrix it leads to
        apart = page.evaluate("""() => [...document.querySelectorAll('.stage .equation .op')].filter((op) => {
            const a = op.getBoundingClientRect(), b = op.nextElementSibling.getBoundingClientRect();
            return !(a.right <= b.left && a.top < b.bottom && a.bottom > b.top); }).map((op) => op.textContent)""")
        assert apart == [], f"{title}: {apart}"
        # a matrix's row labels ("head 0 · z[1]") stay on one line
        tall = page.evaluate("() => [...document.querySelectorAll('.stage table.matrix tbody th')].filter((th) => th.getClientRects()[0].height > 30).map((th) => th.textContent)")
        assert tall == [], f"{title}: {tall}"
        if title == "Output projection":  # the chart is drawn for the width it has: its text stays legible
            heights = page.evaluate("() => [...document.querySelectorAll('.stage svg.chart text')].map((t) => t.getBoundingClientRect().height)")
            assert heights and min(heights) >= 10, heights
            # a head's label is painted over the total's tick of its row, never under it
            under = page.evaluate("""() => [...document.querySelectorAll('.stage svg.chart .seg-label')].filter((label) => {
                const box = label.getBBox();
                return [...document.querySelectorAll('.stage svg.chart .total-tick')].some((tick) => {
                    const y1 = tick.y1.baseVal.value, y2 = tick.y2.baseVal.value;
                    return y1 < box.y + box.height && y2 > box.y && label.compareDocumentPosition(tick) & Node.DOCUMENT_POSITION_FOLLOWING; });
            }).map((label) => label.textContent)""")
            assert under == [], under
    page.locator("summary", has_text="Cost of this configuration").click()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390  # the cost tables scroll in their box
    # narrower still (a notebook cell beside a sidebar): the buttons wrap rather than run out of the view
    page.set_viewport_size({"width": 300, "height": 844})
    cut = page.evaluate("""() => { const box = document.querySelector('.mha-explorer .controls').getBoundingClientRect();
        return [...document.querySelectorAll('.mha-explorer .controls button')].filter((b) => b.getBoundingClientRect().right > box.right + 0.5).map((b) => b.textContent); }""")
    assert cut == []


def test_on_a_phone_a_box_with_more_to_scroll_fades_at_that_edge(page, server_url, artifacts):
    """A phone hides scrollbars until touched: a box cut by the screen fades at the edge with more
    beyond it, and only there; a box that fits has no fade. A calculation's table, whose first
    column (the row names) stays in place, fades at its right alone: never over the names."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, server_url)
    frames = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
    fade = "(e) => { const s = getComputedStyle(e); return [s.maskImage !== 'none', s.maskSize, s.maskPosition]; }"
    opaque_left = "(e) => getComputedStyle(e).maskImage.startsWith('linear-gradient(to right, rgb(0, 0, 0)')"
    # the stage tabs, one row that scrolls: at the start the tile reaches one fade past the left
    # edge, so only the right edge fades; at the end the left edge only; in the middle both
    tabs = page.locator(".steps")
    assert tabs.evaluate("(t) => t.scrollWidth > t.clientWidth")
    tabs.evaluate("(t) => { t.scrollLeft = 0; }")
    page.evaluate(frames)
    assert tabs.evaluate(fade) == [True, "calc(100% + 24px) 100%", "-24px 0px"]
    tabs.evaluate("(t) => { t.scrollLeft = t.scrollWidth; }")
    page.evaluate(frames)
    assert tabs.evaluate(fade) == [True, "calc(100% + 24px) 100%", "0px 0px"]
    tabs.evaluate("(t) => { t.scrollLeft = (t.scrollWidth - t.clientWidth) / 2; }")
    page.evaluate(frames)
    assert tabs.evaluate(fade) == [True, "100% 100%", "0px 0px"] and not tabs.evaluate(opaque_left)
    page.locator("summary", has_text="Cost of this configuration").click()
    table = page.locator(".cost-section .wide-table").first
    assert table.evaluate("(t) => t.scrollWidth > t.clientWidth")  # the KV-cache table is wider than a phone
    assert table.evaluate(fade) == [True, "100% 100%", "0px 0px"] and table.evaluate(opaque_left)  # its right edge
    table.scroll_into_view_if_needed()
    table.screenshot(path=str(artifacts / "teaching-phone-cost-fade.png"))
    table.evaluate("(t) => { t.scrollLeft = (t.scrollWidth - t.clientWidth) / 2; }")
    page.evaluate(frames)
    assert table.evaluate(fade) == [True, "100% 100%", "0px 0px"] and table.evaluate(opaque_left)  # still its right alone
    table.evaluate("(t) => { t.scrollLeft = t.scrollWidth; }")
    page.evaluate(frames)
    assert table.evaluate(fade) == [True, "calc(100% + 24px) 100%", "0px 0px"]  # at the end: the fade slid out of sight
    figure = page.locator(".stage .figure")
    assert figure.evaluate("(f) => f.scrollWidth <= f.clientWidth") and figure.evaluate(fade)[0] is False
    # a wide screen with a mouse shows its scrollbars: no fade there (a mask costs time at each step)
    page.set_viewport_size({"width": 1280, "height": 844})
    assert table.evaluate("(t) => getComputedStyle(t).animationName") == "none"


def test_a_formula_wider_than_its_box_is_a_named_tab_stop_the_arrow_keys_scroll(page, server_url):
    """At 320 px with a large default font (32 px, as a reader with low vision sets it) the
    output's formula scrolls sideways: Tab reaches it, it is named, and the arrow keys scroll it.
    Once it fits, it is no tab stop."""
    page.set_viewport_size({"width": 320, "height": 700})
    open_page(page, server_url)
    page.evaluate("() => { document.documentElement.style.fontSize = '32px'; }")
    select(page, "Calculation stage", "Output projection")
    formula = page.locator(".stage .formula").first
    assert formula.evaluate("(f) => f.scrollWidth > f.clientWidth")
    expect(formula).to_have_attribute("tabindex", "0")
    expect(formula).to_have_attribute("aria-label", "formula, scrolls sideways")
    assert formula.get_attribute("role") == "region"
    page.locator(".steps [tabindex='0']").first.focus()
    for _ in range(4):  # from the stage tabs on: the panel's title, then the formula
        page.keyboard.press("Tab")
        if formula.evaluate("(f) => f === document.activeElement"):
            break
    assert formula.evaluate("(f) => f === document.activeElement"), "Tab never reached the formula"
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('.stage .formula').scrollLeft > 0")
    # equations side by side that wrap apart: one wider than the box starts at its left edge,
    # where scrolling reaches it (centred, its start lay before the box, out of reach)
    page.evaluate("() => { document.documentElement.style.fontSize = '48px'; }")
    select(page, "Calculation stage", "Projections")
    parts = page.locator(".stage .formula").first.evaluate("""(f) => { const left = f.getBoundingClientRect().left + parseFloat(getComputedStyle(f).paddingLeft);
        return [f.scrollWidth > f.clientWidth, ...[...f.querySelectorAll('math')].map((m) => m.getBoundingClientRect().left >= left - 0.5)]; }""")
    assert parts == [True, True, True, True], parts
    page.evaluate("() => { document.documentElement.style.fontSize = ''; }")
    page.set_viewport_size({"width": 1280, "height": 800})
    expect(formula).not_to_have_attribute("tabindex", "0")
    assert formula.get_attribute("role") is None and formula.get_attribute("aria-label") is None


def test_a_printed_page_is_a_handout_with_its_colours_and_every_section_open(page, server_url):
    """Printed, the view keeps its bars' colours (backgrounds a browser leaves out by default),
    drops its controls, and opens Matrices and the costs for the print only."""
    open_page(page, server_url)
    select(page, "Calculation stage", "Weights")
    assert page.locator(".matrices .matrices-body").count() == 0  # built when first opened
    page.emulate_media(media="print")
    hidden = page.evaluate("""() => ['.mha-explorer > .controls', '.mha-explorer > nav', '.go-on', 'header.site .modes']
        .map((s) => getComputedStyle(document.querySelector(s)).display)""")
    assert hidden == ["none"] * 4
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"  # paper, not the screen's grey
    assert page.locator(".stage .bar").first.evaluate("(b) => getComputedStyle(b).printColorAdjust") == "exact"
    page.evaluate("""() => { window.seen = null; addEventListener('beforeprint', () => queueMicrotask(() => {
        window.seen = [...document.querySelectorAll('.mha-explorer details')].filter((d) => !d.closest('.stage-kept'))  // (a stage not on screen is not printed)
          .map((d) => d.open + ':' + d.className + ':' + d.children.length); }), { once: true }); }""")
    page.pdf()
    seen = page.evaluate("window.seen")
    assert seen and all(s.startswith("true:") for s in seen), seen  # every section open while printing
    assert any(s.startswith("true:matrices:") and not s.endswith(":1") for s in seen), seen  # and Matrices built for it
    assert page.evaluate("() => [...document.querySelectorAll('.mha-explorer details')].every((d) => !d.open)")  # closed again after
    page.emulate_media(media="screen")


# A print stands in for the browser's dialog: while it is "open", what the paper would hold is
# recorded (every stage's title in order, whether it is the page's own panel or one lent to the
# print, its numbers, whether every section is open); then the dialog "closes".
PRINT_RECORDER = """() => {
  window.printed = [];
  window.print = () => {
    dispatchEvent(new Event("beforeprint"));
    window.printed.push({
      titles: [...document.querySelectorAll(".mha-explorer .stage h2")].map((h) => h.textContent),
      lent: [...document.querySelectorAll(".mha-explorer .layout > .stage")].map((s) => s.getAttribute("aria-hidden")),
      numbers: [...document.querySelectorAll(".mha-explorer .printed-stage .num[data-src]")].map((e) => [e.dataset.src, e.textContent, e.dataset.full]),
      allOpen: [...document.querySelectorAll(".mha-explorer details")].every((d) => d.open),
    });
    dispatchEvent(new Event("afterprint"));
  };
}"""


def test_print_all_stages_prints_every_stage_of_the_view_then_leaves_it_as_it_was(page, server_url, api):
    """A teacher's handout: Print all stages prints the six stages of the head and query on screen,
    in order, with their numbers (each the trace's), every section open; after the print the page
    holds its one stage again, and Ctrl+P still prints the view alone."""
    payload, arrays = api
    page.goto(server_url + "#stage=weights&head=1&query=2")
    page.wait_for_selector(".mha-explorer .stage h2")
    page.evaluate(PRINT_RECORDER)
    page.get_by_role("button", name="Print all stages").click()
    [printed] = page.evaluate("window.printed")
    titles = [t.split(" ·")[0] for t in printed["titles"]]
    assert titles == [f"{i + 1}. {title}" for i, title in enumerate(STAGES)], titles
    assert all("query “warm”" in t for t in printed["titles"]) and "head 1 ·" in printed["titles"][0], printed["titles"]
    # the page's own panel (Weights) in its place, the others lent to the paper and hidden from screen readers
    assert printed["lent"] == ["true", "true", None, "true", "true", "true"], printed["lent"]
    assert printed["allOpen"]
    shown = set()
    for src, text, full in printed["numbers"]:
        name, index = src.split(":")
        value = arrays[name][tuple(int(i) for i in index.split(","))]
        assert text == fmt(value) and float(full) == value, (src, text, full, value)
        shown.add(src)
    for stage in ("projections", "scores", "mixing", "concat", "output"):
        missing = required_sources(stage, 2, 1, payload) - shown
        assert not missing, f"{stage}: {sorted(missing)[:5]}"
    # afterwards: the one stage on screen, as it was, and the sections closed again
    assert page.locator(".mha-explorer .stage").count() == 1
    expect(page.locator(".mha-explorer .stage h2")).to_have_text(re.compile(r"^3\. Weights · head 1"))
    assert page.evaluate("() => [...document.querySelectorAll('.mha-explorer details')].every((d) => !d.open)")
    # the browser's own print (Ctrl+P) is the view alone
    page.evaluate("""() => { addEventListener('beforeprint', () => queueMicrotask(() => {
        window.ownPrint = document.querySelectorAll('.mha-explorer .stage h2').length; }), { once: true }); }""")
    page.pdf()
    assert page.evaluate("window.ownPrint") == 1
    page.emulate_media(media="print")
    assert page.locator("#print-all").evaluate("(b) => getComputedStyle(b).display") == "none"  # not on the paper
    page.emulate_media(media="screen")


def test_a_system_in_dark_mode_gets_a_dark_page_with_no_serious_accessibility_violations(browser, server_url, artifacts):
    """The page follows the system's colour scheme: dark, its text keeps its contrast (axe's
    colour-contrast rule among the rest), in the explorer, in the lab with a bad cell, and in a notice."""
    page = browser.new_page(color_scheme="dark", viewport={"width": 1280, "height": 900})
    open_page(page, server_url)
    background = lambda selector: page.locator(selector).first.evaluate("(e) => getComputedStyle(e).backgroundColor")
    assert background("body") == "rgb(21, 24, 29)" and background(".mha-explorer .stage") == "rgb(30, 34, 41)"
    axe = Axe()
    for title in STAGES:
        select(page, "Calculation stage", title)
        bad = [(v["id"], v["help"]) for v in axe.run(page).response["violations"] if v["impact"] in ("serious", "critical")]
        assert bad == [], f"{title}: {bad}"
    page.screenshot(path=str(artifacts / "teaching-dark.png"))
    # printed, it is light: dark paper would take a cartridge of ink
    page.evaluate("""() => { addEventListener('beforeprint', () => queueMicrotask(() => { window.printedOn = [
        getComputedStyle(document.querySelector('.mha-explorer .stage')).backgroundColor, document.documentElement.className]; }), { once: true }); }""")
    page.pdf()
    assert page.evaluate("window.printedOn") == ["rgb(255, 255, 255)", ""]
    assert background(".mha-explorer .stage") == "rgb(30, 34, 41)"  # and dark again after
    open_link(page, server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=2&d_head=2&d_v=2&causal=1&bias=0&tokens=a+b+c&seed=0&stage=weights")
    page.locator(".edit-grid input").first.fill("abc")
    page.locator(".edit-grid input").first.press("Tab")
    expect(page.locator(".cell-error.shown")).to_be_visible()
    bad = [(v["id"], v["help"]) for v in axe.run(page).response["violations"] if v["impact"] in ("serious", "critical")]
    assert bad == [], bad
    page.screenshot(path=str(artifacts / "lab-dark.png"))
    # the frame over a heatmap (which keeps its light scale) is dark, with a light halo where it runs onto the page
    open_link(page, server_url + "#mode=lab&d_model=8&n_heads=2&n_kv_heads=2&d_head=4&d_v=4&causal=0&bias=0&tokens=a+b+c+d+e+f+g+h+i&seed=0&stage=weights&query=4&all=1")
    mark = page.locator(".stage .heatmap-mark").first
    expect(mark).to_be_visible()
    assert mark.evaluate("(m) => [getComputedStyle(m).borderTopColor, getComputedStyle(m).boxShadow]") == ["rgb(29, 35, 48)", "rgb(228, 231, 237) 0px 0px 0px 1px"]
    # its row labels, drawn on the canvas, take the dark look's grey (the light one's was 2.7:1 on the dark card)
    page.add_init_script("""(() => { const fill = CanvasRenderingContext2D.prototype.fillText; window.labelInks = new Set();
        CanvasRenderingContext2D.prototype.fillText = function (...a) { window.labelInks.add(this.fillStyle); return fill.apply(this, a); }; })()""")
    open_link(page, server_url + "#mode=lab&d_model=8&n_heads=2&n_kv_heads=2&d_head=4&d_v=4&causal=0&bias=0&tokens=a+b+c+d+e+f+g+h+i&seed=1&stage=weights&query=4&all=1")
    expect(page.locator(".stage canvas.heatmap").first).to_be_visible()
    inks = page.evaluate("() => [...window.labelInks]")
    assert "#a4adbc" in inks and "#5b6475" not in inks, inks
    open_link(page, server_url + "#stage=nowhere")  # a notice says what of the link was not used
    page.wait_for_selector("#notice:not([hidden])")
    bad = [(v["id"], v["help"]) for v in axe.run(page).response["violations"] if v["impact"] in ("serious", "critical")]
    assert bad == [], bad
    page.close()
    light = browser.new_page(color_scheme="light")
    open_page(light, server_url)
    assert light.locator("body").evaluate("(e) => getComputedStyle(e).backgroundColor") == "rgb(245, 247, 250)"
    light.close()


def test_a_windowed_layers_mask_says_how_many_keys_the_window_hid_and_where_to_see_it(page, server_url):
    """A sliding window of 8 on 30 tokens (a Gemma local layer in small): the mask's count is
    split into keys after the query and keys outside the window, and a query the window cuts
    nothing from says where to look."""
    config = AttentionConfig(d_model=4, n_heads=2, causal=True, sliding_window=8)
    tokens = [f"t{i}" for i in range(30)]
    weights = random_weights(config, 0)
    payload = trace_payload(trace(random_x(30, 4, 0), weights, config), tokens, weights, 20, "json").model_dump(mode="json")
    open_page(page, server_url)
    lead = page.evaluate("""async (payload) => { const m = window.mhaExplorer.model;
        m.set("payload", payload); m.set("query", 20); m.set("stage", "mask"); m.save_changes();
        await new Promise((done) => requestAnimationFrame(done));
        return document.querySelector(".stage p.lead").textContent; }""", payload)
    assert lead.endswith("30 keys are masked (grey): 9 after it, 13 outside the window."), lead  # keys 21-29; 0-12
    select(page, "Query token", "t5")
    assert page.locator(".stage p.lead").first.inner_text().endswith(
        "24 of 30 keys are masked (grey), all after it: no earlier key is outside the window for this query; pick one at position 8 or later to see the window cut."
    )


def test_no_serious_accessibility_violations(page, server_url):
    open_page(page, server_url)
    page.get_by_text("Matrices", exact=True).click()
    page.locator(".matrices-body").wait_for(state="visible")
    axe = Axe()
    for title in STAGES:
        select(page, "Calculation stage", title)
        violations = axe.run(page).response["violations"]
        bad = [(v["id"], v["impact"], v["help"]) for v in violations if v["impact"] in ("serious", "critical")]
        assert bad == [], f"{title}: {bad}"


def test_a_dark_notebook_theme_gets_a_dark_view_that_stays_readable(page, server_url):
    open_page(page, server_url)
    page.get_by_text("Matrices", exact=True).click()
    page.locator(".matrices-body").wait_for(state="visible")
    light = page.locator(".mha-explorer .stage").evaluate("(e) => getComputedStyle(e).backgroundColor")
    # JupyterLab marks its dark themes on the body (VS Code: class vscode-dark)
    page.evaluate("() => { document.body.dataset.jpThemeLight = 'false'; }")
    dark = page.locator(".mha-explorer .stage").evaluate("(e) => getComputedStyle(e).backgroundColor")
    assert light == "rgb(255, 255, 255)" and dark == "rgb(30, 34, 41)"
    axe = Axe()
    for title in STAGES:  # every text keeps enough contrast on the dark colours
        select(page, "Calculation stage", title)
        violations = axe.run(page, context=".mha-explorer").response["violations"]
        bad = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in violations if v["impact"] in ("serious", "critical")]
        assert bad == [], f"{title}: {bad}"


def test_a_scale_of_the_configs_own_is_said_where_the_scores_are_divided(page, server_url, api):
    """A configuration with its own scale (Explorer.from_config(..., scale=0.05)): the table divided
    by 20 while the line above it gave only √d_head = √2 = 1.414, and the configuration's line
    under the head outputs left the scale out."""
    payload, _ = api
    own = payload.model_copy(deep=True)
    own.config.scale = 0.05
    body = own.model_dump_json()
    page.route("**/api/example*", lambda route: route.fulfill(status=200, content_type="application/json", body=body))
    open_page(page, server_url)
    select(page, "Calculation stage", "Scores")
    lead = page.locator(".stage p.lead").first.inner_text()
    assert "This layer's config sets the scale, 0.05: each score is divided by 20, in place of √d_head = √2 = 1.414." in lead, lead
    assert page.locator(".stage td.div").first.inner_text() == "÷ 20"
    assert page.locator(".outputs p.hint").last.inner_text().endswith("· scale 0.05")
    # a formula's box scrolls sideways only: the Mask's ink, a pixel below it, gave it a vertical scrollbar
    assert page.locator(".stage .formula").first.evaluate("(f) => getComputedStyle(f).overflowY") == "hidden"


def test_token_text_is_rendered_as_text(page, server_url, api):
    payload, _ = api
    hostile = payload.model_copy(deep=True)
    hostile.tokens[0] = '<img src=x onerror="window.pwned=1">'
    body = hostile.model_dump_json()
    page.route("**/api/example*", lambda route: route.fulfill(status=200, content_type="application/json", body=body))
    open_page(page, server_url)
    select(page, "Query token", hostile.tokens[0])
    assert page.locator(".mha-explorer img").count() == 0
    assert hostile.tokens[0] in page.locator(".stage").inner_text()
    assert page.evaluate("() => window.pwned") is None


def test_page_is_served_with_a_strict_content_security_policy(server_url):
    response = httpx.get(server_url)
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert response.headers["x-content-type-options"] == "nosniff"


def by_hand(value) -> str:
    """As a person rounds a result of decimal arithmetic: a half away from zero, on the decimal value."""
    return str(Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)).replace("-0.00", "0.00")


FULL_NUMBERS = "Every number here is rounded to two decimals, and each result is worked out from the full numbers"


def rounding_note(why: str, where: list[str]) -> str:
    """The start of a note of results that land off the rounded ones shown: in one sentence up to
    three, else one a line (ten clauses in a sentence could not be read off a projector)."""
    if len(where) <= 3:
        return f"{why}. Worked from the rounded numbers instead, {'; '.join(where)}."
    return f"{why}. Worked from the rounded numbers instead:\n" + ";\n".join(where) + "."


def test_where_rounded_contributions_do_not_add_up_the_page_says_so(page, server_url, api):
    """A learner works out each head's part of each output component from the z and Wᴼ shown, and
    adds the two rounded parts: where either misses the rounded number shown by 0.01, the table's
    note names the cell or the component."""
    payload, arrays = api
    open_page(page, server_url)
    select(page, "Calculation stage", "Output projection")
    q, d_v = payload.query, payload.config.d_v
    part = lambda i, m: by_hand(sum(Decimal(fmt(arrays["concat"][q, i * d_v + e])) * Decimal(fmt(arrays["W_O"][i * d_v + e, m])) for e in range(d_v)))
    parts = [f"head {i}'s part of y[{m}] comes to {part(i, m)} (shown: {fmt(arrays['contributions'][i, q, m])})" for i in range(2) for m in range(4) if part(i, m) != fmt(arrays["contributions"][i, q, m])]
    total = lambda m: sum(Decimal(fmt(arrays["contributions"][i, q, m])) for i in range(2))
    off = [f"y[{m}] comes to {by_hand(total(m))} (shown: {fmt(arrays['output'][q, m])})" for m in range(4) if by_hand(total(m)) != fmt(arrays["output"][q, m])]
    assert off  # the example has some (query "like": y[1], y[2], y[3])
    note = page.locator(".stage p", has_text="Worked from the rounded numbers").inner_text()
    assert note.startswith(rounding_note(FULL_NUMBERS, parts + off)), note


def test_every_hand_check_lands_or_is_explained(page, server_url, api):
    """A learner checks each stage by hand from the numbers shown, for every query and head: a score
    as the sum of the products shown, divided by √d_head given to three decimals; each weight as e^s
    (worked out to three decimals) over their sum; each weighted value row as the weight times the
    row, and z as their sum; each head's part of y as its z times its rows of Wᴼ. Where two-decimal
    numbers cannot land on the rounded result, a note under the figure names the row, cell or
    component."""
    payload, arrays = api
    open_page(page, server_url)
    n, d_v = len(payload.tokens), payload.config.d_v
    explained = []
    note = page.locator(".stage p", has_text="Worked from the rounded numbers")

    def named(where: list[str], why: str = FULL_NUMBERS) -> None:
        """where: each miss as "what comes to (by hand) (shown: …)"."""
        assert note.count() == bool(where), where
        if where:
            assert note.inner_text().startswith(rounding_note(why, where)), (note.inner_text(), where)
            explained.extend(where)

    def numbers(text: str) -> list[str]:
        return text.strip().strip("[]").split(", ")

    for q, head in itertools.product(range(n), (0, 1)):
        select(page, "Query token", payload.tokens[q])
        select(page, "Inspect head", f"Head {head}")
        select(page, "Calculation stage", "Scores")
        off = []
        for j, row in enumerate(page.locator(".stage table.calc-table tbody tr").all_inner_texts()):
            _, products, score, divisor, scaled = row.split("\t")
            assert divisor.strip() == "÷ 1.414" and score == fmt(arrays["scores"][head, q, j]) and scaled == fmt(arrays["scaled"][head, q, j])
            assert not re.search(BARE_SIGN, products), products  # "0.50×(-1.25)": a negative factor in brackets
            dot = sum(Decimal(a.strip("()")) * Decimal(b.strip("()")) for a, b in (p.split("×") for p in products.split(" + ")))
            if by_hand(dot) != score:
                off.append(f"q · k of “{payload.tokens[j]}” comes to {by_hand(dot)} (shown: {score})")
            if by_hand(Decimal(score) / Decimal("1.414")) != scaled:
                off.append(f"the scaled score of “{payload.tokens[j]}” comes to {by_hand(Decimal(score) / Decimal('1.414'))} (shown: {scaled})")
        named(off, "Every number here is rounded to two decimals, the divisor 1.414 to three, and each result is worked out from the full numbers")
        select(page, "Calculation stage", "Weights")
        s = arrays["scaled"][head, q]
        e = np.exp([float(fmt(x)) for x in s])  # of each s as shown, so that a learner can redo every step
        total = sum(float(f"{x:.3f}") for x in e)  # as the e^s shown add up
        added = by_hand(sum(Decimal(fmt(a)) for a in arrays["weights"][head, q]))
        off = [] if added == "1.00" else [f"the sum Σ of the weights as shown comes to {added} (shown: 1.00)"]
        rows = [r.split("\t") for r in page.locator(".stage table.softmax tbody tr").all_inner_texts()]
        assert len(rows) == n
        for j, (_, shown_s, shown_e, over, weight) in enumerate(rows):
            assert (shown_s, shown_e, over.strip(), weight) == (fmt(s[j]), f"{e[j]:.3f}", f"÷ {total:.3f}", fmt(arrays["weights"][head, q, j]))
            if by_hand(Decimal(shown_e) / Decimal(over.strip("÷ "))) != weight:
                off.append(f"the weight of “{payload.tokens[j]}” comes to {by_hand(Decimal(shown_e) / Decimal(over.strip('÷ ')))} (shown: {weight})")
        named(off, "The scores and weights here are rounded to two decimals. Each eˢ is worked out from its score as shown, and Σ eˢ from the eˢ as shown, to three decimals; each weight, and their sum, from the full numbers")
        select(page, "Calculation stage", "Value mixing")
        g = payload.kv_group[head]
        rows = [r.split("\t") for r in page.locator(".stage table.calc-table tbody tr").all_inner_texts()][:n]
        off = []
        for j, (_, weight, _, value, _, weighted) in enumerate(rows):
            assert weight == fmt(arrays["weights"][head, q, j]) and numbers(value) == [fmt(x) for x in arrays["v"][g, j]]
            assert numbers(weighted) == [fmt(arrays["weights"][head, q, j] * x) for x in arrays["v"][g, j]]
            times = [by_hand(Decimal(weight) * Decimal(x)) for x in numbers(value)]
            if times != numbers(weighted):
                off.append(f"the weighted row of “{payload.tokens[j]}” comes to [{', '.join(times)}] (shown: {weighted.strip()})")
        weighted = arrays["weights"][head, q][:, None] * arrays["v"][g]  # (n, d_v)
        z_hand = [by_hand(sum(Decimal(fmt(w)) for w in weighted[:, c])) for c in range(d_v)]
        named(off + [f"head {head}'s z[{c}] comes to {z_hand[c]} (shown: {fmt(arrays['z'][head, q, c])})" for c in range(d_v) if z_hand[c] != fmt(arrays["z"][head, q, c])])
    assert any(w.startswith("the weighted row") for w in explained)  # the example has some (milk, head 0: like and warm)
    assert any(w.startswith("the weight of") for w in explained) and any(w.startswith("the scaled score of") for w in explained)

    for q in range(n):  # the output: every head's part of each component, then their sum
        select(page, "Query token", payload.tokens[q])
        select(page, "Calculation stage", "Output projection")
        part = lambda i, m: by_hand(sum(Decimal(fmt(arrays["concat"][q, i * d_v + e])) * Decimal(fmt(arrays["W_O"][i * d_v + e, m])) for e in range(d_v)))
        parts = [f"head {i}'s part of y[{m}] comes to {part(i, m)} (shown: {fmt(arrays['contributions'][i, q, m])})" for i in range(2) for m in range(4) if part(i, m) != fmt(arrays["contributions"][i, q, m])]
        total = lambda m: sum(Decimal(fmt(arrays["contributions"][i, q, m])) for i in range(2))  # noqa: B023
        named(parts + [f"y[{m}] comes to {by_hand(total(m))} (shown: {fmt(arrays['output'][q, m])})" for m in range(4) if by_hand(total(m)) != fmt(arrays["output"][q, m])])
    assert any("'s part of" in w for w in explained)  # the example has some (cats: head 0's part of y[2])


def test_the_stages_are_one_tab_stop_and_the_arrow_keys_move_along_them(page, server_url, api):
    payload, _ = api
    open_page(page, server_url)
    ids = [s.id for s in payload.page_stages]
    assert page.locator(".steps button[tabindex='0']").count() == 1
    page.locator(f".steps button[data-go-stage='{ids[0]}']").focus()
    focused = "() => document.activeElement.dataset.goStage"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.evaluate(focused) == ids[2]
    page.keyboard.press("Enter")
    assert page.get_by_label("Calculation stage").input_value() == ids[2]
    assert page.locator(".steps button[tabindex='0']").get_attribute("data-go-stage") == ids[2]
    page.keyboard.press("End")
    assert page.evaluate(focused) == ids[-1]
    page.keyboard.press("Home")
    assert page.evaluate(focused) == ids[0]


def test_the_last_stage_says_where_to_go_from_there(page, server_url):
    open_page(page, server_url)
    assert page.locator(".stage .next-steps").count() == 0
    select(page, "Calculation stage", "Output projection")
    expect(page.locator(".stage .next-steps")).to_have_text(
        "That is the whole path of one query through the layer. From here: follow another head or query token, "
        "press All queries to see every query at once, or change the configuration (heads, widths, a causal mask) "
        "with the Attention lab's settings."
    )
    page.get_by_role("button", name="All queries").click()  # every query on screen: the way back to one is offered instead
    expect(page.locator(".stage .next-steps")).to_have_text(
        "That is the whole path of every query through the layer. From here: follow another head, "
        "press All queries again to follow one query with its numbers, or change the configuration (heads, widths, a causal mask) "
        "with the Attention lab's settings."
    )
    # the same words in the lab, where they are true as well, not sending the user where they are
    # (its view of the teaching example's configuration is shared with the teaching example's own)
    open_link(page, server_url + "#mode=lab&d_model=4&n_heads=2&n_kv_heads=2&d_head=2&d_v=2&causal=0&bias=0&tokens=cats+like+warm+milk&seed=0")
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('MHA')")
    select(page, "Calculation stage", "Output projection")
    expect(page.locator(".stage .next-steps")).to_contain_text("or change the configuration (heads, widths, a causal mask) with the Attention lab's settings.")


# Visits every place (stage, head, query, all queries or one) in turn without a pause, then goes
# back to one 30 places before the end and then to the first, counting the elements each return makes.
VISIT_ALL_THEN_RETURN = """async (stages) => {
    const model = window.mhaExplorer.model;
    const drawn = () => new Promise((done) => queueMicrotask(() => queueMicrotask(done)));
    const places = [];
    for (const all of [false, true]) for (const stage of stages) for (const head of [0, 1]) for (const query of [0, 1, 2, 3]) places.push({ all, stage, head, query });
    const go = async ({ all, stage, head, query }) => {
        model.set("all_queries", all); model.set("stage", stage); model.set("head", head); model.set("query", query);
        model.save_changes?.();
        await drawn();
    };
    for (const place of places) await go(place);
    const made = async (place) => {
        const original = Document.prototype.createElement;
        let count = 0;
        Document.prototype.createElement = function (...args) { count += 1; return original.apply(this, args); };
        try { await go(place); } finally { Document.prototype.createElement = original; }
        return { count, title: document.querySelector(".stage h2").textContent };
    };
    const recent = await made(places[places.length - 30]);
    const first = await made(places[0]);
    return { places: places.length, first, recent };
}"""


def test_only_the_stage_panels_used_last_are_kept(page, server_url, api):
    """The page keeps the 64 stage panels used last: going back to one used 30 places ago makes
    nothing, and one used before 64 others is built again, the same as it was."""
    open_page(page, server_url)
    result = page.evaluate(VISIT_ALL_THEN_RETURN, STAGE_IDS)
    assert result["places"] == 96  # more than the 64 kept
    assert result["recent"]["count"] == 0, result
    assert result["first"]["count"] > 0, result
    assert result["first"]["title"].startswith("1. Projections") and "head 0" in result["first"]["title"]
    payload, arrays = api
    check_numbers(page, ".stage", arrays)


def test_on_a_phone_a_numbers_full_value_is_not_cut_at_the_figures_edge(browser, server_url):
    """The tip with a number's full value is centred over it, unless that would cut it at the side
    of its figure's box: then it keeps to the number's side towards the middle."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    open_page(page, server_url)
    select(page, "Calculation stage", "Weights")
    tip = """(n) => {
      const s = getComputedStyle(n, '::after');
      const width = parseFloat(s.width) + parseFloat(s.paddingLeft) + parseFloat(s.paddingRight);
      const at = n.getBoundingClientRect(), box = n.closest('.figure, .wide-table').getBoundingClientRect();
      const left = s.transform === 'none' ? (s.right === '0px' ? at.right - width : at.left) : (at.left + at.right) / 2 - width / 2;
      return [left >= box.left - 1, left + width <= box.right + 1];
    }"""
    for number in page.locator('.stage table.softmax [data-src^="weights:"]').all():
        number.hover()
        assert page.evaluate(tip, number.element_handle()) == [True, True], number.get_attribute("data-full")
    page.close()


def test_every_query_at_once_rules_the_querys_row_so_that_it_shows_from_afar(page, server_url):
    """The query's row among every query's was a tint barely off white: it is also ruled above and
    below, and its label is in ink, not grey."""
    open_page(page, server_url)
    select(page, "Calculation stage", "Value mixing")
    page.get_by_role("button", name="All queries").click()
    rows = page.locator(".stage table.matrix tbody tr").evaluate_all(
        """(trs) => trs.map((tr) => [tr.querySelector("th").textContent, getComputedStyle(tr.querySelector("td")).boxShadow !== "none",
            getComputedStyle(tr.querySelector("th")).color])"""
    )
    assert [name for name, _, _ in rows] == ["cats", "like", "warm", "milk"]
    assert [ruled for _, ruled, _ in rows] == [False, True, False, False]
    assert len({colour for _, _, colour in rows}) == 2  # the query's label stands apart
    # the inspected head's rows of W^O are edged in that head's colour only, not ruled in the accent (head 0's blue)
    page.get_by_role("button", name="All queries").click()  # back to the one query
    select(page, "Calculation stage", "Output projection")
    select(page, "Inspect head", "Head 1")
    ruled = page.locator(".stage table.matrix tr.block-row.inspected td").evaluate_all("(tds) => tds.map((td) => getComputedStyle(td).boxShadow)")
    assert ruled and set(ruled) == {"none"}, ruled


def test_print_all_stages_of_every_query_says_its_lead_once(page, server_url):
    """The All queries handout said "Every query at once: …" at each of its six stages; on paper it
    is said at the first. On screen, each stage keeps it."""
    page.goto(server_url + "#stage=scores&all=1")
    page.wait_for_selector(".mha-explorer .stage h2")
    page.evaluate("""() => { window.leads = []; window.print = () => {
        dispatchEvent(new Event("beforeprint"));
        window.leads = [...document.querySelectorAll(".mha-explorer .stage")].map((s) => [...s.querySelectorAll("p.lead")]
          .filter((p) => p.textContent.startsWith("Every query at once") && getComputedStyle(p, null).display !== "none").length);
        dispatchEvent(new Event("afterprint")); }; }""")
    page.emulate_media(media="print")
    try:
        page.evaluate("() => document.getElementById('print-all').click()")  # hidden on paper: pressed as on screen
        assert page.evaluate("window.leads") == [1, 0, 0, 0, 0, 0]
    finally:
        page.emulate_media(media="screen")
    assert page.locator(".stage p.lead", has_text="Every query at once").is_visible()


# for each hand-check table: every column of numbers, the right edges of its heading's text and of
# its numbers' text (a heading left-aligned over right-aligned numbers reads as the column before's)
COLUMN_EDGES = """table => {
  const right = (node) => { const r = document.createRange(); r.selectNodeContents(node); return r.getBoundingClientRect().right; };
  const heads = [...table.tHead.rows[0].cells];
  return heads.map((th, i) => {
    const cells = [...table.tBodies[0].rows].map((tr) => tr.cells[i]).filter((td) => td && td.children.length === 1 && td.firstElementChild.matches(".num"));
    return cells.length ? { heading: th.textContent, head: right(th), numbers: cells.map(right) } : null;
  }).filter(Boolean);
}"""


def test_a_column_of_numbers_has_its_heading_over_their_right_edge(page, server_url):
    """The hand-check tables right-align their numbers so that the decimal points line up; each
    column's heading sits over the same right edge."""
    open_page(page, server_url)
    checked = []
    for stage in ("Scores", "Weights", "Output projection"):
        select(page, "Calculation stage", stage)
        for table in page.locator(".stage table.calc-table").all():
            for column in table.evaluate(COLUMN_EDGES):
                assert all(abs(edge - column["numbers"][0]) < 1 for edge in column["numbers"]), (stage, column)  # the numbers line up
                assert abs(column["head"] - column["numbers"][0]) < 1, (stage, column)  # and their heading with them
                checked.append((stage, column["heading"]))
    # q · k and scaled; s, eˢ, ÷ Σ eˢ and the weight; y[0] to y[3]
    assert len(checked) >= 2 + 4 + 4, checked
    # the lab's first preset has d_model 8: its Output table, y[0] to y[7]
    page.get_by_role("button", name="Attention lab").click()
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('GQA')")
    select(page, "Calculation stage", "Output projection")
    columns = page.locator(".stage table.calc-table.contributions").evaluate(COLUMN_EDGES)
    assert [c["heading"] for c in columns] == [f"y[{m}]" for m in range(8)]
    assert all(abs(c["head"] - c["numbers"][0]) < 1 for c in columns), columns


# where a number's tip (its full value, the ::after box) lies: its left and right edges on the page,
# and those of the panel that clips it
TIP_EDGES = """(number) => {
  const tip = getComputedStyle(number, "::after");
  const at = number.getBoundingClientRect();
  const shift = new DOMMatrixReadOnly(tip.transform === "none" ? undefined : tip.transform).m41;
  const left = tip.left === "auto" ? at.width - parseFloat(tip.right) - parseFloat(tip.width) : parseFloat(tip.left);
  const start = at.left + left + shift;
  const panel = number.closest(".stage, .outputs").getBoundingClientRect();
  return { text: tip.content, start, end: start + parseFloat(tip.width), panel: [panel.left, panel.right] };
}"""


@pytest.mark.parametrize("width", [1366, 390])
def test_a_numbers_full_value_shows_whole_inside_its_panel(page, server_url, width):
    """The panels clip what overflows them: a tip centred over a number near a panel's edge (the
    head outputs' first z, the lead's q) keeps to the panel instead of losing its first digits."""
    page.set_viewport_size({"width": width, "height": 900})
    open_page(page, server_url)
    numbers = page.locator(".outputs .num, .stage p.lead .num")
    assert numbers.count() >= 8
    for i in range(numbers.count()):
        number = numbers.nth(i)
        number.hover()
        tip = number.evaluate(TIP_EDGES)
        assert tip["text"].strip('"') == number.get_attribute("data-full")
        assert tip["panel"][0] <= tip["start"] and tip["end"] <= tip["panel"][1], (width, tip)


def test_on_a_phone_numbers_side_by_side_keep_apart(page, server_url):
    """A phone's tables have narrow columns; right-aligned numbers still keep a gap from the number
    before them ("0.21 -0.09" read as one)."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, server_url)
    select(page, "Calculation stage", "Output projection")
    gaps = page.locator(".stage table.calc-table").last.evaluate("""(table) => [...table.tBodies[0].rows].flatMap((tr) => {
      const numbers = [...tr.querySelectorAll("td > .num:only-child")].map((n) => n.getBoundingClientRect());
      return numbers.slice(1).map((box, i) => box.left - numbers[i].right);
    })""")
    assert len(gaps) == 3 * 3 and min(gaps) >= 8, gaps


def test_an_address_changed_while_the_page_loads_is_shown_and_then_kept_up(page, server_url):
    """Back, Forward or an edited address while the page still loads: the page reloads on the new
    address, and its later changes are written into it. Before, it showed the new address but took
    the one it started on for its own, and so never wrote its link again (seen on a busy machine,
    Back pressed twice in quick succession)."""
    page.add_init_script("""(() => {
      const fetchFirst = window.fetch;
      window.fetch = (...args) => {
        if (String(args[0]).includes("api/example") && !sessionStorage.getItem("moved")) {
          sessionStorage.setItem("moved", "1");  // once: the reload it makes loads as usual
          location.hash = "#mode=teaching&stage=weights&head=1&query=2";
        }
        return fetchFirst(...args);
      };
    })()""")
    page.goto(server_url + "#mode=teaching&stage=scores&head=0&query=1")
    expect(page.locator(".stage h2")).to_contain_text("Weights")
    expect(page.locator(".stage h2")).to_contain_text("head 1")
    page.get_by_label("Calculation stage").select_option(label="Value mixing")
    page.wait_for_function("() => location.hash.includes('stage=mixing') && location.hash.includes('head=1')")


def test_a_vector_of_numbers_to_point_at_is_spaced_as_one_worked_out(page, server_url):
    """Value mixing sets a value row, whose numbers can be pointed at, beside the weighted row the
    page works out: both read "[1.00, 0.00]", the same characters at the same places."""
    open_page(page, server_url)
    select(page, "Calculation stage", "Value mixing")
    widths = page.locator(".stage table.calc-table").first.evaluate("""(table) => [...table.tBodies[0].rows].map((tr) =>
      [...tr.querySelectorAll(".vec")].map((v) => [v.textContent, v.getBoundingClientRect().width])).filter((row) => row.length === 2)""")
    assert len(widths) == 4  # one row for each key
    for (value_text, value_width), (weighted_text, weighted_width) in widths:
        assert re.fullmatch(r"\[-?\d\.\d\d, -?\d\.\d\d\]", value_text) and len(value_text) == len(weighted_text)
        assert abs(value_width - weighted_width) < 0.5, widths


def test_reset_pressed_far_down_a_stage_brings_up_the_first_view_from_its_top(page, server_url):
    """The controls stay at the top of a large window, Reset among them: pressed at the end of the
    last stage, it shows the first view from its top (its stage's title under the controls), not
    the middle of a shorter stage."""
    open_page(page, server_url)
    select(page, "Calculation stage", "Output projection")
    page.evaluate(SETTLED)
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.evaluate(SETTLED)
    assert page.evaluate("() => document.querySelector('.mha-explorer').getBoundingClientRect().top") < -300
    page.get_by_role("button", name="Reset example").click()
    page.evaluate(SETTLED)
    box = page.evaluate("""() => {
      const title = document.querySelector('.stage h2').getBoundingClientRect();
      const controls = document.querySelector('.mha-explorer .controls').getBoundingClientRect();
      return { top: document.querySelector('.mha-explorer').getBoundingClientRect().top, title: title.top, under: controls.bottom, text: document.querySelector('.stage h2').textContent };
    }""")
    assert "Projections" in box["text"]
    assert box["top"] >= -1 and box["under"] <= box["title"] < page.viewport_size["height"] / 2, box


def test_every_column_of_a_table_has_a_header_a_screen_reader_can_say(page, server_url):
    """The ÷ column of the scores, the × and = of value mixing, and the KV cache's row names had
    empty headers (axe's empty-table-header): each now says what it is, unseen."""
    open_page(page, server_url)
    page.locator("summary", has_text="Cost of this configuration").click()
    axe = Axe()
    for title in ("Scores", "Value mixing"):
        select(page, "Calculation stage", title)
        violations = axe.run(page).response["violations"]
        assert [v["id"] for v in violations if v["id"] == "empty-table-header"] == [], title
    headers = page.locator(".mha-explorer th .sr-only").all_text_contents()
    assert {"times", "equals", "kind"} <= set(headers), headers


def test_the_weighted_rows_a_note_speaks_of_can_be_pointed_at(page, server_url, api):
    """Value mixing's note names weighted rows that land off weight × value row as shown, and says
    to point at a number to see it in full: those products show their full value too (worked out
    on the page, from the trace's weight and value), as every number beside them does."""
    payload, arrays = api
    page.goto(server_url + "#stage=mixing&head=0&query=3")  # milk: like's weighted row is [0.00, 0.19] by hand, 0.18 shown
    expect(page.locator(".stage .hint")).to_contain_text("the weighted row of “like” comes to [0.00, 0.19] (shown: [0.00, 0.18])")
    cells = page.locator(".stage .calc-table tbody tr").nth(1).locator("td").last.locator(".num")
    g = payload.kv_group[0]
    for e in range(payload.config.d_v):
        product = arrays["weights"][0, 3, 1] * arrays["v"][g, 1, e]  # as the page multiplies them: float64
        assert float(cells.nth(e).get_attribute("data-full")) == product
        assert cells.nth(e).inner_text() == fmt(product)
    cells.nth(1).hover()
    tip = cells.nth(1).evaluate("(n) => getComputedStyle(n, '::after').content")
    assert tip.strip('"') == cells.nth(1).get_attribute("data-full")


def test_every_segment_of_the_weights_strip_names_its_key_when_pointed_at(page, server_url, api):
    """The strip under the bars names a key only where its segment is wide enough: milk's 0.05 of
    head 1 (query "like") had no name at all. Each segment says its key and weight when pointed at."""
    payload, arrays = api
    page.goto(server_url + "#stage=weights&head=1&query=1")
    segments = page.locator(".stack .seg")
    expect(segments).to_have_count(4)
    names = ["cats", "like", "warm", "milk"]
    assert segments.evaluate_all("(all) => all.map((s) => s.title)") == [f"{names[j]}: {fmt(arrays['weights'][1, 1, j])}" for j in range(4)]
    assert segments.nth(3).inner_text() == ""  # too narrow for its name: the title is all it has


def test_a_trace_given_positions_of_its_own_is_turned_by_them_on_the_page(page, server_url):
    """A payload of trace(..., positions=[10, 11, 12, 13]) (a notebook's Explorer of it): the
    rotary stage said the query stood at its index and turned its pairs by hand by it, beside the
    layer's numbers, which RoPE turned by the positions given."""
    from mha_explorer import AttentionWeights

    config = AttentionConfig(d_model=8, n_heads=2, causal=True, rope_theta=10000.0)
    w = AttentionWeights.random(config, seed=2)
    x = np.round(np.random.default_rng(0).uniform(-1, 1, (4, 8)), 1)
    t = trace(x, w, config, positions=np.array([10, 11, 12, 13]))
    body = trace_payload(t, ["cats", "like", "warm", "milk"], w, query=2).model_dump_json()
    page.route("**/api/example*", lambda route: route.fulfill(body=body, content_type="application/json"))
    open_page(page, server_url)
    select(page, "Calculation stage", "Rotary positions")
    expect(page.locator(".stage p.lead").first).to_contain_text("Query “warm” (token 2 of the text) is at position 12.")
    table = page.locator(".stage table.rotary")
    expect(table.locator("caption")).to_have_text("Two pairs of q turned by hand, at position 12")
    for row in table.locator("tbody tr").all():  # turned by hand = turned by the layer, as shown
        cells = row.locator("td").all_inner_texts()
        assert cells[3] == cells[4], cells
    assert table.locator("tbody tr td").first.inner_text() == "12"  # pair (0, 2) turns by 12 × θ⁰ (four significant digits)


def test_a_stage_changed_from_outside_moves_the_focus_out_of_the_section_it_hides(page, server_url):
    """A keyboard user reads a number, and the stage changes from outside (a notebook's Python sets
    it, as here): the number's section is hidden, and the focus goes to the new stage's title, not
    to the page's start (where the browser drops a focus hidden from it) nor left out of sight."""
    open_page(page, server_url)
    number = page.locator(".stage .num").first
    number.focus()
    page.evaluate("() => window.mhaExplorer.model.set('stage', 'scores')")
    expect(page.locator(".stage h2")).to_contain_text("2. Scores")
    focused = page.evaluate("() => [document.activeElement.matches('.stage > h2'), Boolean(document.activeElement.closest('.stage-kept'))]")
    assert focused == [True, False], focused
    # Tab goes on into the stage shown
    page.keyboard.press("Tab")
    assert page.evaluate("() => Boolean(document.activeElement.closest('.stage')) && !document.activeElement.closest('.stage-kept')")
    # a stage changed while the focus is elsewhere (a control above the stage) leaves it there
    page.get_by_label("Query token").focus()
    page.evaluate("() => window.mhaExplorer.model.set('stage', 'weights')")
    expect(page.locator(".stage h2")).to_contain_text("3. Weights")
    assert page.evaluate("() => document.activeElement.matches('select')")
