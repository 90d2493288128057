#include "gs-graph-data.h"

#include "gs-config.h"

#include <algorithm>

namespace ns3
{
namespace gs
{

GraphData::GraphData(Generator gen, Check check, uint32_t mtu, bool lossTolerant)
    : m_gen(gen),
      m_check(check),
      m_mtu(mtu),
      m_lossTolerant(lossTolerant)
{
}

MsgPtr
GraphData::Make(uint32_t origin, const Piece& piece) const
{
    bool exact = m_check == Check::Exact;
    MsgPtr m = MsgData::Make(piece.count * 4, m_mtu, exact);
    if (m_check == Check::None)
    {
        return m;
    }
    for (uint32_t p = 0; p < m->Packets(); p++)
    {
        m->digest[p] = m_gen.Digest(origin, piece.iteration, piece.op, piece.blockBase | p);
    }
    if (exact)
    {
        for (uint64_t i = 0; i < piece.count; i++)
        {
            m->values[i] = m_gen.Value(origin, piece.iteration, piece.op, piece.first + i);
        }
    }
    return m;
}

bool
GraphData::Holds(const MsgData& got, const Piece& piece, const std::vector<uint32_t>& ranks, Loss* loss) const
{
    if (m_check == Check::None)
    {
        return true;
    }
    if (got.bytes != piece.count * 4 || got.Packets() != MsgData::Packets(piece.count * 4, m_mtu))
    {
        return false;
    }
    bool exact = m_check == Check::Exact;
    if (exact && got.values.size() != piece.count)
    {
        return false;
    }
    bool tolerant = m_lossTolerant && loss != nullptr;
    uint64_t rankSum = 0;
    for (uint32_t r : ranks)
    {
        rankSum += m_gen.RankFactor(r);
    }
    uint32_t perPacket = m_mtu / 4;
    for (uint32_t p = 0; p < got.Packets(); p++)
    {
        uint64_t lo = static_cast<uint64_t>(p) * perPacket;
        uint64_t hi = std::min<uint64_t>(piece.count, lo + perPacket);
        uint64_t n = hi > lo ? hi - lo : 0;
        bool lossy = got.lossy[p] != 0;
        if (lossy && !tolerant)
        {
            return false;
        }
        bool held = got.digest[p] == m_gen.BlockFactor(piece.iteration, piece.op, piece.blockBase | p) * rankSum;
        if (!held && !lossy)
        {
            return false; // a wrong sum: only a zero-filled contribution may be missing
        }
        if (!exact)
        {
            if (tolerant)
            {
                loss->error2 += held ? 0.0 : static_cast<double>(n);
                loss->norm2 += static_cast<double>(n);
            }
            continue;
        }
        for (uint64_t i = lo; i < hi; i++)
        {
            uint32_t sum = 0;
            for (uint32_t r : ranks)
            {
                sum += static_cast<uint32_t>(m_gen.Value(r, piece.iteration, piece.op, piece.first + i));
            }
            auto want = static_cast<int32_t>(sum);
            if (got.values[i] != want && !lossy)
            {
                return false;
            }
            if (tolerant)
            {
                double d = static_cast<double>(got.values[i]) - static_cast<double>(want);
                loss->error2 += d * d;
                loss->norm2 += static_cast<double>(want) * static_cast<double>(want);
            }
        }
    }
    return true;
}

void
GraphData::Add(MsgData& sum, const MsgData& got)
{
    for (size_t p = 0; p < sum.digest.size() && p < got.digest.size(); p++)
    {
        sum.digest[p] += got.digest[p];
        sum.lossy[p] |= got.lossy[p];
    }
    for (size_t i = 0; i < sum.values.size() && i < got.values.size(); i++)
    {
        sum.values[i] = static_cast<int32_t>(static_cast<uint32_t>(sum.values[i]) + static_cast<uint32_t>(got.values[i]));
    }
}

} // namespace gs
} // namespace ns3
