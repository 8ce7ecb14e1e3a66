// The node thread's private state of MpiInternode (commands, teams, running
// operations), shared by mpi_internode.cc, mpi_membership.cc and
// mpi_operations.cc; internal to src/agent/mpi.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "agent/mpi/mpi_internode.h"
#include "coll/schedule.h"
#include "coll/transport/mpi/schedule_runner.h"

namespace deputy::agent {

// MPI's text for an error code.
inline std::string mpi_error(int code) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, text, &len);
    return std::string(text, size_t(std::max(len, 0)));
}

// The fields every node must agree on, as bytes for an allgather.
struct Header {
    uint64_t count, root;
    uint8_t opcode, dtype, redop, pad[5];
};
static_assert(sizeof(Header) == 24);

struct MpiInternode::Command {
    enum class Kind { join, broken, start, p2p_head, p2p_data_send, p2p_data_receive } kind =
        Kind::join;
    std::string key;
    uint32_t rank = 0, size = 0, timeout_ms = 0;
    uint64_t uid = 0;
    uint64_t from_sequence = 0;  // broken
    std::string why;
    InterOp op;
    // p2p_*: the peer node, the data slot, a head's bytes or a data
    // send's or receive's (`data`), the event's id (uid).
    uint32_t node = 0, slot = 0;
    std::shared_ptr<std::vector<uint8_t>> bytes;
    P2pBytes data;
};

// Point-to-point between agents (mpi_p2p.cc): a send in flight (one MPI
// request per piece of at most kP2pPieceBytes), its buffer kept until done;
struct MpiInternode::P2pSend {
    std::vector<MPI_Request> requests;
    std::shared_ptr<std::vector<uint8_t>> head;  // a head (and an eager message's bytes)
    P2pBytes data;                                 // or a rendezvous message's bytes
    uint64_t sent_id = 0;                          // its p2p_sent event (0: none)
    uint32_t node = 0;
};
// a rendezvous message's data being received.
struct MpiInternode::P2pReceive {
    std::vector<MPI_Request> requests;
    std::vector<size_t> piece_bytes;
    P2pBytes into;
    uint64_t id = 0;
    uint32_t node = 0, slot = 0;
    bool short_piece = false;
    // Its node was lost at this time: its requests are cancelled, and it is
    // answered once MPI let go of them (mpi_heartbeat.cc).
    uint64_t lost_ns = 0;
    std::string lost_why;
};
// A piece of a lost node's rendezvous data whose receive was cancelled:
// should the node only have been slow, its bytes still come on that slot
// and land here, in memory of its own, so that its agent's send completes
// and a later receive on the slot gets its own bytes (MPI matches the
// receives of one tag in the order they were posted).
struct MpiInternode::P2pDrain {
    MPI_Request request = MPI_REQUEST_NULL;
    void *sink = nullptr;  // mmap()ed: pages cost only once written
    size_t bytes = 0;
};

struct MpiInternode::Running {
    InterOp op;
    enum class Phase { header, header_wait, data, data_wait } phase = Phase::header;
    MPI_Request request = MPI_REQUEST_NULL;
    Header mine{};
    std::vector<uint8_t> fused;  // the check: every node's slot, then this node's
    std::vector<int> counts, displs, send_counts, send_displs;
    uint64_t deadline_ns = 0;
    std::string algorithm = "mpi-native";
    std::unique_ptr<coll::Schedule> schedule;  // point-to-point allreduce
    std::unique_ptr<coll::mpi::ScheduleRunner> runner;
    std::string error;
    bool all_posted() const { return phase == Phase::data_wait; }
};

struct MpiInternode::TeamComm {
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<uint32_t> nodes;  // ascending node ids
    uint32_t index = 0;           // this node's place in `nodes`
    std::list<Running> ops;
    uint64_t schedules_posted = 0;
    size_t schedules_in_flight = 0;
    // Broken: operations from dead_from on fail (those before it run on).
    uint64_t dead_from = UINT64_MAX;
    std::string dead_reason;
    bool dead_for(uint64_t sequence) const { return sequence >= dead_from; }
    uint64_t mismatched_sequence = UINT64_MAX;
};

struct MpiInternode::Forming {
    uint32_t size = 0;
    std::vector<uint32_t> node_of_rank;  // UINT32_MAX: not joined
    // Ranks joined so far: a join costs O(1), not a scan of the map (a
    // team of n ranks formed in O(n), not O(n^2)).
    uint32_t joined = 0;
    uint64_t deadline_ns = 0;
    uint32_t timeout_ms = 0;
};

}  // namespace deputy::agent
