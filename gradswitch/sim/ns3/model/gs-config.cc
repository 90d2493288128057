#include "gs-config.h"

#include "gs-config-object.h"
#include "gs-keys.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

namespace ns3
{
namespace gs
{

using json = nlohmann::json;

namespace
{

uint32_t
ParseIp(const std::string& text, const std::string& where)
{
    uint32_t parts[4];
    char dot[3];
    std::istringstream in(text);
    in >> parts[0] >> dot[0] >> parts[1] >> dot[1] >> parts[2] >> dot[2] >> parts[3];
    if (!in || dot[0] != '.' || dot[1] != '.' || dot[2] != '.' || parts[0] > 255 || parts[1] > 255 || parts[2] > 255 ||
        parts[3] > 255)
    {
        throw ConfigError(where + " = '" + text + "': not an IPv4 address");
    }
    return parts[0] << 24 | parts[1] << 16 | parts[2] << 8 | parts[3];
}

void
Positive(double v, const std::string& what)
{
    if (!(v > 0))
    {
        throw ConfigError(what + " = " + std::to_string(v) + ": must be above 0");
    }
}

TrainingSpec
ParseTraining(ConfigObject j)
{
    TrainingSpec t;
    t.dilation = j.Get<double>(cfg::training::kDilation);
    t.sync = j.Choice<Sync>(cfg::training::kSync, {{"iteration", Sync::Iteration}, {"layer", Sync::Layer}});
    t.inFlight = j.Get<uint32_t>(cfg::training::kInFlight);
    if (t.inFlight == 0)
    {
        throw ConfigError(j.Where(cfg::training::kInFlight) + ": at least 1");
    }
    for (ConfigObject l : j.Objects(cfg::training::kLayers))
    {
        t.layers.push_back(
            LayerSpec{l.Get<std::string>(cfg::layer::kName), l.Get<double>(cfg::layer::kForwardS),
                      l.Get<double>(cfg::layer::kBackwardS)});
        l.Finish();
    }
    size_t i = 0;
    for (ConfigObject o : j.Objects(cfg::training::kOps))
    {
        OpSpec op;
        op.elements = o.Get<uint64_t>(cfg::op::kElements);
        op.layers = o.Get<std::vector<uint32_t>>(cfg::op::kLayers);
        op.deps = o.Get<std::vector<uint32_t>>(cfg::op::kDeps);
        op.layerClass = o.Get<uint32_t>(cfg::op::kLayerClass);
        op.droppable = o.Get<bool>(cfg::op::kDroppable);
        o.Finish();
        for (uint32_t l : op.layers)
        {
            if (l >= t.layers.size())
            {
                throw ConfigError(o.Where(cfg::op::kLayers) + ": layer " + std::to_string(l) + " does not exist");
            }
        }
        for (uint32_t d : op.deps)
        {
            if (d >= i)
            {
                throw ConfigError(o.Where(cfg::op::kDeps) + ": op " + std::to_string(d) + " does not come before it");
            }
        }
        t.ops.push_back(op);
        i++;
    }
    j.Finish();
    if (t.ops.empty() || t.layers.empty())
    {
        throw ConfigError(j.Where(cfg::training::kOps) + ": a training plan needs layers and ops");
    }
    return t;
}

DlcpSpec
ParseDlcp(ConfigObject d)
{
    DlcpSpec s;
    s.priority = d.Get<bool>(cfg::dlcp::kPriority);
    s.drop = d.Get<bool>(cfg::dlcp::kDrop);
    s.spray = d.Get<bool>(cfg::dlcp::kSpray);
    s.lossBudget = d.Get<double>(cfg::dlcp::kLossBudget);
    s.dropMinLayerClass = d.Get<uint32_t>(cfg::dlcp::kDropMinLayerClass);
    s.dropMaxMagnitudeClass = d.Get<uint32_t>(cfg::dlcp::kDropMaxMagnitudeClass);
    s.maxRelativeError = d.Get<double>(cfg::dlcp::kMaxRelativeError);
    d.Finish();
    return s;
}

JobSpec
ParseJob(ConfigObject j)
{
    JobSpec job;
    job.jobId = j.Get<uint32_t>(cfg::job::kJobId);
    job.algo = j.Choice<Algo>(
        cfg::job::kAlgo, {{"ring", Algo::Ring},
                 {"ps", Algo::Ps},
                 {"netreduce", Algo::NetReduce},
                 {"write", Algo::Write},
                 {"graph", Algo::Graph}});
    job.check = j.Choice<Check>(cfg::job::kCheck,
                                {{"exact", Check::Exact}, {"digest", Check::Digest}, {"none", Check::None}});
    job.seed = j.Get<uint64_t>(cfg::job::kSeed);
    for (ConfigObject n : j.Objects(cfg::job::kNodes))
    {
        NodeSpec node;
        node.nodeId = n.Get<uint32_t>(cfg::job_node::kNodeId);
        node.role = n.Choice<Role>(cfg::job_node::kRole, {{"worker", Role::Worker}, {"server", Role::Server}});
        node.host = n.Get<std::string>(cfg::job_node::kHost);
        n.Finish();
        if (node.nodeId != job.nodes.size())
        {
            throw ConfigError(n.Where(cfg::job_node::kNodeId) + " = " + std::to_string(node.nodeId) +
                              ": node ids are 0, 1, ... in order");
        }
        job.nodes.push_back(node);
    }
    job.iterations = j.Get<uint32_t>(cfg::job::kIterations);
    job.transport = ParseTransport(j.Object(cfg::job::kTransport));
    for (ConfigObject r : j.OptionalObjects(cfg::job::kReductions))
    {
        job.reductions.push_back(
            ReductionSpec{r.Get<uint64_t>(cfg::reduction::kElements), r.Get<uint32_t>(cfg::reduction::kLayerClass),
                          r.Get<bool>(cfg::reduction::kDroppable)});
        r.Finish();
    }
    if (auto t = j.Section(cfg::job::kTraining))
    {
        job.training = ParseTraining(*t);
    }
    job.psKeyBytes = j.Get<uint64_t>(cfg::job::kPsKeyBytes);
    if (auto g = j.Section(cfg::job::kGraph))
    {
        if (job.algo != Algo::Graph)
        {
            throw ConfigError(j.Where(cfg::job::kGraph) + ": only a job of algo graph runs execution graphs");
        }
        uint32_t workers = 0;
        for (const auto& n : job.nodes)
        {
            workers += n.role == Role::Worker ? 1 : 0;
        }
        GraphSpec graph = ParseGraph(*g, workers);
        for (const auto& n : job.nodes)
        {
            if (n.role == Role::Server)
            {
                graph.servers.push_back(n.nodeId); // their all-reduces (RunsOnServers), in keys of ps_key_bytes
            }
        }
        graph.psKeyBytes = job.psKeyBytes;
        job.graph = std::make_shared<const GraphSpec>(std::move(graph));
        for (const NetReduceJobRef& nr : job.NetReduceJobs())
        {
            if (nr.id == job.jobId)
            {
                const char* key = nr.owners == NrOwners::None      ? cfg::graph_netreduce::kJobId
                                  : nr.owners == NrOwners::Scatter ? cfg::graph_netreduce::kReduceScatterJobId
                                                                   : cfg::graph_netreduce::kAllGatherJobId;
                throw ConfigError(g->Where(cfg::graph::kNetreduce) + "." + key + " = " + std::to_string(job.jobId) +
                                  ": the graph's own job id; its switch job needs an id of its own");
            }
        }
    }
    if (job.algo == Algo::Graph)
    {
        if (!job.graph || job.training || !job.reductions.empty() || job.iterations != 1)
        {
            throw ConfigError(j.Where(cfg::job::kGraph) + ": a job of algo graph gives its graph, 1 iteration, and "
                                                          "neither reductions nor training");
        }
    }
    else if (!job.training && job.reductions.empty())
    {
        throw ConfigError(j.Where(cfg::job::kReductions) + ": give reductions (the all-reduce loop) or training");
    }
    job.credits = j.Get<uint32_t>(cfg::job::kCredits);
    if (auto d = j.Section(cfg::job::kDlcp))
    {
        job.dlcp = ParseDlcp(*d);
    }
    job.iterationTimeoutS = j.Get<double>(cfg::job::kIterationTimeoutS);
    if (auto c = j.Section(cfg::job::kCrash))
    {
        job.crash = std::make_pair(c->Get<uint32_t>(cfg::crash::kNode), c->Get<uint32_t>(cfg::crash::kAfter));
        if (c->Has(cfg::crash::kGraphNode))
        {
            job.crashGraphNode = c->Get<uint64_t>(cfg::crash::kGraphNode);
        }
        c->Finish();
    }
    j.Finish();
    std::string path = j.Where(cfg::job::kNodes);
    size_t workers = 0;
    size_t servers = 0;
    for (const auto& n : job.nodes)
    {
        (n.role == Role::Worker ? workers : servers)++;
    }
    if (workers == 0)
    {
        throw ConfigError(path + ": a job needs at least one worker");
    }
    if (job.algo == Algo::Ps && servers == 0)
    {
        throw ConfigError(path + ": the parameter server algorithm needs at least one server node");
    }
    if (job.algo == Algo::NetReduce && (workers < 2 || job.credits == 0))
    {
        throw ConfigError(path + ": NetReduce needs at least 2 workers and 1 credit");
    }
    if (job.algo == Algo::Write && workers != 2)
    {
        throw ConfigError(path + ": algo write sends from worker 0 to worker 1: give exactly 2 workers");
    }
    for (size_t i = 0; i < job.nodes.size(); i++)
    {
        if ((job.nodes[i].role == Role::Worker) != (i < workers))
        {
            throw ConfigError(path + ": workers come first, then servers");
        }
    }
    return job;
}

TopologySpec
ParseTopology(ConfigObject t)
{
    TopologySpec topo;
    topo.name = t.Get<std::string>(cfg::topology::kName);
    for (ConfigObject h : t.Objects(cfg::topology::kHosts))
    {
        topo.hosts.push_back(
            HostSpec{h.Get<std::string>(cfg::topology_host::kName),
                     ParseIp(h.Get<std::string>(cfg::topology_host::kIp), h.Where(cfg::topology_host::kIp))});
        h.Finish();
    }
    for (ConfigObject s : t.Objects(cfg::topology::kSwitches))
    {
        topo.switches.push_back(
            SwitchSpec{s.Get<std::string>(cfg::topology_switch::kName),
                       s.Get<uint32_t>(cfg::topology_switch::kDeviceId),
                       s.Get<std::string>(cfg::topology_switch::kRole)});
        s.Finish();
    }
    for (ConfigObject l : t.Objects(cfg::topology::kLinks))
    {
        LinkSpec link;
        link.a = l.Get<std::string>(cfg::link::kA);
        link.aPort = l.Get<uint32_t>(cfg::link::kAPort);
        link.b = l.Get<std::string>(cfg::link::kB);
        link.bPort = l.Get<uint32_t>(cfg::link::kBPort);
        link.rateBps = l.Get<double>(cfg::link::kRateBps);
        link.delayS = l.Get<double>(cfg::link::kDelayS);
        link.queueBytes = l.Get<uint64_t>(cfg::link::kQueueBytes);
        link.shaped = l.Get<bool>(cfg::link::kShaped);
        l.Finish();
        Positive(link.rateBps, l.Where(cfg::link::kRateBps));
        if (link.delayS < 0)
        {
            throw ConfigError(l.Where(cfg::link::kDelayS) + ": must be 0 or more");
        }
        topo.links.push_back(link);
    }
    t.Finish();
    return topo;
}

SwitchSettings
ParseSwitch(ConfigObject s)
{
    SwitchSettings sw;
    sw.processingDelayS = s.Get<double>(cfg::switch_settings::kProcessingDelayS);
    sw.ecmpMultiplier = s.Get<uint32_t>(cfg::switch_settings::kEcmpMultiplier);
    sw.loadBalance =
        s.Choice<LoadBalance>(cfg::switch_settings::kLoadBalance,
                              {{"ecmp", LoadBalance::Ecmp}, {"flowlet", LoadBalance::Flowlet}});
    sw.flowletGapS = s.Get<double>(cfg::switch_settings::kFlowletGapS);
    sw.roceClass = s.Get<bool>(cfg::switch_settings::kRoceClass);
    if (auto f = s.Section(cfg::switch_settings::kFaults))
    {
        sw.faultDoubleAdd = f->Get<uint32_t>(cfg::switch_faults::kNetreduceDoubleAdd);
        f->Finish();
    }
    const json& thresholds = s.Map(cfg::switch_settings::kDlcpThresholds);
    for (const auto& [name, v] : thresholds.items())
    {
        try
        {
            sw.dlcpThresholds[name] = v.get<std::vector<int64_t>>();
        }
        catch (const json::exception&)
        {
            throw ConfigError(s.Where(cfg::switch_settings::kDlcpThresholds) + "." + name + " = " + Shown(v) +
                              ": a list of bytes per priority (-1: never)");
        }
    }
    s.Finish();
    return sw;
}

FaultScheduleSpec
ParseFaultSchedule(ConfigObject f)
{
    FaultScheduleSpec s;
    s.switchDetectS = f.Get<double>(cfg::fault_schedule::kSwitchDetectS);
    s.linkDetectS = f.Get<double>(cfg::fault_schedule::kLinkDetectS);
    s.switchHangDetectS = f.Get<double>(cfg::fault_schedule::kSwitchHangDetectS);
    if (s.switchDetectS < 0 || s.linkDetectS < 0 || s.switchHangDetectS < 0)
    {
        throw ConfigError(f.Where(cfg::fault_schedule::kSwitchDetectS) +
                          ", link_detect_s, switch_hang_detect_s: 0 or more seconds");
    }
    for (ConfigObject x : f.Objects(cfg::fault_schedule::kFaults))
    {
        FaultSpec spec;
        spec.kind = x.Choice<FaultKind>(cfg::fault::kKind, {{"switch-crash", FaultKind::SwitchCrash},
                                                 {"switch-hang", FaultKind::SwitchHang},
                                                 {"link-down", FaultKind::LinkDown},
                                                 {"worker-crash", FaultKind::WorkerCrash},
                                                 {"slow-worker", FaultKind::SlowWorker}});
        spec.label = x.Get<std::string>(cfg::fault::kLabel);
        spec.atS = x.Get<double>(cfg::fault::kAtS);
        if (!(spec.atS >= 0))
        {
            throw ConfigError(x.Where(cfg::fault::kAtS) + " = " + std::to_string(spec.atS) + ": 0 or more seconds");
        }
        switch (spec.kind)
        {
        case FaultKind::SwitchCrash:
        case FaultKind::SwitchHang:
        case FaultKind::LinkDown:
            if (spec.kind != FaultKind::LinkDown)
            {
                spec.sw = x.Get<std::string>(cfg::fault::kSwitch);
            }
            else
            {
                spec.a = x.Get<std::string>(cfg::fault::kA);
                spec.b = x.Get<std::string>(cfg::fault::kB);
            }
            for (ConfigObject w : x.Objects(cfg::fault::kWindows))
            {
                double from = w.Get<double>(cfg::window::kFromS);
                std::optional<double> to = w.Nullable<double>(cfg::window::kToS);
                if (!(from >= 0) || (to && !(*to > from)))
                {
                    throw ConfigError(w.Where(cfg::window::kToS) + ": a window ends after it starts (from_s >= 0)");
                }
                spec.windows.emplace_back(from, to);
                w.Finish();
            }
            break;
        case FaultKind::WorkerCrash:
        case FaultKind::SlowWorker:
            spec.job = x.Get<uint32_t>(cfg::fault::kJob);
            spec.node = x.Get<uint32_t>(cfg::fault::kNode);
            spec.host = x.Get<std::string>(cfg::fault::kHost);
            if (spec.kind == FaultKind::SlowWorker)
            {
                spec.factor = x.Get<double>(cfg::fault::kFactor);
                spec.rateBps = x.Nullable<double>(cfg::fault::kRateBps);
                if (!(spec.factor >= 1) || (spec.rateBps && !(*spec.rateBps > 0)))
                {
                    throw ConfigError(x.Where(cfg::fault::kFactor) + ": at least 1, and rate_bps above 0 or null");
                }
            }
            break;
        }
        x.Finish();
        s.faults.push_back(std::move(spec));
    }
    f.Finish();
    return s;
}

MpiSpec
ParseMpi(ConfigObject m)
{
    MpiSpec mpi;
    mpi.ranks = m.Get<uint32_t>(cfg::mpi::kRanks);
    if (mpi.ranks < 1)
    {
        throw ConfigError(m.Where(cfg::mpi::kRanks) + ": at least 1");
    }
    mpi.sync = m.Choice<MpiSync>(cfg::mpi::kSync,
                                 {{"barrier", MpiSync::Barrier}, {"null-message", MpiSync::NullMessage}});
    const json& rankOf = m.Map(cfg::mpi::kRankOf);
    for (const auto& [name, r] : rankOf.items())
    {
        if (!r.is_number_unsigned())
        {
            throw ConfigError(m.Where(cfg::mpi::kRankOf) + "." + name + " = " + Shown(r) +
                              ": a rank (an integer of at least 0)");
        }
        uint32_t rank = r.get<uint32_t>();
        if (rank >= mpi.ranks)
        {
            throw ConfigError(m.Where(cfg::mpi::kRankOf) + "." + name + " = " + std::to_string(rank) +
                              ": ranks are 0.." + std::to_string(mpi.ranks - 1));
        }
        mpi.rankOf[name] = rank;
    }
    m.Finish();
    return mpi;
}

} // namespace

WireSizes
ParseWire(ConfigObject w)
{
    WireSizes s;
    s.roceOverhead = w.Get<uint32_t>(cfg::wire::kRoceOverhead);
    s.reth = w.Get<uint32_t>(cfg::wire::kReth);
    s.imm = w.Get<uint32_t>(cfg::wire::kImm);
    s.aeth = w.Get<uint32_t>(cfg::wire::kAeth);
    s.sack = w.Get<uint32_t>(cfg::wire::kSack);
    s.tcpOverhead = w.Get<uint32_t>(cfg::wire::kTcpOverhead);
    s.framing = w.Get<uint32_t>(cfg::wire::kFraming);
    w.Finish();
    return s;
}

TransportSpec
ParseTransport(ConfigObject j)
{
    TransportSpec t;
    t.mode = j.Choice<Mode>(cfg::transport::kMode, {{"gbn", Mode::Gbn}, {"sr", Mode::Sr}});
    t.mtu = j.Get<uint32_t>(cfg::transport::kMtu);
    t.window = j.Get<uint32_t>(cfg::transport::kWindow);
    t.ackEvery = j.Get<uint32_t>(cfg::transport::kAckEvery);
    t.rtoS = j.Get<double>(cfg::transport::kRtoS);
    t.rtoMaxS = j.Get<double>(cfg::transport::kRtoMaxS);
    t.retryLimit = j.Get<uint32_t>(cfg::transport::kRetryLimit);
    t.lossBudget = j.Get<double>(cfg::transport::kLossBudget);
    t.reorderDelayS = j.Get<double>(cfg::transport::kReorderDelayS);
    t.orderTolerant = j.Get<bool>(cfg::transport::kOrderTolerant);
    j.Finish();
    if (t.mtu == 0 || t.window == 0 || t.ackEvery == 0)
    {
        throw ConfigError(j.Where(cfg::transport::kMtu) + ", window and ack_every: must be at least 1");
    }
    Positive(t.rtoS, j.Where(cfg::transport::kRtoS));
    if (t.orderTolerant && t.mode != Mode::Sr)
    {
        throw ConfigError(j.Where(cfg::transport::kOrderTolerant) + ": needs mode sr (it keeps out-of-order packets)");
    }
    return t;
}

RunConfig
ParseConfig(const std::string& text)
{
    json doc;
    try
    {
        doc = json::parse(text);
    }
    catch (const json::exception& e)
    {
        throw ConfigError(std::string("not JSON: ") + e.what());
    }
    ConfigObject j(doc, "");
    // The format first: a document of another format is refused as that, not for the keys it has or lacks.
    const json& format = j.Need(cfg::run::kFormat);
    if (format != json(CONFIG_FORMAT))
    {
        throw ConfigError("format = " + Shown(format) + ": this gradswitch-sim reads format " +
                          std::to_string(CONFIG_FORMAT) + " (write the configuration with the gradswitch.sim of its checkout)");
    }
    RunConfig c;
    c.seed = j.Get<uint64_t>(cfg::run::kSeed);
    c.timeLimitS = j.Get<double>(cfg::run::kTimeLimitS);
    c.progressS = j.Get<double>(cfg::run::kProgressS);
    c.scheduler = j.Choice<std::string>(cfg::run::kScheduler, {{"map", "ns3::MapScheduler"},
                                                      {"heap", "ns3::HeapScheduler"},
                                                      {"calendar", "ns3::CalendarScheduler"},
                                                      {"priority-queue", "ns3::PriorityQueueScheduler"}});
    c.wire = ParseWire(j.Object(cfg::run::kWire));
    c.topology = ParseTopology(j.Object(cfg::run::kTopology));
    c.switches = ParseSwitch(j.Object(cfg::run::kSwitch));
    ConfigObject host = j.Object(cfg::run::kHost);
    c.hostMessageDelayS = host.Get<double>(cfg::host::kMessageDelayS);
    host.Finish();
    if (auto loss = j.Section(cfg::run::kLoss))
    {
        c.lossFraction = loss->Get<double>(cfg::loss::kFraction);
        c.lossHosts = loss->Get<std::vector<std::string>>(cfg::loss::kHosts);
        loss->Finish();
        if (c.lossFraction < 0 || c.lossFraction >= 1)
        {
            throw ConfigError("loss.fraction: 0 <= fraction < 1");
        }
    }
    for (ConfigObject job : j.Objects(cfg::run::kJobs))
    {
        c.jobs.push_back(ParseJob(job));
    }
    if (auto b = j.Section(cfg::run::kBackground))
    {
        BackgroundSpec s;
        s.sender = b->Get<std::string>(cfg::background::kSender);
        s.receiver = b->Get<std::string>(cfg::background::kReceiver);
        s.flows = b->Get<uint32_t>(cfg::background::kFlows);
        s.mss = b->Get<uint32_t>(cfg::background::kMss);
        s.rwndBytes = b->Get<uint64_t>(cfg::background::kRwndBytes);
        s.minRtoS = b->Get<double>(cfg::background::kMinRtoS);
        b->Finish();
        c.background = s;
    }
    if (auto t = j.Section(cfg::run::kTensorlights))
    {
        TensorLightsSpec s;
        s.host = t->Get<std::string>(cfg::tensorlights::kHost);
        s.rotateS = t->Get<double>(cfg::tensorlights::kRotateS);
        for (ConfigObject srv : t->Objects(cfg::tensorlights::kServers))
        {
            s.servers.emplace_back(srv.Get<uint32_t>(cfg::tensorlights_server::kJob),
                                   srv.Get<uint32_t>(cfg::tensorlights_server::kNode));
            srv.Finish();
        }
        t->Finish();
        c.tensorlights = s;
    }
    for (ConfigObject p : j.OptionalObjects(cfg::run::kEcmpProbes))
    {
        EcmpProbe probe;
        probe.sw = p.Get<std::string>(cfg::ecmp_probe::kSwitch);
        probe.src = p.Get<std::string>(cfg::ecmp_probe::kSrc);
        probe.dst = p.Get<std::string>(cfg::ecmp_probe::kDst);
        probe.protocol = p.Get<uint32_t>(cfg::ecmp_probe::kProtocol);
        probe.sport = p.Get<uint32_t>(cfg::ecmp_probe::kSport);
        probe.dport = p.Get<uint32_t>(cfg::ecmp_probe::kDport);
        p.Finish();
        c.ecmpProbes.push_back(probe);
    }
    if (auto m = j.Section(cfg::run::kMpi))
    {
        c.mpi = ParseMpi(*m);
    }
    if (auto f = j.Section(cfg::run::kFaultSchedule))
    {
        c.faultSchedule = ParseFaultSchedule(*f);
    }
    j.Finish();
    return c;
}

std::string
ReadTextFile(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
    {
        throw ConfigError("cannot read " + path);
    }
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void
WriteJson(const json& doc, const std::string& path)
{
    if (path.empty())
    {
        std::cout << doc.dump(1) << std::endl;
        return;
    }
    std::ofstream f(path);
    f << doc.dump(1) << std::endl;
    if (!f)
    {
        throw std::runtime_error("cannot write " + path);
    }
}

} // namespace gs
} // namespace ns3
