#include "gs-simulation.h"

#include "gs-channel.h"
#include "gs-keys.h"
#include "gs-netreduce-switch.h"
#include "gs-tcp.h"
#include "gs-ticks.h"

#include "ns3/boolean.h"
#include "ns3/mac48-address.h"
#include "ns3/simulator.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <string>

namespace ns3
{
namespace gs
{

using json = nlohmann::json;

namespace
{

// The simulator checks the wall clock for its progress lines this often, in simulated seconds.
constexpr double kProgressCheckS = 1e-3;
// MPI_Allgathers timed before a distributed run (bench.mpi_scaling's synchronisation cost).
constexpr int kAllgatherProbes = 2000;

/// This process's peak resident memory: the kernel's high-water mark of its address space (VmHWM), which
/// starts anew at exec. (getrusage's ru_maxrss does not: it keeps the peak of the process it was forked
/// from, e.g. the Python that started the simulator.)
double
PeakRssMb()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
    {
        if (line.rfind("VmHWM:", 0) == 0)
        {
            return std::stod(line.substr(6)) / 1024.0; // kB
        }
    }
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;
}

} // namespace

Simulation::Simulation(RunConfig config)
    : m_c(std::move(config))
{
}

Simulation::~Simulation() = default;

void
Simulation::Build()
{
    m_topo = std::make_unique<Topology>(m_c.topology);
    m_ranks = std::make_unique<Ranks>(m_c.mpi, *m_topo);
    // Nodes in index order (hosts, then switches): a node's ns-3 id is its index, the context of its events.
    // Every rank creates every node, each with the rank that simulates it (ns-3's system id).
    for (uint32_t h = 0; h < m_topo->Hosts(); h++)
    {
        m_hosts.push_back(CreateObject<GsHost>(m_ranks->RankOf(h)));
        if (m_hosts.back()->GetId() != h)
        {
            throw ConfigError("internal: node ids are not the topology's indices");
        }
    }
    for (uint32_t s = m_topo->Hosts(); s < m_topo->Nodes(); s++)
    {
        m_switches.push_back(CreateObject<GsSwitch>(m_ranks->RankOf(s)));
    }
    BuildSwitches();
    BuildLinks();
    m_ranks->CreateControlNodes(MakeCallback(&Simulation::Control, this));
    if (m_c.faultSchedule)
    {
        m_faults = CreateObject<FaultSchedule>();
        m_faults->SetAttribute("SwitchDetectDelay", TimeValue(Seconds(m_c.faultSchedule->switchDetectS)));
        m_faults->SetAttribute("LinkDetectDelay", TimeValue(Seconds(m_c.faultSchedule->linkDetectS)));
        m_faults->SetAttribute("SwitchHangDetectDelay", TimeValue(Seconds(m_c.faultSchedule->switchHangDetectS)));
    }
    BuildJobs();
    BuildFaults();
}

void
Simulation::BuildFaults()
{
    if (!m_faults)
    {
        return;
    }
    for (const JobSpec& job : m_c.jobs)
    {
        if (job.algo == Algo::Graph && job.graph && (job.graph->scatterJob || job.graph->gatherJob))
        {
            throw ConfigError("fault_schedule: job " + std::to_string(job.jobId) + "'s in-network reduce-scatter "
                              "and all-gather (graph.netreduce) run no faults (they have no fallback to ring; its "
                              "all-reduces do): leave the faults out, or run the graph on the hosts");
        }
    }
    FaultNetwork net;
    net.topo = m_topo.get();
    net.hosts = &m_hosts;
    net.switches = &m_switches;
    net.node = [this](uint32_t jobId, uint32_t node) -> JobNode* {
        for (size_t j = 0; j < m_c.jobs.size(); j++)
        {
            if (m_c.jobs[j].jobId != jobId)
            {
                continue;
            }
            for (auto& n : m_nodes[j])
            {
                if (n->NodeId() == node)
                {
                    return n.get();
                }
            }
        }
        return nullptr;
    };
    net.netReduceJobsOn = [this](uint32_t sw) {
        std::vector<NetReduceJobOn> jobs;
        for (size_t j = 0; j < m_c.jobs.size(); j++)
        {
            // the job's all-reduces in the switches: its own (algo netreduce) or its graph's all-reduce job
            // (whose ranks' fallback is their NetReduce worker's: GraphRank forwards it)
            const JobSpec& spec = m_c.jobs[j];
            std::optional<uint32_t> nrJob = spec.algo == Algo::NetReduce ? std::optional<uint32_t>(spec.jobId)
                                            : spec.algo == Algo::Graph && spec.graph ? spec.graph->netReduceJob
                                                                                      : std::nullopt;
            if (!nrJob)
            {
                continue;
            }
            bool aggregates = false;
            const AggregationTree& tree = m_trees[j].at(*nrJob);
            for (const AggregationRole& role : tree.roles)
            {
                aggregates |= role.sw == sw && role.localRanks.empty();
            }
            if (!aggregates)
            {
                continue;
            }
            NetReduceJobOn job;
            job.job = *nrJob;
            job.workers.assign(m_c.jobs[j].nodes.size(), nullptr);
            for (auto& n : m_nodes[j])
            {
                job.workers.at(n->NodeId()) = n.get();
            }
            for (const AggregationRole& role : tree.roles)
            {
                for (const auto& cells : m_switches[role.sw - m_topo->Hosts()]->NetReduceJobs())
                {
                    if (cells->Job() == *nrJob)
                    {
                        job.cells.push_back(cells.get());
                    }
                }
            }
            jobs.push_back(std::move(job));
        }
        return jobs;
    };
    for (const FaultSpec& f : m_c.faultSchedule->faults)
    {
        if (f.kind == FaultKind::SwitchCrash || f.kind == FaultKind::SwitchHang)
        {
            // the fallback's agreement is computed at the detection from every worker's state: one rank
            for (const NetReduceJobOn& job : net.netReduceJobsOn(m_topo->Index(f.sw)))
            {
                if (std::find(job.workers.begin(), job.workers.end(), nullptr) != job.workers.end())
                {
                    throw ConfigError("fault_schedule: " + f.label + ": a NetReduce job aggregating on " + f.sw +
                                      " falls back to ring only with all its workers on one rank (run it with "
                                      "one rank)");
                }
            }
            continue;
        }
        if (f.kind != FaultKind::WorkerCrash && f.kind != FaultKind::SlowWorker)
        {
            continue;
        }
        auto job = std::find_if(m_c.jobs.begin(), m_c.jobs.end(), [&f](const JobSpec& j) { return j.jobId == f.job; });
        if (job == m_c.jobs.end() || f.node >= job->nodes.size() || job->nodes[f.node].host != f.host)
        {
            throw ConfigError("fault_schedule: " + f.label + ": no node " + std::to_string(f.node) + " of job " +
                              std::to_string(f.job) + " on " + f.host);
        }
    }
    m_faults->Setup(m_c.faultSchedule->faults, std::move(net));
}

void
Simulation::BuildSwitches()
{
    std::vector<uint32_t> ips;
    for (uint32_t h = 0; h < m_topo->Hosts(); h++)
    {
        ips.push_back(m_topo->Ip(h));
    }
    for (uint32_t s = m_topo->Hosts(); s < m_topo->Nodes(); s++)
    {
        GsSwitch::Settings set;
        set.index = s;
        set.name = m_topo->Name(s);
        set.table = m_topo->Forwarding(s);
        set.hostIps = ips;
        set.sw = m_c.switches;
        auto th = m_c.switches.dlcpThresholds.find(set.name);
        if (th != m_c.switches.dlcpThresholds.end())
        {
            set.dlcpThresholds = th->second;
        }
        set.seed = m_c.seed;
        set.wire = m_c.wire;
        m_switches[s - m_topo->Hosts()]->Setup(std::move(set));
    }
}

void
Simulation::BuildLinks()
{
    std::vector<uint32_t> done(m_topo->Nodes(), 0);
    for (uint32_t a = 0; a < m_topo->Nodes(); a++)
    {
        for (const PortInfo& pa : m_topo->Ports(a))
        {
            uint32_t b = pa.peer;
            if (b < a)
            {
                continue; // built from the other end
            }
            Ptr<Node> nodes[2] = {a < m_topo->Hosts() ? Ptr<Node>(m_hosts[a]) : Ptr<Node>(m_switches[a - m_topo->Hosts()]),
                                  b < m_topo->Hosts() ? Ptr<Node>(m_hosts[b]) : Ptr<Node>(m_switches[b - m_topo->Hosts()])};
            uint32_t ends[2] = {a, b};
            uint32_t ports[2] = {pa.port, pa.peerPort};
            Ptr<GsDevice> devs[2];
            for (int i = 0; i < 2; i++)
            {
                devs[i] = CreateObject<GsDevice>();
                devs[i]->SetAddress(Mac48Address::Allocate());
                nodes[i]->AddDevice(devs[i]);
            }
            Ptr<PointToPointChannel> channel;
#ifdef NS3_MPI
            if (m_ranks->Cut(a, b))
            {
                // A cut link: ns-3's remote channel; what arrives from another rank goes to the device.
                Ptr<GsRemoteChannel> remote = CreateObject<GsRemoteChannel>();
                for (int i = 0; i < 2; i++)
                {
                    remote->Listen(devs[i]);
                    if (m_ranks->Local(ends[i]))
                    {
                        m_cutDevices.push_back(devs[i]);
                    }
                }
                channel = remote;
            }
            else
#endif
            {
                channel = CreateObject<GsChannel>();
            }
            channel->SetAttribute("Delay", TimeValue(Seconds(pa.delayS)));
            channel->SetAttribute("Shaped", BooleanValue(pa.shaped));
            for (int i = 0; i < 2; i++)
            {
                devs[i]->Attach(channel);
                uint32_t n = ends[i];
                PortOwner* owner = n < m_topo->Hosts() ? static_cast<PortOwner*>(PeekPointer(m_hosts[n]))
                                                       : static_cast<PortOwner*>(PeekPointer(m_switches[n - m_topo->Hosts()]));
                devs[i]->Configure(pa.bps, pa.queueBytes, m_c.wire.framing, owner, ports[i]);
                if (n < m_topo->Hosts())
                {
                    m_hosts[n]->Setup(n, devs[i], m_c.hostMessageDelayS);
                }
                else
                {
                    m_switches[n - m_topo->Hosts()]->AddPort(ports[i], devs[i]);
                }
            }
        }
    }
    for (const std::string& name : m_c.lossHosts)
    {
        uint32_t h = m_topo->Index(name);
        if (!m_topo->IsHost(h))
        {
            throw ConfigError("loss.hosts: " + name + " is not a host");
        }
        auto [sw, port] = m_topo->Attachment(h);
        m_switches[sw - m_topo->Hosts()]->SetLossyPort(port, m_c.lossFraction);
    }
}

namespace
{

/// The host indices of the job's workers (by rank), from its nodes' hosts (by node id).
std::vector<uint32_t>
WorkerHosts(const JobSpec& job, const std::vector<uint32_t>& nodeHosts)
{
    std::vector<uint32_t> workerHosts;
    for (size_t n = 0; n < job.nodes.size(); n++)
    {
        if (job.nodes[n].role == Role::Worker)
        {
            workerHosts.push_back(nodeHosts[n]);
        }
    }
    return workerHosts;
}

/// What the queue pairs of a graph's switch job `nrRef` take: the job's, with the switch job's id.
std::shared_ptr<const QpParams>
NetReduceQpParams(const QpParams& params, const NetReduceJobRef& nrRef)
{
    // a graph's switch job: its queue pairs are the NetReduce job's (its id on every packet), apart from
    // those of the graph's own id, which the switches forward
    auto nrParams = std::make_shared<QpParams>(params);
    nrParams->job = nrRef.id;
    if (nrRef.owners != NrOwners::None)
    {
        // a reduce-scatter's or all-gather's copies for the receivers that do not get the values come
        // trimmed to their headers: taken as zeros, every one (gradswitch/hosts/netreduce.py: loss budget 1)
        nrParams->t.lossBudget = 1.0;
    }
    return nrParams;
}

/// TensorLights (gradswitch/net/tensorlights.py): the NIC classes of the host's queue pairs to t's servers, the
/// favoured server's pulls first, then the others in turn.
void
SetTensorLightsClasses(GsHost* host, const TensorLightsSpec& t, size_t favoured)
{
    size_t n = t.servers.size();
    for (const auto& [key, qp] : host->Qps())
    {
        const QpConfig& cfg = qp->Config();
        for (size_t i = 0; i < n; i++)
        {
            if (t.servers[i].first == cfg.params->job && t.servers[i].second == cfg.localNode)
            {
                size_t position = (i + n - favoured) % n;
                host->SetNicClass(qp.get(), static_cast<uint8_t>(kPriorities - 2 - std::min<size_t>(position, 5)));
            }
        }
    }
}

} // namespace

void
Simulation::BuildJobs()
{
    std::vector<std::string> names;
    for (uint32_t n = 0; n < m_topo->Nodes(); n++)
    {
        names.push_back(m_topo->Name(n));
    }
    m_nodes.resize(m_c.jobs.size());
    m_finished.resize(m_c.jobs.size());
    m_trees.resize(m_c.jobs.size());
    std::set<uint32_t> ids;
    for (size_t j = 0; j < m_c.jobs.size(); j++)
    {
        BuildJob(j, names, ids);
    }
    BuildTensorLights();
    BuildBackground();
}

void
Simulation::BuildJob(size_t j, const std::vector<std::string>& names, std::set<uint32_t>& ids)
{
    const JobSpec& job = m_c.jobs[j];
    if (!ids.insert(job.jobId).second)
    {
        throw ConfigError("jobs: job id " + std::to_string(job.jobId) + " is used twice");
    }
    std::vector<uint32_t> nodeHosts = JobHosts(job);
    std::vector<uint32_t> workerHosts = WorkerHosts(job, nodeHosts);
    if (job.dlcp)
    {
        for (auto& sw : m_switches)
        {
            sw->SetDlcp(job.jobId, DlcpJobFeatures{job.dlcp->priority, job.dlcp->drop, job.dlcp->spray});
        }
    }
    std::vector<NetReduceJobRef> nrJobs = job.NetReduceJobs();
    if (!nrJobs.empty())
    {
        CheckNetReduceJob(j, workerHosts);
    }
    for (const NetReduceJobRef& nrRef : nrJobs)
    {
        BuildNetReduceJob(j, nrRef, workerHosts, ids);
    }
    std::shared_ptr<const JobContext> context = MakeJobContext(job, nodeHosts, nrJobs, names);
    m_finished[j].assign(job.nodes.size(), false);
    m_total += job.nodes.size();
    CreateJobNodes(j, context);
}

std::vector<uint32_t>
Simulation::JobHosts(const JobSpec& job) const
{
    std::vector<uint32_t> nodeHosts;
    for (const auto& n : job.nodes)
    {
        uint32_t h = m_topo->Index(n.host);
        if (!m_topo->IsHost(h))
        {
            throw ConfigError("jobs: " + n.host + " is not a host");
        }
        nodeHosts.push_back(h);
    }
    return nodeHosts;
}

void
Simulation::CheckNetReduceJob(size_t j, const std::vector<uint32_t>& workerHosts) const
{
    if (m_c.jobs[j].transport.mtu != kAggPacketBytes)
    {
        throw ConfigError("jobs[" + std::to_string(j) + "]: NetReduce packets are " + std::to_string(kAggPacketBytes) +
                          "-byte: the job's mtu must be that");
    }
    std::set<uint32_t> distinct(workerHosts.begin(), workerHosts.end());
    if (distinct.size() != workerHosts.size())
    {
        throw ConfigError("jobs[" + std::to_string(j) + "]: a NetReduce job has one worker per host");
    }
}

void
Simulation::BuildNetReduceJob(size_t j, const NetReduceJobRef& nrRef, const std::vector<uint32_t>& workerHosts,
                              std::set<uint32_t>& ids)
{
    const JobSpec& job = m_c.jobs[j];
    uint32_t nrJob = nrRef.id;
    // a graph's switch job has an id of its own (gs-config.cc refuses the graph's), no other job's
    if (nrJob != job.jobId && !ids.insert(nrJob).second)
    {
        throw ConfigError("jobs[" + std::to_string(j) + "].graph.netreduce: job id " + std::to_string(nrJob) +
                          " is used twice");
    }
    if (nrRef.owners != NrOwners::None && job.credits > kMaxCredits)
    {
        // a message's owner field sits right above the window index in its RETH (config.p4)
        throw ConfigError("jobs[" + std::to_string(j) + "]: " + std::to_string(job.credits) +
                          " credits, but a reduce-scatter's or all-gather's switch job takes at most " +
                          std::to_string(kMaxCredits) + " (its owner field sits above the window index)");
    }
    // the aggregation switch: an all-reduce switch job's is its job's (a graph's all-reduces aggregate where the
    // loop's job of the graph's id does), a graph's reduce-scatter or all-gather job's its own id's
    uint32_t treeJob = nrRef.owners == NrOwners::None ? job.jobId : nrJob;
    const AggregationTree& tree = m_trees[j][nrJob] = m_topo->Tree(treeJob, workerHosts);
    std::vector<uint32_t> ranks;
    for (uint32_t r = 0; r < workerHosts.size(); r++)
    {
        ranks.push_back(r);
    }
    for (const AggregationRole& role : tree.roles)
    {
        if (!m_ranks->Local(role.sw))
        {
            continue; // the switch's state for the job lives on its rank only
        }
        AddNetReduceSwitch(job, nrRef, role, workerHosts, ranks);
    }
}

void
Simulation::AddNetReduceSwitch(const JobSpec& job, const NetReduceJobRef& nrRef, const AggregationRole& role,
                               const std::vector<uint32_t>& workerHosts, const std::vector<uint32_t>& ranks)
{
    uint32_t nrJob = nrRef.id;
    GsSwitch* sw = PeekPointer(m_switches[role.sw - m_topo->Hosts()]);
    NrSwitchJob* nr = sw->AddNetReduceJob(
        std::make_unique<NrSwitchJob>(sw, nrJob, nrRef.owners, job, role, workerHosts, ranks, m_c.wire));
    uint32_t member = 0;
    for (uint32_t r : role.localRanks)
    {
        uint32_t port = m_topo->Attachment(workerHosts[r]).second;
        sw->AddMember(port, workerHosts[r], nrJob, r, nr, member++);
    }
    for (size_t c = 0; c < role.children.size(); c++)
    {
        sw->AddMember(role.childPorts[c], role.children[c], nrJob, 0xFFFFF, nr, member++);
    }
    if (role.parent >= 0)
    {
        sw->AddMember(role.parentPort, static_cast<uint32_t>(role.parent), nrJob, 0xFFFFE, nr, member);
    }
}

std::shared_ptr<const JobContext>
Simulation::MakeJobContext(const JobSpec& job, const std::vector<uint32_t>& nodeHosts,
                           const std::vector<NetReduceJobRef>& nrJobs, const std::vector<std::string>& names) const
{
    // One copy of what the job's nodes share, not one per node.
    auto params = std::make_shared<QpParams>();
    params->job = job.jobId;
    params->t = job.transport;
    params->wire = m_c.wire;
    params->exact = job.check == Check::Exact;
    params->dlcp = job.dlcp;
    params->hostNames = names;
    params->stalls = PeekPointer(m_faults); // null without faults
    auto context = std::make_shared<JobContext>();
    context->job = job;
    context->nodeHosts = nodeHosts;
    for (const NetReduceJobRef& nrRef : nrJobs)
    {
        if (nrRef.id != job.jobId)
        {
            context->nrQpParams.push_back(NetReduceQpParams(*params, nrRef));
        }
    }
    context->qpParams = std::move(params);
    return context;
}

void
Simulation::CreateJobNodes(size_t j, const std::shared_ptr<const JobContext>& context)
{
    for (uint32_t n = 0; n < context->job.nodes.size(); n++)
    {
        if (!m_ranks->Local(context->nodeHosts[n]))
        {
            continue; // an application runs on its host's rank only
        }
        GsHost* host = PeekPointer(m_hosts[context->nodeHosts[n]]);
        m_nodes[j].push_back(
            std::make_unique<JobNode>(host, context, n, [this, j](JobNode* node) { NodeDone(j, node); }));
    }
    for (auto& node : m_nodes[j])
    {
        node->Setup();
    }
}

void
Simulation::BuildTensorLights()
{
    if (!m_c.tensorlights || !m_ranks->Local(m_topo->Index(m_c.tensorlights->host)))
    {
        return;
    }
    const TensorLightsSpec& t = *m_c.tensorlights;
    GsHost* host = PeekPointer(m_hosts.at(m_topo->Index(t.host)));
    auto classes = [host, t](size_t favoured) { SetTensorLightsClasses(host, t, favoured); };
    classes(0);
    if (t.rotateS > 0)
    {
        auto favoured = std::make_shared<size_t>(0);
        auto rotate = std::make_shared<std::function<void()>>();
        *rotate = [classes, favoured, rotate, t]() {
            *favoured = (*favoured + 1) % t.servers.size();
            classes(*favoured);
            Simulator::Schedule(Seconds(t.rotateS), *rotate);
        };
        Simulator::Schedule(Seconds(t.rotateS), *rotate);
    }
}

void
Simulation::BuildBackground()
{
    if (m_c.background)
    {
        const BackgroundSpec& b = *m_c.background;
        m_background = std::make_unique<TcpBackground>(b, PeekPointer(m_hosts.at(m_topo->Index(b.sender))),
                                                       PeekPointer(m_hosts.at(m_topo->Index(b.receiver))), m_c.wire);
    }
}

namespace
{

/// What a rank tells the others when one of its job nodes finished (a control message's bytes).
struct Finish
{
    uint32_t job;   // index in the configuration's jobs
    uint32_t node;  // node id
    uint32_t failed;
    uint32_t errorBytes;
    int64_t atTicks;
};

} // namespace

void
Simulation::NodeDone(size_t job, JobNode* node)
{
    Finished(job, node->NodeId(), Simulator::Now().GetTimeStep(), !node->Ok(), node->Error(), true);
}

void
Simulation::Finished(size_t job, uint32_t node, int64_t atTicks, bool failed, const std::string& error, bool local)
{
    if (m_finished[job][node])
    {
        return;
    }
    m_finished[job][node] = true;
    m_done++;
    m_lastDoneTicks = std::max(m_lastDoneTicks, atTicks);
    if (local && m_ranks->Distributed())
    {
        Finish f{static_cast<uint32_t>(job), node, failed ? 1u : 0u, static_cast<uint32_t>(error.size()), atTicks};
        std::vector<uint8_t> bytes(sizeof f + error.size());
        std::memcpy(bytes.data(), &f, sizeof f);
        std::memcpy(bytes.data() + sizeof f, error.data(), error.size());
        m_ranks->Broadcast(Create<Packet>(bytes.data(), static_cast<uint32_t>(bytes.size())));
    }
    if (failed)
    {
        // A failed node stops the rest of its job (the runner's abort), as on the testbed: here at once, on
        // other ranks when they hear of it.
        std::string reason = "node " + std::to_string(node) + " of job " + std::to_string(m_c.jobs[job].jobId) +
                             " failed: " + error;
        for (auto& other : m_nodes[job])
        {
            if (!other->Done())
            {
                other->Abort(reason);
                Finished(job, other->NodeId(), Simulator::Now().GetTimeStep(), false, "", true);
            }
        }
    }
    if (m_done < m_total)
    {
        return;
    }
    if (!m_ranks->Distributed())
    {
        Simulator::Stop();
        return;
    }
    // Every rank stops at the same simulated time: the last node's end plus the control messages' delay,
    // when the last rank hears of it (the null-message algorithm needs ranks to stop together).
    int64_t stop = m_lastDoneTicks + m_ranks->ControlDelayTicks();
    Simulator::Stop(TimeStep(std::max<int64_t>(0, stop - Simulator::Now().GetTimeStep())));
}

void
Simulation::Control(Ptr<Packet> p)
{
    std::vector<uint8_t> bytes(p->GetSize());
    p->CopyData(bytes.data(), static_cast<uint32_t>(bytes.size()));
    Finish f;
    if (bytes.size() < sizeof f)
    {
        throw std::runtime_error("internal: a control message of " + std::to_string(bytes.size()) + " bytes");
    }
    std::memcpy(&f, bytes.data(), sizeof f);
    std::string error(reinterpret_cast<const char*>(bytes.data() + sizeof f), f.errorBytes);
    Finished(f.job, f.node, f.atTicks, f.failed != 0, error, false);
}

void
Simulation::Progress()
{
    auto now = std::chrono::steady_clock::now();
    double since = std::chrono::duration<double>(now - m_lastProgress).count();
    if (since >= m_c.progressS)
    {
        double wall = std::chrono::duration<double>(now - m_wallStart).count();
        uint64_t events = Simulator::GetEventCount();
        uint32_t least = 0;
        bool any = false;
        for (const auto& n : m_nodes.at(0))
        {
            if (n->Job().nodes[n->NodeId()].role == Role::Worker)
            {
                least = any ? std::min(least, n->IterationsDone()) : n->IterationsDone();
                any = true;
            }
        }
        std::cerr << "progress: " << (m_ranks->Distributed() ? "rank 0 of " + std::to_string(m_ranks->Count()) + ", " : "")
                  << "simulated " << Simulator::Now().GetSeconds() << " s, job " << m_c.jobs[0].jobId
                  << " iterations " << least << "/" << m_c.jobs[0].iterations << ", wall " << wall << " s, "
                  << static_cast<double>(events - m_lastEvents) / since / 1e6 << " M events/s, "
                  << static_cast<double>(GsDevice::Hops()) / wall / 1e6 << " M packet-hops/s" << std::endl;
        m_lastProgress = now;
        m_lastEvents = events;
    }
    Simulator::Schedule(Seconds(kProgressCheckS), &Simulation::Progress, this);
}

json
Simulation::Run()
{
    if (m_faults)
    {
        // first: a fault at 0 s is in place before the jobs' first event (a slow worker's first layer is slow)
        m_faults->Start();
    }
    for (auto& job : m_nodes)
    {
        for (auto& node : job)
        {
            Simulator::ScheduleWithContext(node->Host()->GetId(), Seconds(0), &JobNode::Start, node.get());
        }
    }
    if (m_background && m_ranks->Local(m_topo->Index(m_c.background->sender)))
    {
        m_background->Start();
    }
    m_setupRssMb = PeakRssMb();
    m_allgatherUs = m_ranks->AllgatherProbeUs(kAllgatherProbes);
    m_wallStart = std::chrono::steady_clock::now();
    m_lastProgress = m_wallStart;
    if (m_c.progressS > 0 && !m_nodes.empty() && m_ranks->Me() == 0)
    {
        Simulator::Schedule(Seconds(kProgressCheckS), &Simulation::Progress, this);
    }
    Simulator::Stop(Seconds(m_c.timeLimitS));
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_wallStart).count();
    // The run's simulated length: when its last node finished (every rank agrees), else where it stopped.
    double simS = m_done >= m_total ? TimeStep(m_lastDoneTicks).GetSeconds() : Simulator::Now().GetSeconds();
    json local = LocalResults(wall, simS);
    if (!m_ranks->Distributed())
    {
        return local;
    }
    std::vector<std::string> all = m_ranks->Gather(local.dump());
    return m_ranks->Me() == 0 ? Merge(all) : json(nullptr);
}

