// One client as the agent sees it: its control connection and verified
// process, and once attached its memory (shared with the engines and any
// collective over its buffers), ring, doorbell and address space on the
// mover device, plus its counters and the limits it is held to.
#pragma once

#include <deputy/mover.h>
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "agent/client_process.h"
#include "agent/client_ring.h"
#include "agent/client_space.h"
#include "agent/control_connection.h"
#include "channel/control.h"
#include "channel/client_segment.h"
#include "channel/socket_io.h"
#include "common/fd.h"

namespace deputy::agent {

struct ClientCounters {
    uint64_t forwarded = 0;   // descriptors handed to the engines
    uint64_t direct = 0;      // of which touched registered (direct) memory
    uint64_t staged = 0;      // staged descriptors
    uint64_t denied = 0;      // descriptors or requests refused for an address range
    uint64_t requests = 0;    // control messages served
};

struct ClientSession {
    // kPopulating: ATTACH accepted, the pool being faulted in (PoolPopulator);
    // ATTACHED is sent when it is done.
    enum class State { kConnecting, kPopulating, kAttached };

    uint32_t id = 0;
    State state = State::kConnecting;
    ControlConnection connection;
    uint32_t epoll_events = 0;  // what the socket is registered for now
    std::deque<ControlConnection::Frame> inbox;
    channel::sock::PeerCredentials creds;  // a remote client's: none (pid 0)
    std::shared_ptr<ClientProcess> process;
    // Reached over the network (remote_gate.h): no process, no shared
    // memory; its mover requests come staged. `peer` is its address.
    bool remote = false;
    std::string peer;
    // "pid 1234" or "10.0.0.2:51234 (remote)", for logs.
    std::string who() const {
        return remote ? peer + " (remote)" : "pid " + std::to_string(creds.pid);
    }
    uint64_t connected_ns = 0;
    // Close once the queued answers are out (info served, refusals).
    bool closing = false;
    uint64_t closing_ns = 0;
    std::string closing_reason;
    // Why the connection broke while serving something else (an answer to
    // it could not be queued): dropped as soon as the agent is back in its loop.
    std::string broken;

    // Set at attach.
    std::shared_ptr<ClientMemory> memory;
    channel::ClientSegmentHeader *header = nullptr;
    ClientRing ring;
    uint32_t ring_size = 0;
    uint64_t ring_offset = 0;
    uint64_t pool_offset = 0;
    uint64_t pool_bytes = 0;
    UniqueFd doorbell;  // eventfd the client writes when agent_sleeping is set
    uint32_t pasid = 0;
    bool has_pasid = false;
    uint32_t wq = 0;  // the device queue its descriptors go to
    std::optional<dp_desc_t> pending;  // popped, refused by a full device queue, retried first
    uint64_t pending_since_ns = 0;     // when `pending` was last set from empty
    // A STAGED request of it is with the engines (Agent::staged_jobs_): its
    // later requests wait in the inbox, so answers go out in request order,
    // and the socket is not read while one waits there.
    bool awaiting_staged = false;
    // Likewise for a REGISTER whose probe runs on a thread (memory_probe.h):
    // the range it asks for, added once the probe read it.
    bool awaiting_probe = false;
    enum class Probe { range, identity } probe_for = Probe::range;
    uint64_t probe_addr = 0, probe_len = 0;
    // ... an ATTACH whose identity proof is being read back.
    std::optional<channel::control::Attach> attach_request;
    // A request of it is being handled off the service thread.
    bool awaiting() const { return awaiting_staged || awaiting_probe; }

    ClientCounters counters;

    ClientSpace &space() const { return memory->space; }
};

}  // namespace deputy::agent
