// A Reliable Connection queue pair, requester and responder, as gradswitch/roce/qp.py and gradswitch/roce/order_tolerant.py
// define them (PSNs with wrap-around, window, coalesced ACKs with AckReq, NAK with a SACK, go-back-N and
// selective repeat, RTO from an RFC 6298 estimate with a floor and a cap, retry limit, IRN's in-flight cap),
// and DLCP's trimmed packets (a DLCP packet whose payload a switch dropped is zero-filled at once
// within the loss budget). The NIC pulls the next packet (NextPacket) when its link is free.
#ifndef GS_QP_H
#define GS_QP_H

#include "gs-config.h"
#include "gs-header.h"
#include "gs-message.h"
#include "gs-ring-buffer.h"
#include "gs-send-times.h"

#include "ns3/event-id.h"
#include "ns3/packet.h"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ns3
{
namespace gs
{

class RcQp;

/// What a queue pair needs from its host.
class QpHost
{
  public:
    virtual ~QpHost() = default;
    /// Send an ACK or NAK now, ahead of data (a NIC's responder; the testbed's host shaper puts them first).
    virtual void SendControl(Ptr<Packet> p, uint32_t wire) = 0;
    /// The QP may have a packet to send.
    virtual void Activate(RcQp* qp) = 0;
};

/// What a queue pair tells its application (a job node).
class QpUser
{
  public:
    virtual ~QpUser() = default;
    /// Work request wrId is acknowledged.
    virtual void OnSendComplete(RcQp* qp, uint64_t wrId) = 0;
    /// A WRITE arrived whole (imm: its immediate, UINT64_MAX without); zeroFilled of its packets were trimmed.
    virtual void OnRecvComplete(RcQp* qp, uint64_t imm, MsgPtr data, uint32_t zeroFilled) = 0;
    /// The queue pair failed (retry limit, remote error): it sends nothing more.
    virtual void OnError(RcQp* qp, const std::string& error) = 0;
};

/// Who watches queue pairs stall and resume (gs-fault-schedule.h: a fault's time to recover): a stall begins at
/// a loss the requester learns of (a timeout, or a NAK of a sequence gap) and ends when an acknowledgement makes
/// progress again.
class StallObserver
{
  public:
    virtual ~StallObserver() = default;
    /// A stall begins now (a timeout or a NAK while none was under way).
    virtual void OnStall(const RcQp& qp) = 0;
    /// Progress after a stall that began at `stalledAtTicks`, now.
    virtual void OnResume(const RcQp& qp, int64_t stalledAtTicks) = 0;
};

/// What every queue pair of a job shares: one copy per job, not one per queue pair (a parameter server job
/// has N x N of them).
struct QpParams
{
    uint32_t job = 1;
    TransportSpec t;
    WireSizes wire;
    bool exact = false;                 // packets carry values
    std::optional<DlcpSpec> dlcp;       // marking of the job's data packets
    std::vector<std::string> hostNames; // by host index: a peer's name for error messages and results
    StallObserver* stalls = nullptr;    // a run with faults: told of every stall and its end
};

struct QpConfig
{
    std::shared_ptr<const QpParams> params;
    uint32_t localNode = 0;
    uint32_t remoteNode = 0;
    uint32_t localHost = 0;
    uint32_t remoteHost = 0;
    uint32_t initialPsn = 0;       // first PSN this QP sends
    uint32_t remoteInitialPsn = 0; // first PSN it expects
    bool nrContribution = false;   // data packets are NetReduce contributions (switches aggregate them)
    uint8_t nicClass = 0;          // NIC priority class (TensorLights), 0..7, 7 first
};

/// DLCP marking of a write: its layer class, and whether its packets may be dropped at all.
struct WriteTag
{
    uint8_t layerClass = 0;
    bool droppable = true;
    // a NetReduce all-gather's placeholder (gradswitch.hosts.netreduce.PlaceholderRequester): every packet goes out the
    // first time as its headers alone, marked trimmed, which the switches take as zeros; a resent one whole
    bool placeholder = false;
};

enum Counter
{
    C_ACCEPTED,
    C_DUPLICATES,
    C_HOLES_JUDGED,
    C_INVALID_ACKS,
    C_NAKS,
    C_NAKS_SENT,
    C_OUT_OF_ORDER,
    C_OUT_OF_WINDOW,
    C_OVER_LOSS_BUDGET,
    C_RETRANSMITTED,
    C_SENT,
    C_STALE_ACKS,
    C_TIMEOUTS,
    C_ZERO_FILLED,
    C_INVALID_REQUEST,
    C_REMOTE_ACCESS_ERROR,
    C_TRIMMED,
    C_TRIMMED_RESENT,
    C_COUNT
};

/// Counter names as gradswitch/hosts/comm.py reports them (gradswitch/roce/qp.py's counters; tests/unit/test_sim_counters.py
/// fails when a name or the side that counts it differs from there).
inline const char* const kCounterNames[C_COUNT] = {"accepted", "duplicates", "holes_judged", "invalid_acks", "naks", "naks_sent", "out_of_order", "out_of_window", "over_loss_budget", "retransmitted", "sent", "stale_acks", "timeouts", "zero_filled", "invalid_request", "remote_access_error", "trimmed", "trimmed_resent"};

/// Whether a QP's requester counts it (else its responder does).
constexpr bool
IsRequesterCounter(int c)
{
    return c == C_INVALID_ACKS || c == C_NAKS || c == C_RETRANSMITTED || c == C_SENT || c == C_STALE_ACKS ||
           c == C_TIMEOUTS;
}

/// A QP's counters, both sides' in one array (they count different ones).
struct Counters
{
    std::array<uint64_t, C_COUNT> v{};

    void Add(Counter c, uint64_t n = 1)
    {
        v[c] += n;
    }

    /// The requester's (or the responder's) non-zero ones by name.
    std::map<std::string, uint64_t> Named(bool requester) const
    {
        std::map<std::string, uint64_t> out;
        for (int i = 0; i < C_COUNT; i++)
        {
            if (v[i] && IsRequesterCounter(i) == requester)
            {
                out[kCounterNames[i]] = v[i];
            }
        }
        return out;
    }
};

class RcQp
{
  public:
    RcQp(QpHost* host, const QpConfig& cfg);
    ~RcQp();

    const QpConfig& Config() const
    {
        return m_cfg;
    }

    /// The remote host's name.
    const std::string& Peer() const
    {
        return m_cfg.params->hostNames.at(m_cfg.remoteHost);
    }

    // ---- requester ----

    /// Post an RDMA WRITE of `data` (with immediate `imm` when given); returns the work request id.
    uint64_t PostWrite(MsgPtr data, uint64_t va, uint32_t rkey, std::optional<uint64_t> imm, WriteTag tag = {});
    /// The NIC's link is free: the next packet to send (resends first, then new packets within the window).
    bool NextPacket(Ptr<Packet>& p, uint32_t& wire);
    /// Nothing posted is unacknowledged (or the requester was parked).
    bool Idle() const
    {
        return m_parked || m_una == m_nextPost;
    }

    /// The requester half stops for good: what it had posted is neither sent again nor timed out, and it
    /// posts nothing more (a NetReduce worker's contributions to a switch that died: gs-netreduce-worker.cc).
    /// The responder half goes on.
    void ParkRequester();

    /// The requester half starts again at `psn`, nothing posted or in flight (a NetReduce worker's return to a
    /// switch that is back, its cells empty: gs-netreduce-worker.cc); what it had posted before is forgotten.
    void RestartRequester(uint32_t psn);
    /// The responder half expects `psn` next, nothing buffered or half received (the other end of
    /// RestartRequester).
    void RestartResponder(uint32_t psn);

    /// Its data packets are NetReduce contributions or not (the fallback ring sends plain writes on a
    /// contribution QP's unused half).
    void SetNrContribution(bool nr)
    {
        m_cfg.nrContribution = nr;
    }

    bool Failed() const
    {
        return !m_error.empty();
    }

    const std::string& Error() const
    {
        return m_error;
    }

    /// An ACK or NAK for this QP's requests.
    void OnAck(const Wire& w);

    // ---- responder ----

    /// A request packet for this QP's responder (p holds the header and, in exact mode, the values).
    void OnData(const Wire& w, Ptr<Packet> p);

    /// The application its completions and errors go to (none: dropped).
    QpUser* user = nullptr;

    Counters counters;

    std::optional<double> Srtt() const
    {
        return m_srtt;
    }

    double Rto() const
    {
        return m_rto;
    }

    uint64_t ZeroFilled() const
    {
        return m_zeroFilled;
    }

    bool inActiveList = false; // the host's pull list
    bool dead = false;         // its process crashed: it sends and answers nothing
    bool Parked() const
    {
        return m_parked;
    }

    // Traffic of this QP (data it sent, ACKs and NAKs it sent; what it received): bytes on the link.
    uint64_t txPackets = 0;
    uint64_t txBytes = 0;
    uint64_t rxPackets = 0;
    uint64_t rxBytes = 0;

  private:
    struct WorkRequest
    {
        uint64_t wrId;
        MsgPtr data;
        uint64_t va;
        uint32_t rkey;
        bool hasImm;
        uint64_t imm;
        uint32_t firstPsn;
        uint32_t npackets;
        WriteTag tag;
    };

    struct Arrival
    {
        Wire w;
        Ptr<Packet> p;           // null for a zero-filled (trimmed) packet
        bool zeroFilled = false; // trimmed, and zero-filled by this responder
    };

    // requester
    const WorkRequest* Find(uint32_t psn) const;
    Ptr<Packet> Build(uint32_t psn, bool retransmission, uint32_t& wire);
    void AckThrough(uint32_t psn);
    void ReportCompleted();
    void SampleRtt(double rtt);
    double ComputeRto() const;
    void ScheduleResend(uint32_t psn, bool once);
    std::optional<int64_t> Deadline() const;
    void ArmTimer();
    void OnTimer();
    /// A loss learnt of: a stall begins unless one is under way (told to the StallObserver).
    void StallBegins();
    void Fail(const std::string& reason);

    // responder
    void Ack();
    void Nak(uint8_t syndrome, std::optional<uint32_t> sack);
    void Accept(Arrival a);
    void Drain(Arrival a, bool hadHoles);
    std::optional<uint8_t> Execute(const Arrival& a);
    void OutOfOrder(Arrival a);
    void Drained();
    std::optional<uint32_t> MessageEnd() const;
    std::optional<uint32_t> CurrentEnd() const;
    void Rearm();
    void JudgeHoles();
    void ArmJudge();
    uint32_t FirstBuffered() const;
    bool ZeroFill(Arrival& a);
    bool Keep(Arrival a);

    QpHost* m_host;
    QpConfig m_cfg;
    const TransportSpec& m_t; // m_cfg.params->t

    bool m_parked = false; // ParkRequester
    // requester state (gradswitch/roce/qp.py Requester)
    uint32_t m_nextPost, m_una, m_nxt, m_sentEnd;
    RingBuffer<WorkRequest> m_requests;
    std::unordered_set<uint32_t> m_sacked;
    RingBuffer<uint32_t> m_resend;
    std::unordered_set<uint32_t> m_resendPending;
    std::unordered_set<uint32_t> m_nakResent;
    std::optional<uint32_t> m_recover;
    std::optional<int64_t> m_timerStart;
    double m_rto;
    std::optional<double> m_srtt;
    double m_rttvar = 0;
    SendTimes m_sentAt; // of the PSNs in flight: first-transmission time, -1: none (Karn)
    uint32_t m_retries = 0;
    int64_t m_stalledAt = -1; // when the current stall began (-1: none)
    std::string m_error;
    uint64_t m_nextWrId = 0;
    std::vector<uint64_t> m_completed; // work requests an ACK or NAK completed: reported once it is handled whole
    EventId m_timer;
    int64_t m_timerAt = -1;

    // responder state (gradswitch/roce/qp.py Responder, gradswitch/roce/order_tolerant.py)
    uint32_t m_epsn;
    uint32_t m_msn = 0;
    bool m_nakSent = false;
    std::unordered_map<uint32_t, Arrival> m_buffered; // out-of-order packets (selective repeat), by PSN
    bool m_inWrite = false;
    MsgPtr m_msg;          // the message being received
    uint64_t m_msgVa = 0;
    uint32_t m_msgLen = 0;
    uint32_t m_offset = 0;
    uint32_t m_firstPsn = 0;
    uint32_t m_zeroFilledMsg = 0;
    uint64_t m_zeroFilled = 0;
    uint64_t m_accepted = 0;
    std::optional<int64_t> m_judgeAt;
    std::map<uint32_t, int64_t> m_endSeen; // order-tolerant: PSN of a LAST/ONLY ahead -> when it arrived
    EventId m_judge;
    int64_t m_judgeEventAt = -1;
};

} // namespace gs
} // namespace ns3

#endif
