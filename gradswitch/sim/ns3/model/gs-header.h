// The one header every simulated packet carries: the fields of Ethernet/IPv4/UDP/BTH/RETH/ImmDt/AETH a
// model reads, in a fixed-size struct copied in one piece (no IP stack, no per-field serialization). The
// bytes a packet occupies on a link are `wire`, the size the real headers and payload would have
// (gradswitch/roce/wire.py ROCE_OVERHEAD etc., from the run's configuration), not this header's size.
#ifndef GS_HEADER_H
#define GS_HEADER_H

#include "ns3/header.h"
#include "ns3/packet.h"

#include <cstdint>

namespace ns3
{
namespace gs
{

enum Kind : uint8_t
{
    KIND_ROCE = 0,       // a RoCE v2 packet of a worker's or server's QP (data, ACK or NAK)
    KIND_NR_PARTIAL = 1, // NetReduce: a switch's partial sum to its parent in the aggregation tree
    KIND_NR_RESULT = 2,  // NetReduce: a parent's result to a child switch
    KIND_TCP = 3,        // background bulk TCP: a segment or an ACK
};

enum Flag : uint16_t
{
    F_ACKREQ = 1 << 0,    // BTH AckReq
    F_RETH = 1 << 1,      // carries a RETH (va, rkey, dma length)
    F_IMM = 1 << 2,       // carries immediate data
    F_NR = 1 << 3,        // a NetReduce contribution (a worker's job QP to its peer): switches aggregate it
    F_SACK = 1 << 4,      // NAK with a SACK PSN (selective repeat)
    F_LOSSY = 1 << 5,     // the data holds a zero-filled contribution (DLCP trimming): digests may not sum up
    F_TCP_ACK = 1 << 6,   // background TCP: an acknowledgement
    F_ACK = 1 << 7,       // RoCE Acknowledge (ACK or NAK, AETH in aux)
    F_RETX = 1 << 8,      // a retransmission (never droppable)
};

/// AETH syndromes (gradswitch/roce/headers.py AckType/NakCode), in `aux` bits 31..24 with the MSN in 23..0.
enum Syndrome : uint8_t
{
    SYN_ACK = 0x00,
    SYN_NAK_PSN = 0x60,
    SYN_NAK_INVALID = 0x61,
    SYN_NAK_ACCESS = 0x62,
};

struct Wire
{
    uint8_t kind;
    uint8_t opcode;   // BTH opcode (config.p4 ROCE_*)
    uint8_t resv7;    // BTH.resv7: DLCP class, droppable and trimmed bits
    uint8_t prio;     // priority queue a switch chose (the DSCP it writes)
    uint16_t flags;
    uint16_t job;
    uint32_t src;     // source node (host index, or switch index for NetReduce switch-to-switch packets)
    uint32_t dst;     // destination node
    uint32_t srcNode; // QP: the sending job node's id
    uint32_t dstNode; // QP: the receiving job node's id
    uint32_t psn;     // BTH PSN (24 bits); TCP: segment number
    uint32_t aux;     // AETH: syndrome << 24 | MSN; TCP: cumulative ACK (next expected segment)
    uint32_t sack;    // SACK PSN of a selective-repeat NAK
    uint32_t payload; // payload bytes
    uint32_t wire;    // bytes on the link
    uint16_t sport;   // UDP (TCP) source port
    uint16_t dport;   // UDP (TCP) destination port
    uint64_t va;      // RETH virtual address
    uint32_t dmaLen;  // RETH DMA length
    uint32_t rkey;    // RETH rkey
    uint64_t imm;     // immediate data (64 bits here; 32 on the wire)
    uint64_t digest;  // linear digest of the contributions the payload holds (gs-generator.h)
};

/// The header a packet starts with, read with one copy (Header::Deserialize reads byte by byte).
inline void
ReadWire(const Packet& p, Wire& w)
{
    p.CopyData(reinterpret_cast<uint8_t*>(&w), sizeof(Wire));
}

class GsHeader : public Header
{
  public:
    Wire w{};

    static TypeId GetTypeId();
    TypeId GetInstanceTypeId() const override;
    uint32_t GetSerializedSize() const override;
    void Serialize(Buffer::Iterator start) const override;
    uint32_t Deserialize(Buffer::Iterator start) override;
    void Print(std::ostream& os) const override;
};

/// A packet that is this header and nothing else.
inline Ptr<Packet>
HeaderPacket(const Wire& w)
{
    Ptr<Packet> p = Create<Packet>();
    GsHeader h;
    h.w = w;
    p->AddHeader(h);
    return p;
}

} // namespace gs
} // namespace ns3

#endif
