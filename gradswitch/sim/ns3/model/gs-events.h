// The two events every packet-hop makes (a delivery at the far end of a link, the end of a transmission),
// as EventImpls of their own taken from a free list: ns-3's generic Schedule(&Class::Method, obj, args...)
// allocates the event and, for these arguments, a std::function's state on every call.
#ifndef GS_EVENTS_H
#define GS_EVENTS_H

#include "ns3/event-impl.h"
#include "ns3/packet.h"

#include <cstddef>
#include <new>

namespace ns3
{
namespace gs
{

/// Class-specific allocation from a free list of blocks of the class's size (one thread: ns-3's event loop).
template <typename T>
class Pooled
{
  public:
    static void* operator new(std::size_t size)
    {
        if (s_free != nullptr)
        {
            Block* b = s_free;
            s_free = b->next;
            return b;
        }
        return ::operator new(size < sizeof(Block) ? sizeof(Block) : size);
    }

    static void operator delete(void* p)
    {
        Block* b = static_cast<Block*>(p);
        b->next = s_free;
        s_free = b;
    }

  private:
    struct Block
    {
        Block* next;
    };

    static inline Block* s_free = nullptr;
};

/// Call obj->Method(packet).
template <typename Obj, void (Obj::*Method)(Ptr<Packet>)>
class PacketEvent : public EventImpl, public Pooled<PacketEvent<Obj, Method>>
{
  public:
    using Pooled<PacketEvent<Obj, Method>>::operator new;
    using Pooled<PacketEvent<Obj, Method>>::operator delete;

    PacketEvent(Obj* obj, Ptr<Packet> p)
        : m_obj(obj),
          m_p(std::move(p))
    {
    }

  protected:
    void Notify() override
    {
        (m_obj->*Method)(std::move(m_p));
    }

  private:
    Obj* m_obj;
    Ptr<Packet> m_p;
};

/// Call obj->Method().
template <typename Obj, void (Obj::*Method)()>
class CallEvent : public EventImpl, public Pooled<CallEvent<Obj, Method>>
{
  public:
    using Pooled<CallEvent<Obj, Method>>::operator new;
    using Pooled<CallEvent<Obj, Method>>::operator delete;

    explicit CallEvent(Obj* obj)
        : m_obj(obj)
    {
    }

  protected:
    void Notify() override
    {
        (m_obj->*Method)();
    }

  private:
    Obj* m_obj;
};

} // namespace gs
} // namespace ns3

#endif
