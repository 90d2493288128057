#include "gs-config.h"

#include "gs-config-object.h"

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
    t.dilation = j.Get<double>("dilation");
    t.sync = j.Choice<Sync>("sync", {{"iteration", Sync::Iteration}, {"layer", Sync::Layer}});
    t.inFlight = j.Get<uint32_t>("in_flight");
    if (t.inFlight == 0)
    {
        throw ConfigError(j.Where("in_flight") + ": at least 1");
    }
    for (ConfigObject l : j.Objects("layers"))
    {
        t.layers.push_back(
            LayerSpec{l.Get<std::string>("name"), l.Get<double>("forward_s"), l.Get<double>("backward_s")});
        l.Finish();
    }
    size_t i = 0;
    for (ConfigObject o : j.Objects("ops"))
    {
        OpSpec op;
        op.elements = o.Get<uint64_t>("elements");
        op.layers = o.Get<std::vector<uint32_t>>("layers");
        op.deps = o.Get<std::vector<uint32_t>>("deps");
        op.layerClass = o.Get<uint32_t>("layer_class");
        op.droppable = o.Get<bool>("droppable");
        o.Finish();
        for (uint32_t l : op.layers)
        {
            if (l >= t.layers.size())
            {
                throw ConfigError(o.Where("layers") + ": layer " + std::to_string(l) + " does not exist");
            }
        }
        for (uint32_t d : op.deps)
        {
            if (d >= i)
            {
                throw ConfigError(o.Where("deps") + ": op " + std::to_string(d) + " does not come before it");
            }
        }
        t.ops.push_back(op);
        i++;
    }
    j.Finish();
    if (t.ops.empty() || t.layers.empty())
    {
        throw ConfigError(j.Where("ops") + ": a training plan needs layers and ops");
    }
    return t;
}

DlcpSpec
ParseDlcp(ConfigObject d)
{
    DlcpSpec s;
    s.priority = d.Get<bool>("priority");
    s.drop = d.Get<bool>("drop");
    s.spray = d.Get<bool>("spray");
    s.lossBudget = d.Get<double>("loss_budget");
    s.dropMinLayerClass = d.Get<uint32_t>("drop_min_layer_class");
    s.dropMaxMagnitudeClass = d.Get<uint32_t>("drop_max_magnitude_class");
    s.maxRelativeError = d.Get<double>("max_relative_error");
    d.Finish();
    return s;
}

