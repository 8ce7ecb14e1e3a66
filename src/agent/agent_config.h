// The agent's configuration: the mover device it hosts (accel-config-shaped,
// exactly what `deputy bench mover --config` reads) plus the agent's own keys.
//
// JSON file (`deputy agent --config FILE`):
//   { "agent":  { "socket": "...", "engines": 2, "cpus": "0-1", ... },
//     "device": { accel-config device object, optional } }
// A bare accel-config document (object or array) is accepted as the device.
// Unknown keys and wrong types are errors naming the key path.
#pragma once

#include <deputy/status.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/placement.h"
#include "mover/config.h"

namespace deputy::agent {

struct AgentConfig {
    std::string socket_path;  // empty: default_socket_path()
    std::string token;        // per-job token clients must present; empty: none
    // Remote clients (remote_gate.h): "tcp://ADDR:PORT" serves them beside
    // the local ones; empty: local clients only. They come through the
    // secure session with key_file's key, or in clear with insecure_tcp.
    std::string listen;
    std::string key_file;
    bool insecure_tcp = false;
    uint32_t max_remote_clients = 64;     // attached remote clients (of max_clients)
    uint32_t max_handshakes = 16;         // connections shaking hands at once
    uint32_t handshake_timeout_ms = 2000;
    uint32_t remote_timeout_ms = 10000;   // a silent remote host or link is dropped within
    mover::DeviceConfig device;
    bool device_given = false;     // the device came from JSON (engines/cpus keys then refused)
    // Without a device: one group, one queue, this many engines. Unless set,
    // one per reserved core (agent_cores), 1 under `cpus`, and when nothing
    // is pinned (the agent shares the ranks' CPUs) shared_placement_engines.
    uint32_t engines = 1;
    bool engines_set = false;      // engines came from the file or the command line
    std::string cpus;              // engine pinning ("0-1"); empty: unpinned
    // Where the agent's threads run, as a layout of this machine
    // (common/placement.h): "shared", "last", a number of cores, "cpus:LIST"
    // or "smt"; empty: as `cpus` says. finalize_config turns it into `cpus`
    // (the engines, each on one CPU in turn) and `placement.agent_cpus` (the
    // service thread, and every thread the agent starts, may use any of
    // them) and, unless engines_set or a device was given, one engine per
    // reserved core. It and `cpus` exclude each other.
    std::string agent_cores;
    std::string agent_cores_flag = "agent.agent_cores";  // names it in errors ("--agent-cores")
    Placement placement;     // computed from agent_cores (empty: nothing of the agent pinned)
    std::string topology;    // the machine's summary when agent_cores was given
    bool placed = false;     // finalize_config did the above (it may run twice)
    uint64_t pool_bytes = 64ull << 20;       // a client's mapped pool unless it asks
    uint64_t max_pool_bytes = 1ull << 30;    // the most a client may ask
    uint32_t ring_size = 256;                // descriptors per client ring unless it asks
    uint32_t max_ring_size = 4096;
    // false (default): the agent is not dumpable (PR_SET_DUMPABLE 0), so its
    // /proc/<pid>/fd, memory and environment are root's: no other process
    // of the user opens the clients' segments and boards through its fd
    // table or reads a job secret out of its memory (docs/agent.md, "What
    // holds against a process of the same user"). true: for a debugger or
    // a core dump, at that price.
    bool dumpable = false;
    uint32_t max_clients = 256;              // attached clients
    uint32_t max_connecting = 256;           // connections that have not attached yet
    uint32_t attach_timeout_ms = 2000;       // ... must send ATTACH within this
    uint64_t max_total_pool_bytes = 0;       // sum of all clients' pools; 0: the machine's memory
    // "lazy" (default): a client's pool pages are committed only as it
    // allocates, so an attached client costs the node ~36 KiB and a node's
    // worth of ranks attach at once. "prefault": the agent faults the whole
    // pool in (on a thread of its own) before it answers ATTACHED
    // (pool_populator.h says what each costs).
    bool pool_prefault = false;
    uint32_t max_teams_per_client = 64;      // teams a client belongs to or is joining
    uint32_t max_forming_teams = 1024;       // teams waiting for members, all clients together
    // Joins of one client waiting for their teams at once (its threads each
    // create one): beyond, a join is refused at once, costing nothing.
    uint32_t max_pending_joins = 32;
    // ... of one process, all its clients together: a quarter of
    // max_forming_teams, so that one process opening many contexts cannot
    // hold every forming slot.
    uint32_t max_process_pending_joins = 256;
    // The longest a team may take to form (a member's timeout_ms above it
    // is refused): slots a join holds are given back within this.
    uint32_t max_team_timeout_ms = 600000;
    // How long one call into a client's ordinary memory may hold an engine
    // before a relief engine takes its place and that process's further
    // calls are refused until it returns (mover/stall_watch.h). Honest
    // calls take microseconds to a few milliseconds (64 MiB at ~5 GB/s is
    // 13 ms); a page the client keeps from the kernel (userfaultfd) takes
    // as long as it likes.
    uint32_t engine_hold_ms = 500;
    // Clients (contexts) of one process attached at once: a quarter of
    // max_clients.
    uint32_t max_process_clients = 64;
    uint32_t max_team_queue = 64;            // a member's posts queued per team (DP_TEAM_MAX_OUTSTANDING)
    // ... and the bytes of the vector collectives' counts blocks among them,
    // which the agent copies (32 per member of the team: 512 KiB a post at
    // 16384 members; 16 MiB holds 32 such posts, any number below 8192;
    // at least 4096).
    uint64_t max_queued_counts_bytes = 16 << 20;
    // Test mode (several nodes): when a client joins rank r of the team
    // `test_stand_in_key`, the agent joins every other rank of r's block
    // of test_stand_in_block ranks itself, as stand-ins, so that a team of
    // thousands forms with one client per node. Stand-ins have no memory:
    // the team forms and is broken at once (docs/agent.md).
    std::string test_stand_in_key;
    uint32_t test_stand_in_block = 0;
    uint64_t coll_chunk_bytes = 256 << 10;   // a collective's tasks: engines share one operation in these
    // ... when some member's buffer is ordinary (registered) memory:
    // process_vm_readv/writev move ~5 GB/s in 256 KiB calls here and ~7-8
    // in 1 MiB ones.
    uint64_t coll_direct_chunk_bytes = 1 << 20;
    // A one-node collective moving at most this many bytes in all (reads +
    // writes) runs on the service thread when it starts: handing it to an
    // engine and back costs ~30 us of wake-ups here, more than the work
    // (docs/PERFORMANCE.md). 0: every collective goes to the engines.
    uint64_t coll_inline_bytes = 512 << 10;
    // One-node teams get a board (channel/team_board.h) on which members
    // that all wait for an operation the agent has not started run it
    // themselves, reading each other's pools (read-only views), if it
    // writes at most this many bytes into a member's destination: no
    // wake-up of the agent and back, which costs more than such an
    // operation's copies when the ranks' cores leave the agent none, and
    // members that all wait and find an operation unclaimed have no CPU
    // to give the agent anyway. 16 MiB by measurement (docs/decisions/
    // 2026-11-27-member-thresholds.md, "Members run operations up to 16 MiB": with every core computing,
    // ialltoall lost to MPI at 1 and 4 MiB with 256 KiB, at 8 MiB with
    // 4 MiB). 0: the agent
    // runs every operation, the default when the agent is pinned to CPUs of
    // its own (it has a core then, and running the operation while the
    // ranks wait is the overlap it is there for).
    uint64_t rank_execution_bytes = 16 << 20;
    bool rank_execution_set = false;  // from the file
    // Point-to-point (agent/team/p2p.h): a message of at most
    // p2p_eager_bytes that arrives before its receive is copied into the
    // agent's memory and its send completes, while all such copies together
    // stay within p2p_held_bytes and p2p_held_messages; beyond, a send waits
    // for its receive. 0 bytes: every send waits for its receive. 4 KiB
    // (Open MPI's shared-memory eager limit too): with 64 KiB, osu_bw's
    // window of early 16-64 KiB messages, each copied twice, ran at
    // 2-9 GB/s instead of 15-54 with the agent on a core of its own
    // (docs/PERFORMANCE.md, "Point-to-point through the agent").
    uint64_t p2p_eager_bytes = 4 << 10;
    uint64_t p2p_held_bytes = 64ull << 20;
    uint64_t p2p_held_messages = 65536;
    // Between nodes (agent/team/node_p2p.cc): a message of at most
    // p2p_node_eager_bytes goes with its head, while this agent has credit
    // with the receiving node: at most p2p_node_credit_bytes of such
    // messages (heads counted) not yet received there. Larger ones go when
    // their receive is posted, into buffers of the receiving agent's, at
    // most p2p_node_stage_bytes of them at once (one larger message alone).
    // An agent started on demand (a torch rank that found none): it stops
    // once no client has been attached for this long. 0: it runs until
    // stopped.
    uint32_t exit_when_unused_ms = 0;
    uint64_t p2p_node_eager_bytes = 64 << 10;
    uint64_t p2p_node_credit_bytes = 4ull << 20;
    uint64_t p2p_node_stage_bytes = 256ull << 20;
    uint32_t max_registrations = 256;        // direct ranges per client
    // A client's shared heap (include/deputy/heap.h), mapped by the agent
    // for as long as the client is attached: address space, committed only
    // where the client touches it. 0: the machine's memory rounded up to
    // 2 MiB, the size a client's heap has by default.
    uint64_t max_heap_bytes = 0;
    uint64_t max_staged_bytes = 1ull << 20;  // bytes per staged descriptor (each range)
    uint64_t max_direct_bytes = 64ull << 20; // bounce bytes per direct descriptor
    // Ring polling before the agent sleeps: 50 us where it shares the
    // ranks' CPUs; kOwnCoreIdleSpinUs when it has CPUs of its own (cpus set)
    // and the file does not say (idle_spin_set).
    uint32_t idle_spin_us = 50;
    bool idle_spin_set = false;
    // Between idle polls: sched_yield, so that a rank sharing our core runs
    // at once (an agent without a core of its own), or pause ("idle_poll":
    // "pause"; the core stays ours: an agent pinned to a spare core).
    bool idle_yield = true;
    // The engines' idle polling before they sleep, in us (a device's own
    // "idle_spin_us" when unset; the mover's default without a device).
    std::optional<uint32_t> engine_idle_spin_us;
    // A client's message must arrive whole, and each answer must be taken
    // by the client, within this time; otherwise the client is dropped.
    uint32_t request_timeout_ms = 1000;
    // What runs the device's descriptors (mover/config.h): agent keys
    // "backend" and "idxd_queue", for the default device or a given one
    // that does not set them itself.
    std::string backend;                     // "", "software" or "idxd"
    std::string idxd_queue;
    std::string log_level;                   // "10".."70" or a name; empty: the command line's
    uint32_t node_timeout_ms = 10000;        // several nodes: an inter-node step fails after this
    std::string inter_algorithm = "auto";    // several nodes: allreduce among agents (docs/nodes.md)
};

// Values of inter_algorithm ("rd" = "recursive_doubling").
inline constexpr const char *kInterAlgorithms = "auto, native, ring, recursive_doubling (rd), rabenseifner";
bool valid_inter_algorithm(const std::string &name);

// Fills the device from the agent keys when no device was given. Call after
// loading and after command-line overrides.
dp_status_t finalize_config(AgentConfig *config, std::string *error);
// The engines of an agent whose threads nothing pins (it shares the ranks'
// CPUs), given how many CPUs it may run on.
uint32_t shared_placement_engines(size_t agent_cpus);
// How long an agent pinned to CPUs of its own (and its engines, where they
// leave the service thread a CPU) polls before sleeping, unless its config
// says: a second, so it stays awake through any job's compute phase and
// still rests between jobs.
inline constexpr uint32_t kOwnCoreIdleSpinUs = 1'000'000;

// Loads a JSON file into *config (keys absent keep their value).
dp_status_t load_config_file(const std::string &path, AgentConfig *config, std::string *error);
dp_status_t load_config_text(const std::string &text, AgentConfig *config, std::string *error);

}  // namespace deputy::agent
