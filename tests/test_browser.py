"""The HTML report in a real browser: headless Chromium (Debian's package) driven by Selenium through the
system chromedriver (`.ci/run` installs both). A tiny suite is run into a temporary directory and its
leaderboard.html loaded from disk.

Checked: no console errors and no request leaving the file (the page is self-contained); numeric
sorting of a score column (best first on the first click, by the metric's direction) and of a sweep
column; keyboard sorting with aria-sort; the header row and the model column stay in view while the
table scrolls; at 390 px no text below 12 px and nothing wider than the viewport outside a table's
scroll box; printing keeps every column (the verdicts too); the filters; a score's link to its cell
details; axe-core (vendored under tests/fixtures/axe, MPL-2.0) finds no serious or critical violation; the page
opens with the suite's description, its papers and what held-out and theory mean, and its findings read as
sentences with their ✓/✗ markers, and no visible text carries escape residue (a screenshot is written for a look).
"""

from __future__ import annotations

import json
import re
import os
import shutil
from pathlib import Path

import pytest

from compbench.cli import main

if os.environ.get("COMPBENCH_REQUIRE_BROWSER"):  # .ci/run: a missing browser is a failure, not a skip
    import selenium  # noqa: F401
    assert shutil.which("chromium") and shutil.which("chromedriver"), "COMPBENCH_REQUIRE_BROWSER set but chromium is missing"
selenium = pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[test]')")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(  # a browser: slow
    not (CHROMIUM and CHROMEDRIVER),
    reason="headless Chromium is not installed (apt-get install -y chromium chromium-driver; .ci/run does this)",
)]
AXE = Path(__file__).parent / "fixtures" / "axe" / "axe.min.js"

