"""Length-delimited protobuf messages, as Chakra's protolib frames them: each message is its size
as a varint, then its bytes. A trace file may also be gzip-compressed (protolib opens both)."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"


class FramingError(ValueError):
    """A file that is not a sequence of length-delimited messages (one line, naming the file)."""


def encode_varint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"varint of {value}: only sizes (0 or more) are framed")
    out = bytearray()
    while True:
        bits, value = value & 0x7F, value >> 7
        if value:
            out.append(0x80 | bits)
        else:
            out.append(bits)
            return bytes(out)


def frame(payloads: list[bytes]) -> bytes:
    """The messages' bytes, each after its size."""
    return b"".join(encode_varint(len(p)) + p for p in payloads)


def records(path: Path) -> Iterator[bytes]:
    """Every message's bytes in a framed file (gzip or not); FramingError if it ends inside one."""
    data = path.read_bytes()
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise FramingError(f"{path}: a gzip file that does not decompress ({e})") from None
    pos, index = 0, 0
    while pos < len(data):
        size, shift, start = 0, 0, pos
        while True:
            if pos >= len(data):
                raise FramingError(f"{path}: ends inside the size of record {index} (at byte {start}); "
                                   "a Chakra trace is length-delimited messages (a varint size, then the message)")
            b = data[pos]
            pos += 1
            size |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= 64:
                raise FramingError(f"{path}: record {index} at byte {start} has a size of more than 10 bytes: "
                                   "not a Chakra trace (length-delimited messages)")
        if pos + size > len(data):
            raise FramingError(f"{path}: record {index} claims {size} bytes at byte {pos} but the file has "
                               f"{len(data) - pos} left (truncated, or not a Chakra trace)")
        yield data[pos:pos + size]
        pos += size
        index += 1
