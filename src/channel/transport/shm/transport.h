// shm transport: two SPSC rings (ring.h), one per direction, in a memfd
// segment both processes map. A waiting side polls for `spin_ns`, then sleeps
// on a futex word in the segment (non-private futex: the word is shared
// between processes) and is woken by the other side's doorbell.
//
// Setup: the side that creates the segment (the agent, or the bench's
// listener) formats a channel region in it and passes the memfd over a
// connected Unix socket with SCM_RIGHTS (SHM_OFFER); the other side maps it
// and attaches. The socket then stays open as a liveness signal: a sleeping
// side checks it every `liveness_check_ns`, so a peer that dies without
// closing the channel is noticed within that bound.
//
// The agent builds per-client segments that hold more than a channel (mover
// rings, the dp_malloc pool): it calls region_bytes()/format_region() for the
// channel's part, send_offer() with the region's offset, and attach(). The
// bench uses Listener and connect(), which do all of that for a segment that
// holds only the channel.
//
// Region layout (offsets from the region start; ring_bytes is a power of two):
//      0  header: magic "DPSHMCH1", version, ring_bytes        (128 bytes)
//    128  closed flags, one u32 per side                       (128 bytes)
//    256  RingControl of ring 0 (creator -> attacher)          (512 bytes)
//    768  RingControl of ring 1 (attacher -> creator)          (512 bytes)
//   4096  ring 0 data (ring_bytes), then ring 1 data (ring_bytes)
#pragma once

#include <memory>
#include <string>

#include "channel/transport.h"
#include "channel/transport/uds/transport.h"
#include "common/fd.h"
#include "common/segment.h"

namespace deputy::channel::shm {

enum class Side { kCreator = 0, kAttacher = 1 };

inline constexpr size_t kDefaultRingBytes = size_t(1) << 20;
inline constexpr size_t kMinRingBytes = 64;
inline constexpr size_t kMaxRingBytes = size_t(1) << 30;

// Bytes of a channel region whose rings hold `ring_bytes` each.
size_t region_bytes(size_t ring_bytes);

// Writes an empty channel into `region` (zeroing it). ring_bytes must be a
// power of two in [kMinRingBytes, kMaxRingBytes] and the region large enough:
// DP_ERR_INVALID otherwise.
dp_status_t format_region(void *region, size_t bytes, size_t ring_bytes);

// The transport of one side of a formatted region at [offset, offset+bytes)
// of `segment` (kept mapped as long as the transport lives). The header is
// checked (magic, version, sizes inside the region): DP_ERR_INVALID if not a
// channel. `liveness` is a socket connected to the peer process, or invalid
// for in-process use (then only an orderly close of the peer is noticed).
dp_status_t attach(std::shared_ptr<Segment> segment, size_t offset, size_t bytes, Side side,
                   UniqueFd liveness, const TransportOptions &options,
                   std::unique_ptr<Transport> *out);

// SHM_OFFER on a connected Unix socket: the memfd of `segment` and where the
// channel region lies in it.
dp_status_t send_offer(int socket, const Segment &segment, size_t offset, size_t bytes,
                       int64_t timeout_ns);
// Receives an SHM_OFFER and maps the segment. The region must lie inside the
// segment (DP_ERR_INVALID otherwise); the memfd must be sealed (Segment::map).
dp_status_t recv_offer(int socket, int64_t timeout_ns, std::shared_ptr<Segment> *segment,
                       size_t *offset, size_t *bytes);

// Listens on a Unix socket address (see uds::Listener) and serves a fresh
// segment, with rings of options.buffer_bytes, to each client it accepts.
class Listener {
  public:
    static dp_status_t listen(const std::string &address, std::unique_ptr<Listener> *out);
    dp_status_t accept(const TransportOptions &options, int64_t timeout_ns,
                       std::unique_ptr<Transport> *out);
    std::string address() const { return uds_->address(); }

  private:
    std::unique_ptr<uds::Listener> uds_;
};

// Connects to a shm Listener, maps the segment it offers and attaches.
dp_status_t connect(const std::string &address, const TransportOptions &options, int64_t timeout_ns,
                    std::unique_ptr<Transport> *out);

}  // namespace deputy::channel::shm
