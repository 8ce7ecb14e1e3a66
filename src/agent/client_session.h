// One attached client as the agent sees it: its control socket and
// credentials, its segment (header, ring, pool), its doorbell, its address
// space on the mover device, its registered direct ranges and counters.
#pragma once

#include <deputy/mover.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "agent/client_ring.h"
#include "agent/pool_space.h"
#include "channel/client_segment.h"
#include "channel/socket_io.h"
#include "common/fd.h"
#include "common/segment.h"

namespace deputy::agent {

struct DirectRange {
    uint64_t addr;
    uint64_t len;
};

struct ClientCounters {
    uint64_t forwarded = 0;   // descriptors handed to the engines (mapped)
    uint64_t direct = 0;      // descriptors run through bounce buffers (direct)
    uint64_t staged = 0;      // staged descriptors
    uint64_t denied = 0;      // descriptors or requests refused for an address range
    uint64_t requests = 0;    // control messages served
};

struct ClientSession {
    enum class State { kConnecting, kAttached };

    uint32_t id = 0;
    State state = State::kConnecting;
    UniqueFd socket;
    channel::sock::PeerCredentials creds;
    uint64_t connected_ns = 0;

    // Set at attach.
    Segment segment;
    channel::ClientSegmentHeader *header = nullptr;
    ClientRing ring;
    uint32_t ring_size = 0;
    uint64_t ring_offset = 0;
    uint64_t pool_offset = 0;
    uint64_t pool_bytes = 0;
    std::unique_ptr<PoolSpace> pool;
    UniqueFd doorbell;  // eventfd the client writes when agent_sleeping is set
    uint32_t pasid = 0;
    bool has_pasid = false;
    uint32_t wq = 0;  // the device queue its descriptors go to
    std::optional<dp_desc_t> pending;  // popped, refused by a full device queue, retried first
    std::vector<DirectRange> direct;

    ClientCounters counters;

    // True when [addr, +len) lies inside one registered direct range.
    bool direct_allows(uint64_t addr, uint64_t len) const {
        for (const DirectRange &r : direct)
            if (addr >= r.addr && addr - r.addr <= r.len && len <= r.len - (addr - r.addr))
                return true;
        return false;
    }
    // True when addr falls in any registered range (decides the direct path).
    bool touches_direct(uint64_t addr) const {
        for (const DirectRange &r : direct)
            if (addr >= r.addr && addr - r.addr < r.len) return true;
        return false;
    }
};

}  // namespace deputy::agent
