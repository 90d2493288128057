// What a message (an RDMA WRITE) carries, packet by packet: each packet's digest of the contributions it
// holds and, in exact mode, its int32 values; and whether a packet was zero-filled (DLCP trimming).
#ifndef GS_MESSAGE_H
#define GS_MESSAGE_H

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace ns3
{
namespace gs
{

struct MsgData
{
    uint64_t bytes = 0;            // payload bytes of the message
    uint32_t mtu = 1024;           // payload bytes per packet
    std::vector<uint64_t> digest;  // per packet
    std::vector<uint8_t> lossy;    // per packet: holds a zero-filled contribution
    std::vector<int32_t> values;   // exact mode: bytes / 4 values; empty otherwise
    bool exact = false;
    uint64_t va = 0;               // RETH virtual address the message was written to (set by the receiver)

    static std::shared_ptr<MsgData> Make(uint64_t bytes, uint32_t mtu, bool exact)
    {
        auto m = std::make_shared<MsgData>();
        m->bytes = bytes;
        m->mtu = mtu;
        m->exact = exact;
        uint32_t packets = Packets(bytes, mtu);
        m->digest.assign(packets, 0);
        m->lossy.assign(packets, 0);
        if (exact)
        {
            m->values.assign(bytes / 4, 0);
        }
        return m;
    }

    static uint32_t Packets(uint64_t bytes, uint32_t mtu)
    {
        return bytes == 0 ? 1 : static_cast<uint32_t>((bytes + mtu - 1) / mtu);
    }

    uint32_t Packets() const
    {
        return static_cast<uint32_t>(digest.size());
    }

    /// Payload bytes of packet i.
    uint32_t PacketBytes(uint32_t i) const
    {
        uint64_t start = static_cast<uint64_t>(i) * mtu;
        return start >= bytes ? 0 : static_cast<uint32_t>(std::min<uint64_t>(mtu, bytes - start));
    }

    /// Values of packet i (exact mode).
    const int32_t* PacketValues(uint32_t i) const
    {
        return values.data() + static_cast<size_t>(i) * (mtu / 4);
    }

    int32_t* PacketValues(uint32_t i)
    {
        return values.data() + static_cast<size_t>(i) * (mtu / 4);
    }

    bool AnyLossy() const
    {
        for (uint8_t l : lossy)
        {
            if (l)
            {
                return true;
            }
        }
        return false;
    }
};

using MsgPtr = std::shared_ptr<MsgData>;

} // namespace gs
} // namespace ns3

#endif
