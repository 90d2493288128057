// gradswitch's ns-3 simulator: reads one run's configuration (JSON, written by gradswitch.sim), builds the network
// and the jobs, runs, writes the results (JSON). docs/simulator.md describes both formats.
//
//   gradswitch-sim --config run.json --out results.json     run
//   gradswitch-sim --config run.json --tables               forwarding tables, NetReduce trees and the ports of
//                                                           the configuration's ecmp_probes, then exit
//   gradswitch-sim --config run.json --check                read the configuration and stop: exit 0 when this
//                                                           build takes it
//   gradswitch-sim --constants                              the config.p4 constants this build was compiled with
//
// Exit status: 0 when the run completed (its results say whether every job did), 2 for a configuration
// error (one line on stderr naming the file and the value: a `format` other than this build's, a key it does
// not know, a value missing or out of range; before anything is simulated), 1 for anything else.
#include "gs-config.h"
#include "gs-constants.h"
#include "gs-simulation.h"

#include "ns3/core-module.h"

#ifdef NS3_MPI
#include "ns3/mpi-interface.h"

#include <mpi.h>
#endif

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

using namespace ns3;
using json = nlohmann::json;

namespace
{

#define GS_CONSTANT(name) {#name, static_cast<long long>(name)}

json
Constants()
{
    json c = {
        GS_CONSTANT(PRIORITY_QUEUES),
        GS_CONSTANT(ROCE_V2_UDP_PORT),
        GS_CONSTANT(IP_PROTO_TCP),
        GS_CONSTANT(IP_PROTO_UDP),
        GS_CONSTANT(ROCE_WRITE_FIRST),
        GS_CONSTANT(ROCE_WRITE_MIDDLE),
        GS_CONSTANT(ROCE_WRITE_LAST),
        GS_CONSTANT(ROCE_WRITE_LAST_IMM),
        GS_CONSTANT(ROCE_WRITE_ONLY),
        GS_CONSTANT(ROCE_WRITE_ONLY_IMM),
        GS_CONSTANT(ROCE_ACKNOWLEDGE),
        GS_CONSTANT(QPN_JOB_SHIFT),
        GS_CONSTANT(QPN_NODE_SHIFT),
        GS_CONSTANT(AGG_ELEMENTS_PER_PACKET),
        GS_CONSTANT(AGG_PACKETS_PER_MESSAGE),
        GS_CONSTANT(AGG_PACKETS_PER_MESSAGE_LOG2),
        GS_CONSTANT(AGG_MESSAGE_BYTES_LOG2),
        GS_CONSTANT(DLCP_DROPPABLE_SHIFT),
        GS_CONSTANT(DLCP_LAYER_SHIFT),
        GS_CONSTANT(DLCP_LAYER_CLASSES),
        GS_CONSTANT(DLCP_MAGNITUDE_SHIFT),
        GS_CONSTANT(DLCP_MAGNITUDE_CLASSES),
        GS_CONSTANT(DLCP_ACK_PRIORITY),
        GS_CONSTANT(ROCE_CLASS_PRIORITY),
        GS_CONSTANT(DLCP_TRIMMED_SHIFT),
    };
    return {{gs::consts::constants::kConstants, c}};
}

int
Usage()
{
    std::cerr << "usage: gradswitch-sim --config RUN.json [--out RESULTS.json] [--tables | --check] | --constants\n";
    return 2;
}

#ifdef NS3_MPI
/// Stop every rank (mpirun ends the run) after an error on one: the others would wait for it forever.
[[noreturn]] void
AbortRanks(int status)
{
    MPI_Abort(MpiInterface::GetCommunicator(), status);
    std::exit(status);
}
#endif

} // namespace

int
main(int argc, char** argv)
{
    std::string config;
    std::string out;
    bool tables = false;
    bool check = false;
    for (int i = 1; i < argc; i++)
    {
        std::string a = argv[i];
        if (a == "--config" && i + 1 < argc)
        {
            config = argv[++i];
        }
        else if (a == "--out" && i + 1 < argc)
        {
            out = argv[++i];
        }
        else if (a == "--tables")
        {
            tables = true;
        }
        else if (a == "--check")
        {
            check = true;
        }
        else if (a == "--constants")
        {
            std::cout << Constants().dump(1) << std::endl;
            return 0;
        }
        else
        {
            return Usage();
        }
    }
    if (config.empty())
    {
        return Usage();
    }
    std::optional<gs::RunConfig> c;
    try
    {
        c = gs::ParseConfig(gs::ReadTextFile(config));
    }
    catch (const gs::ConfigError& e)
    {
        std::cerr << "error: " << config << ": " << e.what() << std::endl;
        return 2;
    }
    if (check)
    {
        return 0;
    }
    // Started by mpirun on several ranks with a one-rank configuration, every rank would run all of it.
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    {
        const char* world = std::getenv(name);
        if (world != nullptr && c->mpi.ranks == 1 && std::atoi(world) > 1)
        {
            std::cerr << "error: mpi.ranks = 1 but this runs on " << world
                      << " MPI ranks: give the configuration's ranks" << std::endl;
            return 2;
        }
    }
    [[maybe_unused]] bool distributed = false;
    bool writer = true;
#ifdef NS3_MPI
    // One rank runs ns-3's default (sequential) simulator without MPI. More: the distributed simulator, chosen
    // before MPI starts (MpiInterface picks its messaging from it).
    if (c->mpi.ranks > 1)
    {
        GlobalValue::Bind("SimulatorImplementationType",
                          StringValue(c->mpi.sync == gs::MpiSync::NullMessage ? "ns3::NullMessageSimulatorImpl"
                                                                              : "ns3::DistributedSimulatorImpl"));
        MpiInterface::Enable(&argc, &argv);
        distributed = MpiInterface::GetSize() > 1;
        writer = MpiInterface::GetSystemId() == 0;
    }
#endif
    int status = 0;
    try
    {
        Time::SetResolution(Time::PS);
        ObjectFactory scheduler;
        scheduler.SetTypeId(c->scheduler);
        Simulator::SetScheduler(scheduler);
        gs::Simulation sim(std::move(*c));
        sim.Build();
        json result = tables ? sim.Tables() : sim.Run();
        if (tables)
        {
            result[gs::tab::tables::kEcmpProbes] = sim.Probes();
        }
        if (!writer)
        {
            // rank 0 writes every rank's results
        }
        else
        {
            gs::WriteJson(result, out);
        }
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
#ifdef NS3_MPI
    if (status != 0 && distributed)
    {
        AbortRanks(status);
    }
#endif
    Simulator::Destroy();
#ifdef NS3_MPI
    if (MpiInterface::IsEnabled())
    {
        MpiInterface::Disable();
    }
#endif
    return status;
}
