// Reading a configuration document strictly: every value a program reads is required (no default on this side:
// the writer, gradswitch.sim, writes every value), and a key nobody reads is refused. A ConfigObject is one JSON object
// of the document with its path ("jobs[0].transport"); it records every key asked for, and Finish() refuses any
// other key with one line naming it, where it was and the keys that object takes. An optional section is a key
// that may be absent or null (the feature off: `dlcp`, `background`, `mpi`, ...); inside it, every key is
// required again.
//
// A graph's configuration holds thousands of objects (one per node), so an object's bookkeeping is kept cheap: its
// path is built only for an error line (the elements of a list share their list's path and keep their index), and
// the keys asked for are kept as the key constants themselves (gs-keys.h: static storage, no copy) in a small list;
// Finish() compares how many of them the object holds with its size, and looks for the unknown key only when they
// differ.
#ifndef GS_CONFIG_OBJECT_H
#define GS_CONFIG_OBJECT_H

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
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

/// Every `key` below is one of gs-keys.h's constants (the object keeps the pointer until Finish()).
class ConfigObject
{
  public:
    /// `j` must be an object; `path` names it in errors ("" for the document itself).
    ConfigObject(const nlohmann::json& j, std::string path);

    /// Its path in errors: "jobs[0].transport" ("" for the document itself).
    std::string Path() const;

    /// Where a key of this object is: "path.key" (or "key" at the top).
    std::string Where(std::string_view key) const;

    /// A required value.
    const nlohmann::json& Need(const char* key);

    /// A required value of type T.
    template <typename T>
    T Get(const char* key)
    {
        const nlohmann::json& v = Need(key);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
        {
            // nlohmann converts any number to any integer, wrapping what does not fit: -1 would read as
            // 4294967295 for an unsigned key; a value out of the type's range is refused instead
            if (v.is_number() && !InRange<T>(v))
            {
                throw ConfigError(Where(key) + " = " + Shown(v) + ": " + Expected<T>());
            }
        }
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
    std::optional<T> Nullable(const char* key)
    {
        if (Need(key).is_null())
        {
            return std::nullopt;
        }
        return Get<T>(key);
    }

    /// A required value, one of `names`; the error lists them.
    template <typename E>
    E Choice(const char* key, const std::map<std::string, E>& names)
    {
        const nlohmann::json& v = Need(key);
        if (!v.is_string())
        {
            throw ConfigError(Where(key) + " = " + Shown(v) + ": " + Expected<std::string>());
        }
        const auto& value = v.get_ref<const std::string&>(); // (no copy: a graph has a kind per node)
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
    bool Has(const char* key);

    /// A required object.
    ConfigObject Object(const char* key);

    /// An optional section, when present and not null.
    std::optional<ConfigObject> Section(const char* key);

    /// A required list of objects, each with its path ("key[i]").
    std::vector<ConfigObject> Objects(const char* key);

    /// The same for a list that is an optional section (absent or null: none).
    std::vector<ConfigObject> OptionalObjects(const char* key);

    /// A required object used as a map (names of the writer's choosing, not keys of this format): its entries.
    const nlohmann::json& Map(const char* key);

    /// Refuse every key of the object that was not asked for. Call once everything it may hold was read.
    void Finish() const;

  private:
    /// The element `index` of the list at `list` (whose path the list's elements share).
    ConfigObject(const nlohmann::json& j, std::shared_ptr<const std::string> list, size_t index);

    /// Record a key asked for (once); `present`: the object holds it.
    void Asked(const char* key, bool present);

    /// Whether the number `v` fits integer type T (a fraction is cut as before: only the range is checked).
    template <typename T>
    static bool InRange(const nlohmann::json& v)
    {
        if (v.is_number_unsigned())
        {
            return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
        }
        if (v.is_number_integer())
        {
            const auto i = v.get<std::int64_t>();
            if constexpr (std::is_unsigned_v<T>)
            {
                return i >= 0 && static_cast<std::uint64_t>(i) <= std::numeric_limits<T>::max();
            }
            else
            {
                return i >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                       i <= static_cast<std::int64_t>(std::numeric_limits<T>::max());
            }
        }
        const double d = v.get<double>();
        return d > static_cast<double>(std::numeric_limits<T>::min()) - 1.0 &&
               d < static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
    }

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
    std::shared_ptr<const std::string> m_path; // this object's, or its list's (then m_index)
    std::optional<size_t> m_index;             // an element of a list: its position
    std::vector<const char*> m_asked;          // the keys asked for, each once
    size_t m_present = 0;                      // how many of them the object holds
};

} // namespace gs
} // namespace ns3

#endif
