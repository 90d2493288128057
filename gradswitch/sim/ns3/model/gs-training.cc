#include "gs-training.h"

#include "gs-job-node.h"
#include "gs-keys.h"
#include "gs-ticks.h"

#include "ns3/simulator.h"

#include <cmath>
#include <set>

namespace ns3
{
namespace gs
{

TrainingScheduler::TrainingScheduler(JobNode* node, Collective* collective, const TrainingSpec& spec,
                                     uint32_t iterations)
    : m_node(node),
      m_collective(collective),
      m_spec(spec),
      m_iterations(iterations)
{
    for (const auto& l : spec.layers)
    {
        m_forwardTicks.push_back(SecondsToTicks(l.forwardS * spec.dilation));
        m_backwardTicks.push_back(SecondsToTicks(l.backwardS * spec.dilation));
    }
    m_layerOps.resize(spec.layers.size());
    for (uint32_t i = 0; i < spec.ops.size(); i++)
    {
        for (uint32_t l : spec.ops[i].layers)
        {
            m_layerOps[l].push_back(i);
        }
    }
    m_produced.assign(spec.layers.size(), false);
    m_complete.assign(spec.ops.size(), false);
}

void
TrainingScheduler::Run(std::function<void()> finished)
{
    m_finished = std::move(finished);
    m_it = 0;
    ForwardStep(0);
}

bool
TrainingScheduler::MayForward(uint32_t layer) const
{
    if (m_spec.sync == Sync::Iteration)
    {
        return m_completeCount == m_spec.ops.size();
    }
    for (uint32_t op : m_layerOps[layer])
    {
        if (!m_complete[op])
        {
            return false;
        }
    }
    return true;
}

bool
TrainingScheduler::MayStart(uint32_t i) const
{
    const OpSpec& op = m_spec.ops[i];
    for (uint32_t l : op.layers)
    {
        if (!m_produced[l])
        {
            return false;
        }
    }
    for (uint32_t d : op.deps)
    {
        if (!m_complete[d])
        {
            return false;
        }
    }
    return i < m_spec.inFlight || m_complete[i - m_spec.inFlight];
}

void
TrainingScheduler::Pump()
{
    if (m_inPump)
    {
        return;
    }
    m_inPump = true;
    m_doneInPump = false;
    while (m_next < m_spec.ops.size() && MayStart(m_next))
    {
        uint32_t i = m_next++;
        std::set<uint32_t> used;
        for (const auto& [op, r] : m_running)
        {
            used.insert(r.second);
        }
        uint32_t lane = 0;
        while (used.count(lane))
        {
            lane++;
        }
        m_running[i] = {NowTicks(), lane};
        const OpSpec& op = m_spec.ops[i];
        uint64_t seq = static_cast<uint64_t>(m_opIteration) * m_spec.ops.size() + i;
        m_collective->Start(m_opIteration, i, seq, op.elements, WriteTag{static_cast<uint8_t>(op.layerClass), op.droppable},
                            [this, i]() { OpDone(i); });
    }
    m_inPump = false;
    if (m_doneInPump)
    {
        CheckWaits(); // a reduction finished as it started (a single worker)
    }
}

void
TrainingScheduler::OpDone(uint32_t i)
{
    auto it = m_running.find(i);
    m_events.push_back(Event{m_opIteration, "op", "op " + std::to_string(i), it->second.first, NowTicks(), it->second.second});
    m_running.erase(it);
    m_complete[i] = true;
    m_completeCount++;
    if (m_inPump)
    {
        m_doneInPump = true;
        return; // the pump that started it goes on
    }
    Pump();
    CheckWaits();
}

void
TrainingScheduler::CheckWaits()
{
    switch (m_wait)
    {
    case Wait::None:
        return;
    case Wait::Forward:
        if (MayForward(m_waitLayer))
        {
            m_wait = Wait::None;
            ForwardCompute(m_waitLayer, true);
        }
        return;
    case Wait::LastFirst:
        if (MayForward(0))
        {
            m_lastEnd = NowTicks();
            m_wait = Wait::LastAll;
            CheckWaits();
        }
        return;
    case Wait::LastAll:
        if (m_completeCount == m_spec.ops.size())
        {
            m_wait = Wait::None;
            m_bounds.emplace_back(TicksToSeconds(m_starts.back()), TicksToSeconds(m_lastEnd));
            m_finished();
        }
        return;
    }
}

void
TrainingScheduler::ForwardStep(uint32_t layer)
{
    if (m_it > 0 && !MayForward(layer))
    {
        m_wait = Wait::Forward;
        m_waitLayer = layer;
        return;
    }
    ForwardCompute(layer, false);
}

void
TrainingScheduler::ForwardCompute(uint32_t layer, bool waited)
{
    int64_t now = NowTicks();
    int64_t start = waited || !m_gpuFree ? now : std::min(now, *m_gpuFree);
    int64_t end = start + Stretched(m_forwardTicks[layer]);
    if (layer == 0)
    {
        m_starts.push_back(start);
        if (m_it > 0)
        {
            // iteration m_it - 1 ends here: its bounds are known (kept if the run stops before its end)
            m_bounds.emplace_back(TicksToSeconds(m_starts[m_starts.size() - 2]), TicksToSeconds(start));
            if (onIteration)
            {
                onIteration(m_it - 1);
            }
        }
    }
    Pump();
    Simulator::Schedule(TimeStep(end - now), &TrainingScheduler::ForwardDone, this, layer, start, end);
}

void
TrainingScheduler::ForwardDone(uint32_t layer, int64_t start, int64_t end)
{
    m_gpuFree = end;
    m_events.push_back(Event{m_it, "forward", m_spec.layers[layer].name, start, end, 0});
    if (layer + 1 < m_spec.layers.size())
    {
        ForwardStep(layer + 1);
        return;
    }
    NewIteration();
    BackwardCompute(static_cast<uint32_t>(m_spec.layers.size() - 1));
}

void
TrainingScheduler::NewIteration()
{
    m_opIteration = m_it;
    std::fill(m_produced.begin(), m_produced.end(), false);
    std::fill(m_complete.begin(), m_complete.end(), false);
    m_completeCount = 0;
    m_next = 0;
}

void
TrainingScheduler::BackwardCompute(uint32_t layer)
{
    int64_t now = NowTicks();
    int64_t start = m_gpuFree ? std::min(now, *m_gpuFree) : now;
    int64_t end = start + Stretched(m_backwardTicks[layer]);
    Pump();
    Simulator::Schedule(TimeStep(end - now), &TrainingScheduler::BackwardDone, this, layer, start, end);
}

void
TrainingScheduler::BackwardDone(uint32_t layer, int64_t start, int64_t end)
{
    m_gpuFree = end;
    m_events.push_back(Event{m_it, "backward", m_spec.layers[layer].name, start, end, 0});
    m_produced[layer] = true;
    Pump();
    if (layer > 0)
    {
        BackwardCompute(layer - 1);
        return;
    }
    m_it++;
    if (m_it < m_iterations)
    {
        ForwardStep(0);
        return;
    }
    Last();
}

void
TrainingScheduler::Last()
{
    // After the last backward: the iteration ends when the next forward could start (at once if its
    // gradients are here: when the GPU is free), then every reduction finishes.
    m_wait = Wait::LastFirst;
    if (MayForward(0))
    {
        m_lastEnd = m_gpuFree ? *m_gpuFree : NowTicks();
        m_wait = Wait::LastAll;
    }
    CheckWaits();
}

nlohmann::json
TrainingScheduler::Timeline() const
{
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : m_events)
    {
        out.push_back({{res::event::kIteration, e.iteration},
                       {res::event::kKind, e.kind},
                       {res::event::kName, e.name},
                       {res::event::kStart, TicksToSeconds(e.start)},
                       {res::event::kEnd, TicksToSeconds(e.end)},
                       {res::event::kLane, e.lane}});
    }
    return out;
}

} // namespace gs
} // namespace ns3
