// The point-to-point calls libdeputy-mpi offloads (DEPUTY_MPI_P2P=1): the
// one list, for the report and the errors. Unlike the collectives'
// (operations.h) they have no threshold: MPI orders the messages of a
// communicator, so once its point-to-point goes to deputy all of it must
// (intercept_p2p.cc).
#pragma once

#include <cstdint>

namespace deputy::mpi {

enum class P2pCall : uint8_t {
    isend,
    irecv,
    send,
    recv,
    sendrecv,
    sendrecv_replace,
    iprobe,
    probe,
    issend,
    ssend,
    // Persistent requests (persistent_requests.h): counted once per
    // MPI_Start / MPI_Startall of a request they made. MPI_Rsend_init's
    // count as MPI_Send_init's (a ready send is a standard one).
    send_init,
    ssend_init,
    recv_init,
};
inline constexpr int kP2pCallCount = 13;

const char *p2p_call_name(P2pCall call);  // "MPI_Isend", as the report prints it

}  // namespace deputy::mpi
