// Simulated time as ticks: every model keeps its times as int64 ticks of ns-3's Time resolution, which both
// programs set to picoseconds (Time::SetResolution(Time::PS)) before anything is scheduled.
#ifndef GS_TICKS_H
#define GS_TICKS_H

#include "ns3/simulator.h"

#include <cmath>
#include <cstdint>

namespace ns3
{
namespace gs
{

constexpr double kTicksPerSecond = 1e12;
constexpr double kSecondsPerTick = 1e-12;

/// Now, in ticks.
inline int64_t
NowTicks()
{
    return Simulator::Now().GetTimeStep();
}

/// A duration in seconds as the nearest whole number of ticks.
inline int64_t
SecondsToTicks(double seconds)
{
    return static_cast<int64_t>(std::llround(seconds * kTicksPerSecond));
}

/// A slow worker's computation (the slow-worker fault): `ticks` of it take `factor` times as long, to the nearest
/// tick; factor 1: as they are. The one definition the training loop (gs-training.h) and the graph engine
/// (gs-graph-rank.h) stretch a computation by.
inline int64_t
StretchedTicks(int64_t ticks, double factor)
{
    return factor == 1.0 ? ticks : static_cast<int64_t>(std::llround(static_cast<double>(ticks) * factor));
}

/// A number of ticks in seconds.
inline double
TicksToSeconds(int64_t ticks)
{
    return static_cast<double>(ticks) * kSecondsPerTick;
}

} // namespace gs
} // namespace ns3

#endif // GS_TICKS_H