json
Simulation::LocalResults(double wall, double simS) const
{
    uint64_t events = Simulator::GetEventCount();
    json out;
    out[res::results::kFormat] = RESULTS_FORMAT;
    out[res::results::kWallS] = wall;
    out[res::results::kSimS] = simS;
    out[res::results::kEvents] = events;
    out[res::results::kEventsPerS] = wall > 0 ? static_cast<double>(events) / wall : 0.0;
    out[res::results::kPacketHops] = GsDevice::Hops();
    out[res::results::kPacketHopsPerS] = wall > 0 ? static_cast<double>(GsDevice::Hops()) / wall : 0.0;
    out[res::results::kPeakRssMb] = PeakRssMb();
    out[res::results::kSetupRssMb] = m_setupRssMb;
    out[res::results::kTimeLimitHit] = m_done < m_total;
    json jobs = json::array();
    for (size_t j = 0; j < m_nodes.size(); j++)
    {
        json nodes = json::array();
        for (const auto& n : m_nodes[j])
        {
            nodes.push_back(n->Result());
        }
        const char* check = m_c.jobs[j].check == Check::Exact ? "exact" : m_c.jobs[j].check == Check::Digest ? "digest" : "none";
        jobs.push_back({{res::job::kJobId, m_c.jobs[j].jobId}, {res::job::kCheck, check}, {res::job::kNodes, nodes}});
    }
    out[res::results::kJobs] = jobs;
    out[res::results::kSwitches] = SwitchResults();
    out[res::results::kBackground] = m_background ? m_background->Result(simS) : json(nullptr);
    if (m_faults)
    {
        out[res::results::kFaults] = m_faults->Results();
    }
    if (m_ranks->Distributed())
    {
        uint32_t hosts = 0;
        uint32_t switches = 0;
        for (uint32_t n = 0; n < m_topo->Nodes(); n++)
        {
            if (m_ranks->Local(n))
            {
                (m_topo->IsHost(n) ? hosts : switches)++;
            }
        }
        uint64_t cutTx = 0;
        uint64_t cutRx = 0;
        for (const auto& dev : m_cutDevices)
        {
            cutTx += dev->Counters().txPackets;
            cutRx += dev->Counters().rxPackets;
        }
        size_t jobNodes = 0;
        for (const auto& job : m_nodes)
        {
            jobNodes += job.size();
        }
        out[res::results::kRank] = {{res::rank::kRank, m_ranks->Me()},
                                    {res::rank::kHosts, hosts},
                                    {res::rank::kSwitches, switches},
                                    {res::rank::kJobNodes, jobNodes},
                                    {res::rank::kWallS, wall},
                                    {res::rank::kEvents, events},
                                    {res::rank::kPacketHops, GsDevice::Hops()},
                                    {res::rank::kCutLinks, m_cutDevices.size()},
                                    {res::rank::kCutTxPackets, cutTx},
                                    {res::rank::kCutRxPackets, cutRx},
                                    {res::rank::kAllgatherUs, m_allgatherUs},
                                    {res::rank::kSetupRssMb, m_setupRssMb},
                                    {res::rank::kPeakRssMb, PeakRssMb()}};
    }
    return out;
}

