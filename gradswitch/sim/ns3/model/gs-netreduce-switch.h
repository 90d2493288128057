// A NetReduce job's aggregation on one switch: the logic of gradswitch/p4src/include/controls/netreduce.p4 and
// docs/netreduce.md (cells with a contribution bitmap, count, message number and final flag, two shadow
// copies per credit slot, the first packet's context per member QP, the verdicts of nr_verdicts), on every
// switch of the job's aggregation tree (gs-topology.h): members are the workers attached here and the
// child switches; a switch with a parent sends its partial sum up and returns the parent's result; the
// root returns the result. A reduce-scatter's or all-gather's job (NrOwners, gradswitch/p4src/include/controls/
// netreduce_scatter.p4) reads a message's owner from its first packet's RETH (rank + 1 above the window index,
// kept in the per-QP context): reduce-scatter sends the sum whole to the owner alone and a copy trimmed to its
// headers to every other receiver; all-gather takes a placeholder (headers alone, marked trimmed) as zeros and
// sends the owner's values whole to every receiver but the owner, whose copy is trimmed. Copies between
// switches stay whole. A placeholder that would complete its cell or be answered is refused untouched
// (placeholder-last), as the P4 program must (BMv2 cannot grow it into the values); its sender resends it whole.
// Fields are wider than the P4 program's (any number of members and credits, any depth): docs/simulator.md lists
// every difference.
#ifndef GS_NETREDUCE_SWITCH_H
#define GS_NETREDUCE_SWITCH_H

#include "gs-config.h"
#include "gs-header.h"
#include "gs-topology.h"

#include "ns3/packet.h"

#include <map>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

class GsSwitch;

class NrSwitchJob
{
  public:
    struct Member
    {
        bool worker = true;  // a worker's QP, else a child switch
        uint32_t index = 0;  // rank, or child index
        uint32_t port = 0;   // port it arrives on
    };

    /// The cells of NetReduce job `jobId` (JobSpec::NetReduceJobs: the job's own id, or a graph job's switch
    /// job), reading owners as `owners` says, for `job`'s workers (its credits and check).
    NrSwitchJob(GsSwitch* sw, uint32_t jobId, NrOwners owners, const JobSpec& job, const AggregationRole& role,
                const std::vector<uint32_t>& workerHosts, const std::vector<uint32_t>& workerNodes,
                const WireSizes& wire);

    uint32_t Job() const
    {
        return m_job;
    }

    const std::vector<Member>& Members() const
    {
        return m_members;
    }

    const AggregationRole& Role() const
    {
        return m_role;
    }

    /// A member's packet: a worker's contribution, or a child's partial sum.
    void Contribution(uint32_t member, Ptr<Packet> p, const Wire& w);
    /// The parent's result.
    void ParentResult(Ptr<Packet> p, const Wire& w);
    /// Every cell and context empty, as the P4 program's registers after the controller cleared them (a job
    /// returning from its fallback ring: gs-fault-schedule.h).
    void Clear();

    /// Events by config.p4's names (contribution, completion, duplicate, ...).
    std::map<std::string, uint64_t> events;

  private:
    struct Cell
    {
        uint32_t msg = 0;
        uint32_t count = 0;
        bool final = false;
        bool lossy = false;
        uint64_t digest = 0;
    };

    /// A per-QP context entry (learn_context): the message, its window index and its owner field (0: none).
    struct Context
    {
        bool valid = false;
        uint32_t msg = 0;
        uint32_t window = 0;
        uint32_t owner = 0;
    };

    bool Locate(uint32_t member, const Wire& w, uint32_t& cell, uint32_t& other, uint32_t& owner);
    void Accept(uint32_t cell, bool fresh, bool counted, Ptr<Packet> p, const Wire& w);
    void Refuse(const char* event);
    void Emit(const Wire& in, uint32_t cell, uint32_t owner, const std::vector<uint32_t>& ranks, bool children);
    void SendUp(const Wire& in, uint32_t cell);
    void Answer(uint32_t member, const Wire& in, uint32_t cell, uint32_t owner);
    /// The copy for receiver rank r of a message with this owner field goes trimmed (netreduce_scatter.p4).
    bool Trimmed(uint32_t r, uint32_t owner) const;
    /// A copy's lengths: the values whole, or its headers alone marked trimmed (controls/trim.p4).
    void Size(Wire& w, bool trimmed) const;
    Ptr<Packet> Make(Wire& w, uint32_t cell) const;
    bool Bit(uint32_t cell, uint32_t member) const;
    void SetBit(uint32_t cell, uint32_t member, bool on);
    bool Empty(uint32_t cell) const;
    void ClearBits(uint32_t cell);
    void ReadValues(Ptr<Packet> p, const Wire& w, std::vector<int32_t>& out) const;

    GsSwitch* m_sw;
    uint32_t m_job;
    NrOwners m_owners;
    AggregationRole m_role;
    std::vector<uint32_t> m_workerHosts; // host of every rank of the job
    uint32_t m_n = 0;                    // workers of the job
    uint32_t m_credits;
    uint32_t m_ctxSlots;                 // per member: context entries (a power of two >= credits)
    bool m_exact;
    bool m_growPlaceholders; // a what-if: a placeholder may complete its cell (GraphSpec::growPlaceholders)
    WireSizes m_wire;
    std::vector<Member> m_members;
    std::vector<uint32_t> m_receivers;   // local ranks: results go to them (on the connection from rank - 1)
    std::vector<uint32_t> m_localPort;   // per rank: its port here, when attached here
    uint32_t m_words;                    // 64-bit words of a cell's bitmap
    std::vector<Cell> m_cells;
    std::vector<uint64_t> m_bitmaps;
    std::vector<int32_t> m_values;       // exact mode: kAggElements per cell
    std::vector<Context> m_context;      // per member x slot
    std::vector<int32_t> m_scratch;
};

} // namespace gs
} // namespace ns3

#endif
