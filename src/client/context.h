// The client's side of an attachment to the agent: the control connection
// (client/control_channel.h, shared by the context's threads), the segment
// (ring + pool) the agent passed, the doorbell, and knowing whether the
// agent is still there.
//
// Liveness without a thread: the agent's pid comes from SO_PEERCRED (the
// kernel's word, not the agent's) and is held as a pidfd, which becomes
// readable when that process exits, whatever killed it. Calls look at a flag
// (one load); at most every few milliseconds they also poll the pidfd, the
// segment's agent_state and the socket's hang-up, so a dead agent is noticed
// within lost_timeout_ms by any call, including a wait already in progress.
#pragma once

#include <deputy/context.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "channel/client_segment.h"
#include "channel/control.h"
#include "channel/relay.h"
#include "client/control_channel.h"
#include "client/pool_allocator.h"
#include "common/fd.h"
#include "common/segment.h"
#include "mover/work_queue.h"

namespace deputy::fabric {
class ExposedMemory;
}

namespace deputy::client {

// Adaptive waits (DP_WAIT_DEFAULT) first poll with pause for
// kAdaptivePollNs: a result already on its way costs no system call. Then
// they sleep, leaving the CPUs to the agent for as long as the operation
// takes. A wait for a collective of at most kYieldFirstMaxBytes polls with
// sched_yield in between, until kAdaptiveYieldNs have passed since the wait
// began: each turn gives the CPU to any thread that wants it (the agent's,
// a teammate), so unlike spinning it starves nobody, and a result that
// comes within the phase costs no sleep and no wake-up (20-40 us each on
// the 2-vCPU machine of docs/decisions/2026-11-27-waits-yield-first.md, "A
// waiting rank yields before it sleeps"). 4 MiB since members run
// operations up to 16 MiB themselves:
// a member that slept while its teammate arrived must be woken to do its
// part, which doubled the blocking calls of 256 KiB-1 MiB ("Waits yield up
// to 4 MiB"); above 4 MiB a wake-up is a small part of the operation and
// yielding measured no better. The CPU a wait burns is at most the yield
// phase's, and only when nobody else wants it. A process whose teammates
// share its CPUs (dp_config_t.cpu_shared: two ranks on one core) skips the
// pause: what it waits for may be a teammate's turn on its CPU, and the
// poll cost osu_latency 1.5 us a message with the agent on a core of its
// own (docs/decisions/2026-11-30-one-cpu-agent-threads.md).
inline constexpr int64_t kAdaptivePollNs = 2'000;
inline constexpr int64_t kAdaptiveYieldNs = 50'000;
inline constexpr uint64_t kYieldFirstMaxBytes = 4 << 20;

struct ClientOptions {
    std::string address;
    std::string token;
    std::string job_secret;  // empty: none (dp_team_create refuses)
    uint64_t pool_bytes = 0;
    uint32_t ring_size = 0;
    dp_memory_mode_t memory_mode = DP_MEMORY_DIRECT;
    dp_wq_mode_t wq_mode = DP_WQ_DEDICATED;
    dp_wait_mode_t wait_mode = DP_WAIT_SPIN;
    // The caller left the wait mode to us: poll briefly, then sleep on the
    // futex, so waiting ranks do not take the cores the agent works on.
    bool adaptive_wait = true;
    // How long an adaptive wait polls with pause before it yields: none
    // where teammates share this process's CPUs (dp_config_t.cpu_shared).
    int64_t adaptive_poll_ns = kAdaptivePollNs;
    int64_t lost_timeout_ns = 1'000'000'000;
    int64_t connect_timeout_ns = 1'000'000'000;
    // Whether this member, waiting for an operation the agent has not
    // started, runs it with its teammates (client/rank_execution.h).
    // $DEPUTY_RANK_EXECUTION=off: its teams leave every operation to the agent.
    bool rank_execution = true;
    // Whether dp_init shares the process's shared heap (include/deputy/heap.h)
    // in direct mode. Off for a team proxy inside the agent's own process,
    // which has no heap of its own to share and must not make one.
    bool share_heap = true;
    // DEPUTY_AGENT=tcp://HOST:PORT: an agent on another host, reached
    // through the secure session with $DEPUTY_KEY's key (or in clear with
    // $DEPUTY_INSECURE_TCP=1, warned about); staged or rdma memory only.
    bool remote = false;
    std::string key_file;
    std::string fabric_provider = "tcp";  // memory mode rdma
    bool insecure_tcp = false;
};

// From the public struct plus $DEPUTY_AGENT, $DEPUTY_TOKEN, $DEPUTY_MEMORY,
// $DEPUTY_JOB_SECRET, $DEPUTY_RANK_EXECUTION, $DEPUTY_KEY, $DEPUTY_INSECURE_TCP,
// $DEPUTY_FABRIC_PROVIDER.
dp_status_t options_from_config(const dp_config_t *config, ClientOptions *out);

// dp_malloc's pool with a remote agent, unless dp_config_t.pool_bytes says.
// It also holds the staged bounce blocks of every collective in flight (a
// 64 MiB allreduce needs 128 MiB), and the team proxy mirrors it on the
// agent's host; both are lazy: pages are committed only where used.
inline constexpr uint64_t kRemotePoolBytes = 256ull << 20;

class Context {
  public:
    static dp_status_t open(const ClientOptions &options, std::unique_ptr<Context> *out);
    ~Context();

