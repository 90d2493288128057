#include "gs-host.h"

#include "gs-header.h"
#include "gs-ticks.h"

#include "ns3/simulator.h"

#include <cmath>

namespace ns3
{
namespace gs
{

NS_OBJECT_ENSURE_REGISTERED(GsHost);

TypeId
GsHost::GetTypeId()
{
    static TypeId tid = TypeId("ns3::gs::GsHost").SetParent<Node>().SetGroupName("Gradswitch").AddConstructor<GsHost>();
    return tid;
}

GsHost::GsHost() = default;

GsHost::GsHost(uint32_t systemId)
    : Node(systemId)
{
}

void
GsHost::Setup(uint32_t index, Ptr<GsDevice> nic, double messageDelayS)
{
    m_index = index;
    m_nic = nic;
    m_messageDelayTicks = SecondsToTicks(messageDelayS);
}

RcQp*
GsHost::Qp(const QpConfig& cfg)
{
    uint64_t key = Key(cfg.params->job, cfg.localNode, cfg.remoteNode);
    auto it = m_qps.find(key);
    if (it != m_qps.end())
    {
        return it->second.get();
    }
    auto qp = std::make_unique<RcQp>(this, cfg);
    RcQp* raw = qp.get();
    m_qps.emplace(key, std::move(qp));
    return raw;
}

RcQp*
GsHost::FindQp(uint32_t job, uint32_t local, uint32_t remote) const
{
    auto it = m_qps.find(Key(job, local, remote));
    return it == m_qps.end() ? nullptr : it->second.get();
}

void
GsHost::AddEndpoint(uint16_t port, HostEndpoint* e)
{
    m_endpoints[port] = e;
}

void
GsHost::ActivateEndpoint(HostEndpoint* e)
{
    if (!e->inActiveList)
    {
        e->inActiveList = true;
        m_activeEndpoints.push_back(e);
    }
    m_nic->Kick();
}

void
GsHost::Deliver(std::function<void()> f)
{
    if (m_messageDelayTicks == 0)
    {
        f();
        return;
    }
    Simulator::Schedule(TimeStep(m_messageDelayTicks), std::move(f));
}

void
GsHost::Receive(uint32_t port, Ptr<Packet> p)
{
    Wire w;
    ReadWire(*p, w);
    rxPackets++;
    rxBytes += w.wire;
    m_nic->CountRxBytes(w.wire);
    if (w.kind == KIND_TCP)
    {
        auto it = m_endpoints.find(w.dport);
        if (it != m_endpoints.end())
        {
            it->second->Receive(w);
        }
        return;
    }
    if (w.kind != KIND_ROCE)
    {
        return;
    }
    RcQp* qp = FindQp(w.job, w.dstNode, w.srcNode);
    if (qp == nullptr)
    {
        unknownQp++;
        return;
    }
    if (qp->dead)
    {
        return;
    }
    if (w.flags & F_ACK)
    {
        qp->OnAck(w);
    }
    else
    {
        qp->OnData(w, p);
    }
}

bool
GsHost::Pull(uint32_t port, Ptr<Packet>& p, uint32_t& wire)
{
    for (int cls = kPriorities - 1; cls >= 0; cls--)
    {
        auto& list = m_active[cls];
        while (!list.empty())
        {
            RcQp* qp = list.front();
            list.pop_front();
            if (qp->Config().nicClass != cls)
            {
                continue; // moved to another class: it is (or will be) in that list
            }
            if (qp->NextPacket(p, wire))
            {
                list.push_back(qp); // round robin
                txPackets++;
                txBytes += wire;
                return true;
            }
            qp->inActiveList = false;
        }
    }
    while (!m_activeEndpoints.empty())
    {
        HostEndpoint* e = m_activeEndpoints.front();
        m_activeEndpoints.pop_front();
        if (e->NextPacket(p, wire))
        {
            m_activeEndpoints.push_back(e);
            txPackets++;
            txBytes += wire;
            return true;
        }
        e->inActiveList = false;
    }
    return false;
}

void
GsHost::SendControl(Ptr<Packet> p, uint32_t wire)
{
    txPackets++;
    txBytes += wire;
    m_nic->Enqueue(p, wire, static_cast<uint8_t>(kPriorities - 1));
}

void
GsHost::Activate(RcQp* qp)
{
    if (!qp->inActiveList)
    {
        qp->inActiveList = true;
        m_active[qp->Config().nicClass].push_back(qp);
    }
    m_nic->Kick();
}

void
GsHost::SetNicClass(RcQp* qp, uint8_t cls)
{
    const_cast<QpConfig&>(qp->Config()).nicClass = cls;
    qp->inActiveList = false;
    Activate(qp);
}

} // namespace gs
} // namespace ns3
