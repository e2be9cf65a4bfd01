"""The RPC bench's bars judged over its runs, and the reproduction row that reads them.

``timebound rpc bench`` keeps each run's median per cell and judges a bar on the
median of the per-run ratios (``timebound.net._bench``); the RPC row of the
reproduction table (``timebound.claims._rpc``) gives no verdict below three runs per
cell and quotes, in its cause, only the figures of the bench file. Made-up latencies
stand in for the measurement here (no bench runs): the bench's own table writer makes
the file the reader reads.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest

from timebound.claims import RPC_BENCH
from timebound.claims._rpc import bench_verdict, rpc_bench_bars
from timebound.net._bench_report import BAR_I, BAR_II, cell_of, format_table, judge_bar, run_ratios

#: a cell from constant latencies: run k measured ``value`` µs on every call
CALLS = 11


def _cell(*run_medians: float) -> dict[str, Any]:
    return cell_of([[value] * CALLS for value in run_medians])


def _results(runs: int, **given: tuple[float, ...]) -> dict[str, Any]:
    """Results of one loop (asyncio) with every non-gRPC protocol, each run of a cell
    at a fixed median except the cells ``given`` as ``MODE_PROTOCOL=(run medians)``
    (``seq_amo``, ``fresh_tcp``: tcp-per-call), so that only those move the bars."""
    flat = {"amo": 100.0, "udp": 100.0, "udp-raw": 90.0, "tcp-one-connection": 110.0,
            "tcp-per-call": 300.0}
    modes: dict[str, Any] = {}
    for mode in ("seq", "fresh", "shared"):
        modes[mode] = {}
        for proto, value in flat.items():
            key = f"{mode}_{'tcp' if proto == 'tcp-per-call' else proto}"
            modes[mode][proto] = _cell(*given.get(key, (value,) * runs))
    modes["fresh"]["tcp-one-connection"] = None
    modes["shared"]["tcp-one-connection"] = None
    return {"asyncio": modes}


def _bar_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "(bar:" in line]


def _write(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / RPC_BENCH
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- the bench: per-run ratios, their median, the line ---------------------------------


def test_each_run_keeps_its_median_beside_the_pooled_figures() -> None:
    cell = cell_of([[10.0, 12.0, 14.0], [30.0, 31.0, 50.0]])
    assert cell["run_medians"] == [12.0, 31.0]
    assert (cell["median"], cell["n"]) == (pytest.approx(22.0), 6)
    assert set(cell) == {"median", "p99", "n", "run_medians"}


def test_run_k_is_divided_by_run_k() -> None:
    assert run_ratios([110.0, 100.0, 90.0], [100.0, 80.0, 100.0]) == \
        pytest.approx([1.1, 1.25, 0.9])
    with pytest.raises(ValueError):
        run_ratios([1.0, 2.0], [1.0])


def test_a_bar_straddled_by_the_runs_is_inside_the_noise() -> None:
    judged = judge_bar(1.06, [0.98, 1.12, 1.05, 1.04, 1.11], "<=", BAR_I)
    assert (judged.median, judged.met, judged.met_runs, judged.noise) == (1.05, True, 3, True)
    steady = judge_bar(1.06, [1.01, 1.02, 1.03], "<=", BAR_I)
    assert (steady.met_runs, steady.noise) == (3, False)
    missed = judge_bar(1.5, [1.4, 2.1, 1.9], ">=", BAR_II)
    assert (missed.median, missed.met, missed.met_runs, missed.noise) == (1.9, False, 1, True)
    # judged as printed: 1.104 shows as 1.10, which meets <= 1.10
    assert judge_bar(1.104, [1.104], "<=", BAR_I).met


def test_the_bar_is_judged_on_the_median_of_the_runs_not_on_the_pooled_ratio() -> None:
    # run 1 caught the at-most-once client under load; runs 2 and 3 did not. The pooled
    # medians give 100/45 = 2.22 (not met); the per-run ratios 2.50, 1.05, 1.07 have the
    # median 1.07 (met).
    results = _results(3, seq_amo=(100.0, 105.0, 48.0), seq_udp=(40.0, 100.0, 45.0))
    seq = results["asyncio"]["seq"]
    assert seq["amo"]["median"] / seq["udp"]["median"] > BAR_I  # the pooled ratio misses
    line = _bar_lines(format_table(results, CALLS, 3))[0]
    assert line == ("- (i) at-most-once / plain UDP = 2.22 (per run: 1.05-2.50, median 1.07, "
                    "met in 2 of 3 runs, inside run-to-run noise) (bar: <= 1.10: met)")
    # and the other way round: the pooled ratio meets (ii) (210 / 100), the median of
    # the per-run ratios 1.80, 2.10, 1.95 does not
    results = _results(3, fresh_amo=(50.0, 100.0, 200.0), fresh_tcp=(90.0, 210.0, 390.0))
    fresh = results["asyncio"]["fresh"]
    assert fresh["tcp-per-call"]["median"] / fresh["amo"]["median"] >= BAR_II
    line = _bar_lines(format_table(results, CALLS, 3))[2]
    assert line == ("- (ii, fresh) TCP per call / at-most-once = 2.10 (per run: 1.80-2.10, "
                    "median 1.95, met in 1 of 3 runs, inside run-to-run noise) "
                    "(bar: >= 2.00: not met)")


def test_fig_3_3_similar_to_udp_is_a_bar_and_a_row_of_its_own(tmp_path: pathlib.Path) -> None:
    """(ii, fresh) at-most-once / plain UDP, one call from each fresh client, is judged
    on <= 1.10 like (i); its row reads that bar alone, and the cost row does not."""
    from timebound.claims._rpc import COST_BARS, FRESH_UDP_BARS

    results = _results(3, fresh_amo=(104.0, 120.0, 108.0))  # fresh UDP: 100 each run
    line = _bar_lines(format_table(results, CALLS, 3))[1]
    assert line == ("- (ii, fresh) at-most-once / plain UDP = 1.08 (per run: 1.04-1.20, "
                    "median 1.08, met in 2 of 3 runs, inside run-to-run noise) "
                    "(bar: <= 1.10: met)")
    _write(tmp_path, format_table(results, CALLS, 3))
    measured, verdict, runs = bench_verdict(str(tmp_path), FRESH_UDP_BARS)
    assert (verdict, runs) == ("agrees", 3)
    assert measured == ("asyncio (ii, fresh) at-most-once / plain UDP: median 1.08x, per run "
                        "1.04-1.20, met in 2 of 3 runs, inside run-to-run noise (bar met)")
    assert "(ii, fresh) at-most-once" not in bench_verdict(str(tmp_path), COST_BARS)[0]
    _write(tmp_path, format_table(_results(3, fresh_amo=(115.0, 120.0, 108.0)), CALLS, 3))
    verdict = bench_verdict(str(tmp_path), FRESH_UDP_BARS)[1]
    assert verdict.startswith("differs (over 3 bench runs per cell, each bar judged on the "
                              "median of its per-run ratios): bars missed on the asyncio "
                              "loop: asyncio (ii, fresh) at-most-once / plain UDP: median "
                              "1.15x"), verdict
    assert "TCP per call is itself" not in verdict
    assert bench_verdict(str(tmp_path), COST_BARS)[1] == "agrees"
    # a file written before the bar: the row is not measured, the cost row still is
    _write(tmp_path, "\n".join(x for x in format_table(results, CALLS, 3).splitlines()
                               if "(ii, fresh) at-most-once" not in x))
    assert bench_verdict(str(tmp_path), FRESH_UDP_BARS)[1].startswith("not yet measured")
    assert bench_verdict(str(tmp_path), COST_BARS)[1] == "agrees"


def test_the_files_text_states_the_rule() -> None:
    text = format_table(_results(3), CALLS, 3)
    assert "The bar is judged on the median of the per-run ratios" in text
    assert f"{CALLS} calls x 3 run(s) per cell" in text


# -- the reproduction row: reader, verdict, cause ------------------------------------------


def _missed_file(runs: int = 3) -> str:
    """A bench file whose (i) bar every run misses (ratios 1.20, 1.30, 1.25, 1.30, 1.20)."""
    amo = tuple(120.0 + 10.0 * (k % 2) + (5.0 if k == 2 else 0.0) for k in range(runs))
    return ("In-process cost of one at-most-once null call, client and server cores "
            "together, no sockets (CPU time, best of 5): 3.6 µs (mypyc-compiled core).\n\n"
            + format_table(_results(runs, seq_amo=amo), CALLS, runs) + "\n")


def test_the_reader_gets_every_bar_with_its_runs(tmp_path: pathlib.Path) -> None:
    path = _write(tmp_path, _missed_file())
    bars = rpc_bench_bars(str(path))
    assert bars is not None
    assert [b.label for b in bars] == [
        "asyncio (i) at-most-once / plain UDP", "asyncio (ii, fresh) at-most-once / plain UDP",
        "asyncio (ii, fresh) TCP per call / at-most-once",
        "asyncio (ii, shared) TCP per call / at-most-once"]
    first = bars[0]
    assert (first.runs, first.low, first.high, first.median, first.met_runs, first.met,
            first.noise, first.per_run) == (3, 1.2, 1.3, 1.25, 0, False, False, True)


def test_three_runs_give_a_verdict(tmp_path: pathlib.Path) -> None:
    _write(tmp_path, format_table(_results(3, seq_amo=(104.0, 98.0, 112.0)), CALLS, 3))
    measured, verdict, runs = bench_verdict(str(tmp_path))
    assert (verdict, runs) == ("agrees", 3)
    assert ("asyncio (i) at-most-once / plain UDP: median 1.04x, per run 0.98-1.12, met in 2 "
            "of 3 runs, inside run-to-run noise (bar met)") in measured
    _write(tmp_path, _missed_file())
    measured, verdict, runs = bench_verdict(str(tmp_path))
    assert verdict.startswith("differs (over 3 bench runs per cell, each bar judged on the "
                              "median of its per-run ratios): bars missed on the asyncio loop: "
                              "asyncio (i) at-most-once / plain UDP: median 1.25x, per run "
                              "1.20-1.30, met in 0 of 3 runs; what is left is 3.6 us"), verdict
    assert runs == 3


@pytest.mark.parametrize("runs", [1, 2])
def test_fewer_than_three_runs_give_no_verdict(tmp_path: pathlib.Path, runs: int) -> None:
    _write(tmp_path, _missed_file(runs))
    measured, verdict, n = bench_verdict(str(tmp_path))
    assert verdict == ("not yet measured (needs `timebound rpc bench --runs 3` or more: "
                       f"{RPC_BENCH} has {runs} run(s) per cell)")
    assert n == 0
    assert "asyncio (i) at-most-once / plain UDP: median 1.2" in measured
    assert f"per run 1.20-1.{'2' if runs == 1 else '3'}0, met in 0 of {runs} run" in measured


def test_a_file_without_per_run_figures_gives_no_verdict(tmp_path: pathlib.Path) -> None:
    _write(tmp_path, "### event loop: asyncio\n\n"
                     "- (i) at-most-once / plain UDP = 1.80 (bar: <= 1.10: not met)\n"
                     "- (ii, fresh) TCP per call / at-most-once = 2.5 (bar: >= 2: met)\n"
                     "Null calls on loopback, 1000 calls x 5 run(s) per cell\n")
    bars = rpc_bench_bars(str(tmp_path / RPC_BENCH))
    assert bars is not None and [(b.runs, b.median, b.met, b.per_run) for b in bars] == [
        (1, 1.8, False, False), (1, 2.5, True, False)]
    measured, verdict, n = bench_verdict(str(tmp_path))
    assert verdict == ("not yet measured (needs `timebound rpc bench --runs 3` or more: "
                       f"{RPC_BENCH} has no per-run ratios)")
    assert (measured, n) == ("asyncio (i) at-most-once / plain UDP: 1.80x (bar not met), "
                             "asyncio (ii, fresh) TCP per call / at-most-once: 2.50x "
                             "(bar met)", 0)
    assert bench_verdict(str(tmp_path / "elsewhere"))[1].startswith("not yet measured")


def test_the_cause_quotes_only_the_files_figures(tmp_path: pathlib.Path) -> None:
    text = _missed_file(5)
    _write(tmp_path, text)
    cause = bench_verdict(str(tmp_path))[1].split(": ", 1)[1]
    # every number of the cause is in the file (labels such as (i) hold none)
    for figure in re.findall(r"\d+(?:\.\d+)?", cause):
        assert figure in text, (figure, cause)
    assert "per run 1.20-1.30, met in 0 of 5 runs" in cause
    # change the figures in the file: the cause follows
    _write(tmp_path, text.replace("(per run: 1.20-1.30, median 1.25, met in 0 of 5 runs)",
                                  "(per run: 1.07-1.31, median 1.17, met in 2 of 5 runs, "
                                  "inside run-to-run noise)")
           .replace("3.6 µs", "4.4 µs").replace("| plain UDP | 100 |", "| plain UDP | 97 |"))
    after = bench_verdict(str(tmp_path))[1]
    assert ("asyncio (i) at-most-once / plain UDP: median 1.17x, per run 1.07-1.31, met in 2 "
            "of 5 runs, inside run-to-run noise; what is left is 4.4 us") in after, after
    assert "(97 us: plain UDP's median in (i)" in after
    assert "1.20-1.30" not in after


def test_an_unwritable_out_fails_before_measuring(tmp_path: pathlib.Path) -> None:
    """``--out`` is checked before any server starts: one line, exit 2, nothing run."""
    import subprocess
    import sys

    blocked = tmp_path / "file"
    blocked.write_text("mine\n")
    done = subprocess.run([sys.executable, "-m", "timebound.cli", "rpc", "bench", "--smoke",
                           "--no-grpc", "--out", str(blocked / "sub")],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"timebound: error: --out: cannot create '{blocked / 'sub'}': Not a directory"]
    assert blocked.read_text() == "mine\n"
