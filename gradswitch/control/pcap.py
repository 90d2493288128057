"""Reading and writing classic pcap files (Ethernet link type), without dependencies."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

MAGIC = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
GLOBAL_HEADER = struct.pack("<IHHiIII", MAGIC, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET)


class PcapError(ValueError):
    pass


def record(packet: bytes, ts_us: int) -> bytes:
    return struct.pack("<IIII", ts_us // 1_000_000, ts_us % 1_000_000, len(packet), len(packet)) + packet


def write_pcap(path: Path, packets: Iterable[bytes], start_us: int = 1_000_000, step_us: int = 1) -> None:
    with path.open("wb") as f:
        write_stream(f, ((start_us + i * step_us, p) for i, p in enumerate(packets)))


def write_stream(f: BinaryIO, timed_packets: Iterable[tuple[int, bytes]]) -> None:
    f.write(GLOBAL_HEADER)
    for ts, p in timed_packets:
        f.write(record(p, ts))


class PcapTail:
    """The records of a pcap file another process is still writing, read as they come: each `poll`
    reads only the bytes written since the last one (a whole re-read per poll is quadratic)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0  # whole records seen so far
        self._file: BinaryIO | None = None
        self._pending = b""
        self._endian: str | None = None

    def poll(self) -> int:
        """Read what is new; the number of whole records so far."""
        if self._file is None:
            try:
                self._file = self.path.open("rb")
            except FileNotFoundError:
                return self.count
        data = self._pending + self._file.read()
        offset = 0
        if self._endian is None:
            if len(data) < 24:
                self._pending = data
                return self.count
            self._endian = _endian(struct.unpack_from("<I", data)[0], self.path)
            offset = 24
        while offset + 16 <= len(data):
            caplen = struct.unpack_from(self._endian + "I", data, offset + 8)[0]
            if offset + 16 + caplen > len(data):
                break
            offset += 16 + caplen
            self.count += 1
        self._pending = data[offset:]
        return self.count

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _endian(magic: int, path: Path) -> str:
    if magic == MAGIC:
        return "<"
    if magic == 0xD4C3B2A1:
        return ">"
    raise PcapError(f"{path} is not a pcap file (magic {magic:#x})")


def read_pcap(path: Path) -> list[bytes]:
    return [p for _, p in read_timed(path)]


def read_timed(path: Path) -> list[tuple[int, bytes]]:
    """(timestamp in µs, packet) of every record; a file cut inside a record ends at the last whole one."""
    data = path.read_bytes()
    if len(data) < 24:
        return []
    endian = _endian(struct.unpack_from("<I", data)[0], path)
    out = []
    offset = 24
    while offset + 16 <= len(data):
        sec, usec, caplen, _ = struct.unpack_from(endian + "IIII", data, offset)
        offset += 16
        if offset + caplen > len(data):
            break
        out.append((sec * 1_000_000 + usec, data[offset : offset + caplen]))
        offset += caplen
    return out
