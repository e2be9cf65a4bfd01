"""Guards every command shares so that timebound never destroys a user's data.

A leaf helper (imports only the standard library and ``timebound.errors``); the drivers
and the CLI call it with one line each:

- ``guard_output``: an output path is never an input, never inside an input folder,
  never a folder holding an input, and an existing output folder is replaced only when
  it holds nothing but what timebound writes there (its *marker* file, e.g.
  ``summary.json`` of a pipeline output, and the names timebound writes beside it).
- ``check_writable``: create and remove a probe file beside an output path before the
  work starts, so an unwritable path (``/proc/x.md``, a read-only folder) fails at once,
  not after the run.
- ``atomic_write_text``: write a temporary file beside the destination, fsync, rename;
  on any exit path (an exception, SIGTERM via ``sigterm_raises``) the temporary file
  is removed and the destination is untouched.
- ``sigterm_raises``: while a command runs, SIGTERM raises ``Terminated`` (a
  ``SystemExit`` with code 143, so that asyncio re-raises it out of a callback as it
  does ``KeyboardInterrupt``, where it logs and swallows any other exception), and every
  ``with``/``finally`` that removes temporary output runs, exactly as for Ctrl-C.
- ``hidden_temp``: create an empty hidden temporary file beside an output path with
  ``Terminated`` held until its name is known to the caller's cleanup, so a SIGTERM
  that lands while the file is being created cannot leave it behind.
- ``follow_umask``: ``tempfile.mkstemp``/``mkdtemp`` create 0600 files and 0700
  folders; a published output gets the permissions of a plain ``open``/``mkdir``.
- Ranges: ``INT64_MIN``/``INT64_MAX``, ``int_range``/``float_range`` (argparse types
  that refuse out-of-range, NaN and infinite values before any work starts).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType

from timebound.errors import UsageError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: The documented range of every numeric replay/pipeline option lives in
#: ``timebound.contract.OPTION_LIMITS`` (checked by the adapters' typed options and by
#: the pipeline's argparse types).


class Terminated(SystemExit):  # noqa: N818 - named like KeyboardInterrupt
    """SIGTERM arrived; raised in the main thread so every cleanup runs.

    A ``SystemExit`` (code 143): asyncio's event loop lets ``SystemExit`` and
    ``KeyboardInterrupt`` leave a callback and logs any other exception, so SIGTERM
    during a timer callback still ends ``asyncio.run`` and reaches the command."""

    def __init__(self) -> None:
        super().__init__(143)


#: While ``_holding`` (the main thread is creating a temporary file, ``hidden_temp``),
#: SIGTERM is only noted in ``_held_signal`` and raised once the file's name is known.
_holding = 0
_held_signal = False


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    global _held_signal
    if _holding:
        _held_signal = True
        return
    raise Terminated()


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises ``Terminated`` in the main thread (no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _held_signal
    _held_signal = False
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def follow_umask(path: str) -> None:
    """Give ``path`` the mode a plain ``open`` (0666) or ``mkdir`` (0777) would, under the
    process umask (``tempfile`` creates 0600 files and 0700 folders)."""
    base = 0o777 if os.path.isdir(path) else 0o666
    os.chmod(path, base & ~current_umask())


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or below it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def guard_output(
    out: str,
    inputs: Iterable[str],
    option: str,
    *,
    folder: bool = False,
    marker: str | None = None,
    ours: Iterable[str] = (),
) -> None:
    """Refuse (``UsageError`` naming ``option``) an output that would destroy data.

    ``out`` must not be an input, lie inside an input folder, or be a folder holding an
    input. A file output must not be an existing folder. A folder output (``folder``)
    that exists must be a folder that is empty, or holds ``marker`` and nothing but
    ``marker`` and the names in ``ours`` (what timebound writes there).
    """
    if out == "-":
        return
    target = _real(out)
    for given in inputs:
        if given == "-":
            continue
        source = _real(given)
        same = target == source
        if not same and os.path.exists(out) and os.path.exists(given):
            with contextlib.suppress(OSError):
                same = os.path.samefile(out, given)
        if same:
            raise UsageError(option, f"'{out}' is the input '{given}'; timebound never "
                             "writes over its input")
        if os.path.isdir(source) and _inside(target, source):
            raise UsageError(option, f"'{out}' is inside the input folder '{given}'")
        if _inside(source, target):
            raise UsageError(option, f"'{out}' holds the input '{given}'")
    if not os.path.exists(out):
        return
    if not folder:
        if os.path.isdir(out):
            raise UsageError(option, f"'{out}' is a folder")
        return
    if not os.path.isdir(out):
        raise UsageError(option, f"'{out}' exists and is not a folder")
    names = set(os.listdir(out))
    if not names:
        return
    allowed = set(ours) | ({marker} if marker else set())
    if marker is None or marker not in names or not names <= allowed:
        foreign = sorted(names - allowed) or sorted(names)
        raise UsageError(option, f"'{out}' exists and holds files timebound did not write "
                         f"(e.g. '{foreign[0]}'); choose a new or empty folder")


def hidden_temp(path: str, suffix: str) -> str:
    """Create an empty file ``.<name of path>.<random><suffix>`` beside ``path`` and
    return its path (``OSError`` as ``tempfile.mkstemp``).

    In the main thread ``Terminated`` is held while the file is created (the handler of
    ``sigterm_raises`` only notes the signal), so it cannot be raised between the file
    appearing and its name being returned; a signal noted meanwhile is raised here,
    after the file is removed."""
    global _holding, _held_signal
    hold = threading.current_thread() is threading.main_thread()
    created: str | None = None
    try:
        _holding += hold
        try:
            fd, created = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.",
                                           suffix=suffix, dir=os.path.dirname(
                                               os.path.abspath(path)))
            os.close(fd)
        finally:
            _holding -= hold
        if hold and _held_signal:
            raise Terminated()
        return created
    except BaseException:
        if created is not None:
            with contextlib.suppress(OSError):
                os.unlink(created)
        if hold and _held_signal:
            _held_signal = False
            raise Terminated() from None  # the signal wins over an error meanwhile
        raise


def check_writable(path: str, option: str) -> None:
    """Fail now if a file cannot be created at ``path`` (probe beside it, removed)."""
    if path == "-":
        return
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(parent):
        raise UsageError(option, f"folder '{parent}' does not exist")
    if os.path.isdir(path):
        raise UsageError(option, f"'{path}' is a folder")
    try:
        probe = hidden_temp(path, ".probe")
    except OSError as exc:
        raise UsageError(option, f"cannot write '{path}': {exc.strerror}") from None
    os.unlink(probe)


def check_writable_folder(path: str, option: str, *, in_place: bool = False) -> None:
    """Fail now if a folder cannot be created beside ``path`` (where the temporary
    output folder goes before it is renamed to ``path``). ``in_place``: a folder
    written where it is (a stream's checkpoint or sink): an existing one must take a
    new entry, a missing one must be creatable. The probe folder is removed."""
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(parent):
        raise UsageError(option, f"folder '{parent}' does not exist")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(option, f"'{path}' exists and is not a folder")
    inside = in_place and os.path.isdir(path)
    try:
        probe = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".probe",
                                 dir=path if inside else parent)
    except OSError as exc:
        raise UsageError(option, f"cannot write {'in ' if inside else ''}'{path}': "
                                 f"{exc.strerror}") from None
    os.rmdir(probe)


def atomic_write_text(path: str, text: str, option: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (temporary file, fsync, rename)."""
    check_writable(path, option)
    tmp = hidden_temp(path, ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        follow_umask(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_int(value: int, option: str, low: int, high: int) -> int:
    """``value`` when it is in ``[low, high]``, else a ``UsageError`` naming ``option``:
    the one range check of the CLI (``int_range`` says the same in argparse)."""
    if not low <= value <= high:
        raise UsageError(option, f"must be in [{low}, {high}], got {value}")
    return value


def int_range(low: int, high: int) -> Callable[[str], int]:
    """argparse ``type=``: an integer in ``[low, high]`` (``check_int``'s words)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        try:
            return check_int(value, "", low, high)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.reason) from None

    parse.__name__ = "integer"
    return parse


def float_range(low: float, high: float) -> Callable[[str], float]:
    """argparse ``type=``: a finite number in ``[low, high]`` (NaN and inf refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a number in [{low:g}, {high:g}], "
                                             f"got {text}")
        return value

    parse.__name__ = "number"
    return parse


def require_extra(extra: str, module: str, command: str) -> None:
    """Import ``module`` or raise ``MissingExtra`` naming the extra to install."""
    from timebound.errors import MissingExtra

    try:
        __import__(module)
    except ImportError:
        raise MissingExtra(command, extra, module) from None
