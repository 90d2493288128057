"""bench.ns3_profile's reading of `perf report`: each function's samples and the category it counts toward."""

from __future__ import annotations

import pytest

from bench.ns3_profile import CATEGORIES, category, parse_report

# `perf report --no-children -F sample,dso,sym -q -t TAB` as perf 6.1 prints it (columns padded with blanks).
REPORT = "\n".join([
    " 655        \tlibns3.44-core.so   \t[.] ns3::PriorityQueueScheduler::RemoveNext",
    " 165        \tlibns3.44-core.so   \t[.] ns3::DefaultSimulatorImpl::ProcessOneEvent",
    " 98         \tgradswitch-sim      \t[.] ns3::gs::GsSwitch::Route",
    " 80         \tgradswitch-sim      \t[.] ns3::gs::PacketEvent<ns3::gs::GsDevice, &ns3::gs::GsDevice::Deliver>"
    "::Notify",
    " 73         \tgradswitch-sim      \t[.] ns3::gs::RcQp::Build",
    " 50         \tlibc.so.6           \t[.] _int_malloc",
    " 40         \tlibc.so.6           \t[.] __memmove_avx512_unaligned_erms",
    " 30         \tlibns3.44-network.so\t[.] ns3::Buffer::CheckInternalState",
    " 15         \tgradswitch-sim      \t[.] ns3::gs::(anonymous namespace)::Ring::Advance",
    " 10         \tlibm.so.6           \t[.] __llround",
    "",
    "# a comment line perf may print",
])


def test_samples_and_shares_come_from_the_report():
    functions = parse_report(REPORT)
    assert [f.samples for f in functions] == [655, 165, 98, 80, 73, 50, 40, 30, 15, 10]
    assert sum(f.samples for f in functions) == 1216
    assert functions[0].share == pytest.approx(655 / 1216)
    assert functions[0].dso == "libns3.44-core.so"
    assert functions[0].symbol == "ns3::PriorityQueueScheduler::RemoveNext"


@pytest.mark.parametrize(("dso", "symbol", "expected"), [
    ("libns3.44-core.so", "ns3::PriorityQueueScheduler::RemoveNext", "ns-3 event list"),
    ("gradswitch-sim", "ns3::gs::Pooled<ns3::gs::CallEvent<ns3::gs::RcQp, &ns3::gs::RcQp::Timeout> >::operator new",
     "ns-3 event list"),
    ("libns3.44-network.so", "ns3::Packet::AddHeader", "ns-3 packets and headers"),
    ("gradswitch-sim", "ns3::gs::GsHeader::Deserialize", "ns-3 packets and headers"),
    ("libc.so.6", "cfree@GLIBC_2.2.5", "malloc and free"),
    ("libc.so.6", "__memmove_avx512_unaligned_erms", "memory copy"),
    ("libns3.44-core.so", "ns3::LogComponent::IsEnabled", "ns-3 logging checks"),
    ("gradswitch-sim", "ns3::gs::NrSwitchJob::Aggregate", "switches: route, hash, NetReduce"),
    ("gradswitch-sim",
     "std::deque<ns3::gs::GsDevice::Item, std::allocator<ns3::gs::GsDevice::Item> >::_M_push_back_aux",
     "links and ports: queues, transmission"),
    ("gradswitch-sim", "ns3::gs::GsHost::FindQp", "hosts: NIC and RC transport"),
    ("gradswitch-sim", "ns3::gs::(anonymous namespace)::Ring::Advance", "algorithms and training"),
    ("gradswitch-sim", "ns3::gs::TrainingScheduler::Pump", "algorithms and training"),
    # the graph engine's ranks (the benchmark's runs are execution graphs: gs-graph-rank.cc and its parts)
    ("gradswitch-sim", "ns3::gs::GraphRank::OnRecv", "algorithms and training"),
    ("gradswitch-sim", "std::_Function_handler<void (unsigned int), ns3::gs::GraphRank::RunRing(ns3::gs::GraphNode "
     "const&, std::function<void (bool)>)::{lambda(unsigned int)#1}>::_M_invoke", "algorithms and training"),
    ("gradswitch-sim", "ns3::gs::GraphData::Holds", "algorithms and training"),
    ("gradswitch-sim", "ns3::gs::(anonymous namespace)::GraphPsServer::OnRecv", "algorithms and training"),
    ("gradswitch-sim", "ns3::gs::KeySums::Add", "algorithms and training"),
    ("gradswitch-sim", "ns3::gs::TcpBackground::SenderEndpoint::Send", "background TCP"),
    ("libns3.44-core.so", "ns3::TypeId::LookupByName", "ns-3's other code"),
    ("libm.so.6", "__llround", "other"),
])
def test_each_function_counts_toward_its_category(dso, symbol, expected):
    assert category(dso, symbol) == expected


def test_every_category_has_a_name_of_its_own():
    names = [name for name, _ in CATEGORIES]
    assert len(set(names)) == len(names) and "other" not in names
