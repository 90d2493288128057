// When each packet a queue pair has in flight was first sent (Karn's algorithm samples the RTT only from
// those): a ring indexed by PSN that holds the span in flight, from the oldest unacknowledged PSN on. It
// grows as the span does (at most the window) and is given back once nothing is in flight, so an idle queue
// pair holds no memory for it (a parameter server job has N x N queue pairs).
#ifndef GS_SEND_TIMES_H
#define GS_SEND_TIMES_H

#include "gs-psn.h"

#include <cstdint>
#include <memory>

namespace ns3
{
namespace gs
{

class SendTimes
{
  public:
    /// The entry of `psn`, with `una` the oldest unacknowledged PSN (psn at or after it); -1: none.
    int64_t& At(uint32_t psn, uint32_t una)
    {
        uint32_t ahead = static_cast<uint32_t>(PsnDiff(psn, una));
        if (ahead >= m_capacity)
        {
            Grow(ahead + 1, una);
        }
        return m_t[psn & (m_capacity - 1)];
    }

    /// The entry of a PSN in flight (its slot exists: it was sent).
    int64_t Get(uint32_t psn) const
    {
        return m_t[psn & (m_capacity - 1)];
    }

    /// The PSN is acknowledged.
    void Clear(uint32_t psn)
    {
        m_t[psn & (m_capacity - 1)] = -1;
    }

    /// Nothing is in flight (every entry is -1): give the storage back.
    void Release()
    {
        m_t.reset();
        m_capacity = 0;
    }

  private:
    static constexpr uint32_t kMinCapacity = 16;

    /// Room for `span` PSNs from una on; the entries of [una, una + the old capacity) move to their new slots.
    void Grow(uint32_t span, uint32_t una)
    {
        uint32_t capacity = m_capacity == 0 ? kMinCapacity : m_capacity;
        while (capacity < span)
        {
            capacity *= 2;
        }
        auto t = std::make_unique<int64_t[]>(capacity);
        for (uint32_t i = 0; i < capacity; i++)
        {
            t[i] = -1;
        }
        for (uint32_t i = 0; i < m_capacity; i++)
        {
            uint32_t psn = PsnAdd(una, i);
            t[psn & (capacity - 1)] = m_t[psn & (m_capacity - 1)];
        }
        m_t = std::move(t);
        m_capacity = capacity;
    }

    std::unique_ptr<int64_t[]> m_t;
    uint32_t m_capacity = 0; // 0 or a power of two
};

} // namespace gs
} // namespace ns3

#endif
