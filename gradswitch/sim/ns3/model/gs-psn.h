// 24-bit packet sequence numbers with wrap-around (gradswitch/roce/psn.py).
#ifndef GS_PSN_H
#define GS_PSN_H

#include <cstdint>

namespace ns3
{
namespace gs
{

constexpr uint32_t kPsnMask = (1u << 24) - 1;

inline uint32_t
PsnAdd(uint32_t psn, int64_t n)
{
    return static_cast<uint32_t>((static_cast<int64_t>(psn) + n) & kPsnMask);
}

/// Signed distance a - b in [-2^23, 2^23).
inline int32_t
PsnDiff(uint32_t a, uint32_t b)
{
    uint32_t d = (a - b) & kPsnMask;
    return d >= (1u << 23) ? static_cast<int32_t>(d) - (1 << 24) : static_cast<int32_t>(d);
}

} // namespace gs
} // namespace ns3

#endif
