"""Errors a Spark user can read.

A bad row stops ``at_most_once``'s job inside Spark; without ``typed_errors()`` the user
reads Spark's exception, so its message is one sentence naming the column, the reason
and the row -- no marker, no JSON -- and the same sentence is the exact encoding
``typed_errors()`` (``timebound.sparkutil.rebuild``) reads back into the typed error.
A null reads ``<role> must not be null``, an empty identifier ``<role> must not be
empty`` (``timebound.spark._check.prepared``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.errors import (
    SchemaError,
    StorageError,
    TimeboundError,
    TraceError,
    UsageError,
)

ROOT = Path(__file__).resolve().parent.parent
GOOD = {"rho": 100, "gc_every": 10}
SCHEMA = "user string, sent long, at long"
#: (row, column, reason) -- the reason's row part follows the column order.
BAD_ROWS = [
    (("u1", None, 5), "sent", "ts must not be null (row with user = u1, sent = null, at = 5)"),
    ((None, 3, 5), "user", "conn must not be null (row with user = null, sent = 3, at = 5)"),
    (("", 3, 5), "user", "conn must not be empty (row with user = '', sent = 3, at = 5)"),
    (("u1", 0, 5), "sent", "ts must be >= 1 (row with user = u1, sent = 0, at = 5)"),
    (("u1", 3, -1), "at", "at must be >= 0 (row with user = u1, sent = 3, at = -1)"),
    (("u1", 3, None), "at", "at must not be null (row with user = u1, sent = 3, at = null)"),
    # several faults: the first in the order receiver, conn, ts, at (a null first)
    ((None, 0, -1), "user", "conn must not be null (row with user = null, sent = 0, at = -1)"),
    (("u1", 0, None), "sent", "ts must be >= 1 (row with user = u1, sent = 0, at = null)"),
    (("", None, -1), "user", "conn must not be empty (row with user = '', sent = null, "
                             "at = -1)"),
]


def failed(spark: Any, row: tuple[Any, ...], schema: str = SCHEMA, **roles: Any) -> Any:
    """The Spark exception the job over ``row`` raises (no ``typed_errors``)."""
    from timebound.spark import at_most_once

    df = spark.createDataFrame([row], schema)
    out = at_most_once(df, **(roles or {"conn": "user", "ts": "sent", "at": "at"}), **GOOD)
    with pytest.raises(Exception) as raised:
        out.collect()
    assert not isinstance(raised.value, TimeboundError)  # Spark's own, as a user gets it
    return raised.value


# -- what a user reads without typed_errors(), and what typed_errors() gives ----------


@pytest.mark.spark
@pytest.mark.parametrize(("row", "column", "reason"), BAD_ROWS,
                         ids=["null ts", "null conn", "empty conn", "ts 0", "at -1",
                              "null at", "null conn, ts 0, at -1", "ts 0, null at",
                              "empty conn, null ts, at -1"])
def test_the_message_is_one_sentence_typed_errors_reads(spark: Any, row: tuple[Any, ...],
                                                        column: str, reason: str) -> None:
    from timebound.spark import typed_errors

    exc = failed(spark, row)
    message = str(exc)
    sentence = (f"timebound SchemaError: table 'DataFrame', column '{column}': "
                f'"{reason}"')
    assert message == f"[USER_RAISED_EXCEPTION] {sentence} SQLSTATE: P0001"
    assert "@@" not in message and "[\"" not in message and "\n" not in message
    with pytest.raises(SchemaError) as raised, typed_errors():
        raise exc
    assert (raised.value.table, raised.value.column, raised.value.reason) == (
        "DataFrame", column, reason)
    assert str(raised.value) == f"table 'DataFrame', column '{column}': {reason}"


@pytest.mark.spark
def test_a_row_value_with_quotes_and_line_breaks_stays_on_one_line(spark: Any) -> None:
    from timebound.spark import SchemaError as Exported
    from timebound.spark import typed_errors

    user = 'a "b" \\ c\nd\re\tf\u2028g \'h\' ${x} é'
    exc = failed(spark, (user, None, 5))
    message = str(exc)
    assert len(message.splitlines()) == 1
    assert message.startswith("[USER_RAISED_EXCEPTION] timebound SchemaError: table "
                              "'DataFrame', column 'sent': \"ts must not be null (row "
                              'with user = a \\"b\\" \\\\ c\\nd\\re\\tf\\u2028g')
    reason = f"ts must not be null (row with user = {user}, sent = null, at = 5)"
    with pytest.raises(Exported) as raised, typed_errors():
        raise exc
    assert raised.value.reason == reason


@pytest.mark.spark
def test_typed_errors_around_the_action(spark: Any) -> None:
    from timebound.spark import at_most_once, typed_errors

    df = spark.createDataFrame([("u1", None, 5)], SCHEMA)
    out = at_most_once(df, conn="user", ts="sent", at="at", **GOOD)
    with pytest.raises(SchemaError) as raised, typed_errors():
        out.collect()
    assert str(raised.value) == ("table 'DataFrame', column 'sent': ts must not be null "
                                 "(row with user = u1, sent = null, at = 5)")


@pytest.mark.spark
def test_docs_show_what_spark_says(spark: Any) -> None:
    """docs/spark.md's row-check example: the message as Spark raises it, and what
    ``typed_errors()`` gives (its printed line)."""
    from timebound.spark import typed_errors

    text = (ROOT / "docs" / "spark.md").read_text(encoding="utf-8")
    shown = re.search(r"^```\n(\[USER_RAISED_EXCEPTION\] .*)\n```$", text, re.M)
    printed = re.search(r"^# (sent_us \| .*)$", text, re.M)
    assert shown is not None and printed is not None
    exc = failed(spark, ("u7", None, 12), "user_id string, sent_us long, received_us long",
                 conn="user_id", ts="sent_us", at="received_us")
    assert str(exc) == shown.group(1)
    with pytest.raises(SchemaError) as raised, typed_errors():
        raise exc
    assert f"{raised.value.column} | {raised.value.reason}" == printed.group(1)
    assert 'setLogLevel("FATAL")' in text


@pytest.mark.spark
def test_a_null_or_empty_receiver_is_named_so(spark: Any) -> None:
    from timebound.spark import at_most_once, typed_errors

    schema = SCHEMA + ", node string"
    for node, said in ((None, "receiver must not be null"), ("", "receiver must not be empty")):
        df = spark.createDataFrame([("u1", 3, 5, node)], schema)
        out = at_most_once(df, conn="user", ts="sent", at="at", receiver="node", **GOOD)
        with pytest.raises(SchemaError) as raised, typed_errors():
            out.collect()
        assert raised.value.column == "node"
        assert raised.value.reason.startswith(said + " (row with user = u1, ")


@pytest.mark.spark
def test_a_bad_row_stops_the_job_whatever_columns_the_caller_keeps(spark: Any) -> None:
    """Spark raises the sentence in a filter after the decisions: a projection that keeps
    none of the added columns cannot drop the check."""
    from timebound.spark import at_most_once, typed_errors

    df = spark.createDataFrame([("u0", 1, 1), ("u1", 0, 5)], SCHEMA)
    out = at_most_once(df, conn="user", ts="sent", at="at", **GOOD).select("user")
    with pytest.raises(SchemaError) as raised, typed_errors():
        out.collect()
    assert raised.value.reason == "ts must be >= 1 (row with user = u1, sent = 0, at = 5)"
    assert at_most_once(df.limit(1), conn="user", ts="sent", at="at", **GOOD
                        ).select("user").count() == 1


@pytest.mark.spark
@pytest.mark.parametrize("keep", [None, ["user"]])
def test_a_bad_row_on_a_stream_reads_as_spark_raised_it(spark: Any, tmp_path: Path,
                                                         keep: list[str] | None) -> None:
    """On a stream too the sentence is Spark's own exception (no Python traceback
    before it), on the first line of the query's exception, whatever columns are kept."""
    import json

    from timebound.spark import at_most_once, typed_errors

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps(dict(zip(("user", "sent", "at"), r)))
                                            + "\n" for r in [("u0", 1, 1), ("u1", 3, None)]))
    df = spark.readStream.schema(SCHEMA).json(str(folder))
    out = at_most_once(df, conn="user", ts="sent", at="at", **GOOD)
    if keep is not None:
        out = out.select(*keep)
    query = out.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(availableNow=True).start()
    with pytest.raises(Exception) as raised:
        query.awaitTermination()
    first = str(raised.value).splitlines()[0]
    sentence = ("[USER_RAISED_EXCEPTION] timebound SchemaError: table 'DataFrame', column "
                "'at': \"at must not be null (row with user = u1, sent = 3, at = null)\" "
                "SQLSTATE: P0001")
    assert sentence in first and "Traceback" not in str(raised.value)
    with pytest.raises(SchemaError) as typed, typed_errors():
        raise raised.value
    assert typed.value.column == "at"


