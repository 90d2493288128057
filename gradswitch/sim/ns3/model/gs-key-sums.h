// A parameter server's sums in progress (gs-ps.cc, gs-graph-ps-server.cc): the pushes of each key so far, by the
// immediate data the workers give it, added element by element and block by block (GraphData::Add).
#ifndef GS_KEY_SUMS_H
#define GS_KEY_SUMS_H

#include "gs-graph-data.h"
#include "gs-message.h"

#include <cstdint>
#include <memory>
#include <unordered_map>

namespace ns3
{
namespace gs
{

class KeySums
{
  public:
    /// Add a push of key `imm`: its sum once this is the `of`-th push (the key is then forgotten), else null.
    MsgPtr Add(uint64_t imm, const MsgPtr& data, uint32_t of)
    {
        Sum& s = m_sums[imm];
        if (!s.data)
        {
            s.data = std::make_shared<MsgData>(*data);
        }
        else
        {
            GraphData::Add(*s.data, *data);
        }
        if (++s.count < of)
        {
            return nullptr;
        }
        MsgPtr sum = s.data;
        m_sums.erase(imm);
        return sum;
    }

  private:
    struct Sum
    {
        std::shared_ptr<MsgData> data;
        uint32_t count = 0;
    };

    std::unordered_map<uint64_t, Sum> m_sums;
};

} // namespace gs
} // namespace ns3

#endif
