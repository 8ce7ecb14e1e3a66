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
// Where the limit is generous (at least kGenerous) nothing is counted: a
// check is a comparison. Below it, the descriptors in use are counted from
// /proc/self/fd (tens of microseconds for a thousand), at attach, heap
// share and team formation only.
#pragma once

#include <cstdint>
#include <string>

namespace deputy::agent {

class FdBudget {
  public:
    static constexpr uint64_t kGenerous = 1u << 16;
    // Kept free for what the agent opens without asking (an accept that
    // refuses, a log file, a pidfd): the checks below leave this much room.
    static constexpr uint64_t kReserve = 32;
    static constexpr uint64_t kPerClient = 5;

    // Raises RLIMIT_NOFILE's soft limit to the hard one and remembers it;
    // *note says what was done (empty when nothing needed saying).
    void init(std::string *note);
    uint64_t limit() const { return limit_; }

    // Whether `more` descriptors can be opened and kReserve still be left.
    // *in_use: the descriptors open now (0 when the limit is generous).
    bool room_for(uint64_t more, uint64_t *in_use) const;
    // The refusal's words: "the agent has N of its M file descriptors in use
    // (RLIMIT_NOFILE; raise `ulimit -n` for it)".
    std::string why_full(uint64_t in_use) const;

    // Descriptors open in this process now (UINT64_MAX when even counting
    // them needs one more than there is).
    static uint64_t count_open();

  private:
    uint64_t limit_ = kGenerous;
};

}  // namespace deputy::agent
