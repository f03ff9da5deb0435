"""Every lecture in a real JupyterLab 4, driven by headless Chromium through Playwright.

One JupyterLab server (from this Python environment, token disabled, a free loopback port, serving a
*copy* of notebooks/ so autosave never touches the repository; its kernels read the released traces
when this machine has them, else the stand-ins, never downloading) and one browser serve all lectures,
opened one after another. For each lecture: wait until the kernel is connected and idle (running
earlier races the kernel start and can hang), Run All Cells, wait until every cell has run, assert
no cell shows an error, save it and make on the saved outputs the checks tests/test_notebooks.py makes
(:func:`notebook_checks.output_problems`: this run is then the lecture's only execution of the
session), then move one control of each dashboard and assert its figure (the PNG in
its Output widget) or its readout changed, and that no character renders as an empty box ("tofu":
the glossary's 中文, the ✅/❌ of every check — drawn on a canvas in its element's font and compared with
the drawing of a code point no font has). A screenshot per lecture goes to build/screenshots/.

Needs Debian's chromium at /usr/bin/chromium (``.ci/run`` installs it; override the path with
``MOONCAKE_LAB_CHROMIUM``) and the ``playwright`` package (test extra); skips, saying which is
missing, otherwise. Fonts with the CJK and emoji glyphs: on Debian ``FONT_PACKAGES`` (``.ci/run``
installs them). Run only this test with ``pytest -m browser``.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import _real_trace_dir
from notebook_checks import CHROMIUM, browser_missing, copy_committed, output_problems

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
LECTURES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted((ROOT / "notebooks").glob("lab_*.ipynb"))
SCREENSHOTS = ROOT / "build" / "screenshots"
# Flags for a sandboxed, offline machine: without the background-networking ones Chromium keeps
# trying (and failing) to reach Google's services.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: Hang guards, not speed targets.
SERVER_START_S = 60
KERNEL_IDLE_S = 90
RUN_ALL_S = 240
REDRAW_S = 30
MAX_CONTROLS = 3
#: Debian packages with the glyphs the course shows beyond Latin (README, .ci/run): 中文 and ✅/❌.
FONT_PACKAGES = "fonts-wqy-microhei (or fonts-noto-cjk) and fonts-noto-color-emoji"

# Lab settings for a deterministic page: every cell attached to the DOM (no virtual scrolling, so
# every prompt and output can be inspected), the notebook's kernel started without a "Select Kernel"
# dialog, no autosave, no news/update pop-ups.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none",
                                                                    "autoStartDefaultKernel": True},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(url: str, method: str = "GET", body: dict | None = None, timeout: float = 10.0):
    """A call to the Jupyter server's REST API (no token, XSRF check off: a loopback test server)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"null")


def _start_session(lab_url: str, name: str) -> str:
    """Start the notebook's session (and kernel) from the server side; returns the kernel id.

    JupyterLab then attaches to this session when the notebook opens, instead of starting a kernel
    itself while the page loads (seen here on the first notebook: a "Select Kernel" dialog, or a
    second kernel replacing the first, and Run All going nowhere)."""
    session = _api(f"{lab_url}/api/sessions", "POST",
                   {"path": name, "type": "notebook", "name": name, "kernel": {"name": "python3"}})
    return session["kernel"]["id"]


lab_root: dict[str, Path] = {}  # server URL -> the folder it serves (a copy of notebooks/)


