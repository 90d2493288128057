// The controller's routes around what is out (gradswitch/control/routing.py's rule on the topology minus the dead
// switches and links): once a fault is noticed (gs-fault-schedule.h), every switch gets the forwarding table
// of shortest paths over what is up, its ECMP groups without the dead next hops; when the element is back,
// the tables of the intact network again.
#ifndef GS_REROUTER_H
#define GS_REROUTER_H

#include "gs-switch.h"
#include "gs-topology.h"

#include <cstdint>
#include <vector>

namespace ns3
{
namespace gs
{

class Rerouter
{
  public:
    /// `switches`: by switch index - hosts, as the simulation holds them.
    Rerouter(const Topology& topo, const std::vector<Ptr<GsSwitch>>& switches);

    /// A switch leaves (out) or rejoins the routes; every switch's table is pushed again.
    void SwitchOut(uint32_t sw, bool out);
    /// A link (its two ends' node indices) leaves or rejoins the routes; every table is pushed again.
    void LinkOut(uint32_t a, uint32_t b, bool out);

    /// How many times the tables were recomputed and pushed.
    uint32_t Reroutes() const
    {
        return m_reroutes;
    }

  private:
    void Push();

    const Topology& m_topo;
    const std::vector<Ptr<GsSwitch>>& m_switches;
    Outage m_out;
    uint32_t m_reroutes = 0;
};

} // namespace gs
} // namespace ns3

#endif
