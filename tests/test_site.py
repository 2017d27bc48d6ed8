"""`compbench site`: one static site over several suites' results, read back against the stores (the browser half is in
test_browser.py). Two kernel suites (seconds each): one run twice (history plots), one given as a bundle."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from tiny_suites import cli, kernel_suite, suite_text

from compbench.store.records import ResultStore


def _stored_mean(results: Path, model: str, task: str, metric: str) -> float:
    store = ResultStore(results / "store")
    try:
        values = [r.metric(metric) for r in store.latest().values() if r.model == model and r.task == task and r.ok]
    finally:
        store.close()
    assert values
    return statistics.fmean(values)


def _run(suite_text: str, tmp: Path, name: str, *extra: str) -> Path:
    suite = tmp / f"{name}.yaml"
    suite.write_text(suite_text)
    out = tmp / f"r-{name}"
    assert cli("run", "--suite", str(suite), "--results", str(out), "--format", "md", "--quiet", *extra).rc in (0, 1)
    return out


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[Path, Path, Path]:
    """alpha run twice into one results directory; beta once, and bundled."""
    tmp = tmp_path_factory.mktemp("site")
    alpha = _run(kernel_suite("alpha", "leak", "chance", seeds=2), tmp, "alpha")
    _run(kernel_suite("alpha", "leak", "chance", seeds=2), tmp, "alpha", "--force")
    beta = _run(kernel_suite("beta", "impossible"), tmp, "beta")
    bundle = tmp / "beta.cbz"
    assert cli("bundle", "--suite", str(tmp / "beta.yaml"), "--results", str(beta), "-o", str(bundle)).rc == 0
    return alpha, beta, bundle


@pytest.mark.slow
def test_site_over_a_directory_and_a_bundle_shows_the_stored_scores(two, tmp_path):
    alpha, beta, bundle = two
    out = tmp_path / "site"
    r = cli("site", str(alpha), str(bundle), "-o", str(out))
    assert r.rc == 0, r.text
    assert "2 suite(s), 2 model page(s), 2 history plot(s)" in r.out
    index = (out / "index.html").read_text()
    assert '<a href="alpha/index.html">alpha</a>' in index and '<a href="beta/index.html">beta</a>' in index
    assert "alpha: 4 cells (4 ok); expectations 2/2 pass" in index
    assert "beta: 4 cells (4 ok); expectations 0/1 pass" in index  # `impossible` fails: a kernel never beats itself
    assert index.count('class="finding holds"') == 2 and index.count('class="finding departs"') == 1
    # Each suite's page is its leaderboard, with a way back.
    for suite in ("alpha", "beta"):
        page = (out / suite / "index.html").read_text()
        assert f"<title>{suite}: leaderboard</title>" in page and '<a href="../index.html">all suites</a>' in page
    # A model's page: per suite and task, the held-out score the store holds.
    page = (out / "models" / "overlap.html").read_text()
    for suite, results in (("alpha", alpha), ("beta", beta)):  # beta's bundle holds beta's store
        for task, metric in (("add", "heldout_r2"), ("te", "heldout_acc")):
            want = f"{_stored_mean(results, 'overlap', task, metric):.3f}"
            row = re.search(rf'<a href="../{suite}/index.html#cell-overlap--{task}">{task}</a></td><td>{metric}</td>'
                            r'<td class="score">([^<]*)</td>', page)
            assert row and row.group(1).startswith(want), (suite, task, row and row.group(1), want)
    # History: alpha's store recorded two runs, one PNG per held-out metric; beta's one run, none.
    pngs = sorted(p.name for p in (out / "alpha").glob("*.png"))
    assert pngs == ["history-heldout_acc.png", "history-heldout_r2.png"]
    assert all((out / "alpha" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert not list((out / "beta").glob("*.png"))
    assert 'href="alpha/history-heldout_r2.png"' in index


def test_history_values_are_each_runs_stored_means(two):
    from compbench.site.history import run_means

    alpha, _, _ = two
    store = ResultStore(alpha / "store")
    try:
        runs = store.runs()
    finally:
        store.close()
    assert len(runs) == 2
    means = run_means(alpha, runs)
    want = _stored_mean(alpha, "relu", "add", "heldout_r2")
    assert means["heldout_r2"][("relu", "add")] == pytest.approx([want, want])


ODD = suite_text("add", name="odd", models=[
    "{id: CON, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}",
    "{id: models, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}}",
    "{id: index, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.2, 1.0]}}",
    "{id: a+b, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.1, 1.0]}}",
    "{id: Net, adapter: kernel, params: {kernel: relu_ntk}}",
    "{id: net, adapter: kernel, params: {kernel: relu_ntk, depth: 2}}"])


@pytest.mark.slow
def test_odd_names_get_safe_distinct_files_and_escaped_text(tmp_path):
    # The folder's name is the user's, and shown on the index: markup in it must stay text.
    hostile = tmp_path / "r<b>&\"x'"
    suite = tmp_path / "odd.yaml"
    suite.write_text(ODD)
    assert cli("run", "--suite", str(suite), "--results", str(hostile), "--format", "md", "--quiet").rc == 0
    out = tmp_path / "site"
    r = cli("site", str(hostile), "-o", str(out))
    assert r.rc == 0, r.text
    files = sorted(p.name for p in (out / "models").iterdir())
    assert len(files) == 6 and len({f.lower() for f in files}) == 6  # Net and net apart, on any file system
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*\.html", f) for f in files), files
    stems = {f.removesuffix(".html").lower() for f in files}
    assert not stems & {"con", "models", "index"}  # reserved by Windows or by the site itself
    index = (out / "index.html").read_text()
    assert "r&lt;b&gt;&amp;&quot;x&#x27;" in index and "<b>" not in index
    for name, f in ((n, f) for f in files for n in ("a+b",) if f.startswith("a_b")):
        assert f"<h1>{name}</h1>" in (out / "models" / f).read_text()
        assert f'href="models/{f}"' in index
    assert "a_b-" in " ".join(files)


@pytest.mark.parametrize("make", ["empty", "foreign", "missing"])
def test_a_folder_without_results_is_one_line_and_nothing_is_written(tmp_path, make):
    given = tmp_path / "given"
    if make != "missing":
        given.mkdir()
    if make == "foreign":
        (given / "notes.txt").write_text("not results")
    out = tmp_path / "site"
    r = cli("site", str(given), "-o", str(out))
    assert r.rc == 2 and r.out == ""
    assert r.err.count("\n") == 1 and r.err.startswith(f"compbench: {given}: "), r.err
    assert "Traceback" not in r.err and not out.exists()


def test_a_file_that_is_not_a_bundle_is_one_line(tmp_path):
    junk = tmp_path / "junk.cbz"
    junk.write_bytes(b"not a bundle")
    r = cli("site", str(junk), "-o", str(tmp_path / "site"))
    assert r.rc == 2 and r.err.count("\n") == 1 and "not a compbench bundle" in r.err


def test_safe_name():
    from compbench.site.names import safe_name

    assert safe_name("kernel-relu") == "kernel-relu"
    for odd in ("../x", "a/b", "ovl (10 models)", ".hidden", "CON", "é", "x" * 300, ""):
        name = safe_name(odd)
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}", name), (odd, name)
    assert safe_name("a b") != safe_name("a_b")


def test_results_of_other_settings_are_one_line_naming_them(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(kernel_suite("s", "leak", relu=False))
    results = _run(suite.read_text(), tmp_path, "s")
    suite.write_text(kernel_suite("s", "leak", relu=False).replace("weights: [0.0, 0.4, 1.0]", "weights: [0.0, 0.3, 1.0]"))
    r = cli("site", str(results), "-o", str(tmp_path / "site"))
    assert r.rc == 2 and r.err.count("\n") == 1, r.err
    assert "none of its 2 stored records of suite 's' is of a cell the suite asks for" in r.err