SUITE = """\
name: tiny
description: a few seconds of kernels and a small network, for the browser tests
seeds: 2
tasks:
  - {id: te, family: transitive_equivalence, params: {classes: [2, 2], train_items: [1, 1]}}
  - {id: add, family: additive, params: {anchors: [[4], [4]]}, description: "symbolic addition, anchor value 0"}
  - {id: cd-1, family: context_dependence, params: {preset: CD-1}}
  - {id: cd-2, family: context_dependence, params: {preset: CD-2}}
  - {id: cd-3, family: context_dependence, params: {preset: CD-3}}
models:
  - {id: kernel-relu, adapter: kernel, params: {kernel: relu_ntk, depth: 1}, description: infinite-width ReLU NTK}
  - {id: mlp, adapter: mlp, params: {width: 32, max_steps: 300, lr: 0.05}, tasks: [te, add], description: a small MLP}
  - id: ovl
    adapter: kernel
    description: overlap kernels, listed member by member
    params: {kernel: overlap, weights: [0.0, 0.0, 1.0]}
    sweep: {weights.1: {linspace: [0.0, 0.45, 10]}}
    tasks: [te, add]
  - id: cd-sweep
    adapter: kernel
    description: overlap kernels on context dependence, summarised
    params: {kernel: overlap, weights: [0.0, 0.0, 0.0, 1.0], relative: {1: 0.0}}
    sweep: {weights.2: {linspace: [0.0, 0.3, 13]}}
    tasks: [cd-*]
  - id: te-sweep
    adapter: kernel
    description: a hundred overlap kernels on te, summarised
    params: {kernel: overlap, weights: [0.0, 0.0, 1.0]}
    sweep: {weights.1: {linspace: [0.0, 0.45, 100]}}
    tasks: [te]
expectations:
  - {id: chance, source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [kernel-relu], tasks: [te]}
  - id: kernel-additive
    claim: additive
    models: [kernel-relu]
    tasks: [add]
    tolerance: 1.0e-6
    source:
      paper: Lippl & Stachenfeld, ICLR 2025
      where: Thm. 4.2
      value: kernel models are conjunction-wise additive
      threshold: exact up to the least-squares fit's round-off
      url: https://arxiv.org/abs/2405.16391
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """leaderboard.html of a tiny suite run (kernels and one small network, a few seconds)."""
    tmp = tmp_path_factory.mktemp("browser")
    suite = tmp / "tiny.yaml"
    suite.write_text(SUITE)
    out = tmp / "res"
    assert main(["run", "--suite", str(suite), "--out", str(out), "--format", "html", "--quiet"]) == 0
    return out / "leaderboard.html"


def _driver(width: int, height: int) -> webdriver.Chrome:
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={width},{height}", "--force-device-scale-factor=1"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))


@pytest.fixture(scope="module")
def driver():
    d = _driver(1366, 900)
    yield d
    d.quit()


@pytest.fixture
def browser(page, driver):
    """Load the page fresh at a viewport size (a phone: mobile emulation, so the viewport meta tag applies)."""

    def open_at(width: int = 1366, height: int = 900) -> webdriver.Chrome:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
        driver.get_log("browser"), driver.get_log("performance")  # drain what earlier pages logged
        driver.get(page.as_uri())
        return driver

    return open_at


def _column(d, table_id: str, header: str) -> list[float | str]:
    """The sort keys (data-v, else the text) of one column of the table under section `table_id`, top to bottom."""
    keys = d.execute_script(
        """
        const table = document.getElementById(arguments[0]).closest('section').querySelector('table');
        const heads = [...table.tHead.rows[0].cells];
        const i = heads.findIndex(h => h.querySelector('button').textContent.trim() === arguments[1]);
        return [...table.tBodies[0].rows].map(r => { const c = r.cells[i];
          return c.hasAttribute('data-v') ? parseFloat(c.getAttribute('data-v')) : c.textContent.trim(); });
        """, table_id, header)
    return [k if isinstance(k, str) else float(k) for k in keys]


def _click_header(d, table_id: str, header: str) -> str:
    button = d.execute_script(
        "const t=document.getElementById(arguments[0]).closest('section').querySelector('table');"
        "return [...t.tHead.querySelectorAll('button')].find(b => b.textContent.trim() === arguments[1]);", table_id, header)
    button.click()
    return button.find_element(By.XPATH, "..").get_attribute("aria-sort")


def test_loads_without_console_errors_or_external_requests(browser):
    d = browser()
    assert d.title == "tiny: leaderboard"
    errors = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    urls = [json.loads(e["message"])["message"]["params"]["request"]["url"] for e in d.get_log("performance")
            if json.loads(e["message"])["message"]["method"] == "Network.requestWillBeSent"]
    assert urls and all(u.startswith(("file://", "data:")) for u in urls), urls
    assert d.execute_script("return performance.getEntriesByType('resource').filter(e => !e.name.startsWith('data:')).length") == 0


def test_score_column_sorts_numerically_best_first_then_reversed(browser):
    d = browser()
    assert _click_header(d, "held-out-score", "add (R² ↑)") == "descending"  # R² ↑: best first
    keys = _column(d, "held-out-score", "add (R² ↑)")
    numbers = [k for k in keys if isinstance(k, float)]
    assert len(numbers) == 12 and numbers == sorted(numbers, reverse=True)
    assert keys[: len(numbers)] == numbers  # numbers first, blanks after
    assert _click_header(d, "held-out-score", "add (R² ↑)") == "ascending"
    numbers = [k for k in _column(d, "held-out-score", "add (R² ↑)") if isinstance(k, float)]
    assert numbers == sorted(numbers)
    # a lower-is-better column starts ascending
    assert _click_header(d, "theory", "max |model − theory| ↓") == "ascending"
    diffs = [k for k in _column(d, "theory", "max |model − theory| ↓") if isinstance(k, float)]
    assert diffs == sorted(diffs) and len(diffs) >= 20


def test_sweep_columns_sort_numerically(browser):
    d = browser()
    assert _click_header(d, "sweeps", "models scored") == "ascending"
    assert _column(d, "sweeps", "models scored") == [13.0, 13.0, 13.0, 100.0]  # as text, "100" would come first
    assert _click_header(d, "sweeps", "perfect held-out ↑") == "descending"
    assert _column(d, "sweeps", "perfect held-out ↑") == [12.0, 12.0, 12.0, 0.0]
    numeric = d.execute_script("return document.getElementById('sweeps').closest('section').querySelectorAll('td[data-v]').length")
    assert numeric == 4 * 5  # every numeric cell of the table carries its number


def test_keyboard_sorting_and_aria_sort(browser):
    d = browser()
    button = d.find_element(By.XPATH, "//section[h2[@id='held-out-score']]//thead//button[starts-with(., 'te ')]")
    button.send_keys(Keys.ENTER)
    th = button.find_element(By.XPATH, "..")
    assert th.get_attribute("aria-sort") == "descending"
    button.send_keys(Keys.SPACE)
    assert th.get_attribute("aria-sort") == "ascending"
    others = d.find_elements(By.XPATH, "//section[h2[@id='held-out-score']]//thead//th[@aria-sort]")
    assert len(others) == 1  # only the sorted column announces an order
    assert d.find_elements(By.XPATH, "//main") and d.find_element(By.XPATH, "//tbody/tr/th[@scope='row']")


def test_header_and_model_column_stay_in_view_while_the_table_scrolls(browser):
    d = browser(390, 400)
    pos = d.execute_script(
        """
        const wrap = document.getElementById('held-out-score').closest('section').querySelector('.wrap');
        wrap.scrollIntoView();
        const scrollable = [wrap.scrollHeight > wrap.clientHeight, wrap.scrollWidth > wrap.clientWidth];
        wrap.scrollTop = 150; wrap.scrollLeft = 200;
        const w = wrap.getBoundingClientRect();
        const head = wrap.querySelector('thead th:nth-child(2)').getBoundingClientRect();
        const row = [...wrap.querySelectorAll('tbody th')].find(th => {
          const r = th.getBoundingClientRect(); return r.top >= w.top + 30 && r.bottom <= w.bottom; }).getBoundingClientRect();
        return {scrollable, scrolled: [wrap.scrollTop, wrap.scrollLeft], wrapTop: w.top, headTop: head.top,
                wrapLeft: w.left, rowLeft: row.left};
        """)
    assert pos["scrollable"] == [True, True] and pos["scrolled"][0] >= 50 and pos["scrolled"][1] >= 100
    assert abs(pos["headTop"] - pos["wrapTop"]) <= 2  # the header row is pinned to the top of the scroll box
    assert abs(pos["rowLeft"] - pos["wrapLeft"]) <= 2  # and the model names to its left edge


def test_phone_width_has_readable_text_and_no_page_overflow(browser):
    d = browser(390, 844)
    assert d.execute_script("return window.innerWidth") == 390
    width = d.execute_script("return document.documentElement.scrollWidth")
    assert width <= 390
    small = d.execute_script(
        """
        const out = [];
        for (const el of document.body.querySelectorAll('*')) {
          const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
          const r = el.getBoundingClientRect();
          if (!own || r.width === 0 || r.height === 0 || getComputedStyle(el).visibility === 'hidden') continue;
          const size = parseFloat(getComputedStyle(el).fontSize);
          if (size < 12) out.push(el.tagName + ' ' + size + ' ' + el.textContent.trim().slice(0, 30));
          if (!el.closest('.wrap') && r.right > window.innerWidth + 1) out.push('overflow ' + el.tagName + ' ' + r.right);
        }
        return out;
        """)
    assert small == []


def test_print_keeps_every_column_and_verdict(browser):
    d = browser(800, 1000)
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    clipped = d.execute_script(
        """
        const out = [];
        for (const t of document.querySelectorAll('table')) {
          const r = t.getBoundingClientRect();
          if (r.right > window.innerWidth + 1) out.push(t.closest('section').querySelector('h2').id + ' ' + r.right);
        }
        return out;
        """)
    assert clipped == []
    verdicts = d.find_elements(By.XPATH, "//section[h2[@id='expectations']]//td[.='PASS' or .='FAIL']")
    assert verdicts and all(v.is_displayed() and v.rect["x"] + v.rect["width"] <= 801 for v in verdicts)


def test_filters_by_model_task_and_status(browser):
    d = browser()
    d.find_element(By.ID, "f-model").send_keys("mlp")
    rows = d.find_elements(By.XPATH, "//section[h2[@id='held-out-score']]//tbody/tr")
    shown = [r.find_element(By.TAG_NAME, "th").text for r in rows if r.is_displayed()]
    assert shown == ["mlp"]
    d.find_element(By.ID, "f-model").clear()
    d.execute_script("const s=document.getElementById('f-task'); s.value='add'; s.dispatchEvent(new Event('change'));")
    heads = [h.text for h in d.find_elements(By.XPATH, "//section[h2[@id='held-out-score']]//thead/tr/th") if h.is_displayed()]
    assert heads[0] == "model" and len(heads) == 2 and heads[1].startswith("add (R² ↑)")
    theory_tasks = {r.get_attribute("data-task") for r in d.find_elements(By.XPATH, "//section[h2[@id='theory']]//tbody/tr")
                    if r.is_displayed()}
    assert theory_tasks == {"add"}
    d.execute_script("const s=document.getElementById('f-task'); s.value=''; s.dispatchEvent(new Event('change'));"
                     "const t=document.getElementById('f-status'); t.value='PASS'; t.dispatchEvent(new Event('change'));")
    verdicts = [r.text for r in d.find_elements(By.XPATH, "//section[h2[@id='expectations']]//tbody/tr") if r.is_displayed()]
    assert verdicts and all("PASS" in v for v in verdicts)


def test_score_links_to_its_cell_details_and_task_header_to_its_plot(browser):
    d = browser()
    link = d.find_element(By.XPATH, "//section[h2[@id='held-out-score']]//tbody/tr[th='mlp']/td[1]/a")
    link.click()
    assert d.execute_script("return location.hash") == "#cell-mlp--te"
    row = d.find_element(By.ID, "cell-mlp--te")
    assert row.is_displayed() and "0: " in row.text and "1: " in row.text and "analytic_ntk" in row.text
    plot = d.find_element(By.XPATH, "//section[h2[@id='held-out-score']]//thead//a[@class='plot']")
    target = plot.get_attribute("href").split("#")[1]
    assert d.find_element(By.ID, target).tag_name == "figure"


def test_axe_finds_no_serious_or_critical_violation(browser):
    for width in (1366, 390):
        d = browser(width, 844)
        d.execute_script(AXE.read_text(encoding="utf-8"))
        d.set_script_timeout(60)
        violations = d.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document).then(r => done(r.violations.map(v => [v.id, v.impact, v.nodes.length])));")
        assert [v for v in violations if v[1] in ("serious", "critical")] == [], violations


def test_the_page_opens_by_explaining_itself_and_its_findings_read_as_sentences(browser, tmp_path):
    d = browser()
    about = d.find_element(By.CSS_SELECTOR, "header p.about").text
    assert about == "a few seconds of kernels and a small network, for the browser tests"
    link = d.find_element(By.CSS_SELECTOR, "header p.papers a")
    assert link.text == "Lippl & Stachenfeld, ICLR 2025" and link.get_attribute("href") == "https://arxiv.org/abs/2405.16391"
    meaning = d.find_element(By.CSS_SELECTOR, "header p.meaning").text
    assert "held-out cells: combinations it never saw" in meaning and "The theory is the prediction of the model's own kernel" in meaning
    items = d.find_elements(By.CSS_SELECTOR, "li.finding")
    texts = [li.text for li in items]
    assert [t.split(":", 1)[0] for t in texts] == ["chance", "kernel-additive"]
    for t in texts:  # each a run of sentences: "id: Claim …. Source: …. It holds …."
        assert t.endswith(".") and " Source: " in t and (" It holds" in t or " It does not hold" in t), t
        assert t.split(": ", 1)[1][0].isupper(), t
    assert "Source: Lippl & Stachenfeld, ICLR 2025, Thm. 4.2: kernel models are conjunction-wise additive." in texts[1]
    # The markers are the check and the cross, not "\2713" read as an octal escape (it rendered as "¹3").
    markers = d.execute_script("return [...document.querySelectorAll('li.finding')].map(li => getComputedStyle(li).listStyleType)")
    assert [m.strip('" ') for m in markers] == ["✓", "✓"], markers
    d.save_screenshot(str(tmp_path / "report-top.png"))


def test_no_visible_text_carries_escape_residue(browser):
    import re

    text = browser().execute_script("return document.body.innerText")
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", text), "a control character in the visible text"
    for residue in ("\\u", "\\x", "&amp;", "&lt;", "&gt;", "&quot;", "&#"):
        assert residue not in text, f"escape residue {residue!r} in the visible text"
    assert "¹" not in text  # what an octal escape like "\2713" left in the findings


# -- `compbench site`: the index, every page it links, and a model page, in the browser --------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, Path]:
    """A site over two tiny kernel suites' results directories (seconds): its folder, and one suite's results."""
    from tiny_suites import kernel_suite

    tmp = tmp_path_factory.mktemp("site")
    dirs = []
    for name, claims in (("alpha", ("leak", "chance")), ("beta", ("impossible",))):
        (tmp / f"{name}.yaml").write_text(kernel_suite(name, *claims))
        dirs.append(tmp / f"r-{name}")
        assert main(["run", "--suite", str(tmp / f"{name}.yaml"), "--results", str(dirs[-1]), "--format", "md", "--quiet"]) in (0, 1)
    assert main(["run", "--suite", str(tmp / "alpha.yaml"), "--results", str(dirs[0]), "--format", "md", "--quiet", "--force"]) == 0
    assert main(["site", *map(str, dirs), "-o", str(tmp / "site")]) == 0
    return tmp / "site", dirs[0]


def _loaded_cleanly(d) -> None:
    errors = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == [], d.current_url
    urls = [json.loads(e["message"])["message"]["params"]["request"]["url"] for e in d.get_log("performance")
            if json.loads(e["message"])["message"]["method"] == "Network.requestWillBeSent"]
    assert all(u.startswith(("file://", "data:")) for u in urls), urls


def test_site_index_links_resolve_and_every_page_loads_cleanly(site, driver):
    from urllib.parse import unquote, urlparse

    out, _ = site
    driver.get_log("browser"), driver.get_log("performance")
    driver.get((out / "index.html").as_uri())
    assert driver.title == "compbench results"
    _loaded_cleanly(driver)
    raw = driver.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    assert raw and not [h for h in raw if re.match(r"[a-z]+:|/", h)], raw  # relative links only
    links = driver.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.href)")
    pages = set()
    for link in links:
        target = Path(unquote(urlparse(link).path))
        assert target.is_file() and out in target.parents, link  # inside the site, and there
        if target.suffix == ".html" and target != out / "index.html":
            pages.add(link.split("#")[0])
    assert {"alpha/index.html", "beta/index.html", "models/overlap.html", "models/relu.html"} <= \
        {Path(unquote(urlparse(p).path)).relative_to(out).as_posix() for p in pages}
    for page in sorted(pages):
        driver.get(page)
        _loaded_cleanly(driver)
        back = driver.execute_script("const a = document.querySelector('.home a'); return a && a.href")
        assert back and Path(unquote(urlparse(back).path)) == out / "index.html", page


def test_site_model_page_shows_the_stored_score(site, driver):
    from compbench.store.records import ResultStore

    out, alpha = site
    store = ResultStore(alpha / "store")
    try:
        scores = [r.metric("heldout_r2") for r in store.latest().values() if (r.model, r.task) == ("relu", "add") and r.ok]
    finally:
        store.close()
    driver.get((out / "models" / "relu.html").as_uri())
    _loaded_cleanly(driver)
    rows = driver.execute_script("return [...document.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    row = next(r for r in rows if r[:3] == ["alpha", "add", "heldout_r2"])
    assert row[3].startswith(f"{sum(scores) / len(scores):.3f}"), (row, scores)
    # The task links to the cell's row in the suite's leaderboard, which the browser then shows.
    driver.find_element(By.LINK_TEXT, "add").click()
    assert driver.current_url.endswith("alpha/index.html#cell-relu--add")
    assert driver.execute_script("return document.querySelector(':target') !== null")


def test_site_pages_have_no_serious_or_critical_axe_violation(site, driver):
    out, _ = site
    for page in (out / "index.html", out / "models" / "overlap.html"):
        driver.get(page.as_uri())
        driver.execute_script(AXE.read_text(encoding="utf-8"))
        driver.set_script_timeout(60)
        violations = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document).then(r => done(r.violations.map(v => [v.id, v.impact, v.nodes.length])));")
        assert [v for v in violations if v[1] in ("serious", "critical")] == [], (page.name, violations)
