// Constants shared with the switch program and the Python hosts: gradswitch/p4src/include/config.p4 is the one
// definition (a file of `#define NAME VALUE` lines), included here as it is. Sizes of headers on the
// wire come with each run's configuration from Python (gradswitch/roce/wire.py), not from here.
#ifndef GS_CONSTANTS_H
#define GS_CONSTANTS_H

#include "config.p4"

#include <cstdint>

namespace ns3
{
namespace gs
{

constexpr uint32_t kPriorities = PRIORITY_QUEUES;
constexpr uint32_t kAckPriority = DLCP_ACK_PRIORITY;
constexpr uint32_t kAggElements = AGG_ELEMENTS_PER_PACKET;
constexpr uint32_t kAggPackets = AGG_PACKETS_PER_MESSAGE;
constexpr uint32_t kAggPacketsLog2 = AGG_PACKETS_PER_MESSAGE_LOG2;
constexpr uint32_t kAggMessageBytesLog2 = AGG_MESSAGE_BYTES_LOG2;
constexpr uint32_t kAggMessageBytes = 1u << AGG_MESSAGE_BYTES_LOG2;
constexpr uint32_t kAggPacketBytes = AGG_ELEMENTS_PER_PACKET * 4;
constexpr uint32_t kRoceUdpPort = ROCE_V2_UDP_PORT;
constexpr uint32_t kOwnerVaShift = NR_OWNER_VA_SHIFT; // a message's owner field: RETH.va >> this (0: all-reduce)
constexpr uint32_t kMaxCredits = AGG_MAX_CREDITS;
constexpr uint8_t kDroppable = 1u << DLCP_DROPPABLE_SHIFT;
constexpr uint8_t kTrimmed = 1u << DLCP_TRIMMED_SHIFT;
constexpr uint32_t kLayerShift = DLCP_LAYER_SHIFT;
constexpr uint32_t kLayerClasses = DLCP_LAYER_CLASSES;
constexpr uint32_t kMagnitudeShift = DLCP_MAGNITUDE_SHIFT;
constexpr uint32_t kMagnitudeClasses = DLCP_MAGNITUDE_CLASSES;
constexpr uint32_t kRoceClassPriority = ROCE_CLASS_PRIORITY;
constexpr uint32_t kSourcePortBase = 0xC000;  // gradswitch/protocol/qpn.py SOURCE_PORT_BASE
constexpr uint32_t kSourcePortBits = 14;      // gradswitch/protocol/qpn.py SOURCE_PORT_BITS

static_assert(kAggMessageBytes == kAggPackets * kAggPacketBytes, "config.p4: message size");
static_assert((1u << kAggPacketsLog2) == kAggPackets, "config.p4: AGG_PACKETS_PER_MESSAGE_LOG2");
static_assert((1u << (kOwnerVaShift - kAggMessageBytesLog2)) >= 2 * kMaxCredits,
              "config.p4: NR_OWNER_VA_SHIFT leaves no room for a window of 2 x AGG_MAX_CREDITS messages");

/// UDP source port of a QP's packets (gradswitch/protocol/qpn.py udp_source_port): one per (job, local node), as the
/// QP number job << 16 | local << 8 | remote gives it; node ids above 255 wrap into it (the address tells
/// those flows apart in the ECMP hash).
inline uint16_t
UdpSourcePort(uint32_t job, uint32_t localNode)
{
    uint32_t qpnAbove = (job << (QPN_JOB_SHIFT - QPN_NODE_SHIFT)) | (localNode & 0xFF);
    return static_cast<uint16_t>(kSourcePortBase | (qpnAbove & ((1u << kSourcePortBits) - 1)));
}

} // namespace gs
} // namespace ns3

#endif
