// Background bulk traffic: long-lived TCP-like flows between two hosts (iperf3 -P N on the testbed), with
// a compact NewReno-style model of our own over the same devices, not ns-3's TCP stack (which needs IP
// routing per hop): segments of `mss` bytes, cumulative ACKs for every segment, slow start and congestion
// avoidance in segments, fast retransmit on three duplicate ACKs with NewReno's partial-ACK recovery, a
// retransmission timer (RFC 6298, floor min_rto) that goes back to the first unacknowledged segment, and
// a receive window. Linux's default is CUBIC: this is a simpler AIMD. Goodput is what the receiver
// delivered in order.
#ifndef GS_TCP_H
#define GS_TCP_H

#include "gs-config.h"
#include "gs-host.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <set>
#include <vector>

namespace ns3
{
namespace gs
{

class TcpBackground
{
  public:
    TcpBackground(const BackgroundSpec& spec, GsHost* sender, GsHost* receiver, const WireSizes& wire);
    ~TcpBackground();

    void Start();
    nlohmann::json Result(double simS) const;

    struct Flow
    {
        uint16_t sport = 0;
        // sender
        uint64_t next = 0; // next new segment
        uint64_t una = 0;  // first unacknowledged
        uint64_t highest = 0; // one past the highest segment ever sent
        double cwnd = 10;
        double ssthresh = 1e9;
        uint32_t dupacks = 0;
        bool recovery = false;
        uint64_t recover = 0;
        std::vector<uint64_t> resend;
        double srtt = 0;
        double rttvar = 0;
        bool haveRtt = false;
        double rto = 1.0;
        int64_t timedSeg = -1;
        int64_t timedAt = 0;
        int64_t timerStart = -1;
        uint64_t retransmissions = 0;
        // receiver
        uint64_t expected = 0;
        std::set<uint64_t> outOfOrder;
        uint64_t pendingAcks = 0;
    };

  private:
    class SenderEndpoint;
    class ReceiverEndpoint;

    BackgroundSpec m_spec;
    GsHost* m_sender;
    GsHost* m_receiver;
    WireSizes m_wire;
    std::vector<Flow> m_flows;
    std::unique_ptr<SenderEndpoint> m_tx;
    std::unique_ptr<ReceiverEndpoint> m_rx;
    double m_startS = 0;
};

} // namespace gs
} // namespace ns3

#endif
