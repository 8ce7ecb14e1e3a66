// The agent: a daemon that hosts a mover device for the processes of one
// user (and, later, runs their collectives). One service thread does
// everything except moving bytes: it accepts and authenticates clients,
// answers their control requests, polls their rings and hands descriptors to
// the engines (the device's threads), runs direct and staged descriptors
// through bounce buffers, and cleans up after clients that leave or die.
// Being the only thread that touches client state keeps that state lock-free
// and makes cleanup simple: nothing of a client is in use while the service
// thread tears it down, except descriptors already with the engines, which a
// DRAIN on the client's queue waits out first.
//
// The thread polls the rings while there is work and for idle_spin_us after,
// then sets agent_sleeping in every client's segment and sleeps in
// epoll_wait on the sockets and the clients' doorbell eventfds.
#pragma once

#include <deputy/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/agent_config.h"
#include "agent/client_session.h"
#include "agent/team_engine.h"
#include "channel/control.h"
#include "channel/transport/uds/transport.h"
#include "common/fd.h"
#include "mover/device.h"

namespace deputy::agent {

struct AgentCounters {
    uint64_t connections = 0;
    uint64_t refused = 0;    // wrong uid, wrong token, too many clients, bad ATTACH
    uint64_t attached = 0;
    uint64_t detached = 0;   // left or died, cleaned up
    uint64_t info_requests = 0;
    uint64_t services = 0;   // connections handed to the service handler
    uint64_t forwarded = 0;
    uint64_t direct = 0;
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

    const std::string &address() const { return address_; }
    const AgentConfig &config() const { return config_; }

  private:
    Agent() = default;

    bool poll_rings();
    void set_sleeping(bool sleeping);
    bool any_ring_nonempty() const;
    void accept_clients();
    void on_client_event(uint32_t id);
    void on_doorbell(uint32_t id);
    dp_status_t handle_attach(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t handle_register(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t handle_deregister(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t handle_staged(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t handle_team_join(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t handle_team_leave(ClientSession &s, const std::vector<uint8_t> &payload);
    dp_status_t reply(ClientSession &s, dp_status_t status, const std::string &reason);
    bool needs_direct(const ClientSession &s, const dp_desc_t &d) const;
    void run_direct(ClientSession &s, const dp_desc_t &d);
    void drop_client(uint32_t id, const std::string &why, bool error);
    void drain_queue(uint32_t wq);
    std::string info_json() const;
    void rebuild_attached();

    AgentConfig config_;
    std::string address_;
    std::unique_ptr<channel::uds::Listener> listener_;
    std::unique_ptr<mover::Device> device_;
    mover::ExecLimits limits_{};
    UniqueFd epoll_;
    UniqueFd stop_event_;
    std::atomic<bool> stopping_{false};
    uint32_t next_id_ = 1;
    std::unordered_map<uint32_t, std::unique_ptr<ClientSession>> clients_;
    std::vector<ClientSession *> attached_;  // ring polling order
    bool sleeping_ = false;
    uint64_t started_ns_ = 0;
    AgentCounters counters_;
    ServiceHandler service_handler_;
    std::unique_ptr<TeamEngine> teams_;
};

}  // namespace deputy::agent
