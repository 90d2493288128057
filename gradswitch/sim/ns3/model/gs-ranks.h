// The run's partition over MPI ranks (docs/simulator.md "Distributed over MPI ranks"), by ns-3's
// rule: every rank builds the whole topology, a node's events (its applications, its switch state) run only
// on its rank, and a link whose ends are on different ranks becomes a PointToPointRemoteChannel whose delay
// bounds the lookahead. Also what the ranks tell each other outside the topology (a job node finished or
// failed: control messages through ns-3's own MpiInterface, so they are events in simulated time like a
// packet on a cut link) and the gathering of every rank's results at rank 0.
//
// One rank (the default, and any build without NS3_MPI) is a partition with every node local.
#ifndef GS_RANKS_H
#define GS_RANKS_H

#include "gs-config.h"
#include "gs-topology.h"

#include "ns3/callback.h"
#include "ns3/node.h"
#include "ns3/packet.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

class Ranks
{
  public:
    /// Checks the configuration against the topology and against the MPI world this process runs in.
    Ranks(const MpiSpec& spec, const Topology& topo);

    uint32_t Count() const
    {
        return m_count;
    }

    /// This process's rank.
    uint32_t Me() const
    {
        return m_me;
    }

    bool Distributed() const
    {
        return m_count > 1;
    }

    uint32_t RankOf(uint32_t node) const
    {
        return m_rankOf[node];
    }

    bool Local(uint32_t node) const
    {
        return m_rankOf[node] == m_me;
    }

    bool Cut(uint32_t a, uint32_t b) const
    {
        return m_rankOf[a] != m_rankOf[b];
    }

    /// The smallest delay of a cut link (ns-3's lookahead); 0 without one.
    double LookaheadS() const
    {
        return m_lookaheadS;
    }

    /// How long a control message takes: the largest delay of a cut link, at least every rank's lookahead,
    /// so that it never arrives in a rank's past (ticks of ns-3's time resolution).
    int64_t ControlDelayTicks() const
    {
        return m_controlDelayTicks;
    }

    size_t CutLinks() const
    {
        return m_cutLinks;
    }

    /// Create one control node per rank (after the topology's nodes, so theirs keep their indices);
    /// messages to this rank's go to `receive`.
    void CreateControlNodes(Callback<void, Ptr<Packet>> receive);
    /// Send a control message to every other rank, arriving ControlDelayTicks() from now.
    void Broadcast(Ptr<Packet> p) const;

    /// The mean time of an MPI_Allgather of a few bytes among the ranks, as ns-3's barrier does once per
    /// lookahead window (microseconds; 0 on one rank): what a window costs besides its events.
    double AllgatherProbeUs(int rounds) const;

    /// Rank 0: every rank's `mine`, in rank order; other ranks: empty.
    std::vector<std::string> Gather(const std::string& mine) const;

  private:
    uint32_t m_count = 1;
    uint32_t m_me = 0;
    std::vector<uint32_t> m_rankOf; // per node index
    double m_lookaheadS = 0;
    int64_t m_controlDelayTicks = 0;
    size_t m_cutLinks = 0;
    std::vector<Ptr<Node>> m_control; // per rank
};

} // namespace gs
} // namespace ns3

#endif
