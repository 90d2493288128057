#include "gs-config.h"

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

std::string
Where(const std::string& path, const std::string& key)
{
    return path.empty() ? key : path + "." + key;
}

const json&
Need(const json& j, const std::string& key, const std::string& path)
{
    if (!j.is_object() || !j.contains(key))
    {
        throw ConfigError(Where(path, key) + " is missing");
    }
    return j.at(key);
}

template <typename T>
T
Get(const json& j, const std::string& key, const std::string& path)
{
    try
    {
        return Need(j, key, path).get<T>();
    }
    catch (const json::exception& e)
    {
        throw ConfigError(Where(path, key) + ": " + e.what());
    }
}

template <typename T>
T
Opt(const json& j, const std::string& key, T fallback, const std::string& path)
{
    if (!j.is_object() || !j.contains(key) || j.at(key).is_null())
    {
        return fallback;
    }
    return Get<T>(j, key, path);
}

template <typename E>
E
Choice(const json& j, const std::string& key, const std::map<std::string, E>& names, const std::string& path,
       std::optional<E> fallback = std::nullopt)
{
    if (fallback && (!j.contains(key) || j.at(key).is_null()))
    {
        return *fallback;
    }
    auto value = Get<std::string>(j, key, path);
    auto it = names.find(value);
    if (it == names.end())
    {
        std::string allowed;
        for (const auto& [n, _] : names)
        {
            allowed += (allowed.empty() ? "" : ", ") + n;
        }
        throw ConfigError(Where(path, key) + " = '" + value + "': not one of " + allowed);
    }
    return it->second;
}

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
ParseTraining(const json& j, const std::string& path)
{
    TrainingSpec t;
    t.dilation = Get<double>(j, "dilation", path);
    t.sync = Choice<Sync>(j, "sync", {{"iteration", Sync::Iteration}, {"layer", Sync::Layer}}, path);
    t.inFlight = Get<uint32_t>(j, "in_flight", path);
    if (t.inFlight == 0)
    {
        throw ConfigError(path + ".in_flight: at least 1");
    }
    const json& layers = Need(j, "layers", path);
    for (size_t i = 0; i < layers.size(); i++)
    {
        std::string p = path + ".layers[" + std::to_string(i) + "]";
        t.layers.push_back(LayerSpec{Get<std::string>(layers[i], "name", p), Get<double>(layers[i], "forward_s", p),
                                     Get<double>(layers[i], "backward_s", p)});
    }
    const json& ops = Need(j, "ops", path);
    for (size_t i = 0; i < ops.size(); i++)
    {
        std::string p = path + ".ops[" + std::to_string(i) + "]";
        OpSpec op;
        op.elements = Get<uint64_t>(ops[i], "elements", p);
        op.layers = Get<std::vector<uint32_t>>(ops[i], "layers", p);
        op.deps = Opt<std::vector<uint32_t>>(ops[i], "deps", {}, p);
        op.layerClass = Opt<uint32_t>(ops[i], "layer_class", 0, p);
        op.droppable = Opt<bool>(ops[i], "droppable", true, p);
        for (uint32_t l : op.layers)
        {
            if (l >= t.layers.size())
            {
                throw ConfigError(p + ".layers: layer " + std::to_string(l) + " does not exist");
            }
        }
        for (uint32_t d : op.deps)
        {
            if (d >= i)
            {
                throw ConfigError(p + ".deps: op " + std::to_string(d) + " does not come before it");
            }
        }
        t.ops.push_back(op);
    }
    if (t.ops.empty() || t.layers.empty())
    {
        throw ConfigError(path + ": a training plan needs layers and ops");
    }
    return t;
}

