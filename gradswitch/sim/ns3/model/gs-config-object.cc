#include "gs-config-object.h"

#include <cstring>
#include <set>

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
      m_path(std::make_shared<const std::string>(std::move(path)))
{
    if (!m_j.is_object())
    {
        throw ConfigError((m_path->empty() ? std::string("the document") : *m_path) + " = " + Shown(m_j) +
                          ": an object ({...})");
    }
    m_asked.reserve(8);
}

ConfigObject::ConfigObject(const json& j, std::shared_ptr<const std::string> list, size_t index)
    : m_j(j),
      m_path(std::move(list)),
      m_index(index)
{
    if (!m_j.is_object())
    {
        throw ConfigError(Path() + " = " + Shown(m_j) + ": an object ({...})");
    }
    m_asked.reserve(8);
}

std::string
ConfigObject::Path() const
{
    return m_index ? *m_path + "[" + std::to_string(*m_index) + "]" : *m_path;
}

std::string
ConfigObject::Where(std::string_view key) const
{
    std::string path = Path();
    return path.empty() ? std::string(key) : path + "." + std::string(key);
}

void
ConfigObject::Asked(const char* key, bool present)
{
    for (const char* k : m_asked)
    {
        if (k == key || std::strcmp(k, key) == 0)
        {
            return;
        }
    }
    m_asked.push_back(key);
    m_present += present ? 1 : 0;
}

const json&
ConfigObject::Need(const char* key)
{
    auto it = m_j.find(key);
    Asked(key, it != m_j.end());
    if (it == m_j.end())
    {
        throw ConfigError(Where(key) + " is missing");
    }
    return *it;
}

bool
ConfigObject::Has(const char* key)
{
    auto it = m_j.find(key);
    Asked(key, it != m_j.end());
    return it != m_j.end() && !it->is_null();
}

ConfigObject
ConfigObject::Object(const char* key)
{
    return ConfigObject(Need(key), Where(key));
}

std::optional<ConfigObject>
ConfigObject::Section(const char* key)
{
    if (!Has(key))
    {
        return std::nullopt;
    }
    return ConfigObject(*m_j.find(key), Where(key));
}

std::vector<ConfigObject>
ConfigObject::Objects(const char* key)
{
    const json& list = Need(key);
    if (!list.is_array())
    {
        throw ConfigError(Where(key) + " = " + Shown(list) + ": a list ([...])");
    }
    auto path = std::make_shared<const std::string>(Where(key)); // the elements' paths: "key[i]"
    std::vector<ConfigObject> out;
    out.reserve(list.size());
    for (size_t i = 0; i < list.size(); i++)
    {
        out.push_back(ConfigObject(list[i], path, i));
    }
    return out;
}

std::vector<ConfigObject>
ConfigObject::OptionalObjects(const char* key)
{
    if (!Has(key))
    {
        return {};
    }
    return Objects(key);
}

const json&
ConfigObject::Map(const char* key)
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
    if (m_present == m_j.size())
    {
        return; // every key it holds was asked for
    }
    std::set<std::string> known(m_asked.begin(), m_asked.end());
    for (const auto& [key, _] : m_j.items())
    {
        if (known.count(key) == 0)
        {
            std::string names;
            for (const std::string& k : known)
            {
                names += (names.empty() ? "" : ", ") + k;
            }
            std::string path = Path();
            throw ConfigError((path.empty() ? "" : path + ": ") + "unknown key \"" + key + "\" (known: " + names +
                              ")");
        }
    }
}

} // namespace gs
} // namespace ns3
