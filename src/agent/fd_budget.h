// The agent's file descriptors. Each attached client holds about five in
// the agent (its socket, pidfd, segment, doorbell and shared heap), each
// team with a board one more, and forming a team opens a read-only view per
// member for the moment it is sent. Under the common soft limit of 1024 a
// few hundred of them fill the table; past it every accept(), memfd and
// SCM_RIGHTS fails. So the agent raises the soft limit to the hard one at
// start, and before it opens descriptors for a client or a team it checks
// that they fit with a reserve to spare, refusing with a reason that names
// the limit instead of failing half-way.
//
// A check is a comparison with an upper bound of the descriptors in use
// that the caller computes from its tables (what it held at start, 6 per
// client, 1 per board, 14 per remote session and 2 per handshake the gate
// may run); only when that bound comes near the limit are the
// descriptors counted from /proc/self/fd (tens of microseconds for a
// thousand), at attach and team formation only.
#pragma once

#include <cstdint>
#include <string>

namespace deputy::agent {

class FdBudget {
  public:
    // Kept free for what the agent opens without asking (an accept that
    // refuses, a log file, a pidfd): the checks below leave this much room.
    static constexpr uint64_t kReserve = 32;
    static constexpr uint64_t kPerClient = 5;
    // Bounds the caller's estimate: a client holds at most this many
    // (socket, pidfd, segment, doorbell, heap, and one passing through).
    static constexpr uint64_t kPerClientAtMost = 6;
    // A remote session (the gate's relay for a remote client or for a team
    // proxy's link) beyond the client session the service thread counts:
    // the relay's TCP socket and its end of the socket pair; for a team
    // proxy, the proxy's own side of its attach and, in memory mode rdma,
    // its libfabric endpoint (measured with the tcp provider: 18 fds per
    // remote rdma team, 10 per staged one, 5 per remote context). With room.
    static constexpr uint64_t kPerRemoteAtMost = 14;
    // A handshake in progress: its TCP socket and what its session holds.
    static constexpr uint64_t kPerHandshakeAtMost = 2;

    // Raises RLIMIT_NOFILE's soft limit to the hard one and remembers it,
    // and the descriptors open now (the agent's own); *note says what was
    // done (empty when nothing needed saying).
    void init(std::string *note);
    uint64_t at_start() const { return at_start_; }
    uint64_t limit() const { return limit_; }

    // Whether `more` descriptors can be opened and kReserve still be left.
    // `bound`: at least the descriptors open now (the caller's estimate).
    // *in_use: the descriptors open now (0 when the bound sufficed).
    bool room_for(uint64_t more, uint64_t bound, uint64_t *in_use) const;
    // The refusal's words: "the agent has N of its M file descriptors in use
    // (RLIMIT_NOFILE; raise `ulimit -n` for it)".
    std::string why_full(uint64_t in_use) const;

    // Descriptors open in this process now (UINT64_MAX when even counting
    // them needs one more than there is).
    static uint64_t count_open();

  private:
    uint64_t limit_ = UINT64_MAX;
    uint64_t at_start_ = 0;
};

}  // namespace deputy::agent
