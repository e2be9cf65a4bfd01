"""Live checks on the rpc service (``timebound.net.live rpc``): see ``_live``.

The job ``live-rpc`` runs ``timebound rpc serve --no-marks`` in a process of its own
behind a ``FaultProxy`` (loss and duplication of the datagrams, both ways),
callers making calls with distinct ids through it, and a SIGKILL of the server
mid-load followed by a restart on the same storage and port
(``timebound.net._live_rpc``). Its runs: ``loss`` (the calls that ended before the
kill) and ``kill`` (the calls in flight at the kill or issued after it). Executions
are counted in the server's execution ledger (one line per run of the handler,
written before the reply, kept across the SIGKILL).

Two SCMP rows are checked on it:

- §2.3, no duplicate accepted: no call id in the ledger more than once, and every
  answered call in it exactly once, on both runs; the check also needs data that
  could contradict it: calls made, datagrams the proxy duplicated and duplicates the
  server itself caught (a server that ran every arriving copy would show them in the
  ledger).
- §2.4, after a crash: no call first sent after t_cr + beta (t_cr: the SIGKILL) is
  refused by the at-most-once rule (``down``, ``stale`` or ``early``); the check also
  needs such calls, and calls refused ``down`` by the restarted server (the recovered
  bound at work, so that the crash really lost the table). The server's rho is its
  default (minutes), so its GC forgets nothing during the run: GC waits for pending
  messages after the restart, the row's hypothesis.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._base import Live, Missing, Sources, Values, _get

JOB = "live-rpc"
#: Fewest calls (both runs together) a run must make for the duplicate check to count.
MIN_CALLS = 100

#: label of this service's live job (a ``Sources`` key) -> the ``timebound.net.live`` kind
JOBS: Mapping[str, str] = {JOB: "rpc"}

_RUNS = ("loss", "kill")


def _total(s: Sources, measure: str) -> float:
    runs = s[JOB]
    if not runs:
        raise Missing(JOB)
    return sum(_get(runs, run, measure) for run in _RUNS)


def _duplicates(s: Sources) -> Values:
    return [("duplicates", _total(s, "duplicates"), ".0f"),
            ("answered not run once", _total(s, "answered_not_run_once"), ".0f"),
            ("calls", _total(s, "calls"), ".0f"),
            ("dup. datagrams", _total(s, "datagrams_duplicated"), ".0f"),
            ("caught by the server", _total(s, "server_duplicates"), ".0f")]


def _duplicates_ok(v: dict[str, float]) -> bool:
    return (v["duplicates"] == 0 and v["answered not run once"] == 0
            and v["calls"] >= MIN_CALLS and v["dup. datagrams"] > 0
            and v["caught by the server"] > 0)


def _crash(s: Sources) -> Values:
    runs = s[JOB]
    return [("refused after t_cr + beta", _get(runs, "kill", "refused_after_crash_beta"),
             ".0f"),
            ("of", _get(runs, "kill", "sent_after_crash_beta"), ".0f"),
            ("refused down (recovered bound)", _get(runs, "kill", "refused_down"), ".0f"),
            ("restart (s)", _get(runs, "kill", "restart_s"), ".2f")]


def _crash_ok(v: dict[str, float]) -> bool:
    return (v["refused after t_cr + beta"] == 0 and v["of"] > 0
            and v["refused down (recovered bound)"] > 0)


#: What runs (``timebound.net._live_rpc``'s ``LOSS``, ``DUPLICATE``, ``FULL``, ``QUICK``;
#: ``tests/test_live_rpc.py`` checks that this text quotes them).
_SETUP = ("live: timebound rpc serve --no-marks (a process of its own, latest on "
          "storage) behind a FaultProxy losing 10% and duplicating 10% of the datagrams "
          "both ways; 16 callers (8 with --quick) making sequential calls with distinct "
          "ids and retransmissions; SIGKILL after 1.5 s (0.35 s), restart on the same "
          "storage and port, beta 1 s (0.5 s), calls until 1 s (0.25 s) past t_cr + beta; "
          "executions counted in the handler's ledger, which survives the SIGKILL")

#: claim text of a row -> its live check on this service
LIVE: Mapping[str, Live] = {
    "no duplicate accepted, whatever rho or the clocks (2.3)": Live(
        JOB, _duplicates, _duplicates_ok,
        _SETUP + ". Differs if a call id is in the ledger twice or an answered call is "
        "not in it once, on any seed; not shown (differs too) if the proxy duplicated "
        f"nothing, the server caught no duplicate, or fewer than {MIN_CALLS} calls ran",
        why="a call ran twice (duplicates or answered not run once above), or the run "
            "could not show it (no duplicated datagram caught by the server, or too "
            "few calls)",
        checks_ms=lambda runs: _get(runs, "kill", "beta_s") * 1000, checks="beta"),
    "after a crash, all messages sent after t_cr + beta are accepted, if GC waits for "
    "pending messages after the restart (2.4)": Live(
        JOB, _crash, _crash_ok,
        _SETUP + " (t_cr: the SIGKILL; rho the default, minutes: GC forgets nothing "
        "during the run). Differs if a call first sent after t_cr + beta is refused "
        "down, stale or early on any seed; not shown (differs too) if no call was sent "
        "after t_cr + beta or none was refused down (no bound recovered)",
        why="calls sent after t_cr + beta were refused by the restarted server (refused "
            "after t_cr + beta above), or the run could not show it (none sent after "
            "t_cr + beta, or none refused down)",
        checks_ms=lambda runs: _get(runs, "kill", "beta_s") * 1000, checks="beta"),
}

#: claim text of a row this service could check live but does not -> why
NO_LIVE: Mapping[str, str] = {}
