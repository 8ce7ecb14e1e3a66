// The agent: a daemon that hosts a mover device for the processes of one
// user and runs their collectives. One service thread does everything but
// move bytes: it accepts and authenticates clients, answers their control
// requests, polls their rings and hands descriptors to the engines (the
// device's threads, which run every descriptor, mapped, direct or staged),
// and cleans up after clients that leave or die.
//
// The service thread never waits on a client: sockets are non-blocking
// with per-client buffers (control_connection.h); a client that trickles a
// message, does not read its answers or never attaches is dropped after a
// bound; limits per client (registrations, teams, pool) and for the whole
// agent (connections, clients, pools, forming teams) keep one client from
// exhausting what the others need. A client that leaves never makes it
// wait either: its address space is retired on the device (queued work is
// dropped) and its memory freed once no engine and no collective uses it.
//
// The thread polls the rings while there is work and for idle_spin_us after,
// then sets agent_sleeping in every client's segment and sleeps in
// epoll_wait on the sockets, the clients' doorbell eventfds and pidfds.
#pragma once

#include <deputy/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/agent_config.h"
#include "agent/client_session.h"
#include "agent/fd_budget.h"
#include "agent/memory_probe.h"
#include "agent/pool_populator.h"
#include "agent/remote_gate.h"
#include "agent/staged_execution.h"
#include "agent/team/engine.h"
#include "channel/control.h"
#include "channel/transport/uds/transport.h"
#include "common/fd.h"
#include "common/topology.h"
#include "common/log_limiter.h"
#include "mover/device.h"

namespace deputy::agent {

struct AgentCounters {
    uint64_t connections = 0;
    uint64_t refused = 0;    // wrong uid, wrong token, too many clients, bad ATTACH
    uint64_t attached = 0;
    uint64_t detached = 0;   // left or died, cleaned up
    uint64_t dropped = 0;    // of which dropped for misbehaving (timeouts, protocol)
    uint64_t info_requests = 0;
    uint64_t services = 0;   // connections handed to the service handler
    uint64_t team_proxies = 0;  // remote connections handed to the proxy handler
    uint64_t forwarded = 0;
    uint64_t staged = 0;
    uint64_t denied = 0;
};

class Agent {
  public:
    // Checks the config, prepares the socket directory (0700), listens and
    // starts the engines. On error *error says what and which path or key.
    // With `internode` (owned by the caller, outliving the agent), teams may
    // span the nodes of several agents.
    static dp_status_t create(AgentConfig config, std::unique_ptr<Agent> *out, std::string *error,
                              Internode *internode = nullptr);
    ~Agent();
    Agent(const Agent &) = delete;
    Agent &operator=(const Agent &) = delete;

    // Serves until stop(); then tells every client the agent is stopping,
    // drains and frees everything. Call from one thread.
    dp_status_t run();
    // Async-signal-safe: a SIGTERM handler may call it.
    void stop();

    // Connections that ask for purpose "service" (after authentication) are
    // handed to this function with their socket, on the service thread: it
    // must return at once (start a thread). Without a handler they are refused.
    using ServiceHandler =
        std::function<void(UniqueFd socket, const channel::sock::PeerCredentials &peer)>;
    void set_service_handler(ServiceHandler handler) { service_handler_ = std::move(handler); }
    // Remote connections that ask for purpose "team proxy" are handed to
    // this one likewise (proxy/team_proxy.h); without it they are refused.
    using ProxyHandler = std::function<void(UniqueFd socket, const std::string &peer)>;
    void set_proxy_handler(ProxyHandler handler) { proxy_handler_ = std::move(handler); }

    const std::string &address() const { return address_; }
    const AgentConfig &config() const { return config_; }

  private:
    Agent() = default;

    // epoll tags: kind in the high half, client id in the low half.
    enum Tag : uint64_t {
        kListen = 1,
        kStop = 2,
        kClientSocket = 3,
        kClientDoorbell = 4,
        kInternode = 5,
        kClientProcess = 6,
        kPopulated = 7,
        kProbed = 8,
        kRemoteGate = 9,
    };
    static uint64_t tag(Tag kind, uint32_t id = 0) { return (uint64_t(kind) << 32) | id; }

