"""The widget in a real front end: JupyterLab on loopback, the walkthrough run in Debian's Chromium.

Every request that is not for 127.0.0.1 or localhost is refused, by Playwright's router and by
Chromium's host resolver, so the widget must work from what the Python packages ship.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.notebook

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
START_TIMEOUT = 60  # s for JupyterLab to answer
STEP = 30_000  # ms for one thing to appear in the page
RUN_ALL = 120_000  # ms for the kernel to start and run every cell
DONE = re.compile(r"^\s*\[\d+\]:\s*$")  # an input prompt once its cell has run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture(scope="module")
def lab(tmp_path_factory, walkthrough):
    """JupyterLab serving a copy of the walkthrough, with its own config, data and runtime dirs."""
    home = tmp_path_factory.mktemp("jupyter")
    root = home / "notebooks"
    root.mkdir()
    shutil.copy(walkthrough, root)
    # every cell stays in the page (no virtual scrolling), the notebook's kernel starts without
    # asking, and no news prompt covers the notebook
    write_json(
        home / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
        {"windowingMode": "none", "autoStartDefaultKernel": True},
    )
    write_json(home / "config" / "labconfig" / "page_config.json", {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    env = os.environ | {
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "IPYTHONDIR": str(home / "ipython"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # the kernel is this venv's
    }
    port, token = free_port(), secrets.token_hex(16)
    log = (home / "lab.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            "--LabApp.extension_manager=readonly",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {server.returncode}:\n{(home / 'lab.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not answer in {START_TIMEOUT} s:\n{(home / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.25)
        yield {"url": f"{base}/lab/tree/{walkthrough.name}?token={token}", "base": base, "token": token}
    finally:
        stop(server, base, token)
        log.close()


def stop(server: subprocess.Popen, base: str, token: str) -> None:
    """Ask the server to shut down (it stops its kernels), then make sure it has."""
    if server.poll() is None:
        try:
            urllib.request.urlopen(urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST"), timeout=5)
        except OSError:
            pass
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def wait_for_idle_kernel(lab, timeout: float = RUN_ALL / 1000) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{lab['base']}/api/sessions?token={lab['token']}", timeout=5) as answer:
            sessions = json.load(answer)
        # JupyterLab may give a notebook's session a generated path: its name is the file's
        notebook = [s for s in sessions if s["path"].endswith(".ipynb") or s.get("name", "").endswith(".ipynb")]
        if any(s["kernel"]["execution_state"] == "idle" for s in notebook):
            return
        time.sleep(0.25)
    raise AssertionError(f"no idle kernel for the notebook after {timeout} s: {sessions}")


@pytest.fixture(scope="module")
def browser(launch_chromium):
    # websockets do not pass through Playwright's router: no name but loopback resolves at all
    b = launch_chromium("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost")
    yield b
    b.close()


@pytest.fixture
def page(browser, offline_context):
    context = browser.new_context(viewport={"width": 1400, "height": 2100})
    context.set_default_timeout(STEP)
    blocked: list[str] = []
    offline_context(context, blocked)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    pg.on("console", lambda m: errors.append(f"console error: {m.text}") if m.type == "error" else None)
    pg.blocked, pg.errors = blocked, errors
    yield pg
    context.close()


# ---- reading the notebook -----------------------------------------------------------------------


def cell(page, snippet: str):
    """The code cell whose source contains snippet."""
    found = page.locator(".jp-CodeCell").filter(has=page.locator(".jp-InputArea", has_text=snippet))
    expect(found).to_have_count(1, timeout=STEP)
    return found


def widget(page, snippet: str):
    """The explorer in the output of the cell whose source contains snippet."""
    view = cell(page, snippet).locator(".jp-OutputArea .mha-explorer")
    expect(view).to_have_count(1, timeout=STEP)
    return view


def expect_view(view, stage: str, head: int, query: int, title: str | None = None) -> None:
    """The view's controls show this state, and its stage panel this title."""
    expect(view.get_by_label("Calculation stage")).to_have_value(stage, timeout=STEP)
    expect(view.get_by_label("Inspect head")).to_have_value(str(head), timeout=STEP)
    expect(view.get_by_label("Query token")).to_have_value(str(query), timeout=STEP)
    expect(view.locator(".steps button[aria-current='step']")).to_have_attribute("data-go-stage", stage, timeout=STEP)
    if title is not None:
        expect(view.locator(".stage h2")).to_have_text(title, timeout=STEP)


