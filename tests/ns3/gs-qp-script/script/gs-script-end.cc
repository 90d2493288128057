#include "gs-script-end.h"

#include "gs-ticks.h"

#include "ns3/simulator.h"

#include <algorithm>

namespace ns3
{
namespace gs
{

namespace
{

uint64_t
Fnv1a(const uint8_t* data, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
    {
        h ^= data[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

} // namespace

int32_t
ScriptValue(uint32_t index, uint32_t j)
{
    return static_cast<int32_t>(((index + 1u) << 20) + j);
}

ScriptEnd::ScriptEnd(const QpConfig& cfg, ScriptedLink* out, NicPull pull)
    : m_qp(std::make_unique<RcQp>(this, cfg)),
      m_out(out),
      m_pull(pull)
{
    m_qp->user = this;
}

void
ScriptEnd::SetMessages(std::vector<ScriptMessage> messages)
{
    m_messages = std::move(messages);
    uint64_t va = 0;
    for (const ScriptMessage& m : m_messages)
    {
        m_vas.push_back(va);
        va += m.bytes;
    }
}

void
ScriptEnd::Start()
{
    for (uint32_t i = 0; i < m_messages.size(); i++)
    {
        if (!m_messages[i].after)
        {
            Simulator::Schedule(TimeStep(std::llround(m_messages[i].atS * 1e12)), &ScriptEnd::Post, this, i);
        }
    }
}

void
ScriptEnd::Post(uint32_t index)
{
    if (m_qp->Failed())
    {
        return; // as gradswitch/roce/qp.py refuses a post on a failed QP
    }
    const ScriptMessage& m = m_messages.at(index);
    const TransportSpec& t = m_qp->Config().params->t;
    MsgPtr data = MsgData::Make(m.bytes, t.mtu, true); // exact: the responder's bytes are compared
    for (uint32_t j = 0; j < m.bytes / 4; j++)
    {
        data->values[j] = ScriptValue(index, j);
    }
    for (uint32_t i = 0; i < data->Packets(); i++)
    {
        data->digest[i] = (static_cast<uint64_t>(index) << 32) | i; // any value: no check reads it here
    }
    std::optional<uint64_t> imm;
    if (m.imm)
    {
        imm = *m.imm;
    }
    uint64_t wrId = m_qp->PostWrite(data, m_vas[index], 1, imm);
    m_posted.emplace_back(wrId, index);
}

void
ScriptEnd::Receive(Ptr<Packet> p)
{
    Wire w;
    ReadWire(*p, w);
    if (w.flags & F_ACK)
    {
        m_qp->OnAck(w);
    }
    else
    {
        m_qp->OnData(w, p);
    }
}

void
ScriptEnd::Pull()
{
    Ptr<Packet> p;
    uint32_t wire = 0;
    while (m_out->Free() && m_qp->NextPacket(p, wire))
    {
        m_out->Send(p);
    }
}

void
ScriptEnd::SendControl(Ptr<Packet> p, uint32_t wire)
{
    m_out->Enqueue(p);
}

void
ScriptEnd::Activate(RcQp* qp)
{
    if (m_pull == NicPull::AtOnce)
    {
        Pull(); // as GsDevice::Kick: the NIC takes the packets now if its link is free
        return;
    }
    if (m_pullPending)
    {
        return;
    }
    m_pullPending = true;
    Simulator::ScheduleNow([this]() {
        m_pullPending = false;
        Pull();
    });
}

void
ScriptEnd::OnSendComplete(RcQp* qp, uint64_t wrId)
{
    m_sent.push_back({wrId, true, NowTicks()});
    auto it = std::find_if(m_posted.begin(), m_posted.end(), [wrId](const auto& p) { return p.first == wrId; });
    if (it == m_posted.end())
    {
        return; // not one of the scenario's (RcQp completes each work request once)
    }
    uint32_t index = it->second;
    m_posted.erase(it);
    for (uint32_t i = index + 1; i < m_messages.size(); i++)
    {
        if (m_messages[i].after == index)
        {
            Post(i); // from within the QP's callback, as a job node posts its next write
        }
    }
}

void
ScriptEnd::OnRecvComplete(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled)
{
    RecvRecord r;
    r.length = data->bytes;
    if (imm != UINT64_MAX)
    {
        r.imm = imm;
    }
    r.va = data->va;
    r.zeroFilled = zeroFilled;
    r.fnv = Fnv1a(reinterpret_cast<const uint8_t*>(data->values.data()), data->values.size() * sizeof(int32_t));
    r.tPs = NowTicks();
    m_received.push_back(r);
}

void
ScriptEnd::OnError(RcQp* qp, const std::string& error)
{
    // RcQp reports a failure once; gradswitch/roce/qp.py fails every work request not yet complete, oldest first.
    m_error = error;
    for (const auto& [id, _] : m_posted)
    {
        m_sent.push_back({id, false, NowTicks()});
    }
    m_posted.clear();
}

} // namespace gs
} // namespace ns3
