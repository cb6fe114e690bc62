"""Real models on the page: loading with progress, the overview of every head, GQA and RoPE, 512 tokens."""

from __future__ import annotations

import hashlib
import json
import re
from decimal import ROUND_HALF_UP, Decimal
from urllib.parse import quote_plus

import httpx
import numpy as np
import pytest
from playwright.sync_api import expect

from mha_explorer.export import ModelLayers, export_site
from mha_explorer.models import available_models, load_model
from mha_explorer.modelview import DEFAULT_TEXT, HeadArrays, model_payload
from mha_explorer.schema import BINARY_MEDIA_TYPE, TracePayload, to_numpy

from .pagecheck import REFINED, SETTLED, check_numbers, file_page, open_link, page_text, routed, through_history

pytestmark = pytest.mark.e2e

INSTALLED = {m.name for m in available_models() if m.installed}


def needs(name):
    return pytest.mark.skipif(name not in INSTALLED, reason=f"{name} is not installed: run make models")


def full_arrays(payload: TracePayload) -> dict[str, np.ndarray]:
    """Every array at its full shape; slices the payload does not hold are NaN. (A server's page
    works each head's part of the output out itself, from z and the head's rows of W^O: the JSON
    answer holds the same numbers, see test_models_api.assert_same_answer.)"""
    out = {}
    for name, a in [*payload.stages.items(), *payload.weights.items()]:
        values = to_numpy(a)
        if a.heads is None:
            out[name] = values
        else:
            whole = np.full(a.shape, np.nan)
            whole[[r for i in a.heads for r in range(i * a.block, (i + 1) * a.block)] if a.block else a.heads] = values
            out[name] = whole
    if payload.model is not None and payload.model.head_shares is not None:
        out["head_shares"] = to_numpy(payload.model.head_shares)  # every head's, for the Output stage
    return out



def trace_model(page, server_url, name, text, layer):
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Real model").click()
    # entering the mode lists the models and loads the first one, with no error
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    assert page.locator("#models .lab-error").inner_text() == ""
    assert page.get_by_label("Text", exact=True).input_value() == DEFAULT_TEXT  # the terminal's and a notebook's text too
    page.get_by_label("Model", exact=True).select_option(name)
    page.get_by_label("Text", exact=True).fill(text)
    # choosing a model loads it (with progress) and lists its layers
    page.wait_for_function("(n) => document.querySelectorAll('#model-layer option').length > n", arg=layer, timeout=120_000)
    page.get_by_label("Layer (from 0)").select_option(str(layer))
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)


# the lens over a map (its device pixels), and the size of one of its cells in them
LENS_PIXELS = """() => {
  const lens = document.querySelector(".stage canvas.heatmap-lens");
  const { data } = lens.getContext("2d").getImageData(0, 0, lens.width, lens.height);
  return { width: lens.width, height: lens.height, cell: lens.width / 15, data: Array.from(data) };
}"""


def heads_fetched(page) -> None:
    """The page's layer answers say, as Gemma 3's do, that its weights are not sent whole: no head
    is worked out on the page, each one picked is fetched."""

    def without_whole_weights(route):
        answer = route.fetch()
        body = answer.body()
        if answer.headers.get("content-type") != BINARY_MEDIA_TYPE:
            return route.fulfill(response=answer)
        size = int.from_bytes(body[:8], "little")
        head = json.loads(body[8 : 8 + size])
        assert head["model"].pop("whole_weights"), "the layer's heads were not to be worked out on the page"
        shorter = json.dumps(head, separators=(",", ":"), ensure_ascii=False).encode()
        assert len(shorter) <= size
        headers = {k: v for k, v in answer.headers.items() if k not in ("content-encoding", "content-length")}
        route.fulfill(status=200, headers=headers, body=body[:8] + shorter.ljust(size) + body[8 + size :])  # the arrays where they were

    page.route("**/api/model-trace", without_whole_weights)


def api_trace(server_url, **request) -> TracePayload:
    return TracePayload.model_validate(httpx.post(server_url + "api/model-trace", json=request, timeout=120).json())


@needs("minilm")
def test_minilm_numbers_equal_the_api_and_every_head_is_shown(page, server_url, artifacts):
    text = "The cat sat on the mat because it was warm."
    trace_model(page, server_url, "minilm", text, 0)
    assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2, layer 0")
    assert page.locator(".thumb-button").count() == 12
    strip = page.locator(".token-strip .token").all_inner_texts()
    payload = api_trace(server_url, model="minilm", text=text, layer=0, head=0)
    assert len(strip) == len(payload.tokens) and strip[0] == "[CLS]" and strip[-1] == "[SEP]"
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")  # the layer's weights are here: no answer is on its way
    asked = []
    kinds = []
    page.on("request", lambda r: asked.append(r.url.rsplit("/", 1)[-1]) if "/api/model" in r.url else None)
    page.on("response", lambda r: kinds.append(r.headers["content-type"]) if "/api/model-" in r.url else None)
    page.locator(".thumb-button", has_text="Head 5").click()
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('head 5')")
    page.wait_for_function(REFINED)  # (worked out on the page, it is fetched once shown)
    assert asked == ["model-head"]  # only the head's own arrays are fetched
    assert kinds == [BINARY_MEDIA_TYPE]  # as raw float32 arrays, whose numbers meet the JSON answer's below
    page.get_by_label("Query token").select_option(index=3)
    payload = api_trace(server_url, model="minilm", text=text, layer=0, head=5)
    arrays = full_arrays(payload)
    for title in page.get_by_label("Calculation stage").locator("option").all_inner_texts():
        page.get_by_label("Calculation stage").select_option(label=title)
        assert "Loading" not in page.locator(".stage").inner_text()
        if page.locator(".stage .num").count():
            check_numbers(page, ".stage", arrays)
    page.get_by_label("Calculation stage").select_option(label="Weights")
    page.screenshot(path=str(artifacts / "model-minilm-weights.png"), full_page=True)
    # each of the 12 heads has a colour of its own in the head outputs
    colours = page.evaluate("() => [...document.querySelectorAll('.outputs .head-output')].map((e) => getComputedStyle(e).borderLeftColor)")
    assert len(colours) == 12 and len(set(colours)) == 12, colours

    # the pointer resting on a thumbnail fetches that head; the click then shows it at once
    asked.clear()
    page.locator(".thumb-button", has_text="Head 7").hover()
    page.wait_for_function("() => window.mhaExplorer.keptHeads.includes(7)")
    assert asked == ["model-head"]
    shown = page.evaluate("""() => new Promise((done) => {
        document.querySelector('.thumb-button[data-head="7"]').click();
        queueMicrotask(() => queueMicrotask(() => done(document.querySelector('.stage').textContent)));
    })""")
    assert "head 7" in shown and "Loading" not in shown  # drawn in the click's own task
    assert asked == ["model-head"]  # nothing more was fetched
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=0, head=7)))

    # a pointer sweeping across the row fetches nothing until it rests (on head 11 here)
    asked.clear()
    bodies = []
    page.on("request", lambda r: bodies.append(r.post_data_json["head"]) if r.url.endswith("api/model-head") else None)
    sweep = """() => {
        const thumbs = [8, 9, 10, 11].map((i) => document.querySelector(`.thumb-button[data-head="${i}"]`));
        thumbs.forEach((thumb, i) => {
            thumb.dispatchEvent(new PointerEvent("pointerover", { bubbles: true }));
            if (i < 3) thumb.dispatchEvent(new PointerEvent("pointerout", { bubbles: true, relatedTarget: thumbs[i + 1] }));
        });
    }"""
    page.evaluate(sweep)  # in one task, as a quick sweep of the pointer is, to the computer's timers
    page.wait_for_function("() => window.mhaExplorer.keptHeads.includes(11)")
    assert bodies == [11]

    # a press on a thumbnail (a touch, or a click with no rest first) fetches it before the click
    bodies.clear()
    page.evaluate("""() => document.querySelector('.thumb-button[data-head="4"]')
        .dispatchEvent(new PointerEvent("pointerdown", { bubbles: true }))""")
    page.wait_for_function("() => window.mhaExplorer.keptHeads.includes(4)")
    assert bodies == [4]

    # back to head 0: the page kept it, so nothing is fetched and its numbers are head 0's
    asked.clear()
    page.locator(".thumb-button", has_text="Head 0").click()
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('head 0')")
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=0, head=0)))
    assert asked == []

    # the focus on the head picker fetches the heads its arrow keys step to (1; 11 is already here)
    bodies.clear()
    page.get_by_label("Inspect head").focus()
    page.wait_for_function("() => window.mhaExplorer.keptHeads.includes(1)")
    assert bodies == [1]
    page.keyboard.press("ArrowDown")
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('head 1')")
    assert "Loading" not in page.locator(".stage").inner_text()
    assert 1 not in bodies[1:]  # head 1 was not fetched again (head 2, its next neighbour, may be)


CANVASES = "() => [...document.querySelectorAll('.stage canvas.heatmap')].map((c) => c.toDataURL())"
# the page's work for when it is idle has run (Chromium gives no idle time while the pointer rests
# on an element: the page's work then runs after a short wait, and so does this)
IDLE = "() => new Promise((done) => requestIdleCallback(() => requestIdleCallback(done, { timeout: 500 }), { timeout: 500 }))"
# the elements the explorer makes for another query, `step` further on the query menu, until it has drawn
MADE_BY_QUERY_STEP = """(step) => new Promise((done) => {
    const original = Document.prototype.createElement;
    let made = 0;
    Document.prototype.createElement = function (...args) { made += 1; return original.apply(this, args); };
    const menu = [...document.querySelectorAll("select")].find((s) => s.labels[0].textContent === "Query token");
    menu.selectedIndex += step;
    menu.dispatchEvent(new Event("change", { bubbles: true }));
    queueMicrotask(() => queueMicrotask(() => {
        Document.prototype.createElement = original;
        done({ made, title: document.querySelector(".stage h2").textContent });
    }));
})"""
# what a click on an element (a CSS selector) draws on any canvas, and the elements it makes, until the explorer has drawn (two microtasks)
DRAWN_BY = """(selector) => new Promise((done) => {
    const context = CanvasRenderingContext2D.prototype;
    const calls = [], made = [];
    const originals = ["putImageData", "fillText", "clearRect", "stroke"].map((name) => [context, name, context[name], calls]);
    originals.push([Document.prototype, "createElement", Document.prototype.createElement, made]);
    for (const [owner, name, original, into] of originals) owner[name] = function (...args) { into.push(name); return original.apply(this, args); };
    document.querySelector(selector).click();
    queueMicrotask(() => queueMicrotask(() => {
        for (const [owner, name, original] of originals) owner[name] = original;
        done({ calls, made: made.length, title: document.querySelector('.stage h2').textContent });
    }));
})"""


# the stage's map captioned `caption`: its canvas's device pixels, where its cells start (left of
# them, the row labels) and their size, in device pixels; and its lens's pixels
MAP_AND_LENS = """(caption) => {
  const figure = [...document.querySelectorAll(".stage figure.heatmap-figure")].find((f) => f.querySelector("figcaption").textContent === caption);
  const [canvas, lens, axis] = ["canvas.heatmap", "canvas.heatmap-lens", ".heatmap-axis"].map((s) => figure.querySelector(s));
  const ratio = canvas.width / parseFloat(canvas.style.width);
  const pixels = (c) => Array.from(c.getContext("2d").getImageData(0, 0, c.width, c.height).data);
  return { width: canvas.width, height: canvas.height, ratio, left: parseFloat(axis.style.marginLeft) * ratio, cellsWide: parseFloat(axis.style.width) * ratio,
           data: pixels(canvas), lens: { width: lens.width, height: lens.height, data: pixels(lens) } };
}"""
# from now on, each drawImage and putImageData on a map's canvas: [its caption, the call]
SPY_DRAWS = """() => {
  window.draws = [];
  const context = CanvasRenderingContext2D.prototype;
  for (const name of ["drawImage", "putImageData"]) {
    const original = context[name];
    context[name] = function (...args) {
      window.draws.push([this.canvas.closest("figure")?.querySelector("figcaption").textContent ?? null, name]);
      return original.apply(this, args);
    };
  }
}"""


@needs("minilm")
def test_a_big_map_blown_up_by_the_browser_has_each_cells_colour_in_every_pixel(page, server_url):
    """A 512-row map of cells 8 device pixels wide is blown up by the browser (drawImage, no
    smoothing), not pixel by pixel in the page: every device pixel of a cell has that cell's colour
    exactly, as the lens draws it from the cells' colours, with no blend at the cells' edges."""
    heads_fetched(page)  # the server's numbers: the lens and the map from the same cells
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 56 + ["the quick brown fox jumps over"])  # 512 tokens
    trace_model(page, server_url, "minilm", text, 2)
    page.evaluate(SPY_DRAWS)
    page.evaluate("() => window.mhaExplorer.model.set('head', 3)")
    page.wait_for_function("() => document.querySelector('.stage h2').textContent.includes('head 3 ')")
    draws = page.evaluate("() => window.draws")
    assert ["K3", "drawImage"] in draws and ["K3", "putImageData"] not in draws, draws
    k = page.locator(".stage figure.heatmap-figure", has=page.locator("figcaption", has_text=re.compile("^K3$"))).locator("canvas.heatmap")
    k.focus()  # (on the query's row, framed)
    for key in ["Control+Home"] + ["ArrowDown"] * 40 + ["ArrowRight"] * 20:  # the cursor from the first cell to row 40, column 20
        page.keyboard.press(key)
    shot = page.evaluate(MAP_AND_LENS, "K3")
    n, d_head = 512, 32
    cw, ch, left = shot["cellsWide"] / d_head, shot["height"] / n, round(shot["left"])
    assert cw == 8 * shot["ratio"] and ch == shot["ratio"], (cw, ch)  # whole device pixels, several across
    canvas = np.array(shot["data"]).reshape(shot["height"], shot["width"], 4)
    lens = np.array(shot["lens"]["data"]).reshape(shot["lens"]["height"], shot["lens"]["width"], 4)
    zx, zy = shot["lens"]["width"] / 15, shot["lens"]["height"] / 15  # the lens: 15 x 15 cells around the cursor
    top, first = 40 - 7, min(d_head - 15, 20 - 7)
    for r in range(15):
        for c in range(15):
            colour = lens[int((r + 0.5) * zy), int((c + 0.5) * zx)]
            x, y = left + int((first + c) * cw), int((top + r) * ch)
            cell = canvas[y : y + int(ch), x : x + int(cw)].reshape(-1, 4)
            assert (cell == colour).all(), (top + r, first + c, colour, np.unique(cell, axis=0))
    assert len(np.unique(lens.reshape(-1, 4)[:, :3], axis=0)) > 20  # cells of many colours: a real check
    # and those colours are head 3's K, on the legend's scale (given to two decimals: a shade off by one)
    legend = " ".join(k.locator("xpath=ancestor::figure").locator(".heatmap-legend").inner_text().split())
    scale = float(re.search(r"Colours: .*?([0-9.]+) · 0", legend).group(1))
    keys = full_arrays(api_trace(server_url, model="minilm", text=text, layer=2, head=3))["k"][3]  # (n, d_head): head 3 reads K/V head 3
    for r in range(15):
        for c in range(15):
            v = keys[top + r, first + c]
            shade = min(255, round(abs(v) * 255 / scale))
            expected = [round(255 + (base - 255) * shade / 255) for base in ((208, 102, 31) if v >= 0 else (47, 111, 208))]
            got = lens[int((r + 0.5) * zy), int((c + 0.5) * zx)][:3]
            assert np.abs(got - expected).max() <= 2, (top + r, first + c, v, got, expected)


@needs("minilm")
def test_a_real_models_weight_matrices_are_folded_to_a_line_and_stay_open_once_opened(page, server_url):
    """W^Q, W^K and W^V of a real model are maps of hundreds of rows (384 for MiniLM, a pixel
    each): folded, the Projections stage keeps its three equations about a screen tall."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 0)
    stage = page.locator(".stage")
    folded = stage.locator("details.folded-map")
    assert folded.count() == 3 and all(": 384 × 32 numbers (show them)" in s for s in folded.locator("summary").all_inner_texts())
    assert stage.locator("details.folded-map[open]").count() == 0
    short = stage.bounding_box()["height"]
    assert short < 2200, short  # with the three maps it was some 3,400 px
    folded.first.locator("summary").click()
    assert folded.first.locator("canvas.heatmap").is_visible()
    assert stage.bounding_box()["height"] > short + 300  # the map's 384 rows
    # open for another query and another head
    page.get_by_label("Query token").select_option(index=2)
    page.locator(".thumb-button", has_text="Head 3").click()
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('head 3')")
    assert [d.get_attribute("open") is not None for d in page.locator(".stage details.folded-map").all()] == [True, False, False]


@needs("minilm")
def test_a_head_in_the_open_head_menu_is_fetched_before_it_is_picked(page, server_url):
    """The head menu's list is made of the page's own elements: the pointer resting on an option,
    or the focus moving to one in the open list, fetches that head, so picking it shows it at once."""
    text = "The quick brown fox jumps over the lazy dog because it was bored."
    trace_model(page, server_url, "minilm", text, 0)
    bodies = []
    page.on("request", lambda r: bodies.append(r.post_data_json["head"]) if r.url.endswith("api/model-head") else None)
    menu = page.get_by_label("Inspect head")
    menu.click()
    expect(menu.locator("option", has_text="Head 6")).to_be_visible()  # the list is open
    page.wait_for_timeout(300)  # the focus's neighbours (1 and 11) are fetched meanwhile
    bodies.clear()
    menu.locator("option", has_text="Head 6").hover()
    page.wait_for_function("() => window.mhaExplorer.keptHeads.includes(6)")
    assert bodies == [6]
    menu.locator("option", has_text="Head 6").click()
    expect(page.locator(".stage h2")).to_contain_text("head 6")
    assert "Loading" not in page.locator(".stage").inner_text()
    assert bodies.count(6) == 1  # picked, it was not fetched again
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=0, head=6)))
    # from the keyboard: Alt+ArrowDown opens the list; each option the focus reaches is fetched
    menu.focus()
    page.mouse.move(0, 0)  # off the thumbnails, which the closed list left under the pointer
    page.wait_for_timeout(300)
    bodies.clear()
    page.keyboard.press("Alt+ArrowDown")
    expect(menu.locator("option", has_text="Head 9")).to_be_visible()
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    page.wait_for_function("() => window.mhaExplorer.keptHeads.includes(9)")
    # the focus rested on 9 alone: the options it passed over (7, already here, and 8) are not all fetched
    assert bodies[-1] == 9 and len(bodies) <= 2, bodies
    page.keyboard.press("Enter")
    expect(page.locator(".stage h2")).to_contain_text("head 9")
    assert "Loading" not in page.locator(".stage").inner_text()
    assert bodies.count(9) == 1
    # closed again, the menu's arrow keys step to the next head at once, as a system menu's do
    menu.focus()
    page.keyboard.press("ArrowDown")
    expect(page.locator(".stage h2")).to_contain_text("head 10")
    expect(menu.locator("option", has_text="Head 10")).to_be_hidden()  # the list stayed closed
    page.keyboard.press("End")
    expect(page.locator(".stage h2")).to_contain_text("head 11")
    page.keyboard.press("Home")
    expect(page.locator(".stage h2")).to_contain_text("head 0")
    page.keyboard.press("PageDown")  # ten on
    expect(page.locator(".stage h2")).to_contain_text("head 10")
    expect(menu.locator("option", has_text="Head 0")).to_be_hidden()
    # in the open list, Page Down moves the focus ten options on, and the page stays where it is
    query = page.get_by_label("Query token")
    query.focus()
    page.keyboard.press("Home")
    scrolled = page.evaluate("scrollY")
    page.keyboard.press("Alt+ArrowDown")
    expect(query.locator("option").first).to_be_visible()
    page.keyboard.press("PageDown")
    assert page.evaluate("document.activeElement.value") == "10" and page.evaluate("scrollY") == scrolled
    page.keyboard.press("Escape")


# A head picked with nothing fetched beforehand (as a notebook's Python sets it, or a browser's own
# menu picks it): read in the change's own task, with the numbers of its own stages.
PICKED_AT_ONCE = """async (head) => {
  const model = window.mhaExplorer.model;
  model.set("head", head);
  const payload = model.get("payload");
  await null; // the explorer draws in a microtask of the change
  const own = {};
  for (const name of ["q", "k", "v", "q_rotated", "k_rotated", "scores", "weights"])
    if (payload.stages[name]) own[name] = Array.from(payload.stages[name].data);
  return { worked: Boolean(payload.worked), title: document.querySelector(".stage h2").textContent, own };
}"""


@pytest.mark.parametrize(
    "name, layer",
    [pytest.param("minilm", 4, marks=needs("minilm")), pytest.param("smollm2", 29, marks=needs("smollm2"))],
)
def test_every_other_head_is_worked_out_on_the_page_shown_at_once_then_made_the_servers(page, server_url, name, layer):
    """The layer's every-head weights weigh little: once it is painted the page asks for them, and
    while idle works out each other head's q, k, v, rotation, scores and weights, so that a head
    picked with nothing fetched beforehand is drawn in the change's own task. Its numbers are the server's to float32's
    rounding (the page sums in double precision, NumPy's float32 products in another order); the
    server's own arrays are then fetched and copied in, and the numbers on screen are the server's
    exactly, the focus where it was."""
    text = "The cat sat on the mat because it was warm, and the dog watched it from the door."
    trace_model(page, server_url, name, text, layer)
    n_heads = page.evaluate("() => window.mhaExplorer.model.get('payload').config.n_heads")
    page.wait_for_function("(n) => window.mhaExplorer.workedHeads.length === n - 1", arg=n_heads)
    asked = []
    page.on("request", lambda r: asked.append(r.url.rsplit("/", 1)[-1]) if "/api/model" in r.url else None)
    head = n_heads - 2  # (SmolLM2's head 7 reads another K/V head than head 0)
    page.get_by_label("Calculation stage").select_option(label="Weights")
    held = []
    page.route("**/api/model-head", lambda route: held.append(route))  # (until the focus is placed)
    picked = page.evaluate(PICKED_AT_ONCE, head)
    # a number the user focuses meanwhile keeps the focus when the server's numbers come: written
    # again in place, or, where one shown with two decimals changes (made so here for MiniLM), in
    # the panel built anew
    focused = page.evaluate("""(changed) => {
        const number = document.querySelector('.stage .num');
        if (changed) number.textContent = '9.99';
        number.focus();
        return number.dataset.src;
    }""", name == "minilm")
    routed(page, held, 1)
    held[0].continue_()
    page.unroute("**/api/model-head")
    assert picked["worked"] and f"head {head} ·" in picked["title"] and "Loading" not in picked["title"]
    exact = HeadArrays.model_validate(httpx.post(server_url + "api/model-head", json={"model": name, "text": text, "layer": layer, "head": head}, timeout=60).json())
    assert set(picked["own"]) == {stage for stage in exact.stages if stage in picked["own"]} and "scores" in picked["own"]
    for stage, values in picked["own"].items():
        reference = to_numpy(exact.stages[stage]).ravel()
        # a few units of float32's last place (6e-8) of the array's largest number
        np.testing.assert_allclose(values, reference, rtol=0, atol=4e-6 * np.abs(reference).max(), err_msg=stage)
    page.wait_for_function("() => !window.mhaExplorer.model.get('payload').worked")
    assert asked == ["model-head"]  # fetched once it was shown, and only then
    assert page.evaluate("() => [document.activeElement.dataset.src, document.activeElement.isConnected, document.activeElement.textContent]") == [focused, True, page_text(to_numpy(exact.stages[focused.split(":")[0]])[(0, *map(int, focused.split(":")[1].split(",")[1:]))])]
    refined = page.evaluate(PICKED_AT_ONCE, head)["own"]
    for stage, values in refined.items():
        np.testing.assert_array_equal(np.float32(values), to_numpy(exact.stages[stage]).ravel(), err_msg=stage)
    arrays = full_arrays(api_trace(server_url, model=name, text=text, layer=layer, head=head))
    shown = check_numbers(page, ".stage", arrays)
    assert any(src.startswith("weights:") for src in shown)
    for title in page.get_by_label("Calculation stage").locator("option").all_inner_texts():
        page.get_by_label("Calculation stage").select_option(label=title)
        if page.locator(".stage .num").count():
            check_numbers(page, ".stage", arrays)
    # a layer's weights are the same on every text: another text on it asks for them no more
    asked.clear()
    page.get_by_label("Text", exact=True).fill("Another text on the same layer.")
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("(text) => window.mhaExplorer.model.get('payload').model?.text === text", arg="Another text on the same layer.")
    page.wait_for_function("(n) => window.mhaExplorer.workedHeads.length === n - 1", arg=n_heads)
    assert "model-trace" in asked and "model-weights" not in asked, asked


@needs("minilm")
def test_a_worked_out_head_asks_for_the_servers_numbers_only_once_it_is_painted(page, server_url):
    """Sending a request costs a millisecond or more of the task that sends it: the server's arrays
    of a head worked out on the page are asked for after the frame that shows the head, not in the
    pick's own task."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 3)
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")
    order = page.evaluate("""async () => {
        const seen = [];
        const fetch = window.fetch;
        window.fetch = (...args) => { seen.push(String(args[0]).split("/").pop()); return fetch(...args); };
        window.mhaExplorer.model.set("head", 7);
        await null; // the explorer draws in a microtask of the change
        seen.push(document.querySelector(".stage h2").textContent.includes("· head 7 ·") ? "drawn" : "not drawn");
        await new Promise((done) => requestAnimationFrame(() => { seen.push("frame"); done(); }));
        await new Promise((done) => setTimeout(done, 200));
        window.fetch = fetch;
        return seen;
    }""")
    assert order == ["drawn", "frame", "model-head"], order
    page.wait_for_function("() => !window.mhaExplorer.model.get('payload').worked")


@needs("minilm")
def test_a_head_picked_while_another_layer_comes_is_that_layers_own(page, server_url):
    """Head 3 picked while layer 2 is on its way: layer 1's worked head 3 shows meanwhile, and its
    own arrays are asked for; when layer 2 comes, its head 3 is asked for too (that older answer
    is layer 1's, not this one's) and shown, with the server's numbers."""
    text = "The cat sat on the mat because it was warm, and the dog watched it from the door."
    trace_model(page, server_url, "minilm", text, 1)
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")
    traces, heads = [], []
    page.route("**/api/model-trace", lambda route: traces.append(route))
    page.route("**/api/model-head", lambda route: heads.append(route))
    page.get_by_label("Layer (from 0)").select_option("2")
    routed(page, traces, 1)
    page.evaluate("() => window.mhaExplorer.model.set('head', 3)")
    routed(page, heads, 1)
    assert heads[0].request.post_data_json["layer"] == 1
    traces[0].continue_()
    page.wait_for_function("() => window.mhaExplorer.model.get('payload').model.layer === 2")
    routed(page, heads, 2)
    assert {r.request.post_data_json["layer"] for r in heads} == {1, 2}
    for route in heads:
        route.continue_()
    page.wait_for_function("() => document.querySelector('.stage h2').textContent.includes('· head 3 ·') && !window.mhaExplorer.model.get('payload').worked")
    assert page.evaluate("window.mhaExplorer.model.get('payload').model.layer") == 2
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=2, head=3)))


@needs("minilm")
def test_the_heads_worked_out_on_the_page_wait_while_the_server_runs_a_trace(page, server_url):
    """Their work would take the cores from the server's run of the next trace: it waits, and goes
    on where that trace fails and the layer stays on screen."""
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 56 + ["the quick brown fox jumps over"])  # 512 tokens
    trace_model(page, server_url, "minilm", text, 2)
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length >= 1")
    held = []
    page.route("**/api/model-trace", lambda route: held.append(route))
    page.get_by_label("Text", exact=True).fill("Another text.")
    page.get_by_role("button", name="Trace").click()
    routed(page, held, 1)
    before = page.evaluate("window.mhaExplorer.workedHeads.length")
    assert before < 11
    page.wait_for_timeout(1500)
    assert page.evaluate("window.mhaExplorer.workedHeads.length") == before
    held[0].fulfill(status=503, json={"detail": [{"field": "body", "message": "the server is busy."}]})
    expect(page.locator("#models .lab-error")).to_contain_text("The last good result stays on screen.")
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")
    page.console_errors[:] = [e for e in page.console_errors if "status of 503" not in e]  # the browser logs the answer


