"""Checking the numbers a page shows against a trace: every `.num` says which array and index it
shows. And a page of a static copy, opened from its files with nothing else to load."""

from __future__ import annotations

import numpy as np

from mha_explorer.walkthrough import fmt


def factor(x: float) -> str:
    """A factor of a product as written by hand: a negative one in brackets, "0.50×(-1.25)"."""
    shown = fmt(x)
    return f"({shown})" if shown.startswith("-") else shown


def times_ten(v: float) -> str:
    """Three significant digits times a power of ten, as by hand: 4.44×10⁴, 1.35×10⁻¹."""
    mantissa, exponent = f"{v:.2e}".split("e")
    return mantissa + "×10" + str(int(exponent)).translate(str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))


# a sign right after a × or a + (a negative factor without its brackets)
BARE_SIGN = r"[×+] ?-"

# data-src="name:i,j,k" on every number
# numbers taken from the trace (data-src names where); a few the page works out itself (e^s of the
# softmax) have no source and are checked where they are shown
# Two frames and a moment: a stage picked with Previous, Next or the menu is brought into view by
# an observer's first report, a frame after it is drawn; a test that scrolls the page itself waits
# for it first (a person cannot scroll within that frame; a test on a busy machine can).
SETTLED = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 50))))"

NUMBERS = """(selector) => Array.from(document.querySelectorAll(selector + ' .num[data-src]'))
    .map(e => [e.dataset.src, e.textContent, e.dataset.full])"""


def page_text(value: float) -> str:
    return "−∞" if value == -np.inf else fmt(value)


# A real model's head worked out on the page holds its own numbers until the server's are copied
# in, a moment after it is shown (web/heads.js): the numbers checked are those that stay.
REFINED = "() => !window.mhaExplorer?.model.get('payload').worked"


def check_numbers(page, selector: str, arrays: dict[str, np.ndarray]) -> set[str]:
    """Every number under selector equals the trace: rounded in its text, exact in data-full.
    Returns the sources shown. A NaN in `arrays` marks a slice the payload does not hold."""
    page.wait_for_function(REFINED)
    shown = page.evaluate(NUMBERS, selector)
    assert shown, f"no numbers under {selector}"
    for src, text, full in shown:
        name, index = src.split(":")
        value = arrays[name][tuple(int(i) for i in index.split(","))]
        assert not np.isnan(value), f"{src} is shown but the payload does not hold it"
        assert text == page_text(value), f"{src} shows {text}, the trace has {value}"
        # a number float32 holds exactly (a real model's) is given with the digits float32 has (at
        # most 9): it is read back as float32, as the page wrote it
        held = abs(value) <= np.finfo(np.float32).max and np.float32(value) == value  # past float32's range: a float64 of the lab
        exact = float(np.float32(full)) if held else float(full)
        assert exact == value, f"{src} carries {full} at full precision, the trace has {value}"
    return {src for src, _, _ in shown}


def file_page(browser):
    """(context, page, requests, errors): a page that may load file: and data: URLs only (every
    other request is refused), with every request and every console error or warning recorded."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    errors: list[str] = []

    def only_files(route):
        requests.append(route.request.url)
        route.continue_() if route.request.url.startswith(("file:", "data:")) else route.abort()

    context.route("**/*", only_files)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return context, page, requests, errors


def routed(page, held: list, count: int) -> None:
    """Wait (5 s at most) until `count` requests have reached the route handler that holds them:
    they reach it while the page waits."""
    for _ in range(100):
        if len(held) >= count:
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"{len(held)} requests held, not {count}: {[route.request.url for route in held]}")


def open_link(page, url: str) -> None:
    """Opens a link in a new document. A link that differs from the open one in its fragment alone
    is a step within the document, which the page answers with a reload a moment later (it listens
    for hashchange): a check made in between would read the old document, or be cut off by the
    reload ("execution context was destroyed")."""
    page.goto("about:blank")
    page.goto(url)


def through_history(page, step) -> None:
    """Back or Forward (`step`: page.go_back or page.go_forward) between two of the page's links.
    It is a step within the document, which the page answers with a reload a moment later
    (hashchange): returns once the reloaded document has loaded, so that what follows reaches it.
    A wait for a selector alone could be met by the old document, and a click on it lost in the
    reload."""
    with page.expect_event("load", timeout=120_000):
        step()
