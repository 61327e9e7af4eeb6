"""The history site as a person sees it: every page opened in headless Chromium (Debian's ``chromium``).

Checks no script error, console error or failed load (the network is cut off: any host name fails to
resolve), every chart drawn by plotly, every link leading to a file, the test names on the index, the
filters and the trajectory's session switch. Screenshots land in the test's tmp folder, or in
``$ROOFLINE_SITE_SCREENSHOTS`` when set, to be looked at.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from site_browser import Browser, find_browser

pytest.importorskip("plotly", reason="the site needs the 'site' extra: pip install -e '.[site]'")
pytest.importorskip("ruptures", reason="the site needs the 'site' extra: pip install -e '.[site]'")
BROWSER = find_browser()
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium: apt-get install chromium")

from site_helpers import write_history

from pytest_roofline.site.generate import build_site

CHARTS_DRAWN = ("document.querySelectorAll('div.chart').length === "
                "document.querySelectorAll('div.chart.rendered').length")


@pytest.fixture(scope="module")
def browser() -> Browser:
    assert BROWSER is not None
    opened = Browser(BROWSER)
    yield opened
    opened.close()


def _state(browser: Browser) -> dict:
    return browser.evaluate("""({
        charts: document.querySelectorAll('div.chart').length,
        drawn: Array.from(document.querySelectorAll('div.chart'))
                 .filter(d => d.querySelector('.main-svg .scatterlayer .trace')).length,
        sparks: document.querySelectorAll('svg.spark polyline').length,
        links: Array.from(document.querySelectorAll('a[href], link[href], script[src]')).map(e => e.href || e.src),
        text: document.body.innerText})""")


def test_every_page_renders_in_chromium_with_no_error(tmp_path: Path, browser: Browser) -> None:
    history = tmp_path / ".roofline" / "history"
    write_history(history)
    out = tmp_path / "site"
    build_site(history, out)
    shots = Path(os.environ.get("ROOFLINE_SITE_SCREENSHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    pages = sorted(out.rglob("*.html"))
    assert len(pages) == 17
    for page in pages:
        problems = browser.open(page.as_uri(), CHARTS_DRAWN)
        assert problems == [], f"{page.relative_to(out)}: {problems}"
        state = _state(browser)
        assert state["drawn"] == state["charts"], f"{page.relative_to(out)}: a chart has no trace drawn"
        for link in state["links"]:
            url = urlparse(link)
            assert url.scheme == "file", f"{page.relative_to(out)} links outside the site: {link}"
            assert Path(unquote(url.path)).is_file(), f"{page.relative_to(out)}: {link} is missing"
        if page.parent.name != "t" or "attention" in page.name or "matmul_batch_2" in page.name:
            browser.screenshot(shots / f"{page.parent.name}-{page.stem}.png", full_page=True)
    assert len(list(out.glob("m/*/t/*.html"))) == 12


def test_index_names_filters_and_trajectory_switch(tmp_path: Path, browser: Browser) -> None:
    history = tmp_path / ".roofline" / "history"
    write_history(history)
    out = tmp_path / "site"
    build_site(history, out)
    assert browser.open((out / "index.html").as_uri(), CHARTS_DRAWN) == []
    state = _state(browser)
    for name in ("test_matmul[batch=1]", "test_matmul[batch=4]", "test_conv2d", "test_attention", "test_softmax"):
        assert name in state["text"]
    assert state["sparks"] == 12
    assert "12 of 12 tests shown" in state["text"]
    shown = browser.evaluate("""(() => { const box = document.querySelector('.filters input[name=name]');
        box.value = 'attention'; box.dispatchEvent(new Event('input'));
        return [document.querySelector('.filters .count').textContent,
                Array.from(document.querySelectorAll('tr[data-test]')).filter(r => !r.hidden)
                    .map(r => r.dataset.test)]; })()""")
    assert shown == ["2 of 12 tests shown", ["tests/test_ops.py::test_attention"] * 2]
    trajectory = next(out.glob("m/*/traj/*.html"))
    assert browser.open(trajectory.as_uri(), CHARTS_DRAWN) == []
    titles = browser.evaluate("""(async () => {
        const div = document.getElementById('trajectory'), select = document.getElementById('session');
        const before = div.layout.title.text;
        select.value = '0'; select.dispatchEvent(new Event('change'));
        await new Promise(r => setTimeout(r, 300));
        return [before, div.layout.title.text, div.data.filter(t => t.mode === 'lines+markers+text').length]; })()""")
    assert titles[0] != titles[1] and titles[1].endswith(browser.evaluate(
        "document.getElementById('session').options[document.getElementById('session').selectedIndex].text"))
    assert titles[2] == 1  # one line: the batch sizes of one parameter set