@needs("minilm")
def test_a_head_asked_of_a_notebooks_python_that_never_answers_says_what_to_do(page, server_url):
    """A saved notebook reopened has no kernel behind its view: a head asked for never comes. The
    view (here the page's, made to ask as a notebook's does) says so instead of loading for ever."""
    heads_fetched(page)
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 0)
    page.route("**/api/model-head", lambda route: None)  # asked, never answered
    page.evaluate("() => { window.mhaExplorer.model.set('head_arrays', null); window.mhaExplorer.model.set('head', 5); }")
    expect(page.locator(".stage .loading-head")).to_have_text("Loading head 5…")
    expect(page.locator(".stage .loading-head")).to_contain_text("Head 5 needs the Python kernel that made this view, and no answer came: if the kernel was restarted", timeout=12_000)
    expect(page.locator(".stage .loading-head")).to_contain_text("run the cell again")


@needs("minilm")
def test_a_head_on_its_way_dims_the_stage_and_one_that_cannot_be_fetched_gives_it_back(page, server_url):
    """While a head comes, the stage on screen stays, dimmed, with a note (it was blanked to
    "Loading head 5…": a flash each time, Gemma 3's 60 ms). A head that cannot be fetched is said
    once, and the view goes back to the head whose stage is on screen; it was left "loading"."""
    heads_fetched(page)
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 0)
    page.get_by_label("Calculation stage").select_option(label="Scores")
    title = page.locator(".stage h2").inner_text()
    held = []
    page.route("**/api/model-head", lambda route: held.append(route))
    page.get_by_label("Inspect head").select_option("5")
    expect(page.locator(".stage .loading-head")).to_have_text("Loading head 5…")
    assert page.locator(".stage h2").inner_text() == title and page.locator(".stage table").count() > 0  # the stage on screen, kept
    assert page.locator(".stage h2").evaluate("e => getComputedStyle(e).opacity") == "0.45"
    routed(page, held, 1)
    held[0].fulfill(status=503, json={"detail": [{"field": "body", "message": "the server is busy."}]})
    expect(page.locator("#models .lab-error")).to_have_text("Head 5 could not be fetched: the server is busy. Pick it again to retry.")
    expect(page.get_by_label("Inspect head")).to_have_value("0")
    expect(page.locator(".stage .loading-head")).to_have_count(0)
    assert page.locator(".stage h2").inner_text() == title and page.locator(".stage h2").evaluate("e => getComputedStyle(e).opacity") == "1"
    page.console_errors[:] = [e for e in page.console_errors if "status of 503" not in e]  # the browser logs the answer


@needs("minilm")
def test_while_a_head_comes_the_focus_and_the_scroll_stay_where_the_user_put_them(page, server_url):
    """The head outputs are drawn anew when a head arrives: the button the user tabbed to keeps
    the focus (not its entry), and a page scrolled meanwhile is not pulled back to them."""
    heads_fetched(page)
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 1)
    page.get_by_label("Calculation stage").select_option(label="Projections")
    slow = "() => { const f = window.fetch; window.fetch = async (...a) => { if (String(a[0]).includes('model-head')) await new Promise((r) => setTimeout(r, 1500)); return f(...a); }; }"
    page.evaluate(slow)
    page.locator(".outputs button[data-pick-head='9']").focus()
    page.keyboard.press("Enter")
    expect(page.locator(".stage .loading-head")).to_be_visible()
    page.locator(".outputs button[data-pick-head='10']").focus()  # the user moves on to another head's name
    expect(page.locator(".stage .loading-head")).to_have_count(0, timeout=10_000)
    assert page.evaluate("() => document.activeElement.dataset.pickHead") == "10"
    page.locator(".outputs button[data-pick-head='8']").click()
    expect(page.locator(".stage .loading-head")).to_be_visible()
    page.evaluate("() => scrollTo(0, 0)")
    expect(page.locator(".stage .loading-head")).to_have_count(0, timeout=10_000)
    page.wait_for_timeout(100)
    assert page.evaluate("scrollY") == 0


@needs("minilm")
def test_heads_fetched_ahead_never_push_out_the_head_on_screen(page, server_url):
    """The page keeps six heads; a pointer running over many thumbnails or options fetches more.
    The ones used longest ago go, never the head shown, which another step returns to at once."""
    heads_fetched(page)  # (a head worked out on the page is kept with the layer, never pushed out)
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 0)
    page.locator(".thumb-button", has_text="Head 3").click()
    expect(page.locator(".stage h2")).to_contain_text("head 3")
    for head in (4, 5, 6, 7, 8, 9, 10, 11):
        page.evaluate(f"""() => document.querySelector('.thumb-button[data-head="{head}"]')
            .dispatchEvent(new PointerEvent("pointerdown", {{ bubbles: true }}))""")
        page.wait_for_function(f"() => window.mhaExplorer.keptHeads.includes({head})")
    kept = page.evaluate("window.mhaExplorer.keptHeads")
    assert 3 in kept and len(kept) == 6 and 0 not in kept, kept  # head 0, used before 3, went


@needs("minilm")
def test_a_head_fetched_while_the_pointer_rests_is_drawn_before_the_click(page, server_url):
    text = "The quick brown fox jumps over the lazy dog because it was bored. " * 3  # maps, not tables
    trace_model(page, server_url, "minilm", text, 1)
    before = page.evaluate(CANVASES)
    assert len(before) >= 4  # X, W^Q, W^K, K, ... of the Projections stage
    page.locator(".thumb-button", has_text="Head 6").hover()
    page.wait_for_function("() => window.mhaExplorer.keptHeads.includes(6)")
    page.evaluate(IDLE)
    assert page.evaluate(CANVASES) == before  # drawing head 6 ahead left the maps on screen alone
    clicked = page.evaluate(DRAWN_BY, '.thumb-button[data-head="6"]')
    assert "head 6" in clicked["title"] and clicked["calls"] == []  # the click only put the panel in
    # resting on a stage builds and draws the next one while idle: Next only puts it in
    page.wait_for_timeout(400)
    page.evaluate(IDLE)
    assert page.evaluate(DRAWN_BY, ".step.primary")["calls"] == []
    assert page.locator(".stage h2").inner_text().startswith("2. Scores")
    page.get_by_role("button", name="Previous").click()
    # and the next query, for the arrow keys on the query menu: that step builds (almost) nothing,
    # while a jump to a query further on builds its panel
    tokens = page.get_by_label("Query token").locator("option").all_inner_texts()
    query = int(page.get_by_label("Query token").input_value())
    page.wait_for_timeout(400)
    page.evaluate(IDLE)
    near = page.evaluate(MADE_BY_QUERY_STEP, 1)
    assert near["title"].endswith(f"· head 6 · query “{tokens[query + 1]}”"), near
    page.wait_for_timeout(400)
    page.evaluate(IDLE)
    far = page.evaluate(MADE_BY_QUERY_STEP, 5)
    assert far["title"].endswith(f"· head 6 · query “{tokens[query + 6]}”"), far
    assert near["made"] <= 2 and far["made"] > 50, (near, far)  # a map's label may make one
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=1, head=6)))
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=1, head=6)))
    shown = page.evaluate(CANVASES)
    assert len(shown) == len(before) and shown != before
    # the maps are those of a page that opens on head 6
    page.wait_for_function("() => !window.mhaExplorer.linkPending")
    other = page.context.new_page()
    other.goto(page.url)
    other.wait_for_function("() => document.querySelector('.overview')?.hidden === false && document.querySelector('.stage h2')?.textContent.includes('head 6')", timeout=60_000)
    assert other.evaluate(CANVASES) == shown

    # a head's name in the head outputs fetches that head, too, when the pointer rests on it
    asked = []
    page.on("request", lambda r: asked.append(r.url.rsplit("/", 1)[-1]) if "/api/model" in r.url else None)
    page.locator('.outputs button[data-pick-head="9"]').hover()
    page.wait_for_function("() => window.mhaExplorer.keptHeads.includes(9)")
    assert asked == ["model-head"]
    page.locator('.outputs button[data-pick-head="9"]').click()
    assert "head 9" in page.locator(".stage h2").inner_text() and asked == ["model-head"]


@needs("minilm")
def test_a_view_at_rest_builds_every_stage_ahead(page, server_url):
    """A long text's first visit to a stage works out its maps' colours and draws them (up to 100 ms
    at 512 tokens): a view left at rest builds every other stage while the page is idle, so that a
    jump to any of them only puts it in."""
    text = "The quick brown fox jumps over the lazy dog because it was bored. " * 3
    trace_model(page, server_url, "minilm", text, 2)
    page.wait_for_timeout(400)  # REST: the view rests
    for _ in range(10):  # one idle moment per panel
        page.evaluate(IDLE)
    steps = page.locator("[data-go-stage]").evaluate_all("(buttons) => buttons.map((b) => b.dataset.goStage)")
    assert len(steps) >= 6
    for stage in (steps[-1], steps[1]):  # the last stage, then back to the Scores
        work = page.evaluate(DRAWN_BY, f'[data-go-stage="{stage}"]')
        assert work["made"] == 0 and work["calls"] == [], (stage, work)
        assert work["title"].startswith(f"{steps.index(stage) + 1}. ")
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=2, head=0)))


def assert_built_ahead_without_rest(page) -> None:
    """Steps back and forth between the first two stages, an idle moment between two, so that the
    view never rests (REST, 250 ms); then the last stage and the third draw nothing when shown."""
    steps = page.locator("[data-go-stage]").evaluate_all("(buttons) => buttons.map((b) => b.dataset.goStage)")
    assert len(steps) >= 6
    for i in range(10):
        page.evaluate("(stage) => document.querySelector(`[data-go-stage='${stage}']`).click()", steps[i % 2])
        page.evaluate(IDLE)
    for stage in (steps[-1], steps[2]):
        work = page.evaluate(DRAWN_BY, f'[data-go-stage="{stage}"]')
        assert work["made"] == 0 and work["calls"] == [], (stage, work)


@needs("minilm")
def test_a_new_layers_stages_are_built_ahead_while_the_user_steps_on(page, server_url):
    """A person often steps through the stages as soon as a layer is painted, and a view that never
    rests builds nothing ahead of its own: a new layer's other stages, for the head and query it
    opens on, are built and drawn while the page is idle between the steps."""
    text = "The quick brown fox jumps over the lazy dog because it was bored. " * 3
    trace_model(page, server_url, "minilm", text, 2)
    assert_built_ahead_without_rest(page)
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=2, head=0)))


@needs("minilm")
def test_a_worked_out_heads_stages_are_built_again_once_the_servers_numbers_come(page, server_url):
    """A head worked out on the page gets the server's numbers soon after it is shown, and what was
    built from the page's own numbers goes: its other stages are built ahead again."""
    text = "The quick brown fox jumps over the lazy dog because it was bored. " * 3
    trace_model(page, server_url, "minilm", text, 2)
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")
    held = []
    page.route("**/api/model-head", lambda route: held.append(route))
    page.evaluate("() => window.mhaExplorer.model.set('head', 7)")
    for _ in range(6):  # its stages are built ahead, from the page's numbers
        page.evaluate(IDLE)
    routed(page, held, 1)
    held[0].continue_()
    page.unroute("**/api/model-head")
    page.wait_for_function("() => !window.mhaExplorer.model.get('payload').worked")
    assert_built_ahead_without_rest(page)
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=2, head=7)))


# figures of the stage on screen that hold more than one map (each figure holds one), and how many figures
DOUBLED_MAPS = """() => {
  const figures = [...document.querySelectorAll(".stage figure.heatmap-figure")];
  return [figures.filter((f) => f.querySelectorAll(":scope > .heatmap-box").length > 1).length, figures.length];
}"""


@needs("minilm")
def test_a_head_clicked_then_another_stage_shows_each_map_once(page, server_url):
    """A head picked by its thumbnail, then another stage: each of that stage's maps shows once. The
    stage, built ahead for the head from its spare canvases, kept the canvas its figure held before
    as well: X, K and V showed twice, one under the other, each a second Tab stop."""
    text = "The quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat."
    trace_model(page, server_url, "minilm", text, 2)
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")
    stage = page.get_by_label("Calculation stage")
    seen = []
    for head, then in [(1, "Projections"), (2, "Projections"), (3, "Value mixing"), (4, "Output projection"), (5, "Projections")]:
        stage.select_option(label="Weights")
        page.wait_for_timeout(150)
        page.locator(".thumb-button", has_text=f"Head {head}").first.click()
        page.wait_for_timeout(250)
        stage.select_option(label=then)
        page.wait_for_timeout(400)
        expect(page.locator(".stage h2")).to_contain_text(f"head {head}")
        doubled, figures = page.evaluate(DOUBLED_MAPS)
        assert figures > 0
        seen.append((head, then, doubled))
    assert all(doubled == 0 for *_, doubled in seen), seen
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=2, head=5)))


# the canvases the stage shows now, with a sum over each one's pixels
SHOWN = """() => {
  window.pixelSum = (canvas) => {
    const copy = Object.assign(document.createElement('canvas'), { width: canvas.width, height: canvas.height }).getContext('2d');
    copy.drawImage(canvas, 0, 0);
    return copy.getImageData(0, 0, canvas.width, canvas.height).data.reduce((a, b) => a + b, 0);
  };
  window.shownCanvases ??= new Map();
  for (const c of document.querySelectorAll('.stage canvas.heatmap')) window.shownCanvases.set(c, window.pixelSum(c));
}"""
# each of the stage's maps: whether it has a canvas, whether the stage showed that canvas when
# SHOWN was read (at this visit or an earlier one), and whether its pixels changed since
CANVASES_SHOWN_BEFORE = """() => [...document.querySelectorAll('.stage figure.heatmap-figure')].map((figure) => {
  const canvas = figure.querySelector('canvas.heatmap');
  if (!canvas) return [false, false, false];
  return [true, window.shownCanvases.has(canvas), window.shownCanvases.get(canvas) !== window.pixelSum(canvas)];
})"""


@needs("minilm")
def test_another_head_at_a_stage_draws_on_the_canvases_it_showed(page, server_url):
    """The first head picked at a stage takes over the canvases the stage shows, not canvases the
    page never showed: a canvas's first showing cost that click 5 to 15 ms more at 512 tokens (the
    browser sets up its pixels for the screen). The head's own maps are drawn on them."""
    text = "The quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat."
    trace_model(page, server_url, "minilm", text, 2)
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")
    # (at this length Weights and the stages after it draw no maps; Projections again: a stage
    # come back to, its maps drawn ahead for the head on screen)
    for title, head in [("Projections", 4), ("Scores", 9), ("Projections", 1)]:
        page.get_by_label("Calculation stage").select_option(label=title)
        page.wait_for_timeout(400)  # at rest: the stages and heads around it built ahead
        page.evaluate(IDLE)
        page.evaluate(SHOWN)
        page.get_by_label("Inspect head").select_option(str(head))
        expect(page.locator(".stage h2")).to_contain_text(f"head {head}")
        maps = page.evaluate(CANVASES_SHOWN_BEFORE)
        assert maps and all(has and before for has, before, _ in maps), (title, maps)
        assert any(changed for *_, changed in maps), (title, maps)  # (X is every head's; K, V, scores are the head's own)
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=2, head=1)))


@needs("minilm")
def test_a_map_drawn_again_on_the_canvas_it_showed_is_the_map_drawn_afresh(page, server_url):
    """Another head's map, drawn on the canvas that showed this head's, writes its cells alone
    where the row labels are the same (K's and V's tokens at Projections), and its labels too where
    they are not (Value mixing's "0.74 × [CLS]"). Each stage's canvases equal, pixel for pixel,
    those of a page opened afresh on that head and stage."""
    text = "The quick brown fox jumps over the lazy dog."
    trace_model(page, server_url, "minilm", text, 2)
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")
    seen = {}
    for stage, title in [("projections", "Projections"), ("mixing", "Value mixing")]:
        page.get_by_label("Calculation stage").select_option(label=title)
        for head in (0, 4, 7):
            page.get_by_label("Inspect head").select_option(str(head))
            expect(page.locator(".stage h2")).to_contain_text(f"head {head}")
            page.wait_for_timeout(200)
            seen[stage, head] = page.evaluate(CANVASES)
    for (stage, head), drawn in seen.items():
        open_link(page, server_url + f"#mode=model&model=minilm&layer=2&text={quote_plus(text)}&stage={stage}&head={head}")
        expect(page.locator(".stage h2")).to_contain_text(f"head {head}", timeout=120_000)
        page.wait_for_timeout(200)
        assert page.evaluate(CANVASES) == drawn, (stage, head)
    for stage in ("projections", "mixing"):
        assert len({str(seen[stage, head]) for head in (0, 4, 7)}) == 3


# The browser's print dialog stood in for: while it is "open", each stage on the paper, its title and
# whether each of its maps' canvases holds a drawing (and is a canvas of its own)
PRINT_MAPS = """() => {
  // read through a copy: reading the page's own canvases again and again makes the browser warn
  const scratch = document.createElement("canvas").getContext("2d", { willReadFrequently: true });
  window.drawn = (c) => {
    Object.assign(scratch.canvas, { width: c.width, height: c.height });
    scratch.drawImage(c, 0, 0);
    return scratch.getImageData(0, 0, c.width, c.height).data.some((v, i) => i % 4 === 3 && v > 0);
  };
  window.printed = null;
  window.print = () => {
    dispatchEvent(new Event("beforeprint"));
    const all = [...document.querySelectorAll(".mha-explorer .layout > .stage canvas.heatmap")];
    window.printed = {
      open: Object.fromEntries([...document.querySelectorAll(".mha-explorer details")].map((d) => [d.className, d.open])),
      distinct: new Set(all).size === all.length,
      stages: [...document.querySelectorAll(".mha-explorer .layout > .stage")].map((section) => ({
        title: section.querySelector("h2").textContent,
        figures: section.querySelectorAll("figure.heatmap-figure").length,
        maps: [...section.querySelectorAll("figure.heatmap-figure canvas.heatmap")].map(window.drawn),
      })),
    };
    dispatchEvent(new Event("afterprint"));
  };
}"""


@needs("minilm")
def test_print_all_stages_of_a_real_model_draws_every_stages_maps(page, server_url):
    """A real model's handout: every stage is on the paper with its maps drawn, each on a canvas of
    its own; back on screen, the stage shown still draws its maps."""
    text = "The quick brown fox jumps over the lazy dog because it was bored. " * 3
    trace_model(page, server_url, "minilm", text, 2)
    page.evaluate(PRINT_MAPS)
    # printed at once after a step, before the page at rest has built the other stages ahead
    page.evaluate("""async () => {
      const stage = [...document.querySelectorAll("select")].find((s) => s.labels[0]?.textContent === "Calculation stage");
      stage.value = "scores";
      stage.dispatchEvent(new Event("change", { bubbles: true }));
      await null;
      document.getElementById("print-all").click();
    }""")
    printed = page.evaluate("window.printed")
    titles = [s["title"].split(" ·")[0] for s in printed["stages"]]
    assert titles == [f"{i + 1}. {t}" for i, t in enumerate(["Projections", "Scores", "Weights", "Value mixing", "Concatenation", "Output projection"])], titles
    assert printed["distinct"]
    # the costs are opened for the paper; Matrices and the packed view, maps of hundreds of rows, are not
    assert printed["open"] == {"matrices": False, "costs": True, "folded-map": False}, printed["open"]
    # every map of every stage on a canvas that holds its drawing (the first four stages draw maps at this length)
    assert all(s["figures"] > 0 for s in printed["stages"][:4]), printed["stages"]
    assert all(s["maps"] == [True] * s["figures"] for s in printed["stages"]), printed["stages"]
    for title in ("Projections", "Weights", "Scores"):
        page.get_by_label("Calculation stage").select_option(label=title)
        drawn = page.locator(".stage canvas.heatmap").evaluate_all("(cs) => cs.map(window.drawn)")
        assert drawn and all(drawn), (title, drawn)
    # on paper the list of every head's output is whole (it scrolls on screen), without the note that says so
    page.get_by_label("Calculation stage").select_option(label="Projections")
    page.emulate_media(media="print")
    listed = page.locator(".outputs .head-list").evaluate("(l) => [getComputedStyle(l).maxHeight, l.scrollHeight <= l.clientHeight + 1, l.querySelectorAll('.head-output').length]")
    assert listed == ["none", True, 12], listed
    assert page.locator(".outputs .list-note").evaluate("(p) => getComputedStyle(p).display") == "none"
    # Matrices (and the packed view, where a static copy holds every head's W^Q), closed, print no
    # heading with nothing under it
    closed = page.evaluate("() => [...document.querySelectorAll('.mha-explorer details.matrices, .stage details.packed')].map((d) => d.open + ':' + getComputedStyle(d).display)")
    assert closed and set(closed) == {"false:none"}, closed
    # an equation of maps and the twelve heads' outputs go on over the page, each map and box
    # whole; moved whole, they left a third of a page blank before them
    breaks = "(e) => getComputedStyle(e).breakInside"
    assert page.locator(".stage .equation:has(canvas)").first.evaluate(breaks) == "auto"
    assert page.locator(".stage .equation canvas").first.evaluate("(c) => getComputedStyle(c.closest('figure')).breakInside") == "avoid"
    assert page.locator(".outputs").evaluate(breaks) == "auto" and page.locator(".outputs .head-output").first.evaluate(breaks) == "avoid"
    page.emulate_media(media="screen")
    # what a person on paper cannot do is not said there: picking another head, pressing a button
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    assert "pick another head to see its rows" in page.locator(".stage").inner_text() and "From here:" in page.locator(".stage").inner_text()
    page.emulate_media(media="print")
    printed_text = page.locator(".stage").inner_text()
    assert "pick another head" not in printed_text and "From here:" not in printed_text, printed_text
    assert "head 0's block" in printed_text  # (the caption itself is printed)


@needs("minilm")
def test_a_table_wider_than_the_paper_is_printed_in_parts_with_every_number(page, server_url):
    """MiniLM's q is 32 numbers in a row: on screen the figure scrolls, on paper it would be cut at
    the page's edge. Printed, it comes in parts of fewer columns, each inside the page, which
    together hold every number once; after the print the screen has the one table again."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 1)
    page.get_by_label("Calculation stage").select_option(label="Projections")
    q = page.locator(".stage table.matrix").filter(has=page.locator("caption", has_text="q"))
    numbers = 'ts => ts.flatMap(t => [...t.querySelectorAll("tbody td")].map(td => td.textContent))'
    shown = q.evaluate_all(numbers)
    assert len(shown) == 32
    page.evaluate("() => dispatchEvent(new Event('beforeprint'))")
    page.emulate_media(media="print")
    page.set_viewport_size({"width": 718, "height": 1000})  # an A4 page between its margins
    parts = page.locator(".stage .paper-fold table.matrix")
    assert parts.count() > 1 and not q.first.is_visible()
    assert parts.evaluate_all(numbers) == shown  # every number, once, in order
    right = page.locator(".stage").first.evaluate("s => s.getBoundingClientRect().right")
    assert max(parts.evaluate_all("ts => ts.map(t => t.getBoundingClientRect().right)")) <= right
    assert parts.nth(1).locator("caption").inner_text().startswith("q0 (continued, columns ")  # head 0's
    page.evaluate("() => dispatchEvent(new Event('afterprint'))")
    page.emulate_media(media="screen")
    assert page.locator(".paper-fold").count() == 0 and q.first.is_visible() and q.evaluate_all(numbers) == shown


def test_print_all_stages_waits_for_a_head_on_its_way_and_is_offered_only_with_stages_to_print(page, server_url):
    """Pressed while the head picked is still coming, the print waits for it (not a page that says
    "Loading head 3…"); before a first trace, Real model mode has no stages, and no button."""
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    expect(page.get_by_role("button", name="Print all stages")).to_be_visible()
    page.get_by_role("button", name="Real model").click()
    expect(page.get_by_role("button", name="Print all stages")).to_be_hidden()
    text = "The quick brown fox jumps over the lazy dog because it was bored. " * 3
    heads_fetched(page)
    trace_model(page, server_url, "minilm", text, 2)
    expect(page.get_by_role("button", name="Print all stages")).to_be_visible()
    page.evaluate(PRINT_MAPS)
    page.evaluate("""() => {
      const real = window.fetch;
      window.fetch = async (url, ...rest) => {
        if (String(url).endsWith("api/model-head")) await new Promise((done) => setTimeout(done, 800));
        return real(url, ...rest);
      };
    }""")
    page.get_by_label("Inspect head").select_option("3")
    expect(page.locator(".stage .loading-head")).to_have_text("Loading head 3…")
    page.get_by_role("button", name="Print all stages").click()
    assert page.evaluate("window.printed") is None  # not yet: the head is on its way
    page.wait_for_function("() => window.printed", timeout=10_000)
    printed = page.evaluate("window.printed")
    assert len(printed["stages"]) >= 6 and all("head 3" in s["title"] or "head 3 inspected" in s["title"] for s in printed["stages"]), printed["stages"]
    assert all(s["maps"] == [True] * s["figures"] for s in printed["stages"])


@needs("minilm")
def test_the_output_stage_says_how_much_each_head_adds_and_a_name_picks_that_head(page, server_url):
    """The payload holds one head's numbers, but every head's length |z_i W^O_i| for each query:
    the Output stage lists them (equal to the API's, and to the norm of the model's own
    contributions), marks the longest, and a head's name there inspects it."""
    text = "The cat sat on the mat because it was warm."
    trace_model(page, server_url, "minilm", text, 3)
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    payload = api_trace(server_url, model="minilm", text=text, layer=3, head=0)
    shares = to_numpy(payload.model.head_shares)  # (h, n)
    reference, _ = load_model("minilm").trace(text, 3)
    np.testing.assert_allclose(shares, np.linalg.norm(reference["contributions"].astype(np.float64), axis=-1), rtol=1e-5)
    for query in (payload.query, 2):
        page.get_by_label("Query token").select_option(index=query)
        rows = page.locator(".stage .head-shares .bar-row")
        expect(rows).to_have_count(12)
        # the caption's formula, |z_i W^O[i]|, is never broken across two lines
        norm = page.locator(".stage .head-shares figcaption .nowrap")
        assert norm.inner_text().replace("\n", "") == "|zi WO[i]|" and len(norm.evaluate("(e) => [...e.getClientRects()]")) == 1
        shown = check_numbers(page, ".stage .head-shares", {"head_shares": shares})
        assert shown == {f"head_shares:{i},{query}" for i in range(12)}
        most = int(np.argmax(shares[:, query]))
        assert page.locator(".stage .head-shares .hint").inner_text().startswith(f"Head {most}'s contribution is the longest.")
    page.locator(".stage .head-shares button[data-pick-head='5']").click()
    expect(page.locator(".stage h2")).to_contain_text("(head 5 inspected)")
    expect(page.locator(".stage .head-shares .bar-row.inspected")).to_contain_text("head 5")
    # by keyboard, the focus stays on the head picked (its row, now the inspected one), and the page
    # where it was: the row in view, at the same place (the page used to jump a screen up)
    page.locator(".stage .head-shares button[data-pick-head='7']").focus()
    page.wait_for_timeout(400)  # the head is fetched while the focus rests there
    before = page.evaluate("() => [scrollY, document.activeElement.getBoundingClientRect().top]")
    page.keyboard.press("Enter")
    expect(page.locator(".stage h2")).to_contain_text("(head 7 inspected)")
    page.wait_for_function("() => document.activeElement?.closest('.head-shares .bar-row.inspected')?.textContent.includes('head 7')")
    page.wait_for_timeout(200)
    after = page.evaluate("() => [scrollY, document.activeElement.getBoundingClientRect().top, innerHeight]")
    assert after[0] == before[0] and 0 <= after[1] < after[2] and abs(after[1] - before[1]) < 30, (before, after)
    # a head picked from the head outputs at the Projections stage, not fetched yet: its entry takes
    # the focus (it went to the page's body) and the page stays where it was
    page.get_by_label("Calculation stage").select_option(label="Projections")
    button = page.locator(".outputs button[data-pick-head='9']")
    button.scroll_into_view_if_needed()
    y = page.evaluate("scrollY")
    button.click()
    expect(page.locator(".stage h2")).to_contain_text("head 9")
    page.wait_for_function("() => document.activeElement?.matches('.head-output.inspected[data-head=\"9\"]')")
    assert page.evaluate("scrollY") == y


