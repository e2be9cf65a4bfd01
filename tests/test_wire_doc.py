"""docs/wire.md is the wire: frames built byte by byte from its text are accepted.

The test reads the frame table of docs/wire.md ("## Frame": offset, size, field,
value), the RPC message layouts (the code block of "## RPC messages") and the
service-id rule, and builds a frame from them alone: each header byte from its row
(the version number, the kind named "at-most-once RPC", the `AUTH` bit, the key id
rule), the body a CALL laid out field by field, the tag by the documented HMAC rule
over the documented bytes. Those frames are fed to the decoder (``FrameCodec.open``)
and sent to a real ``RpcServer``, keyed (the key as a key file holds it), keyed with
a service id, and without a key; each must be answered with the handler's result, and
the answer read back with the same table. A table that says version 1 (the finding
this test was written for), a wrong kind number, bit or tag length fails it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from timebound.core.wire import FrameCodec, Key, Keyring

DOC = Path(__file__).resolve().parents[1] / "docs" / "wire.md"
#: A key as a key file holds it: 64 lowercase hex characters, used as ASCII bytes.
KEY = b"0123456789abcdef" * 4


@dataclass(frozen=True)
class Row:
    offset: str
    size: str
    field: str
    value: str


def section(title: str) -> str:
    """The text of the ``## title`` section of docs/wire.md."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, f"docs/wire.md has no section {title!r}"
    return match.group(1)


