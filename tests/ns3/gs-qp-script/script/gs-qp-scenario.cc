#include "gs-qp-scenario.h"

#include "gs-config-object.h"
#include "gs-psn.h"

#include <nlohmann/json.hpp>

namespace ns3
{
namespace gs
{

using json = nlohmann::json;

namespace
{

std::vector<WireRule>
ParseRules(ConfigObject& scenario, const char* key)
{
    std::vector<WireRule> rules;
    for (ConfigObject r : scenario.Objects(key))
    {
        WireRule rule;
        rule.first = r.Get<uint64_t>("first");
        rule.last = r.Nullable<uint64_t>("last");
        if (rule.last && *rule.last < rule.first)
        {
            throw ConfigError(r.Where("last") + ": before first");
        }
        std::string action = r.Get<std::string>("action");
        if (action == "drop")
        {
            rule.action = WireAction::Drop;
        }
        else if (action == "duplicate")
        {
            rule.action = WireAction::Duplicate;
        }
        else if (action == "delay")
        {
            rule.action = WireAction::Delay;
        }
        else if (action == "trim")
        {
            rule.action = WireAction::Trim;
        }
        else
        {
            throw ConfigError(r.Where("action") + " = '" + action + "': not one of drop, duplicate, delay, trim");
        }
        rule.byS = r.Get<double>("by_s");
        r.Finish();
        if (rule.byS < 0)
        {
            throw ConfigError(r.Where("by_s") + ": at least 0");
        }
        rules.push_back(rule);
    }
    return rules;
}

} // namespace

const WireRule*
FindRule(const std::vector<WireRule>& rules, uint64_t index)
{
    for (const WireRule& r : rules)
    {
        if (index >= r.first && (!r.last || index <= *r.last))
        {
            return &r;
        }
    }
    return nullptr;
}

QpScenario
ParseQpScenario(const std::string& text)
{
    json doc;
    try
    {
        doc = json::parse(text);
    }
    catch (const json::exception& e)
    {
        throw ConfigError(std::string("scenario: not JSON: ") + e.what());
    }
    ConfigObject j(doc, "scenario");
    QpScenario s;
    s.name = j.Get<std::string>("name");
    s.transport = ParseTransport(j.Object("transport"));
    s.wire = ParseWire(j.Object("wire"));
    s.initialPsn = j.Get<uint32_t>("initial_psn");
    if (s.initialPsn > kPsnMask)
    {
        throw ConfigError(j.Where("initial_psn") + ": 24 bits");
    }
    s.delayS = j.Get<double>("delay_s");
    if (s.delayS < 0)
    {
        throw ConfigError(j.Where("delay_s") + ": at least 0");
    }
    s.rateBps = j.Nullable<double>("rate_bps");
    if (s.rateBps && !(*s.rateBps > 0))
    {
        throw ConfigError(j.Where("rate_bps") + ": above 0");
    }
    s.pull = j.Choice<NicPull>("pull", {{"after_event", NicPull::AfterEvent}, {"at_once", NicPull::AtOnce}});
    size_t i = 0;
    for (ConfigObject m : j.Objects("messages"))
    {
        ScriptMessage msg;
        msg.bytes = m.Get<uint32_t>("bytes");
        if (msg.bytes == 0 || msg.bytes % 4 != 0)
        {
            throw ConfigError(m.Where("bytes") + " = " + std::to_string(msg.bytes) + ": a positive multiple of 4");
        }
        msg.atS = m.Get<double>("at_s");
        msg.after = m.Nullable<uint32_t>("after");
        if (msg.after && *msg.after >= i)
        {
            throw ConfigError(m.Where("after") + " = " + std::to_string(*msg.after) + ": an earlier message's index");
        }
        msg.imm = m.Nullable<uint32_t>("imm");
        m.Finish();
        s.messages.push_back(msg);
        i++;
    }
    s.data = ParseRules(j, "data");
    s.acks = ParseRules(j, "acks");
    for (const WireRule& r : s.acks)
    {
        if (r.action == WireAction::Trim)
        {
            throw ConfigError(j.Where("acks") + ": only data packets are trimmed");
        }
    }
    s.timeLimitS = j.Get<double>("time_limit_s");
    j.Finish();
    return s;
}

} // namespace gs
} // namespace ns3