@needs("smollm2")
def test_a_token_with_a_direction_override_names_it_and_keeps_its_piece_number_the_right_way_round(page, server_url):
    """A byte-level token of a space and a right-to-left override (U+202E): the override, which
    draws nothing, is named by its code beside the space's ␣ ("␣ 1/2" read as a space cut in two),
    in the token strip as in the menus, and its "1/2" reads 1/2. A token with right-to-left letters
    is isolated there, so that it turns nothing outside it."""
    trace_model(page, server_url, "smollm2", "a \u202ereversed\u202c b \u05e9\u05dc\u05d5\u05dd", 0)
    chips = page.locator(".token-strip button.token").all_inner_texts()
    assert not any("\u202e" in chip or "\u202c" in chip for chip in chips), chips
    assert ["␣U+202E 1/2", "␣U+202E 2/2"] == [chip for chip in chips if "U+202E" in chip], chips
    hebrew = [chip for chip in chips if "\u05e9" in chip or "\u05dd" in chip]
    assert hebrew and all(re.fullmatch(r"\u2068[^\u2069]*\u2069( \d+/\d+)?", chip) for chip in hebrew), hebrew
    menu = page.get_by_label("Query token").locator("option").all_inner_texts()
    for chip in ["␣U+202E 1/2", *hebrew]:
        assert any(option.startswith(chip) for option in menu), (chip, menu)  # as the menu says it


@needs("minilm")
def test_the_layer_on_screen_is_given_in_python_that_runs_and_gives_the_same_numbers(page, server_url):
    """The model panel gives the layer as Python: run as it is (a text of quotes, a line break,
    non-ASCII characters and a right-to-left override included), its t["weights"][head, query] is
    the page's head and query's row, and its last line opens this view in a notebook. It follows the
    view: another stage, head or query is written there once the page is idle."""
    text = 'He said "hi" \\ twice,\nthen left: naïve café ∑ \u202eabc.'
    trace_model(page, server_url, "minilm", text, 2)
    page.get_by_text("This layer in Python").click()
    code = page.locator("#models .in-python code")

    def run(head, query, stage, all_queries=False):
        expect(code).to_contain_text(f't["weights"][{head}, {query}]')
        expect(code).to_contain_text("all_queries=True" if all_queries else "query=")
        assert ("all_queries" in code.inner_text()) == all_queries
        snippet = code.inner_text()
        assert "\\u202e" in snippet and "\u202e" not in snippet  # the override written as its escape: the line reads as it runs
        namespace: dict = {}
        exec(snippet, namespace)  # noqa: S102 - the page's own snippet, run as a user would
        assert namespace["text"] == text
        payload = api_trace(server_url, model="minilm", text=text, layer=2, head=head)
        np.testing.assert_array_equal(namespace["t"]["weights"][head, query], to_numpy(payload.stages["weights"])[0, query])
        assert namespace["run"].tokens == payload.tokens
        view = eval(snippet.splitlines()[-1].split("  #")[0], namespace)  # noqa: S307 - this view, in a notebook
        assert (view.layer, view.text, view.stage, view.head, view.query, view.all_queries) == (2, text, stage, head, query, all_queries)

    first = api_trace(server_url, model="minilm", text=text, layer=2, head=0)
    run(0, first.query, "projections")
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    page.get_by_label("Inspect head").select_option("4")
    page.get_by_label("Query token").select_option(index=2)
    run(4, 2, "output")
    page.get_by_label("Calculation stage").select_option(label="Weights")
    page.get_by_role("button", name="All queries").click()  # every query at once: the view says so too
    run(4, 2, "weights", all_queries=True)


# marks the stage's formula and its K and V equations (Projections), as JavaScript properties
MARK_KEPT = """() => {
  const stage = document.querySelector(".stage");
  const [q, k, v] = stage.querySelectorAll(".equation");
  stage.querySelector(".formula").kept = "formula";
  k.kept = "K";
  v.kept = "V";
  q.kept = "q";
}"""
# the marked nodes still in the stage panel
STILL_THERE = "() => [...document.querySelectorAll('.stage .formula, .stage .equation')].map((e) => e.kept ?? null)"


@needs("minilm")
def test_a_step_keeps_in_the_page_what_it_does_not_change(page, server_url):
    """Another query at the same stage keeps the formula, and at Projections the keys' and values'
    equations (the same for every query), as the very nodes in the page: only what changes is put
    in, so the browser lays out and paints less. Panels built ahead for the next query must not
    take them out of the page."""
    text = "The quick brown fox jumps over the lazy dog because it was bored. " * 3  # maps, not tables
    trace_model(page, server_url, "minilm", text, 1)
    page.evaluate(MARK_KEPT)
    query = page.get_by_label("Query token")
    tokens = query.locator("option").all_inner_texts()
    query.select_option(index=3)
    expect(page.locator(".stage h2")).to_contain_text(f"query “{tokens[3]}”")
    assert page.evaluate(STILL_THERE) == ["formula", None, "K", "V"]
    # at rest, the neighbouring queries' panels are built (sharing K and V): the page keeps its own
    page.wait_for_timeout(400)
    for _ in range(4):
        page.evaluate(IDLE)
    assert page.evaluate(STILL_THERE) == ["formula", None, "K", "V"]
    query.select_option(index=4)
    expect(page.locator(".stage h2")).to_contain_text(f"query “{tokens[4]}”")
    assert page.evaluate(STILL_THERE) == ["formula", None, "K", "V"]
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=1, head=0)))
    # another head has other K and V; the formula stays
    page.locator('.thumb-button[data-head="3"]').click()
    expect(page.locator(".stage h2")).to_contain_text("head 3")
    assert page.evaluate(STILL_THERE) == ["formula", None, None, None]
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=1, head=3)))
    # another stage and back: the stage's own formula again, and the first query's q
    page.get_by_role("button", name="Next").click()
    expect(page.locator(".stage h2")).to_contain_text("2. Scores")
    assert page.evaluate(STILL_THERE)[0] is None
    page.get_by_role("button", name="Previous").click()
    expect(page.locator(".stage h2")).to_contain_text("1. Projections")
    assert page.evaluate(STILL_THERE)[0] == "formula"
    check_numbers(page, ".stage", full_arrays(api_trace(server_url, model="minilm", text=text, layer=1, head=3)))
    # the maps are those of a page that opens on this head, query and stage
    shown = page.evaluate(CANVASES)
    page.wait_for_function("() => !window.mhaExplorer.linkPending")
    other = page.context.new_page()
    other.goto(page.url)
    other.wait_for_function("() => document.querySelector('.overview')?.hidden === false && document.querySelector('.stage h2')?.textContent.includes('head 3')", timeout=60_000)
    assert other.locator(".stage h2").inner_text() == page.locator(".stage h2").inner_text()
    assert other.evaluate(CANVASES) == shown


@needs("minilm")
def test_the_lab_never_shows_a_real_models_layer_as_its_own(page, server_url):
    """A lab link refused, then a real model traced: back in the lab, which has no result yet, the
    explorer waits hidden under the lab's message rather than showing the model's layer."""
    page.goto(server_url + "#mode=lab&d_model=8&n_heads=4&n_kv_heads=3&d_head=2&d_v=2&causal=1&bias=0&tokens=the+cat+sat&seed=0")
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)
    page.get_by_role("button", name="Attention lab").click()
    assert page.locator("#lab-error-n_kv_heads").inner_text() != ""
    assert page.locator("#app").is_hidden()
    page.get_by_role("button", name="Real model").click()
    assert page.locator("#app").is_visible() and page.locator(".overview").is_visible()


@needs("minilm")
def test_the_model_mode_before_its_first_trace_writes_the_mode_alone_into_the_address(page, server_url):
    """Real model, pressed from the teaching example, wrote the example's stage, head and query
    into the address (#mode=model&stage=projections&head=0&query=1), a link to no model, layer or
    text: a copied address read as if they were the model's. Once traced, the address has them all."""
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    page.wait_for_function("() => !window.mhaExplorer.linkPending")  # (the link is written once the page is idle)
    assert page.evaluate("location.hash") == "#mode=model"
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)
    page.wait_for_function("() => location.hash.includes('&stage=projections&head=0&query=')")
    assert page.evaluate("location.hash").startswith("#mode=model&model=minilm&layer=")
    # a link of the mode that names no model is written as the mode alone, as it shows nothing else
    open_link(page, server_url + "#mode=model&stage=weights&head=3")
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    page.wait_for_function("() => location.hash === '#mode=model'")


@needs("smollm2")
@needs("minilm")
def test_the_head_thumbnails_name_the_kv_head_each_reads_where_heads_share_one(page, server_url):
    """Under GQA the overview's thumbnails say which K/V head each query head reads, and the hint why
    their patterns may look alike; MiniLM's heads each have their own, and say nothing of it."""
    trace_model(page, server_url, "smollm2", "The cat sat on the mat.", 3)
    kv = page.locator(".thumb-button .thumb-kv").all_inner_texts()
    group = load_model("smollm2").layer_config(3).kv_group
    assert kv == [f"K/V head {g}" for g in group] and kv[:4] == ["K/V head 0"] * 3 + ["K/V head 1"], kv
    assert "Each K/V head's keys and values are read by 3 heads (GQA)" in page.locator(".overview").inner_text()
    page.get_by_label("Model", exact=True).select_option("minilm")
    page.wait_for_function("() => document.querySelector('.overview')?.textContent.includes('all-MiniLM-L6-v2')", timeout=120_000)
    assert page.locator(".thumb-button").count() == 12 and page.locator(".thumb-kv").count() == 0
    assert "K/V head" not in page.locator(".overview").inner_text()


@needs("minilm")
def test_a_layer_that_comes_after_another_mode_is_picked_waits_for_the_model_mode(page, server_url):
    """A layer picked (traced at once), then the teaching example's button before it came: the
    layer took the teaching example's place, and its address named the teaching example with the
    layer's head and query. It is shown when the model mode is next."""
    page.goto(server_url + "#mode=model&model=minilm&layer=1&text=The+cat+sat+on+the+mat.&stage=weights&head=3")
    page.wait_for_function("() => document.querySelector('.overview')?.textContent.includes('layer 1')", timeout=120_000)
    held = []
    page.route("**/api/model-trace", lambda route: held.append(route))
    page.get_by_label("Layer (from 0)").select_option("4")
    page.wait_for_function("() => document.querySelector('#models [aria-disabled=true]') !== null")
    page.get_by_role("button", name="Teaching example").click()
    routed(page, held, 1)
    held[0].continue_()
    page.unroute("**/api/model-trace")
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('layer 4:')", timeout=120_000)  # it came
    page.wait_for_timeout(200)
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["cats", "like", "warm", "milk"]
    expect(page.locator(".stage h2")).to_contain_text("head 0")  # the teaching example's first view
    assert page.evaluate("location.hash").startswith("#mode=teaching")
    page.get_by_role("button", name="Real model").click()
    expect(page.locator(".overview")).to_contain_text("layer 4")
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 3")
    page.wait_for_function("() => location.hash.startsWith('#mode=model&model=minilm&layer=4')")


@needs("minilm")
def test_the_head_thumbnails_take_rows_of_equal_count(page, server_url):
    """MiniLM's twelve thumbnails at a projector's 1024 px went eleven and one; now six and six,
    and as many rows as at any width: one where all fit, three of four on a phone."""
    rows = "() => { const tops = [...document.querySelectorAll('.thumb-button')].map((b) => Math.round(b.getBoundingClientRect().top)); return [...new Set(tops)].map((t) => tops.filter((u) => u === t).length); }"
    page.set_viewport_size({"width": 1024, "height": 768})
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 2)
    page.evaluate(SETTLED)
    assert page.evaluate(rows) == [6, 6]
    # (the head outputs beside the stage name every head's z alike: z₁, as the inspected z₀, not "z1")
    hints = page.locator(".outputs .head-output .hint")
    assert hints.count() == 11 and hints.locator("sub").count() == 11 and hints.first.inner_text() == "z1: 32 numbers"
    for width, expected in ((1280, [12]), (390, [4, 4, 4]), (1024, [6, 6])):
        page.set_viewport_size({"width": width, "height": 768})
        page.wait_for_function(f"(e) => JSON.stringify(({rows})()) === JSON.stringify(e)", arg=expected)
        # the heading breaks on a phone, not inside the layers' range ("(layers 0–" over "5)")
        assert page.locator(".overview h2 .nowrap").evaluate("(e) => [e.textContent, e.getClientRects().length]") == ["0–5", 1]
        assert page.locator(".overview h2").evaluate("(e) => e.getClientRects()[0].height > 40") == (width == 390)  # two lines there
    # a label wider than its map (a large default font here; "Head 31" of a 32-head model) widens
    # its thumbnail: the rows, worked out from the width it has, stay even
    page.evaluate("() => { document.documentElement.style.fontSize = '30px'; }")
    page.evaluate(SETTLED)
    wider, fit = page.evaluate("""() => { const b = document.querySelector('.thumb-button'), o = document.querySelector('.overview');
        const room = o.clientWidth - parseFloat(getComputedStyle(o).paddingLeft) - parseFloat(getComputedStyle(o).paddingRight);
        return [b.offsetWidth - b.querySelector('canvas').offsetWidth, Math.floor((room + 8) / (b.offsetWidth + 8))]; }""")
    counts = page.evaluate(rows)
    assert wider > 10 and len(counts) == -(-12 // fit) and max(counts) - min(counts) <= 1, (wider, fit, counts)  # as few rows as fit, even


@needs("minilm")
def test_the_lab_first_opened_from_a_real_model_opens_on_its_own_head_and_second_token(page, server_url):
    """A real model's head 9 and query 3 ("sat") mean nothing in the lab's six tokens and four
    heads: the lab opened on its own token 3 ("on"), or on its first when the index went past
    them, without a word. It opens on head 0 and its second token, the model's stage kept; once
    left, it comes back as it was."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 1)
    page.locator(".thumb-button").nth(9).click()
    page.get_by_label("Query token").select_option(index=3)
    page.get_by_label("Calculation stage").select_option(label="Weights")
    page.wait_for_function("() => document.querySelector('.stage h2').textContent.startsWith('3. Weights · head 9')")
    page.get_by_role("button", name="Attention lab").click()
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('GQA')")
    page.wait_for_function("() => !document.getElementById('lab').dataset.busy")
    tokens = page.get_by_label("Query token").locator("option").all_inner_texts()
    assert page.locator(".stage h2").inner_text() == f"4. Weights · head 0 · query “{tokens[1]}”"  # (the causal lab's Mask is stage 3)
    assert page.locator("#notice").is_hidden()
    page.get_by_label("Query token").select_option(index=4)
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelector('.stage h2').textContent.includes('head 9')")
    page.get_by_role("button", name="Attention lab").click()
    page.wait_for_function("(t) => document.querySelector('.stage h2').textContent.includes(t)", arg=f"query “{tokens[4]}”")


@needs("smollm2")
def test_smollm2_shows_rotary_positions_the_causal_mask_and_gqa(page, server_url, artifacts):
    text = "Attention lets every token read from the tokens before it."
    trace_model(page, server_url, "smollm2", text, 0)
    stages = page.get_by_label("Calculation stage").locator("option").all_inner_texts()
    assert "Rotary positions" in stages and "Mask" in stages
    assert page.locator(".thumb-button").count() == 9
    page.locator("summary", has_text="Cost of this configuration").click()
    label = page.locator("svg.sharing").get_attribute("aria-label")
    assert label.startswith("9 query heads reading 3 key/value heads") and "head 8 reads K/V 2" in label
    n = len(page.get_by_label("Query token").locator("option").all_inner_texts())
    kib = 30 * 3 * (64 + 64) * n * 2 / 1024  # 30 layers of 3 K/V heads, 64 + 64 numbers each, float16
    assert f"All 30 layers of SmolLM2-135M-Instruct, after these {n} tokens: {kib:.1f} KiB in float16" in page.locator(".whole-model").inner_text()
    # the sum written out, to be checked by hand: 3 × (64 + 64) = 384 numbers a token, 768 B in float16
    assert page.locator(".whole-model").inner_text().endswith(f" That is 30 layers × {n} tokens × 768 B a token in float16.")
    # a model whose local layers keep only their window (as Gemma 3's 15 of 18 on a text past it):
    # the layers are grouped by what they keep, and the cache without the window is said
    page.evaluate("""(n) => { const m = window.mhaExplorer.model, p = m.get('payload');
        window.traced = p;
        const layers = [...Array(18)].map((_, i) => [i % 6 === 5 ? n : 4, 512]);
        m.set('payload', { ...p, model: { ...p.model, kv_cache_layers: layers } }); }""", n)
    assert page.locator(".whole-model").inner_text().endswith(
        f" That is (15 layers × 4 tokens + 3 layers × {n} tokens) × 1.0 KiB a token in float16:"
        f" 15 layers keep only the tokens of their sliding window (without the window, {18 * n:.1f} KiB)."
    )
    page.evaluate("() => window.mhaExplorer.model.set('payload', window.traced)")
    page.get_by_label("Calculation stage").select_option(label="Rotary positions")
    assert page.locator(".stage canvas.heatmap").count() >= 2
    # q before and after, and K before and after, each pair on one colour scale: compared by eye
    legends = page.locator(".stage .heatmap-legend").all_inner_texts()
    assert len(legends) == 4 and legends[0] == legends[1] and legends[2] == legends[3], legends
    page.screenshot(path=str(artifacts / "model-smollm2-rope.png"), full_page=True)
    # tokens are labelled by the text they stand for, a leading space as ␣ ("Ġlets" is "␣lets")
    options = page.get_by_label("Query token").locator("option").all_inner_texts()
    assert options[:3] == ["Attention", "␣lets", "␣every"] and not any("Ġ" in o for o in options)
    page.get_by_label("Query token").select_option(index=2)
    assert "query “␣every”" in page.locator(".stage h2").inner_text()
    page.get_by_label("Calculation stage").select_option(label="Mask")
    assert "masked: after the query" in page.locator(".stage").inner_text()
    # every column is headed, the one saying whether the query sees the key too
    assert page.locator(".stage table.calc-table thead th").all_inner_texts() == ["key", "position", "scaled", "to this query", "after the mask"]
    # a short text's Scores stage lists every key in order (q . k is a sum of 64 products), and
    # marks the keys the mask hides next
    page.get_by_label("Calculation stage").select_option(label="Scores")
    rows = page.locator(".stage table.calc-table tbody tr")
    listed = [r.split("\t")[0].removesuffix(" · masked next") for r in rows.all_inner_texts()]
    assert listed == options, (listed, options)  # named as the query menu names them
    marked = [r.split("\t")[0] for r in page.locator(".stage table.calc-table tbody tr.masked").all_inner_texts()]
    assert marked == [f"{name} · masked next" for name in options[3:]]
    # weights that are not the published float32 ones are said
    assert page.locator(".model-status").inner_text().endswith("tokens. Weights: GGUF Q4_1 (matrices in Q4_1, Q8_0), dequantized to float32.")
    # the scores compare the rotated q and k, and the formula and the table say so
    assert "q̃ · k̃" in page.locator(".stage table.calc-table thead").inner_text()
    assert "Here q and k are the rotated ones of the stage before" in page.locator(".stage p.explain").first.inner_text()
    # where X comes from, and where y goes, in this decoder's layer
    page.get_by_label("Calculation stage").select_option(label="Projections")
    assert page.locator(".stage p.where-from").inner_text() == load_model("smollm2").arch.input_note
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    assert page.locator(".stage p.where-from").inner_text().startswith("y is the attention's output: the layer adds it to the residual stream")
    page.get_by_label("Calculation stage").select_option(label="Value mixing")
    assert "the 3 value rows of K/V head 0 that “␣every” sees" in page.locator(".stage").inner_text()
    # every query at once works on the stages only decoders have
    page.get_by_label("Calculation stage").select_option(label="Rotary positions")
    page.get_by_role("button", name="All queries").click()
    assert "Rotary positions" in page.locator(".stage h2").inner_text()
    assert page.locator(".stage canvas.heatmap").count() == 2
    page.get_by_role("button", name="All queries").click()
    page.get_by_label("Calculation stage").select_option(label="Mask")
    # the page computes the scaled scores and the mask from the scores (in float32): the very numbers
    arrays = full_arrays(api_trace(server_url, model="smollm2", text=text, layer=0, head=0))
    for title in ("Scores", "Mask", "Weights"):
        page.get_by_label("Calculation stage").select_option(label=title)
        shown = check_numbers(page, ".stage", arrays)
        assert title != "Mask" or any(src.startswith("mask:") for src in shown)
    # each map says what its colours mean: K before the rotation runs from -max|k| to +max|k|
    page.get_by_label("Calculation stage").select_option(label="Rotary positions")
    top = page_text(float(np.abs(arrays["k"][0]).max())).lstrip("-")
    # three pairs of q turned by hand: the shown numbers are the layer's, and the hand rotation of
    # the shown "before" numbers gives the shown "after" ones (to the shown two decimals)
    shown = check_numbers(page, ".stage", arrays)
    assert {"q:0,2,0", "q:0,2,32", "q_rotated:0,2,0", "q_rotated:0,2,63"} <= shown
    # the lead says how many of q's 32 pairs turn visibly at position 2 (angle 2 θ^(-2m/64) over 0.1),
    # and how far the rotation moves q, against its length
    lead = page.locator(".stage p.lead").first.inner_text()
    theta = float(re.search(r"Here θ = (\S+):", lead)[1])
    turned = sum(2 * theta ** (-2 * m / 64) > 0.1 for m in range(32))
    q, q_rotated = arrays["q"][0, 2].astype(np.float64), arrays["q_rotated"][0, 2].astype(np.float64)
    moved = round(100 * float(np.linalg.norm(q_rotated - q) / np.linalg.norm(q)))
    assert 0 < turned < 32 and f"At position 2, {turned} of the 32 pairs turn by more than 0.1 radian (about 6°), and q moves by {moved}% of its length (|q̃ − q| / |q|)" in lead, lead
    assert (": the strips of q before and after look much alike." in lead) == (moved < 25), lead
    # each angle to four significant digits and cos, sin to four decimals (at two, the last pair's
    # small turn read 0.00 and its a′ ≠ a looked like a rotation by nothing); where the shown
    # numbers rotated by hand miss the shown "after", the note under the table says so
    misses = []
    for row in page.locator(".stage table.calc-table tbody tr").all_inner_texts():
        pair, angle, turn, before, by_hand, after = row.split("\t")
        m = int(pair.strip("()").split(",")[0])
        assert Decimal(angle) == Decimal(f"{2 * theta ** (-2 * m / 64):.4g}") and ("e" in angle) == (m == 31), row  # 2.866e-5
        cos, sin = (Decimal(x) for x in turn.split(", "))
        assert f"{cos:.4f}" == f"{np.cos(2 * theta ** (-2 * m / 64)):.4f}" and f"{sin:.4f}" == f"{np.sin(2 * theta ** (-2 * m / 64)):.4f}", row
        (a, b), (a_after, b_after) = ([Decimal(x) for x in cells.split(", ")] for cells in (before, after))
        for name, hand, shown in ((f"a′ of pair {pair}", a * cos - b * sin, a_after), (f"b′ of pair {pair}", a * sin + b * cos, b_after)):
            hand = hand.quantize(Decimal("0.01"), ROUND_HALF_UP)
            if hand != shown:
                misses.append(f"{name} comes to {hand} (shown: {shown})")
        for x, y in zip(by_hand.split(","), after.split(",")):  # from the full numbers: the layer's own
            assert abs(float(x) - float(y)) <= 0.011, row
    note = page.locator(".stage .wide-table:has(table.rotary) + p.hint")
    if misses:
        assert "; ".join(misses) in note.inner_text()
    else:
        expect(note).to_have_count(0)
    k_map = page.locator(".stage figure.heatmap-figure", has=page.locator("figcaption", has_text="before the rotation"))
    legend = " ".join(k_map.locator(".heatmap-legend").inner_text().split())  # swatches between the words
    assert legend == f"Colours: −{top} · 0 · +{top}"
    q_top = page_text(float(np.abs(arrays["q"][0, 2]).max())).lstrip("-")  # the strip of q before the rotation
    assert " ".join(page.locator(".stage .heatmap-legend").first.inner_text().split()) == f"Colours: −{q_top} · 0 · +{q_top}"
    # W^O has a few entries ten times the rest: its colours span the 99th percentile of |W^O|, and
    # the legend says how far the few beyond it go
    page.get_by_text("Matrices", exact=True).click()
    # the inspected head's W^Q is its own; the W^K and W^V beside it, its K/V head's, shared
    expect(page.locator(".matrices .head-matrices h3")).to_have_text("WQ of query head 0 · WK and WV of K/V head 0, shared by query heads 0, 1, 2")
    # the page holds head 0's rows of W^O (its block of 64 of the 576), and says so: another head brings its own
    held = ~np.isnan(arrays["W_O"][:, 0])
    assert held.sum() == 64 and held[:64].all()
    # the Output stage multiplies that block by the head's own block of concat, z_0, not by all of concat
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    captions = page.locator(".stage figcaption").all_inner_texts()
    assert captions[0].startswith("z0 for “") and captions[0].endswith("head 0's block of concat, its 64 numbers of 576"), captions
    assert captions[1].startswith("WO, head 0's block (64 × 576)"), captions
    # drawn with rows of 5 px, not a strip of 1 px rows as all of W^O's 576 would be
    block = page.locator(".stage figure.heatmap-figure", has=page.locator("figcaption", has_text="head 0's block (64 × 576)"))
    assert block.locator("canvas.heatmap").bounding_box()["height"] == 5 * 64
    expect(page.locator(".stage .head-shares .hint")).to_contain_text("above are the inspected head's components, and y's")
    expect(page.locator(".matrices figcaption").last).to_have_text(re.compile(r"^WO, head 0's block \(64 × 576\): its rows 0–63 of 576; pick another head to see its rows"))
    w_o = np.abs(arrays["W_O"][held])  # (d_v, d_model)
    legend = " ".join(page.locator(".matrices .heatmap-legend").last.inner_text().split())
    found = re.fullmatch(r"Colours: −(\S+) · 0 · \+(\S+); beyond ±(\S+) \(up to ±(\S+)\), full colour", legend)
    assert found, legend
    scale, peak = float(found.group(1)), float(found.group(4))
    assert peak == float(page_text(float(w_o.max()))) and abs(scale - np.percentile(w_o, 99)) < 0.02 and 4 * scale < peak, (scale, peak)


@needs("minilm")
def test_on_a_phone_a_strip_of_every_key_scrolls_by_itself_and_leaves_the_table_under_it_clear(browser, server_url):
    """MiniLM on a 17-token sentence at 390 px: the strip of every key's score is wider than the
    phone. It scrolled the whole figure, whose fade then dimmed the last column of the table under it
    (the scaled scores), which fits. It scrolls in its own box now."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        trace_model(page, server_url, "minilm", "The quick brown fox jumps over the lazy dog while the cat sleeps.", 2)
        chip = page.locator(".token-strip .token").first.bounding_box()
        assert chip["height"] >= 30, chip  # a finger's chip in the strip (it was 24 px)
        for stage in ("Scores", "Weights"):
            page.get_by_label("Calculation stage").select_option(label=stage)
            figure = page.locator(".stage .figure").evaluate("f => [f.scrollWidth, f.clientWidth, getComputedStyle(f).maskImage]")
            assert figure[0] <= figure[1] + 1 and figure[2] == "none", (stage, figure)
            if stage == "Scores":  # the strip itself is wider, and scrolls
                strip = page.locator(".stage .heatmap-figure").first.evaluate("b => [b.scrollWidth, b.clientWidth]")
                assert strip[0] > strip[1], strip
    finally:
        context.close()


@needs("minilm")
@pytest.mark.parametrize("touch", [False, True])
def test_a_one_letter_tokens_chip_is_a_target_as_wide_as_it_is_tall(browser, server_url, touch):
    """The chip of ",", "." or "a" was as wide as its letter and padding: 16 px by 24 with a mouse,
    under 24 px wide on a touch screen too. Every chip is now at least as wide as it is tall."""
    context = browser.new_context(viewport={"width": 390 if touch else 1280, "height": 844}, is_mobile=touch, has_touch=touch)
    try:
        page = context.new_page()
        trace_model(page, server_url, "minilm", "Yes, a cat sat on a mat.", 2)
        boxes = page.locator(".token-strip .token").evaluate_all("cs => cs.map((c) => [c.textContent, c.getBoundingClientRect().width, c.getBoundingClientRect().height])")
        assert [b[0] for b in boxes] == ["[CLS]", "yes", ",", "a", "cat", "sat", "on", "a", "mat", ".", "[SEP]"]
        assert all(width >= height - 0.5 and height >= (30 if touch else 24) for _, width, height in boxes), boxes
    finally:
        context.close()


@needs("minilm")
def test_on_a_phone_maps_scroll_in_their_own_boxes_and_the_stages_text_stays_put(browser, server_url):
    """At 390 px Value mixing's, Concatenation's and Output projection's maps are wider than the
    phone. The stage's whole figure scrolled: a swipe past a map's end slid every paragraph of the
    stage, and the caption of a map narrower than the widest was cut. Each map (or each group of
    maps compared column by column) scrolls in its own box now, its caption and legend in sight."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 2)
        for stage in ("Value mixing", "Concatenation", "Output projection"):
            page.get_by_label("Calculation stage").select_option(label=stage)
            expect(page.locator(".stage h2")).to_contain_text(stage)
            seen = page.evaluate("""() => {
              const figure = document.querySelector('.stage .figure');
              const boxes = [...figure.querySelectorAll('.aligned-maps, .heatmap-figure:not(.aligned-maps > *)')];
              const wide = boxes.filter((b) => b.scrollWidth > b.clientWidth);
              for (const b of wide) b.scrollLeft = b.scrollWidth;
              const edge = figure.getBoundingClientRect();
              const parts = [...figure.querySelectorAll('.heatmap-figure > :is(figcaption, .heatmap-legend)')].map((e) => e.getBoundingClientRect());
              return [figure.scrollWidth <= figure.clientWidth, wide.length, parts.every((r) => r.left >= edge.left - 0.5 && r.right <= edge.right + 0.5)];
            }""")
            assert seen[0] and seen[1] >= 1 and seen[2], (stage, seen)
    finally:
        context.close()


@needs("smollm2")
def test_on_a_phone_the_pairs_turned_by_hand_scroll_by_themselves(browser, server_url):
    """SmolLM2's Rotary positions at 390 px: the maps of q and K are wider than the phone, and the
    table of pairs turned by hand scrolled with them, as one, its title cut and its pairs out of
    sight. It scrolls in its own box now, its pair column and title in place."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        trace_model(page, server_url, "smollm2", "The cat sat on the mat.", 0)
        page.get_by_label("Calculation stage").select_option(label="Rotary positions")
        box = page.locator(".stage .wide-table:has(table.rotary)")
        assert box.evaluate("b => b.scrollWidth > b.clientWidth"), "the table fits: nothing to scroll"
        before = box.evaluate("b => [b.querySelector('caption').getBoundingClientRect().left, b.querySelector('tbody th').getBoundingClientRect().left]")
        # scrolled part way, it fades at its right alone: the pair column, in place at its left, under no fade
        box.evaluate("b => { b.scrollLeft = 100; }")
        page.wait_for_function("() => getComputedStyle(document.querySelector('.stage .wide-table:has(table.rotary)')).maskImage.startsWith('linear-gradient(to right, rgb(0, 0, 0) calc(100% - 24px)')")
        box.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
        after = box.evaluate("b => [b.querySelector('caption').getBoundingClientRect().left, b.querySelector('tbody th').getBoundingClientRect().left, b.closest('.figure').scrollLeft]")
        assert after[2] == 0 and abs(after[0] - before[0]) < 1 and abs(after[1] - before[1]) < 1, (before, after)
    finally:
        context.close()


@needs("minilm")
def test_value_mixing_stacks_v_av_and_z_column_on_column(page, server_url):
    """The value rows, the same rows times their weights and z are compared component by component:
    their cells start at one x (the rows' labels, "0.27 × [CLS]" and "[CLS]", took different room).
    MiniLM has no shared K/V heads: its value rows are the head's own, not a "K/V head"'s."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 2)
    page.locator('.thumb-button[data-head="1"]').click()
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('head 1')")
    page.get_by_label("Calculation stage").select_option(label="Value mixing")
    boxes = [c.bounding_box() for c in page.locator(".stage canvas.heatmap").all()]
    assert len(boxes) == 3
    assert {round(b["x"]) for b in boxes} == {round(boxes[0]["x"])} and {round(b["width"]) for b in boxes} == {round(boxes[0]["width"])}, boxes
    assert "value rows of head 1 that “" in page.locator(".stage").inner_text()


@needs("minilm")
def test_on_a_phone_next_takes_the_focus_to_the_stage_it_brings_into_view(browser, server_url):
    """On a phone the controls scroll away with the page, and a real model's stage lies far below
    them: Next scrolls the stage's title to the top. The focus goes with it (left on Next, it was a
    screen and a half above, out of sight), and a screen reader reads the new stage's title."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        page.goto(server_url + "#mode=model&model=minilm&layer=2&text=The+quick+brown+fox+jumps+over+the+lazy+dog.")
        page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.startsWith('1. Projections')", timeout=120_000)
        page.evaluate(SETTLED)
        # q's, k's and v's equations, each with its bias, wrap apart: the formula fits the phone whole
        formula = page.locator(".stage .formula").first
        assert formula.locator("math").count() == 3 and formula.evaluate("(f) => f.scrollWidth <= f.clientWidth")
        page.get_by_role("button", name="Next").focus()
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.activeElement.matches('.stage h2') && document.activeElement.textContent.startsWith('2. Scores')")
        page.evaluate(SETTLED)
        top, bottom = page.evaluate("() => { const r = document.activeElement.getBoundingClientRect(); return [r.top, r.bottom]; }")
        assert 0 <= top and bottom <= 844 and page.evaluate("scrollY") > 844  # in view, the page scrolled far down to it
        # the title goes on as Next: Page Down (a clicker's) and Enter step on, the focus with them
        for key, title in (("PageDown", "3. Weights"), ("Enter", "4. Value mixing"), ("PageUp", "3. Weights")):
            page.keyboard.press(key)
            page.wait_for_function("(t) => document.activeElement.matches('.stage h2') && document.activeElement.textContent.startsWith(t)", arg=title)
        page.keyboard.press("Tab")  # reading on from the title: into the stage
        assert page.evaluate("() => document.querySelector('.stage').contains(document.activeElement)")
    finally:
        context.close()


