// One end of gs-qp-script's exchange: a host with one RcQp (the requester's or the responder's), sending on its
// ScriptedLink and receiving from the other, and the application that posts the scenario's messages and
// records what the QP reports. The NIC pulls the QP's packets after the event that activated it, at the same
// instant, or at once (NicPull); all of them without a rate, one per packet time with one.
#ifndef GS_SCRIPT_END_H
#define GS_SCRIPT_END_H

#include "gs-qp-scenario.h"
#include "gs-qp.h"
#include "gs-scripted-link.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

/// A work request's completion as the requester's application saw it.
struct SendRecord
{
    uint64_t wrId = 0;
    bool ok = true;
    int64_t tPs = 0;
};

/// A WRITE as the responder's application received it.
struct RecvRecord
{
    uint64_t length = 0;
    std::optional<uint64_t> imm;
    uint64_t va = 0;
    uint32_t zeroFilled = 0;
    uint64_t fnv = 0; // FNV-1a 64 of its bytes (int32 values, little-endian)
    int64_t tPs = 0;
};

class ScriptEnd : public QpHost, public QpUser
{
  public:
    ScriptEnd(const QpConfig& cfg, ScriptedLink* out, NicPull pull);

    RcQp& Qp()
    {
        return *m_qp;
    }

    /// The scenario's messages, one after the other from address 0: each at its time (Start), or after another.
    void SetMessages(std::vector<ScriptMessage> messages);
    /// Schedule the posts of the messages that have a time.
    void Start();
    /// Post message `index` (its values follow from the index).
    void Post(uint32_t index);
    /// A packet from the other end.
    void Receive(Ptr<Packet> p);
    /// Hand the QP's packets to the link while it is free.
    void Pull();

    const std::vector<SendRecord>& Sent() const
    {
        return m_sent;
    }

    const std::vector<RecvRecord>& Received() const
    {
        return m_received;
    }

    const std::optional<std::string>& Error() const
    {
        return m_error;
    }

    // QpHost
    void SendControl(Ptr<Packet> p, uint32_t wire) override;
    void Activate(RcQp* qp) override;

    // QpUser
    void OnSendComplete(RcQp* qp, uint64_t wrId) override;
    void OnRecvComplete(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) override;
    void OnError(RcQp* qp, const std::string& error) override;

  private:
    std::unique_ptr<RcQp> m_qp;
    ScriptedLink* m_out;
    NicPull m_pull;
    bool m_pullPending = false;
    std::vector<ScriptMessage> m_messages;
    std::vector<uint64_t> m_vas;                 // where each message goes
    std::vector<std::pair<uint64_t, uint32_t>> m_posted; // (work request, message) not yet complete, oldest first
    std::vector<SendRecord> m_sent;
    std::vector<RecvRecord> m_received;
    std::optional<std::string> m_error;
};

/// Value j of message `index` (tests/ns3/qp_script.py `message_values` is the same).
int32_t ScriptValue(uint32_t index, uint32_t j);

} // namespace gs
} // namespace ns3

#endif
