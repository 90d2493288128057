#include "gs-rerouter.h"

#include <algorithm>

namespace ns3
{
namespace gs
{

Rerouter::Rerouter(const Topology& topo, const std::vector<Ptr<GsSwitch>>& switches)
    : m_topo(topo),
      m_switches(switches)
{
}

void
Rerouter::SwitchOut(uint32_t sw, bool out)
{
    if (out)
    {
        m_out.switches.insert(sw);
    }
    else
    {
        m_out.switches.erase(sw);
    }
    Push();
}

void
Rerouter::LinkOut(uint32_t a, uint32_t b, bool out)
{
    std::pair<uint32_t, uint32_t> key{std::min(a, b), std::max(a, b)};
    if (out)
    {
        m_out.links.insert(key);
    }
    else
    {
        m_out.links.erase(key);
    }
    Push();
}

void
Rerouter::Push()
{
    // Every rank pushes the same tables (each holds every switch; only a switch's own rank forwards by it).
    for (uint32_t s = m_topo.Hosts(); s < m_topo.Nodes(); s++)
    {
        m_switches[s - m_topo.Hosts()]->SetTable(m_topo.Forwarding(s, m_out));
    }
    m_reroutes++;
}

} // namespace gs
} // namespace ns3
