"""The timeline view on the whole conversation trace (released where found, else its stand-in): the kernel's
part (lanes of a run, the payload sent once, its bytes) and the browser's (frames per second while
playing, ms per scrub step, as medians over rounds) for one run and for two on one clock, in headless
Chromium on the page ``Timeline.html()`` writes (the view's own script). Prints numbers, asserts nothing.

    python benchmarks/bench_timeline.py [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from mooncake_lab.sim import ClusterConfig, simulate
from mooncake_lab.timeline import lanes, timeline
from mooncake_lab.timeline.widget import payload
from mooncake_lab.traces import load_trace_or_synthetic

CHROMIUM = "/usr/bin/chromium"


def kernel_side(run, rounds: int) -> dict:
    t_l, t_p = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ln = lanes(run)
        t1 = time.perf_counter()
        payload(ln)
        t_l.append(t1 - t0)
        t_p.append(time.perf_counter() - t1)
    return {"lanes_ms": 1e3 * statistics.median(t_l), "payload_ms": 1e3 * statistics.median(t_p),
            "MB": ln.nbytes() / 1e6}


def browser_side(view, rounds: int) -> dict | None:
    if not Path(CHROMIUM).is_file():
        return None
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as d, sync_playwright() as pw:
        page_path = view.save_html(Path(d) / "view.html")
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        pg = b.new_page(viewport={"width": 1280, "height": 1000})
        t0 = time.perf_counter()
        pg.goto(page_path.as_uri())
        pg.wait_for_selector("body[data-ready='1']", timeout=60_000)
        load_s = time.perf_counter() - t0
        fps, scrub = [], []
        for _ in range(rounds):
            pg.evaluate("window.timelineModel.set('now', 60)")
            pg.click(".mt-play")
            time.sleep(2.2)
            fps.append(float(pg.evaluate("document.getElementById('view').dataset.fps || 0")))
            pg.click(".mt-play")
            scrub.append(pg.evaluate("""() => { const s = document.querySelector('.mt-slider'), out = [];
                for (let i = 0; i < 30; i++) { const t = performance.now(); s.value = 100 + 97 * i;
                  s.dispatchEvent(new Event('input')); out.push(performance.now() - t); }
                return out.sort((a, b) => a - b)[15]; }"""))
        heap = pg.evaluate("performance.memory ? performance.memory.usedJSHeapSize / 1e6 : null")
        b.close()
    return {"load_s": load_s, "fps": statistics.median(fps), "scrub_ms": statistics.median(scrub), "heap_MB": heap}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tr = load_trace_or_synthetic("conversation", download=False)
    runs = [simulate(tr, ClusterConfig(prefill_policy=p)) for p in ("kvcentric", "cache_aware")]
    print(f"trace {tr.name}: {len(tr):,} requests")
    k = kernel_side(runs[0], args.rounds)
    print(f"kernel: lanes {k['lanes_ms']:.0f} ms, payload {k['payload_ms']:.1f} ms, {k['MB']:.1f} MB per run (medians)")
    for n in (1, 2):
        r = browser_side(timeline(*runs[:n], window=120, speed=30), args.rounds)
        if r is None:
            print(f"browser: no Chromium at {CHROMIUM}")
            break
        print(f"browser, {n} run(s) on one clock, window 120 s: page ready {r['load_s']:.1f} s, "
              f"{r['fps']:.1f} frames/s playing (target ≥ 10), {r['scrub_ms']:.1f} ms per scrub step "
              f"(target ≤ 150; ratio {r['scrub_ms'] / 150:.2f}), JS heap {r['heap_MB']:.0f} MB")


if __name__ == "__main__":
    main()
