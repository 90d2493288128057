#include "gs-graph-data.h"

#include "gs-config.h"

namespace ns3
{
namespace gs
{

GraphData::GraphData(Generator gen, Check check, uint32_t mtu)
    : m_gen(gen),
      m_check(check),
      m_mtu(mtu)
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
GraphData::Holds(const MsgData& got, const Piece& piece, const std::vector<uint32_t>& ranks) const
{
    if (m_check == Check::None)
    {
        return true;
    }
    if (got.bytes != piece.count * 4 || got.Packets() != MsgData::Packets(piece.count * 4, m_mtu))
    {
        return false;
    }
    uint64_t rankSum = 0;
    for (uint32_t r : ranks)
    {
        rankSum += m_gen.RankFactor(r);
    }
    for (uint32_t p = 0; p < got.Packets(); p++)
    {
        if (got.lossy[p] || got.digest[p] != m_gen.BlockFactor(piece.iteration, piece.op, piece.blockBase | p) * rankSum)
        {
            return false;
        }
    }
    if (m_check != Check::Exact)
    {
        return true;
    }
    if (got.values.size() != piece.count)
    {
        return false;
    }
    for (uint64_t i = 0; i < piece.count; i++)
    {
        uint32_t sum = 0;
        for (uint32_t r : ranks)
        {
            sum += static_cast<uint32_t>(m_gen.Value(r, piece.iteration, piece.op, piece.first + i));
        }
        if (got.values[i] != static_cast<int32_t>(sum))
        {
            return false;
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
