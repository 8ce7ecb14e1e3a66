#include "channel/transport/shm/transport.h"

#include <sched.h>

#include <atomic>
#include <cstring>

#include "channel/socket_io.h"
#include "channel/transport/shm/ring.h"
#include "common/check.h"

namespace deputy::channel::shm {
namespace {

constexpr char kMagic[8] = {'D', 'P', 'S', 'H', 'M', 'C', 'H', '1'};
constexpr uint32_t kLayoutVersion = 1;
constexpr size_t kControlOffset = 2 * kSlotBytes;
constexpr size_t kDataOffset = 4096;
static_assert(kControlOffset + 2 * sizeof(RingControl) <= kDataOffset);

struct RegionHeader {
    char magic[8];
    uint32_t version;
    uint32_t reserved;
    uint64_t ring_bytes;
    // Side i sets closed[i] when it shuts down; on its own cache slot, as the
    // flag is read by every waiting loop.
    alignas(kSlotBytes) uint32_t closed[2];
    // Side i sets asymmetric[i] at attach when its process is registered for
    // the asymmetric doorbell (ring.h (3')) and will call membarrier before
    // every sleep. A side publishes cheaply only once both flags are set.
    uint32_t asymmetric[2];
};
static_assert(sizeof(RegionHeader) == kControlOffset);

constexpr size_t kOfferBytes = 24;  // u64 segment size, region offset, region size

bool is_power_of_two(size_t v) {
    return v != 0 && (v & (v - 1)) == 0;
}

uint64_t align8(uint64_t n) {
    return (n + 7) & ~uint64_t(7);
}

class ShmTransport final : public Transport {
  public:
    ShmTransport(std::shared_ptr<Segment> segment, uint8_t *region, uint64_t ring, Side side,
                 UniqueFd liveness, const TransportOptions &options)
        : segment_(std::move(segment)),
          header_(reinterpret_cast<RegionHeader *>(region)),
          self_(int(side)),
          peer_side_(1 - int(side)),
          liveness_(std::move(liveness)),
          options_(options) {
        auto *controls = reinterpret_cast<RingControl *>(region + kControlOffset);
        uint8_t *data = region + kDataOffset;
        // Ring 0 carries creator -> attacher, ring 1 the other way.
        const int tx = self_, rx = peer_side_;
        writer_ = RingWriter(&controls[tx], data + uint64_t(tx) * ring, ring);
        reader_ = RingReader(&controls[rx], data + uint64_t(rx) * ring, ring);
        self_asymmetric_ = asymmetric_doorbell_available();
        if (self_asymmetric_)
            shared(header_->asymmetric[self_]).store(1, std::memory_order_release);
    }
    ~ShmTransport() override { shutdown(); }

    dp_status_t send(MsgType type, const void *payload, size_t length, int64_t timeout_ns) override;
    dp_status_t recv(MsgType *type, void *buffer, size_t capacity, size_t *length,
                     int64_t timeout_ns) override;
    size_t max_message() const override { return options_.max_message; }
    void shutdown() override;
    std::string kind() const override { return "shm"; }
    std::string peer() const override {
        return liveness_.valid() ? "memfd " + std::to_string(segment_->fd()) : "in-process";
    }
    size_t buffer_bytes() const override { return writer_.capacity(); }

  private:
    enum class Wait { kData, kSpace };

    // True once both sides use the asymmetric doorbell. The peer's flag only
    // ever goes from 0 to 1, so once seen it is not read again.
    bool asymmetric() {
        if (!self_asymmetric_) return false;
        if (!peer_asymmetric_.load(std::memory_order_relaxed) &&
            shared(header_->asymmetric[peer_side_]).load(std::memory_order_acquire) != 0)
            peer_asymmetric_.store(true, std::memory_order_relaxed);
        return peer_asymmetric_.load(std::memory_order_relaxed);
    }
    bool peer_closed() const {
        return shared(header_->closed[peer_side_]).load(std::memory_order_acquire) != 0;
    }
    // How a ring op reports that the peer's index is out of range.
    dp_status_t corrupt(const char *which) {
        break_channel();
        DP_FAIL(DP_ERR_INVALID,
                "shm: the peer published a {} index outside the ring: the "
                "segment is corrupt or the peer misbehaves",
                which);
    }
    void break_channel() {
        int expected = DP_OK;
        broken_.compare_exchange_strong(expected, DP_ERR_IO);
    }
    dp_status_t lost(bool mid_message, const char *why);
    // Waits until `need` bytes are readable (kData) or writable (kSpace).
    dp_status_t wait(Wait what, uint64_t need, const Deadline &deadline, bool mid_message);
    dp_status_t ready(Wait what, uint64_t need, bool before_sleep, bool *ok);

