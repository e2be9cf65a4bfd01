"""The error classes in two families, after h11: a caller's mistake
(``CallerError``) or garbage from elsewhere (``InputError``), never both."""

from __future__ import annotations

import pytest

from timebound import errors
from timebound.errors import (
    CallerError,
    InputError,
    MalformedDatagram,
    MissingExtra,
    ProtocolUsageError,
    SchemaError,
    StorageError,
    TimeboundError,
    TraceError,
    UsageError,
)


@pytest.mark.parametrize(("error", "family"), [
    (UsageError("--x", "bad"), CallerError),
    (ProtocolUsageError("time went backwards"), CallerError),
    (MissingExtra("timebound pipeline", "spark", "pyspark"), CallerError),
    (MalformedDatagram("truncated"), InputError),
    (TraceError("in.jsonl", 3, "ts", "must be >= 1"), InputError),
    (SchemaError("messages", "ts", "missing"), InputError),
])
def test_each_error_is_in_one_family(error: TimeboundError, family: type) -> None:
    other = InputError if family is CallerError else CallerError
    assert isinstance(error, family) and not isinstance(error, other)
    with pytest.raises(family):
        raise error


def test_every_class_of_the_module_is_placed() -> None:
    """A new error class must say its family (or be one of the stated exceptions)."""
    neither = {TimeboundError, CallerError, InputError, StorageError}
    classes = [c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, TimeboundError)]
    assert len(classes) >= 9
    for cls in classes:
        assert cls in neither or issubclass(cls, CallerError) != issubclass(cls, InputError)
