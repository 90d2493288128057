// A scripted exchange between one requester QP and one responder QP (gs-qp-script, docs/simulator.md "The
// transport's conformance test"): the transport's settings, the messages the requester posts, and the wire
// between them: a fixed one-way delay, an optional rate, and what happens to the k-th packet of each direction.
// tests/ns3/qp_script.py writes the same JSON and runs the same scenario over gradswitch/roce/qp.py.
#ifndef GS_QP_SCENARIO_H
#define GS_QP_SCENARIO_H

#include "gs-config.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

/// What the wire does to a packet.
enum class WireAction
{
    Drop,      // never arrives
    Duplicate, // arrives, and a copy `by` later
    Delay,     // arrives `by` late (packets sent after it may overtake it)
    Trim,      // arrives as its headers alone, marked trimmed (a DLCP switch cut its payload)
};

/// An action for the packets of one direction whose emission index (0: the first packet that direction
/// carried, retransmissions counted) is within [first, last] (last: no end when absent).
struct WireRule
{
    uint64_t first{};
    std::optional<uint64_t> last;
    WireAction action{};
    double byS{};
};

/// An RDMA WRITE the requester posts at `atS` (with immediate `imm` when given), or, with `after`, from within the
/// callback that reports the completion of that earlier message (as a job node posts its next write).
struct ScriptMessage
{
    uint32_t bytes{};
    double atS{};
    std::optional<uint32_t> imm;
    std::optional<uint32_t> after;
};

/// When the host's NIC takes a QP's packets.
enum class NicPull
{
    AfterEvent, // after the event that activated the QP, at the same instant (gradswitch/roce/engine.py's flush)
    AtOnce,     // at once, within the activation, when the link is free (GsDevice::Kick)
};

struct QpScenario
{
    std::string name;
    TransportSpec transport;
    WireSizes wire;             // header sizes (gradswitch/roce/wire.py's, as gradswitch.sim writes them)
    uint32_t initialPsn{};      // the requester's first PSN (the responder's expected one)
    double delayS{};            // one way
    std::optional<double> rateBps; // serialization at this rate (none: packets take no time on the link)
    NicPull pull{};
    std::vector<ScriptMessage> messages;
    std::vector<WireRule> data; // requester -> responder
    std::vector<WireRule> acks; // responder -> requester
    double timeLimitS{};
};

/// The rule for packet `index` of a direction (the first that matches), none when it passes untouched.
const WireRule* FindRule(const std::vector<WireRule>& rules, uint64_t index);

/// Parse a scenario (JSON text); ConfigError names the bad value (every key is required, and no other taken:
/// tests/ns3/qp_script.py Scenario.to_json writes them all).
QpScenario ParseQpScenario(const std::string& text);

} // namespace gs
} // namespace ns3

#endif
