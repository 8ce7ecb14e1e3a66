// The layout of a client's segment: the memfd the agent creates for each
// client and passes it at attach time. Both processes map it, at different
// addresses, so everything in it is found by offset:
//
//   [0, 4 KiB)            ClientSegmentHeader (flags the two sides share)
//   [ring_offset, ...)    the client's mover work queue (mover/work_queue.h):
//                         the client produces, the agent consumes
//   [pool_offset, +pool)  the mapped pool: dp_malloc memory, where the agent
//                         reads and writes in place (memory mode "mapped")
//
// The agent never trusts what the client writes here: it consumes the ring
// with its own private head (agent/client_ring.h) and translates addresses
// only into the pool.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace deputy::channel {

inline constexpr uint64_t kClientSegmentMagic = 0x544e45494c435044ull;  // "DPCLIENT"
inline constexpr size_t kClientHeaderBytes = 4096;

struct ClientSegmentHeader {
    uint64_t magic;
    uint32_t version;
    uint32_t client_id;
    // Set by the agent before it sleeps in epoll_wait; a client that pushes
    // a descriptor and sees it set writes the doorbell eventfd (the
    // io_uring SQPOLL "need wakeup" handshake, with a full fence each side).
    alignas(64) std::atomic<uint32_t> agent_sleeping;
    // 0 while the agent serves; 1 once it is shutting down. Clients report
    // DP_ERR_AGENT_LOST from then on without waiting for the process to exit.
    alignas(64) std::atomic<uint32_t> agent_state;
};
static_assert(sizeof(ClientSegmentHeader) <= kClientHeaderBytes);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline constexpr uint32_t kAgentServing = 0;
inline constexpr uint32_t kAgentStopping = 1;

}  // namespace deputy::channel