json
Simulation::Merge(const std::vector<std::string>& ranks) const
{
    std::vector<json> parts;
    for (const std::string& text : ranks)
    {
        parts.push_back(json::parse(text));
    }
    json out = parts.at(0);
    double wall = 0;
    uint64_t events = 0;
    uint64_t hops = 0;
    double rss = 0;
    double setupRss = 0;
    bool limit = false;
    json perRank = json::array();
    for (size_t j = 0; j < out[res::results::kJobs].size(); j++)
    {
        out[res::results::kJobs][j][res::job::kNodes] = json::array();
    }
    out[res::results::kSwitches] = json::object();
    for (size_t r = 0; r < parts.size(); r++)
    {
        const json& part = parts[r];
        wall = std::max(wall, part[res::results::kWallS].get<double>());
        events += part[res::results::kEvents].get<uint64_t>();
        hops += part[res::results::kPacketHops].get<uint64_t>();
        rss = std::max(rss, part[res::results::kPeakRssMb].get<double>());
        setupRss = std::max(setupRss, part[res::results::kSetupRssMb].get<double>());
        limit = limit || part[res::results::kTimeLimitHit].get<bool>();
        for (size_t j = 0; j < part[res::results::kJobs].size(); j++)
        {
            for (const json& node : part[res::results::kJobs][j][res::job::kNodes])
            {
                out[res::results::kJobs][j][res::job::kNodes].push_back(node);
            }
        }
        for (const auto& [name, sw] : part[res::results::kSwitches].items())
        {
            out[res::results::kSwitches][name] = sw;
        }
        if (r > 0 && !part[res::results::kBackground].is_null())
        {
            // The sender's rank counts retransmissions, the receiver's the bytes delivered (the other's stay 0).
            json& bg = out[res::results::kBackground];
            const json& mine = part[res::results::kBackground];
            for (const char* key : {res::background::kBytes, res::background::kRetransmissions})
            {
                bg[key] = bg[key].get<uint64_t>() + mine[key].get<uint64_t>();
            }
            double seconds = bg[res::background::kSeconds].get<double>();
            bg[res::background::kGoodputMbps] =
                seconds > 0 ? bg[res::background::kBytes].get<double>() * 8 / seconds / 1e6 : 0.0;
        }
        perRank.push_back(part[res::results::kRank]);
        if (r > 0 && part.contains(res::results::kFaults))
        {
            // Every rank carries out the switch and link faults; a worker's on its host's rank. Packets lost and
            // queue pairs stalled are counted where they happened; the last recovery is the run's.
            json& faults = out[res::results::kFaults];
            for (size_t f = 0; f < faults.size(); f++)
            {
                const json& mine = part[res::results::kFaults][f];
                json& all = faults[f];
                for (const char* key : {res::fault::kInjectedS, res::fault::kDetectedS})
                {
                    if (all[key].is_null())
                    {
                        all[key] = mine[key];
                    }
                }
                const char* first = res::fault::kFirstStallS;
                if (!mine[first].is_null() &&
                    (all[first].is_null() || mine[first].get<double>() < all[first].get<double>()))
                {
                    all[first] = mine[first];
                }
                const char* recovered = res::fault::kRecoveredS;
                if (!mine[recovered].is_null() &&
                    (all[recovered].is_null() || mine[recovered].get<double>() > all[recovered].get<double>()))
                {
                    all[recovered] = mine[recovered];
                }
                for (const char* key : {res::fault::kStalledQps, res::fault::kResumedQps, res::fault::kLostPackets})
                {
                    all[key] = all[key].get<uint64_t>() + mine[key].get<uint64_t>();
                }
            }
        }
    }
    for (size_t j = 0; j < out[res::results::kJobs].size(); j++)
    {
        json& nodes = out[res::results::kJobs][j][res::job::kNodes];
        std::sort(nodes.begin(), nodes.end(),
                  [](const json& a, const json& b) {
                      return a[res::node::kNodeId].get<uint32_t>() < b[res::node::kNodeId].get<uint32_t>();
                  });
    }
    out.erase(res::results::kRank);
    out[res::results::kWallS] = wall;
    out[res::results::kEvents] = events;
    out[res::results::kEventsPerS] = wall > 0 ? static_cast<double>(events) / wall : 0.0;
    out[res::results::kPacketHops] = hops;
    out[res::results::kPacketHopsPerS] = wall > 0 ? static_cast<double>(hops) / wall : 0.0;
    out[res::results::kPeakRssMb] = rss;
    out[res::results::kSetupRssMb] = setupRss;
    out[res::results::kTimeLimitHit] = limit;
    out[res::results::kMpi] = {{res::mpi::kRanks, m_ranks->Count()},
                  {res::mpi::kSync, m_c.mpi.sync == MpiSync::Barrier ? "barrier" : "null-message"},
                  {res::mpi::kLookaheadS, m_ranks->LookaheadS()},
                  {res::mpi::kCutLinks, m_ranks->CutLinks()},
                  {res::mpi::kPerRank, perRank}};
    return out;
}