def test_the_errors_import_from_timebound_spark() -> None:
    import timebound.errors
    import timebound.spark
    import timebound.sparkutil

    assert timebound.spark.SchemaError is timebound.errors.SchemaError
    assert timebound.spark.UsageError is timebound.errors.UsageError
    assert timebound.spark.typed_errors is timebound.sparkutil.translate_errors
    assert {"SchemaError", "UsageError", "typed_errors"} <= set(timebound.spark.__all__)
    with pytest.raises(timebound.spark.UsageError, match="^rho: required here$"):
        timebound.spark.at_most_once(None, conn="c", ts="t", at="a")  # type: ignore[arg-type]


# -- the encoding: readable, and exact -----------------------------------------------


def test_each_kind_reads_as_a_sentence() -> None:
    from timebound.sparkutil import carried, marked

    said = {
        SchemaError("DataFrame", "sent", "ts must not be null (row with user = u1)"):
            "timebound SchemaError: table 'DataFrame', column 'sent': "
            '"ts must not be null (row with user = u1)"',
        TraceError("messages[run 'a']", 7, "ts", "must be >= 1, got 0"):
            "timebound TraceError: \"messages[run 'a']\", line 7, field 'ts': "
            '"must be >= 1, got 0"',
        UsageError("--gc-every", "required here"):
            "timebound UsageError: option '--gc-every': \"required here\"",
        StorageError("disk full"): 'timebound StorageError: "disk full"',
    }
    for exc, sentence in said.items():
        assert str(marked(exc)) == carried(exc) == sentence
        assert "@@" not in sentence and "[" + '"' not in sentence


