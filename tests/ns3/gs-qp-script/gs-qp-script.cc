// gs-qp-script: one requester QP and one responder QP (gs-qp.cc's RcQp, as gradswitch-sim runs it) exchanging
// a scenario's messages over a scripted wire, in ns-3's simulator; writes what each side sent, the completions
// each reported, their counters and whether and why the requester failed (JSON). tests/ns3/qp_script.py runs the
// same scenarios over gradswitch/roce/qp.py and compares (tests/ns3/test_transport_conformance.py; docs/simulator.md,
// "The transport's conformance test").
//
//   gs-qp-script --scenario SCENARIO.json [--out TRACE.json]
//
// Exit status: 0 when the exchange ran (its trace says how it ended), 2 for a bad scenario (one `error:` line
// naming the value), 1 for anything else.
#include "gs-header.h"
#include "gs-qp-scenario.h"
#include "gs-script-end.h"
#include "gs-scripted-link.h"
#include "gs-ticks.h"

#include "ns3/core-module.h"

#include <nlohmann/json.hpp>

#include <iostream>

using namespace ns3;
using json = nlohmann::json;

namespace
{

json
Packets(const gs::ScriptedLink& link)
{
    json out = json::array();
    for (const gs::LinkRecord& r : link.Records())
    {
        const gs::Wire& w = r.w;
        json p = {{"index", r.index}, {"t_ps", r.tPs}, {"psn", w.psn}, {"opcode", w.opcode}, {"payload", w.payload},
                  {"wire", w.wire}, {"fate", r.fate}};
        if (w.flags & gs::F_ACK)
        {
            uint8_t syndrome = static_cast<uint8_t>(w.aux >> 24);
            bool nak = ((syndrome >> 5) & 3) == 3;
            p["kind"] = nak ? "nak" : "ack";
            p["nak_code"] = nak ? json(syndrome & 0x1F) : json(nullptr);
            p["msn"] = w.aux & 0xFFFFFF;
            p["sack"] = (w.flags & gs::F_SACK) ? json(w.sack & 0xFFFFFF) : json(nullptr);
        }
        else
        {
            p["ack_req"] = (w.flags & gs::F_ACKREQ) != 0;
            p["retx"] = (w.flags & gs::F_RETX) != 0;
        }
        out.push_back(p);
    }
    return out;
}

json
Counters(const gs::RcQp& qp, bool requester)
{
    json out = json::object();
    for (const auto& [name, value] : qp.counters.Named(requester))
    {
        out[name] = value;
    }
    return out;
}

json
Run(const gs::QpScenario& s)
{
    auto params = std::make_shared<gs::QpParams>();
    params->job = 1;
    params->t = s.transport;
    params->wire = s.wire;
    params->exact = true;
    params->hostNames = {"requester", "responder"};
    gs::QpConfig req;
    req.params = params;
    req.localNode = 0;
    req.remoteNode = 1;
    req.localHost = 0;
    req.remoteHost = 1;
    req.initialPsn = s.initialPsn;
    gs::QpConfig resp = req;
    resp.localNode = 1;
    resp.remoteNode = 0;
    resp.localHost = 1;
    resp.remoteHost = 0;
    resp.initialPsn = 0;
    resp.remoteInitialPsn = s.initialPsn;

    gs::ScriptedLink data(s.data, s.delayS, s.rateBps, params->wire);
    gs::ScriptedLink acks(s.acks, s.delayS, s.rateBps, params->wire);
    gs::ScriptEnd requester(req, &data, s.pull);
    gs::ScriptEnd responder(resp, &acks, s.pull);
    data.Connect(&responder, &requester);
    acks.Connect(&requester, &responder);
    requester.SetMessages(s.messages);
    requester.Start();
    Simulator::Stop(TimeStep(gs::SecondsToTicks(s.timeLimitS)));
    Simulator::Run();

    json sent = json::array();
    for (const gs::SendRecord& r : requester.Sent())
    {
        sent.push_back({{"wr_id", r.wrId}, {"ok", r.ok}, {"t_ps", r.tPs}});
    }
    json received = json::array();
    for (const gs::RecvRecord& r : responder.Received())
    {
        char fnv[17];
        std::snprintf(fnv, sizeof(fnv), "%016llx", static_cast<unsigned long long>(r.fnv));
        received.push_back({{"length", r.length}, {"imm", r.imm ? json(*r.imm) : json(nullptr)}, {"va", r.va},
                            {"zero_filled", r.zeroFilled}, {"fnv", fnv}, {"t_ps", r.tPs}});
    }
    gs::RcQp& rq = requester.Qp();
    return {
        {"scenario", s.name},
        {"implementation", "ns3"},
        {"data", Packets(data)},
        {"acks", Packets(acks)},
        {"requester",
         {{"completions", sent},
          {"counters", Counters(rq, true)},
          {"error", requester.Error() ? json(*requester.Error()) : json(nullptr)},
          {"idle", rq.Idle()},
          {"rto_s", rq.Rto()},
          {"srtt_s", rq.Srtt() ? json(*rq.Srtt()) : json(nullptr)}}},
        {"responder",
         {{"completions", received},
          {"counters", Counters(responder.Qp(), false)},
          {"zero_filled", responder.Qp().ZeroFilled()}}},
    };
}

int
Usage()
{
    std::cerr << "usage: gs-qp-script --scenario SCENARIO.json [--out TRACE.json]\n";
    return 2;
}

} // namespace

int
main(int argc, char** argv)
{
    std::string scenario;
    std::string out;
    for (int i = 1; i < argc; i++)
    {
        std::string a = argv[i];
        if (a == "--scenario" && i + 1 < argc)
        {
            scenario = argv[++i];
        }
        else if (a == "--out" && i + 1 < argc)
        {
            out = argv[++i];
        }
        else
        {
            return Usage();
        }
    }
    if (scenario.empty())
    {
        return Usage();
    }
    int status = 0;
    try
    {
        gs::QpScenario s = gs::ParseQpScenario(gs::ReadTextFile(scenario));
        Time::SetResolution(Time::PS);
        gs::WriteJson(Run(s), out);
    }
    catch (const gs::ConfigError& e)
    {
        std::cerr << "error: " << e.what() << std::endl;
        status = 2;
    }
    catch (const std::exception& e)
    {
        std::cerr << "error: " << e.what() << std::endl;
        status = 1;
    }
    Simulator::Destroy();
    return status;
}
