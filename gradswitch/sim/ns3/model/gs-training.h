// A worker's training iterations, as gradswitch/hosts/iteration.py's Scheduler runs them, on the simulator's clock:
// forward layer by layer (waiting, from the second iteration on, for the reduced gradients it needs:
// every one with sync = iteration, its own layer's with sync = layer), backward from the last layer,
// each layer's gradients existing when its backward ends; reductions (the plan's ops) start in the
// plan's order as soon as their layers' gradients exist, their dependencies are complete and fewer than
// in_flight are open. Computation takes the plan's real seconds times the dilation. The timeline and the
// iteration bounds are what Python's `timings` turns into the iteration records.
#ifndef GS_TRAINING_H
#define GS_TRAINING_H

#include "gs-collective.h"
#include "gs-config.h"
#include "gs-ticks.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ns3
{
namespace gs
{

class JobNode;

class TrainingScheduler
{
  public:
    TrainingScheduler(JobNode* node, Collective* collective, const TrainingSpec& spec, uint32_t iterations);

    /// Run every iteration from now; `finished` once the last reduction is complete.
    /// A slow-worker fault: computation started from now on takes this many times as long.
    double slowdown = 1.0;
    void Run(std::function<void()> finished);
    /// Called when iteration i's end is known (the next forward starts), as gradswitch/hosts/iteration.py's `finished`.
    std::function<void(uint32_t)> onIteration;

    /// (start, end) of every iteration ended so far, seconds: forward start to the next forward start (the
    /// last: when it could start).
    const std::vector<std::pair<double, double>>& Bounds() const
    {
        return m_bounds;
    }

    nlohmann::json Timeline() const;

    uint32_t IterationsStarted() const
    {
        return static_cast<uint32_t>(m_starts.size());
    }

  private:
    int64_t Stretched(int64_t ticks) const
    {
        return StretchedTicks(ticks, slowdown);
    }
    enum class Wait
    {
        None,
        Forward,   // forward of m_waitLayer, for its reduced gradients
        LastFirst, // after the last backward: the first layer's reduced gradients
        LastAll,   // every reduction of the last iteration
    };

    struct Event
    {
        uint32_t iteration;
        const char* kind;
        std::string name;
        int64_t start;
        int64_t end;
        uint32_t lane;
    };

    bool MayForward(uint32_t layer) const;
    bool MayStart(uint32_t op) const;
    void Pump();
    void ForwardStep(uint32_t layer);
    void ForwardCompute(uint32_t layer, bool waited);
    void ForwardDone(uint32_t layer, int64_t start, int64_t end);
    void BackwardCompute(uint32_t layer);
    void BackwardDone(uint32_t layer, int64_t start, int64_t end);
    void NewIteration();
    void OpDone(uint32_t op);
    void CheckWaits();
    void Last();

    JobNode* m_node;
    Collective* m_collective;
    TrainingSpec m_spec;
    uint32_t m_iterations;
    std::function<void()> m_finished;
    std::vector<int64_t> m_forwardTicks;
    std::vector<int64_t> m_backwardTicks;
    std::vector<std::vector<uint32_t>> m_layerOps; // layer -> the ops carrying its gradients
    uint32_t m_it = 0;        // the iteration being computed
    uint32_t m_opIteration = 0; // the iteration whose reductions run (set when its backward begins)
    std::vector<bool> m_produced;
    std::vector<bool> m_complete;
    uint32_t m_completeCount = 0;
    uint32_t m_next = 0;
    std::map<uint32_t, std::pair<int64_t, uint32_t>> m_running; // op -> (start, lane)
    std::optional<int64_t> m_gpuFree;
    Wait m_wait = Wait::None;
    uint32_t m_waitLayer = 0;
    bool m_inPump = false;
    bool m_doneInPump = false;
    std::vector<int64_t> m_starts;
    int64_t m_lastEnd = 0;
    std::vector<Event> m_events;
    std::vector<std::pair<double, double>> m_bounds;
};

} // namespace gs
} // namespace ns3

#endif