def minilm_stage(page, server_url, stage: str) -> None:
    """MiniLM's layer 1 on a sentence of 13 tokens, at the stage named (as the stage menu names it)."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 1)
    page.get_by_label("Calculation stage").select_option(label=stage)
    page.wait_for_function("(s) => document.querySelector('.stage h2').textContent.includes(s)", arg=stage)


@needs("minilm")
def test_a_map_wider_than_its_product_line_scrolls_by_itself(browser, server_url):
    """A 1366 px laptop at 150% (911 px): MiniLM's 32-wide b^Q, K and V maps, 560 px and their labels,
    ran past the stage beside the head outputs. The stage's figure scrolled sideways as a whole,
    its scrollbar at its foot, two screens below. Each such map now scrolls by itself, its last
    column in reach, and the figure no longer does."""
    page = browser.new_page(viewport={"width": 911, "height": 900})
    try:
        minilm_stage(page, server_url, "Projections")
        figure = page.evaluate("() => { const f = document.querySelector('.stage .figure'); return [f.scrollWidth, f.clientWidth]; }")
        assert figure[0] == figure[1], figure
        maps = page.evaluate("""() => [...document.querySelectorAll('.stage .equation .heatmap-figure')].filter((f) => f.checkVisibility()).map((f) => {
          const wide = f.scrollWidth > f.clientWidth;
          f.scrollLeft = f.scrollWidth;  // to its end: the canvas's right edge comes into the figure's box
          const [box, canvas] = [f.getBoundingClientRect(), f.querySelector('canvas').getBoundingClientRect()];
          return { caption: f.querySelector('figcaption').textContent, wide, end: canvas.right <= box.right + 0.5, clear: box.right <= document.querySelector('.stage').getBoundingClientRect().right };
        })""")
        assert sum(m["wide"] for m in maps) >= 5, maps  # b^Q, b^K, K, b^V, V
        assert all(m["end"] and m["clear"] for m in maps), maps
    finally:
        page.close()
    # on a phone, whose scrollbars stay hidden, such a map fades at the edge with more beyond it
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        minilm_stage(page, server_url, "Projections")
        fades = page.evaluate("() => [...document.querySelectorAll('.stage .equation .heatmap-figure')].filter((f) => f.checkVisibility() && f.scrollWidth > f.clientWidth).map((f) => getComputedStyle(f).maskImage !== 'none')")
        assert len(fades) >= 5 and all(fades), fades
    finally:
        context.close()


@needs("minilm")
def test_maps_wider_than_the_stage_scroll_together_their_captions_in_sight(browser, server_url):
    """At 911 px Value mixing's maps (v, a·v, z: 560 px of cells and their labels) pass the stage's
    width and scroll in a box of their own together, their columns aligned; the stage's figure, and
    the text in it, stays put. Each map's caption and legend stay in sight: scrolled to the end,
    they were cut at the box's left edge."""
    page = browser.new_page(viewport={"width": 911, "height": 900})
    try:
        minilm_stage(page, server_url, "Value mixing")
        seen = page.evaluate("""() => {
          const figure = document.querySelector('.stage .figure');
          const box = figure.querySelector('.aligned-maps');
          box.scrollLeft = box.scrollWidth;
          const edge = box.getBoundingClientRect();
          const maps = [...box.querySelectorAll('.heatmap-figure')];
          const parts = [...box.querySelectorAll('.heatmap-figure > :is(figcaption, .heatmap-legend)')].map((e) => e.getBoundingClientRect());
          const cells = maps.map((m) => m.querySelector('canvas').getBoundingClientRect().right);
          return [box.scrollLeft > 50, figure.scrollWidth <= figure.clientWidth, maps.length, parts.length,
            parts.every((r) => r.left >= edge.left - 0.5 && r.right <= edge.right + 0.5), Math.max(...cells) - Math.min(...cells)];
        }""")
        scrolled, figure_still, maps, parts, in_sight, unaligned = seen
        assert scrolled and figure_still and maps == 3 and parts >= 6 and in_sight and unaligned < 1, seen
    finally:
        page.close()


TITLE_AND_BAR = "() => [document.querySelector('.stage h2').textContent, document.querySelector('.stage h2').getBoundingClientRect().top, document.querySelector('.mha-explorer > .controls').getBoundingClientRect().top, document.querySelector('.mha-explorer > .controls').getBoundingClientRect().bottom, scrollY]"


@needs("minilm")
def test_next_brings_a_stage_below_the_window_into_view_under_controls_that_stay(browser, server_url):
    """A real model's overview of every head pushes the stage below a laptop's window: Next changed
    a stage nobody could see. Now the stage's title comes into view, under the controls, which stay
    at the top of the window while the stage is read, so that Next is at hand for the next step."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(server_url + "#mode=model&model=minilm&layer=5&text=The+quick+brown+fox+jumps+over+the+lazy+dog.&stage=scores&head=3&query=4")
        page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.startsWith('2. Scores')", timeout=120_000)
        title, top, _, _, scrolled = page.evaluate(TITLE_AND_BAR)
        assert top > 720 and scrolled == 0  # a link opens at the top of the page, the stage below the window
        for expected in ("3. Weights", "4. Value mixing"):
            page.get_by_role("button", name="Next").click()
            # brought up once the step is painted
            page.wait_for_function(f"(s) => document.querySelector('.stage h2').textContent.startsWith(s) && ({TITLE_AND_BAR})()[1] < innerHeight", arg=expected)
            title, top, bar_top, bar_bottom, scrolled = page.evaluate(TITLE_AND_BAR)
            assert title.startswith(expected) and scrolled > 0
            assert bar_top == 0 and bar_bottom < top < bar_bottom + 40, (top, bar_bottom)  # just under the controls
        # a stage already in view is not scrolled to
        page.mouse.wheel(0, -100)
        page.wait_for_function("(y) => scrollY < y", arg=scrolled)
        before = page.evaluate("scrollY")
        page.get_by_role("button", name="Previous").click()
        page.evaluate(SETTLED)
        assert page.evaluate(TITLE_AND_BAR)[0].startswith("3. Weights") and page.evaluate("scrollY") == before
        # Next at the last stage picks nothing: a token picked later in the overview, at the top of
        # the page, leaves the page where it is (it jumped to the stage's title)
        page.get_by_label("Calculation stage").select_option(label="Output projection")
        page.wait_for_function("() => document.querySelector('.stage h2').textContent.startsWith('6.')")
        page.evaluate(SETTLED)  # the step brought into view first
        page.evaluate("() => scrollTo(0, 0)")
        page.get_by_role("button", name="Next").click(force=True)  # (aria-disabled: focusable, and does nothing)
        page.locator(".token-strip .token").nth(2).dispatch_event("click")  # (a click here would scroll the token, at the window's edge, into view first)
        page.wait_for_function("() => document.querySelector('.stage h2').textContent.includes('query “quick”')")
        page.evaluate(SETTLED)
        assert page.evaluate("scrollY") == 0
        # a number focused under the controls is brought out from under them
        top, bar_bottom, tip = page.evaluate("""() => {
            const n = [...document.querySelectorAll('.stage .num')][5];
            scrollBy(0, n.getBoundingClientRect().top - 30);
            n.focus();
            return [n.getBoundingClientRect().top, document.querySelector('.mha-explorer > .controls').getBoundingClientRect().bottom, n.className];
        }""")
        assert bar_bottom <= top < bar_bottom + 40, (top, bar_bottom)
        assert "tip-below" in tip  # its full value shows below it, not under the controls
        # a stage tab keeps the focus where it is: picking one scrolls nothing
        page.evaluate("() => scrollTo(0, 0)")
        page.locator('.steps button[data-go-stage="weights"]').click()
        page.wait_for_function("() => document.querySelector('.stage h2').textContent.startsWith('3. Weights')")
        page.evaluate(SETTLED)
        assert page.evaluate("scrollY") == 0
        # on a taller window the title may show in its last third, with nothing of the stage below
        # it in view: that is out of view too
        page.set_viewport_size({"width": 1366, "height": 900})
        page.evaluate("() => scrollTo(0, 0)")
        assert page.evaluate(TITLE_AND_BAR)[1] > 600
        page.get_by_label("Calculation stage").select_option(label="Value mixing")
        page.wait_for_function(f"() => ({TITLE_AND_BAR})()[1] < 200")
    finally:
        page.close()


@needs("minilm")
def test_on_a_phone_the_lens_opens_inside_the_part_of_a_wide_map_in_view(browser, server_url):
    """A map of every query (some 240 tokens) is wider than a phone and scrolls in its figure: a
    tap on its right half opened the lens to the right of the cell, past what the phone shows."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        text = " ".join(["attention lets every token read from every other token while each head learns its own pattern"] * 15)
        trace_model(page, server_url, "minilm", text, 1)
        page.get_by_label("Calculation stage").select_option(label="Weights")
        page.get_by_role("button", name="All queries").tap()
        canvas = page.locator(".stage canvas.heatmap").first
        canvas.scroll_into_view_if_needed()
        shown = page.locator(".stage .figure").first.bounding_box()
        box = canvas.bounding_box()
        assert box["width"] > shown["width"], (box, shown)  # the map is wider than the phone shows
        for x in (0.55, 0.75, 0.95):
            page.touchscreen.tap(shown["x"] + x * shown["width"], box["y"] + box["height"] / 2)
            lens = page.locator(".stage canvas.heatmap-lens:not([hidden])").bounding_box()
            assert shown["x"] - 1 <= lens["x"] and lens["x"] + lens["width"] <= shown["x"] + shown["width"] + 1, (x, lens, shown)
    finally:
        context.close()


@needs("smollm2")
def test_a_q_row_wider_than_the_stage_scrolls_by_itself_not_the_whole_figure(page, server_url):
    """SmolLM2's q is 64 numbers in a row (about 3,000 px): it scrolls in its own box, and the maps
    and the hint around it stay where they are (the whole figure scrolled sideways with it)."""
    trace_model(page, server_url, "smollm2", "The quick brown fox jumps.", 0)
    page.get_by_label("Calculation stage").select_option(label="Projections")
    figure = page.locator(".stage .figure").evaluate("f => [f.scrollWidth, f.clientWidth]")
    assert figure[0] <= figure[1], figure
    q = page.locator(".stage table.matrix").filter(has=page.locator("caption", has_text="q"))
    assert q.locator("tbody td").count() == 64
    widths = q.evaluate("t => [t.scrollWidth, t.clientWidth]")
    assert widths[0] > 2 * widths[1], widths
    q.locator("tbody td .num").first.focus()
    page.keyboard.press("End")  # the keyboard reaches the last number, scrolled into sight in q's own box
    assert page.evaluate("() => document.activeElement.closest('td')?.dataset.col") == "63"
    assert q.evaluate("t => t.scrollLeft") > 0 and page.locator(".stage .figure").evaluate("f => f.scrollLeft") == 0


def test_byte_pieces_of_a_character_are_named_by_it(page, server_url):
    trace_model(page, server_url, "smollm2", "A cat 🐱 sat", 0)
    labels = ["A", "␣cat", "␣🐱 1/3", "␣🐱 2/3", "␣🐱 3/3", "␣sat"]
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == labels
    assert page.locator(".token-strip .token").all_inner_texts()[2:5] == labels[2:5]  # not "�"
    page.get_by_label("Query token").select_option(label="␣🐱 2/3")
    assert "query “␣🐱 2/3”" in page.locator(".stage h2").inner_text()


@needs("minilm")
def test_an_unknown_token_says_what_it_stands_for_in_the_strip_too(page, server_url):
    trace_model(page, server_url, "minilm", "a cat 🐱 sat", 0)
    assert page.locator(".token-strip .token").all_inner_texts() == ["[CLS]", "a", "cat", "[UNK] 🐱", "sat", "[SEP]"]  # as the menus name it


@needs("smollm2")
def test_a_thumbnail_paints_masked_cells_grey_as_the_big_maps_do(page, server_url):
    """A causal layer's thumbnails: the cells above the diagonal are masked, grey as on the big
    maps, not white (which reads as little attention)."""
    trace_model(page, server_url, "smollm2", "The cat sat on the mat because it was warm.", 0)
    assert "; grey is masked;" in page.locator(".overview p.hint").first.inner_text()
    corners = """() => { const canvas = document.querySelector('.thumb-button[data-head="0"] canvas');
        const n = canvas.width, data = canvas.getContext('2d').getImageData(0, 0, n, n).data;
        const at = (r, c) => [...data.slice(4 * (r * n + c), 4 * (r * n + c) + 3)];
        return [at(0, n - 1), at(n - 1, 0)]; }"""
    above, below = page.evaluate(corners)
    assert above == [228, 230, 234]  # the first query, the last key: after it, masked
    assert below != [228, 230, 234]  # the last query sees the first key


@needs("minilm")
def test_a_token_of_the_strip_picks_the_query_and_the_strip_marks_it(page, server_url, artifacts):
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 20)  # 182 tokens: the strip scrolls
    trace_model(page, server_url, "minilm", text, 1)
    strip = page.locator(".token-strip")
    chips = strip.locator("button.token")
    pressed = lambda: strip.locator('button.token[aria-pressed="true"]')  # noqa: E731
    expect(pressed()).to_have_count(1)
    start = int(pressed().get_attribute("data-query"))
    assert page.get_by_label("Query token").input_value() == str(start)
    # a click on a token makes it the query: the menu, the stage and the strip say so
    chips.nth(3).click()
    expect(page.get_by_label("Query token")).to_have_value("3")
    expect(page.locator(".stage h2")).to_contain_text("query “brown @3”")
    expect(pressed()).to_have_attribute("data-query", "3")
    # the strip is one Tab stop, the query's token; the arrow keys move along it, Enter picks
    assert strip.locator('button.token[tabindex="0"]').get_attribute("data-query") == "3"
    chips.nth(3).focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    # its focus ring is drawn inside the chip: outside, the strip's scroll box cut its top and bottom
    ring = page.evaluate("() => [document.activeElement.matches(':focus-visible'), getComputedStyle(document.activeElement).outlineOffset]")
    assert ring == [True, "-3px"], ring
    page.keyboard.press("Enter")
    expect(page.locator(".stage h2")).to_contain_text("query “jumps @5”")
    expect(pressed()).to_have_attribute("data-query", "5")
    # a query picked elsewhere is marked too, and brought into the strip's box (the page stays where it is)
    scrolled = page.evaluate("() => window.scrollY")
    page.get_by_label("Query token").select_option("170")
    expect(pressed()).to_have_attribute("data-query", "170")
    page.wait_for_function("""() => {
        const strip = document.querySelector(".token-strip"), chip = strip.querySelector('[aria-pressed="true"]');
        const a = strip.getBoundingClientRect(), b = chip.getBoundingClientRect();
        return b.top >= a.top && b.bottom <= a.bottom;
    }""")
    assert page.evaluate("() => window.scrollY") == scrolled
    strip.screenshot(path=str(artifacts / "model-token-strip.png"))
    # the ring is over the query's token, and stays there when the window's width wraps the strip anew
    over = """() => { const a = document.querySelector('.token-mark').getBoundingClientRect();
        const b = document.querySelector('.token-strip [aria-pressed="true"]').getBoundingClientRect();
        return Math.abs(a.left - b.left) < 0.5 && Math.abs(a.top - b.top) < 0.5 && Math.abs(a.width - b.width) < 0.5; }"""
    page.wait_for_function(over)
    page.set_viewport_size({"width": 900, "height": 900})
    page.wait_for_function(over)


@needs("minilm")
def test_another_layer_of_the_same_text_keeps_the_token_strip_where_it_was_scrolled(page, server_url):
    """The strip of a long text, scrolled to the query, is the same strip for every layer of that
    text: not made and laid out again, still scrolled where it was, the query alone marked."""
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 20)  # 182 tokens: the strip scrolls
    trace_model(page, server_url, "minilm", text, 1)
    page.get_by_label("Query token").select_option("170")
    page.wait_for_function("() => document.querySelector('.token-strip').scrollTop > 0")
    page.wait_for_function("() => document.querySelector('.token-strip [aria-pressed=\"true\"]')?.dataset.query === '170'")
    before = page.evaluate("() => { const strip = document.querySelector('.token-strip'); strip.seen = true; return strip.scrollTop; }")
    page.get_by_label("Layer (from 0)").select_option("4")
    page.wait_for_function("() => window.mhaExplorer.model.get('payload').model.layer === 4")
    after = page.evaluate("""() => { const strip = document.querySelector('.token-strip');
        return { same: strip.seen === true, top: strip.scrollTop, strips: document.querySelectorAll('.token-strip').length,
                 pressed: [...strip.querySelectorAll('[aria-pressed="true"]')].map((b) => b.dataset.query) }; }""")
    assert after == {"same": True, "top": before, "strips": 1, "pressed": ["170"]}, after
    assert page.locator(".overview h2").inner_text().startswith("all-MiniLM-L6-v2 · layer 4")
    # another text: a strip of its tokens
    page.get_by_label("Text", exact=True).fill("The cat sat on the mat.")
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("() => document.querySelectorAll('.token-strip button.token').length === 9")  # [CLS] ... [SEP]
    assert page.evaluate("() => document.querySelector('.token-strip').seen") is None


@needs("minilm")
def test_a_512_token_input_stays_small_and_usable(page, server_url, artifacts):
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 56 + ["the quick brown fox jumps over"])  # 512 tokens
    trace_model(page, server_url, "minilm", text, 2)
    n = len(page.locator(".token-strip .token").all_inner_texts())
    assert n == 512
    # the strip, scrolled to the query, shows whole rows (a row cut in half at its top read as lying
    # under the thumbnails), the query's among them; the lead that counts the tokens stays above it
    strip = page.locator(".token-strip").evaluate("""(s) => {
      const box = s.getBoundingClientRect();
      const cut = [...s.querySelectorAll(".token")].filter((t) => { const r = t.getBoundingClientRect(); return r.top < box.top && r.bottom > box.top; });
      const query = s.querySelector(".token[aria-pressed=true]").getBoundingClientRect();
      return { scrolled: s.scrollTop > 0, cut: cut.length, queryInside: query.top >= box.top && query.bottom <= box.bottom };
    }""")
    assert strip == {"scrolled": True, "cut": 0, "queryInside": True}, strip
    lead = page.locator(".overview .strip-lead")
    assert lead.inner_text() == "512 tokens; pick one as the query:" and lead.is_visible()
    sent = page.evaluate("() => performance.getEntriesByType('resource').filter(e => e.name.endsWith('api/model-trace')).map(e => e.transferSize)")
    assert sent and max(sent) < 10_000_000, sent
    for title in page.get_by_label("Calculation stage").locator("option").all_inner_texts():
        page.get_by_label("Calculation stage").select_option(label=title)
        assert title in page.locator(".stage h2").inner_text()
        if title == "Projections":  # X (512 x 384) is drawn once, for K, and V's product refers to it
            captions = page.locator(".stage figure.heatmap-figure figcaption").all_inner_texts()
            assert captions.count("X") == 1 and page.locator(".stage .same-x").inner_text() == "X, as above"
    page.get_by_role("button", name="All queries").click()
    page.get_by_label("Calculation stage").select_option(label="Weights")
    assert page.locator(".stage canvas.heatmap").count() == 1
    # the map says what its columns are: the first key under its left edge, the last under its right
    axis = page.locator(".stage .heatmap-axis span").all_inner_texts()
    assert axis == ["key 0 “[CLS]”", "→", "key 511 “[SEP]”"], axis
    box = page.locator(".stage canvas.heatmap").bounding_box()
    under = page.locator(".stage .heatmap-axis").bounding_box()
    assert abs(under["x"] + under["width"] - (box["x"] + box["width"])) < 1.5 and under["x"] > box["x"]
    page.screenshot(path=str(artifacts / "model-512-tokens.png"), full_page=False)
    # a pixel per cell: pointing at the map shows the cells around the pointer enlarged, their colours
    # the weights' own (square-root scale); leaving the map hides the lens
    payload = api_trace(server_url, model="minilm", text=text, layer=2, head=0)
    weights = to_numpy(payload.stages["weights"])[0]  # (n, n)
    canvas = page.locator(".stage canvas.heatmap")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    lens = page.locator(".stage canvas.heatmap-lens")
    expect(lens).to_be_hidden()
    page.mouse.move(box["x"] + box["width"] - 200.5, box["y"] + 300.5)
    expect(lens).to_be_visible()
    readout = page.locator(".stage .readout").inner_text()
    row, col = (int(x) for x in re.match(r".*@(\d+) · key (\d+) ", readout).groups())
    assert readout.split(": ")[1].startswith(page_text(weights[row, col])), readout
    legend = " ".join(page.locator(".stage .heatmap-legend").first.inner_text().split())
    upto = float(re.search(r"Colours: 0 to ([0-9.]+)", legend).group(1))
    shot = page.evaluate(LENS_PIXELS)
    zoom = shot["cell"]
    top, first = min(row - 7, 512 - 15), min(col - 7, 512 - 15)  # 15 x 15 cells, the pointer's in the middle
    pixels = np.array(shot["data"]).reshape(shot["height"], shot["width"], 4)
    for r, c in ((row, col), (row - 5, col + 3), (row + 6, col - 6)):
        got = pixels[int((r - top + 0.5) * zoom), int((c - first + 0.5) * zoom)][:3]
        shade = round(255 * np.sqrt(min(1.0, weights[r, c] / upto)))  # up to the legend's bound, full colour beyond
        expected = [round(255 + (blue - 255) * shade / 255) for blue in (29, 78, 160)]
        assert np.abs(got - expected).max() <= 1, (r, c, got, expected)
    page.mouse.move(box["x"] - 200, box["y"] - 40)
    expect(lens).to_be_hidden()
    # from the keyboard too, until the focus leaves the map
    canvas.focus()
    page.keyboard.press("ArrowDown")
    expect(lens).to_be_visible()
    page.keyboard.press("Escape")  # as a number's full value: until the next arrow key
    expect(lens).to_be_hidden()
    page.keyboard.press("ArrowDown")
    expect(lens).to_be_visible()
    page.keyboard.press("Tab")
    expect(lens).to_be_hidden()
    # pointed at, Escape hides it until the pointer moves
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()  # (Tab may have scrolled the page)
    page.mouse.move(box["x"] + box["width"] - 200.5, box["y"] + 300.5)
    expect(lens).to_be_visible()
    page.keyboard.press("Escape")
    expect(lens).to_be_hidden()
    page.mouse.move(box["x"] + box["width"] - 190.5, box["y"] + 300.5)
    expect(lens).to_be_visible()
    # another query changes the head outputs in place: the list of heads stays, and the inspected
    # head's z is the new query's
    page.evaluate("() => { document.querySelector('.outputs .head-list').dataset.kept = 'yes'; }")
    menu = page.get_by_label("Query token")
    query = int(menu.input_value()) + 1
    menu.select_option(str(query))
    expect(page.locator(".outputs h2")).to_have_text(f"Head outputs for “{payload.tokens[query]} @{query}”")
    assert page.locator(".outputs .head-list").get_attribute("data-kept") == "yes"
    shown = check_numbers(page, ".outputs", full_arrays(payload))
    assert shown == {f"concat:{query},{e}" for e in range(32)}, sorted(shown)[:3]
    # another head picked from the list: the list and the entries of the heads inspected neither
    # before nor now stay as they are (laid out once); head 0's entry is a button again, and
    # head 7's holds its z
    page.evaluate("() => document.querySelectorAll('.outputs .head-output').forEach((e) => { e.dataset.kept = 'yes'; })")
    page.locator('.outputs button[data-pick-head="7"]').click()
    expect(page.locator(".stage h2")).to_contain_text("· head 7 ·")
    assert page.locator(".outputs .head-list").get_attribute("data-kept") == "yes"
    kept = page.locator(".outputs .head-output").evaluate_all("(entries) => entries.map((e) => [Number(e.dataset.head), e.dataset.kept === 'yes'])")
    assert kept == [[h, h not in (0, 7)] for h in range(12)], kept
    assert page.locator('.outputs button[data-pick-head="0"]').count() == 1 and page.locator(".outputs .inspected").get_attribute("data-head") == "7"
    seventh = api_trace(server_url, model="minilm", text=text, layer=2, head=7)
    shown = check_numbers(page, ".outputs", full_arrays(seventh))
    assert shown == {f"concat:{query},{7 * 32 + e}" for e in range(32)}, sorted(shown)[:3]
    # and back to head 0: every entry as it was before head 7 was picked, the same elements
    page.locator('.outputs button[data-pick-head="0"]').click()
    expect(page.locator(".stage h2")).to_contain_text("· head 0 ·")
    kept = page.locator(".outputs .head-output").evaluate_all("(entries) => entries.map((e) => [Number(e.dataset.head), e.dataset.kept === 'yes'])")
    assert kept == [[h, True] for h in range(12)], kept
    assert page.locator(".outputs .inspected").get_attribute("data-head") == "0" and page.locator('.outputs button[data-pick-head="7"]').count() == 1
    assert check_numbers(page, ".outputs", full_arrays(payload)) == {f"concat:{query},{e}" for e in range(32)}


