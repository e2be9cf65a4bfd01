"""``scripts/setup.sh`` installs headless Chromium for the report's screenshot tests
where apt is usable, through ``scripts/chromium.sh``.

The script runs with a PATH of our own: a recording ``apt-get`` (a stand-in for the
system's package manager, which a test may not run: it would change the machine) and,
or not, a ``chromium``. As root without Chromium it installs it with apt and says so
in one line; with Chromium present it does nothing and says nothing; when apt fails,
or the user is not root, it says in one line that the screenshot tests will be
skipped, and the set-up goes on (exit 0).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "chromium.sh"
ROOT_USER = os.geteuid() == 0


def _bin(tmp_path: Path, *, apt_ok: bool, chromium: bool) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("id", "bash"):  # what the script needs besides the shell's builtins
        found = shutil.which(tool)
        assert found, tool
        (folder / tool).symlink_to(found)
    log = tmp_path / "apt.log"
    (folder / "apt-get").write_text(
        f"#!{shutil.which('bash')}\necho \"$*\" >> {log}\nexit {0 if apt_ok else 100}\n")
    (folder / "apt-get").chmod(0o755)
    if chromium:
        (folder / "chromium").write_text(f"#!{shutil.which('bash')}\nexit 0\n")
        (folder / "chromium").chmod(0o755)
    return folder


def _run(tmp_path: Path, **kind: bool) -> tuple[str, list[str]]:
    folder = _bin(tmp_path, **kind)
    done = subprocess.run([str(folder / "bash"), str(SCRIPT)], capture_output=True, text=True,
                          env={"PATH": str(folder)}, timeout=30, check=False)
    assert done.returncode == 0 and done.stderr == "", done
    log = tmp_path / "apt.log"
    return done.stdout, log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(not ROOT_USER, reason="installing with apt needs root")
def test_as_root_without_chromium_it_is_installed_with_apt(tmp_path: Path) -> None:
    out, calls = _run(tmp_path, apt_ok=True, chromium=False)
    assert out == "chromium: installed (apt-get install chromium)\n"
    assert calls == ["install -y -qq chromium"]


def test_with_chromium_nothing_is_done(tmp_path: Path) -> None:
    out, calls = _run(tmp_path, apt_ok=True, chromium=True)
    assert (out, calls) == ("", [])


def test_when_apt_fails_one_line_and_the_setup_goes_on(tmp_path: Path) -> None:
    out, calls = _run(tmp_path, apt_ok=False, chromium=False)
    assert out == ("chromium: not installed (needs apt-get as root); the report screenshot "
                   "tests will be skipped\n")
    if ROOT_USER:  # tried, then an update tried (it fails too: no second install)
        assert calls == ["install -y -qq chromium", "update -qq"]
    else:
        assert calls == []


def test_setup_runs_it() -> None:
    assert "bash scripts/chromium.sh" in (ROOT / "scripts" / "setup.sh").read_text()