@pytest.fixture(scope="module")
def lab_url(tmp_path_factory):
    """Base URL of a JupyterLab server on a copy of notebooks/ (stopped after the module)."""
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "notebooks"
    copy_committed(ROOT / "notebooks", root)   # as git holds them: a student's own saved copy does not count
    settings = tmp / "settings"
    for name, value in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    port = _free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
           "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}",
           f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp / 'workspaces'}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")  # Jupyter refuses root without it (containers, CI)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp / "config")}
    real = _real_trace_dir()   # the lectures on the released traces when here (as in tests/test_notebooks.py)
    if real is not None:
        env["MOONCAKE_LAB_DATA"] = str(real)
    log = open(tmp / "jupyterlab.log", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{(tmp / 'jupyterlab.log').read_text()[-3000:]}")
        try:
            _api(f"{url}/api/status")
            break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"JupyterLab did not answer on {url} within {SERVER_START_S} s")
            time.sleep(0.3)
    lab_root[url] = root
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Debian Chromium with a fresh profile, driven by Playwright."""
    if (missing := browser_missing()) is not None:
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # A persistent context is how Playwright takes a --user-data-dir: a new, empty one here.
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
        yield ctx
        ctx.close()


# --- page helpers (JavaScript run in the page) ---------------------------------------------------
_PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"

_RUN_STATE = """() => {
  const panel = document.querySelector('%s');
  if (!panel) return 'no-panel';
  const bad = [...panel.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    .some(o => o.textContent.includes('Traceback') || o.textContent.includes('Error'));
  if (bad || panel.querySelector('.jp-OutputArea-output.jp-mod-error, [data-mime-type="application/vnd.jupyter.error"]'))
    return 'error';
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim());
  const idle = panel.querySelector('.jp-Notebook-ExecutionIndicator[data-status="idle"]');
  return (prompts.length && prompts.every(p => /\\[\\d+\\]/.test(p)) && idle) ? 'done' : 'running';
}""" % _PANEL

_ERRORS = """() => [...document.querySelectorAll('%s .jp-Cell')].flatMap((cell, i) =>
  [...cell.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    .map(o => o.textContent).filter(t => t.includes('Traceback') || /\\w+Error\\b/.test(t))
    .map(t => `cell ${i}: ${t.slice(0, 600)}`))""" % _PANEL

# A dashboard (mooncake_lab.dashboards.Dashboard.widget) is a VBox holding an HBox of controls,
# a readout HTML and, last, the Output widget with the figure. Tag each for Playwright locators.
_TAG_DASHBOARDS = """() => {
  const boxes = [...document.querySelectorAll('%s .jp-OutputArea-output .widget-vbox')].filter(b => {
    const kids = [...b.children];
    return kids.some(k => k.classList.contains('widget-hbox')) && kids.length >= 2 &&
           kids[kids.length - 1].classList.contains('widget-output');
  });
  boxes.forEach((b, i) => b.setAttribute('data-test-dashboard', String(i)));
  return boxes.length;
}""" % _PANEL

_DASH_STATE = """(box) => {
  const img = box.querySelector(':scope > .widget-output img');
  const kids = [...box.children];
  const readout = kids[kids.length - 2];
  return {img: img ? img.getAttribute('src') : null, readout: readout ? readout.textContent : ''};
}"""


# Characters drawn as the missing-glyph box. Every visible non-ASCII character of the text under the
# root (a selector), drawn on a canvas in its element's font, is compared with the drawing of
# U+10FFFD (private use: no font has it, so it comes out as that font's .notdef box). Returns one line
# per (character, font) that draws the same.
_TOFU = """(root) => {
  // Every visible non-ASCII character on the page, drawn on a canvas in its element's font, compared
  // with the drawing of U+10FFFD (private use: no font has it, so it is the .notdef box in that font).
  const scope = typeof root === 'string' ? document.querySelector(root) : (root || document.body);
  if (!scope) return [];
  const canvas = document.createElement('canvas');
  canvas.width = 48; canvas.height = 48;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const draw = (text, font) => {
    ctx.clearRect(0, 0, 48, 48);
    ctx.font = font; ctx.textBaseline = 'middle'; ctx.fillStyle = '#000';
    ctx.fillText(text, 4, 24);
    return ctx.getImageData(0, 0, 48, 48).data.join(',');
  };
  const seen = new Map();      // "char|font" -> element text sample
  const walker = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || !el.getClientRects().length) continue;           // not rendered
    const cs = getComputedStyle(el);
    const font = `${cs.fontStyle} ${cs.fontWeight} 32px ${cs.fontFamily}`;
    for (const ch of n.textContent) {
      if (ch.codePointAt(0) < 0x80 || !/[\\p{L}\\p{N}\\p{P}\\p{S}\\p{Co}]/u.test(ch)) continue;
      const key = ch + '|' + font;
      if (!seen.has(key)) seen.set(key, n.textContent.trim().slice(0, 40));
    }
  }
  const boxes = new Map();    // font -> drawing of the missing glyph
  const out = [];
  for (const [key, sample] of seen) {
    const i = key.indexOf('|'); const ch = key.slice(0, i), font = key.slice(i + 1);
    if (!boxes.has(font)) boxes.set(font, draw('\\u{10FFFD}', font));
    if (draw(ch, font) === boxes.get(font))
      out.push(`${ch} (U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}) in "${sample}"`);
  }
  return out;
}"""


def _tofu(page, root: str = _PANEL) -> list[str]:
    return page.evaluate(_TOFU, root)


def _wait_kernel_idle(page, lab_url, kernel_id, name):
    """Wait until the page's kernel connection is up and the kernel idle.

    The toolbar indicator alone is not enough: it reads "idle" a second or two before the page
    has even opened its websocket (seen here), and Run All then goes nowhere. So also require the
    server to count a connection to this kernel and to report it idle."""
    indicator = f'{_PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]'
    deadline = time.monotonic() + KERNEL_IDLE_S
    while True:
        k = _api(f"{lab_url}/api/kernels/{kernel_id}")
        if k["connections"] >= 1 and k["execution_state"] == "idle" and page.locator(indicator).count():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: kernel not connected and idle after {KERNEL_IDLE_S} s "
                                 f"(server: {k['execution_state']}, {k['connections']} connection(s))")
        time.sleep(0.25)


def _run_all(page, name):
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    # The indicator may still say idle for a moment after the click: wait for it to leave idle or
    # for the first prompt to turn into [*] or a number before waiting for "done".
    page.wait_for_function(f"""() => {{
      const p = document.querySelector('{_PANEL} .jp-CodeCell .jp-InputPrompt');
      return p && /\\[(\\*|\\d+)\\]/.test(p.textContent);
    }}""", timeout=KERNEL_IDLE_S * 1000)
    page.wait_for_function(f"() => ({_RUN_STATE})() !== 'running'", timeout=RUN_ALL_S * 1000, polling=500)


def _move_control(box, j):
    """Move the ``j``-th control of the dashboard: sliders (one keyboard step on the handle, the way a
    user nudges one) come first, then dropdowns (the next option), then toggle buttons (a click on the
    first one not selected). Returns a description, or None
    when there is no ``j``-th control."""
    handles = box.locator(":scope > .widget-hbox .widget-slider .noUi-handle")
    if j < handles.count():
        handle = handles.nth(j)
        now, hi = handle.get_attribute("aria-valuenow"), handle.get_attribute("aria-valuemax")
        key = "ArrowLeft" if now is not None and hi is not None and float(now) >= float(hi) else "ArrowRight"
        handle.focus()
        handle.press(key)
        label = box.locator(":scope > .widget-hbox .widget-slider").nth(j).locator(".widget-label").text_content()
        return f"slider {label.strip()!r} {key}"
    j -= handles.count()
    selects = box.locator(":scope > .widget-hbox .widget-dropdown select")
    if j < selects.count():
        select = selects.nth(j)
        values = select.locator("option").evaluate_all("os => os.map(o => o.value)")
        labels = select.locator("option").all_text_contents()
        target = next(v for v in values if v != select.input_value())
        select.select_option(target)
        return f"dropdown → {labels[values.index(target)]!r}"
    j -= selects.count()
    toggles = box.locator(":scope > .widget-hbox .widget-toggle-buttons")
    if j < toggles.count():  # toggle buttons: click the first one not selected
        button = toggles.nth(j).locator("button.widget-toggle-button:not(.mod-active)").first
        label = button.text_content()
        button.click()
        return f"toggle → {label.strip()!r}"
    return None


def _open_and_run_all(page, lab_url, name):
    """Open ``name`` in JupyterLab, wait for its kernel, Run All Cells and wait until all have run
    (or one failed)."""
    kernel_id = _start_session(lab_url, name)
    page.goto(f"{lab_url}/lab/tree/{name}?reset", wait_until="domcontentloaded")
    page.wait_for_selector(f"{_PANEL} .jp-Notebook", timeout=KERNEL_IDLE_S * 1000)
    _wait_kernel_idle(page, lab_url, kernel_id, name)
    kernels = [k["id"] for k in _api(f"{lab_url}/api/kernels")]
    assert kernels == [kernel_id], f"{name}: expected only kernel {kernel_id}, the server runs {kernels}"
    dialog = page.locator(".jp-Dialog")
    assert not dialog.count(), f"{name}: unexpected dialog before running: {dialog.first.text_content()!r}"
    _run_all(page, name)


def _saved_outputs(page, lab_url, name):
    """Save the notebook from the page (Ctrl+S) and read it back from the served folder: the outputs
    exactly as the page holds them."""
    import nbformat

    path = lab_root[lab_url] / name
    before = path.stat().st_mtime_ns
    page.locator(f"{_PANEL} .jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + REDRAW_S
    while path.stat().st_mtime_ns == before:
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: the page did not save the notebook within {REDRAW_S} s")
        time.sleep(0.25)
    for _ in range(20):   # the server may still be writing it
        try:
            return nbformat.read(path, as_version=4)
        except (ValueError, OSError):
            time.sleep(0.25)
    return nbformat.read(path, as_version=4)


def _shutdown_kernels(lab_url):
    for s in _api(f"{lab_url}/api/sessions"):
        _api(f"{lab_url}/api/sessions/{s['id']}", "DELETE")


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_lecture_runs_in_jupyterlab(path, lab_url, browser, capsys):
    name = path.name
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"[:300]))
    t0 = time.perf_counter()
    try:
        _open_and_run_all(page, lab_url, name)
        errors = page.evaluate(_ERRORS)
        assert page.evaluate(_RUN_STATE) == "done" and not errors, f"{name} shows errors:\n" + "\n".join(errors)
        t_run = time.perf_counter() - t0
        saved = _saved_outputs(page, lab_url, name)
        assert all(c.get("execution_count") for c in saved.cells if c.cell_type == "code"), \
            f"{name}: saved before every cell had run"
        problems = output_problems(saved, name, released_traces=_real_trace_dir() is not None)
        assert not problems, "\n".join(problems)   # the checks tests/test_notebooks.py makes with nbclient
        boxes = _tofu(page)
        assert not boxes, (f"{name}: {len(boxes)} character(s) render as empty boxes — fonts missing "
                           f"(Debian: {FONT_PACKAGES}):\n  " + "\n  ".join(boxes[:20]))

        n_dash = page.evaluate(_TAG_DASHBOARDS)
        moved = []
        for i in range(n_dash):
            box = page.locator(f'[data-test-dashboard="{i}"]')
            box.scroll_into_view_if_needed()
            before = box.evaluate(_DASH_STATE)
            assert before["img"], f"{name} dashboard {i} shows no figure"
            changed = ("([box, before, what]) => { const img = box.querySelector(':scope > .widget-output img');"
                       " const kids = [...box.children];"
                       " return (what !== 'readout' && img && img.getAttribute('src') !== before.img) ||"
                       " (what !== 'img' && kids[kids.length - 2].textContent !== before.readout); }")
            # One step of the first control may legitimately change nothing (a threshold that does
            # not flip the decision): then try the next control, up to MAX_CONTROLS of them.
            tried = []
            for j in range(MAX_CONTROLS):
                what = _move_control(box, j)
                if what is None:
                    break
                tried.append(what)
                try:
                    page.wait_for_function(changed, arg=[box.element_handle(), before, "any"],
                                           timeout=REDRAW_S * 1000, polling=250)
                    break
                except Exception:  # noqa: BLE001
                    continue
            else:
                what = None
            assert tried, f"{name} dashboard {i} has no slider, dropdown or toggle buttons"
            assert what is not None, f"{name} dashboard {i}: neither figure nor readout changed after {tried}"
            if len(tried) > 1:
                what = f"{what} (after no change from {', '.join(tried[:-1])})"
            # Dashboards write the readout before rendering the figure: give the figure a moment too,
            # so the screenshot shows the new one (a dashboard whose control only moves the readout passes).
            try:
                page.wait_for_function(changed, arg=[box.element_handle(), before, "img"], timeout=15_000, polling=250)
                what += " → figure changed"
            except Exception:  # noqa: BLE001
                what += " → readout changed"
            moved.append(what)
        errors = page.evaluate(_ERRORS)
        assert not errors, f"{name} shows errors after moving controls:\n" + "\n".join(errors)
        # Leave the last dashboard in view (when there is one) for the screenshot.
        page.screenshot(path=str(SCREENSHOTS / f"{path.stem}.png"))
        with capsys.disabled():
            print(f"\n  {name}: ran in {t_run:.1f} s, {n_dash} dashboard(s) moved "
                  f"({'; '.join(moved) or '—'}), total {time.perf_counter() - t0:.1f} s")
    except Exception:
        page.screenshot(path=str(SCREENSHOTS / f"{path.stem}.failed.png"))
        with capsys.disabled():
            print(f"\n  {name} failed; last browser console lines:\n    " + "\n    ".join(console[-25:]))
        raise
    finally:
        page.close()
        _shutdown_kernels(lab_url)


def test_error_in_a_cell_is_seen(lab_url, browser):
    """The checks above can fail: a notebook whose second cell raises is reported as an error."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("raise ValueError('probe ' + str(x))"),
                                         nbformat.v4.new_code_cell("y = 2")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, lab_root[lab_url] / "zz_broken.ipynb")
    page = browser.new_page()
    try:
        _open_and_run_all(page, lab_url, "zz_broken.ipynb")
        assert page.evaluate(_RUN_STATE) == "error"
        errors = page.evaluate(_ERRORS)
        assert len(errors) == 1 and errors[0].startswith("cell 1:") and "ValueError" in errors[0] \
            and "probe 1" in errors[0], errors
        # and the checks on the saved notebook see it too
        assert output_problems(_saved_outputs(page, lab_url, "zz_broken.ipynb"), "zz_broken.ipynb", False) == [
            "zz_broken.ipynb cell 1: ValueError: probe 1"]
    finally:
        page.close()
        _shutdown_kernels(lab_url)


def test_tofu_check_sees_a_box(browser):
    """The empty-box check above can fail: a private-use character (no font has it) is a box; Latin,
    the arrows the course uses and an unrendered element are not reported."""
    page = browser.new_page()
    try:
        page.set_content('<div id="t"><p>a → b ≤ c é</p><pre>x \U000F0001 y</pre>'
                         '<p style="display:none">\U000F0002</p></div>')
        boxes = _tofu(page, "#t")
        assert len(boxes) == 1 and boxes[0].startswith("\U000F0001 (U+F0001)"), boxes
    finally:
        page.close()