@needs("minilm")
def test_a_load_step_that_cannot_count_itself_shows_a_moving_bar_not_a_stuck_one(page, server_url):
    """A load step that cannot count itself (Gemma 3's vocabulary, some seconds at 60%; longer on a
    slow machine) stands at one fraction: a bar standing still for that long reads as stuck. After 2 s at one fraction the bar turns indeterminate (it moves), and
    the status keeps the fraction; a new fraction makes it a measure again. Here the server's answers
    are held at 31% until the bar has turned."""
    import time

    real = httpx.post(server_url + "api/models/minilm/load").json()
    while real["state"] == "loading":  # loaded first, so that the held answers alone say "loading"
        time.sleep(0.2)
        real = httpx.get(server_url + "api/models/minilm").json()
    assert real["state"] == "ready", real
    held = {**real, "state": "loading", "fraction": 0.31, "message": "reading the vocabulary (9 s so far)"}
    holding = [True]  # until the bar has been seen to move: a busy machine may take seconds to open the page

    def stalled(route):
        if holding[0]:
            route.fulfill(json=held)
        else:
            route.continue_()

    page.route("**/api/models/minilm", stalled)
    page.route("**/api/models/minilm/load", stalled)
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Real model").click()
    bar = page.locator("#model-progress")
    page.wait_for_function("() => document.getElementById('model-progress')?.value === 0.31")
    page.wait_for_function("() => !document.getElementById('model-progress').hasAttribute('value')", timeout=4000)
    assert bar.is_visible() and page.locator(".model-step").inner_text().startswith("31%: reading the vocabulary")
    holding[0] = False
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    assert bar.is_hidden()


@needs("minilm")
def test_a_pasted_text_with_half_a_character_says_what_to_delete_and_keeps_the_text(page, server_url):
    """A lone surrogate (half of an emoji, as some pastes leave): the server's answer, "send UTF-8
    text", spoke of the request, which the page's user does not write."""
    trace_model(page, server_url, "minilm", "The cat sat.", 0)
    box = page.get_by_label("Text", exact=True)
    box.evaluate("(b) => { b.value = 'cats \\ud83d like milk'; b.dispatchEvent(new Event('input')); }")
    page.get_by_role("button", name="Trace").click()
    expect(page.locator("#models .lab-error")).to_have_text(
        "The text holds a broken character (half of an emoji, or of another character beyond U+FFFF, as some pastes leave): delete it and trace again. The last good result stays on screen."
    )
    assert box.get_attribute("aria-invalid") == "true" and box.evaluate("(b) => b.value") == "cats \ud83d like milk"


@needs("minilm")
def test_a_links_text_with_a_broken_escape_is_traced_as_read_and_said_to_be_damaged(page, server_url):
    """%E0%A4%A: a link cut inside a character. The browser reads it as U+FFFD; the page traced that
    in silence. A "%" that starts no escape ("100% sure") is the text's own, and no fault."""
    page.goto(server_url + "#mode=model&model=minilm&text=cats%20%E0%A4%A&layer=0")
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: its text has a broken %-escape (the link was cut, or changed by hand), read as “\ufffd”: copy the link again from where it was made."
    )
    expect(page.locator(".overview h2")).to_contain_text("all-MiniLM-L6-v2 · layer 0")
    assert page.get_by_label("Text", exact=True).input_value() == "cats \ufffd%A"
    # a text that is nothing but the damage, refused by the tokenizer: the notice says both
    open_link(page, server_url + "#mode=model&model=minilm&text=%E0%A4&layer=1")
    expect(page.locator("#notice")).to_have_text(re.compile(
        r"^This link could not be used\. The text has nothing .*\. Its text has a broken %-escape \(the link was cut, or changed by hand\), "
        r"read as “\ufffd”: copy the link again from where it was made\. Showing the teaching example instead\. "
        r"The link's text is kept in the Real model box, to change there\.$"
    ))
    page.console_errors[:] = [e for e in page.console_errors if "status of 422" not in e]  # the text refused, as the browser logs it
    open_link(page, server_url + "#mode=model&model=minilm&text=100%+sure&layer=1")
    expect(page.locator(".overview h2")).to_contain_text("all-MiniLM-L6-v2 · layer 1")
    assert page.get_by_label("Text", exact=True).input_value() == "100% sure" and page.locator("#notice").is_hidden()


@needs("minilm")
def test_a_links_text_too_long_is_said_to_wait_in_the_model_box(page, server_url):
    """A link whose text the model refuses opens the teaching example. The text was kept in the
    Real model box, but the notice did not say so: a learner sent such a link thought it lost."""
    typed = "word " * 700
    page.goto(server_url + "#mode=model&model=minilm&layer=2&text=" + quote_plus(typed))
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used. The text is 702 tokens long; all-MiniLM-L6-v2 is traced on at most 512: shorten the text."
        " Showing the teaching example instead. The link's text is kept in the Real model box, to change there.",
        timeout=60_000,
    )
    page.get_by_role("button", name="Real model").click()
    assert page.get_by_label("Text", exact=True).input_value() == typed  # where the notice says
    page.console_errors[:] = [e for e in page.console_errors if "status of 422" not in e]  # the text refused, as the browser logs it
    # a model not installed is no fault of the text: nothing is said of it
    open_link(page, server_url + "#mode=model&model=gpt5&text=cats")
    expect(page.locator("#notice")).to_contain_text("Showing the teaching example instead.")
    assert "kept in the Real model box" not in page.locator("#notice").inner_text()


def hold_loading(page, server_url, name, fraction):
    """The page told that model is loading, at fraction, however often it asks; returns its real state."""
    real = httpx.get(server_url + f"api/models/{name}").json()
    held = {**real, "state": "loading", "fraction": fraction, "message": "reading the GGUF metadata"}
    page.route(f"**/api/models/{name}", lambda route: route.fulfill(json=held))
    page.route(f"**/api/models/{name}/load", lambda route: route.fulfill(json=held))
    return real


@needs("minilm")
def test_a_loads_progress_is_written_to_the_status_line_only_when_it_changes(page, server_url):
    """The status line is a live region: written again with the same words every 250 ms, a screen
    reader says them again. A load held at one step writes it once."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    hold_loading(page, server_url, "smollm2", 0.31)
    page.evaluate("""() => {
      window.statusWrites = 0;
      new MutationObserver((changes) => (window.statusWrites += changes.length)).observe(document.querySelector('.model-status'), { childList: true, characterData: true, subtree: true });
    }""")
    page.get_by_label("Model", exact=True).select_option("smollm2")
    expect(page.locator(".model-step")).to_have_text("31%: reading the GGUF metadata")
    page.wait_for_timeout(1200)  # some four polls
    assert page.evaluate("() => window.statusWrites") <= 2  # (the pick's own line, then the load's)


@needs("minilm")
@needs("smollm2")
def test_a_text_another_model_refuses_says_whose_trace_stays(page, server_url):
    """A model picked with a trace on screen traces the text at once; refused, the menu names the new
    model while the old one's trace stays. The message says whose it is."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    # SmolLM2 takes longer texts than MiniLM: its refusal of one (as a checkpoint of the user's
    # with a shorter limit would refuse it) is the server's answer, here written for it
    refusal = "the text is 1,201 tokens long; SmolLM2-135M-Instruct takes at most 1,024 here: shorten it"
    refuse = lambda route: (  # noqa: E731
        route.fulfill(status=422, json={"detail": [{"field": "text", "message": refusal}]}) if json.loads(route.request.post_data)["model"] == "smollm2" else route.continue_()
    )
    page.route("**/api/model-trace", refuse)
    typed = "word " * 1200
    page.get_by_label("Text", exact=True).fill(typed)
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.wait_for_function("() => document.querySelector('#models .lab-error')?.textContent.includes('1,024')", timeout=120_000)
    assert page.locator("#models .lab-error").inner_text() == (
        "The text is 1,201 tokens long; SmolLM2-135M-Instruct takes at most 1,024 here: shorten it."
        " The last good result, all-MiniLM-L6-v2's layer 1, stays on screen."
    )
    assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2, layer 1:")
    assert page.get_by_label("Text", exact=True).input_value() == typed  # nothing typed is lost
    # the same model refusing a text: its own trace stays, as said before
    page.get_by_label("Model", exact=True).select_option("minilm")
    page.wait_for_function("() => document.querySelector('#models .lab-error')?.textContent.includes('512')", timeout=60_000)
    assert page.locator("#models .lab-error").inner_text().endswith(". The last good result stays on screen.")
    assert len(page.console_errors) == 2  # the two refusals, as the browser logs them
    page.console_errors[:] = [e for e in page.console_errors if "status of 422" not in e]


@needs("minilm")
@needs("smollm2")
@pytest.mark.parametrize(
    "model, query, shown",
    [("minilm", "café", "cafe"), ("minilm", "CAFÉ", "cafe"), ("minilm", "🐱", "[UNK] 🐱"), ("smollm2", "🐱", "␣🐱 1/3")],
)
def test_a_links_query_is_found_as_the_word_the_token_stands_for(page, server_url, model, query, shown):
    """query=café was "not a token here" where MiniLM's token is "cafe" (its tokenizer drops
    accents), and query=🐱 where the token is "[UNK] 🐱" or a byte piece "␣🐱 1/3"; the terminal's
    --query found them."""
    page.goto(server_url + f"#mode=model&model={model}&layer=1&text={quote_plus('I like café and 🐱')}&query={quote_plus(query)}")
    expect(page.locator(".stage h2")).to_contain_text(f"query “{shown}”", timeout=60_000)
    assert page.locator("#notice").is_hidden()


@needs("minilm")
def test_a_text_added_to_keeps_the_query_as_its_word(page, server_url):
    """A sentence added to the text and traced again (Trace, Ctrl+Enter, or a layer picked) moved
    the query to the text's middle word, in silence: "dog @5" became "over". It is now found
    again as another model finds it, by its word and its time in the text."""
    trace_model(page, server_url, "minilm", "The quick brown fox jumps over the lazy dog. The dog sleeps.", 1)
    page.get_by_label("Query token").select_option(label="dog @12")
    expect(page.locator(".stage h2")).to_contain_text("query “dog @12”")
    box = page.get_by_label("Text", exact=True)
    box.fill("Look: the quick brown fox jumps over the lazy dog. The dog sleeps.")
    box.press("Control+Enter")
    expect(page.locator(".stage h2")).to_contain_text("query “dog @14”")  # its second time, two tokens on
    box.fill("Look: the quick brown fox jumps over the lazy dog. The dog sleeps. So do I.")
    page.get_by_label("Layer (from 0)").select_option("3")
    expect(page.locator(".overview h2")).to_contain_text("layer 3")
    expect(page.locator(".stage h2")).to_contain_text("query “dog @14”")
    # a text without the word: the query the layer starts at, said
    box.fill("A cat naps in the sun.")
    page.get_by_role("button", name="Trace").click()
    expect(page.locator(".model-status")).to_contain_text("Its tokens hold no “dog”: query “in” is shown.")


@needs("minilm")
@needs("smollm2")
def test_another_model_keeps_the_head_query_and_stage_it_has_and_says_what_it_lacks(page, server_url):
    """Another model picked traced the text at head 0 and its own first query, in silence, though it
    had the head and the word: "dog" became "jumps"."""
    text = "The quick brown fox jumps over the lazy dog."
    page.goto(server_url + f"#mode=model&model=smollm2&layer=20&text={quote_plus(text)}&stage=mask&head=8&query=dog")
    expect(page.locator(".stage h2")).to_contain_text("head 8 · query “␣dog”", timeout=120_000)
    page.get_by_label("Model", exact=True).select_option("minilm")
    expect(page.locator(".model-status")).to_contain_text("all-MiniLM-L6-v2, layer 5:", timeout=60_000)
    expect(page.locator(".stage h2")).to_contain_text("Scores · head 8 · query “dog”")  # the same word, as MiniLM splits it
    assert page.locator(".model-status").inner_text().endswith(
        "It has no layer 20: layer 5 is traced instead. This layer has no Mask stage: Scores is shown."
    ), page.locator(".model-status").inner_text()
    # SmolLM2 has 9 heads: head 10 goes, and is said; so does MiniLM's "##bel" of "Unbelievably",
    # a word SmolLM2's split ("Un", "belie", …) lacks
    page.get_by_label("Inspect head").select_option(label="Head 10")
    page.get_by_label("Text", exact=True).fill("Unbelievably good weather.")
    page.get_by_role("button", name="Trace").click()
    expect(page.locator(".model-status")).to_contain_text("all-MiniLM-L6-v2, layer 5: 10 tokens.")
    # its own model on a new text, which lacks the query's word: said, as another model's tokens would be
    assert page.locator(".model-status").inner_text() == "all-MiniLM-L6-v2, layer 5: 10 tokens. Its tokens hold no “dog”: query “good” is shown."
    page.get_by_label("Query token").select_option(label="##bel")
    page.get_by_label("Model", exact=True).select_option("smollm2")
    expect(page.locator(".model-status")).to_contain_text("SmolLM2-135M-Instruct, layer 5:", timeout=60_000)
    expect(page.locator(".stage h2")).to_contain_text("Scores · head 0")
    said = page.locator(".model-status").inner_text()
    query = page.get_by_label("Query token").evaluate("(s) => s.options[s.selectedIndex].text")
    assert said.endswith(f"It has 9 heads: head 0 is shown, not head 10. Its tokens hold no “##bel”: query “{query}” is shown."), said


def hold_traces(page):
    """The page's traces held until release() is called: what is picked while one is on its way."""
    held = []

    def handler(route):
        held.append(route)

    page.route("**/api/model-trace", handler)

    def release():
        for route in held:
            route.continue_()
        held.clear()
        page.unroute("**/api/model-trace", handler)

    return held, release


@needs("minilm")
@needs("smollm2")
def test_a_layer_or_head_picked_while_another_model_traces_is_the_one_shown_or_said(page, server_url):
    """A layer picked while the new model's trace was on its way was left in the menu, and layer 1
    traced under it; a head picked on the old model's view meanwhile was dropped in silence."""
    page.goto(server_url + "#mode=model&model=minilm&layer=1&text=the+cat+sat+on+the+mat&query=on&head=2&stage=scores")
    expect(page.locator(".stage h2")).to_contain_text("head 2 · query “on”", timeout=60_000)
    held, release = hold_traces(page)
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.startsWith('Running SmolLM2')", timeout=60_000)
    page.get_by_label("Layer (from 0)").select_option("4")
    release()
    expect(page.locator(".model-status")).to_contain_text("SmolLM2-135M-Instruct, layer 4:", timeout=60_000)
    expect(page.locator(".stage h2")).to_contain_text("head 2 · query “␣on”")
    page.wait_for_function("() => location.hash.includes('model=smollm2&layer=4')")  # (written when the page is idle)
    # a head SmolLM2 lacks, picked on MiniLM's view while SmolLM2's trace comes: said
    page.get_by_label("Model", exact=True).select_option("minilm")
    expect(page.locator(".model-status")).to_contain_text("all-MiniLM-L6-v2, layer 4:", timeout=60_000)
    held, release = hold_traces(page)
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.startsWith('Running SmolLM2')", timeout=60_000)
    page.get_by_label("Inspect head").select_option(label="Head 11")
    release()
    expect(page.locator(".model-status")).to_contain_text("SmolLM2-135M-Instruct, layer 4:", timeout=60_000)
    expect(page.locator(".model-status")).to_contain_text("It has 9 heads: head 2 is shown, not head 11.")
    page.console_errors[:] = [e for e in page.console_errors if "net::ERR" not in e]


@needs("minilm")
@needs("smollm2")
def test_a_characters_pieces_and_special_tokens_are_kept_or_named_across_models(page, server_url):
    """SmolLM2's second 🐱 (three byte pieces) is MiniLM's second “[UNK] 🐱”; a query MiniLM cannot
    hold is named as its label reads, “[CLS]” (it was lower-cased, and a space token named “”)."""
    text = "I love 🐱 and 🐱 too"
    page.goto(server_url + f"#mode=model&model=smollm2&layer=1&text={quote_plus(text)}")
    expect(page.locator(".model-status")).to_contain_text("SmolLM2-135M-Instruct, layer 1:", timeout=60_000)
    labels = page.get_by_label("Query token").locator("option").all_inner_texts()
    second = [i for i, label in enumerate(labels) if "🐱 1/" in label][1]
    page.get_by_label("Query token").select_option(index=second)
    page.get_by_label("Model", exact=True).select_option("minilm")
    expect(page.locator(".model-status")).to_contain_text("all-MiniLM-L6-v2, layer 1:", timeout=60_000)
    query = page.get_by_label("Query token").evaluate("(s) => s.options[s.selectedIndex].text")
    assert query.startswith("[UNK] 🐱 @"), query
    minilm = page.get_by_label("Query token").locator("option").all_inner_texts()
    assert [i for i, label in enumerate(minilm) if label.startswith("[UNK] 🐱")][1] == minilm.index(query)
    assert "hold no" not in page.locator(".model-status").inner_text()
    page.get_by_label("Query token").select_option(index=0)  # [CLS]
    page.get_by_label("Model", exact=True).select_option("smollm2")
    expect(page.locator(".model-status")).to_contain_text("SmolLM2-135M-Instruct, layer 1:", timeout=60_000)
    expect(page.locator(".model-status")).to_contain_text("Its tokens hold no “[CLS]”: query “")


@needs("minilm")
def test_a_model_links_notice_goes_with_another_layer(page, server_url):
    """“layer 9 does not exist … so layer 5 is shown” stood over layer 2, picked after."""
    page.goto(server_url + "#mode=model&model=minilm&layer=9&text=hi+there&head=3")
    expect(page.locator("#notice")).to_contain_text("layer 9 does not exist", timeout=60_000)
    page.get_by_label("Layer (from 0)").select_option("2")
    expect(page.locator(".model-status")).to_contain_text("all-MiniLM-L6-v2, layer 2:")
    expect(page.locator("#notice")).to_be_hidden()


@needs("minilm")
def test_a_loads_steps_are_shown_but_said_once(page, server_url):
    """A load of thirty steps (SmolLM2's layers) said each step to a screen reader: the status line
    is a live region, whose words are said whenever they change. It says the load once; the steps
    are written beside it, out of it, and in the bar's value text."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    real = httpx.get(server_url + "api/models/smollm2").json()
    polls = []

    def step(route):
        polls.append(1)
        n = len(polls)
        route.fulfill(json={**real, "state": "loading", "fraction": min(0.9, n / 30), "message": f"layer {n}"})

    page.route("**/api/models/smollm2", step)
    page.route("**/api/models/smollm2/load", step)
    page.evaluate("""() => {
      window.said = [];
      const status = document.querySelector('[role=status].model-status');
      new MutationObserver(() => window.said.push(status.textContent)).observe(status, { childList: true, characterData: true, subtree: true });
    }""")
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.wait_for_function("() => document.querySelector('.model-step')?.textContent.includes('layer 5')")
    assert page.locator(".model-step").evaluate("(e) => !e.closest('[role=status], [aria-live]')")  # out of every live region
    assert "%: layer " in page.locator("#model-progress").get_attribute("aria-valuetext")
    said = page.evaluate("() => window.said")
    assert said == ["Loading SmolLM2-135M-Instruct…"], said  # written once; the steps after it are not in it


@needs("minilm")
def test_a_load_left_for_another_model_no_longer_speaks_in_the_status_line(page, server_url):
    """SmolLM2 picked while a MiniLM trace is on screen, and still loading when MiniLM is picked
    again: the status and the bar are MiniLM's. The old load's progress, polled on, wrote over them."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    hold_loading(page, server_url, "smollm2", 0.31)
    picker = page.get_by_label("Model", exact=True)
    picker.select_option("smollm2")
    expect(page.locator(".model-step")).to_have_text("31%: reading the GGUF metadata")
    picker.select_option("minilm")
    expect(page.locator(".model-status")).to_contain_text("all-MiniLM-L6-v2, layer 1")
    page.wait_for_timeout(800)  # the old load's poll comes every 250 ms
    assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2, layer 1")
    assert page.locator("#model-progress").is_hidden()


@needs("minilm")
@needs("smollm2")
def test_a_trace_waiting_for_its_model_to_load_is_dropped_when_another_model_is_picked(page, server_url):
    """Trace pressed on SmolLM2 while it loads, then MiniLM picked before the load ends: the panel
    is MiniLM's (its status, Trace free to press), and SmolLM2's trace never lands under a menu
    that names MiniLM."""
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    real = hold_loading(page, server_url, "smollm2", 0.02)
    traced = []  # the models of the traces asked for
    page.on("request", lambda r: r.url.endswith("api/model-trace") and traced.append(json.loads(r.post_data)["model"]))
    picker = page.get_by_label("Model", exact=True)
    picker.select_option("smollm2")
    go = page.get_by_role("button", name="Trace")
    go.click()
    expect(page.locator(".model-step")).to_have_text("2%: reading the GGUF metadata")
    assert go.get_attribute("aria-disabled") == "true"
    picker.select_option("minilm")
    expect(page.locator(".model-status")).to_contain_text("all-MiniLM-L6-v2 is loaded")
    assert go.get_attribute("aria-disabled") is None and page.locator("#model-progress").is_hidden()
    # SmolLM2's load ends: its trace, left behind, does not come
    page.unroute("**/api/models/smollm2")
    page.unroute("**/api/models/smollm2/load")
    page.route("**/api/models/smollm2", lambda route: route.fulfill(json={**real, "state": "ready"}))
    page.wait_for_timeout(800)  # a load still polled (every 250 ms) would have found SmolLM2 ready by now
    assert "smollm2" not in page.evaluate("() => location.hash") and page.locator(".overview").is_hidden()
    assert page.locator("#models .lab-error").inner_text() == ""
    assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2 is loaded")
    go.click()
    expect(page.locator(".model-status")).to_contain_text("all-MiniLM-L6-v2, layer 0")
    page.wait_for_function("() => location.hash.includes('model=minilm')")  # the link is written a moment after
    assert traced == ["minilm"], traced  # SmolLM2's trace was never asked for


def test_model_errors_are_clear_and_keep_the_page(page, server_url):
    page.goto(server_url + "#mode=model&model=../../etc&layer=0&text=hi")
    page.wait_for_function("() => !document.getElementById('notice').hidden")
    assert "not a model name" in page.locator("#notice").inner_text()
    response = httpx.post(server_url + "api/model-trace", json={"model": "nope", "text": "a", "layer": 0})
    assert response.status_code == 422 and "choose one of" in response.json()["detail"][0]["message"]


@needs("minilm")
def test_trace_by_keyboard_keeps_the_focus_and_errors_speak_of_what_is_there(page, server_url):
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    page.get_by_label("Text", exact=True).fill("word " * 600)  # over MiniLM's 512 tokens
    go = page.get_by_role("button", name="Trace")
    go.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#models .lab-error')?.textContent.includes('512')")
    error = page.locator("#models .lab-error").inner_text()
    assert "last good result" not in error  # nothing was traced yet
    assert page.evaluate("() => document.activeElement.textContent") == "Trace"
    page.get_by_label("Text", exact=True).fill("The cat sat.")
    go.click()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.endsWith('tokens.')")  # traced
    shown = page.locator(".model-status").inner_text()
    page.get_by_label("Text", exact=True).fill("word " * 600)
    go.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#models .lab-error')?.textContent.includes('last good result')")
    # the text box is marked as refused, and says why (as a lab field is); a text traced is not
    box = page.get_by_label("Text", exact=True)
    assert box.get_attribute("aria-invalid") == "true" and box.get_attribute("aria-describedby") == "model-error"
    assert box.evaluate("e => getComputedStyle(e).borderTopWidth") == "2px"
    # an empty text: the message says what is empty
    page.get_by_label("Text", exact=True).fill("")
    go.click()
    page.wait_for_function("() => document.querySelector('#models .lab-error')?.textContent.includes('empty')")
    empty = "The text is empty: give a sentence to run through the model. The last good result stays on screen."
    assert page.locator("#models .lab-error").inner_text() == empty
    assert page.locator(".model-status").inner_text() == shown  # it still says what is on screen
    page.get_by_label("Text", exact=True).fill(" \n ")  # only spaces: said as what is there
    go.click()
    expect(page.locator("#models .lab-error")).to_have_text("The text holds only spaces or line breaks: give a sentence to run through the model. The last good result stays on screen.")
    # a message that ends in a full stop (a pickled checkpoint's refusal) keeps one
    refusal = "pytorch_model.bin is a pickled checkpoint (.bin): it is refused and never opened. Use a GGUF file."
    page.route("**/api/model-trace", lambda route: route.fulfill(status=422, json={"detail": [{"field": "model", "message": refusal}]}))
    page.get_by_label("Text", exact=True).fill("The cat sat.")
    go.click()
    expect(page.locator("#models .lab-error")).to_have_text(f"{refusal} The last good result stays on screen.")  # a file's name keeps its case
    page.unroute("**/api/model-trace")
    # an edited text is said to be new until traced; Ctrl+Enter in the box traces it, and a layer
    # change traces the text in the box, not the one traced before
    box = page.get_by_label("Text", exact=True)
    box.fill("Dogs bark loudly.")
    assert "text has changed" in page.locator(".model-status").inner_text()
    box.press("Control+Enter")
    # (the query's word, “cat”, is not in it: said after the status)
    expect(page.locator(".model-status")).to_have_text("all-MiniLM-L6-v2, layer 0: 6 tokens. Its tokens hold no “cat”: query “bark” is shown.")
    assert "bark" in page.locator(".token-strip").inner_text()
    assert box.get_attribute("aria-invalid") is None and box.get_attribute("aria-describedby") is None
    box.fill("Birds sing at dawn.")
    page.get_by_label("Layer (from 0)").select_option("3")
    page.wait_for_function("() => document.querySelector('.overview')?.textContent.includes('layer 3')")
    page.wait_for_function("() => document.querySelector('.token-strip')?.textContent.includes('sing')")
    # Matrices says whose projections it holds
    page.get_by_text("Matrices", exact=True).click()
    page.locator(".matrices-body").wait_for(state="visible")  # built when first opened
    assert "the inspected head's projections and its block of rows of WO only (head 0)" in page.locator(".matrices").inner_text()
    # the browser itself logs each 422 answer; the page logged nothing else
    page.console_errors[:] = [e for e in page.console_errors if "status of 422" not in e]


