#include "proxy/team_proxy.h"

#include <deputy/coll.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "channel/coll_post.h"
#include "channel/control.h"
#include "channel/socket_io.h"
#include "client/context.h"
#include "client/team.h"
#include "coll/vector_counts.h"
#include "common/log.h"
#include "common/timing.h"

namespace deputy::proxy {
namespace {

namespace control = channel::control;
using channel::MsgType;

constexpr int64_t kSliceNs = 200'000'000;  // how often a wait looks at `stopping`
// Once the member is gone, how long its last collectives may take to end.
constexpr uint64_t kDrainNs = 2'000'000'000;
// The proxy's pool holds a copy of every block the member has in flight,
// which all fit in the member's own pool (client/context.h).
constexpr uint64_t kProxyPoolBytes = client::kRemotePoolBytes + (1ull << 20);

// One collective in flight: the proxy's request and block, and where the
// result goes back in the member's block.
struct InFlight {
    client::Request *request = nullptr;
    void *block = nullptr;
    uint32_t slot = 0;
    uint64_t out_offset = 0, out_bytes = 0;
};

class Proxy {
  public:
    Proxy(UniqueFd socket, const ProxyOptions &options, const std::atomic<bool> &stopping)
        : socket_(std::move(socket)), options_(options), stopping_(stopping) {}

    void run() {
        if (!join()) return;
        std::thread completer([this] { complete_loop(); });
        read_loop();
        {
            std::lock_guard lock(mutex_);
            reading_ = false;
        }
        drain_until_.store(timing::now_ns() + kDrainNs, std::memory_order_relaxed);
        wake_.notify_all();
        // Leaving first makes the agent end what the team still runs with
        // this member (its teammates get DP_ERR_AGENT_LOST), so the waits
        // of the completer end too. (An agent that stops answers no more.)
        if (!stopping_.load(std::memory_order_relaxed)) team_->leave();
        completer.join();
        delete team_;
        team_ = nullptr;
        context_.reset();
        DP_LOG_DEBUG("team proxy for {}: done", options_.peer);
    }

  private:
    bool send(MsgType type, const std::vector<uint8_t> &payload) {
        std::lock_guard lock(send_mutex_);
        return control::send_message(socket_.get(), type, payload, nullptr, 0, kSliceNs * 25,
                                     "team proxy") == DP_OK;
    }

    // Receives the next message; false when the connection ended or we stop.
    bool receive(MsgType *type, std::vector<uint8_t> *payload) {
        size_t nfds = 0;
        for (;;) {
            if (stopping_.load(std::memory_order_relaxed)) return false;
            // The member's end between messages is a clean one: not logged.
            const dp_status_t s = channel::sock::wait_next_message(socket_.get(), kSliceNs,
                                                                   "team proxy");
            if (s == DP_ERR_TIMEOUT) continue;
            if (s != DP_OK) return false;
            return control::recv_message(socket_.get(), control::kMaxControlMessage, type,
                                         payload, nullptr, 0, &nfds, kSliceNs * 50,
                                         "team proxy") == DP_OK;
        }
    }

    // TEAM_JOIN first: attach to the agent as a local client and join the
    // team as the member would, then answer TEAM_READY.
    bool join() {
        MsgType type;
        std::vector<uint8_t> payload;
        if (!receive(&type, &payload)) return false;
        control::TeamJoin m;
        std::string error;
        if (type != MsgType::kTeamJoin ||
            control::decode(payload.data(), payload.size(), &m, &error) != DP_OK) {
            DP_LOG_WARN("team proxy for {}: expected TEAM_JOIN, got {} {}", options_.peer,
                        channel::msg_type_name(type), error);
            return false;
        }
        client::ClientOptions o;
        o.address = options_.agent_address;
        o.token = options_.token;
        o.job_secret = m.secret;
        o.pool_bytes = kProxyPoolBytes;
        o.memory_mode = DP_MEMORY_DIRECT;
        o.wait_mode = DP_WAIT_BLOCK;
        o.adaptive_wait = false;
        // It sleeps until its record completes: never a member that runs
        // operations (and so no board for the team).
        o.rank_execution = false;
        o.share_heap = false;  // the agent's process: no heap to share
        control::TeamReady ready(m.join_id, DP_OK, 0, "");
        dp_status_t s = client::Context::open(o, &context_);
        if (s != DP_OK) {
            ready.status = s;
            ready.reason = "the team proxy could not attach to its agent";
        } else if ((s = client::Team::join(context_.get(), m.key, int(m.rank), int(m.size),
                                           m.timeout_ms, &team_)) != DP_OK) {
            ready.status = s;
            ready.reason = "joining the team failed (the agent's log says why)";
        } else {
            ready.team_id = team_->id();
            rank_ = m.rank;
            size_ = m.size;
        }
        std::vector<uint8_t> out;
        control::encode(ready, &out);
        const bool sent = send(MsgType::kTeamReady, out);
        if (ready.status != DP_OK) {
            delete team_;
            team_ = nullptr;
            context_.reset();
            return false;
        }
        DP_LOG_DEBUG("team proxy for {}: rank {} of {} in team '{}'", options_.peer, m.rank,
                     m.size, m.key);
        if (!sent) {
            team_->leave();
            delete team_;
            team_ = nullptr;
            context_.reset();
        }
        return sent;
    }