    // One load while all is well; a real check at most every check_period_ns().
    dp_status_t check_alive() {
        if (lost_.load(std::memory_order_relaxed)) return DP_ERR_AGENT_LOST;
        return check_alive_slow(false);
    }
    // Checks now, whatever the period (waits call it between sleeps).
    dp_status_t check_alive_now() { return check_alive_slow(true); }
    // How often calls look for a dead agent: a quarter of the lost timeout.
    uint64_t check_period_ns() const {
        return uint64_t(std::max<int64_t>(options_.lost_timeout_ns / 4, 1'000'000));
    }

    // One request answered in order (REPLY, STAGED_RESULT); the answer
    // must come within max(lost timeout, 1 s). Threads may ask at once.
    dp_status_t request(channel::MsgType type, const std::vector<uint8_t> &payload,
                        channel::MsgType *answer_type, std::vector<uint8_t> *answer,
                        int attach_fd = -1);
    // A team join: its TEAM_READY within timeout_ns (the team's own timeout
    // and a margin). Other threads' joins and requests go on meanwhile.
    dp_status_t join_team(const channel::control::TeamJoin &m, channel::control::TeamReady *ready,
                          std::vector<Segment> *segments, int64_t timeout_ns);
    // Pushes a descriptor into this process's ring and rings the doorbell if
    // the agent sleeps. retry_when_full: wait for room (the agent drains the
    // ring) instead of returning DP_ERR_RETRY.
    [[gnu::hot]] dp_status_t push(const dp_desc_t &desc, bool retry_when_full);
    // Waits for a record the agent completes, in slices, noticing a dead agent.
    // yield_first: the adaptive wait's yield phase (above) before it sleeps.
    dp_status_t wait_record(dp_completion_t *record, dp_wait_mode_t mode, int64_t timeout_ns,
                            bool yield_first = false);
    // A request answered by REPLY: its status (the reason is logged). A
    // busy agent (DP_ERR_RETRY) is asked again for up to busy_budget_ns().
    dp_status_t simple_request(channel::MsgType type, const std::vector<uint8_t> &payload,
                               const char *what, int attach_fd = -1);

    [[gnu::hot]] void ring_doorbell_if_sleeping();

    const ClientOptions &options() const { return options_; }
    const channel::control::Attached &attached() const { return attached_; }
    mover::WorkQueue &ring() { return ring_; }
    PoolAllocator &pool() { return pool_; }
    // The agent maps the process's shared heap (include/deputy/heap.h):
    // buffers in it are reached in place, like the pool's.
    bool heap_shared() const { return heap_shared_; }
    // [p, +bytes) is reached by the agent in place: the pool or the heap.
    bool mapped(const void *p, size_t bytes) const;
    pid_t agent_pid() const { return agent_pid_; }
    bool remote() const { return options_.remote; }
    std::atomic<uint64_t> &submitted() { return submitted_; }
    std::atomic<int> &open_movers() { return open_movers_; }

    // A remote context's link to a team proxy (proxy/team_proxy.h): its own
    // secure session to the agent, behind a relay of its own, attached for
    // purpose kTeamProxy. *socket is the relay's local end.
    dp_status_t open_proxy_link(UniqueFd *socket, std::unique_ptr<channel::Relay> *relay,
                                const char *what) const;

    // Memory mode rdma: this context's RMA endpoint (fabric/exposed_memory.h)
    // on the interface towards `peer_host`, made by its first team and
    // shared by all of them: one endpoint and one progress thread per
    // context, not per team. Throws fabric::FabricError.
    std::shared_ptr<fabric::ExposedMemory> exposed_memory(const std::string &peer_host);

    // How long a request the agent answers "busy, try again" is retried.
    int64_t busy_budget_ns() const {
        return std::max<int64_t>(options_.lost_timeout_ns, 5'000'000'000);
    }

  private:
    Context() = default;
    dp_status_t attach();
    // The secure session (or plain TCP) to a remote agent, behind a relay
    // whose local socket the control channel then uses (channel/relay.h).
    dp_status_t connect_remote(UniqueFd *socket, std::unique_ptr<channel::Relay> *relay) const;
    void start_control(UniqueFd socket);
    void share_heap();
    dp_status_t check_alive_slow(bool force);
    dp_status_t mark_lost(const char *why);

    ClientOptions options_;
    std::unique_ptr<channel::Relay> relay_;  // a remote agent's link; outlives control_
    ControlChannel control_;
    UniqueFd doorbell_;
    UniqueFd agent_pidfd_;
    pid_t agent_pid_ = 0;
    Segment segment_;
    // Random bytes the agent may read back at attach to prove our pid is us
    // (agent/client_process.h); kept at this address for the context's life.
    std::array<uint8_t, channel::control::kIdentityProofBytes> identity_proof_{};
    channel::ClientSegmentHeader *header_ = nullptr;
    channel::control::Attached attached_;
    mover::WorkQueue ring_;
    PoolAllocator pool_;
    bool heap_shared_ = false;
    std::atomic<bool> lost_{false};
    std::atomic<uint64_t> next_check_ns_{0};
    std::atomic<uint64_t> submitted_{0};
    std::atomic<int> open_movers_{0};
    std::mutex exposed_mu_;
    std::shared_ptr<fabric::ExposedMemory> exposed_;  // under exposed_mu_
};

}  // namespace deputy::client
