// A FIFO on a power-of-two ring that holds no memory while empty. A queue pair keeps a few of these (its
// posted work requests, its resends): a parameter server job has N x N queue pairs, most of them idle at any
// moment, and libstdc++'s std::deque allocates a 512-byte block and its map even when empty.
#ifndef GS_RING_BUFFER_H
#define GS_RING_BUFFER_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace ns3
{
namespace gs
{

template <typename T>
class RingBuffer
{
  public:
    bool empty() const
    {
        return m_size == 0;
    }

    size_t size() const
    {
        return m_size;
    }

    T& front()
    {
        return m_buf[m_head];
    }

    const T& front() const
    {
        return m_buf[m_head];
    }

    /// The i-th element from the front.
    const T& operator[](size_t i) const
    {
        return m_buf[(m_head + i) & (m_capacity - 1)];
    }

    void push_back(T value)
    {
        if (m_size == m_capacity)
        {
            Grow();
        }
        m_buf[(m_head + m_size) & (m_capacity - 1)] = std::move(value);
        m_size++;
    }

    /// Remove the front element; the last one out gives the storage back.
    void pop_front()
    {
        m_buf[m_head] = T{}; // releases what it holds now, not when the slot is reused
        m_head = (m_head + 1) & (m_capacity - 1);
        if (--m_size == 0)
        {
            m_buf.reset();
            m_capacity = 0;
            m_head = 0;
        }
    }

  private:
    static constexpr uint32_t kMinCapacity = 4;

    void Grow()
    {
        uint32_t capacity = m_capacity == 0 ? kMinCapacity : 2 * m_capacity;
        auto buf = std::make_unique<T[]>(capacity);
        for (uint32_t i = 0; i < m_size; i++)
        {
            buf[i] = std::move(m_buf[(m_head + i) & (m_capacity - 1)]);
        }
        m_buf = std::move(buf);
        m_capacity = capacity;
        m_head = 0;
    }

    std::unique_ptr<T[]> m_buf;
    uint32_t m_capacity = 0; // 0 or a power of two
    uint32_t m_head = 0;
    uint32_t m_size = 0;
};

} // namespace gs
} // namespace ns3

#endif