JobSpec
ParseJob(ConfigObject j)
{
    JobSpec job;
    job.jobId = j.Get<uint32_t>("job_id");
    job.algo = j.Choice<Algo>(
        "algo", {{"ring", Algo::Ring},
                 {"ps", Algo::Ps},
                 {"netreduce", Algo::NetReduce},
                 {"write", Algo::Write},
                 {"graph", Algo::Graph}});
    job.check = j.Choice<Check>("check", {{"exact", Check::Exact}, {"digest", Check::Digest}, {"none", Check::None}});
    job.seed = j.Get<uint64_t>("seed");
    for (ConfigObject n : j.Objects("nodes"))
    {
        NodeSpec node;
        node.nodeId = n.Get<uint32_t>("node_id");
        node.role = n.Choice<Role>("role", {{"worker", Role::Worker}, {"server", Role::Server}});
        node.host = n.Get<std::string>("host");
        n.Finish();
        if (node.nodeId != job.nodes.size())
        {
            throw ConfigError(n.Where("node_id") + " = " + std::to_string(node.nodeId) +
                              ": node ids are 0, 1, ... in order");
        }
        job.nodes.push_back(node);
    }
    job.iterations = j.Get<uint32_t>("iterations");
    job.transport = ParseTransport(j.Object("transport"));
    for (ConfigObject r : j.OptionalObjects("reductions"))
    {
        job.reductions.push_back(
            ReductionSpec{r.Get<uint64_t>("elements"), r.Get<uint32_t>("layer_class"), r.Get<bool>("droppable")});
        r.Finish();
    }
    if (auto t = j.Section("training"))
    {
        job.training = ParseTraining(*t);
    }
    job.psKeyBytes = j.Get<uint64_t>("ps_key_bytes");
    if (auto g = j.Section("graph"))
    {
        if (job.algo != Algo::Graph)
        {
            throw ConfigError(j.Where("graph") + ": only a job of algo graph runs execution graphs");
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
                const char* key = nr.owners == NrOwners::None      ? "job_id"
                                  : nr.owners == NrOwners::Scatter ? "reduce_scatter_job_id"
                                                                   : "all_gather_job_id";
                throw ConfigError(g->Where("netreduce") + "." + key + " = " + std::to_string(job.jobId) +
                                  ": the graph's own job id; its switch job needs an id of its own");
            }
        }
    }
    if (job.algo == Algo::Graph)
    {
        if (!job.graph || job.training || !job.reductions.empty() || job.iterations != 1)
        {
            throw ConfigError(j.Where("graph") + ": a job of algo graph gives its graph, 1 iteration, and neither "
                                                 "reductions nor training");
        }
    }
    else if (!job.training && job.reductions.empty())
    {
        throw ConfigError(j.Where("reductions") + ": give reductions (the all-reduce loop) or training");
    }
    job.credits = j.Get<uint32_t>("credits");
    if (auto d = j.Section("dlcp"))
    {
        job.dlcp = ParseDlcp(*d);
    }
    job.iterationTimeoutS = j.Get<double>("iteration_timeout_s");
    if (auto c = j.Section("crash"))
    {
        job.crash = std::make_pair(c->Get<uint32_t>("node"), c->Get<uint32_t>("after"));
        c->Finish();
    }
    j.Finish();
    std::string path = j.Where("nodes");
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
    topo.name = t.Get<std::string>("name");
    for (ConfigObject h : t.Objects("hosts"))
    {
        topo.hosts.push_back(HostSpec{h.Get<std::string>("name"), ParseIp(h.Get<std::string>("ip"), h.Where("ip"))});
        h.Finish();
    }
    for (ConfigObject s : t.Objects("switches"))
    {
        topo.switches.push_back(
            SwitchSpec{s.Get<std::string>("name"), s.Get<uint32_t>("device_id"), s.Get<std::string>("role")});
        s.Finish();
    }
    for (ConfigObject l : t.Objects("links"))
    {
        LinkSpec link;
        link.a = l.Get<std::string>("a");
        link.aPort = l.Get<uint32_t>("a_port");
        link.b = l.Get<std::string>("b");
        link.bPort = l.Get<uint32_t>("b_port");
        link.rateBps = l.Get<double>("rate_bps");
        link.delayS = l.Get<double>("delay_s");
        link.queueBytes = l.Get<uint64_t>("queue_bytes");
        link.shaped = l.Get<bool>("shaped");
        l.Finish();
        Positive(link.rateBps, l.Where("rate_bps"));
        if (link.delayS < 0)
        {
            throw ConfigError(l.Where("delay_s") + ": must be 0 or more");
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
    sw.processingDelayS = s.Get<double>("processing_delay_s");
    sw.ecmpMultiplier = s.Get<uint32_t>("ecmp_multiplier");
    sw.loadBalance =
        s.Choice<LoadBalance>("load_balance", {{"ecmp", LoadBalance::Ecmp}, {"flowlet", LoadBalance::Flowlet}});
    sw.flowletGapS = s.Get<double>("flowlet_gap_s");
    sw.roceClass = s.Get<bool>("roce_class");
    if (auto f = s.Section("faults"))
    {
        sw.faultDoubleAdd = f->Get<uint32_t>("netreduce_double_add");
        f->Finish();
    }
    const json& thresholds = s.Map("dlcp_thresholds");
    for (const auto& [name, v] : thresholds.items())
    {
        try
        {
            sw.dlcpThresholds[name] = v.get<std::vector<int64_t>>();
        }
        catch (const json::exception&)
        {
            throw ConfigError(s.Where("dlcp_thresholds") + "." + name + " = " + Shown(v) +
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
    s.switchDetectS = f.Get<double>("switch_detect_s");
    s.linkDetectS = f.Get<double>("link_detect_s");
    s.switchHangDetectS = f.Get<double>("switch_hang_detect_s");
    if (s.switchDetectS < 0 || s.linkDetectS < 0 || s.switchHangDetectS < 0)
    {
        throw ConfigError(f.Where("switch_detect_s") + ", link_detect_s, switch_hang_detect_s: 0 or more seconds");
    }
    for (ConfigObject x : f.Objects("faults"))
    {
        FaultSpec spec;
        spec.kind = x.Choice<FaultKind>("kind", {{"switch-crash", FaultKind::SwitchCrash},
                                                 {"switch-hang", FaultKind::SwitchHang},
                                                 {"link-down", FaultKind::LinkDown},
                                                 {"worker-crash", FaultKind::WorkerCrash},
                                                 {"slow-worker", FaultKind::SlowWorker}});
        spec.label = x.Get<std::string>("label");
        spec.atS = x.Get<double>("at_s");
        if (!(spec.atS >= 0))
        {
            throw ConfigError(x.Where("at_s") + " = " + std::to_string(spec.atS) + ": 0 or more seconds");
        }
        switch (spec.kind)
        {
        case FaultKind::SwitchCrash:
        case FaultKind::SwitchHang:
        case FaultKind::LinkDown:
            if (spec.kind != FaultKind::LinkDown)
            {
                spec.sw = x.Get<std::string>("switch");
            }
            else
            {
                spec.a = x.Get<std::string>("a");
                spec.b = x.Get<std::string>("b");
            }
            for (ConfigObject w : x.Objects("windows"))
            {
                double from = w.Get<double>("from_s");
                std::optional<double> to = w.Nullable<double>("to_s");
                if (!(from >= 0) || (to && !(*to > from)))
                {
                    throw ConfigError(w.Where("to_s") + ": a window ends after it starts (from_s >= 0)");
                }
                spec.windows.emplace_back(from, to);
                w.Finish();
            }
            break;
        case FaultKind::WorkerCrash:
        case FaultKind::SlowWorker:
            spec.job = x.Get<uint32_t>("job");
            spec.node = x.Get<uint32_t>("node");
            spec.host = x.Get<std::string>("host");
            if (spec.kind == FaultKind::SlowWorker)
            {
                spec.factor = x.Get<double>("factor");
                spec.rateBps = x.Nullable<double>("rate_bps");
                if (!(spec.factor >= 1) || (spec.rateBps && !(*spec.rateBps > 0)))
                {
                    throw ConfigError(x.Where("factor") + ": at least 1, and rate_bps above 0 or null");
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
    mpi.ranks = m.Get<uint32_t>("ranks");
    if (mpi.ranks < 1)
    {
        throw ConfigError(m.Where("ranks") + ": at least 1");
    }
    mpi.sync = m.Choice<MpiSync>("sync", {{"barrier", MpiSync::Barrier}, {"null-message", MpiSync::NullMessage}});
    const json& rankOf = m.Map("rank_of");
    for (const auto& [name, r] : rankOf.items())
    {
        if (!r.is_number_unsigned())
        {
            throw ConfigError(m.Where("rank_of") + "." + name + " = " + Shown(r) +
                              ": a rank (an integer of at least 0)");
        }
        uint32_t rank = r.get<uint32_t>();
        if (rank >= mpi.ranks)
        {
            throw ConfigError(m.Where("rank_of") + "." + name + " = " + std::to_string(rank) + ": ranks are 0.." +
                              std::to_string(mpi.ranks - 1));
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
    s.roceOverhead = w.Get<uint32_t>("roce_overhead");
    s.reth = w.Get<uint32_t>("reth");
    s.imm = w.Get<uint32_t>("imm");
    s.aeth = w.Get<uint32_t>("aeth");
    s.sack = w.Get<uint32_t>("sack");
    s.tcpOverhead = w.Get<uint32_t>("tcp_overhead");
    s.framing = w.Get<uint32_t>("framing");
    w.Finish();
    return s;
}

TransportSpec
ParseTransport(ConfigObject j)
{
    TransportSpec t;
    t.mode = j.Choice<Mode>("mode", {{"gbn", Mode::Gbn}, {"sr", Mode::Sr}});
    t.mtu = j.Get<uint32_t>("mtu");
    t.window = j.Get<uint32_t>("window");
    t.ackEvery = j.Get<uint32_t>("ack_every");
    t.rtoS = j.Get<double>("rto_s");
    t.rtoMaxS = j.Get<double>("rto_max_s");
    t.retryLimit = j.Get<uint32_t>("retry_limit");
    t.lossBudget = j.Get<double>("loss_budget");
    t.reorderDelayS = j.Get<double>("reorder_delay_s");
    t.orderTolerant = j.Get<bool>("order_tolerant");
    j.Finish();
    if (t.mtu == 0 || t.window == 0 || t.ackEvery == 0)
    {
        throw ConfigError(j.Where("mtu") + ", window and ack_every: must be at least 1");
    }
    Positive(t.rtoS, j.Where("rto_s"));
    if (t.orderTolerant && t.mode != Mode::Sr)
    {
        throw ConfigError(j.Where("order_tolerant") + ": needs mode sr (it keeps out-of-order packets)");
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
    const json& format = j.Need("format");
    if (format != json(CONFIG_FORMAT))
    {
        throw ConfigError("format = " + Shown(format) + ": this gradswitch-sim reads format " +
                          std::to_string(CONFIG_FORMAT) + " (write the configuration with the ns3sim of its checkout)");
    }
    RunConfig c;
    c.seed = j.Get<uint64_t>("seed");
    c.timeLimitS = j.Get<double>("time_limit_s");
    c.progressS = j.Get<double>("progress_s");
    c.scheduler = j.Choice<std::string>("scheduler", {{"map", "ns3::MapScheduler"},
                                                      {"heap", "ns3::HeapScheduler"},
                                                      {"calendar", "ns3::CalendarScheduler"},
                                                      {"priority-queue", "ns3::PriorityQueueScheduler"}});
    c.wire = ParseWire(j.Object("wire"));
    c.topology = ParseTopology(j.Object("topology"));
    c.switches = ParseSwitch(j.Object("switch"));
    ConfigObject host = j.Object("host");
    c.hostMessageDelayS = host.Get<double>("message_delay_s");
    host.Finish();
    if (auto loss = j.Section("loss"))
    {
        c.lossFraction = loss->Get<double>("fraction");
        c.lossHosts = loss->Get<std::vector<std::string>>("hosts");
        loss->Finish();
        if (c.lossFraction < 0 || c.lossFraction >= 1)
        {
            throw ConfigError("loss.fraction: 0 <= fraction < 1");
        }
    }
    for (ConfigObject job : j.Objects("jobs"))
    {
        c.jobs.push_back(ParseJob(job));
    }
    if (auto b = j.Section("background"))
    {
        BackgroundSpec s;
        s.sender = b->Get<std::string>("sender");
        s.receiver = b->Get<std::string>("receiver");
        s.flows = b->Get<uint32_t>("flows");
        s.mss = b->Get<uint32_t>("mss");
        s.rwndBytes = b->Get<uint64_t>("rwnd_bytes");
        s.minRtoS = b->Get<double>("min_rto_s");
        b->Finish();
        c.background = s;
    }
    if (auto t = j.Section("tensorlights"))
    {
        TensorLightsSpec s;
        s.host = t->Get<std::string>("host");
        s.rotateS = t->Get<double>("rotate_s");
        for (ConfigObject srv : t->Objects("servers"))
        {
            s.servers.emplace_back(srv.Get<uint32_t>("job"), srv.Get<uint32_t>("node"));
            srv.Finish();
        }
        t->Finish();
        c.tensorlights = s;
    }
    for (ConfigObject p : j.OptionalObjects("ecmp_probes"))
    {
        EcmpProbe probe;
        probe.sw = p.Get<std::string>("switch");
        probe.src = p.Get<std::string>("src");
        probe.dst = p.Get<std::string>("dst");
        probe.protocol = p.Get<uint32_t>("protocol");
        probe.sport = p.Get<uint32_t>("sport");
        probe.dport = p.Get<uint32_t>("dport");
        p.Finish();
        c.ecmpProbes.push_back(probe);
    }
    if (auto m = j.Section("mpi"))
    {
        c.mpi = ParseMpi(*m);
    }
    if (auto f = j.Section("fault_schedule"))
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