def run_cell(page, snippet: str) -> None:
    """Run one cell again, as a person would: click into it, Ctrl+Enter, wait until it is done."""
    prompt = cell(page, snippet).locator(".jp-InputPrompt")
    before = prompt.inner_text().strip()
    cell(page, snippet).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(prompt).not_to_have_text(before, timeout=RUN_ALL)
    expect(prompt).to_have_text(DONE, timeout=RUN_ALL)


TEACHING = "w = Explorer()"
TEACHING_AGAIN = 'w.stage = "weights"'
STATE = "w.stage, w.head, w.query, w.query_token"
GQA = "gqa = Explorer.from_config"
REAL = "Explorer.from_model"


@pytest.mark.timeout(240)
def test_the_walkthrough_in_jupyterlab(lab, page, minilm_available):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        walk_through(lab, page, minilm_available)
    except Exception:
        page.screenshot(path=ARTIFACTS / "notebook-failure.png")
        raise


def walk_through(lab, page, minilm_available) -> None:
    # The kernel indicator says "idle" before a kernel exists: wait for the page's kernel websocket
    # and for the server's session to be idle, then for the indicator to agree.
    with page.expect_websocket(lambda ws: "/api/kernels/" in ws.url, timeout=RUN_ALL):
        page.goto(lab["url"])
    wait_for_idle_kernel(lab)
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=RUN_ALL)

    # Run > Run All Cells, then wait until every code cell has its execution count
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
    page.wait_for_function(
        """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
                   return p.length > 0 && p.every(t => /^\\[\\d+\\]:$/.test(t)); }""",
        timeout=RUN_ALL,
    )
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert page.locator(".jp-OutputArea-output .jp-RenderedText[data-mime-type='application/vnd.jupyter.error']").count() == 0
    assert errors.count() == 0, errors.all_inner_texts()

    # 1. the widget renders: three explorers (four with the real model), styled by the shipped CSS
    teaching, again, gqa = widget(page, TEACHING), widget(page, TEACHING_AGAIN), widget(page, GQA)
    expect(page.locator(".mha-explorer")).to_have_count(4 if minilm_available else 3)
    for view in (teaching, again, gqa):
        expect(view.locator(".stage h2")).to_be_visible()
        assert view.locator(".controls").evaluate("e => getComputedStyle(e).borderTopLeftRadius") == "10px"
    # the traits set in Python reached both views of w; the second widget kept its own
    expect_view(teaching, "weights", 1, 3, "3. Weights · head 1 · query “milk”")
    expect_view(again, "weights", 1, 3, "3. Weights · head 1 · query “milk”")
    expect_view(gqa, "mask", 0, 1, "3. Mask · head 0 · query “cat”")
    teaching.screenshot(path=ARTIFACTS / "notebook-teaching.png")
    gqa.screenshot(path=ARTIFACTS / "notebook-gqa.png")
    if minilm_available:
        real = widget(page, REAL)
        # the cell after it moved the view to layer 5 from Python: the same stage, head and query
        expect(real.locator(".overview h2")).to_contain_text("layer 5 (layers 0–5)")
        expect_view(real, "weights", 0, 4, "3. Weights · head 0 · query “milk”")
        # its payload holds one head: picking another asks Python for that head's arrays
        real.get_by_label("Inspect head").select_option(label="Head 3")
        expect_view(real, "weights", 3, 4, "3. Weights · head 3 · query “milk”")
        # the numbers are head 3's (the walkthrough's cells: minilm, "cats like warm milk", layer 5)
        from mha_explorer.models import load_model

        core, _ = load_model("minilm").trace("cats like warm milk", 5)
        shown = real.locator('.stage .num[data-src^="weights:3,"]').evaluate_all("(nums) => nums.map((e) => [e.dataset.src, e.dataset.full])")
        assert shown
        for src, full in shown:
            index = tuple(int(i) for i in src.split(":")[1].split(","))
            assert np.float32(full) == core["weights"][index], src  # float32, with the digits float32 has
        real.screenshot(path=ARTIFACTS / "notebook-minilm.png")
        # Reset view goes back to its own first view, not an example, at the layer Python set
        real.get_by_label("Calculation stage").select_option("scores")
        real.get_by_role("button", name="Reset view").click()
        expect(real.get_by_label("Calculation stage")).to_have_value("projections", timeout=STEP)
        expect(real.get_by_label("Inspect head")).to_have_value("0", timeout=STEP)
        expect(real.locator(".overview h2")).to_contain_text("layer 5 (layers 0–5)")

    # 2. Next changes the stage: in both views of w, and only there
    teaching.get_by_role("button", name="Next").click()
    expect_view(teaching, "mixing", 1, 3, "4. Value mixing · head 1 · query “milk”")
    expect_view(again, "mixing", 1, 3)
    expect_view(gqa, "mask", 0, 1)
    # ... and the click came back to Python
    run_cell(page, STATE)
    expect(cell(page, STATE).locator(".jp-OutputArea-output")).to_have_text("('mixing', 1, 3, 'milk')")

    # the second widget moves on its own; w stays where it is
    gqa.get_by_role("button", name="Next").click()
    gqa.get_by_label("Query token").select_option(label="sat")
    expect_view(gqa, "weights", 0, 2, "4. Weights · head 0 · query “sat”")
    expect_view(teaching, "mixing", 1, 3)

    # 3. a trait set from Python changes a view that is already on screen ...
    run_cell(page, TEACHING_AGAIN)
    expect_view(teaching, "weights", 1, 3, "3. Weights · head 1 · query “milk”")
    expect_view(widget(page, TEACHING_AGAIN), "weights", 1, 3)
    # 4. ... and not the other widget, whose Reset brings back the view its own cell made
    expect_view(gqa, "weights", 0, 2, "4. Weights · head 0 · query “sat”")
    gqa.get_by_label("Calculation stage").select_option("output")  # the last stage: in a notebook, other configurations come from Python
    expect(gqa.locator(".stage .next-steps")).to_contain_text("or try another configuration (heads, widths, a causal mask) with Explorer.from_config.")
    gqa.get_by_role("button", name="Reset example").click()
    expect_view(gqa, "mask", 0, 1, "3. Mask · head 0 · query “cat”")  # the view its cell made: stage="mask", query="cat"
    expect_view(teaching, "weights", 1, 3)

    # 5. the keys that move inside the view stay inside it: at a table's edge and on a menu,
    # ArrowDown moves neither JupyterLab's active cell nor the focus out of the widget
    active = "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].findIndex((c) => c.classList.contains('jp-mod-active'))"
    last = teaching.locator(".stage .bars .num").last
    last.focus()
    before = page.evaluate(active)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate(active) == before
    assert last.evaluate("(e) => e === document.activeElement")
    teaching.get_by_label("Calculation stage").focus()
    page.keyboard.press("ArrowDown")  # the menu's own work: the next stage
    expect_view(teaching, "mixing", 1, 3)
    assert page.evaluate(active) == before
    teaching.get_by_role("button", name="Previous").click()
    expect_view(teaching, "weights", 1, 3)
    # so do letters: "m" typed to find "milk" in a menu, "d d" on a number, are not the notebook's
    # commands (make the cell Markdown, delete it), which would take the widget away
    cells = "() => [document.querySelectorAll('.jp-Notebook .jp-CodeCell').length, document.querySelectorAll('.jp-Notebook .jp-MarkdownCell').length]"
    counted = page.evaluate(cells)
    teaching.get_by_label("Query token").focus()
    page.keyboard.press("w")  # type-ahead: "warm"
    expect_view(teaching, "weights", 1, 2)
    page.wait_for_timeout(1100)  # a new word for the type-ahead, not "wm"
    page.keyboard.press("m")
    expect_view(teaching, "weights", 1, 3)
    last.focus()
    page.keyboard.press("d")
    page.keyboard.press("d")
    page.keyboard.press("a")
    assert page.evaluate(cells) == counted and page.evaluate(active) == before
    expect(widget(page, TEACHING).locator(".stage h2")).to_be_visible()

    # ids stay unique with several explorers in one document (labels point into their own widget)
    duplicates = page.evaluate(
        """() => { const ids = [...document.querySelectorAll('.mha-explorer [id]')].map(e => e.id);
                   return ids.filter((id, i) => ids.indexOf(id) !== i); }"""
    )
    assert duplicates == []
    page.screenshot(path=ARTIFACTS / "notebook-jupyterlab.png")

    assert page.blocked == [], f"the notebook asked for something outside localhost: {page.blocked}"
    assert page.errors == [], f"the page logged errors: {page.errors}"