#: Any text: quotes, backslashes, colons, line breaks, controls, surrogates.
TEXT = st.text(st.characters(exclude_categories=()))
NOISE = st.text().filter(lambda t: "timebound" not in t)


def _same(got: TimeboundError | None, exc: TimeboundError) -> bool:
    """``got`` is ``exc`` rebuilt: the same kind and fields (any other error: a
    ``TimeboundError`` with its message)."""
    kinds = (TraceError, SchemaError, UsageError)
    want = exc if isinstance(exc, kinds) else TimeboundError(str(exc))
    return (type(got), vars(got) if got is not None else None, str(got)) == (
        type(want), vars(want), str(want))


@given(st.one_of(
    st.builds(TraceError, TEXT, st.integers(), TEXT, TEXT),
    st.builds(SchemaError, TEXT, TEXT, TEXT),
    st.builds(UsageError, TEXT, TEXT),
    st.builds(TimeboundError, TEXT),
    st.builds(StorageError, TEXT),
), NOISE, TEXT)
def test_the_encoding_round_trips(exc: TimeboundError, before: str, after: str) -> None:
    from timebound.sparkutil import carried, marked, rebuild

    sentence = carried(exc)
    assert len(sentence.splitlines()) == 1 and sentence.isprintable()
    assert _same(rebuild(before + sentence + after), exc)
    assert _same(rebuild(str(marked(exc))), exc)


@given(TEXT, st.sampled_from([None, "'", '"']))
def test_quoting_round_trips(text: str, quote: str | None) -> None:
    from timebound.sparkutil import quoted, unquoted

    assert unquoted(quoted(text, quote)) == text
    assert re.fullmatch(r"'[^\n]*'|\"[^\n]*\"", quoted(text, quote))


def test_no_old_marker_is_left() -> None:
    import timebound.sparkutil
    from timebound.sparkutil import rebuild

    assert "@@" not in timebound.sparkutil.MARK
    assert rebuild('@@timebound-error@@["usage","o","r"]@@timebound-error@@') is None