def frame_table() -> list[Row]:
    """The rows of the frame table, in order."""
    lines = [line for line in section("Frame").splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["offset", "size", "field", "value"], header
    rows = []
    for line in lines[2:]:  # after the header and its |---| line
        cells = [cell.strip() for cell in line.strip().strip("|").split("|", 3)]
        rows.append(Row(cells[0], cells[1], cells[2].strip("`"), cells[3]))
    return rows


def number(expression: str, n: int) -> int:
    """A table offset or size (``4``, ``n``, ``4+n``) for a body of ``n`` bytes."""
    assert re.fullmatch(r"[0-9n+ ]+", expression), expression
    return sum(n if term.strip() == "n" else int(term) for term in expression.split("+"))


def service_prefix(service: str) -> bytes:
    """S of the "Service ids" paragraph, built from its text."""
    text = section("Frame")
    match = re.search(r'S = `"([^"]*)" \+ len\(ID\) \+ ID`', text)
    assert match, "no service prefix rule"
    literal = match.group(1).encode("ascii").decode("unicode_escape").encode("latin-1")
    raw = service.encode("utf-8")
    return literal + bytes((len(raw),)) + raw


def build_frame(body: bytes, *, key: bytes | None, service: str = "",
                kind_name: str = "at-most-once RPC") -> bytes:
    """A frame carrying ``body``, byte by byte from the table's rows."""
    frame = b""
    for row in frame_table():
        assert number(row.offset, len(body)) == len(frame), (row, len(frame))
        size = number(row.size, len(body))
        if row.field == "version":
            match = re.match(r"`(\d+)`", row.value)
            assert match, row
            field = bytes((int(match.group(1)),))
        elif row.field == "kind":
            kinds = {name.strip(): int(value)
                     for value, name in re.findall(r"`(\d+)` = ([^,.]+)", row.value)}
            field = bytes((kinds[kind_name],))
        elif row.field == "flags":
            match = re.search(r"bit (\d+) `AUTH`", row.value)
            assert match, row
            field = bytes((1 << int(match.group(1)) if key is not None else 0,))
        elif row.field == "key_id":
            if key is not None:
                match = re.search(r"first byte of (SHA-\d+) of the key", row.value)
                assert match, row
                digest = hashlib.new(match.group(1).replace("-", "").lower(), key).digest()
                field = digest[:1]
            else:
                match = re.search(r"`(\d+)` without `AUTH`", row.value)
                assert match, row
                field = bytes((int(match.group(1)),))
        elif row.field == "body":
            field = body
        elif row.field == "tag":
            assert row.value.startswith("only with `AUTH`"), row
            if key is None:
                continue
            match = re.search(r"first (\d+) bytes of HMAC-(SHA\d+)\(key, S \+ bytes "
                              r"0 \.\. 4\+n-1\)", row.value)
            assert match, row
            covered = (service_prefix(service) if service else b"") + frame
            algorithm = match.group(2).lower()
            field = hmac.new(key, covered, algorithm).digest()[:int(match.group(1))]
        else:
            raise AssertionError(f"unknown row {row}")
        assert len(field) == size, (row, field)
        frame += field
    return frame


def rpc_layouts() -> tuple[list[str], dict[str, tuple[int, list[str]]], dict[str, list[str]]]:
    """The RPC code block: the header's fields, each message's type and fields, and
    the definitions (``payload = ...``, ``result = ...``)."""
    block = re.search(r"```\n(header:.*?)```", section("RPC messages (kind 1)"), re.S)
    assert block, "no RPC layout block"
    header: list[str] = []
    messages: dict[str, tuple[int, list[str]]] = {}
    definitions: dict[str, list[str]] = {}
    for line in block.group(1).splitlines():
        if line.startswith("header:"):
            header = re.split(r"\s{2,}", line.removeprefix("header:").strip())
            continue
        match = re.match(r"([A-Z][A-Z -]*?)\s+(\d+)\s{2}(.*)$", line)
        if not match:
            continue
        cells = re.split(r"\s{2,}", match.group(3).strip())
        fields = []
        for cell in cells:
            if " = " in cell:
                name, _, rest = cell.partition(" = ")
                definitions[name.strip()] = rest.split()
            elif not cell.startswith("("):
                fields.append(cell)
        messages[match.group(1).strip()] = (int(match.group(2)), fields)
    return header, messages, definitions


def encode(tokens: list[str], values: dict[str, Any], layouts: Any) -> bytes:
    """``tokens`` (``name:u8``, ``name:conn_len bytes``, ``header``, ``payload``...)
    laid out with ``values``; a ``X_len`` field is the length of ``X``, ``len`` that
    of the field after it."""
    header, _, definitions = layouts

    def one(token: str) -> bytes:
        name, _, form = token.partition(":")
        if name == "header":
            return encode(header, values, layouts)
        if name in definitions:
            return encode(definitions[name], values, layouts)
        unsigned = re.fullmatch(r"u(\d+)", form)
        if unsigned:
            return int(values[name]).to_bytes(int(unsigned.group(1)) // 8, "big")
        return bytes(values[name])

    out = b""
    for i, token in enumerate(tokens):
        name = token.partition(":")[0]
        if name.endswith("_len") and name not in values:
            target = next(t for t in tokens if t.partition(":")[0] == name[:-4])
            out += len(one(target)).to_bytes(1, "big")
        elif name == "len" and name not in values:
            out += len(one(tokens[i + 1])).to_bytes(4, "big")
        else:
            out += one(token)
    return out


def call_body(conn: str, ts: int, proc: str, args: bytes) -> bytes:
    layouts = rpc_layouts()
    kind, fields = layouts[1]["CALL"]
    values = {"type": kind, "conn": conn.encode(), "ts": ts, "proc": proc.encode(),
              "budget_ms": 5000, "mark": 0, "args": args}
    return encode(fields, values, layouts)


def read_reply(datagram: bytes, *, key: bytes | None, service: str = "") -> dict[str, Any]:
    """A server's REPLY frame read with the doc: the header bytes each row says, the
    tag by its rule, then the REPLY's fields and the incarnation."""
    rows = {row.field: row for row in frame_table()}
    tag_bytes = number(rows["tag"].size, 0) if key is not None else 0
    body = datagram[number(rows["body"].offset, 0):len(datagram) - tag_bytes]
    assert datagram == build_frame(body, key=key, service=service), "header or tag"
    layouts = rpc_layouts()
    reply_type, _ = layouts[1]["REPLY"]
    assert body[0] == reply_type, body[0]
    conn_len = body[1]
    at = 2 + conn_len
    ts = int.from_bytes(body[at:at + 8], "big")
    length = int.from_bytes(body[at + 8:at + 12], "big")
    result = body[at + 12:at + 12 + length]
    incarnation = body[at + 12 + length:]
    assert len(incarnation) == 8, "server -> client: then incarnation:u64"
    status, data = result[0], result[1:]
    return {"conn": body[2:at].decode(), "ts": ts, "status": status, "data": data}


# -- the table itself -----------------------------------------------------------------


def test_the_table_lays_the_frame_out_from_offset_0_without_gaps() -> None:
    rows = frame_table()
    assert [row.field for row in rows] == ["version", "kind", "flags", "key_id", "body",
                                           "tag"]
    for n in (0, 1, 100):
        at = 0
        for row in rows:
            assert number(row.offset, n) == at, (row, n)
            at += number(row.size, n)


KINDS = ["at-most-once RPC", "slotted-FIFO channel", "multicast group", "pub-sub"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("keyed", [True, False])
def test_the_decoder_accepts_frames_built_from_the_table(kind: str, keyed: bool) -> None:
    key = KEY if keyed else None
    body = b"any body: the frame layer does not read it"
    frame = build_frame(body, key=key, kind_name=kind)
    codec = FrameCodec(Keyring(Key(KEY)) if keyed else None)
    opened = codec.open(frame)
    assert opened is not None, codec.statistics()
    assert opened.body == body and opened.kind == KINDS.index(kind) + 1
    assert codec.seal(opened.kind, body) == frame  # and the code builds the same bytes


def test_a_service_frame_built_from_the_doc_verifies_only_for_that_service() -> None:
    frame = build_frame(b"body", key=KEY, service="inventory")
    assert FrameCodec(Keyring(Key(KEY)), "inventory").open(frame) is not None
    assert FrameCodec(Keyring(Key(KEY)), "billing").open(frame) is None
    assert FrameCodec(Keyring(Key(KEY))).open(frame) is None


def test_the_decoder_drops_a_frame_of_another_version() -> None:
    # What a reader of a table saying version 1 would send: dropped and counted.
    frame = build_frame(b"body", key=None)
    codec = FrameCodec(None)
    for version in {1, 3} - {frame[0]}:
        assert codec.open(bytes((version,)) + frame[1:]) is None
    assert codec.statistics().unknown_version == len({1, 3} - {frame[0]})


# -- a real server --------------------------------------------------------------------


class _Inbox(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.queue.put_nowait(data)


@pytest.mark.parametrize("mode", ["keyed", "service", "unkeyed"])
def test_a_real_server_answers_a_call_built_from_the_doc(mode: str) -> None:
    from timebound.net._server import RpcServer

    key = None if mode == "unkeyed" else KEY
    service = "inventory" if mode == "service" else ""

    async def exchange() -> dict[str, Any]:
        server = RpcServer({"incr": lambda p: b"%d" % (int(p) + 1)}, key=key,
                           service=service)
        async with server:
            loop = asyncio.get_running_loop()
            transport, inbox = await loop.create_datagram_endpoint(
                _Inbox, remote_addr=server.address)
            try:
                ts = time.time_ns() // 1000 + 1000
                frame = build_frame(call_body("doc.1", ts, "incr", b"41"), key=key,
                                    service=service)
                for _ in range(5):  # UDP: a lost datagram is sent again
                    transport.sendto(frame)
                    try:
                        answer = await asyncio.wait_for(inbox.queue.get(), 1.0)
                        break
                    except TimeoutError:
                        continue
                else:
                    raise AssertionError(f"no answer: {server.statistics()}")
            finally:
                transport.close()
            stats = server.statistics()
        assert stats["malformed"] == 0 and stats["unauthenticated"] == 0, stats
        reply = read_reply(answer, key=key, service=service)
        assert reply["ts"] == ts
        return reply

    reply = asyncio.run(exchange())
    assert (reply["conn"], reply["status"], reply["data"]) == ("doc.1", 0, b"42")
