// What the simulated packets carry: a deterministic generator of every worker's values and of the 64-bit
// digest of each contribution (docs/simulator.md, "Checks").
//
// A contribution is one packet's worth of one worker's data: block b of reduction (op) o of iteration i. Its
// digest is G(seed, job, i, o, b) * R(seed, job, rank) mod 2^64 with G odd, so the sum of a block over a
// set of ranks is G * (sum of their R): a sum holding every rank exactly once equals G * (R_0 + ... + R_{N-1}),
// which a receiver computes in O(1) per block once it has the sum of the R. A missing, duplicated or foreign
// contribution changes the factor (G is odd, hence invertible mod 2^64), so the check fails but for a
// 2^-64 coincidence. Values (exact mode) are int32 in [-2^20, 2^20), like gradswitch/workload/gradients.py's.
#ifndef GS_GENERATOR_H
#define GS_GENERATOR_H

#include <cstdint>

namespace ns3
{
namespace gs
{

/// splitmix64's finalizer: a bijection of 64-bit words that mixes every bit.
inline uint64_t
Mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

inline uint64_t
Mix(uint64_t a, uint64_t b)
{
    return Mix(Mix(a) ^ (b * 0xD6E8FEB86659FD93ULL));
}

struct Generator
{
    uint64_t seed = 1;
    uint32_t job = 1;

    uint64_t BlockKey(uint32_t iteration, uint32_t op, uint64_t block) const
    {
        return Mix(Mix(Mix(seed, job), (static_cast<uint64_t>(iteration) << 32) | op), block);
    }

    /// G: the block's odd factor.
    uint64_t BlockFactor(uint32_t iteration, uint32_t op, uint64_t block) const
    {
        return BlockKey(iteration, op, block) | 1ULL;
    }

    /// R: the rank's factor.
    uint64_t RankFactor(uint32_t rank) const
    {
        return Mix(Mix(seed ^ 0x5241ULL, job), rank);
    }

    uint64_t Digest(uint32_t rank, uint32_t iteration, uint32_t op, uint64_t block) const
    {
        return BlockFactor(iteration, op, block) * RankFactor(rank);
    }

    /// Element e of worker `rank`'s data of reduction op of iteration i.
    int32_t Value(uint32_t rank, uint32_t iteration, uint32_t op, uint64_t element) const
    {
        uint64_t x = Mix(Mix(Mix(seed, job), (static_cast<uint64_t>(rank) << 32) | iteration),
                         (static_cast<uint64_t>(op) << 40) ^ element);
        return static_cast<int32_t>(x & ((1u << 21) - 1)) - (1 << 20);
    }
};

} // namespace gs
} // namespace ns3

#endif