    // Event loop (agent.cc).
    bool any_pending() const;
    // A client's descriptor held back for less than kPendingSpinNs: the
    // engines free room soon, so the loop keeps looking. One held longer
    // (its client's memory holds an engine) is looked at every millisecond
    // instead, so a stuck client does not keep the service thread spinning.
    static bool pending_soon(const ClientSession &s, uint64_t now_ns) {
        return s.pending && now_ns - s.pending_since_ns < kPendingSpinNs;
    }
    static constexpr uint64_t kPendingSpinNs = 10'000'000;
    void housekeeping();
    int sleep_timeout_ms() const;
    // Rings to engines (ring_service.cc).
    bool poll_rings();
    // Before a member's leave: its team posts still in its ring.
    void take_team_posts(ClientSession &s);
    void set_sleeping(bool sleeping);
    bool any_ring_nonempty() const;
    void on_doorbell(uint32_t id);
    void rebuild_attached();
    // Clients arriving and leaving (client_admission.cc).
    void accept_clients();
    // Connections the remote gate authenticated (remote_gate.h), as sessions.
    void admit_remote();
    // accept() found no descriptor: takes one connection with the reserve
    // and refuses it with the reason. False when there was none to take.
    bool refuse_without_fds();
    // At least the descriptors the agent holds now (fd_budget.h).
    uint64_t fds_bound() const;
    bool room_for_fds(uint64_t more, uint64_t *in_use) const {
        return fds_.room_for(more, fds_bound(), in_use);
    }
    void set_listening(bool on);
    void drop_client(uint32_t id, const std::string &why, bool misbehaved);
    void reap_retired();
    // `deputy info` (agent_info.cc).
    std::string info_json() const;
    // Where the agent's threads run (agent_placement.cc): the calling
    // thread (the service thread, and every thread it starts afterwards) on
    // the layout's CPUs; the line the agent logs when it starts; `deputy
    // info`'s "placement" section and each client's CPUs.
    void pin_service_thread();
    std::string placement_line() const;
    void placement_info(nlohmann::json *out) const;
    // Client control (client_control.cc; handle_staged in staged_execution.cc).
    void on_client_event(uint32_t id, uint32_t events);
    // Answers the requests waiting in the inbox (false: the client was
    // dropped), then clears the stack below if one held a job's secret.
    bool serve_inbox(ClientSession &s);
    bool serve_requests(ClientSession &s);
    void send(ClientSession &s, channel::MsgType type, const std::vector<uint8_t> &payload,
              const int *fds = nullptr, size_t nfds = 0);
    void update_epoll(ClientSession &s);
    dp_status_t handle_attach(ClientSession &s, const std::vector<uint8_t> &payload);
    // Answers an ATTACH with a refusal and ends the connection once it is
    // out (returns the status that does so).
    dp_status_t refuse_attach(ClientSession &s, dp_status_t status, const std::string &why);
    // ATTACH once the process behind the connection is known (or cannot
    // be, and direct memory is refused): limits, the segment, the answer.
    dp_status_t attach_proven(ClientSession &s, const channel::control::Attach &m);
    void finish_identity(ClientSession &s, const MemoryProbes::Result &r);
    void finish_attach(ClientSession &s);
    void on_populated();
    dp_status_t handle_register(ClientSession &s, const std::vector<uint8_t> &payload);
    void on_probed();  // REGISTER probes done: ranges added, answers sent
    dp_status_t handle_deregister(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t handle_heap_share(ClientSession &s, const std::vector<uint8_t> &payload, UniqueFd fd);
    dp_status_t handle_staged(ClientSession &s, const std::vector<uint8_t> &payload);
    // Staged jobs on the engines (staged_execution.cc): submitted (false:
    // the device queue is full), then answered once done, in the loop.
    bool submit_staged(StagedJob &job);
    bool serve_staged();  // true when a job went to the engines or was answered
    void finish_staged(const StagedJob &job);
    // Sleeps until the first staged job in flight is done or timeout_ns
    // passes; false when there is none (true at once when one needs the loop).
    bool wait_for_staged(int64_t timeout_ns);
    dp_status_t handle_team_join(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t handle_team_leave(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t reply(ClientSession &s, dp_status_t status, const std::string &reason);

    // A client gone whose memory may still be in use by an engine.
    struct Retiring {
        uint32_t pasid = 0;
        std::shared_ptr<ClientMemory> memory;
    };

    AgentConfig config_;
    std::string address_;
    std::unique_ptr<channel::uds::Listener> listener_;
    std::unique_ptr<RemoteGate> gate_;  // with config_.listen
    std::unique_ptr<mover::Device> device_;
    mover::ExecLimits limits_{};
    UniqueFd epoll_;
    UniqueFd stop_event_;
    std::atomic<bool> stopping_{false};
    uint32_t next_id_ = 1;
    std::unordered_map<uint32_t, std::unique_ptr<ClientSession>> clients_;
    std::vector<ClientSession *> attached_;  // ring polling order
    uint32_t connecting_ = 0;                // sessions not attached yet
    uint64_t total_pool_bytes_ = 0;          // pools of attached clients
    std::vector<Retiring> retiring_;
    bool sleeping_ = false;
    uint64_t started_ns_ = 0;
    pid_t service_tid_ = 0;  // the thread in run()
    Topology topology_;      // this machine, for `deputy info`
    uint64_t next_housekeeping_ns_ = 0;
    uint64_t unused_since_ns_ = 0;  // when the last client went (or the agent started)
    AgentCounters counters_;
    // Warnings about connections that never attached (anyone of our uid
    // can open them): rate-limited together.
    LogLimiter connection_log_{"agent: connections"};
    // File descriptors (fd_budget.h), and one kept open to give back when
    // accept() finds none: the connection is then taken and refused with
    // the reason, rather than left queued with the socket readable (which
    // would wake the service thread for ever).
    FdBudget fds_;
    UniqueFd reserve_fd_;
    bool listening_ = true;           // the listen socket is in epoll
    bool secret_on_stack_ = false;    // a join was read: clear the stack (client_control.cc)
    LogLimiter fd_log_{"agent: file descriptors"};
    ServiceHandler service_handler_;
    ProxyHandler proxy_handler_;
    std::unique_ptr<TeamEngine> teams_;
    std::unique_ptr<PoolPopulator> populator_;
    MemoryProbes probes_;  // REGISTER's reads of client memory (memory_probe.h)
    // The agent's own address space for staged jobs (staged_execution.h),
    // and the jobs not answered yet, in the order they came (at most one a
    // client). A job outlives its client: the engine may still run it.
    StagedSpace staged_space_;
    uint32_t staged_pasid_ = 0;
    std::vector<std::unique_ptr<StagedJob>> staged_jobs_;
};

}  // namespace deputy::agent
