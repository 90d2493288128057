// A parameter server of a job of algo graph (GraphSpec::servers; gradswitch/hosts/graph_ps_server.py on BMv2): it serves
// its keys (PsKeys) of every all-reduce the servers run, in whatever order their pushes complete, since the ranks
// may run several at once. A key's pushes carry the immediate the ranks give it (the operation's group, k and
// the key's index); once every rank's is in, the sum goes to every rank with the same immediate. The node is
// done when every key of its own is served (and, through JobNode::ServeDone, every pull acknowledged).
#include "gs-collective.h"
#include "gs-graph-spec.h"
#include "gs-job-node.h"
#include "gs-key-sums.h"
#include "gs-keys.h"

#include <unordered_map>

namespace ns3
{
namespace gs
{

namespace
{

constexpr uint32_t kGraphPsRkey = 0x47505356; // "GPSV"

class GraphPsServer : public Collective
{
  public:
    explicit GraphPsServer(JobNode* node)
        : Collective(node),
          m_spec(*node->Job().graph),
          m_ranks(static_cast<uint32_t>(m_spec.ranks.size()))
    {
        // every all-reduce of the world is on rank 0 too
        for (const GraphNode& n : m_ranks ? m_spec.ranks[0].nodes : std::vector<GraphNode>{})
        {
            if (!RunsOnServers(m_spec, n))
            {
                continue;
            }
            for (const PsKey& k : PsKeys(m_spec, n))
            {
                if (k.server == node->NodeId())
                {
                    m_mine++;
                    m_tags[CollectiveImm(n.group, n.sequence, k.index)] = TagOf(n); // the sum goes as it came
                }
            }
        }
        for (uint32_t r = 0; r < m_ranks; r++)
        {
            node->Qp(r);
        }
    }

    /// The runner's go: a server with no key is done at once.
    void Start(uint32_t, uint32_t, uint64_t, uint64_t, WriteTag, std::function<void()> done) override
    {
        if (m_mine == 0)
        {
            done();
        }
    }

    void OnRecv(RcQp*, uint64_t imm, MsgPtr data, uint32_t) override
    {
        MsgPtr sum = m_sums.Add(imm, data, m_ranks);
        if (!sum)
        {
            return;
        }
        for (uint32_t r = 0; r < m_ranks; r++)
        {
            m_node->Qp(r)->PostWrite(sum, 0, kGraphPsRkey, imm, m_tags.at(imm));
        }
        if (++m_served == m_mine)
        {
            m_node->ServeDone();
        }
    }

    void Report(nlohmann::json& out) const override
    {
        out[res::node::kKeysServed] = m_served;
    }

  private:
    const GraphSpec& m_spec;
    uint32_t m_ranks;
    uint64_t m_mine = 0;
    uint64_t m_served = 0;
    std::unordered_map<uint64_t, WriteTag> m_tags; // per key's immediate: what its sum's writes carry
    KeySums m_sums;
};

} // namespace

std::unique_ptr<Collective>
MakeGraphPsServer(JobNode* node)
{
    return std::make_unique<GraphPsServer>(node);
}

} // namespace gs
} // namespace ns3
