#include "gs-ranks.h"

#include "ns3/nstime.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/simulator.h"

#ifdef NS3_MPI
#include "ns3/mpi-interface.h"
#include "ns3/mpi-receiver.h"

#include <mpi.h>
#endif

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>

namespace ns3
{
namespace gs
{

Ranks::Ranks(const MpiSpec& spec, const Topology& topo)
    : m_count(spec.ranks),
      m_rankOf(topo.Nodes(), 0)
{
#ifdef NS3_MPI
    uint32_t world = MpiInterface::IsEnabled() ? MpiInterface::GetSize() : 1;
    if (world != m_count)
    {
        throw ConfigError("mpi.ranks = " + std::to_string(m_count) + " but this runs on " + std::to_string(world) +
                          " MPI rank(s): start it with mpirun -np " + std::to_string(m_count));
    }
    m_me = MpiInterface::IsEnabled() ? MpiInterface::GetSystemId() : 0;
#else
    if (m_count > 1)
    {
        throw ConfigError("mpi.ranks = " + std::to_string(m_count) +
                          ": this gradswitch-sim is built without MPI (build build/ns3-mpi: python -m gradswitch.sim.build --mpi)");
    }
#endif
    if (m_count == 1)
    {
        return;
    }
    for (uint32_t n = 0; n < topo.Nodes(); n++)
    {
        auto it = spec.rankOf.find(topo.Name(n));
        if (it == spec.rankOf.end())
        {
            throw ConfigError("mpi.rank_of: " + topo.Name(n) + " has no rank");
        }
        m_rankOf[n] = it->second;
    }
    for (const auto& [name, rank] : spec.rankOf)
    {
        topo.Index(name); // a name that is no node of the topology is an error
    }
    std::vector<uint32_t> nodesOf(m_count, 0);
    for (uint32_t r : m_rankOf)
    {
        nodesOf[r]++;
    }
    for (uint32_t r = 0; r < m_count; r++)
    {
        if (nodesOf[r] == 0)
        {
            throw ConfigError("mpi.rank_of: rank " + std::to_string(r) + " owns no node: give fewer ranks");
        }
    }
    double least = std::numeric_limits<double>::infinity();
    double most = 0;
    std::set<std::pair<uint32_t, uint32_t>> neighbours;
    for (uint32_t a = 0; a < topo.Nodes(); a++)
    {
        for (const PortInfo& p : topo.Ports(a))
        {
            if (p.peer < a || !Cut(a, p.peer))
            {
                continue;
            }
            if (!(p.delayS > 0))
            {
                throw ConfigError("topology.links[" + topo.Name(a) + "-" + topo.Name(p.peer) +
                                  "]: cut between ranks with delay 0; a cut link's delay is the lookahead and must be above 0");
            }
            m_cutLinks++;
            least = std::min(least, p.delayS);
            most = std::max(most, p.delayS);
            neighbours.insert({std::min(m_rankOf[a], m_rankOf[p.peer]), std::max(m_rankOf[a], m_rankOf[p.peer])});
        }
    }
    if (m_cutLinks == 0)
    {
        throw ConfigError("mpi.rank_of: no link is cut between ranks; the ranks would not simulate one network");
    }
    if (spec.sync == MpiSync::NullMessage)
    {
        // Null messages (and our control messages) only flow between ranks that share a link.
        for (uint32_t a = 0; a < m_count; a++)
        {
            for (uint32_t b = a + 1; b < m_count; b++)
            {
                if (!neighbours.count({a, b}))
                {
                    throw ConfigError("mpi.sync = null-message: ranks " + std::to_string(a) + " and " +
                                      std::to_string(b) + " share no link; use sync barrier or another partition");
                }
            }
        }
    }
    m_lookaheadS = least;
    m_controlDelayTicks = Seconds(most).GetTimeStep();
}

void
Ranks::CreateControlNodes(Callback<void, Ptr<Packet>> receive)
{
#ifdef NS3_MPI
    if (!Distributed())
    {
        return;
    }
    for (uint32_t r = 0; r < m_count; r++)
    {
        // A node with one device on no channel: ns-3 finds the device's MpiReceiver by (node, device index)
        // and leaves channel-less devices out of its lookahead.
        Ptr<Node> node = CreateObject<Node>(r);
        Ptr<PointToPointNetDevice> dev = CreateObject<PointToPointNetDevice>();
        node->AddDevice(dev);
        if (r == m_me)
        {
            Ptr<MpiReceiver> rx = CreateObject<MpiReceiver>();
            rx->SetReceiveCallback(receive);
            dev->AggregateObject(rx);
        }
        m_control.push_back(node);
    }
#endif
}

void
Ranks::Broadcast(Ptr<Packet> p) const
{
#ifdef NS3_MPI
    Time rx = Simulator::Now() + TimeStep(m_controlDelayTicks);
    for (uint32_t r = 0; r < m_count; r++)
    {
        if (r != m_me)
        {
            MpiInterface::SendPacket(p->Copy(), rx, m_control[r]->GetId(), 0);
        }
    }
#endif
}

double
Ranks::AllgatherProbeUs(int rounds) const
{
    if (!Distributed() || rounds <= 0)
    {
        return 0;
    }
#ifdef NS3_MPI
    MPI_Comm comm = MpiInterface::GetCommunicator();
    std::vector<uint64_t> mine(4, m_me); // as large as ns-3's LbtsMessage
    std::vector<uint64_t> all(4 * m_count);
    MPI_Barrier(comm);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < rounds; i++)
    {
        MPI_Allgather(mine.data(), static_cast<int>(mine.size() * sizeof(uint64_t)), MPI_BYTE, all.data(),
                      static_cast<int>(mine.size() * sizeof(uint64_t)), MPI_BYTE, comm);
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / rounds;
#else
    return 0;
#endif
}

std::vector<std::string>
Ranks::Gather(const std::string& mine) const
{
    if (!Distributed())
    {
        return {mine};
    }
    std::vector<std::string> out;
#ifdef NS3_MPI
    MPI_Comm comm = MpiInterface::GetCommunicator();
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(m_me == 0 ? m_count : 0);
    MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm);
    std::vector<int> offsets(lengths.size(), 0);
    int total = 0;
    for (size_t r = 0; r < lengths.size(); r++)
    {
        offsets[r] = total;
        total += lengths[r];
    }
    std::vector<char> all(m_me == 0 ? static_cast<size_t>(total) : 0);
    MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm);
    for (size_t r = 0; r < lengths.size(); r++)
    {
        out.emplace_back(all.data() + offsets[r], static_cast<size_t>(lengths[r]));
    }
#endif
    return out;
}

} // namespace gs
} // namespace ns3
