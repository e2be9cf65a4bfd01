"""The docs: what the documentation says is true, and every page it links exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_and_contributing_link_only_existing_files() -> None:
    for page in ("README.md", "CONTRIBUTING.md", "docs/design.md", "docs/errors.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)\)", text):
            assert (ROOT / page).parent.joinpath(target).exists(), (page, target)


def test_errors_page_lists_every_exit_status_and_error_class() -> None:
    import timebound.errors as errors
    from timebound.cli import EXIT_BUG, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE

    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    for status in (EXIT_OK, EXIT_BUG, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED):
        assert f"\n| {status} |" in text, status
    classes = [name for name, value in vars(errors).items() if isinstance(value, type)
               and issubclass(value, errors.TimeboundError) and value is not errors.TimeboundError]
    for name in classes:
        assert f"`{name}`" in text, name


def test_verdicts_are_defined_for_users() -> None:
    text = (ROOT / "docs" / "replay-atmostonce.md").read_text(encoding="utf-8")
    for verdict in ("accepted", "duplicate", "stale", "early", "down"):
        assert re.search(rf"^\| `{verdict}` \| \S", text, re.M), verdict


def test_simulate_page_example_runs_with_the_public_api(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "simulate.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks and all("._" not in block for block in blocks)  # no private module
    done = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verdicts agree" in done.stdout
