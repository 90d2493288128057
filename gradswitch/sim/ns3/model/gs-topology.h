// The network as data (from the run's configuration): nodes (hosts first, then switches), their ports,
// and what is computed from it once at set-up: every switch's forwarding table (the rule of
// gradswitch/control/routing.py: a host's own port, else every neighbour on a shortest path to the host's edge
// switch, an ECMP group when several) and NetReduce's aggregation trees.
#ifndef GS_TOPOLOGY_H
#define GS_TOPOLOGY_H

#include "gs-config.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace ns3
{
namespace gs
{

struct PortInfo
{
    uint32_t port = 0;
    uint32_t peer = 0;     // node index of the far end
    uint32_t peerPort = 0; // its port there
    double bps = 0;
    double delayS = 0;
    uint64_t queueBytes = 0;
    bool shaped = false; // the testbed's HTB-shaped veth: a packet reaches the peer as it leaves (GsChannel)
};

/// A switch's forwarding state, copied into the switch (nothing is shared between nodes).
struct ForwardingTable
{
    std::vector<int32_t> hostPort;               // per host: the port it is attached to here, or -1
    std::vector<uint32_t> hostEdge;              // per host: the index of its edge switch (among edge switches)
    std::vector<int32_t> edgeGroup;              // per edge switch index: its group, -1 for this switch itself
    std::vector<std::vector<uint16_t>> groups;   // next-hop ports, ascending (a group of one: a plain next hop)
};

/// One switch's part of a NetReduce job's aggregation tree.
struct AggregationRole
{
    uint32_t sw = 0;                     // node index
    int64_t parent = -1;                 // node index of the parent switch (-1: the root)
    uint32_t parentPort = 0;             // this switch's port to its parent
    std::vector<uint32_t> localRanks;    // workers attached here (member bits 0.. in this order)
    std::vector<uint32_t> children;      // child switches (member bits after the workers)
    std::vector<uint32_t> childPorts;    // this switch's port to each child
};

/// What is out of the network (gs-rerouter.h): switches, and links by their two ends (lower index first).
struct Outage
{
    std::set<uint32_t> switches;
    std::set<std::pair<uint32_t, uint32_t>> links;

    bool Empty() const
    {
        return switches.empty() && links.empty();
    }

    /// Whether a packet may cross from node a to its neighbour b.
    bool Blocks(uint32_t a, uint32_t b) const
    {
        return switches.count(b) > 0 || switches.count(a) > 0 || links.count({std::min(a, b), std::max(a, b)}) > 0;
    }
};

struct AggregationTree
{
    uint32_t root = 0;
    std::vector<AggregationRole> roles; // one per switch of the tree
};

class Topology
{
  public:
    explicit Topology(const TopologySpec& spec);

    uint32_t Hosts() const
    {
        return m_hosts;
    }

    uint32_t Nodes() const
    {
        return static_cast<uint32_t>(m_names.size());
    }

    bool IsHost(uint32_t n) const
    {
        return n < m_hosts;
    }

    uint32_t Index(const std::string& name) const;
    const std::string& Name(uint32_t n) const
    {
        return m_names[n];
    }

    uint32_t Ip(uint32_t host) const
    {
        return m_ips[host];
    }

    uint32_t DeviceId(uint32_t sw) const
    {
        return m_deviceIds[sw - m_hosts];
    }

    const std::string& Role(uint32_t sw) const
    {
        return m_roles[sw - m_hosts];
    }

    /// Ports of a node, ascending.
    const std::vector<PortInfo>& Ports(uint32_t node) const
    {
        return m_ports[node];
    }

    /// The port of `node` whose far end is `peer` (the first, ascending); nullptr if none.
    const PortInfo* PortTo(uint32_t node, uint32_t peer) const;
    /// (switch, port) a host is attached to.
    std::pair<uint32_t, uint32_t> Attachment(uint32_t host) const;
    /// Switches with at least one host, in switch order.
    const std::vector<uint32_t>& EdgeSwitches() const
    {
        return m_edges;
    }

    /// Hop counts over switch-to-switch links from every node to switch `target` (-1: unreachable; hosts -1).
    std::vector<int32_t> Distances(uint32_t target) const;
    /// The same over what is not out (an outage's switches unreachable, -1).
    std::vector<int32_t> Distances(uint32_t target, const Outage& out) const;

    ForwardingTable Forwarding(uint32_t sw) const;
    /// A switch's table around an outage (the controller's routes after it noticed): shortest paths over what
    /// is up; an edge switch it cannot reach gets no route (-1), which drops its packets.
    ForwardingTable Forwarding(uint32_t sw, const Outage& out) const;

    /// The aggregation tree of a NetReduce job whose workers (rank order) sit on these hosts; `job` picks its root
    /// among equals (the (job - 1)-th), the id of the job whose switch job it is for an all-reduce (gs-simulation.cc).
    AggregationTree Tree(uint32_t job, const std::vector<uint32_t>& workerHosts) const;

  private:
    uint32_t m_hosts = 0;
    std::vector<std::string> m_names;
    std::unordered_map<std::string, uint32_t> m_index;
    std::vector<uint32_t> m_ips;
    std::vector<uint32_t> m_deviceIds;
    std::vector<std::string> m_roles;
    std::vector<std::vector<PortInfo>> m_ports;
    std::vector<uint32_t> m_edges;
    std::vector<std::vector<int32_t>> m_edgeDistances; // per edge index: Distances(edge)
};

} // namespace gs
} // namespace ns3

#endif
