#include "mpi/p2p_calls.h"

#include <array>
#include <cstddef>

namespace deputy::mpi {
namespace {

struct P2pCallInfo {
    P2pCall call;
    const char *mpi_name;
};
constexpr std::array<P2pCallInfo, kP2pCallCount> kCalls{{
    {P2pCall::isend, "MPI_Isend"},
    {P2pCall::irecv, "MPI_Irecv"},
    {P2pCall::send, "MPI_Send"},
    {P2pCall::recv, "MPI_Recv"},
    {P2pCall::sendrecv, "MPI_Sendrecv"},
    {P2pCall::sendrecv_replace, "MPI_Sendrecv_replace"},
    {P2pCall::iprobe, "MPI_Iprobe"},
    {P2pCall::probe, "MPI_Probe"},
    {P2pCall::issend, "MPI_Issend"},
    {P2pCall::ssend, "MPI_Ssend"},
    {P2pCall::send_init, "MPI_Send_init"},
    {P2pCall::ssend_init, "MPI_Ssend_init"},
    {P2pCall::recv_init, "MPI_Recv_init"},
}};
constexpr bool in_order() {
    for (int i = 0; i < kP2pCallCount; ++i)
        if (int(kCalls[size_t(i)].call) != i) return false;
    return true;
}
static_assert(in_order(), "kCalls lists the calls in enum order");

}  // namespace

const char *p2p_call_name(P2pCall call) { return kCalls[size_t(call)].mpi_name; }

}  // namespace deputy::mpi
