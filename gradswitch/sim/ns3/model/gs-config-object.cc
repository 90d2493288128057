#include "gs-config-object.h"

namespace ns3
{
namespace gs
{

using json = nlohmann::json;

std::string
Shown(const json& v)
{
    std::string text = v.dump();
    return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

ConfigObject::ConfigObject(const json& j, std::string path)
    : m_j(j),
      m_path(std::move(path))
{
    if (!m_j.is_object())
    {
        throw ConfigError((m_path.empty() ? std::string("the document") : m_path) + " = " + Shown(m_j) +
                          ": an object ({...})");
    }
}

std::string
ConfigObject::Where(const std::string& key) const
{
    return m_path.empty() ? key : m_path + "." + key;
}

const json&
ConfigObject::Need(const std::string& key)
{
    m_known.insert(key);
    if (!m_j.contains(key))
    {
        throw ConfigError(Where(key) + " is missing");
    }
    return m_j.at(key);
}

bool
ConfigObject::Has(const std::string& key)
{
    m_known.insert(key);
    return m_j.contains(key) && !m_j.at(key).is_null();
}

ConfigObject
ConfigObject::Object(const std::string& key)
{
    return ConfigObject(Need(key), Where(key));
}

std::optional<ConfigObject>
ConfigObject::Section(const std::string& key)
{
    if (!Has(key))
    {
        return std::nullopt;
    }
    return ConfigObject(m_j.at(key), Where(key));
}

std::vector<ConfigObject>
ConfigObject::Objects(const std::string& key)
{
    const json& list = Need(key);
    if (!list.is_array())
    {
        throw ConfigError(Where(key) + " = " + Shown(list) + ": a list ([...])");
    }
    std::vector<ConfigObject> out;
    for (size_t i = 0; i < list.size(); i++)
    {
        out.emplace_back(list[i], Where(key) + "[" + std::to_string(i) + "]");
    }
    return out;
}

std::vector<ConfigObject>
ConfigObject::OptionalObjects(const std::string& key)
{
    if (!Has(key))
    {
        return {};
    }
    return Objects(key);
}

const json&
ConfigObject::Map(const std::string& key)
{
    const json& m = Need(key);
    if (!m.is_object())
    {
        throw ConfigError(Where(key) + " = " + Shown(m) + ": an object ({name: value, ...})");
    }
    return m;
}

void
ConfigObject::Finish() const
{
    for (const auto& [key, _] : m_j.items())
    {
        if (m_known.count(key) == 0)
        {
            std::string known;
            for (const std::string& k : m_known)
            {
                known += (known.empty() ? "" : ", ") + k;
            }
            throw ConfigError((m_path.empty() ? "" : m_path + ": ") + "unknown key \"" + key + "\" (known: " + known +
                              ")");
        }
    }
}

} // namespace gs
} // namespace ns3
