"""A streaming checkpoint remembers its protocol, options, source and sink
(``timebound.stream._lock``): a restart with another one is refused
in one line, exit 2, before Spark starts; the same ones pass; a checkpoint that never
planned a micro-batch takes new ones. No Spark here: the refusal must come first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.adapters.merge import MergeOptions
from timebound.cli import main as cli_main
from timebound.errors import UsageError
from timebound.stream import _commands
from timebound.stream._lock import LOCK_NAME, lock_query, option_values

AMO = ["--estimator", "fixed", "--rho", "64", "--gc-every", "1000"]


def _options(args: list[str]) -> AtMostOnceOptions:
    values: dict[str, object] = {}
    for flag, value in zip(args[::2], args[1::2]):
        key = flag[2:].replace("-", "_")
        values[key] = value if key == "estimator" else int(value)
    return AtMostOnceOptions.from_values(values)


def _started(tmp_path: Path, args: list[str] = AMO) -> tuple[Path, Path, Path]:
    """A checkpoint first started with ``args`` that has planned a micro-batch."""
    source, ck, sink = tmp_path / "in", tmp_path / "ck", tmp_path / "out"
    source.mkdir()
    lock_query(str(ck), "atmostonce", option_values(_options(args)), str(source), str(sink))
    (ck / "offsets").mkdir()
    return source, ck, sink


def test_lock_records_every_option_under_its_flag(tmp_path: Path) -> None:
    source, ck, sink = _started(tmp_path)
    saved = json.loads((ck / LOCK_NAME).read_text())
    assert saved["protocol"] == "atmostonce"
    assert saved["options"]["--gc-every"] == 1000 and saved["options"]["--rho"] == 64
    assert saved["options"]["--reorder-window"] == 1 and saved["options"]["--classes"] == 1
    assert (saved["--source"], saved["--sink"]) == (str(source), str(sink))
    # the same options again: accepted, lock unchanged
    lock_query(str(ck), "atmostonce", option_values(_options(AMO)), str(source), str(sink))
    assert json.loads((ck / LOCK_NAME).read_text()) == saved


@pytest.mark.parametrize("args, flag, old, new", [
    (["--estimator", "fixed", "--rho", "64", "--gc-every", "2000"], "--gc-every", "1000", "2000"),
    (["--estimator", "unlimited", "--gc-every", "1000"], "--estimator", "fixed", "unlimited"),
    ([*AMO, "--reorder-window", "4"], "--reorder-window", "1", "4"),
    ([*AMO, "--classes", "3"], "--classes", "1", "3"),
])
def test_another_option_is_refused_naming_it(tmp_path: Path, args: list[str], flag: str,
                                             old: str, new: str) -> None:
    source, ck, sink = _started(tmp_path)
    with pytest.raises(UsageError) as caught:
        lock_query(str(ck), "atmostonce", option_values(_options(args)), str(source),
                   str(sink))
    assert str(caught.value) == (f"{flag}: the checkpoint {ck} was started with {old}, not "
                                 f"{new}; use a new --checkpoint or the same options")


@pytest.mark.parametrize("flag", ["--source", "--sink"])
def test_another_source_or_sink_is_refused(tmp_path: Path, flag: str) -> None:
    source, ck, sink = _started(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    paths = {"--source": str(source), "--sink": str(sink), flag: str(other)}
    with pytest.raises(UsageError, match=f"^{flag}: the checkpoint .* was started with "
                                         f".*, not {other}; use a new --checkpoint"):
        lock_query(str(ck), "atmostonce", option_values(_options(AMO)), paths["--source"],
                   paths["--sink"])


def test_another_protocol_is_refused(tmp_path: Path) -> None:
    source, ck, sink = _started(tmp_path)
    with pytest.raises(UsageError, match="^--checkpoint: .* was started by 'timebound "
                                         "stream atmostonce', not 'merge'"):
        lock_query(str(ck), "merge", option_values(MergeOptions(2, 3)), str(source),
                   str(sink))


def test_a_checkpoint_that_never_ran_a_batch_takes_new_options(tmp_path: Path) -> None:
    source, ck, sink = _started(tmp_path)
    (ck / "offsets").rmdir()
    new = ["--estimator", "fixed", "--rho", "64", "--gc-every", "2000"]
    lock_query(str(ck), "atmostonce", option_values(_options(new)), str(source), str(sink))
    assert json.loads((ck / LOCK_NAME).read_text())["options"]["--gc-every"] == 2000


def test_cli_refuses_in_one_line_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    source, ck, sink = _started(tmp_path)

    def no_spark(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(_commands, "build_session", no_spark)
    code = cli_main(["stream", "atmostonce", "--source", str(source), "--checkpoint", str(ck),
                     "--sink", str(sink), "--estimator", "fixed", "--rho", "64",
                     "--gc-every", "2000"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (f"timebound: error: --gc-every: the checkpoint {ck} was started with "
                   f"1000, not 2000; use a new --checkpoint or the same options\n")


@pytest.mark.parametrize("flag", ["--checkpoint", "--sink"])
@pytest.mark.parametrize("where", ["/proc/timebound-out", "/proc"])
def test_a_folder_that_cannot_be_written_is_refused_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, flag: str, where: str) -> None:
    """Found by trying it: a merge stream with ``--sink /proc/x`` started Spark, then
    could not stop. A folder that cannot be created, or an existing one that cannot be
    written in, is refused first."""
    def no_spark(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(_commands, "build_session", no_spark)
    (tmp_path / "in").mkdir()
    folders = {"--checkpoint": str(tmp_path / "ck"), "--sink": str(tmp_path / "out"),
               flag: where}
    code = cli_main(["stream", "merge", "--source", str(tmp_path / "in"),
                     "--checkpoint", folders["--checkpoint"], "--sink", folders["--sink"],
                     "--epsilon", "2", "--delta", "3"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"timebound: error: {flag}: cannot write "), err
    assert where in err and err.count("\n") == 1
    assert not (tmp_path / "ck").exists() and not (tmp_path / "out").exists()
