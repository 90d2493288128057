#include "gs-topology.h"

#include <algorithm>
#include <deque>
#include <set>

namespace ns3
{
namespace gs
{

Topology::Topology(const TopologySpec& spec)
{
    m_hosts = static_cast<uint32_t>(spec.hosts.size());
    for (const auto& h : spec.hosts)
    {
        m_index[h.name] = static_cast<uint32_t>(m_names.size());
        m_names.push_back(h.name);
        m_ips.push_back(h.ip);
    }
    std::vector<SwitchSpec> switches = spec.switches;
    for (const auto& s : switches)
    {
        if (m_index.count(s.name))
        {
            throw ConfigError("topology: node name '" + s.name + "' is used twice");
        }
        m_index[s.name] = static_cast<uint32_t>(m_names.size());
        m_names.push_back(s.name);
        m_deviceIds.push_back(s.deviceId);
        m_roles.push_back(s.role);
    }
    if (m_index.size() != m_names.size())
    {
        throw ConfigError("topology: a node name is used twice");
    }
    m_ports.resize(m_names.size());
    for (const auto& l : spec.links)
    {
        uint32_t a = Index(l.a);
        uint32_t b = Index(l.b);
        if (IsHost(a) && IsHost(b))
        {
            throw ConfigError("topology: link " + l.a + "-" + l.b + " joins two hosts");
        }
        m_ports[a].push_back(PortInfo{l.aPort, b, l.bPort, l.rateBps, l.delayS, l.queueBytes, l.shaped});
        m_ports[b].push_back(PortInfo{l.bPort, a, l.aPort, l.rateBps, l.delayS, l.queueBytes, l.shaped});
    }
    for (uint32_t n = 0; n < Nodes(); n++)
    {
        auto& ports = m_ports[n];
        std::sort(ports.begin(), ports.end(), [](const PortInfo& x, const PortInfo& y) { return x.port < y.port; });
        for (size_t i = 1; i < ports.size(); i++)
        {
            if (ports[i].port == ports[i - 1].port)
            {
                throw ConfigError("topology: port " + std::to_string(ports[i].port) + " of " + m_names[n] +
                                  " is used by two links");
            }
        }
        if (IsHost(n) && ports.size() != 1)
        {
            throw ConfigError("topology: host " + m_names[n] + " must have exactly one link");
        }
    }
    for (uint32_t s = m_hosts; s < Nodes(); s++)
    {
        for (const auto& p : m_ports[s])
        {
            if (IsHost(p.peer))
            {
                m_edges.push_back(s);
                break;
            }
        }
    }
    for (uint32_t e : m_edges)
    {
        m_edgeDistances.push_back(Distances(e));
    }
}

uint32_t
Topology::Index(const std::string& name) const
{
    auto it = m_index.find(name);
    if (it == m_index.end())
    {
        throw ConfigError("topology: no node '" + name + "'");
    }
    return it->second;
}

const PortInfo*
Topology::PortTo(uint32_t node, uint32_t peer) const
{
    for (const auto& p : m_ports[node])
    {
        if (p.peer == peer)
        {
            return &p;
        }
    }
    return nullptr;
}

std::pair<uint32_t, uint32_t>
Topology::Attachment(uint32_t host) const
{
    const PortInfo& p = m_ports[host].at(0);
    return {p.peer, p.peerPort};
}

std::vector<int32_t>
Topology::Distances(uint32_t target) const
{
    return Distances(target, Outage{});
}

std::vector<int32_t>
Topology::Distances(uint32_t target, const Outage& out) const
{
    std::vector<int32_t> dist(Nodes(), -1);
    if (out.switches.count(target))
    {
        return dist;
    }
    std::deque<uint32_t> todo{target};
    dist[target] = 0;
    while (!todo.empty())
    {
        uint32_t n = todo.front();
        todo.pop_front();
        for (const auto& p : m_ports[n])
        {
            if (!IsHost(p.peer) && dist[p.peer] < 0 && !out.Blocks(n, p.peer))
            {
                dist[p.peer] = dist[n] + 1;
                todo.push_back(p.peer);
            }
        }
    }
    return dist;
}

ForwardingTable
Topology::Forwarding(uint32_t sw) const
{
    return Forwarding(sw, Outage{});
}

ForwardingTable
Topology::Forwarding(uint32_t sw, const Outage& out) const
{
    ForwardingTable t;
    t.hostPort.assign(m_hosts, -1);
    t.hostEdge.assign(m_hosts, 0);
    std::vector<int32_t> edgeIndex(Nodes(), -1);
    for (size_t i = 0; i < m_edges.size(); i++)
    {
        edgeIndex[m_edges[i]] = static_cast<int32_t>(i);
    }
    for (uint32_t h = 0; h < m_hosts; h++)
    {
        t.hostEdge[h] = static_cast<uint32_t>(edgeIndex[Attachment(h).first]);
    }
    for (const auto& p : m_ports[sw])
    {
        if (IsHost(p.peer))
        {
            t.hostPort[p.peer] = static_cast<int32_t>(p.port);
        }
    }
    std::map<std::vector<uint16_t>, int32_t> known;
    for (size_t e = 0; e < m_edges.size(); e++)
    {
        if (m_edges[e] == sw)
        {
            t.edgeGroup.push_back(-1);
            continue;
        }
        std::vector<int32_t> around;
        if (!out.Empty())
        {
            around = Distances(m_edges[e], out);
        }
        const auto& dist = out.Empty() ? m_edgeDistances[e] : around;
        if (dist[sw] < 0)
        {
            if (!out.Empty())
            {
                t.edgeGroup.push_back(-1); // cut off by the outage: no route
                continue;
            }
            throw ConfigError("topology: " + m_names[sw] + " cannot reach " + m_names[m_edges[e]]);
        }
        std::vector<uint16_t> hops;
        for (const auto& p : m_ports[sw])
        {
            if (!IsHost(p.peer) && dist[p.peer] == dist[sw] - 1 && !out.Blocks(sw, p.peer))
            {
                hops.push_back(static_cast<uint16_t>(p.port));
            }
        }
        auto it = known.find(hops);
        if (it == known.end())
        {
            it = known.emplace(hops, static_cast<int32_t>(t.groups.size())).first;
            t.groups.push_back(hops);
        }
        t.edgeGroup.push_back(it->second);
    }
    return t;
}

AggregationTree
Topology::Tree(uint32_t job, const std::vector<uint32_t>& workerHosts) const
{
    std::set<uint32_t> edgeSet;
    for (uint32_t h : workerHosts)
    {
        edgeSet.insert(Attachment(h).first);
    }
    std::vector<uint32_t> edges(edgeSet.begin(), edgeSet.end()); // ascending node index = switch order
    AggregationTree tree;
    if (edges.size() == 1)
    {
        tree.root = edges[0];
    }
    else
    {
        // The root: a switch nearest to every edge switch of the job (smallest largest distance); among
        // equals, the (job - 1)-th in switch order. On a leaf-spine these are the spines linked to every
        // leaf of the job, as gradswitch/control/controls/netreduce.py plan_job chooses its aggregation spine.
        std::vector<std::vector<int32_t>> dist;
        for (uint32_t e : edges)
        {
            dist.push_back(Distances(e));
        }
        int32_t best = -1;
        std::vector<uint32_t> candidates;
        for (uint32_t s = m_hosts; s < Nodes(); s++)
        {
            int32_t worst = 0;
            for (const auto& d : dist)
            {
                worst = d[s] < 0 ? INT32_MAX : std::max(worst, d[s]);
            }
            if (worst == INT32_MAX)
            {
                continue;
            }
            if (best < 0 || worst < best)
            {
                best = worst;
                candidates.clear();
            }
            if (worst == best)
            {
                candidates.push_back(s);
            }
        }
        if (candidates.empty())
        {
            throw ConfigError("NetReduce job " + std::to_string(job) + ": its edge switches are not connected");
        }
        tree.root = candidates[(job - 1) % candidates.size()];
    }
    std::vector<int32_t> toRoot = Distances(tree.root);
    std::map<uint32_t, AggregationRole> roles;
    roles[tree.root].sw = tree.root;
    for (uint32_t e : edges)
    {
        uint32_t x = e;
        while (x != tree.root)
        {
            if (roles.count(x) && roles[x].parent >= 0)
            {
                break; // joined the tree already
            }
            // The parent: a neighbour one hop nearer the root, preferring one in the tree already, then the
            // first in port order.
            int64_t chosen = -1;
            uint32_t chosenPort = 0;
            for (const auto& p : m_ports[x])
            {
                if (IsHost(p.peer) || toRoot[p.peer] != toRoot[x] - 1)
                {
                    continue;
                }
                bool inTree = roles.count(p.peer) > 0;
                if (chosen < 0 || (inTree && !roles.count(static_cast<uint32_t>(chosen))))
                {
                    chosen = p.peer;
                    chosenPort = p.port;
                }
            }
            auto& r = roles[x];
            r.sw = x;
            r.parent = chosen;
            r.parentPort = chosenPort;
            auto& pr = roles[static_cast<uint32_t>(chosen)];
            pr.sw = static_cast<uint32_t>(chosen);
            pr.children.push_back(x);
            pr.childPorts.push_back(PortTo(static_cast<uint32_t>(chosen), x)->port);
            x = static_cast<uint32_t>(chosen);
        }
    }
    for (uint32_t rank = 0; rank < workerHosts.size(); rank++)
    {
        auto [sw, port] = Attachment(workerHosts[rank]);
        roles[sw].sw = sw;
        roles[sw].localRanks.push_back(rank);
    }
    for (auto& [sw, role] : roles)
    {
        tree.roles.push_back(role);
    }
    return tree;
}

} // namespace gs
} // namespace ns3
