"""The offline talk demo in a real browser (Debian's chromium through Playwright), opened from file://.

Every request that is not for a file is aborted and counted, and so is every request the page
makes at all: the demo must need none. The sentiment slider is moved from −2 to +2 (by script
and by keyboard) and the text and judged sentiment must follow; Play must animate the paths
over τ. A screenshot goes to test-output/talk/ (git-ignored).
"""

from __future__ import annotations

import time

import pytest
from browser_lab import CHROMIUM, CHROMIUM_ARGS, ROOT

SHOTS = ROOT / "test-output" / "talk"
NOW_NAME = """() => { const gd = document.getElementById('talk-steer');
                      const now = gd && gd._fullData && gd._fullData.find(t => (t.name || '').startsWith('now:'));
                      return now ? now.name : null; }"""


@pytest.fixture(scope="module")
def talk_file(tmp_path_factory, small_tokenizer):
    from test_talk import _small_checkpoint

    from steering.lab.talk import export_talk

    root = tmp_path_factory.mktemp("talk-browser")
    ckpt = _small_checkpoint(root / "ckpt", small_tokenizer)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("STEERING_CACHE", str(root / "cache"))
        env.setenv("STEERING_RESULTS", str(root / "no-results"))
        report = export_talk(
            root / "talk.html", ["The movie was", "The acting"], checkpoint=ckpt, seed=0, new_tokens=12, regime_points=5
        )
    return report.path


def _state(page) -> dict:
    return page.evaluate("""() => ({
        text: document.getElementById('talk-text').innerText,
        score: document.getElementById('talk-score').innerText,
        p: document.getElementById('talk-score').dataset.score,
        u: document.getElementById('talk-sentiment-value').innerText})""")


def _set_sentiment(page, value: str):
    page.eval_on_selector(
        "#talk-sentiment",
        """(el, v) => { el.value = v;
        el.dispatchEvent(new Event('input', {bubbles: true})); }""",
        value,
    )


def test_the_offline_demo_steers_and_plays_with_no_network(talk_file):
    from playwright.sync_api import sync_playwright

    blocked, requests, errors, console_errors = [], [], [], []

    def block(r):
        blocked.append(r.request.url)
        r.abort()

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            # every URL but the file's own (chromium does not let file:// requests be routed)
            context.route(lambda url: not url.startswith("file://"), block)
            page = context.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            page.goto(talk_file.resolve().as_uri(), wait_until="load", timeout=120_000)
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            for chart in ("talk-steer", "talk-traj", "talk-regimes", "talk-compare-paths", "talk-compare-divergence"):
                page.wait_for_function(
                    f"() => {{ const gd = document.getElementById('{chart}');"
                    "return gd && gd._fullData && gd._fullData.length > 0; }",
                    timeout=60_000,
                )
            assert page.locator("#talk-prompt option").count() == 2

            # the slider by script: −2, then by keyboard: End (+2)
            _set_sentiment(page, "-2")
            page.wait_for_function(f"() => ({NOW_NAME})() === 'now: u = -2.00'", timeout=30_000)
            low = _state(page)
            assert low["u"] == "−2.0" and low["text"].startswith("The movie was")
            page.focus("#talk-sentiment")
            page.keyboard.press("End")
            page.wait_for_function(f"() => ({NOW_NAME})() === 'now: u = +2.00'", timeout=30_000)
            high = _state(page)
            assert high["u"] == "+2.0"
            assert high["text"] != low["text"], "moving u from −2 to +2 must change the text"
            assert high["p"] != low["p"], "and the judged sentiment"
            assert high["score"].startswith("judged ") and "P(positive)" in high["score"]

            # every position on the way, one key press each
            page.keyboard.press("Home")
            seen = [_state(page)["u"]]
            start = time.perf_counter()
            for _ in range(40):
                page.keyboard.press("ArrowRight")
                seen.append(_state(page)["u"])
            page.wait_for_function(f"() => ({NOW_NAME})() === 'now: u = +2.00'", timeout=30_000)
            steps_seconds = time.perf_counter() - start
            assert len(set(seen)) == 41 and seen[0] == "−2.0" and seen[-1] == "+2.0"

            # the style control swaps in the other row of the grid
            page.click("label[for=talk-style-pos]")
            page.wait_for_function(
                """() => document.getElementById('talk-steer').layout.annotations[0].text
                                      .includes('(+2.0, +1)')""",
                timeout=30_000,
            )

            # another prompt
            page.select_option("#talk-prompt", "1")
            page.wait_for_function(
                "() => document.getElementById('talk-text').innerText.startsWith('The acting')", timeout=30_000
            )

            # Play animates the paths over τ
            assert page.inner_text("#talk-tau") == "τ = 0 → 1"
            total = int(page.get_attribute("#talk-traj", "data-frame"))
            page.click("#talk-play")
            frames, labels = set(), set()
            deadline = time.perf_counter() + 60
            while time.perf_counter() < deadline and len(frames) < 4:
                frames.add(int(page.get_attribute("#talk-traj", "data-frame")))
                labels.add(page.inner_text("#talk-tau"))
                time.sleep(0.05)
            assert len(frames) >= 4 and min(frames) < total, f"the animation did not advance: {sorted(frames)}"
            assert any(label.startswith("τ = 0.") for label in labels)
            page.wait_for_function(
                "() => document.getElementById('talk-play').innerText.includes('Play')", timeout=60_000
            )
            assert page.get_attribute("#talk-traj", "data-frame") == str(total)
            lengths = page.evaluate("() => document.getElementById('talk-traj')._fullData.map(t => t.x.length)")
            assert lengths[:42] == [total] * 42, "every path is whole again when Play ends"
            assert page.inner_text("#talk-tau") == "τ = 1.000"
            page.screenshot(path=str(SHOTS / "talk.png"), full_page=True)
        finally:
            browser.close()
    non_file = [u for u in requests if not u.startswith("file://")]
    assert blocked == [] and non_file == [], f"the page asked the network for {blocked + non_file}"
    assert errors == [], errors
    assert console_errors == [], console_errors
    print(f"41 slider positions by keyboard in {steps_seconds:.2f} s")