JobSpec
ParseJob(const json& j, const std::string& path)
{
    JobSpec job;
    job.jobId = Get<uint32_t>(j, "job_id", path);
    job.algo = Choice<Algo>(
        j, "algo", {{"ring", Algo::Ring}, {"ps", Algo::Ps}, {"netreduce", Algo::NetReduce}, {"write", Algo::Write}}, path);
    job.check = Choice<Check>(j, "check", {{"exact", Check::Exact}, {"digest", Check::Digest}, {"none", Check::None}},
                              path);
    job.seed = Opt<uint64_t>(j, "seed", 1, path);
    const json& nodes = Need(j, "nodes", path);
    for (size_t i = 0; i < nodes.size(); i++)
    {
        std::string p = path + ".nodes[" + std::to_string(i) + "]";
        NodeSpec n;
        n.nodeId = Get<uint32_t>(nodes[i], "node_id", p);
        n.role = Choice<Role>(nodes[i], "role", {{"worker", Role::Worker}, {"server", Role::Server}}, p);
        n.host = Get<std::string>(nodes[i], "host", p);
        if (n.nodeId != i)
        {
            throw ConfigError(p + ".node_id = " + std::to_string(n.nodeId) + ": node ids are 0, 1, ... in order");
        }
        job.nodes.push_back(n);
    }
    job.iterations = Get<uint32_t>(j, "iterations", path);
    job.transport = ParseTransport(Need(j, "transport", path), path + ".transport");
    if (j.contains("reductions") && !j.at("reductions").is_null())
    {
        const json& rs = j.at("reductions");
        for (size_t i = 0; i < rs.size(); i++)
        {
            std::string p = path + ".reductions[" + std::to_string(i) + "]";
            job.reductions.push_back(ReductionSpec{Get<uint64_t>(rs[i], "elements", p),
                                                   Opt<uint32_t>(rs[i], "layer_class", 0, p),
                                                   Opt<bool>(rs[i], "droppable", true, p)});
        }
    }
    if (j.contains("training") && !j.at("training").is_null())
    {
        job.training = ParseTraining(j.at("training"), path + ".training");
    }
    if (!job.training && job.reductions.empty())
    {
        throw ConfigError(path + ": give reductions (the all-reduce loop) or training");
    }
    job.psKeyBytes = Opt<uint64_t>(j, "ps_key_bytes", 64 << 10, path);
    job.credits = Opt<uint32_t>(j, "credits", 4, path);
    if (j.contains("dlcp") && !j.at("dlcp").is_null())
    {
        const json& d = j.at("dlcp");
        std::string p = path + ".dlcp";
        DlcpSpec s;
        s.priority = Opt<bool>(d, "priority", false, p);
        s.drop = Opt<bool>(d, "drop", false, p);
        s.spray = Opt<bool>(d, "spray", false, p);
        s.lossBudget = Opt<double>(d, "loss_budget", 0.1, p);
        s.dropMinLayerClass = Opt<uint32_t>(d, "drop_min_layer_class", 4, p);
        s.dropMaxMagnitudeClass = Opt<uint32_t>(d, "drop_max_magnitude_class", 1, p);
        s.maxRelativeError = Opt<double>(d, "max_relative_error", 0.2, p);
        job.dlcp = s;
    }
    job.iterationTimeoutS = Opt<double>(j, "iteration_timeout_s", 120.0, path);
    if (j.contains("crash") && !j.at("crash").is_null())
    {
        job.crash = std::make_pair(Get<uint32_t>(j.at("crash"), "node", path + ".crash"),
                                   Get<uint32_t>(j.at("crash"), "after", path + ".crash"));
    }
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
            throw ConfigError(path + ".nodes: workers come first, then servers");
        }
    }
    return job;
}

} // namespace

TransportSpec
ParseTransport(const json& j, const std::string& path)
{
    TransportSpec t;
    t.mode = Choice<Mode>(j, "mode", {{"gbn", Mode::Gbn}, {"sr", Mode::Sr}}, path);
    t.mtu = Get<uint32_t>(j, "mtu", path);
    t.window = Get<uint32_t>(j, "window", path);
    t.ackEvery = Get<uint32_t>(j, "ack_every", path);
    t.rtoS = Get<double>(j, "rto_s", path);
    t.rtoMaxS = Opt<double>(j, "rto_max_s", 1.0, path);
    t.retryLimit = Get<uint32_t>(j, "retry_limit", path);
    t.lossBudget = Opt<double>(j, "loss_budget", 0.0, path);
    t.reorderDelayS = Opt<double>(j, "reorder_delay_s", 0.0, path);
    t.orderTolerant = Opt<bool>(j, "order_tolerant", false, path);
    if (t.mtu == 0 || t.window == 0 || t.ackEvery == 0)
    {
        throw ConfigError(path + ": mtu, window and ack_every must be at least 1");
    }
    Positive(t.rtoS, path + ".rto_s");
    if (t.orderTolerant && t.mode != Mode::Sr)
    {
        throw ConfigError(path + ".order_tolerant: needs mode sr (it keeps out-of-order packets)");
    }
    return t;
}

