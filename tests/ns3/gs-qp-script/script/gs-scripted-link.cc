#include "gs-scripted-link.h"

#include "gs-constants.h"
#include "gs-script-end.h"

#include "ns3/simulator.h"

#include <cmath>

namespace ns3
{
namespace gs
{

ScriptedLink::ScriptedLink(std::vector<WireRule> rules, double delayS, std::optional<double> rateBps,
                           const WireSizes& sizes)
    : m_rules(std::move(rules)),
      m_delayPs(std::llround(delayS * 1e12)),
      m_rateBps(rateBps),
      m_sizes(sizes)
{
}

void
ScriptedLink::Connect(ScriptEnd* to, ScriptEnd* from)
{
    m_to = to;
    m_from = from;
}

bool
ScriptedLink::Free() const
{
    return Simulator::Now().GetTimeStep() >= m_busyUntil && m_queue.empty();
}

void
ScriptedLink::Enqueue(Ptr<Packet> p)
{
    if (Free())
    {
        Send(p);
        return;
    }
    m_queue.push_back(p);
}

void
ScriptedLink::Send(Ptr<Packet> p)
{
    int64_t now = Simulator::Now().GetTimeStep();
    LinkRecord r;
    r.index = m_records.size();
    r.tPs = now;
    ReadWire(*p, r.w);
    int64_t serialization = m_rateBps ? std::llround(r.w.wire * 8.0 / *m_rateBps * 1e12) : 0;
    int64_t arrival = serialization + m_delayPs;
    const WireRule* rule = FindRule(m_rules, r.index);
    int64_t by = rule ? std::llround(rule->byS * 1e12) : 0;
    if (!rule)
    {
        r.fate = "delivered";
        Deliver(p, arrival);
    }
    else if (rule->action == WireAction::Drop)
    {
        r.fate = "dropped";
    }
    else if (rule->action == WireAction::Duplicate)
    {
        r.fate = "duplicated";
        Deliver(p, arrival);
        Deliver(p->Copy(), arrival + by);
    }
    else if (rule->action == WireAction::Delay)
    {
        r.fate = "delayed";
        Deliver(p, arrival + by);
    }
    else
    {
        // As a DLCP switch trims (gs-switch.cc): the payload goes, the headers (RETH, ImmDt kept) arrive marked.
        r.fate = "trimmed";
        Wire t = r.w;
        t.resv7 = static_cast<uint8_t>(t.resv7 | kTrimmed);
        t.payload = 0;
        t.wire = m_sizes.roceOverhead + ((t.flags & F_RETH) ? m_sizes.reth : 0) + ((t.flags & F_IMM) ? m_sizes.imm : 0);
        Deliver(HeaderPacket(t), arrival);
    }
    m_records.push_back(r);
    if (serialization > 0)
    {
        m_busyUntil = now + serialization;
        if (!m_doneScheduled)
        {
            m_doneScheduled = true;
            Simulator::Schedule(TimeStep(serialization), &ScriptedLink::Done, this);
        }
    }
}

void
ScriptedLink::Deliver(Ptr<Packet> p, int64_t afterPs)
{
    Simulator::Schedule(TimeStep(afterPs), &ScriptEnd::Receive, m_to, p);
}

void
ScriptedLink::Done()
{
    m_doneScheduled = false;
    if (!m_queue.empty())
    {
        Ptr<Packet> p = m_queue.front();
        m_queue.pop_front();
        Send(p);
        return;
    }
    if (m_from != nullptr)
    {
        m_from->Pull();
    }
}

} // namespace gs
} // namespace ns3
