#include "gs-header.h"

namespace ns3
{
namespace gs
{

NS_OBJECT_ENSURE_REGISTERED(GsHeader);

TypeId
GsHeader::GetTypeId()
{
    static TypeId tid = TypeId("ns3::gs::GsHeader").SetParent<Header>().SetGroupName("Gradswitch").AddConstructor<GsHeader>();
    return tid;
}

TypeId
GsHeader::GetInstanceTypeId() const
{
    return GetTypeId();
}

uint32_t
GsHeader::GetSerializedSize() const
{
    return sizeof(Wire);
}

void
GsHeader::Serialize(Buffer::Iterator start) const
{
    start.Write(reinterpret_cast<const uint8_t*>(&w), sizeof(Wire));
}

uint32_t
GsHeader::Deserialize(Buffer::Iterator start)
{
    start.Read(reinterpret_cast<uint8_t*>(&w), sizeof(Wire));
    return sizeof(Wire);
}

void
GsHeader::Print(std::ostream& os) const
{
    os << "kind=" << unsigned(w.kind) << " op=" << unsigned(w.opcode) << " job=" << w.job << " " << w.src << "->"
       << w.dst << " qp " << w.srcNode << "->" << w.dstNode << " psn=" << w.psn << " payload=" << w.payload
       << " wire=" << w.wire;
}

} // namespace gs
} // namespace ns3
