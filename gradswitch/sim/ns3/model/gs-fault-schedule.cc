#include "gs-fault-schedule.h"

#include "gs-job-node.h"
#include "gs-keys.h"
#include "gs-netreduce-switch.h"
#include "gs-ticks.h"

#include "ns3/simulator.h"

#include <algorithm>
#include <sstream>

namespace ns3
{
namespace gs
{

using json = nlohmann::json;

NS_OBJECT_ENSURE_REGISTERED(FaultSchedule);

TypeId
FaultSchedule::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::gs::FaultSchedule")
            .SetParent<Object>()
            .SetGroupName("Gradswitch")
            .AddConstructor<FaultSchedule>()
            .AddAttribute("SwitchDetectDelay",
                          "From a switch's crash until the control plane has noticed it (its P4Runtime stream "
                          "ended) and pushed routes around it",
                          TimeValue(MilliSeconds(10)),
                          MakeTimeAccessor(&FaultSchedule::m_switchDetect),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("SwitchHangDetectDelay",
                          "From a switch's hang (its process stopped: it forwards and answers nothing) until the "
                          "control plane has named it hung (its heartbeat missed its deadlines: "
                          "gradswitch/protocol/heartbeat.py HUNG_DETECT_BOUND_S) and pushed routes around it",
                          TimeValue(Seconds(5)),
                          MakeTimeAccessor(&FaultSchedule::m_switchHangDetect),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("LinkDetectDelay",
                          "From a link going down (or up) until the control plane has noticed it (port state) "
                          "and pushed routes around it (or back over it)",
                          TimeValue(MilliSeconds(20)),
                          MakeTimeAccessor(&FaultSchedule::m_linkDetect),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("FallbackAgreementDelay",
                          "From the control plane noticing a NetReduce job's aggregating switch dead until the "
                          "job's workers agreed on the first reduction to redo on ring (zero: the largest "
                          "smoothed round trip of the job's queue pairs, an announcement and its answer)",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&FaultSchedule::m_agreement),
                          MakeTimeChecker(Time(0)));
    return tid;
}

FaultSchedule::FaultSchedule() = default;
FaultSchedule::~FaultSchedule() = default;

bool
FaultSchedule::IsSwitchFault(size_t f) const
{
    return m_faults[f].kind == FaultKind::SwitchCrash || m_faults[f].kind == FaultKind::SwitchHang;
}

GsDevice*
FaultSchedule::DeviceTo(uint32_t node, uint32_t peer) const
{
    const Topology& t = *m_net.topo;
    if (t.IsHost(node))
    {
        return PeekPointer((*m_net.hosts)[node]->Nic());
    }
    const PortInfo* p = t.PortTo(node, peer);
    return PeekPointer((*m_net.switches)[node - t.Hosts()]->Ports().at(p->port));
}

std::pair<GsDevice*, GsDevice*>
FaultSchedule::LinkDevices(const FaultSpec& spec) const
{
    uint32_t a = m_net.topo->Index(spec.a);
    uint32_t b = m_net.topo->Index(spec.b);
    return {DeviceTo(a, b), DeviceTo(b, a)};
}

void
FaultSchedule::Setup(std::vector<FaultSpec> faults, FaultNetwork net)
{
    m_faults = std::move(faults);
    m_net = std::move(net);
    m_records.assign(m_faults.size(), Record{});
    m_rerouter = std::make_unique<Rerouter>(*m_net.topo, *m_net.switches);
    const Topology& t = *m_net.topo;
    for (const FaultSpec& f : m_faults)
    {
        std::string where = "fault_schedule: " + f.label + ": ";
        switch (f.kind)
        {
        case FaultKind::SwitchCrash:
        case FaultKind::SwitchHang:
            if (t.IsHost(t.Index(f.sw)))
            {
                throw ConfigError(where + f.sw + " is not a switch");
            }
            break;
        case FaultKind::LinkDown:
            if (t.PortTo(t.Index(f.a), t.Index(f.b)) == nullptr)
            {
                throw ConfigError(where + f.a + "-" + f.b + " is not a link");
            }
            break;
        case FaultKind::WorkerCrash:
        case FaultKind::SlowWorker:
            if (!t.IsHost(t.Index(f.host)))
            {
                throw ConfigError(where + f.host + " is not a host");
            }
            break;
        }
    }
}

void
FaultSchedule::Start()
{
    for (size_t f = 0; f < m_faults.size(); f++)
    {
        const FaultSpec& spec = m_faults[f];
        if (spec.kind == FaultKind::WorkerCrash || spec.kind == FaultKind::SlowWorker)
        {
            Simulator::Schedule(Seconds(spec.atS), &FaultSchedule::Worker, this, f);
            continue;
        }
        for (uint32_t w = 0; w < spec.windows.size(); w++)
        {
            const auto& [from, to] = spec.windows[w];
            Simulator::Schedule(Seconds(from), &FaultSchedule::Down, this, f, w);
            if (to)
            {
                Simulator::Schedule(Seconds(*to), &FaultSchedule::Up, this, f, w);
            }
        }
    }
}

void
FaultSchedule::Down(size_t f, uint32_t window)
{
    const FaultSpec& spec = m_faults[f];
    Record& r = m_records[f];
    if (r.injected < 0)
    {
        r.injected = NowTicks();
    }
    r.window = window;
    r.out = true;
    r.lastUp = -1;
    if (IsSwitchFault(f))
    {
        // a crashed process and a stopped one alike forward nothing; only how the control plane notices differs
        // (a crash: its P4Runtime stream ends; a hang: its heartbeat's deadlines pass)
        (*m_net.switches)[m_net.topo->Index(spec.sw) - m_net.topo->Hosts()]->SetDown(true);
        Time detect = spec.kind == FaultKind::SwitchHang ? m_switchHangDetect : m_switchDetect;
        Simulator::Schedule(detect, &FaultSchedule::Detect, this, f, window);
    }
    else
    {
        auto [da, db] = LinkDevices(spec);
        da->SetDown(true);
        db->SetDown(true);
        Simulator::Schedule(m_linkDetect, &FaultSchedule::Detect, this, f, window);
    }
}

void
FaultSchedule::Detect(size_t f, uint32_t window)
{
    const FaultSpec& spec = m_faults[f];
    Record& r = m_records[f];
    if (!r.out || r.window != window)
    {
        return; // back before anyone noticed: only retransmission saw it
    }
    if (r.detected < 0)
    {
        r.detected = NowTicks();
    }
    const Topology& t = *m_net.topo;
    if (IsSwitchFault(f))
    {
        m_rerouter->SwitchOut(t.Index(spec.sw), true);
        FallBack(f);
    }
    else
    {
        m_rerouter->LinkOut(t.Index(spec.a), t.Index(spec.b), true);
    }
}

void
FaultSchedule::FallBack(size_t f)
{
    if (!m_net.netReduceJobsOn || m_records[f].fallback >= 0)
    {
        return; // fallen back already: the job stays on ring
    }
    const FaultSpec& spec = m_faults[f];
    for (const NetReduceJobOn& job : m_net.netReduceJobsOn(m_net.topo->Index(spec.sw)))
    {
        std::optional<uint64_t> from;
        for (JobNode* n : job.workers)
        {
            if (!n->Error().empty() || n->Done())
            {
                continue;
            }
            std::optional<uint64_t> first = n->Algorithm()->FirstUnfinished();
            if (first)
            {
                from = from ? std::min(*from, *first) : *first;
            }
        }
        if (!from || job.workers.size() < 3)
        {
            continue; // nothing to redo, or no ring distinct from the job's connections
        }
        Time delay = m_agreement.IsZero() ? Seconds(JobRtt(job)) : m_agreement;
        Simulator::Schedule(delay, &FaultSchedule::FallBackNow, this, f, job.workers, *from);
    }
}

double
FaultSchedule::JobRtt(const NetReduceJobOn& job)
{
    double rtt = 0;
    for (JobNode* n : job.workers)
    {
        RcQp* qp = n->NetReduceQp(job.job, (n->NodeId() + 1) % n->Workers(), 0); // (made by its worker already)
        rtt = std::max(rtt, qp->Srtt().value_or(qp->Rto()));
    }
    return rtt;
}

void
FaultSchedule::Return(size_t f)
{
    if (!m_net.netReduceJobsOn || m_records[f].fallback < 0)
    {
        return; // no job fell back
    }
    const FaultSpec& spec = m_faults[f];
    for (const NetReduceJobOn& job : m_net.netReduceJobsOn(m_net.topo->Index(spec.sw)))
    {
        Time delay = m_agreement.IsZero() ? Seconds(JobRtt(job)) : m_agreement;
        Simulator::Schedule(delay, &FaultSchedule::ReturnNow, this, f, job);
    }
}

void
FaultSchedule::ReturnNow(size_t f, NetReduceJobOn job)
{
    std::optional<uint64_t> from;
    for (JobNode* n : job.workers)
    {
        std::optional<uint64_t> next = n->Error().empty() ? n->Algorithm()->NextMessage() : std::nullopt;
        if (next)
        {
            from = from ? std::max(*from, *next) : *next;
        }
    }
    if (!from)
    {
        return;
    }
    for (NrSwitchJob* cells : job.cells)
    {
        cells->Clear();
    }
    Record& r = m_records[f];
    r.returned = NowTicks();
    for (JobNode* n : job.workers)
    {
        if (!n->Error().empty())
        {
            continue;
        }
        n->Algorithm()->ReturnToSwitch(*from, OneMore(f, &Record::backOnSwitch));
    }
}

void
FaultSchedule::FallBackNow(size_t f, std::vector<JobNode*> workers, uint64_t from)
{
    Record& r = m_records[f];
    if (r.fallback < 0)
    {
        r.fallback = NowTicks();
    }
    r.fallbackJobs++;
    for (JobNode* n : workers)
    {
        if (!n->Error().empty())
        {
            continue;
        }
        n->Algorithm()->FallBackToRing(from, OneMore(f, &Record::onRing));
    }
}

std::function<void()>
FaultSchedule::OneMore(size_t f, WorkersDone Record::*which)
{
    (m_records[f].*which).workers++;
    return [this, f, which]() {
        WorkersDone& w = m_records[f].*which;
        w.done++;
        if (w.done == w.workers)
        {
            w.at = NowTicks();
        }
    };
}

void
FaultSchedule::Up(size_t f, uint32_t window)
{
    const FaultSpec& spec = m_faults[f];
    Record& r = m_records[f];
    r.out = false;
    r.lastUp = NowTicks();
    const Topology& t = *m_net.topo;
    if (IsSwitchFault(f))
    {
        // restarted (or let go on): the controller pushed its pipeline and tables, and puts it back into every route
        (*m_net.switches)[t.Index(spec.sw) - t.Hosts()]->SetDown(false);
        m_rerouter->SwitchOut(t.Index(spec.sw), false);
        Return(f);
        return;
    }
    auto [da, db] = LinkDevices(spec);
    da->SetDown(false);
    db->SetDown(false);
    Simulator::Schedule(m_linkDetect, &FaultSchedule::DetectUp, this, f, window);
}

void
FaultSchedule::DetectUp(size_t f, uint32_t window)
{
    const FaultSpec& spec = m_faults[f];
    const Record& r = m_records[f];
    if (r.out || r.window != window)
    {
        return; // down again before the port state said up
    }
    m_rerouter->LinkOut(m_net.topo->Index(spec.a), m_net.topo->Index(spec.b), false);
}

void
FaultSchedule::Worker(size_t f)
{
    const FaultSpec& spec = m_faults[f];
    Record& r = m_records[f];
    JobNode* node = m_net.node(spec.job, spec.node);
    if (spec.kind == FaultKind::SlowWorker && spec.rateBps)
    {
        // the host's link, both directions (every rank holds both ends)
        uint32_t h = m_net.topo->Index(spec.host);
        auto [sw, port] = m_net.topo->Attachment(h);
        DeviceTo(h, sw)->SetRate(*spec.rateBps);
        DeviceTo(sw, h)->SetRate(*spec.rateBps);
    }
    if (node == nullptr)
    {
        return; // its host is simulated by another rank: that rank records it
    }
    if (node->Done())
    {
        return; // it had finished: never injected
    }
    r.injected = NowTicks();
    if (spec.kind == FaultKind::WorkerCrash)
    {
        std::ostringstream reason;
        reason << "crashed at " << spec.atS << " s (fault " << spec.label << ")";
        r.detected = r.injected; // its job stops at once, as the runner's abort does when a worker exits
        node->CrashNow(reason.str());
        return;
    }
    node->SetSlowdown(spec.factor);
}

void
FaultSchedule::OnStall(const RcQp& qp)
{
    // Put down to the latest fault that put something out, if the stall began while it was out or within the
    // largest timeout after it came back (a timer armed before the return).
    int64_t now = NowTicks();
    int64_t slack = SecondsToTicks(qp.Config().params->t.rtoMaxS);
    for (size_t f = m_faults.size(); f-- > 0;)
    {
        const Record& r = m_records[f];
        bool outage = IsSwitchFault(f) || m_faults[f].kind == FaultKind::LinkDown;
        if (!outage || r.injected < 0 || r.injected > now)
        {
            continue;
        }
        if (r.out || r.lastUp < 0 || now <= r.lastUp + slack)
        {
            m_stalled[&qp] = f;
            Record& stalled = m_records[f];
            stalled.stalls++;
            stalled.firstStall = stalled.firstStall < 0 ? now : std::min(stalled.firstStall, now);
        }
        return;
    }
}

void
FaultSchedule::OnResume(const RcQp& qp, int64_t /*stalledAtTicks*/)
{
    auto it = m_stalled.find(&qp);
    if (it == m_stalled.end())
    {
        return;
    }
    Record& r = m_records[it->second];
    r.resumed++;
    r.recovered = std::max(r.recovered, NowTicks());
    m_stalled.erase(it);
}

uint64_t
FaultSchedule::LostPackets(size_t f) const
{
    const FaultSpec& spec = m_faults[f];
    if (IsSwitchFault(f))
    {
        return (*m_net.switches)[m_net.topo->Index(spec.sw) - m_net.topo->Hosts()]->FaultDrops();
    }
    if (spec.kind == FaultKind::LinkDown)
    {
        auto [da, db] = LinkDevices(spec);
        return da->Counters().faultDrops + db->Counters().faultDrops;
    }
    return 0;
}

json
FaultSchedule::Results() const
{
    auto seconds = [](int64_t ticks) { return ticks < 0 ? json(nullptr) : json(TicksToSeconds(ticks)); };
    json out = json::array();
    for (size_t f = 0; f < m_faults.size(); f++)
    {
        const Record& r = m_records[f];
        out.push_back({{res::fault::kLabel, m_faults[f].label},
                       {res::fault::kInjectedS, seconds(r.injected)},
                       {res::fault::kDetectedS, seconds(r.detected)},
                       {res::fault::kRecoveredS, seconds(r.recovered)},
                       {res::fault::kFirstStallS, seconds(r.firstStall)},
                       {res::fault::kStalledQps, r.stalls},
                       {res::fault::kResumedQps, r.resumed},
                       {res::fault::kLostPackets, LostPackets(f)},
                       {res::fault::kOutAtEnd, r.out},
                       {res::fault::kFallback, r.fallback >= 0 ? json("ring") : json(nullptr)},
                       {res::fault::kFallbackS, seconds(r.fallback)},
                       {res::fault::kFallbackJobs, r.fallbackJobs},
                       {res::fault::kRingRecoveredS, seconds(r.onRing.at)},
                       {res::fault::kReturnedS, seconds(r.returned)},
                       {res::fault::kSwitchRecoveredS, seconds(r.backOnSwitch.at)}});
    }
    return out;
}

} // namespace gs
} // namespace ns3