    std::shared_ptr<Segment> segment_;
    RegionHeader *header_;
    int self_;
    int peer_side_;
    UniqueFd liveness_;
    TransportOptions options_;
    RingWriter writer_;  // send thread only
    RingReader reader_;  // receive thread only
    std::atomic<bool> shut_down_{false};
    std::atomic<int> broken_{DP_OK};
    bool self_asymmetric_ = false;
    std::atomic<bool> peer_asymmetric_{false};  // read by both of our threads
};

dp_status_t ShmTransport::lost(bool mid_message, const char *why) {
    if (shut_down_.load()) {
        DP_LOG_DEBUG("shm: {} after local shutdown", why);
        return DP_ERR_AGENT_LOST;
    }
    if (mid_message) {
        break_channel();
        DP_FAIL(DP_ERR_AGENT_LOST, "shm: {} in the middle of a message", why);
    }
    DP_LOG_DEBUG("shm: {}", why);
    return DP_ERR_AGENT_LOST;
}

dp_status_t ShmTransport::ready(Wait what, uint64_t need, bool before_sleep, bool *ok) {
    if (what == Wait::kData) {
        uint64_t have = before_sleep ? reader_.available_before_sleep() : reader_.available(need);
        if (have == UINT64_MAX) return corrupt("tail");
        *ok = have >= need;
    } else {
        uint64_t room = before_sleep ? writer_.free_bytes_before_sleep() : writer_.free_bytes(need);
        if (room == UINT64_MAX) return corrupt("head");
        *ok = room >= need;
    }
    return DP_OK;
}

dp_status_t ShmTransport::wait(Wait what, uint64_t need, const Deadline &deadline,
                               bool mid_message) {
    bool ok = false;
    // Phase 1: poll. The peer is usually a few hundred nanoseconds away.
    // The clock is read only every 64 polls: it costs more than a poll, and a
    // streaming consumer that caught up with its producer comes here for
    // nearly every message.
    uint64_t spin_until = 0;
    for (uint32_t i = 1; options_.spin_ns > 0; ++i) {
        DP_CHECK(ready(what, need, false, &ok));
        if (ok) return DP_OK;
        if ((i & 63) == 0) {
            if (shut_down_.load(std::memory_order_relaxed)) return lost(mid_message, "shut down");
            if (peer_closed()) break;  // phase 2 drains what is left, then reports
            const uint64_t now = timing::now_ns();
            if (spin_until == 0) spin_until = now + uint64_t(options_.spin_ns);
            if (now >= spin_until || deadline.expired()) break;
            // Past the first quarter of the spin, let other threads of this
            // core run between polls: when the peer shares our core (a busy
            // machine), it cannot make progress while we spin, and a small
            // ring would otherwise cost a full spin plus a futex round trip
            // per ring's worth of bytes.
            if (spin_until - now < uint64_t(options_.spin_ns) * 3 / 4) sched_yield();
        }
        cpu_relax();
    }
    // Phase 2: sleep on the futex, in slices so that a peer that died without
    // closing is noticed through the liveness socket.
    RingControl *control = what == Wait::kData ? reader_.control() : writer_.control();
    uint32_t &seq = what == Wait::kData ? control->data_seq : control->space_seq;
    uint32_t &waiting = what == Wait::kData ? control->data_waiting : control->space_waiting;
    for (;;) {
        // acquire: pairs with ring_bell's release; read before announcing
        // ourselves, so a bell rung after the check below changes seq and
        // makes the futex_wait return at once.
        const uint32_t seen = shared(seq).load(std::memory_order_acquire);
        shared(waiting).store(1, std::memory_order_seq_cst);  // doorbell (3), sleeper's half
        if (self_asymmetric_) heavy_fence();                  // (3'): the sleeper's barrier
        dp_status_t s = ready(what, need, true, &ok);
        if (s != DP_OK || ok) {
            shared(waiting).store(0, std::memory_order_relaxed);
            return s;
        }
        const char *gone = nullptr;
        if (shut_down_.load())
            gone = "shut down";
        else if (peer_closed())
            gone = "the peer closed the channel";
        else if (liveness_.valid() && sock::peer_hung_up(liveness_.get()))
            gone = "the peer process is gone (its socket hung up)";
        if (gone != nullptr) {
            shared(waiting).store(0, std::memory_order_relaxed);
            return lost(mid_message, gone);
        }
        int64_t left = deadline.remaining_ns();
        if (left == 0) {
            shared(waiting).store(0, std::memory_order_relaxed);
            if (mid_message) {
                break_channel();
                DP_FAIL(DP_ERR_TIMEOUT,
                        "shm: timed out in the middle of a message; the channel "
                        "is broken");
            }
            return DP_ERR_TIMEOUT;
        }
        int64_t slice = options_.liveness_check_ns;
        if (left > 0 && left < slice) slice = left;
        futex_wait(&seq, seen, slice);
        shared(waiting).store(0, std::memory_order_relaxed);
    }
}

dp_status_t ShmTransport::send(MsgType type, const void *payload, size_t length,
                               int64_t timeout_ns) {
    if (int b = broken_.load(std::memory_order_relaxed); b != DP_OK) return dp_status_t(b);
    DP_CHECK(check_send_size(length, options_.max_message, "shm"));
    if (shut_down_.load(std::memory_order_relaxed)) return lost(false, "shut down");
    if (peer_closed()) return lost(false, "the peer closed the channel");
    const uint64_t frame = kFrameHeaderBytes + align8(length);
    const auto *src = static_cast<const uint8_t *>(payload);

    // Fast path: the whole frame fits now. One copy, one publish.
    if (frame <= writer_.capacity()) {
        uint64_t room = writer_.free_bytes(frame);
        if (room == UINT64_MAX) return corrupt("head");
        if (room < frame) {
            Deadline deadline(timeout_ns);
            DP_CHECK(wait(Wait::kSpace, frame, deadline, false));
        }
        encode_frame_header(writer_.header_slot(), type, uint32_t(length));
        writer_.skip(kFrameHeaderBytes);
        if (length > 0) writer_.write(src, length);
        writer_.skip(frame - kFrameHeaderBytes - length);  // padding
        writer_.publish(asymmetric());
        return DP_OK;
    }

    // Streaming: a frame larger than the ring goes in pieces, each published
    // as soon as written so the consumer can drain the ring meanwhile.
    Deadline deadline(timeout_ns);
    DP_CHECK(wait(Wait::kSpace, kFrameHeaderBytes, deadline, false));
    encode_frame_header(writer_.header_slot(), type, uint32_t(length));
    writer_.skip(kFrameHeaderBytes);
    writer_.publish(asymmetric());
    uint64_t done = 0, total = frame - kFrameHeaderBytes;
    while (done < total) {
        uint64_t room = writer_.free_bytes(1);
        if (room == UINT64_MAX) return corrupt("head");
        if (room == 0) {
            DP_CHECK(wait(Wait::kSpace, 1, deadline, true));
            continue;
        }
        uint64_t chunk = std::min(room, total - done);
        uint64_t data = done < length ? std::min<uint64_t>(chunk, length - done) : 0;
        if (data > 0) writer_.write(src + done, data);
        writer_.skip(chunk - data);  // padding at the end of the frame
        done += chunk;
        writer_.publish(asymmetric());
    }
    return DP_OK;
}

dp_status_t ShmTransport::recv(MsgType *type, void *buffer, size_t capacity, size_t *length,
                               int64_t timeout_ns) {
    if (int b = broken_.load(std::memory_order_relaxed); b != DP_OK) return dp_status_t(b);
    uint64_t have = reader_.available(kFrameHeaderBytes);
    if (have == UINT64_MAX) return corrupt("tail");
    Deadline deadline(timeout_ns);
    if (have < kFrameHeaderBytes) {
        DP_CHECK(wait(Wait::kData, kFrameHeaderBytes, deadline, false));
        have = reader_.available(kFrameHeaderBytes);
        if (have == UINT64_MAX) return corrupt("tail");
    }
    // Copy the header out before checking it: the peer can rewrite shared
    // bytes at any time, and what we check must be what we use.
    uint8_t raw[kFrameHeaderBytes];
    std::memcpy(raw, reader_.header_slot(), sizeof(raw));
    FrameHeader h;
    if (dp_status_t s = decode_frame_header(raw, options_.max_message, "shm", &h); s != DP_OK) {
        break_channel();
        return s;
    }
    if (h.length > capacity) {
        break_channel();
        DP_FAIL(DP_ERR_TOO_LARGE, "shm: a {}-byte message does not fit the {}-byte buffer given",
                h.length, capacity);
    }
    const uint64_t frame = kFrameHeaderBytes + align8(h.length);
    auto *dst = static_cast<uint8_t *>(buffer);
    if (have < frame && frame <= reader_.capacity()) have = reader_.available(frame);
    if (have == UINT64_MAX) return corrupt("tail");
    if (have >= frame) {  // fast path: the whole frame is there
        reader_.skip(kFrameHeaderBytes);
        if (h.length > 0) reader_.read(dst, h.length);
        reader_.skip(frame - kFrameHeaderBytes - h.length);
        reader_.release(asymmetric());
    } else {
        reader_.skip(kFrameHeaderBytes);
        reader_.release(asymmetric());
        uint64_t done = 0, total = frame - kFrameHeaderBytes;
        while (done < total) {
            have = reader_.available(1);
            if (have == UINT64_MAX) return corrupt("tail");
            if (have == 0) {
                DP_CHECK(wait(Wait::kData, 1, deadline, true));
                continue;
            }
            uint64_t chunk = std::min(have, total - done);
            uint64_t data = done < h.length ? std::min<uint64_t>(chunk, h.length - done) : 0;
            if (data > 0) reader_.read(dst + done, data);
            reader_.skip(chunk - data);
            done += chunk;
            reader_.release(asymmetric());
        }
    }
    *type = h.type;
    *length = h.length;
    return DP_OK;
}

void ShmTransport::shutdown() {
    if (shut_down_.exchange(true)) return;
    shared(header_->closed[self_]).store(1, std::memory_order_release);
    // Ring every bell of both rings: our own blocked threads and the peer's
    // must all re-check the closed flags.
    for (RingControl *c : {writer_.control(), reader_.control()}) {
        ring_bell(c->data_seq);
        ring_bell(c->space_seq);
    }
}

}  // namespace

size_t region_bytes(size_t ring_bytes) {
    return kDataOffset + 2 * ring_bytes;
}

dp_status_t format_region(void *region, size_t bytes, size_t ring_bytes) {
    if (!is_power_of_two(ring_bytes) || ring_bytes < kMinRingBytes || ring_bytes > kMaxRingBytes)
        DP_FAIL(DP_ERR_INVALID, "shm: ring size {} is not a power of two in [{}, {}]", ring_bytes,
                kMinRingBytes, kMaxRingBytes);
    if (bytes < region_bytes(ring_bytes))
        DP_FAIL(DP_ERR_INVALID,
                "shm: a region of {} bytes cannot hold two {}-byte rings ({} needed)", bytes,
                ring_bytes, region_bytes(ring_bytes));
    std::memset(region, 0, region_bytes(ring_bytes));
    auto *header = static_cast<RegionHeader *>(region);
    header->version = kLayoutVersion;
    header->ring_bytes = ring_bytes;
    // The magic last: a region is a channel only once it is complete. (The
    // peer learns of the region through a syscall, sendmsg, which orders
    // these stores before anything it reads.)
    std::memcpy(header->magic, kMagic, sizeof(kMagic));
    return DP_OK;
}

dp_status_t attach(std::shared_ptr<Segment> segment, size_t offset, size_t bytes, Side side,
                   UniqueFd liveness, const TransportOptions &options,
                   std::unique_ptr<Transport> *out) {
    if (!segment || !segment->valid() || offset > segment->size() ||
        bytes > segment->size() - offset || bytes < kDataOffset || offset % kSlotBytes != 0)
        DP_FAIL(DP_ERR_INVALID,
                "shm attach: region [{}, +{}) is not inside the {}-byte segment "
                "or not aligned",
                offset, bytes, segment ? segment->size() : 0);
    auto *region = reinterpret_cast<uint8_t *>(segment->at(offset));
    auto *header = reinterpret_cast<RegionHeader *>(region);
    const uint64_t ring = header->ring_bytes;  // read once: the peer may change it
    if (std::memcmp(header->magic, kMagic, sizeof(kMagic)) != 0 ||
        header->version != kLayoutVersion)
        DP_FAIL(DP_ERR_INVALID, "shm attach: no deputy channel in the region (magic or version)");
    if (!is_power_of_two(ring) || ring < kMinRingBytes || ring > kMaxRingBytes ||
        region_bytes(ring) > bytes)
        DP_FAIL(DP_ERR_INVALID, "shm attach: ring size {} does not fit the {}-byte region", ring,
                bytes);
    // The transport uses the ring size validated here, never the shared copy.
    *out = std::make_unique<ShmTransport>(std::move(segment), region, ring, side,
                                          std::move(liveness), options);
    return DP_OK;
}

dp_status_t send_offer(int socket, const Segment &segment, size_t offset, size_t bytes,
                       int64_t timeout_ns) {
    uint8_t message[kFrameHeaderBytes + kOfferBytes];
    encode_frame_header(message, MsgType::kShmOffer, kOfferBytes);
    put_u64(message + kFrameHeaderBytes, segment.size());
    put_u64(message + kFrameHeaderBytes + 8, offset);
    put_u64(message + kFrameHeaderBytes + 16, bytes);
    int fd = segment.fd();
    return sock::send_with_fds(socket, message, sizeof(message), &fd, 1, timeout_ns, "shm offer");
}

dp_status_t recv_offer(int socket, int64_t timeout_ns, std::shared_ptr<Segment> *segment,
                       size_t *offset, size_t *bytes) {
    uint8_t message[kFrameHeaderBytes + kOfferBytes];
    UniqueFd fd;
    size_t nfds = 0;
    DP_CHECK(sock::recv_with_fds(socket, message, sizeof(message), &fd, 1, &nfds, timeout_ns,
                                 "shm offer"));
    FrameHeader h;
    DP_CHECK(decode_frame_header(message, kOfferBytes, "shm offer", &h));
    if (h.type != MsgType::kShmOffer || h.length != kOfferBytes || nfds != 1)
        DP_FAIL(DP_ERR_INVALID,
                "shm setup: expected SHM_OFFER with one memfd, got {} ({} bytes, "
                "{} fd(s))",
                msg_type_name(h.type), h.length, nfds);
    const uint64_t size = get_u64(message + kFrameHeaderBytes);
    const uint64_t at = get_u64(message + kFrameHeaderBytes + 8);
    const uint64_t len = get_u64(message + kFrameHeaderBytes + 16);
    auto mapped = std::make_shared<Segment>();
    DP_CHECK(Segment::map(std::move(fd), size, mapped.get()));
    if (at > mapped->size() || len > mapped->size() - at)
        DP_FAIL(DP_ERR_INVALID,
                "shm setup: the offered region [{}, +{}) is outside the {}-byte "
                "segment",
                at, len, mapped->size());
    *segment = std::move(mapped);
    *offset = at;
    *bytes = len;
    return DP_OK;
}

dp_status_t Listener::listen(const std::string &address, std::unique_ptr<Listener> *out) {
    auto listener = std::make_unique<Listener>();
    DP_CHECK(uds::Listener::listen(address, &listener->uds_));
    *out = std::move(listener);
    return DP_OK;
}

dp_status_t Listener::accept(const TransportOptions &options, int64_t timeout_ns,
                             std::unique_ptr<Transport> *out) {
    const size_t ring = options.buffer_bytes ? options.buffer_bytes : kDefaultRingBytes;
    if (!is_power_of_two(ring) || ring < kMinRingBytes || ring > kMaxRingBytes)
        DP_FAIL(DP_ERR_INVALID, "shm: ring size {} is not a power of two in [{}, {}]", ring,
                kMinRingBytes, kMaxRingBytes);
    UniqueFd conn;
    DP_CHECK(uds_->accept_fd(timeout_ns, &conn));
    auto segment = std::make_shared<Segment>();
    DP_CHECK(Segment::create("deputy-channel", region_bytes(ring), segment.get()));
    DP_CHECK(format_region(segment->data(), segment->size(), ring));
    DP_CHECK(send_offer(conn.get(), *segment, 0, segment->size(), timeout_ns));
    return attach(std::move(segment), 0, region_bytes(ring), Side::kCreator, std::move(conn),
                  options, out);
}

dp_status_t connect(const std::string &address, const TransportOptions &options, int64_t timeout_ns,
                    std::unique_ptr<Transport> *out) {
    Deadline deadline(timeout_ns);
    UniqueFd conn;
    DP_CHECK(uds::connect_fd(address, timeout_ns, &conn));
    std::shared_ptr<Segment> segment;
    size_t offset = 0, bytes = 0;
    DP_CHECK(recv_offer(conn.get(), deadline.remaining_ns(), &segment, &offset, &bytes));
    return attach(std::move(segment), offset, bytes, Side::kAttacher, std::move(conn), options,
                  out);
}

}  // namespace deputy::channel::shm
