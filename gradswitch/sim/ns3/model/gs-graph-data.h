// What a graph's communication carries and how its output is checked (docs/simulator.md "The graph engine"):
// a rank's data of one operation, generated as the all-reduce loop's (gs-generator.h: values in exact mode, a
// digest per packet-sized block in digest mode), and the check that a received or reduced piece holds exactly
// the contributions its operation defines: the sum over a set of ranks (all-reduce, reduce-scatter) or one
// rank's own (all-gather, all-to-all, broadcast, send/recv). A block's digest of a set of ranks is G times the
// sum of their rank factors, so a missing, repeated or foreign contribution fails the check.
#ifndef GS_GRAPH_DATA_H
#define GS_GRAPH_DATA_H

#include "gs-generator.h"
#include "gs-message.h"

#include <cstdint>
#include <vector>

namespace ns3
{
namespace gs
{

enum class Check;

/// Which data: (iteration, op) of the generator name one operation of the job; a piece is the elements
/// [first, first + count) of it, its packets blocks `blockBase | p`.
struct Piece
{
    uint32_t iteration = 0;
    uint32_t op = 0;
    uint64_t blockBase = 0;
    uint64_t first = 0;
    uint64_t count = 0;
};

/// What DLCP's zero-filled packets cost one node's output (gradswitch/sim/ns3/model/gs-job-node.h IterationCheck's
/// loss part, per node): packets received as zeros, and the squared error they left against the squared norm of
/// what was checked (digest mode: elements of blocks whose sum lacks a zero-filled contribution, over elements).
struct Loss
{
    uint64_t zeroFilled = 0;
    double error2 = 0;
    double norm2 = 0;
};

class GraphData
{
  public:
    /// `lossTolerant`: the job drops (DLCP): a block holding a zero-filled contribution may differ from its sum.
    GraphData(Generator gen, Check check, uint32_t mtu, bool lossTolerant = false);

    /// Rank `origin`'s data of the piece: count * 4 bytes.
    MsgPtr Make(uint32_t origin, const Piece& piece) const;
    /// Whether `got` holds exactly the sum of the piece over `ranks` (one rank: that rank's own data).
    /// Always true when the job checks nothing. With `loss` and a loss-tolerant job, a block holding a
    /// zero-filled contribution may differ: what it lost is added to `loss` (as the loop's check,
    /// gs-job-node.cc CheckResult), and the run judges it against the job's max_relative_error.
    bool Holds(const MsgData& got, const Piece& piece, const std::vector<uint32_t>& ranks, Loss* loss = nullptr) const;
    /// Add `got` into `sum`, element by element and block by block (a reduction step).
    static void Add(MsgData& sum, const MsgData& got);

  private:
    Generator m_gen;
    Check m_check;
    uint32_t m_mtu;
    bool m_lossTolerant;
};

} // namespace gs
} // namespace ns3

#endif