@needs("minilm")
def test_the_model_menu_holds_models_only_and_the_mode_keeps_its_trace(page, server_url):
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Real model").click()
    picker = page.get_by_label("Model", exact=True)
    page.wait_for_function("() => document.querySelectorAll('#model-name option').length > 1")
    assert "Teaching example" not in picker.locator("option").all_inner_texts()
    # before a trace the teaching example is not shown under the model's panel: the panel says what to do
    assert page.locator("#app").is_hidden()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('press Trace')", timeout=120_000)
    page.wait_for_function("() => !window.mhaExplorer.linkPending")  # the link is written when the page is idle
    assert "mode=model" in page.url
    # the menu's arrow keys choose at once: they stay in the mode, and a large model waits for Trace
    picker.focus()
    page.keyboard.press("ArrowUp")
    expect(page.get_by_role("button", name="Real model")).to_have_attribute("aria-pressed", "true")
    heavy = [m for m in httpx.get(server_url + "api/models").json() if m["heavy"] and m["state"] != "ready"]
    if heavy:
        picker.select_option(heavy[0]["name"])
        expect(page.locator(".model-status")).to_have_text(f"{heavy[0]['title']} is large: press Trace to load it (some seconds) and trace the text.")
        # its layers can be picked before it loads, each marked local or global
        layers = page.get_by_label("Layer (from 0)")
        assert layers.is_enabled() and layers.locator("option").count() == heavy[0]["outline"]["n_layers"]
        if heavy[0]["name"] == "gemma3":
            assert layers.locator("option").nth(5).inner_text() == "Layer 5 · global" and layers.locator("option").nth(4).inner_text() == "Layer 4 · local (window 512)"
        assert httpx.get(server_url + f"api/models/{heavy[0]['name']}").json()["state"] == "idle"  # nothing loading
    # a trace, then the teaching example, then back: the trace and its view are there again
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 2)
    page.get_by_label("Calculation stage").select_option(label="Weights")
    page.get_by_label("Query token").select_option(index=3)
    query = page.get_by_label("Query token").locator("option").nth(3).inner_text()
    expect(page.locator(".stage h2")).to_contain_text(f"Weights · head 0 · query “{query}”")  # the view asked for, before it is left
    title = page.locator(".stage h2").inner_text()
    page.get_by_role("button", name="Teaching example").click()
    expect(page.locator(".stage h2")).to_contain_text("like")
    page.get_by_role("button", name="Real model").click()
    expect(page.locator(".stage h2")).to_have_text(title)
    expect(page.locator("#app")).to_be_visible()
    page.wait_for_function("() => location.hash.includes('model=minilm') && location.hash.includes('layer=2')")
    if heavy:
        # a layer picked for the large model waits with it for Trace: the trace on screen stays MiniLM's
        picker.select_option(heavy[0]["name"])
        page.get_by_label("Layer (from 0)").select_option("3")
        page.wait_for_timeout(300)
        assert page.locator(".model-status").inner_text().startswith(f"{heavy[0]['title']} is large: press Trace")
        assert page.locator(".overview h2").inner_text().startswith("all-MiniLM-L6-v2 · layer 2") and page.locator("#models .lab-error").inner_text() == ""
        assert httpx.get(server_url + f"api/models/{heavy[0]['name']}").json()["state"] == "idle"


@needs("gemma3")
def test_a_large_model_picked_is_called_large_only_once_the_server_says_it_is_not_loaded(page, server_url):
    """The menu's list is read when the mode opens; a large model loaded since by another page is
    asked about when picked. The page said "is large: press Trace" at once, then took it back: a
    flash. The status now waits for the server's answer."""
    listed = next(m for m in httpx.get(server_url + "api/models").json() if m["name"] == "gemma3") | {"state": "idle"}
    name, title = "gemma3", listed["title"]
    assert listed["heavy"]
    page.route("**/api/models", lambda route: route.fulfill(json=[m | {"state": "idle"} if m["name"] == name else m for m in httpx.get(server_url + "api/models").json()]))
    answers = []  # the server's answer about the model, held back until released
    page.route(f"**/api/models/{name}", lambda route: answers.append(route))
    page.goto(server_url + "#mode=model")
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('press Trace')", timeout=60_000)
    before = page.locator(".model-status").inner_text()
    page.get_by_label("Model", exact=True).select_option(name)
    page.wait_for_timeout(300)
    assert answers and page.locator(".model-status").inner_text() == before  # nothing said yet
    answers[0].fulfill(json=listed)
    expect(page.locator(".model-status")).to_have_text(f"{title} is large: press Trace to load it (some seconds) and trace the text.")


@needs("minilm")
def test_a_model_link_that_names_no_model_traces_its_text_on_the_first(page, server_url):
    """A link written by hand with a text and a layer but no model= keeps them: the first model
    traces them, and the notice says so."""
    page.goto(server_url + "#mode=model&layer=1&text=hi+there&stage=weights&head=3")
    expect(page.locator("#notice")).to_have_text("This link could not be used in full: it names no model, so the first, minilm, is traced.", timeout=60_000)
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 3 ·")
    assert page.evaluate("() => [window.mhaExplorer.model.get('payload').model.text, window.mhaExplorer.model.get('payload').model.layer]") == ["hi there", 1]
    page.wait_for_function("() => location.hash.includes('model=minilm') && !window.mhaExplorer.linkPending")


@needs("minilm")
def test_after_back_or_forward_each_modes_button_opens_it_as_it_was_left(page, server_url):
    """Back and Forward reload the page on an entry's link, which holds one mode's view: the lab's
    edits and a real model's trace, left for another mode, come back with their buttons."""
    page.goto(server_url + "#mode=lab")
    page.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('GQA')")
    page.wait_for_function("() => !document.getElementById('lab').dataset.busy")
    page.get_by_label("Tokens (separated by spaces)").fill("my own tokens here")
    page.get_by_label("Tokens (separated by spaces)").blur()
    page.wait_for_function("() => window.mhaExplorer.model.get('payload').tokens.join(' ') === 'my own tokens here'")
    page.get_by_label("Edit the values of").select_option("x")
    cell = page.locator('.edit-grid input[data-key="x:0,0"]')
    cell.fill("3")
    cell.blur()
    page.wait_for_function("() => location.hash.includes('edits=x') && !window.mhaExplorer.linkPending")
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelectorAll('#model-layer option').length > 2", timeout=120_000)
    page.get_by_label("Text", exact=True).fill("Alice gave Bob a book.")
    page.get_by_label("Layer (from 0)").select_option("2")
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)
    page.locator('.thumb-button[data-head="5"]').click()
    page.wait_for_function("() => location.hash.includes('head=5') && location.hash.includes('text=Alice') && !window.mhaExplorer.linkPending")
    page.get_by_role("button", name="Teaching example").click()
    page.wait_for_function("() => location.hash.includes('mode=teaching') && !window.mhaExplorer.linkPending")
    through_history(page, page.go_back)  # the page reloads on the model's link
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)
    # the lab, left two steps before, comes back as it was: tokens and edit
    page.get_by_role("button", name="Attention lab").click()
    page.wait_for_function("() => window.mhaExplorer?.model.get('payload').tokens.join(' ') === 'my own tokens here'", timeout=60_000)
    page.get_by_label("Edit the values of").select_option("x")
    expect(page.locator('.edit-grid input[data-key="x:0,0"]')).to_have_value("3")
    assert page.locator('.edit-grid input[data-key="x:0,0"]').get_attribute("class").split().count("edited") == 1
    # and the real model's trace, from the lab: its text, layer and head
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => window.mhaExplorer?.model.get('payload').model?.text === 'Alice gave Bob a book.'", timeout=120_000)
    expect(page.locator(".stage h2")).to_contain_text("· head 5 ·")
    assert page.evaluate("() => window.mhaExplorer.model.get('payload').model.layer") == 2
    # a tab opened on a link knows no other mode's: the lab's button opens the lab as it opens first
    other = page.context.new_page()
    other.goto(server_url + "#mode=teaching")
    other.wait_for_selector(".mha-explorer .stage h2")
    other.get_by_role("button", name="Attention lab").click()
    other.wait_for_function("() => document.querySelector('.outputs .hint')?.textContent.startsWith('GQA')")
    assert other.get_by_label("Tokens (separated by spaces)").input_value() == "the cat sat on the mat"
    other.close()


@needs("minilm")
def test_a_text_typed_and_not_traced_comes_back_with_the_browsers_back_and_forward(page, server_url):
    def open_mode(button, mode):  # by its button: a new entry, its link written
        page.get_by_role("button", name=button).click()
        page.wait_for_function("(m) => location.hash.includes('mode=' + m) && !window.mhaExplorer.linkPending", arg=mode)

    def model_shown():  # (Back or Forward to a model's entry reloads the page on it)
        page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)

    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    page.wait_for_function("() => location.hash.includes('layer=1') && !window.mhaExplorer.linkPending")
    typed = "A sentence typed\nand not traced yet."
    page.get_by_label("Text", exact=True).fill(typed)
    page.wait_for_timeout(400)  # the box is kept a moment after typing stops
    page.get_by_label("Calculation stage").select_option(label="Weights")  # a step rewrites the link: the text stays kept
    page.wait_for_function("() => location.hash.includes('stage=weights') && !window.mhaExplorer.linkPending")
    open_mode("Teaching example", "teaching")  # a new entry in the history
    through_history(page, page.go_back)  # the page reloads on the model's link
    model_shown()
    # the link's trace is shown (the link's text), and the box holds what was typed, said to be untraced
    expect(page.locator(".overview h2")).to_contain_text("all-MiniLM-L6-v2 · layer 1")
    assert page.evaluate("() => window.mhaExplorer.model.get('payload').model.text") == "The cat sat on the mat."
    expect(page.get_by_label("Text", exact=True)).to_have_value(typed)
    expect(page.locator(".model-status")).to_have_text("The text has changed: press Trace (or Ctrl+Enter) to follow a query through it.")
    through_history(page, page.go_forward)
    page.wait_for_function("() => location.hash.includes('mode=teaching')")
    through_history(page, page.go_back)
    model_shown()
    expect(page.get_by_label("Text", exact=True)).to_have_value(typed)
    # traced, it is the link's text, and the box and the trace agree
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("(t) => window.mhaExplorer.model.get('payload').model?.text === t", arg=typed, timeout=60_000)
    page.wait_for_function("() => location.hash.includes('text=A+sentence') && !window.mhaExplorer.linkPending")
    # typed and left at once (the box is kept a moment after typing stops): kept with the entry left
    page.get_by_label("Text", exact=True).fill("typed and left at once")
    open_mode("Teaching example", "teaching")
    through_history(page, page.go_back)
    model_shown()
    expect(page.get_by_label("Text", exact=True)).to_have_value("typed and left at once")
    # left, come back to by its button (a new entry) and left again: that entry keeps the box too
    page.get_by_label("Text", exact=True).fill("typed, then the mode left twice")
    page.wait_for_timeout(400)
    open_mode("Teaching example", "teaching")
    open_mode("Real model", "model")
    expect(page.get_by_label("Text", exact=True)).to_have_value("typed, then the mode left twice")
    open_mode("Teaching example", "teaching")
    through_history(page, page.go_back)
    model_shown()
    expect(page.get_by_label("Text", exact=True)).to_have_value("typed, then the mode left twice")
    expect(page.locator(".model-status")).to_have_text("The text has changed: press Trace (or Ctrl+Enter) to follow a query through it.")
    # typed, the teaching example, the model again by its button (a new entry): Back, then Forward
    # to that entry, which is reloaded; or Back, then the model's button. The box keeps the text
    page.get_by_label("Text", exact=True).fill("typed before two mode buttons")
    page.wait_for_timeout(400)
    open_mode("Teaching example", "teaching")
    open_mode("Real model", "model")
    through_history(page, page.go_back)
    page.wait_for_function("() => location.hash.includes('mode=teaching') && document.querySelector('.mha-explorer .stage h2')")
    through_history(page, page.go_forward)
    model_shown()
    expect(page.get_by_label("Text", exact=True)).to_have_value("typed before two mode buttons")
    through_history(page, page.go_back)
    page.wait_for_function("() => location.hash.includes('mode=teaching') && document.querySelector('.mha-explorer .stage h2')")
    page.get_by_role("button", name="Real model").click()
    model_shown()
    expect(page.get_by_label("Text", exact=True)).to_have_value("typed before two mode buttons")
    expect(page.locator(".model-status")).to_have_text("The text has changed: press Trace (or Ctrl+Enter) to follow a query through it.")


@needs("minilm")
@needs("smollm2")
def test_picking_another_model_traces_it_so_the_view_never_mixes_two(page, server_url):
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    assert "all-MiniLM-L6-v2 · layer 1" in page.locator(".overview").inner_text()
    page.get_by_label("Model", exact=True).select_option("smollm2")
    # the layer picked stays, as SmolLM2 has one of that number
    page.wait_for_function("() => document.querySelector('.overview')?.textContent.includes('SmolLM2-135M-Instruct · layer 1')", timeout=120_000)
    assert page.get_by_label("Layer (from 0)").input_value() == "1"
    assert "Rotary positions" in page.get_by_label("Calculation stage").locator("option").all_inner_texts()
    assert page.locator("#models .lab-error").inner_text() == ""
    assert "no layer" not in page.locator(".model-status").inner_text()  # the layer asked for is traced
    # a layer MiniLM does not have (it has 6): its nearest is traced, and the status says so
    page.get_by_label("Layer (from 0)").select_option("7")
    page.wait_for_function("() => document.querySelector('.overview')?.textContent.includes('SmolLM2-135M-Instruct · layer 7')", timeout=120_000)
    page.get_by_label("Model", exact=True).select_option("minilm")
    page.wait_for_function("() => document.querySelector('.overview')?.textContent.includes('all-MiniLM-L6-v2 · layer 5')", timeout=120_000)
    expect(page.locator(".model-status")).to_have_text(re.compile(r"^all-MiniLM-L6-v2, layer 5: \d+ tokens\. It has no layer 7: layer 5 is traced instead\.$"))


@needs("minilm")
def test_a_static_copy_holds_layers_of_a_real_model(browser, tmp_path, artifacts):
    text = "The cat sat on the mat because it was warm."
    minilm = load_model("minilm")
    export_site(tmp_path / "site", ModelLayers(minilm, text, (0, 2)))
    context, page, requests, errors = file_page(browser)
    page.goto((tmp_path / "site" / "index.html").as_uri())
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('This page holds')")
    assert page.locator("#model-layer option").all_inner_texts() == ["Layer 0", "Layer 2"]
    assert page.get_by_label("Text", exact=True).input_value() == text
    assert page.get_by_label("Text", exact=True).evaluate("(t) => t.readOnly")
    page.get_by_label("Layer (from 0)").select_option("2")
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false")
    assert page.locator(".model-status").inner_text() == "all-MiniLM-L6-v2, layer 2: 13 tokens."
    # the text box, read-only, says why under it, the trace on screen or not
    note = page.locator("#" + page.get_by_label("Text", exact=True).get_attribute("aria-describedby"))
    assert note.inner_text() == "This copy holds this text only; mha-explorer serve traces any text."
    page.locator("#models").screenshot(path=str(artifacts / "static-copy-model-panel.png"))
    # every head is in the page: the numbers of any head are those the server sends, with nothing
    # fetched; the pointer resting on a thumbnail has that head's view drawn before the click
    for head in (0, 7):
        page.locator(".thumb-button", has_text=f"Head {head}").hover()
        # the rest announced the head (after 80 ms, later on a busy machine); its view is built at the next idle moment
        page.wait_for_function(f"() => window.mhaExplorer.model.get('upcoming')?.head === {head}")
        page.evaluate(IDLE)
        clicked = page.evaluate(DRAWN_BY, f'.thumb-button[data-head="{head}"]')
        assert f"head {head}" in clicked["title"] and (head == 0 or clicked["calls"] == []), clicked
        reference = full_arrays(model_payload(minilm, text, 2, head))
        checked = set()
        for stage in page.get_by_label("Calculation stage").locator("option").all_inner_texts():
            page.get_by_label("Calculation stage").select_option(label=stage)
            if page.locator(".stage .num").count():
                checked |= check_numbers(page, ".stage", reference)
        assert {src.split(":")[0] for src in checked} >= {"q", "scores", "scaled", "weights"}, {src.split(":")[0] for src in checked}
        # the copy holds every head: all of W^O, and every head's part of the output
        page.get_by_label("Calculation stage").select_option(label="Output projection")
        expect(page.locator(".stage .head-shares .hint")).to_contain_text("above are every head's components, and y's")
        assert page.locator(".stage figcaption", has_text="concat for").count() == 1
    page.screenshot(path=str(artifacts / "static-site-minilm.png"), full_page=True)
    # another layer keeps the head and the query, as with the server
    page.get_by_label("Layer (from 0)").select_option("0")
    page.wait_for_function("() => document.querySelector('.model-status').textContent.includes('layer 0')")
    assert page.locator(".stage h2").inner_text().endswith("· all heads (head 7 inspected) · query “mat”")
    # a link to a model the copy does not hold (the copy made again with another) shows the copy's
    # own model at its first layer, said so; the head stays, the query (a token of that model's) goes
    site = (tmp_path / "site" / "index.html").as_uri()
    open_link(page, f"{site}#mode=model&model=smollm2&layer=3&text=The+cat+sat+on+the+mat+because+it+was+warm.&stage=weights&head=4&query=2")
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: the model “smollm2” is not in this page, which holds all-MiniLM-L6-v2: all-MiniLM-L6-v2 is shown, at its layer 0, the first this copy holds (not the link's query, a token of that model's)."
    )
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 4 · query “mat”")
    assert page.locator("#mode-model").get_attribute("aria-pressed") == "true" and page.locator("#models .lab-error").inner_text() == ""
    assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2, layer 0")  # not the nearest to the link's layer 3: that was the other model's
    # another model and another text: each said, neither saying the other is kept
    open_link(page, f"{site}#mode=model&model=smollm2&layer=3&text=Hello&stage=weights&head=4&query=2")
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: its text is not this copy's: the copy holds one text, “The cat sat on the mat because it was warm.”, shown with the link's stage and head;"
        " the model “smollm2” is not in this page, which holds all-MiniLM-L6-v2: all-MiniLM-L6-v2 is shown, at its layer 0, the first this copy holds (not the link's query, a token of that model's)."
    )
    # a link made on another text (the copy made again on a new sentence) shows the copy's own
    # text, its model, layer and head kept; its query stood for a token of the other text
    open_link(page, f"{site}#mode=model&model=minilm&layer=0&text=Hello+there&head=5&query=1")
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: its text is not this copy's: the copy holds one text, “The cat sat on the mat because it was warm.”, shown with the link's model, layer and head (not its query, a token of its own text)."
    )
    expect(page.locator(".stage h2")).to_contain_text("· head 5 · query “mat”")
    assert page.locator("#mode-model").get_attribute("aria-pressed") == "true"
    assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2, layer 0")
    # a layer, head or query the copy does not have is dropped alone: the nearest layer it holds,
    # or the layer's first view, is shown
    for part, why, title in (
        ("layer=1&head=1", "layer 1 is not in this page: it holds layers 0, 2, so layer 2 is shown.", "· head 1 · query “mat”"),
        ("layer=2&head=40&query=3", "head 40 is out of range: there are 12 heads, so head 0 is shown.", "· head 0 · query “sat”"),
        ("layer=2&head=5&query=50", "query 50 is out of range: there are 13 tokens, so query “mat” is shown.", "· head 5 · query “mat”"),
    ):
        open_link(page, f"{site}#mode=model&model=minilm&text=The+cat+sat+on+the+mat+because+it+was+warm.&{part}")
        expect(page.locator("#notice")).to_have_text(f"This link could not be used in full: {why}")  # after the reload
        expect(page.locator(".stage h2")).to_contain_text(title)
        assert page.locator("#mode-model").get_attribute("aria-pressed") == "true"
        assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2, layer 2")
        # the heading names the layers the copy holds among the model's
        assert page.locator(".overview h2").inner_text() == "all-MiniLM-L6-v2 · layer 2 (layers 0–5; this copy holds 0, 2) · every head's weights"
    # a query named by its token, as the terminal takes it: found on the tokens the layer came with
    open_link(page, f"{site}#mode=model&model=minilm&text=The+cat+sat+on+the+mat+because+it+was+warm.&layer=2&stage=weights&head=5&query=sat")
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 5 · query “sat”")
    assert page.locator("#notice").is_hidden()
    open_link(page, f"{site}#mode=model&model=minilm&text=The+cat+sat+on+the+mat+because+it+was+warm.&layer=2&head=5&query=dog")
    expect(page.locator("#notice")).to_contain_text("This link could not be used in full: the query “dog” is not a token here: name one of “[CLS]”, “the@1”, “cat”")
    expect(page.locator("#notice")).to_contain_text("or give a position; query “mat” is shown.")
    expect(page.locator(".stage h2")).to_contain_text("· head 5 · query “mat”")
    # found as the text reads it, in any case: MiniLM's tokenizer lowercases "The"
    open_link(page, f"{site}#mode=model&model=minilm&text=The+cat+sat+on+the+mat+because+it+was+warm.&layer=2&stage=weights&head=5&query=The")
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 5 · query “the @1”")
    assert page.locator("#notice").is_hidden()
    # a link to another model: its query, a token of that model's, goes as the notice says (no
    # second complaint, and not looked up among this copy's tokens, where "cat" is)
    open_link(page, f"{site}#mode=model&model=smollm2&layer=3&text=The+cat+sat+on+the+mat+because+it+was+warm.&stage=weights&head=4&query=cat")
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: the model “smollm2” is not in this page, which holds all-MiniLM-L6-v2: all-MiniLM-L6-v2 is shown, at its layer 0, the first this copy holds (not the link's query, a token of that model's)."
    )
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 4 · query “mat”")
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    assert errors == []
    context.close()


@needs("minilm")
def test_the_inspected_head_is_in_sight_and_the_thumbnails_keep_their_places(page, server_url):
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the thumbnails wrap
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 2)
    boxes = lambda: page.locator(".thumb-button").evaluate_all("(all) => all.map((b) => [b.offsetLeft, b.offsetTop, b.offsetWidth])")
    before = boxes()
    page.locator(".thumb-button", has_text="Head 10").click()
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('head 10')")
    assert boxes() == before  # the picked one is marked by a ring, not a wider border
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    inside = page.evaluate(
        """() => { const list = document.querySelector('.head-list.compact'); const mine = list.querySelector('.inspected');
        const a = list.getBoundingClientRect(), b = mine.getBoundingClientRect();
        return [list.scrollHeight > list.clientHeight, b.top >= a.top - 1 && b.bottom <= a.bottom + 1]; }"""
    )
    assert inside == [True, True]  # the list scrolls, and head 10's z is in its box
    # and fades at the edge with more beyond it (a phone shows no scrollbar until touched)
    fade = "(e) => { const s = getComputedStyle(e); return [e.scrollTop > 0, e.scrollTop + e.clientHeight < e.scrollHeight - 1, s.maskImage !== 'none', s.maskSize, s.maskPosition]; }"
    above, below, masked, size, position = page.locator(".head-list.compact").evaluate(fade)
    assert masked and above and not below, (above, below)  # head 10 is near the list's end
    assert (size, position) == ("100% calc(100% + 24px)", "0px 0px")  # the top edge fades, the bottom does not
    # an inspected entry taller than the box (Gemma's z has 256 numbers) shows its head, not its middle
    page.set_viewport_size({"width": 390, "height": 240})  # the box is 60% of the window's height
    page.locator(".thumb-button", has_text="Head 0").click()
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('head 0')")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    top = page.evaluate(
        """() => { const list = document.querySelector('.head-list.compact'); const name = list.querySelector('.inspected .head-name');
        return [list.querySelector('.inspected').offsetHeight > list.clientHeight, name.getBoundingClientRect().top >= list.getBoundingClientRect().top - 1]; }"""
    )
    assert top == [True, True]


@needs("smollm2")
def test_the_token_strip_marks_a_line_break_and_a_tab(page, server_url):
    trace_model(page, server_url, "smollm2", "One line.\nAnd\ta tab.", 0)
    chips = page.locator(".token-strip .token").all_inner_texts()
    assert "↵" in chips and any("⇥" in c for c in chips) and all(c.strip() for c in chips), chips