RunConfig
ParseConfig(const std::string& text)
{
    json j;
    try
    {
        j = json::parse(text);
    }
    catch (const json::exception& e)
    {
        throw ConfigError(std::string("not JSON: ") + e.what());
    }
    RunConfig c;
    c.seed = Opt<uint64_t>(j, "seed", 1, "");
    c.timeLimitS = Opt<double>(j, "time_limit_s", 600.0, "");
    c.progressS = Opt<double>(j, "progress_s", 0.0, "");
    c.scheduler = Choice<std::string>(j, "scheduler",
                                      {{"map", "ns3::MapScheduler"},
                                       {"heap", "ns3::HeapScheduler"},
                                       {"calendar", "ns3::CalendarScheduler"},
                                       {"priority-queue", "ns3::PriorityQueueScheduler"}},
                                      "", std::string("ns3::PriorityQueueScheduler"));
    if (j.contains("wire"))
    {
        const json& w = j.at("wire");
        c.wire.roceOverhead = Get<uint32_t>(w, "roce_overhead", "wire");
        c.wire.reth = Get<uint32_t>(w, "reth", "wire");
        c.wire.imm = Get<uint32_t>(w, "imm", "wire");
        c.wire.aeth = Get<uint32_t>(w, "aeth", "wire");
        c.wire.sack = Get<uint32_t>(w, "sack", "wire");
        c.wire.tcpOverhead = Opt<uint32_t>(w, "tcp_overhead", 66, "wire");
        c.wire.framing = Opt<uint32_t>(w, "framing", 0, "wire");
    }
    const json& t = Need(j, "topology", "");
    c.topology.name = Opt<std::string>(t, "name", "topology", "topology");
    for (const auto& h : Need(t, "hosts", "topology"))
    {
        std::string name = Get<std::string>(h, "name", "topology.hosts");
        c.topology.hosts.push_back(HostSpec{name, ParseIp(Get<std::string>(h, "ip", "topology.hosts"), name + ".ip")});
    }
    for (const auto& s : Need(t, "switches", "topology"))
    {
        c.topology.switches.push_back(SwitchSpec{Get<std::string>(s, "name", "topology.switches"),
                                                 Get<uint32_t>(s, "device_id", "topology.switches"),
                                                 Opt<std::string>(s, "role", "switch", "topology.switches")});
    }
    for (const auto& l : Need(t, "links", "topology"))
    {
        LinkSpec link;
        link.a = Get<std::string>(l, "a", "topology.links");
        link.aPort = Get<uint32_t>(l, "a_port", "topology.links");
        link.b = Get<std::string>(l, "b", "topology.links");
        link.bPort = Get<uint32_t>(l, "b_port", "topology.links");
        std::string p = "topology.links[" + link.a + "-" + link.b + "]";
        link.rateBps = Get<double>(l, "rate_bps", p);
        link.delayS = Get<double>(l, "delay_s", p);
        link.queueBytes = Get<uint64_t>(l, "queue_bytes", p);
        link.shaped = Opt<bool>(l, "shaped", false, p);
        Positive(link.rateBps, p + ".rate_bps");
        if (link.delayS < 0)
        {
            throw ConfigError(p + ".delay_s: must be 0 or more");
        }
        c.topology.links.push_back(link);
    }
    if (j.contains("switch"))
    {
        const json& s = j.at("switch");
        c.switches.processingDelayS = Opt<double>(s, "processing_delay_s", 0.0, "switch");
        c.switches.ecmpMultiplier = Opt<uint32_t>(s, "ecmp_multiplier", ECMP_PLAIN_MULTIPLIER, "switch");
        c.switches.loadBalance = Choice<LoadBalance>(s, "load_balance",
                                                     {{"ecmp", LoadBalance::Ecmp}, {"flowlet", LoadBalance::Flowlet}},
                                                     "switch", LoadBalance::Ecmp);
        c.switches.flowletGapS = Opt<double>(s, "flowlet_gap_s", 50e-3, "switch");
        c.switches.roceClass = Opt<bool>(s, "roce_class", false, "switch");
        if (s.contains("faults"))
        {
            c.switches.faultDoubleAdd = Opt<uint32_t>(s.at("faults"), "netreduce_double_add", 0, "switch.faults");
        }
        if (s.contains("dlcp_thresholds"))
        {
            for (const auto& [name, v] : s.at("dlcp_thresholds").items())
            {
                c.switches.dlcpThresholds[name] = v.get<std::vector<int64_t>>();
            }
        }
    }
    if (j.contains("host"))
    {
        c.hostMessageDelayS = Opt<double>(j.at("host"), "message_delay_s", 0.0, "host");
    }
    if (j.contains("loss") && !j.at("loss").is_null())
    {
        c.lossFraction = Get<double>(j.at("loss"), "fraction", "loss");
        c.lossHosts = Get<std::vector<std::string>>(j.at("loss"), "hosts", "loss");
        if (c.lossFraction < 0 || c.lossFraction >= 1)
        {
            throw ConfigError("loss.fraction: 0 <= fraction < 1");
        }
    }
    const json& jobs = Need(j, "jobs", "");
    for (size_t i = 0; i < jobs.size(); i++)
    {
        c.jobs.push_back(ParseJob(jobs[i], "jobs[" + std::to_string(i) + "]"));
    }
    if (j.contains("background") && !j.at("background").is_null())
    {
        const json& b = j.at("background");
        BackgroundSpec s;
        s.sender = Get<std::string>(b, "sender", "background");
        s.receiver = Get<std::string>(b, "receiver", "background");
        s.flows = Get<uint32_t>(b, "flows", "background");
        s.mss = Get<uint32_t>(b, "mss", "background");
        s.rwndBytes = Opt<uint64_t>(b, "rwnd_bytes", 6 << 20, "background");
        s.minRtoS = Opt<double>(b, "min_rto_s", 0.2, "background");
        c.background = s;
    }
    if (j.contains("tensorlights") && !j.at("tensorlights").is_null())
    {
        const json& t2 = j.at("tensorlights");
        TensorLightsSpec s;
        s.host = Get<std::string>(t2, "host", "tensorlights");
        s.rotateS = Opt<double>(t2, "rotate_s", 0.0, "tensorlights");
        for (const auto& srv : Need(t2, "servers", "tensorlights"))
        {
            s.servers.emplace_back(Get<uint32_t>(srv, "job", "tensorlights.servers"),
                                   Get<uint32_t>(srv, "node", "tensorlights.servers"));
        }
        c.tensorlights = s;
    }
    if (j.contains("ecmp_probes"))
    {
        for (const auto& p : j.at("ecmp_probes"))
        {
            EcmpProbe probe;
            probe.sw = Get<std::string>(p, "switch", "ecmp_probes");
            probe.src = Get<std::string>(p, "src", "ecmp_probes");
            probe.dst = Get<std::string>(p, "dst", "ecmp_probes");
            probe.protocol = Get<uint32_t>(p, "protocol", "ecmp_probes");
            probe.sport = Get<uint32_t>(p, "sport", "ecmp_probes");
            probe.dport = Get<uint32_t>(p, "dport", "ecmp_probes");
            c.ecmpProbes.push_back(probe);
        }
    }
    if (j.contains("mpi") && !j.at("mpi").is_null())
    {
        const json& m = j.at("mpi");
        c.mpi.ranks = Get<uint32_t>(m, "ranks", "mpi");
        if (c.mpi.ranks < 1)
        {
            throw ConfigError("mpi.ranks: at least 1");
        }
        c.mpi.sync = Choice<MpiSync>(m, "sync", {{"barrier", MpiSync::Barrier}, {"null-message", MpiSync::NullMessage}},
                                     "mpi", MpiSync::Barrier);
        const json& rankOf = Need(m, "rank_of", "mpi");
        for (const auto& [name, r] : rankOf.items())
        {
            uint32_t rank = Get<uint32_t>(rankOf, name, "mpi.rank_of");
            if (rank >= c.mpi.ranks)
            {
                throw ConfigError("mpi.rank_of." + name + " = " + std::to_string(rank) + ": ranks are 0.." +
                                  std::to_string(c.mpi.ranks - 1));
            }
            c.mpi.rankOf[name] = rank;
        }
    }
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
