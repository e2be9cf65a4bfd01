"""Mutation testing of the cores: does the suite catch a one-line change of a rule?

Each mutant is ``(file under src/timebound/core, original line, replacement)``. For
each one the script copies ``src/`` to a temporary folder, replaces that exact line
(it must occur exactly once) in the copy, runs the protocol's fast tests with
``PYTHONPATH`` pointing at the copy -- property tests first, then the hand-written
ones -- under a timeout, and deletes the copy. The real source is never edited.

    .venv/bin/python scripts/mutate.py            # every mutant
    .venv/bin/python scripts/mutate.py merge rpc  # only those protocols

Prints one row per mutant (caught by which test, or SURVIVED) and the score.
Exit status 0 when every mutant was caught, 1 otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
TIMEOUT = 300  # seconds per test group

#: protocol -> (property tests, hand-written tests)
TESTS = {
    "atmostonce": (["tests/test_atmostonce_properties.py"],
                   ["tests/test_atmostonce_receiver.py"]),
    "slotted": (["tests/test_slotted_properties.py"], ["tests/test_slotted_core.py"]),
    "merge": (["tests/test_merge_properties.py"], []),
    "causal": (["tests/test_causal_properties.py"], ["tests/test_causal_variants.py"]),
    "stability": (["tests/test_stability_theorems.py"], []),
    "rpc": (["tests/test_rpc_statemachine.py"],
            ["tests/test_rpc_server.py", "tests/test_rpc_client.py"]),
}

AMO = "atmostonce/_receiver.py"
EST = "atmostonce/_estimators.py"
SLOT = "slotted/_receiver.py"
MERGE = "merge/_merger.py"
CAUSAL = "causal/_process.py"
STAB = "stability/_sender.py"

#: (protocol, file, original line, replacement)
MUTANTS: list[tuple[str, str, str, str]] = [
    ("atmostonce", AMO, "            if ts <= last:", "            if ts < last:"),
    ("atmostonce", AMO, "        elif ts <= self.upper:", "        elif ts < self.upper:"),
    ("atmostonce", AMO, "        if latest is not None and ts > latest:",
     "        if latest is not None and ts > latest + 1:"),
    ("atmostonce", AMO, "        if slack is not None and ts > now + slack:",
     "        if slack is not None and ts > now + slack + 1:"),
    ("atmostonce", AMO, "            self.upper = record.latest",
     "            self.upper = record.latest - 1"),
    ("atmostonce", AMO, "        threshold = now - self.estimator.estimate",
     "        threshold = now - self.estimator.estimate + 1"),
    ("atmostonce", AMO, "            if ts > upper:", "            if ts < upper:"),
    ("atmostonce", AMO, "            self.upper = max(self.upper, self._refuse_until)",
     "            self.upper = max(self.upper, self._refuse_until - 1)"),
    ("atmostonce", AMO,
     "                table[conn] = ts  # its expiry key stays below ts: see _evict",
     "                pass"),
    ("atmostonce", EST, "        if maxltime > self.estimate:",
     "        if maxltime > self.estimate + 1:"),
    ("atmostonce", EST,
     "        if self.numacc > self.p * self.numrej and self.estimate > maxltime > 0:",
     "        if self.numacc >= self.p * self.numrej and self.estimate > maxltime > 0:"),
    ("atmostonce", EST, "        self.numacc -= self.p * self.numrej",
     "        self.numacc -= self.numrej"),
    ("slotted", SLOT, "            if order <= self._f_last:",
     "            if order < self._f_last:"),
    ("slotted", SLOT, "            elif order == self._f_last + 1:",
     "            elif order == self._f_last + 2:"),
    ("slotted", SLOT, "            if self._r_delivered < fr.stamp.order:",
     "            if self._r_delivered < fr.stamp.order - 1:"),
    ("slotted", SLOT, "        if stamp.slot < self._slot:",
     "        if stamp.slot < self._slot - 1:"),
    ("slotted", SLOT, "        limit = self._now - self._f_hold",
     "        limit = self._now - self._f_hold + 1"),
    ("merge", MERGE, "        return stamp.r + stamp.c + self._wait",
     "        return stamp.r + stamp.c + self.delta"),
    ("merge", MERGE, "        if due < now:", "        if due <= now:"),
    ("merge", MERGE, "        while heap and heap[0][0] <= now:",
     "        while heap and heap[0][0] < now:"),
    ("merge", MERGE, "        if key in self._seen:", "        if False:"),
    ("causal", CAUSAL,
     "        return self._commit(rt, max(0, self.r + self.c - rt, stamp.r + m_c - rt), kn)",
     "        return self._commit(rt, max(0, self.r + self.c - rt), kn)"),
    ("causal", CAUSAL,
     "            c = max(0, self.r + self.c - rt, stamp.r + stamp.c - rt + 1)",
     "            c = max(0, self.r + self.c - rt, stamp.r + stamp.c - rt)"),
    ("causal", CAUSAL, "        kn = [value if value > 0 else 0 for value in kn]",
     "        kn = [value if value > 1 else 0 for value in kn]"),
    ("stability", STAB,
     "        while buffer and (bound is None or buffer[0][0] <= bound):",
     "        while buffer and (bound is None or buffer[0][0] < bound):"),
    ("stability", STAB,
     "                self._min = ack if self._min is None else min(self._min, ack)",
     "                self._min = ack"),
    ("stability", STAB, "        if current == self._min:", "        if current != self._min:"),
    ("rpc", "rpc/_server.py", "        if entry.reply_time >= now - self.rho_prime:",
     "        if entry.reply_time > now + self.rho_prime:"),
    ("rpc", "rpc/_client.py", "        ts = max(now, last + 1, 1)",
     "        ts = max(now, last, 1)"),
    ("rpc", "rpc/_client.py",
     "            pending.give_up_at = max(pending.give_up_at, now + self.policy.give_up_after)",
     "            pass"),
]


def first_failure(output: str) -> str | None:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split()[1].split(" - ")[0]
    return None


def run_group(tests: list[str], src: Path) -> tuple[str, str | None]:
    """('caught', test) | ('passed', None) | ('timeout', None)."""
    if not tests:
        return "passed", None
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{ROOT}",
               HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", "dev"))
    cmd = [str(PYTHON), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "-o", "addopts=", *tests]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "timeout", None
    if proc.returncode == 0:
        return "passed", None
    return "caught", first_failure(proc.stdout) or f"exit {proc.returncode}"


def check_copy_is_used(src: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([str(PYTHON), "-c", "import timebound; print(timebound.__file__)"],
                         env=env, capture_output=True, text=True, check=True).stdout
    if not out.strip().startswith(str(src)):
        sys.exit(f"mutate: PYTHONPATH copy is not imported first ({out.strip()})")


def main(argv: list[str]) -> int:
    wanted = set(argv) or set(TESTS)
    rows = []
    for protocol, rel, original, replacement in MUTANTS:
        if protocol not in wanted:
            continue
        tmp = Path(tempfile.mkdtemp(prefix="timebound-mutant-"))
        try:
            src = tmp / "src"
            shutil.copytree(ROOT / "src", src,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            path = src / "timebound" / "core" / rel
            lines = path.read_text(encoding="utf-8").split("\n")
            hits = [i for i, line in enumerate(lines) if line == original]
            name = f"{rel}: {original.strip()} -> {replacement.strip()}"
            if len(hits) != 1:
                rows.append((name, f"BAD MUTANT ({len(hits)} matches)"))
                print(f"{rows[-1][1]:<60} {name}", flush=True)
                continue
            lines[hits[0]] = replacement
            path.write_text("\n".join(lines), encoding="utf-8")
            if not rows:
                check_copy_is_used(src)
            props, hand = TESTS[protocol]
            status, test = run_group(props, src)
            if status == "caught":
                verdict = f"caught (property) by {test}"
            elif status == "timeout":
                verdict = "caught (property) by timeout"
            else:
                status, test = run_group(hand, src)
                verdict = ("SURVIVED" if status == "passed" else
                           f"caught (hand) by {test or 'timeout'}")
            rows.append((name, verdict))
            print(f"{verdict:<60} {name}", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    valid = [r for r in rows if not r[1].startswith("BAD")]
    caught = [r for r in valid if r[1].startswith("caught")]
    by_property = [r for r in valid if r[1].startswith("caught (property)")]
    print(f"\nscore: {len(caught)}/{len(valid)} caught "
          f"({len(by_property)} by a property test); "
          f"survivors: {[r[0] for r in valid if r[1] == 'SURVIVED'] or 'none'}")
    bad = [r[0] for r in rows if r[1].startswith("BAD")]
    if bad:
        print(f"mutants whose line was not found: {bad}")
    return 0 if len(caught) == len(valid) and not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
