// One direction of gs-qp-script's wire: it carries the packets one end emits to the other after a fixed delay,
// does to the k-th of them what the scenario's rules say (drop, duplicate, delay, trim), and records each.
// With a rate, a packet takes its wire bytes' time and the next one waits: control packets queued by the
// sending end go first, then the end is asked for its next data packet (as GsDevice pulls from a GsHost).
#ifndef GS_SCRIPTED_LINK_H
#define GS_SCRIPTED_LINK_H

#include "gs-config.h"
#include "gs-header.h"
#include "gs-qp-scenario.h"

#include "ns3/packet.h"

#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

class ScriptEnd;

/// A packet as the link carried it.
struct LinkRecord
{
    uint64_t index = 0;
    int64_t tPs = 0; // when it went onto the link
    Wire w{};
    std::string fate; // delivered, dropped, duplicated, delayed, trimmed
};

class ScriptedLink
{
  public:
    ScriptedLink(std::vector<WireRule> rules, double delayS, std::optional<double> rateBps, const WireSizes& sizes);

    /// The end packets arrive at, and the end whose data packets the link pulls (none: it only queues).
    void Connect(ScriptEnd* to, ScriptEnd* from);

    /// A control packet (ACK, NAK) to send: now if the link is free, else after what is queued.
    void Enqueue(Ptr<Packet> p);
    /// Send a data packet now (the link must be free).
    void Send(Ptr<Packet> p);
    /// Free to send now (always without a rate).
    bool Free() const;

    const std::vector<LinkRecord>& Records() const
    {
        return m_records;
    }

  private:
    void Deliver(Ptr<Packet> p, int64_t afterPs);
    void Done();

    std::vector<WireRule> m_rules;
    int64_t m_delayPs;
    std::optional<double> m_rateBps;
    WireSizes m_sizes;
    ScriptEnd* m_to = nullptr;
    ScriptEnd* m_from = nullptr;
    std::deque<Ptr<Packet>> m_queue;
    int64_t m_busyUntil = 0;
    bool m_doneScheduled = false;
    std::vector<LinkRecord> m_records;
};

} // namespace gs
} // namespace ns3

#endif