json
Simulation::SwitchResults() const
{
    json out = json::object();
    for (const auto& sw : m_switches)
    {
        if (!m_ranks->Local(sw->GetId()))
        {
            continue; // its rank reports it
        }
        json ports = json::object();
        for (const auto& [port, dev] : sw->Ports())
        {
            const PortCounters& c = dev->Counters();
            ports[std::to_string(port)] = {{res::port::kRxPackets, c.rxPackets},
                                           {res::port::kRxBytes, c.rxBytes},
                                           {res::port::kTxPackets, c.txPackets},
                                           {res::port::kTxBytes, c.txBytes},
                                           {res::port::kDrops, c.drops},
                                           {res::port::kBusyS, TicksToSeconds(static_cast<int64_t>(c.busyPs))},
                                           {res::port::kMaxQueueBytes, c.maxQueueBytes}};
        }
        json nr = json::object();
        for (const auto& job : sw->NetReduceJobs())
        {
            nr[std::to_string(job->Job())] = job->events;
        }
        json dlcp = json::object();
        for (const auto& [job, ev] : sw->dlcpEvents)
        {
            dlcp[std::to_string(job)] = {{res::dlcp_events::kKept, ev.kept},
                                         {res::dlcp_events::kDropped, ev.dropped},
                                         {res::dlcp_events::kClassified, ev.classified}};
        }
        json s = {{res::switch_counters::kPorts, ports}, {res::switch_counters::kDrops, sw->drops}};
        if (!nr.empty())
        {
            s[res::switch_counters::kNetreduce] = nr;
        }
        if (!dlcp.empty())
        {
            s[res::switch_counters::kDlcp] = dlcp;
        }
        out[sw->Name()] = s;
    }
    return out;
}

