"""Pickling of the frozen records of the compiled core (``timebound._compiled``).

A frozen dataclass unpickles by default by assigning its fields, which a frozen class
compiled with mypyc refuses; the frozen records of the compiled modules therefore
define ``__reduce__`` as ``by_constructor``: they unpickle through their constructor
(the same record, checked again by ``__post_init__``), compiled or not.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def by_constructor(record: Any) -> tuple[Any, tuple[Any, ...]]:
    """``__reduce__`` of a frozen record: unpickled through its constructor."""
    return (type(record), tuple(getattr(record, f.name) for f in fields(record)))