@needs("minilm")
def test_a_short_texts_scores_and_value_rows_list_every_key(page, server_url):
    """Nine tokens and vectors of 32: every key is listed, in order, at Scores and Value mixing
    (only the vectors are too long to write out)."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 0)
    page.get_by_label("Calculation stage").select_option(label="Scores")
    listed = [row.split("\t")[0] for row in page.locator(".stage table.calc-table tbody tr").all_inner_texts()]
    assert "the table lists the 9 keys, in order." in page.locator(".stage p.lead").first.inner_text()
    assert "q · k" in page.locator(".stage table.calc-table thead").inner_text()
    # the strip of scores over it names each key under its own column (its axis named the first and
    # the last alone, cut to "key …" in a strip this short)
    names = page.locator(".stage .heatmap-axis.names span")
    assert names.all_inner_texts() == listed
    strip, cells = page.locator(".stage canvas.heatmap").bounding_box(), page.locator(".stage .heatmap-axis.names").bounding_box()
    assert abs(cells["x"] + cells["width"] - (strip["x"] + strip["width"])) < 1.5  # the axis spans the cells, right of the row's label
    column = cells["width"] / len(listed)
    for j, name in enumerate(names.all()):
        at = name.bounding_box()
        assert abs(at["x"] - (cells["x"] + j * column)) < 1.5 and abs(at["width"] - column) < 1.5, (j, at, cells)
    # a token that occurs twice is named by its position, in the tables as in the bars and menus;
    # the others by their text alone, in every stage alike
    assert listed == page.get_by_label("Query token").locator("option").all_inner_texts(), listed
    assert listed[:3] == ["[CLS]", "the @1", "cat"] and listed[5] == "the @5", listed
    page.get_by_label("Calculation stage").select_option(label="Weights")
    keys = [row.split("\t")[0] for row in page.locator(".stage table.softmax tbody tr").all_inner_texts()]
    assert keys == listed, keys
    # every query's weights: a map of 9 by 9 names each key under its column, as its row is named
    page.get_by_role("button", name="All queries").click()
    assert page.locator(".stage canvas.heatmap").count() == 1
    names = page.locator(".stage .heatmap-axis.names span")
    assert names.all_inner_texts() == listed
    box = page.locator(".stage canvas.heatmap").bounding_box()
    first, last = names.first.bounding_box(), names.last.bounding_box()
    assert abs(first["x"] - (box["x"] + box["width"] - 9 * first["width"])) < 1.5 and abs(last["x"] + last["width"] - (box["x"] + box["width"])) < 1.5
    page.get_by_role("button", name="All queries").click()
    # an encoder keeps no KV cache: the cost panel says its numbers are a decoder's
    page.locator("summary", has_text="Cost of this configuration").click()
    assert page.locator(".costs .table-title").first.inner_text().startswith("This encoder keeps no KV cache; a decoder of its widths would keep, per layer, one key")
    assert page.locator(".whole-model").inner_text().endswith("keeps no cache: this is what a decoder of these sizes would keep.")
    # what the cache is for, and where its 768 numbers a token come from
    expect(page.locator(".costs p.cache-why")).to_have_text(
        "A decoder that writes text one token at a time keeps the keys and values of every token before (the KV cache), so that each new token"
        " computes only its own: per layer and token, n_kv_heads × (d_head + d_v) = 12 × (32 + 32) = 768 numbers, of 2 bytes each in float16 and 4 in float32."
    )
    # the Output stage shows the bias the output adds
    page.get_by_label("Calculation stage").select_option(label="Output projection")
    labels = [c.get_attribute("aria-label") for c in page.locator(".stage canvas.heatmap").all()]
    assert any(label.startswith("The bias b O, added once: 1 × 384; use the arrow keys") for label in labels), labels
    # a q of 384 products: pointing at it gives the largest five, not a 5,000-character line
    page.get_by_label("Calculation stage").select_option(label="Projections")
    page.locator(".stage .num[data-src^='q:']").first.hover()
    calc = page.locator(".stage p.calc").inner_text()
    assert "+ … (the 5 largest of 384 products x[m]×W[m][0])" in calc and len(calc) < 200, calc
    # and it is written right under q's equation, not below the K and V maps
    order = page.locator(".stage p.calc").evaluate("(p) => [...p.parentElement.children].filter((e) => e === p || e.matches('.equation')).map((e) => (e === p ? 'calc' : 'equation'))")
    assert order[:2] == ["equation", "calc"] and len(order) == 4, order
    page.get_by_label("Calculation stage").select_option(label="Value mixing")
    assert "Below: those value rows, each with its weight, then z." in page.locator(".stage p.lead").first.inner_text()
    # the first map's readout says how to read a cell, set as words; a value read out is in the numbers' type
    first = page.locator(".stage .readout").first
    font = "(p) => getComputedStyle(p).fontFamily"
    assert first.inner_text().startswith("Point at a cell") and "monospace" not in first.evaluate(font)
    page.locator(".stage canvas.heatmap").first.focus()
    expect(first).to_contain_text(" · v[0]: ")
    assert "monospace" in first.evaluate(font)
    # its rows of a·v are named as the other stages name the keys: "cat", "the @1"
    scaled_rows = page.locator(".stage canvas.heatmap").nth(1)
    scaled_rows.focus()
    readout = page.locator(".stage .readout").nth(1)
    for row, name in ((0, "[CLS]"), (1, "the @1"), (2, "cat")):
        expect(readout).to_contain_text(f"{name} · a·v[0]: ")
        assert readout.inner_text().startswith(f"{name} · a·v[0]: "), (row, readout.inner_text())
        page.keyboard.press("ArrowDown")
    assert page.locator(".stage canvas.heatmap").first.get_attribute("aria-label").startswith("Value rows, one per key, each to be scaled by its weight: 9 × 32; use the arrow keys")


@needs("smollm2")
def test_a_long_causal_texts_scores_follow_the_keys_the_query_sees(page, server_url):
    """Beyond 24 tokens the Scores table lists the keys the query may see with the highest scores
    (the keys the next stages weigh), and counts the hidden keys that scored above the last."""
    text = "Attention lets every token read from the tokens before it, and only from those, in a decoder like this one that writes text."
    trace_model(page, server_url, "smollm2", text, 0)
    n = len(page.get_by_label("Query token").locator("option").all_inner_texts())
    assert n > 24
    query = 6
    page.get_by_label("Query token").select_option(index=query)
    page.get_by_label("Calculation stage").select_option(label="Scores")
    scores = full_arrays(api_trace(server_url, model="smollm2", text=text, layer=0, head=0))["scores"][0, query]
    listed = [int(re.search(r"@(\d+)", r).group(1)) for r in page.locator(".stage table.calc-table tbody tr").all_inner_texts()]
    assert listed == list(np.argsort(-scores[: query + 1], kind="stable")[:8]), listed
    above = int((scores[query + 1 :] > scores[listed[-1]]).sum())
    lead = page.locator(".stage p.lead").first.inner_text()
    assert "the table lists the 7 keys the query may see, highest first." in lead, lead
    assert above > 1 and f"{above} hidden keys score higher than the last one listed: the mask, next, sets their scores to −∞." in lead, lead


@needs("smollm2")
def test_a_strip_of_more_keys_than_pixels_fits_the_stage_and_keeps_its_strongest_key(page, server_url):
    """Past 640 keys (SmolLM2 takes 1,024) the strips and maps ran past the stage's column, a pixel
    a key: the last keys and the axis's last label were out of sight, and scrolling the box took the
    row's label away. They now fit 640 px, several keys to a pixel, each pixel the strongest of its
    keys: the row's largest weight is never lost between two pixels."""
    text = "Attention lets every token read from every other token while each head learns its own pattern. " * 48
    trace_model(page, server_url, "smollm2", text, 5)
    page.get_by_label("Calculation stage").select_option(label="Weights")
    n = page.evaluate("() => window.mhaExplorer.model.get('payload').tokens.length")
    assert n > 800, n
    strip = page.locator(".stage canvas.heatmap").first
    stage = page.locator("section.stage").bounding_box()
    box = strip.bounding_box()
    assert box["x"] + box["width"] <= stage["x"] + stage["width"], (box, stage)
    axis = page.locator(".stage .heatmap-axis").first
    assert axis.locator("span").last.bounding_box()["x"] + 4 < stage["x"] + stage["width"]  # the last key's name in sight
    # a query whose largest weight falls on a key that a pixel a key, sampled, would not show
    payload = TracePayload.model_validate(httpx.post(server_url + "api/model-trace", json={"model": "smollm2", "text": text, "layer": 5, "head": 0}).json())
    weights = to_numpy(payload.stages["weights"])[0]  # (n, n)
    sampled = {x * n // 640 for x in range(640)}
    query = next(q for q in range(n // 2, n) if int(np.argmax(weights[q])) not in sampled and np.sort(weights[q])[-2] < 0.9 * weights[q].max())
    page.get_by_label("Query token").select_option(str(query))
    # every pixel of the strip's cells, and the legend's full colour (the row's largest weight)
    found = page.evaluate(
        """() => {
          const canvas = document.querySelector(".stage canvas.heatmap");
          const full = getComputedStyle(document.querySelector(".stage .swatch.weight")).backgroundColor.match(/\\d+/g).map(Number);
          const { data, width } = canvas.getContext("2d").getImageData(0, 0, canvas.width, 1);
          let hits = 0;
          for (let x = 0; x < width; x++) if ([0, 1, 2].every((k) => Math.abs(data[4 * x + k] - full[k]) <= 2)) hits++;
          return hits;
        }"""
    )
    assert found >= 1  # (nearest-pixel sampling dropped 1 key in 3, the largest among them at times)
    # the keyboard still reaches every key: End reads the last
    strip.focus()
    page.keyboard.press("End")
    assert f"key {n - 1} " in page.locator(".stage .readout").first.inner_text()


@needs("minilm")
def test_the_projections_maps_frame_the_querys_row_and_a_map_scrolled_under_the_pointer_reads_anew(page, server_url):
    """Projections of a long text drew X, K and V as maps of every token without framing the
    query's row (All queries did). And a map scrolled under a resting pointer (the wheel) kept
    naming the cell it had left until the pointer moved."""
    text = "Transformers use attention mechanisms so every token can read from every other token. " * 4
    trace_model(page, server_url, "minilm", text, 1)
    page.get_by_label("Calculation stage").select_option(label="Projections")
    query = page.evaluate("() => window.mhaExplorer.model.get('query')")
    maps = {name: page.locator(".stage .heatmap-figure").filter(has=page.locator("figcaption", has_text=re.compile(f"^{name}0?$"))) for name in "XKV"}  # K and V of head 0
    for name, figure in maps.items():
        expect(figure.locator(".heatmap-mark")).to_be_visible()  # (the one-row maps of the query's x, W and b have none)
    canvas = maps["X"].locator("canvas.heatmap")
    row_height = canvas.bounding_box()["height"] / len(page.evaluate("() => window.mhaExplorer.model.get('payload').tokens"))
    mark = maps["X"].locator(".heatmap-mark").bounding_box()
    assert abs(mark["y"] - (canvas.bounding_box()["y"] + query * row_height)) <= 3, (mark, query, row_height)
    # K's equation (X's map and K's) is shared by every query's panel: the frame moves with the
    # query, and not with a neighbour's panel drawn ahead (it framed the first query, then query - 1)
    for other in (3, query):
        page.get_by_label("Query token").select_option(str(other))
        page.wait_for_timeout(300)
        for name in "XK":
            mark = maps[name].locator(".heatmap-mark").bounding_box()
            top = maps[name].locator("canvas.heatmap").bounding_box()["y"]
            assert abs(mark["y"] - (top + other * row_height)) <= 3, (name, mark, other, row_height)
    # the pointer rests on the map; the page scrolls under it by the wheel
    canvas.evaluate("(e) => e.scrollIntoView({ block: 'center' })")  # with the page to scroll below it
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 2.5 * row_height)
    readout = maps["X"].locator(".readout")
    labels = page.evaluate("() => window.mhaExplorer.model.get('payload').model.labels")
    row = lambda r: re.compile(rf"^{re.escape(labels[r])}( @{r})? · ")  # noqa: E731 - the readout of a cell of row r
    expect(readout).to_have_text(row(2))
    page.mouse.wheel(0, 10 * row_height)
    page.wait_for_timeout(300)
    moved = (box["y"] - canvas.bounding_box()["y"]) / row_height  # rows scrolled under the pointer
    assert moved > 5, moved
    expect(readout).to_have_text(row(int(2.5 + moved)))  # the row now under the pointer


@needs("minilm")
@needs("smollm2")
def test_the_view_on_screen_is_dimmed_and_busy_while_another_layer_runs(page, server_url):
    """For 0.5 to 2.5 s (SmolLM2 at 1,000 tokens) the layer menu named the new layer over the old
    layer's numbers, with only the status line to tell them apart."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    held = []
    page.route("**/api/model-trace", lambda route: held.append(route))
    page.get_by_label("Layer (from 0)").select_option("4")
    routed(page, held, 1)
    app = page.locator("#app")
    assert app.get_attribute("aria-busy") == "true" and "running" in app.get_attribute("class").split()
    page.wait_for_timeout(700)  # after its moment
    assert float(app.evaluate("e => getComputedStyle(e).opacity")) < 0.7
    held[0].continue_()
    expect(page.locator(".overview h2")).to_contain_text("layer 4")
    expect(app).not_to_have_attribute("aria-busy", "true")
    assert app.evaluate("e => getComputedStyle(e).opacity") == "1"


@needs("minilm")
def test_a_long_texts_weights_and_value_rows_can_be_read(page, server_url):
    """Over 170 keys no weight comes near 1: the strip of one query's weights is coloured up to its
    own largest, which its legend gives; the value rows of the top keys say which key each is."""
    text = "Transformers use attention mechanisms so every token can read from every other token. " * 10
    trace_model(page, server_url, "minilm", text, 0)
    payload = TracePayload.model_validate(
        httpx.post(server_url + "api/model-trace", json={"model": "minilm", "text": text, "layer": 0, "head": 0}).json()
    )
    weights = to_numpy(payload.stages["weights"])[0, payload.query]  # the query the view starts at
    page.get_by_label("Calculation stage").select_option(label="Weights")
    legend = page.locator(".stage .heatmap-legend").first.inner_text()
    largest = f"{weights.max():.2g}" if weights.max() < 0.1 else f"{weights.max():.2f}"  # as the bars' scale says it (0.10, not 0.1)
    assert " ".join(legend.split()).endswith(f"0 to {largest} (this row's largest)"), legend
    # the 8 largest, each a hundredth or so: their bars are drawn against the largest of them (out
    # of 1 they were a few pixels each, all alike), and what they share is said with the rest's
    top8 = np.argsort(-weights, kind="stable")[:8]
    assert page.locator(".stage .bars-scale").inner_text() == f"The 8 largest, each bar against the largest of them, {float(f'{weights.max():.2g}'):g}:"
    bars = page.locator(".stage .bars .bar-row").evaluate_all("(rows) => rows.map((r) => r.querySelector('.bar').getBoundingClientRect().width / r.querySelector('.bar-track').getBoundingClientRect().width)")
    np.testing.assert_allclose(sorted(bars, reverse=True), np.sort(weights[top8])[::-1] / weights.max(), atol=0.01)
    others = int((weights > 0).sum()) - 8
    assert page.locator(".stage p.lead").last.inner_text() == f"These 8 share {page_text(weights[top8].sum())} of the weight, and the other {others} keys it sees {page_text(weights.sum() - weights[top8].sum())}."
    # every query's weights at once: on a square-root scale, as the thumbnails, else nearly white,
    # and up to the map's own largest or (a few far above the rest) its 99th percentile: over 170
    # keys, 0 to 1 left it nearly white all the same
    page.get_by_role("button", name="All queries").click()
    every = " ".join(page.locator(".stage .heatmap-legend").first.inner_text().split())
    upto = float(re.search(r"Colours: 0 to ([0-9.]+)", every).group(1))
    assert "on a square-root scale so that faint weights show" in every and upto < 0.5, every
    every_weight = to_numpy(payload.stages["weights"])[0]  # (n, n), head 0
    assert upto <= every_weight.max() + 1e-9, (upto, every_weight.max())
    if upto < every_weight.max() - 0.01:  # a percentile: the rest, said
        assert f"beyond {upto:g} (up to {float(f'{every_weight.max():.2g}'):g}), full colour" in every, every
    page.get_by_role("button", name="All queries").click()
    # a map of small numbers (a bias of 0.0008) gives its bounds with their digits, not ±0.00
    page.get_by_label("Calculation stage").select_option(label="Projections")
    legends = page.locator(".stage .heatmap-legend").all_inner_texts()
    assert legends and not any("0.00 ·" in " ".join(text.split()) for text in legends), legends
    page.get_by_label("Calculation stage").select_option(label="Value mixing")
    page.locator(".stage canvas.heatmap").first.focus()
    page.keyboard.press("ArrowRight")
    readout = page.locator(".stage .readout").first.inner_text()
    top = int(np.argmax(weights))
    assert readout.startswith(f"{page_text(weights[top])} × {payload.tokens[top]} @{top} · v[1]"), readout
    # below it, the same rows times their weights: what each key adds to z
    scaled = page.locator(".stage canvas.heatmap").nth(1)
    assert "times their weights" in page.locator(".stage figure.heatmap-figure").nth(1).inner_text()
    scaled.focus()
    page.keyboard.press("ArrowRight")
    readout = page.locator(".stage .readout").nth(1).inner_text()
    v = to_numpy(payload.stages["v"])[0]  # head 0's K/V head
    assert readout.startswith(f"{payload.tokens[top]} @{top} · a·v[1]: {page_text(weights[top] * v[top, 1])}"), readout


@needs("minilm")
def test_the_newest_layer_picked_is_the_one_shown_whatever_answer_comes_last(page, server_url):
    """Layers picked quickly (a key held on the menu): an answer for layer 5 that comes late must
    not land over the one for layer 0 that was asked for after it."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    held = []  # layer 5's trace, held back until layer 0's has been shown

    def hold_layer_5(route):
        if json.loads(route.request.post_data)["layer"] == 5:
            held.append(route)
        else:
            route.continue_()

    page.route("**/api/model-trace", hold_layer_5)
    page.evaluate("""() => {
        const menu = document.getElementById('model-layer');
        for (const layer of ['5', '0']) { menu.value = layer; menu.dispatchEvent(new Event('change', { bubbles: true })); }
    }""")
    page.wait_for_function("() => document.querySelector('.model-status').textContent.includes('layer 0:')")
    for route in held:  # none when the page dropped layer 5's request before sending it
        route.continue_()
    page.wait_for_load_state("networkidle")  # any answer for layer 5 is in
    page.wait_for_timeout(300)
    assert page.get_by_label("Layer (from 0)").input_value() == "0"
    assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2, layer 0:")
    assert "layer=0" in page.url and page.locator("#models .lab-error").inner_text() == ""
    assert page.locator("#models button.primary").get_attribute("aria-disabled") is None  # Trace can be pressed again


@needs("minilm")
def test_a_head_picked_while_a_layer_loads_is_the_one_shown(page, server_url):
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    held = []

    def hold(route):
        held.append(route)

    page.route("**/api/model-trace", hold)
    page.get_by_label("Layer (from 0)").select_option("4")
    page.wait_for_function("() => document.querySelector('.model-status').textContent.startsWith('Running')")
    page.locator(".thumb-button[data-head='9']").click()  # the thumbnails still show layer 1's
    assert len(held) == 1
    held[0].continue_()
    page.wait_for_function("() => document.querySelector('.model-status').textContent.includes('layer 4:')")
    expect(page.locator(".stage h2")).to_contain_text("· head 9 ·")


@needs("minilm")
def test_the_head_thumbnails_are_one_tab_stop_and_the_arrow_keys_pick_among_them(page, server_url):
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    assert page.locator(".thumb-button[tabindex='0']").get_attribute("data-head") == "0"
    page.locator(".thumb-button[data-head='0']").focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.dataset.head") == "3"
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('.stage h2')?.textContent.includes('head 3')")
    assert page.locator(".thumb-button[tabindex='0']").get_attribute("data-head") == "3"


@needs("smollm2")
def test_a_links_query_out_of_range_names_the_query_shown_as_the_page_does(page, server_url):
    """The notice names the query shown by its label, as the menus do ("␣jumps", not the
    tokenizer's "Ġjumps"), with its position when its token repeats."""
    page.goto(server_url + "#mode=model&model=smollm2&layer=0&text=The+quick+brown+fox+jumps+over+the+quick+dog.&query=99")
    page.wait_for_function("() => !document.getElementById('notice').hidden", timeout=60_000)
    shown = page.get_by_label("Query token").locator("option:checked").inner_text()
    n = page.get_by_label("Query token").locator("option").count()
    assert shown.startswith("␣") and n < 99
    expect(page.locator("#notice")).to_have_text(f"This link could not be used in full: query 99 is out of range: there are {n} tokens, so query “{shown}” is shown.")
    expect(page.locator(".stage h2")).to_contain_text(f"query “{shown}”")


@needs("smollm2")
def test_a_link_names_a_decoders_query_as_its_text_reads(page, server_url):
    """SmolLM2's tokens carry their space (Ġquick, labelled ␣quick): a link written by hand names the
    query as the text reads, "quick", or with the position of a repeated one, as the terminal takes it."""
    page.goto(server_url + "#mode=model&model=smollm2&layer=0&text=The+quick+brown+fox+jumps+over+the+quick+dog.&stage=weights&head=2&query=quick@7")
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 2 · query “␣quick @7”", timeout=60_000)
    assert page.locator("#notice").is_hidden()
    open_link(page, server_url + "#mode=model&model=smollm2&layer=0&text=The+quick+brown+fox+jumps+over+the+quick+dog.&stage=weights&head=2&query=fox")
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 2 · query “␣fox”", timeout=60_000)


@needs("minilm")
def test_a_links_head_and_query_out_of_range_are_dropped_alone(page, server_url):
    """The model, text and layer of the link are traced; its head and query fall back to the first view's."""
    page.goto(server_url + "#mode=model&model=minilm&layer=1&text=The+cat+sat.&head=12&query=9")
    page.wait_for_function("() => !document.getElementById('notice').hidden", timeout=60_000)
    said = page.locator("#notice").inner_text()
    assert said == (
        "This link could not be used in full: head 12 is out of range: there are 12 heads, so head 0 is shown; "
        "query 9 is out of range: there are 6 tokens, so query “cat” is shown."
    ), said
    expect(page.locator(".stage h2")).to_contain_text("· head 0 · query “cat”")
    assert page.locator(".model-status").inner_text().startswith("all-MiniLM-L6-v2, layer 1: 6 tokens")
    # "all queries" comes back; a stage the layer lacks falls back to the one before it, said
    open_link(page, server_url + "#mode=model&model=minilm&layer=1&text=The+cat+sat.&head=2&stage=mask&all=1")
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: this layer has no Mask stage (it is not causal and has no sliding window), so Scores is shown."
    )  # (it said "stage “mask” is not one of …", as of a typo)
    expect(page.locator(".stage h2")).to_contain_text("2. Scores · head 2 ·")
    assert page.get_by_role("button", name="All queries").get_attribute("aria-pressed") == "true"
    # a layer the model lacks: its last layer, said
    open_link(page, server_url + "#mode=model&model=minilm&layer=9&text=The+cat+sat.&head=3")
    expect(page.locator("#notice")).to_have_text("This link could not be used in full: layer 9 does not exist: this model has layers 0 to 5, so layer 5 is shown.")
    expect(page.locator(".stage h2")).to_contain_text("· head 3 ·")
    assert page.get_by_label("Layer (from 0)").input_value() == "5"
    # an empty text: the example sentence, said
    open_link(page, server_url + "#mode=model&model=minilm&layer=2&text=&head=1")
    expect(page.locator("#notice")).to_have_text("This link could not be used in full: its text is empty, so the example sentence is traced.")
    expect(page.locator(".stage h2")).to_contain_text("· head 1 ·")
    assert page.get_by_label("Text", exact=True).input_value() == DEFAULT_TEXT


@needs("minilm")
def test_a_link_to_a_model_that_is_not_here_says_so_and_traces_nothing(page, server_url):
    page.goto(server_url + "#mode=model&model=gpt5&layer=0&text=hi")
    # as a link to a layer that does not exist: a notice says why, over the teaching example
    page.wait_for_function("() => document.querySelector('#notice')?.textContent.includes('gpt5')", timeout=60_000)
    said = page.locator("#notice").inner_text()
    assert said.startswith("This link could not be used. This server has no model “gpt5”: a link names one of minilm (all-MiniLM-L6-v2), ") and said.endswith(". Showing the teaching example instead."), said
    assert page.locator(".overview").is_hidden() and "model=minilm" not in page.url
    # a link to the mode with no model opens it as its button does
    open_link(page, server_url + "#mode=model")
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('press Trace')", timeout=60_000)
    assert page.locator("#models .lab-error").inner_text() == ""


@needs("gemma3")
@needs("smollm2")
def test_gemma3_shows_its_norms_window_and_shared_kv_head(page, server_url, artifacts):
    """Gemma 3 (heavy: loaded when Trace is pressed): the layer menu tells local layers from global
    ones, before it loads too; the q/k norm stage shows q before and after and says what its learned
    vectors are; the projections say all four query heads share one K/V head; every number is the API's."""
    text = "<start_of_turn>user\nThe cat sat on the mat.<end_of_turn>"
    page.goto(server_url)
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Real model").click()
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    layers = page.get_by_label("Layer (from 0)")
    layers.select_option("3")
    page.get_by_label("Model", exact=True).select_option("gemma3")
    # not loaded yet (nothing loads until Trace), its own layers are listed, each local or global,
    # on the layer picked
    assert httpx.get(server_url + "api/models/gemma3").json()["state"] == "idle"
    expect(layers).to_be_enabled()
    options = layers.locator("option").all_inner_texts()
    assert len(options) == 18 and options[0] == "Layer 0 · local (window 512)" and options[5] == "Layer 5 · global"
    expect(layers).to_have_value("3")
    # MiniLM picked again finds its layer where it was
    page.get_by_label("Model", exact=True).select_option("minilm")
    expect(layers).to_have_value("3")
    # passing over Gemma 3 (the menu's arrow keys choose at once) loses no layer it lacks: SmolLM2's 25
    # shows as Gemma's last, 17, and is 25 again with SmolLM2
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.startsWith('SmolLM2-135M-Instruct is loaded')", timeout=120_000)
    layers.select_option("25")
    page.get_by_label("Model", exact=True).select_option("gemma3")
    expect(layers).to_have_value("17")
    page.get_by_label("Model", exact=True).select_option("smollm2")
    expect(layers).to_have_value("25")
    page.get_by_label("Model", exact=True).select_option("gemma3")
    layers.select_option("0")  # a layer picked for it: Trace runs that one
    assert httpx.get(server_url + "api/models/gemma3").json()["state"] == "idle"
    page.get_by_label("Text", exact=True).fill(text)
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("() => document.querySelector('.overview')?.textContent.includes('Gemma 3 270M · layer 0')", timeout=300_000)
    # MQA: every thumbnail reads the one K/V head, and the overview says so
    assert page.locator(".thumb-button .thumb-kv").all_inner_texts() == ["K/V head 0"] * 4
    assert "All 4 heads read one K/V head's keys and values (MQA)" in page.locator(".overview").inner_text()
    expect(layers).to_be_enabled()
    options = page.get_by_label("Layer (from 0)").locator("option").all_inner_texts()
    assert len(options) == 18 and options[0] == "Layer 0 · local (window 512)" and options[5] == "Layer 5 · global"
    assert page.locator(".outputs p.hint", has_text="d_model 640").inner_text().endswith(" · causal, window 512")
    assert "GGUF Q4_K_M (matrices in" in page.locator(".model-status").inner_text()
    # typed turn markers are special tokens, as the <bos> the tokenizer adds
    strip = page.locator(".token-strip .token")
    special = [strip.nth(i).inner_text() for i in range(strip.count()) if "special" in (strip.nth(i).get_attribute("class") or "")]
    assert special == ["<bos>", "<start_of_turn>", "<end_of_turn>"], special
    # one K, one colour scale: K after the norm is drawn as the rotary stage draws it going in
    # (and out: the rotation moves K's largest values in a local layer)
    def legend(caption):
        figure = page.locator(".stage figure.heatmap-figure", has=page.locator("figcaption", has_text=caption))
        return " ".join(figure.locator(".heatmap-legend").inner_text().split())

    page.get_by_label("Calculation stage").select_option(label="Query/key norm")
    after_norm, q_after_norm = legend("K̂ after the norm"), legend("q̂ after")
    page.get_by_label("Calculation stage").select_option(label="Rotary positions")
    assert legend("before the rotation") == legend("K̃ after the rotation") == after_norm, after_norm
    assert legend("q̂ at position") == legend("q̃ after the rotation") == q_after_norm, q_after_norm  # q̂ too
    assert page.locator(".stage table.rotary caption").inner_text().startswith("Three pairs of q̂ turned by hand")
    # what turns is the normed q̂ and K̂, and the text and captions name them so
    stage_text = page.locator(".stage").inner_text()
    assert "q̂ moves by" in stage_text and "(|q̃ − q̂| / |q̂|)" in stage_text and "q moves by" not in stage_text
    assert page.locator(".stage figcaption", has_text=re.compile(r"^K̂ of .* before the rotation")).count() == 1
    page.get_by_label("Calculation stage").select_option(label="Projections")
    page.get_by_label("Layer (from 0)").select_option("5")
    page.get_by_role("button", name="Trace").click()
    page.wait_for_function("() => document.querySelector('.overview')?.textContent.includes('Gemma 3 270M · layer 5')", timeout=120_000)
    # (picking the layer traced it, and Trace again: the second, landing later, would drop a head fetched meanwhile)
    expect(page.get_by_role("button", name="Trace")).not_to_have_attribute("aria-disabled", "true", timeout=60_000)
    asked = []
    page.on("request", lambda r: asked.append(json.loads(r.post_data)) if r.url.endswith("/api/model-head") else None)
    page.locator(".thumb-button", has_text="Head 2").click()
    expect(page.locator(".stage h2")).to_contain_text("head 2")
    # the page holds the one K/V head's arrays (k, v, W_K, ...): they are not sent again with head 2's
    assert [(a["head"], a.get("kv_held")) for a in asked] == [(2, 0)], asked
    stages = page.get_by_label("Calculation stage").locator("option").all_inner_texts()
    assert stages[:4] == ["Projections", "Query/key norm", "Rotary positions", "Scores"] and "Mask" in stages
    assert "all 4 query heads share one key matrix and one value matrix" in page.locator(".stage p.explain").first.inner_text()
    # a global layer among local ones says so where its mask and rotation are shown
    for stage in ("Mask", "Rotary positions"):
        page.get_by_label("Calculation stage").select_option(label=stage)
        expect(page.locator(".stage p.where-from")).to_contain_text("Layer 5 is one of the model's 3 global layers (5, 11, 17): its queries see every token before them, with no window")
    page.get_by_label("Calculation stage").select_option(label="Projections")
    payload = api_trace(server_url, model="gemma3", text=text, layer=5, head=2)
    arrays = full_arrays(payload)
    # the inspected head's z, 256 numbers, would fill the list of heads: its first 16, said so
    listed = check_numbers(page, ".outputs", arrays)
    assert listed == {f"concat:{payload.query},{2 * 256 + e}" for e in range(16)}, sorted(listed)[:3]
    assert page.locator(".outputs .inspected").inner_text().endswith("…] the first 16 of 256; Value mixing shows every one")
    assert page.locator(".outputs .head-name").all_inner_texts()[-1].startswith("Head 3") and page.locator(".outputs .head-list").evaluate("(l) => l.scrollHeight <= l.clientHeight + 1")
    for title in stages:
        page.get_by_label("Calculation stage").select_option(label=title)
        expect(page.locator(".stage h2")).to_contain_text(title)
        if page.locator(".stage .num").count():
            check_numbers(page, ".stage", arrays)
    page.get_by_label("Calculation stage").select_option(label="Query/key norm")
    assert page.locator(".stage p.where-from").inner_text() == load_model("gemma3").arch.norm_note
    q = arrays["q"][2, payload.query]
    rms = float(np.sqrt(np.mean(q.astype(np.float64) ** 2) + payload.config.norm_eps))
    assert f"rms(q) = √(mean of q² + 0.000001) = {f'{rms:.3f}'.rstrip('0').rstrip('.')}: each component of q is divided by it" in page.locator(".stage").inner_text()
    # a key's norm can be checked too: the query's own row of K, its rms and the learned w^k
    k = arrays["k"][0, payload.query]
    k_rms = float(np.sqrt(np.mean(k.astype(np.float64) ** 2) + payload.config.norm_eps))
    assert f"itself has rms(k) = √(mean of k² + 0.000001) = {f'{k_rms:.3f}'.rstrip('0').rstrip('.')}." in page.locator(".stage").inner_text()
    assert page.locator(".stage .heatmap-figure", has_text="The learned wk").count() == 1
    page.screenshot(path=str(artifacts / "model-gemma3-qk-norm.png"), full_page=True)
    # the cost counts the stages this layer adds
    page.locator(".costs summary").click()
    rows = {r.split("\t")[0]: r.split("\t")[1:] for r in page.locator("table.cost:has(caption:text('Arithmetic')) tbody tr").all_inner_texts()}
    assert rows["qk_norm"] == [f"{payload.costs.multiply_adds['qk_norm']:,}", "multiply-adds for the root mean squares (then as many divisions and multiplies by w)"]
    assert rows["rope"] == [f"{payload.costs.multiply_adds['rope']:,}", "components turned (two multiplies and an add each)"]
    # Gemma sets its own scale (query_pre_attn_scalar): a multiply, not a division by √d_head
    assert rows["scaled"] == [f"{payload.costs.multiply_adds['scaled']:,}", "multiplies by the layer's own scale, one per score"]


@needs("minilm")
def test_the_lens_stays_on_a_short_wide_map_and_goes_with_the_pointer(page, server_url):
    """X of a 10-token text is a map 120 px tall: the lens shows as many rows as fit on it (it would
    hang over the caption, cut off by the figure). A map shown again after another query's, the
    pointer gone meanwhile, has no lens left on."""
    text = "Attention lets every token read the others."
    trace_model(page, server_url, "minilm", text, 0)
    page.get_by_label("Calculation stage").select_option(label="Projections")
    x_map = page.locator(".stage figure.heatmap-figure", has=page.locator("figcaption").filter(has_text=re.compile("^X$")))
    canvas = x_map.locator("canvas.heatmap")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box["height"] < 150  # shorter than a lens of 15 rows of 10 px
    page.mouse.move(box["x"] + box["width"] - 100, box["y"] + box["height"] / 2)
    lens = x_map.locator("canvas.heatmap-lens")
    expect(lens).to_be_visible()
    shown = lens.bounding_box()
    assert box["y"] - 0.5 <= shown["y"] and shown["y"] + shown["height"] <= box["y"] + box["height"] + 0.5, (box, shown)
    # another query's panel, the pointer leaving it, then this query's again: the lens is off
    menu = page.get_by_label("Query token")
    query = menu.input_value()
    menu.select_option(str(int(query) + 1))
    page.mouse.move(5, 5)
    menu.select_option(query)
    expect(page.locator(".stage h2")).to_contain_text(f"query “{page.locator('#' + menu.get_attribute('id') + ' option:checked').inner_text()}”")
    expect(page.locator(".stage canvas.heatmap-lens:visible")).to_have_count(0)


@needs("minilm")
def test_a_wide_map_of_a_few_dozen_rows_has_rows_a_person_can_point_at(page, server_url):
    """X of a 40-token text, 384 wide: rows of 8 px (a map 320 px tall at most), not a strip of
    1 px rows 40 px tall whose row labels could not be read."""
    text = "Attention lets every token read from the others, weighted by how well its query matches their keys, in every head at once."
    trace_model(page, server_url, "minilm", text, 0)
    n = page.locator(".token-strip .token").count()
    assert 27 <= n <= 40, n  # past 26 rows, rows of 12 px would make the map taller than 320 px
    page.get_by_label("Calculation stage").select_option(label="Projections")
    x_map = page.locator(".stage figure.heatmap-figure", has=page.locator("figcaption").filter(has_text=re.compile("^X$")))
    assert x_map.locator("canvas.heatmap").bounding_box()["height"] == 8 * n


@needs("minilm")
def test_a_link_to_a_layer_a_copy_lacks_shows_the_nearest_it_holds(browser, tmp_path):
    """A copy of layers 0 and 5: a lesson's link to layer 1 opens layer 0, not the last layer."""
    text = "The cat sat on the mat."
    export_site(tmp_path / "site", ModelLayers(load_model("minilm"), text, (0, 5)))
    context, page, requests, errors = file_page(browser)
    for asked, shown in ((1, 0), (2, 0), (3, 5), (4, 5), (9, 5)):
        page.goto((tmp_path / "site" / "index.html").as_uri() + f"#mode=model&model=minilm&text={quote_plus(text)}&layer={asked}&head=3")
        # a layer past the model's own is no layer a copy could hold: said so (it was "not in this page")
        why = "is not in this page: it holds layers 0, 5" if asked < 6 else "does not exist: this model has layers 0 to 5, and this page holds layers 0, 5"
        expect(page.locator("#notice")).to_have_text(f"This link could not be used in full: layer {asked} {why}, so layer {shown} is shown.")
        expect(page.locator(".model-status")).to_contain_text(f"all-MiniLM-L6-v2, layer {shown}:")
    assert errors == []
    context.close()


@needs("minilm")
def test_a_copy_reads_a_layer_when_it_is_traced(browser, tmp_path):
    """Each layer of a copy (megabytes) is a file of its own, static/layer-N.js, read the first time
    the layer is traced: the page and the Real model panel come up without it, the panel says it
    is reading it, and says what to upload when it cannot be read."""
    export_site(tmp_path / "site", ModelLayers(load_model("minilm"), "The cat sat on the mat.", (0, 2)))
    context, page, requests, errors = file_page(browser)
    held = []
    page.route("**/static/layer-*.js?v=*", lambda route: held.append(route))  # answered below, when the test says
    page.goto((tmp_path / "site" / "index.html").as_uri())
    page.wait_for_selector(".mha-explorer .stage h2")
    page.get_by_role("button", name="Next").click()
    expect(page.locator(".stage h2")).to_contain_text("2. Scores")
    page.get_by_role("button", name="Real model").click()
    expect(page.locator(".model-status")).to_contain_text("This page holds layers 0, 2")
    assert held == []  # no layer is read before one is traced
    page.get_by_label("Layer (from 0)").select_option("2")
    page.get_by_role("button", name="Trace").click()
    expect(page.locator(".model-status")).to_have_text("Reading layer 2 of this copy…")
    routed(page, held, 1)
    # that layer alone, asked for by its digest: a browser that kept an earlier export's file reads this one
    assert [route.request.url.rsplit("/", 1)[1] for route in held] == [f"layer-2.js?v={hashlib.sha256((tmp_path / 'site/static/layer-2.js').read_bytes()).hexdigest()[:16]}"]
    held[0].continue_()
    expect(page.locator(".model-status")).to_have_text("all-MiniLM-L6-v2, layer 2: 9 tokens.")
    assert "layer 2" in page.locator(".overview").inner_text()
    assert errors == []
    # a layer that cannot be read says what to upload, and the layer on screen stays; asked again, it is read
    page.get_by_label("Layer (from 0)").select_option("0")
    expect(page.locator(".model-status")).to_have_text("Reading layer 0 of this copy…")
    routed(page, held, 2)
    held[1].abort()
    expect(page.locator("#models .lab-error")).to_have_text(
        "This copy could not read layer 0, static/layer-0.js: put the whole static folder beside index.html, as mha-explorer export-site wrote it. The last good result stays on screen."
    )
    assert "layer 2" in page.locator(".overview").inner_text()
    page.unroute("**/static/layer-*.js?v=*")
    page.get_by_role("button", name="Trace").click()
    expect(page.locator(".model-status")).to_have_text("all-MiniLM-L6-v2, layer 0: 9 tokens.")
    expect(page.locator("#models .lab-error")).to_have_text("")
    # a layer file of another copy (another text), uploaded or cached beside this copy's data, is refused
    export_site(tmp_path / "other", ModelLayers(load_model("minilm"), "A dog barked at the moon all night.", (2,)))
    (tmp_path / "site/static/layer-2.js").write_bytes((tmp_path / "other/static/layer-2.js").read_bytes())
    mixed = context.new_page()
    mixed.goto((tmp_path / "site" / "index.html").as_uri())
    mixed.get_by_role("button", name="Real model").click()
    mixed.get_by_label("Layer (from 0)").select_option("2")
    mixed.get_by_role("button", name="Trace").click()
    expect(mixed.locator("#models .lab-error")).to_have_text(
        "static/layer-2.js is another copy's layer 2, on another text: put the whole static folder beside index.html, as mha-explorer export-site wrote it."
    )
    expect(mixed.locator(".overview")).to_be_hidden()
    context.close()


@needs("minilm")
def test_a_head_picked_in_the_menu_is_announced_when_it_comes(page, server_url):
    """The head menu says the head picked; the view drawn at once (its panel says it is loading) is
    not announced again. When the head's arrays come, the stage, head and query are."""
    heads_fetched(page)
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 2)
    held = []
    page.route("**/api/model-head", lambda route: held.append(route))
    live = page.locator(".mha-explorer .sr-only[aria-live]")
    menu = page.get_by_label("Inspect head")
    menu.focus()
    page.keyboard.press("ArrowDown")  # head 0 -> 1, whose arrays the page asks for
    expect(page.locator(".stage .loading-head")).to_have_text("Loading head 1…")
    assert live.inner_text() == ""  # the menu said it: nothing is announced, and nothing stale is left
    routed(page, held, 1)
    for route in held:
        route.continue_()
    expect(page.locator(".stage h2")).to_contain_text("· head 1 ·")
    expect(live).to_contain_text("Head 1, query")