json
Simulation::Probes()
{
    json out = json::array();
    for (const auto& p : m_c.ecmpProbes)
    {
        uint32_t sw = m_topo->Index(p.sw);
        if (sw < m_topo->Hosts())
        {
            throw ConfigError("ecmp_probes: " + p.sw + " is not a switch");
        }
        Wire w{};
        w.kind = p.protocol == IP_PROTO_TCP ? KIND_TCP : KIND_ROCE;
        w.src = m_topo->Index(p.src);
        w.dst = m_topo->Index(p.dst);
        w.sport = static_cast<uint16_t>(p.sport);
        w.dport = static_cast<uint16_t>(p.dport);
        out.push_back(m_switches[sw - m_topo->Hosts()]->Probe(w));
    }
    return out;
}

json
Simulation::Tables() const
{
    json out;
    json switches = json::object();
    for (uint32_t s = m_topo->Hosts(); s < m_topo->Nodes(); s++)
    {
        ForwardingTable t = m_topo->Forwarding(s);
        json hosts = json::object();
        for (uint32_t h = 0; h < m_topo->Hosts(); h++)
        {
            if (t.hostPort[h] >= 0)
            {
                hosts[m_topo->Name(h)] = t.hostPort[h];
            }
        }
        json edges = json::object();
        for (size_t e = 0; e < m_topo->EdgeSwitches().size(); e++)
        {
            if (t.edgeGroup[e] >= 0)
            {
                edges[m_topo->Name(m_topo->EdgeSwitches()[e])] = t.groups[t.edgeGroup[e]];
            }
        }
        switches[m_topo->Name(s)] = {{tab::switch_tables::kHosts, hosts}, {tab::switch_tables::kEdges, edges}};
    }
    out[tab::tables::kSwitches] = switches;
    json trees = json::object();
    for (size_t j = 0; j < m_c.jobs.size(); j++)
    {
        for (const auto& [nrJob, tree] : m_trees[j])
        {
            json roles = json::array();
            for (const auto& r : tree.roles)
            {
                json children = json::array();
                for (uint32_t c : r.children)
                {
                    children.push_back(m_topo->Name(c));
                }
                roles.push_back({{tab::tree_role::kSwitch, m_topo->Name(r.sw)},
                                 {tab::tree_role::kParent,
                                  r.parent >= 0 ? json(m_topo->Name(static_cast<uint32_t>(r.parent))) : json(nullptr)},
                                 {tab::tree_role::kChildren, children},
                                 {tab::tree_role::kRanks, r.localRanks}});
            }
            trees[std::to_string(nrJob)] = {{tab::tree::kRoot, m_topo->Name(tree.root)}, {tab::tree::kRoles, roles}};
        }
    }
    out[tab::tables::kNetreduceTrees] = trees;
    return out;
}

} // namespace gs
} // namespace ns3