    void read_loop() {
        MsgType type;
        std::vector<uint8_t> payload;
        while (receive(&type, &payload)) {
            control::ProxyPost m;
            std::string error;
            if (type != MsgType::kProxyPost ||
                control::decode(payload.data(), payload.size(), &m, &error) != DP_OK) {
                DP_LOG_WARN("team proxy for {}: {} {}: closing", options_.peer,
                            channel::msg_type_name(type), error);
                return;
            }
            if (!post(m)) return;
        }
    }

    // The bytes [off, +len) of a block of block_bytes; off from an address.
    static bool inside(uint64_t addr, uint64_t len, const control::ProxyPost &m, uint64_t *off) {
        if (addr < m.block_base) return false;
        *off = addr - m.block_base;
        uint64_t end = 0;
        return !__builtin_add_overflow(*off, len, &end) && end <= m.block_bytes;
    }

    // Refused without running: the member learns why from the status.
    bool refuse(uint32_t slot, uint8_t status, const std::string &why) {
        DP_LOG_WARN("team proxy for {}: post in slot {} refused: {}", options_.peer, slot, why);
        control::ProxyDone done{slot, status, 0, 0, {}};
        std::vector<uint8_t> out;
        control::encode(done, &out);
        return send(MsgType::kProxyDone, out);
    }

    bool post(const control::ProxyPost &m) {
        channel::CollPost p;
        static_assert(sizeof(p) == sizeof(m.post));
        std::memcpy(&p, m.post, sizeof(p));
        const std::optional<coll::Collective> c = channel::collective_of(p);
        if (!c) return refuse(m.slot, DP_COMP_INVALID_OPCODE, "not a collective");
        if (*c != coll::Collective::barrier && p.dtype >= DP_DTYPE_COUNT)
            return refuse(m.slot, DP_COMP_INVALID_FIELD, "dtype out of range");
        const uint64_t elem =
            *c == coll::Collective::barrier ? 1 : dp_dtype_size(dp_dtype_t(p.dtype));
        // The bytes the collective reads at src and writes at dst.
        uint64_t in_len = 0, out_len = 0;
        std::vector<size_t> arrays;  // vector collectives: the four arrays
        if (coll::is_vector(*c)) {
            if (m.counts.size() != coll::vector_counts_bytes(size_))
                return refuse(m.slot, DP_COMP_INVALID_FIELD, "counts block of the wrong length");
            coll::MemberVector v;
            std::string why;
            if (coll::decode_vector_counts(m.counts.data(), m.counts.size(), size_, elem,
                                           channel::kMaxCollBytes, &v, &why) != DP_OK)
                return refuse(m.slot, DP_COMP_INVALID_FIELD, why);
            for (const coll::VectorBlock &b : v.send) in_len = std::max(in_len, b.end());
            for (const coll::VectorBlock &b : v.recv) out_len = std::max(out_len, b.end());
            arrays.resize(size_t(coll::kVectorArrays) * size_);
            for (size_t i = 0; i < arrays.size(); ++i) {
                uint64_t value;
                std::memcpy(&value, m.counts.data() + i * sizeof(value), sizeof(value));
                arrays[i] = size_t(value);
            }
        } else if (*c != coll::Collective::barrier) {
            if (p.root >= size_ && coll::rooted(*c))
                return refuse(m.slot, DP_COMP_INVALID_FIELD, "root out of range");
            const coll::MemberBytes need =
                coll::member_bytes(*c, p.count, elem, size_, rank_, p.root);
            in_len = need.source;
            out_len = need.destination;
            if (*c == coll::Collective::bcast) in_len = out_len = std::max(in_len, out_len);
        }
        void *block = nullptr;
        uint64_t src_off = 0, dst_off = 0;
        if (in_len || out_len) {
            if (!inside(p.src, in_len, m, &src_off) || !inside(p.dst, out_len, m, &dst_off))
                return refuse(m.slot, DP_COMP_ADDRESS_DENIED,
                              "buffers outside the bounce block the post names");
            block = context_->pool().allocate(m.block_bytes);
            if (!block)
                return refuse(m.slot, DP_COMP_INVALID_SIZE, "no room in the proxy's pool");
            if (!m.in.empty())
                std::memcpy(static_cast<uint8_t *>(block) + m.in_offset, m.in.data(), m.in.size());
        }
        auto *base = static_cast<uint8_t *>(block);
        void *src = block ? base + src_off : nullptr;
        void *dst = block ? base + dst_off : nullptr;
        client::Request *r = nullptr;
        dp_status_t s;
        if (coll::is_vector(*c)) {
            const size_t *a = arrays.data();
            s = team_->post_vector(*c, src, a, a + size_, dst, a + 2 * size_, a + 3 * size_,
                                   dp_dtype_t(p.dtype), dp_op_t(p.redop), p.root, &r);
        } else {
            s = team_->post(*c, src, dst, p.count, dp_dtype_t(p.dtype), dp_op_t(p.redop), p.root,
                            &r);
        }
        if (s != DP_OK) {
            if (block) context_->pool().release(block);
            return refuse(m.slot, s == DP_ERR_TOO_LARGE ? DP_COMP_INVALID_SIZE
                                                        : DP_COMP_INVALID_FIELD,
                          std::string("posting it: ") + dp_status_name(s));
        }
        {
            std::lock_guard lock(mutex_);
            in_flight_.push_back({r, block, m.slot, dst_off, block ? out_len : 0});
        }
        wake_.notify_one();
        return true;
    }