@needs("minilm")
def test_a_head_picked_by_its_thumbnail_is_announced_once(page, server_url):
    """Drawn at once (loading), then again when its arrays come: the same words, said once."""
    heads_fetched(page)
    trace_model(page, server_url, "minilm", "The cat sat on the mat because it was warm.", 2)
    held = []
    page.route("**/api/model-head", lambda route: held.append(route))
    live = page.locator(".mha-explorer .sr-only[aria-live]")
    page.evaluate("""() => {
      window.liveWrites = [];
      const live = document.querySelector('.mha-explorer .sr-only[aria-live]');
      new MutationObserver(() => window.liveWrites.push(live.textContent)).observe(live, { childList: true, characterData: true, subtree: true });
    }""")
    page.locator('.thumb-button[data-head="3"]').click()
    expect(page.locator(".stage .loading-head")).to_have_text("Loading head 3…")
    expect(live).to_contain_text("Head 3, query")
    routed(page, held, 1)
    for route in held:
        route.continue_()
    expect(page.locator(".stage h2")).to_contain_text("· head 3 ·")
    page.wait_for_timeout(200)
    assert [text for text in page.evaluate("() => window.liveWrites") if text] == [live.inner_text()]


@needs("smollm2")
def test_the_query_rows_label_leaves_its_neighbours_labels_in_sight(page, server_url):
    """Rows a label apart (12 px): the query's dark label covers its own row's band only, so the
    rows above and below keep theirs (it used to hide "head 0" and "head 2" around head 1)."""
    text = "The quick brown fox jumps over the lazy dog because it was warm."
    page.goto(server_url + f"#mode=model&model=smollm2&layer=3&text={text}&stage=concat&head=1&query=6")
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)
    expect(page.locator(".stage h2")).to_contain_text("Concatenation")
    figure = page.locator(".stage .heatmap-box").first
    expect(figure.locator(".heatmap-mark-label")).to_have_text("head 1")  # the concat map marks the inspected head's row
    box = figure.evaluate("""(box) => {
        const canvas = box.querySelector("canvas.heatmap"), label = box.querySelector(".heatmap-mark-label");
        const c = canvas.getBoundingClientRect(), l = label.getBoundingClientRect();
        return { top: l.top - c.top, bottom: l.bottom - c.top, height: c.height };
    }""")
    row = box["height"] / 9  # nine heads, one row each
    assert row == 12
    assert box["top"] >= 1 * row - 1 and box["bottom"] <= 2 * row + 1, box  # within head 1's band


@needs("minilm")
def test_a_larger_default_font_enlarges_the_maps_labels_and_rows(page, server_url):
    """The maps' labels are drawn in pixels, which a reader's default font (24 px for 16) leaves
    alone: the text around them grew, and they did not. They grow with it now, and their rows too."""
    text = "The quick brown fox jumps over the lazy dog because it was warm."

    def concat_map():
        page.goto(server_url + f"#mode=model&model=minilm&layer=3&text={text}&stage=concat&head=1&query=6")
        page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)
        figure = page.locator(".stage .heatmap-box").first
        expect(figure.locator(".heatmap-mark-label")).to_have_text("head 1")
        return figure.evaluate("""(box) => ({
            font: parseFloat(box.querySelector(".heatmap-mark-label").style.fontSize),
            row: box.querySelector("canvas.heatmap").getBoundingClientRect().height / 12,
        })""")

    assert concat_map() == {"font": 12, "row": 17}  # twelve heads, a row each
    cdp = page.context.new_cdp_session(page)
    cdp.send("Page.enable")
    cdp.send("Page.setFontSizes", {"fontSizes": {"standard": 24, "fixed": 21}})  # the browser's font setting
    page.reload()
    assert page.evaluate("() => getComputedStyle(document.documentElement).fontSize") == "24px"
    assert concat_map() == {"font": 16, "row": 18}


@needs("minilm")
def test_trace_again_on_the_same_text_keeps_the_query_and_head(page, server_url):
    text = "The cat sat on the mat because it was warm."
    trace_model(page, server_url, "minilm", text, 1)
    page.locator(".thumb-button", has_text="Head 4").click()
    page.get_by_label("Query token").select_option(label="cat")
    expect(page.locator(".stage h2")).to_contain_text("head 4 · query “cat”")
    page.get_by_label("Layer (from 0)").select_option("2")  # traces layer 2 at once, keeping both
    expect(page.locator(".overview h2")).to_contain_text("layer 2")
    expect(page.locator(".stage h2")).to_contain_text("head 4 · query “cat”")
    trace = page.get_by_role("button", name="Trace")
    expect(trace).not_to_have_attribute("aria-disabled", "true")
    with page.expect_response(lambda r: r.url.endswith("api/model-trace")):
        trace.click()  # nothing changed at all: traced again, the same view
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)))")
    expect(page.locator(".stage h2")).to_contain_text("head 4 · query “cat”")
    # another text: the query is that text's middle word again
    page.get_by_label("Text", exact=True).fill("Dogs bark at night when the moon is full.")
    page.get_by_role("button", name="Trace").click()
    expect(page.locator(".token-strip")).to_contain_text("moon")
    assert "query “cat”" not in page.locator(".stage h2").inner_text()


@needs("smollm2")
def test_an_invisible_token_is_named_by_its_code_in_the_strip_as_in_the_menu(page, server_url):
    page.goto(server_url + "#mode=model&model=smollm2&layer=0&text=a%07b")
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)
    expect(page.locator(".token-strip .token")).to_have_text(["a", "U+0007", "b"])
    assert page.get_by_label("Query token").locator("option").all_inner_texts() == ["a", "U+0007", "b"]


@needs("minilm")
def test_the_head_thumbnails_frame_the_querys_row(page, server_url, artifacts):
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 20)  # 182 tokens: rows of two tokens' averages
    trace_model(page, server_url, "minilm", text, 1)
    frames = page.locator(".thumb-query")
    expect(frames).to_have_count(12)

    def where():  # each frame's top and height against its thumbnail, and a row's height
        return page.evaluate("""() => [...document.querySelectorAll('.thumb-map')].map((map) => {
            const c = map.querySelector('canvas').getBoundingClientRect(), f = map.querySelector('.thumb-query').getBoundingClientRect();
            return [f.top - c.top, f.height, c.height / map.querySelector('canvas').height];
        })""")

    block = page.evaluate("() => window.mhaExplorer.model.get('payload').model.overview_block")
    for query in (0, 101, 181):
        page.get_by_label("Query token").select_option(str(query))
        expect(page.get_by_label("Query token")).to_have_value(str(query))
        page.wait_for_function(  # the frames move once the page is idle, after the view asked for is painted
            """([query, block]) => { const map = document.querySelector('.thumb-map'), c = map.querySelector('canvas');
                const row = c.getBoundingClientRect().height / c.height;
                return Math.abs(map.querySelector('.thumb-query').getBoundingClientRect().top - c.getBoundingClientRect().top - (Math.floor(query / block) * row - 1)) < 0.05; }""",
            arg=[query, block],
        )
        for top, height, row in where():
            assert abs(top - ((query // block) * row - 1)) < 0.05 and abs(height - (row + 2)) < 0.05, (query, top, height, row)  # layout rounds to 1/64 px
    page.locator(".thumbs").screenshot(path=str(artifacts / "model-thumbnails-query.png"))


@needs("gemma3")
@needs("minilm")
def test_a_large_model_loaded_since_the_list_was_read_is_taken_at_once(page, server_url):
    """The menu's states are read when the mode opens. Gemma 3 loaded since (by another page) said
    "press Trace to load it (some seconds)": the page asks again when it is picked."""
    httpx.post(server_url + "api/models/gemma3/load", timeout=60)  # (the tests' server: a test before may have loaded it)
    for _ in range(600):
        if httpx.get(server_url + "api/models/gemma3", timeout=60).json()["state"] != "loading":
            break
        page.wait_for_timeout(500)
    assert httpx.get(server_url + "api/models/gemma3", timeout=60).json()["state"] == "ready"

    def as_before_it_loaded(route):  # the list as a page opened before the load read it
        listed = route.fetch().json()
        for model in listed:
            if model["name"] == "gemma3":
                model["state"] = "idle"
        route.fulfill(json=listed)

    page.route("**/api/models", as_before_it_loaded)
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 0)
    page.get_by_label("Model", exact=True).select_option("gemma3")
    # traced at once, as any model ready, with no Trace pressed
    page.wait_for_function("() => window.mhaExplorer.model.get('payload').model?.name === 'gemma3'", timeout=60_000)
    assert "press Trace" not in page.locator(".model-status").inner_text()


@needs("gemma3")
def test_a_thumbnail_greys_a_block_mostly_outside_the_window(page, server_url):
    """Gemma 3's local layer on 601 tokens, its thumbnail of blocks of 10: a block astride the
    window's edge averaged its masked pairs' zeros and was drawn white, so the window's edge read as
    a white line of little attention. A block mostly masked is grey; one mostly seen is not."""
    page.goto(server_url + "#mode=model&model=gemma3&layer=0&head=0&text=" + quote_plus("word " * 600))
    page.wait_for_function("() => window.mhaExplorer?.model.get('payload').model?.name === 'gemma3'", timeout=120_000)
    n, block, window = page.evaluate("() => { const p = window.mhaExplorer.model.get('payload'); return [p.tokens.length, p.model.overview_block, p.config.sliding_window]; }")
    assert n > window + 2 * block  # (the window cuts some keys off)
    cells = -(-n // block)
    hidden = np.zeros((cells, cells))  # the share of each block's pairs the mask keeps apart (causal, and the window)
    q, k = np.arange(n)[:, None], np.arange(n)[None, :]
    off = (k > q) | (k <= q - window)
    for r in range(cells):
        for c in range(cells):
            hidden[r, c] = off[r * block : (r + 1) * block, c * block : (c + 1) * block].mean()
    astride = [(r, c) for r in range(cells) for c in range(cells) if 0.5 < hidden[r, c] < 1 and c < r]  # at the window's edge
    seen = [(r, c) for r in range(cells) for c in range(cells) if 0 < hidden[r, c] < 0.5 and c < r]
    assert astride and seen
    pixels = page.evaluate("""(cells) => { const canvas = document.querySelector('.thumb-button[data-head="0"] canvas');
        const data = canvas.getContext('2d').getImageData(0, 0, cells.n, cells.n).data;
        return cells.at.map(([r, c]) => [...data.slice(4 * (r * cells.n + c), 4 * (r * cells.n + c) + 3)]); }""", {"n": cells, "at": astride + seen})
    grey = [228, 230, 234]
    assert all(p == grey for p in pixels[: len(astride)]), pixels[: len(astride)]
    assert all(p != grey for p in pixels[len(astride) :])
    assert "grey is masked (most of a block)" in page.locator(".overview p.hint").first.inner_text()


@needs("gemma3")
def test_at_911_px_trace_stays_on_the_row_beside_gemmas_wide_layer_menu(page, server_url):
    """Gemma 3's layers are named with their window ("Layer 17 · local (window 512)"), which makes
    its layer menu wide: the text box gives way, and Trace stays on the row, not alone under it."""
    page.set_viewport_size({"width": 911, "height": 700})
    page.goto(server_url + "#mode=model")
    page.wait_for_function("() => document.querySelector('.model-status')?.textContent.includes('is loaded')", timeout=120_000)
    page.get_by_label("Model", exact=True).select_option("gemma3")  # its outline, or its config if another test loaded it
    expect(page.get_by_label("Layer (from 0)").locator("option")).to_have_count(18)
    expect(page.locator(".model-status")).to_contain_text("Gemma 3 270M")
    menu = page.get_by_label("Layer (from 0)").bounding_box()
    go = page.get_by_role("button", name="Trace").bounding_box()
    assert go["y"] < menu["y"] + menu["height"] and go["x"] > menu["x"] + menu["width"], (menu, go)


@needs("minilm")
def test_a_model_links_bad_part_is_left_out_and_its_text_traced(page, server_url):
    """head=-1 (or layer=two) threw the whole link away for the teaching example, and the text with
    it: the Real model panel then held its default sentence. A model named in capitals, as the
    terminal takes it, was "not a model name"."""
    page.goto(server_url + "#mode=model&model=MiniLM&layer=two&text=my+precious+sentence&head=-1&stage=weights")
    page.wait_for_function("() => document.querySelector('.overview')?.hidden === false", timeout=120_000)
    expect(page.locator("#notice")).to_have_text(
        "This link could not be used in full: head=“-1” is negative: it must be 0 or more (0 is used); layer=“two” is not a whole number (0 is used)."
    )
    assert page.get_by_label("Text", exact=True).input_value() == "my precious sentence"
    expect(page.locator(".overview h2")).to_contain_text("all-MiniLM-L6-v2 · layer 0")
    expect(page.locator(".stage h2")).to_contain_text("Weights · head 0")
    page.wait_for_function("() => location.hash.includes('model=minilm')")


@needs("smollm2")
def test_a_real_models_scores_say_where_the_rounded_numbers_divided_by_hand_miss_the_shown_score(page, server_url):
    """Each listed q · k as shown, divided by the divisor as shown, and rounded half up as a person
    rounds: where that misses the scaled score shown (65.00 ÷ 8 = 8.125, shown 8.12, the full q · k
    being 64.99…), a note under the table says so, as in the teaching example and the terminal."""
    page.goto(server_url + "#mode=model&model=smollm2&layer=3&text=The+cat+sat+on+the+mat.&stage=scores&head=2&query=1")
    expect(page.locator(".stage table.calc-table tbody tr")).to_have_count(7, timeout=120_000)
    misses = []
    for row in page.locator(".stage table.calc-table tbody tr").all():
        key = row.locator("th").inner_text().removesuffix(" · masked next")
        _, _, dot, divisor, scaled = row.locator("th, td").all_inner_texts()
        by_hand = (Decimal(dot) / Decimal(divisor.removeprefix("÷ "))).quantize(Decimal("0.01"), ROUND_HALF_UP)
        if f"{by_hand:.2f}" != scaled:
            misses.append(f"the scaled score of “{key}” comes to {by_hand:.2f} (shown: {scaled})")
    assert misses, "this head and query were picked for a score that rounds otherwise by hand"
    expect(page.locator(".stage p.hint").last).to_have_text(
        "Every number here is rounded to two decimals, and each result is worked out from the full numbers. Worked from the rounded numbers instead, "
        + "; ".join(misses) + ". Point at a number, or tap it, to see it in full."
    )


@needs("minilm")
def test_the_querys_row_of_x_takes_the_colours_of_xs_map_under_it(page, server_url):
    """x of the query, drawn above the map of X, is one of X's rows: on a scale of its own (its
    largest |value|, where X's map is clipped at its 99th percentile) the same numbers had other
    colours. Both legends give X's scale, worked out here from the trace."""
    text = "The quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat."
    page.goto(server_url + f"#mode=model&model=minilm&layer=2&text={quote_plus(text)}&stage=projections&head=0&query=3")
    expect(page.locator(".stage figure.heatmap-figure figcaption", has_text=re.compile("^X$"))).to_be_visible(timeout=120_000)
    x = to_numpy(api_trace(server_url, model="minilm", text=text, layer=2, head=0).stages["x"]).astype(np.float64)
    peak, p99 = np.abs(x).max(), np.quantile(np.abs(x), 0.99)
    assert p99 * 4 < peak  # a few far larger than the rest: X's map is clipped
    legend = lambda caption: " ".join(page.locator(".stage figure.heatmap-figure", has=page.locator("figcaption", has_text=re.compile(caption))).locator(".heatmap-legend").inner_text().split())  # noqa: E731
    row, whole = legend("^xbrown$"), legend("^X$")
    scale = re.match(r"Colours: −(\S+) · 0 · \+(\S+); beyond", whole)
    assert scale and scale[1] == scale[2] and abs(float(scale[1]) - p99) <= 0.01 * p99 + 0.01, (whole, p99)
    assert row.startswith(f"Colours: −{scale[1]} · 0 · +{scale[1]}; beyond ±{scale[1]}"), (row, whole)


@needs("minilm")
def test_the_head_outputs_follow_a_head_picked_from_outside_them_and_the_last_pick_wins(page, server_url):
    """A head picked from outside the head outputs (a thumbnail, a menu, a notebook) has its stage
    in the frame that answers and the outputs' list a frame later; a head picked in the list itself
    places the list at once. Two picks in one frame, one of each: the list shows the last, never
    the earlier pick's, placed after it."""
    trace_model(page, server_url, "minilm", "The cat sat on the mat.", 1)
    page.wait_for_function("() => window.mhaExplorer.workedHeads.length === 11")
    shown = page.evaluate("""async () => {
      const frames = (k) => new Promise((done) => { const step = () => (k-- ? requestAnimationFrame(step) : done()); step(); });
      const inspected = () => document.querySelector('.outputs .inspected').dataset.head;
      window.mhaExplorer.model.set('head', 3);  // from outside the list: placed later
      await null; await null;
      const before = [document.querySelector('.stage h2').textContent.includes('head 3'), inspected()];
      const pick = document.querySelector('.outputs button[data-pick-head="7"]');
      pick.focus();
      pick.click();  // in the list: placed at once
      await null; await null;
      const picked = inspected();
      await frames(4);
      return [...before, picked, inspected()];
    }""")
    assert shown == [True, "0", "7", "7"], shown
    # from outside the list alone: the list follows
    page.locator('.thumb-button[data-head="5"]').click()
    expect(page.locator(".outputs .inspected")).to_have_attribute("data-head", "5")
    expect(page.locator(".stage h2")).to_contain_text("· head 5 ·")
