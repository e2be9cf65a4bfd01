"""``compare`` on the bundled example: docs/spark.md's "Which one, on your data" example
prints what the page says, and ``timebound compare`` writes its HTML page, whose
figures headless Chromium renders (skipped where Chromium is not installed)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
EXAMPLE = str(files("timebound.examples") / "atmostonce.jsonl")


def docs_example() -> tuple[str, str]:
    """The ```python block after ``<!-- runnable: compare -->`` and what it prints."""
    text = (ROOT / "docs" / "spark.md").read_text(encoding="utf-8")
    found = re.findall(r"<!-- runnable: compare -->\n```python\n(.*?)```\n\nprints\n\n"
                       r"```text\n(.*?)```", text, re.S)
    assert len(found) == 1
    return found[0]


@pytest.mark.spark
def test_the_docs_example_prints_what_the_page_says(spark: Any) -> None:
    code, printed = docs_example()
    assert "from timebound.spark import compare" in code and "._" not in code
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/spark.md compare example", "exec"), {"__name__": "x"})
    assert out.getvalue() == printed


@pytest.fixture(scope="module")
def page(spark: Any, tmp_path_factory: Any) -> tuple[Path, str]:
    """``timebound compare`` on the bundled example, in this process on the tests'
    Spark session (the command's own session start and stop are replaced)."""
    import timebound.sparkutil
    import timebound.stream._run
    from timebound.cli import main

    out = tmp_path_factory.mktemp("compare") / "compare.html"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timebound.stream._run, "build_session", lambda *a, **k: spark)
        patch.setattr(timebound.sparkutil, "stopped_after",
                      lambda s, owned=True: contextlib.nullcontext(s))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main(["compare", EXAMPLE, "--conn", "conn", "--ts", "ts", "--at", "at",
                         "--receiver", "receiver", "--where", "type = 'msg'",
                         "--watermarks", "8,700", "--quiet", "--out", str(out)]) == 0
    return out, printed.getvalue()


@pytest.mark.spark
def test_the_command_prints_the_table_and_writes_the_page(page: tuple[Path, str]) -> None:
    out, printed = page
    lines = printed.splitlines()
    assert lines[0].split() == ["method", "setting", "reorder_window", "kept",
                                "copies_let_through", "genuine_lost", "state_max",
                                "rho_final", "seconds"]
    assert [line.split()[0] for line in lines[1:-1]] == [
        "at_most_once", "at_most_once", "adaptive_unlimited", "adaptive_limited",
        *["watermark_on_arrival"] * 2, *["watermark_on_send"] * 2]
    assert lines[-1] == str(out)
    html = out.read_text(encoding="utf-8")
    assert html.count('<img alt="') == 4 and "data:image/png;base64," in html
    summary = re.search(r"<p class='summary'>(.*?)</p>", html, re.S)
    assert summary is not None
    assert summary.group(1).startswith(
        "On this data, at_most_once at rho 700 ticks (reorder window 8) lets 0 copies through and "
        "loses 0 genuine messages (0.0%) holding at most 34 entries; the watermark that "
        "lets no copy through is 8 ticks ")
    assert not list(out.parent.glob(".*.partial"))


@pytest.mark.spark
@pytest.mark.parametrize(("args", "reason"), [
    (["missing.parquet"], "INPUT: 'missing.parquet' does not exist"),
    ([EXAMPLE, "--out", "page.txt"], "--out: expected a .html file, got 'page.txt'"),
    ([EXAMPLE], "table 'DataFrame', column 'conn': conn must not be null (1 rows)"),
    ([EXAMPLE, "--rhos", "0,5"], "--rhos: every value must be an integer >= 1, got 0"),
    ([EXAMPLE, "--watermarks", "-3"], "--watermarks: every value must be an integer >= 1, got -3"),
    ([EXAMPLE, "--reorder-windows", "0"],
     "--reorder-windows: every value must be an integer >= 1, got 0"),
    ([EXAMPLE, "--micro-batches", "0"], "--micro-batches: expected an integer >= 1, got 0"),
])
def test_the_command_refuses_in_one_line(args: list[str], reason: str, tmp_path: Path,
                                         capsys: Any, spark: Any,
                                         monkeypatch: Any) -> None:
    import timebound.sparkutil
    import timebound.stream._run
    from timebound.cli import main

    monkeypatch.setattr(timebound.stream._run, "build_session", lambda *a, **k: spark)
    monkeypatch.setattr(timebound.sparkutil, "stopped_after",
                        lambda s, owned=True: contextlib.nullcontext(s))
    monkeypatch.chdir(tmp_path)
    argv = ["compare", *args, "--conn", "conn", "--ts", "ts", "--at", "at"]
    if "--out" not in args:
        argv += ["--out", "page.html"]
    assert main([*argv, "--quiet"]) == 2
    assert capsys.readouterr().err == f"timebound: error: {reason}\n"


def test_an_unwritable_page_is_refused_before_spark_starts(capsys: Any,
                                                          monkeypatch: Any) -> None:
    import timebound.stream._run
    from timebound.cli import main

    def no_spark(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(timebound.stream._run, "build_session", no_spark)
    assert main(["compare", EXAMPLE, "--conn", "conn", "--ts", "ts", "--at", "at",
                 "--out", "/proc/page.html", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("timebound: error: --out: cannot write '/proc/page.html': ")
    assert err.count("\n") == 1


#: appended to a copy of the page: each image's alt text, natural width and shown width.
PROBE = """<script>
const out = [...document.images].map(
  i => [i.alt, i.naturalWidth, Math.round(i.getBoundingClientRect().right)]);
const pre = document.createElement('pre');
pre.id = 'probe';
pre.style.display = 'none';
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


@pytest.mark.spark
@pytest.mark.skipif(BROWSER is None, reason="Chromium is not installed")
def test_the_page_in_chromium_shows_its_figures(page: tuple[Path, str],
                                                tmp_path: Path) -> None:
    from PIL import Image

    assert BROWSER is not None
    probed = tmp_path / "probed.html"
    probed.write_text(page[0].read_text().replace("</body>", PROBE + "</body>"))
    shot = tmp_path / "compare.png"
    dom = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2600",
         f"--screenshot={shot}", "--dump-dom", probed.as_uri()],
        check=True, timeout=120, capture_output=True, text=True,
        env={**os.environ, "HOME": str(tmp_path)}).stdout
    image = Image.open(shot)
    extrema = image.convert("L").getextrema()
    assert image.size == (1200, 2600) and extrema[0] != extrema[1]  # not blank
    found = re.search(r"<pre id=\"probe\"[^>]*>(.*?)</pre>", dom, re.S)
    assert found is not None, "the probe did not run"
    images = json.loads(found.group(1).replace("&quot;", '"'))
    assert [alt for alt, _, _ in images] == [
        "copies let through", "genuine messages lost", "state held at most",
        "adaptive estimate and arrival delays"]
    assert all(width > 300 and right <= 1200 for _, width, right in images), images