    // Waits for each collective in the order they were posted (a team runs
    // a member's operations in that order) and sends its result back.
    void complete_loop() {
        for (;;) {
            InFlight f;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return !in_flight_.empty() || !reading_; });
                if (in_flight_.empty()) return;
                f = in_flight_.front();
            }
            dp_status_t s;
            while ((s = context_->wait_record(f.request->record, DP_WAIT_BLOCK, kSliceNs)) ==
                   DP_ERR_TIMEOUT) {
                if (stopping_.load(std::memory_order_relaxed)) break;
                const uint64_t until = drain_until_.load(std::memory_order_relaxed);
                if (until != 0 && timing::now_ns() > until) break;
            }
            control::ProxyDone done;
            done.slot = f.slot;
            if (s == DP_OK) {
                const dp_completion_t &rec = *f.request->record;
                done.status = __atomic_load_n(&rec.status, __ATOMIC_ACQUIRE);
                done.bytes_completed = rec.bytes_completed;
                if (done.status == DP_COMP_SUCCESS && f.out_bytes) {
                    const auto *out = static_cast<const uint8_t *>(f.block) + f.out_offset;
                    done.out.assign(out, out + f.out_bytes);
                    done.out_offset = f.out_offset;
                }
            } else {
                done.status = channel::kCollMemberLost;
            }
            std::vector<uint8_t> payload;
            control::encode(done, &payload);
            send(MsgType::kProxyDone, payload);
            // Completed (or its agent gone): nothing touches it any more.
            if (s == DP_OK) {
                team_->release(f.request);
                if (f.block) context_->pool().release(f.block);
            }
            std::lock_guard lock(mutex_);
            in_flight_.pop_front();
            if (s != DP_OK) {
                // The agent is gone or we stop: what is left fails alike.
                for (const InFlight &rest : in_flight_) {
                    control::ProxyDone lost{rest.slot, channel::kCollMemberLost, 0, 0, {}};
                    std::vector<uint8_t> out;
                    control::encode(lost, &out);
                    send(MsgType::kProxyDone, out);
                }
                in_flight_.clear();
                if (!reading_) return;
            }
        }
    }

    UniqueFd socket_;
    ProxyOptions options_;
    const std::atomic<bool> &stopping_;
    std::unique_ptr<client::Context> context_;
    client::Team *team_ = nullptr;
    uint32_t rank_ = 0, size_ = 1;
    std::mutex send_mutex_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<InFlight> in_flight_;  // under mutex_
    bool reading_ = true;             // under mutex_
    std::atomic<uint64_t> drain_until_{0};  // set when reading ends
};

}  // namespace

void serve_team_proxy(UniqueFd socket, const ProxyOptions &options,
                      const std::atomic<bool> &stopping) {
    Proxy(std::move(socket), options, stopping).run();
}

}  // namespace deputy::proxy
