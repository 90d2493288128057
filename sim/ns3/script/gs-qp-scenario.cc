#include "gs-qp-scenario.h"

#include "gs-psn.h"

#include <nlohmann/json.hpp>

namespace ns3
{
namespace gs
{

using json = nlohmann::json;

namespace
{

const json&
Need(const json& j, const std::string& key, const std::string& path)
{
    if (!j.is_object() || !j.contains(key))
    {
        throw ConfigError(path + "." + key + " is missing");
    }
    return j.at(key);
}

template <typename T>
T
Opt(const json& j, const std::string& key, T fallback, const std::string& path)
{
    if (!j.contains(key) || j.at(key).is_null())
    {
        return fallback;
    }
    try
    {
        return j.at(key).get<T>();
    }
    catch (const json::exception& e)
    {
        throw ConfigError(path + "." + key + ": " + e.what());
    }
}

std::vector<WireRule>
ParseRules(const json& j, const std::string& path)
{
    std::vector<WireRule> rules;
    if (j.is_null())
    {
        return rules;
    }
    if (!j.is_array())
    {
        throw ConfigError(path + ": a list of rules");
    }
    for (size_t i = 0; i < j.size(); i++)
    {
        const json& r = j[i];
        std::string p = path + "[" + std::to_string(i) + "]";
        WireRule rule;
        rule.first = Opt<uint64_t>(r, "first", 0, p);
        if (r.contains("last") && !r.at("last").is_null())
        {
            rule.last = Opt<uint64_t>(r, "last", 0, p);
            if (*rule.last < rule.first)
            {
                throw ConfigError(p + ".last: before first");
            }
        }
        std::string action = Opt<std::string>(r, "action", "", p);
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
            throw ConfigError(p + ".action = '" + action + "': not one of drop, duplicate, delay, trim");
        }
        rule.byS = Opt<double>(r, "by_s", 0.0, p);
        if (rule.byS < 0)
        {
            throw ConfigError(p + ".by_s: at least 0");
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
    json j;
    try
    {
        j = json::parse(text);
    }
    catch (const json::exception& e)
    {
        throw ConfigError(std::string("scenario: not JSON: ") + e.what());
    }
    const std::string p = "scenario";
    QpScenario s;
    s.name = Opt<std::string>(j, "name", "", p);
    s.transport = ParseTransport(Need(j, "transport", p), p + ".transport");
    s.initialPsn = Opt<uint32_t>(j, "initial_psn", 0, p);
    if (s.initialPsn > kPsnMask)
    {
        throw ConfigError(p + ".initial_psn: 24 bits");
    }
    s.delayS = Opt<double>(j, "delay_s", 10e-6, p);
    if (s.delayS < 0)
    {
        throw ConfigError(p + ".delay_s: at least 0");
    }
    if (j.contains("rate_bps") && !j.at("rate_bps").is_null())
    {
        s.rateBps = Opt<double>(j, "rate_bps", 0.0, p);
        if (!(*s.rateBps > 0))
        {
            throw ConfigError(p + ".rate_bps: above 0");
        }
    }
    std::string pull = Opt<std::string>(j, "pull", "after_event", p);
    if (pull == "after_event")
    {
        s.pull = NicPull::AfterEvent;
    }
    else if (pull == "at_once")
    {
        s.pull = NicPull::AtOnce;
    }
    else
    {
        throw ConfigError(p + ".pull = '" + pull + "': not one of after_event, at_once");
    }
    const json& messages = Need(j, "messages", p);
    for (size_t i = 0; i < messages.size(); i++)
    {
        std::string mp = p + ".messages[" + std::to_string(i) + "]";
        ScriptMessage m;
        m.bytes = Opt<uint32_t>(messages[i], "bytes", 0, mp);
        if (m.bytes == 0 || m.bytes % 4 != 0)
        {
            throw ConfigError(mp + ".bytes = " + std::to_string(m.bytes) + ": a positive multiple of 4");
        }
        m.atS = Opt<double>(messages[i], "at_s", 0.0, mp);
        if (messages[i].contains("after") && !messages[i].at("after").is_null())
        {
            m.after = Opt<uint32_t>(messages[i], "after", 0, mp);
            if (*m.after >= i)
            {
                throw ConfigError(mp + ".after = " + std::to_string(*m.after) + ": an earlier message's index");
            }
        }
        if (messages[i].contains("imm") && !messages[i].at("imm").is_null())
        {
            m.imm = Opt<uint32_t>(messages[i], "imm", 0, mp);
        }
        s.messages.push_back(m);
    }
    s.data = ParseRules(j.value("data", json()), p + ".data");
    s.acks = ParseRules(j.value("acks", json()), p + ".acks");
    for (const WireRule& r : s.acks)
    {
        if (r.action == WireAction::Trim)
        {
            throw ConfigError(p + ".acks: only data packets are trimmed");
        }
    }
    s.timeLimitS = Opt<double>(j, "time_limit_s", 60.0, p);
    return s;
}

} // namespace gs
} // namespace ns3
