"""A streaming query's progress line names what each number is: the
state's rows, and the state store's memory -- which jumps after a restart with the
same rows, so it is not called the state's size."""

from __future__ import annotations

from timebound.durations import format_bytes as human_bytes
from timebound.stream._run import progress_line


def test_the_line_names_the_rows_and_the_store_memory() -> None:
    progress = {"batchId": 3, "numInputRows": 10,
                "stateOperators": [{"numRowsTotal": 2, "memoryUsedBytes": 9416}]}
    line = progress_line(progress, (10, {"accepted": 7, "duplicate": 3}))
    assert line == ("batch 3: 10 rows in, 10 out (accepted 7 duplicate 3), "
                    "state 2 rows, store memory 9.2 KiB")
    assert [human_bytes(n) for n in (0, 1023, 1024, 1_048_576, 3 * 2**30)] == [
        "0 B", "1023 B", "1.0 KiB", "1.0 MiB", "3.0 GiB"]
