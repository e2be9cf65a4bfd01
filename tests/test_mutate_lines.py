"""Every mutant of scripts/mutate.py names a line of today's core.

A mutant whose original line is gone (the core was rewritten under it) is reported by
``scripts/mutate.py`` as a bad mutant and tests nothing: the rule it was written for is
then unguarded until someone reads the mutation table. Here it fails the suite, in the
change that moved the line, both for the mutation score's ``MUTANTS`` and for the
reproduction rows' ``ROW_MUTANTS`` (tests/test_reproduction_mutants.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_reproduction_mutants import MUTATE, ROOT  # scripts/mutate.py, loaded once

ALL = [*MUTATE.MUTANTS,
       *(("row", *change) for change in MUTATE.ROW_MUTANTS.values())]


@pytest.mark.parametrize("mutant", ALL, ids=[MUTATE.mutant_name(*m[1:]) for m in ALL])
def test_the_mutant_names_a_line_of_the_core(mutant: tuple[Any, ...]) -> None:
    lines, at = MUTATE.mutant_lines(ROOT / "src", mutant)
    assert at is not None, (
        f"{mutant[1]}: {mutant[2].strip()!r} is not in the core as the mutant says "
        f"({sum(line == mutant[2] for line in lines)} matches): update scripts/mutate.py")
    assert lines[at] != mutant[3], "the replacement is the original line"
