"""The ICMP echo that resolves a peer's address before a QP's first packet (gradswitch/roce/resolve.py),
checked against scapy's ICMP (an independent encoder and checksum)."""

from __future__ import annotations

import pytest
from scapy.layers.inet import ICMP, IP, UDP

from gradswitch.roce.resolve import ICMP_ECHO_REQUEST, echo_reply_from, echo_request


@pytest.mark.parametrize(("ident", "seq"), [(0, 0), (0x1234, 7), (0xFFFF, 0xFFFF)])
def test_echo_request_is_what_scapy_builds(ident, seq):
    ours = ICMP(echo_request(ident, seq))
    assert (ours.type, ours.id, ours.seq) == (ICMP_ECHO_REQUEST, ident, seq)
    again = ICMP(type=ICMP_ECHO_REQUEST, id=ident, seq=seq) / bytes(ours.payload)
    assert bytes(again) == echo_request(ident, seq)  # scapy computes the same checksum


def test_only_echo_replies_to_our_requests_are_taken():
    reply = IP(src="10.0.1.2", dst="10.0.1.1") / (ICMP(type=0, id=77, seq=1) / b"gradswitch")
    assert echo_reply_from(bytes(reply), 77) == "10.0.1.2"
    assert echo_reply_from(bytes(reply), 78) is None  # another process's echo
    request = IP(src="10.0.1.2", dst="10.0.1.1") / ICMP(type=8, id=77, seq=1)
    assert echo_reply_from(bytes(request), 77) is None
    unreachable = IP(src="10.0.1.2", dst="10.0.1.1") / (ICMP(type=3, code=3) / bytes(IP() / UDP()))
    assert echo_reply_from(bytes(unreachable), 77) is None
    assert echo_reply_from(bytes(reply)[:24], 77) is None  # truncated
    assert echo_reply_from(bytes(IP(src="10.0.1.2") / UDP()), 77) is None
