// Reading a configuration document strictly: every value a program reads is required (no default on this side:
// the writer, gradswitch.sim, writes every value), and a key nobody reads is refused. A ConfigObject is one JSON object
// of the document with its path ("jobs[0].transport"); it records every key asked for, and Finish() refuses any
// other key with one line naming it, where it was and the keys that object takes. An optional section is a key
// that may be absent or null (the feature off: `dlcp`, `background`, `mpi`, ...); inside it, every key is
// required again.
#ifndef GS_CONFIG_OBJECT_H
#define GS_CONFIG_OBJECT_H

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace ns3
{
namespace gs
{

/// A configuration a program cannot take: what() is one line naming the value.
class ConfigError : public std::runtime_error
{
  public:
    using std::runtime_error::runtime_error;
};

/// A value as an error line shows it: its JSON, cut short.
std::string Shown(const nlohmann::json& v);

class ConfigObject
{
  public:
    /// `j` must be an object; `path` names it in errors ("" for the document itself).
    ConfigObject(const nlohmann::json& j, std::string path);

    /// Where a key of this object is: "path.key" (or "key" at the top).
    std::string Where(const std::string& key) const;

    /// A required value.
    const nlohmann::json& Need(const std::string& key);

    /// A required value of type T.
    template <typename T>
    T Get(const std::string& key)
    {
        const nlohmann::json& v = Need(key);
        try
        {
            return v.get<T>();
        }
        catch (const nlohmann::json::exception& e)
        {
            throw ConfigError(Where(key) + " = " + Shown(v) + ": " + Expected<T>());
        }
    }

    /// A required key whose value may be null (none).
    template <typename T>
    std::optional<T> Nullable(const std::string& key)
    {
        if (Need(key).is_null())
        {
            return std::nullopt;
        }
        return Get<T>(key);
    }

    /// A required value, one of `names`; the error lists them.
    template <typename E>
    E Choice(const std::string& key, const std::map<std::string, E>& names)
    {
        auto value = Get<std::string>(key);
        auto it = names.find(value);
        if (it == names.end())
        {
            std::string allowed;
            for (const auto& [n, _] : names)
            {
                allowed += (allowed.empty() ? "" : ", ") + n;
            }
            throw ConfigError(Where(key) + " = '" + value + "': not one of " + allowed);
        }
        return it->second;
    }

    /// An optional section: whether the key is present and not null.
    bool Has(const std::string& key);

    /// A required object.
    ConfigObject Object(const std::string& key);

    /// An optional section, when present and not null.
    std::optional<ConfigObject> Section(const std::string& key);

    /// A required list of objects, each with its path ("key[i]").
    std::vector<ConfigObject> Objects(const std::string& key);

    /// The same for a list that is an optional section (absent or null: none).
    std::vector<ConfigObject> OptionalObjects(const std::string& key);

    /// A required object used as a map (names of the writer's choosing, not keys of this format): its entries.
    const nlohmann::json& Map(const std::string& key);

    /// Refuse every key of the object that was not asked for. Call once everything it may hold was read.
    void Finish() const;

  private:
    template <typename T>
    static std::string Expected()
    {
        if constexpr (std::is_same_v<T, bool>)
        {
            return "true or false";
        }
        else if constexpr (std::is_same_v<T, std::string>)
        {
            return "a string";
        }
        else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>)
        {
            return "an integer of at least 0";
        }
        else if constexpr (std::is_integral_v<T>)
        {
            return "an integer";
        }
        else if constexpr (std::is_floating_point_v<T>)
        {
            return "a number";
        }
        else if constexpr (std::is_same_v<T, std::vector<std::string>>)
        {
            return "a list of strings";
        }
        else
        {
            return "a list of integers";
        }
    }

    const nlohmann::json& m_j;
    std::string m_path;
    std::set<std::string> m_known;
};

} // namespace gs
} // namespace ns3

#endif
