#include "proxy/team_proxy.h"

#include <deputy/coll.h>
#include <fmt/format.h>

#include <sys/socket.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "channel/coll_post.h"
#include "channel/control.h"
#include "channel/p2p_post.h"
#include "channel/socket_io.h"
#include "channel/transport/tcp/transport.h"
#include "client/context.h"
#include "client/p2p.h"
#include "client/staged_collective.h"
#include "client/team.h"
#include "coll/vector_counts.h"
#include "common/log.h"
#include "common/timing.h"
#include "fabric/rma_link.h"

namespace deputy::proxy {
namespace {

namespace control = channel::control;
using channel::MsgType;

constexpr int64_t kSliceNs = 200'000'000;  // how often a wait looks at `stopping`
// How long the wait on the oldest record lasts while others are in flight
// (one of them may complete first).
constexpr int64_t kScanNs = 1'000'000;
// Once the member is gone, how long its last collectives may take to end.
constexpr uint64_t kDrainNs = 2'000'000'000;
// The proxy's pool holds a copy of every block the member has in flight,
// which all fit in the member's own pool (client/context.h).
constexpr uint64_t kProxyPoolBytes = client::kRemotePoolBytes + (1ull << 20);

// How long an RMA transfer of `bytes` may take before the member counts as
// silent: 10 s, plus 64 ns a byte (no slower than about 15 MB/s).
uint64_t rma_deadline(uint64_t bytes) {
    return timing::now_ns() + 10'000'000'000ull + bytes * 64;
}

// "10.0.0.2" of "10.0.0.2:51234", "::1" of "[::1]:51234"; an IPv4-mapped
// IPv6 address as IPv4, as fabric::address_host gives it.
std::string host_of(const std::string &peer) {
    std::string host, port;
    channel::tcp::split_host_port(peer, &host, &port);
    return fabric::unmapped_ipv4(host);
}

// A post whose source bytes are coming in (PROXY_POST, then PROXY_DATA).
struct Pending {
    control::ProxyPost post;  // its `in` already copied out
    channel::CollPost head{};
    coll::Collective collective = coll::Collective::barrier;
    bool message = false;  // a send or receive: post holds a channel::P2pPost
    std::vector<size_t> arrays;  // vector collectives: the four arrays
    void *block = nullptr;       // nullptr: nothing pending (or nothing to move)
    uint64_t src_off = 0, dst_off = 0, out_len = 0;
    uint64_t received = 0;       // source bytes in so far
    // Memory mode rdma: the results' pieces, written into the member's
    // memory when the record completes (a receive's trimmed to its message).
    bool rdma = false;
    std::vector<fabric::RmaLink::Piece> writes;
};

// One collective in flight: the proxy's request and block, and where the
// result goes back in the member's block.
struct InFlight {
    client::Request *request = nullptr;
    void *block = nullptr;
    uint32_t slot = 0;
    uint64_t out_offset = 0, out_bytes = 0;
    bool message = false;  // a point-to-point receive: its result is the message
    bool rdma = false;  // the answer carries no bytes: `writes` are the result
    std::vector<fabric::RmaLink::Piece> writes;
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
        if (type == MsgType::kProxyFabric) {
            if (!open_rma(payload) || !receive(&type, &payload)) return false;
        }
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

    // PROXY_FABRIC (memory mode rdma): an RMA link to the member's endpoint,
    // which must be on the member's own host, answered by REPLY.
    bool open_rma(const std::vector<uint8_t> &payload) {
        control::ProxyFabric f;
        std::string error;
        if (control::decode(payload.data(), payload.size(), &f, &error) != DP_OK) {
            DP_LOG_WARN("team proxy for {}: {}: closing", options_.peer, error);
            return false;
        }
        control::Reply reply{DP_OK, ""};
        try {
            rma_ = std::make_unique<fabric::RmaLink>(f.provider, f.address, options_.peer,
                                                     host_of(options_.peer));
            // An address on another host would make us read or write a third
            // party's memory in the member's name: only the member's own.
            const std::string host = fabric::address_host(f.address, rma_->address_format());
            if (!host.empty() && host != host_of(options_.peer)) {
                rma_.reset();
                reply = {DP_ERR_DENIED,
                         fmt::format("the RMA endpoint {} is not on the member's host {}", host,
                                     host_of(options_.peer))};
            }
        } catch (const fabric::FabricError &e) {
            reply = {DP_ERR_UNSUPPORTED, fmt::format("the agent's host: {}", e.what())};
        }
        if (reply.status != DP_OK)
            DP_LOG_WARN("team proxy for {}: no RMA link: {}", options_.peer, reply.reason);
        std::vector<uint8_t> out;
        control::encode(reply, &out);
        return send(MsgType::kReply, out) && reply.status == DP_OK;
    }

    void read_loop() {
        MsgType type;
        std::vector<uint8_t> payload;
        while (receive(&type, &payload)) {
            std::string error;
            // A post whose source bytes are still coming takes only them.
            if (pending_.block != nullptr && type == MsgType::kProxyData) {
                control::ProxyData d;
                if (control::decode(payload.data(), payload.size(), &d, &error) != DP_OK ||
                    !more(d, &error)) {
                    DP_LOG_WARN("team proxy for {}: {}: closing", options_.peer, error);
                    return;
                }
                if (pending_.received == pending_.post.in_total && !launch()) return;
                continue;
            }
            control::ProxyPost m;
            if (pending_.block != nullptr || type != MsgType::kProxyPost ||
                control::decode(payload.data(), payload.size(), &m, &error) != DP_OK) {
                DP_LOG_WARN("team proxy for {}: {} {}{}: closing", options_.peer,
                            channel::msg_type_name(type), error,
                            pending_.block ? " (PROXY_DATA expected)" : "");
                return;
            }
            if (!begin(std::move(m))) return;
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
        control::ProxyDone done{slot, status, 0, 0, 0, 0, {}};
        std::vector<uint8_t> out;
        control::encode(done, &out);
        return send(MsgType::kProxyDone, out);
    }

    // Reads a remote-memory post's source bytes into its block; false (the
    // post refused, its block given back) when the member's memory refused
    // or did not answer — then the link is broken and the caller ends it.
    bool read_member(uint32_t slot, void *block, const std::vector<fabric::RmaLink::Piece> &in) {
        uint64_t bytes = 0;
        for (const auto &piece : in) bytes += piece.bytes;
        const std::string error = rma_->read(in, rma_deadline(bytes));
        if (error.empty()) return true;
        context_->pool().release(block);
        refuse(slot, DP_COMP_ADDRESS_DENIED, "reading the member's memory: " + error);
        return false;
    }

    // A PROXY_POST: checked, its block laid out and its first bytes in;
    // posted now, or once the rest of its bytes came (more()).
    bool begin(control::ProxyPost m) {
        if (channel::is_p2p_post(m.post[0])) return begin_message(std::move(m));
        channel::CollPost p;
        static_assert(sizeof(p) == sizeof(m.post));
        std::memcpy(&p, m.post, sizeof(p));
        const std::optional<coll::Collective> c = channel::collective_of(p);
        if (!c) return refuse(m.slot, DP_COMP_INVALID_OPCODE, "not a collective");
        if (*c != coll::Collective::barrier && p.dtype >= DP_DTYPE_COUNT)
            return refuse(m.slot, DP_COMP_INVALID_FIELD, "dtype out of range");
        const uint64_t elem =
            *c == coll::Collective::barrier ? 1 : dp_dtype_size(dp_dtype_t(p.dtype));
        // The bytes the collective reads at src and writes at dst, and where
        // they sit in a block that holds both (client/staged_collective.h).
        Pending next;
        uint64_t in_len = 0;
        client::BlockLayout layout;
        uint64_t read_bytes = 0, write_bytes = 0;  // the table's (rdma moves only these)
        std::vector<coll::VectorBlock> received;   // a vector collective's result blocks
        if (coll::is_vector(*c)) {
            if (m.counts.size() != coll::vector_counts_bytes(size_))
                return refuse(m.slot, DP_COMP_INVALID_FIELD, "counts block of the wrong length");
            coll::MemberVector v;
            std::string why;
            if (coll::decode_vector_counts(m.counts.data(), m.counts.size(), size_, elem,
                                           channel::kMaxCollBytes, &v, &why) != DP_OK)
                return refuse(m.slot, DP_COMP_INVALID_FIELD, why);
            for (const coll::VectorBlock &b : v.send) in_len = std::max(in_len, b.end());
            for (const coll::VectorBlock &b : v.recv)
                next.out_len = std::max(next.out_len, b.end());
            layout = client::vector_block_layout(in_len, next.out_len);
            read_bytes = in_len;
            received = std::move(v.recv);
            next.arrays.resize(size_t(coll::kVectorArrays) * size_);
            for (size_t i = 0; i < next.arrays.size(); ++i) {
                uint64_t value;
                std::memcpy(&value, m.counts.data() + i * sizeof(value), sizeof(value));
                next.arrays[i] = size_t(value);
            }
        } else if (*c != coll::Collective::barrier) {
            if (p.root >= size_ && coll::rooted(*c))
                return refuse(m.slot, DP_COMP_INVALID_FIELD, "root out of range");
            const coll::MemberBytes need =
                coll::member_bytes(*c, p.count, elem, size_, rank_, p.root);
            layout = client::block_layout(*c, need, p.src, p.dst);
            in_len = layout.in_len;
            next.out_len = layout.out_len;
            read_bytes = need.source;
            write_bytes = need.destination;
        }
        const bool rdma = m.memory == control::kProxyRemoteMemory;
        next.rdma = rdma;
        if ((in_len || next.out_len) && rdma) {
            // The member's own buffers: our block laid out as its bounce
            // block would be, filled by reading its source.
            if (!rma_)
                return refuse(m.slot, DP_COMP_INVALID_FIELD,
                              "a remote-memory post on a link that sent no PROXY_FABRIC");
            if (layout.bytes == 0)
                return refuse(m.slot, DP_COMP_INVALID_FIELD, "buffers whose extents overflow");
            next.src_off = layout.in_off;
            next.dst_off = layout.out_off;
            next.block = context_->pool().allocate(layout.bytes);
            if (!next.block)
                return refuse(m.slot, DP_COMP_INVALID_SIZE, "no room in the proxy's pool");
            auto *base = static_cast<uint8_t *>(next.block);
            if (read_bytes && !read_member(m.slot, next.block,
                                           {{base + next.src_off, read_bytes, m.src_base,
                                             m.src_key}}))
                return !rma_->broken();
            for (const coll::VectorBlock &b : received)
                if (b.bytes)
                    next.writes.push_back({base + next.dst_off + b.offset, b.bytes,
                                           m.dst_base + b.offset, m.dst_key});
            if (write_bytes)
                next.writes.push_back({base + next.dst_off, write_bytes, m.dst_base, m.dst_key});
        } else if (in_len || next.out_len) {
            if (!inside(p.src, in_len, m, &next.src_off) ||
                !inside(p.dst, next.out_len, m, &next.dst_off))
                return refuse(m.slot, DP_COMP_ADDRESS_DENIED,
                              "buffers outside the bounce block the post names");
            next.block = context_->pool().allocate(m.block_bytes);
            if (!next.block)
                return refuse(m.slot, DP_COMP_INVALID_SIZE, "no room in the proxy's pool");
            if (!m.in.empty())
                std::memcpy(static_cast<uint8_t *>(next.block) + m.in_offset, m.in.data(),
                            m.in.size());
        } else if (m.in_total != 0) {
            return refuse(m.slot, DP_COMP_INVALID_FIELD, "source bytes for a post that reads none");
        }
        next.collective = *c;
        next.head = p;
        next.received = m.in.size();
        m.in.clear();
        next.post = std::move(m);
        pending_ = std::move(next);
        if (pending_.received < pending_.post.in_total) return true;  // more() brings the rest
        return launch();
    }

    // A send, receive or probe (channel/p2p_post.h): its buffer is the
    // block the member names (a send's message, a receive's buffer), the
    // agent checks the rest as any member's. A probe is answered at once.
    bool begin_message(control::ProxyPost m) {
        channel::P2pPost p;
        static_assert(sizeof(p) == sizeof(m.post));
        std::memcpy(&p, m.post, sizeof(p));
        client::TeamP2p *messages = nullptr;
        if (team_->p2p(&messages) != DP_OK)
            return refuse(m.slot, DP_COMP_INVALID_SIZE, "no room for the team's messages");
        if (p.opcode == channel::kP2pProbe) {
            int flag = 0;
            dp_msg_status_t st{};
            const dp_status_t s = messages->probe(p.peer, p.tag, &flag, &st);
            if (s != DP_OK)
                return refuse(m.slot, DP_COMP_INVALID_FIELD,
                              std::string("probing: ") + dp_status_name(s));
            control::ProxyDone done{m.slot, DP_COMP_SUCCESS, flag ? uint64_t(st.bytes) : 0,
                                    flag ? uint32_t(st.source) : UINT32_MAX,
                                    flag ? uint64_t(uint32_t(st.tag)) : 0, 0, {}};
            std::vector<uint8_t> out;
            control::encode(done, &out);
            return send(MsgType::kProxyDone, out);
        }
        const bool send_it = p.opcode == channel::kP2pSend;
        const bool rdma = m.memory == control::kProxyRemoteMemory;
        if (rdma && !rma_)
            return refuse(m.slot, DP_COMP_INVALID_FIELD,
                          "a remote-memory post on a link that sent no PROXY_FABRIC");
        if (!rdma && p.bytes != 0 && (p.buf != m.block_base || p.bytes > m.block_bytes))
            return refuse(m.slot, DP_COMP_ADDRESS_DENIED,
                          "a message buffer outside the bounce block the post names");
        if (m.in_total != (send_it && !rdma ? p.bytes : 0))
            return refuse(m.slot, DP_COMP_INVALID_FIELD,
                          "source bytes that are not the send's message");
        Pending next;
        next.message = true;
        next.rdma = rdma;
        next.out_len = send_it ? 0 : p.bytes;
        if (p.bytes) {
            if (p.bytes > channel::kMaxCollBytes)
                return refuse(m.slot, DP_COMP_INVALID_SIZE, "a message larger than the limit");
            next.block = context_->pool().allocate(p.bytes);
            if (!next.block)
                return refuse(m.slot, DP_COMP_INVALID_SIZE, "no room in the proxy's pool");
            if (!m.in.empty()) std::memcpy(next.block, m.in.data(), m.in.size());
            if (rdma && send_it &&
                !read_member(m.slot, next.block, {{next.block, p.bytes, m.src_base, m.src_key}}))
                return !rma_->broken();
            if (rdma && !send_it)
                next.writes.push_back({next.block, p.bytes, m.dst_base, m.dst_key});
        }
        std::memcpy(&next.head, m.post, sizeof(m.post));  // (read back as a P2pPost)
        next.received = m.in.size();
        m.in.clear();
        m.in_offset = 0;
        next.post = std::move(m);
        pending_ = std::move(next);
        if (pending_.received < pending_.post.in_total) return true;
        return launch();
    }

    // The next piece of the pending post's source bytes: in order, in its
    // source range, no more than it announced.
    bool more(const control::ProxyData &d, std::string *error) {
        const control::ProxyPost &m = pending_.post;
        const uint64_t at = m.in_offset + pending_.received;
        if (d.slot != m.slot || d.offset != at ||
            d.bytes.size() > m.in_total - pending_.received) {
            *error = fmt::format("PROXY_DATA for slot {} at {} ({} bytes): slot {} expects at {} "
                                 "at most {}",
                                 d.slot, d.offset, d.bytes.size(), m.slot, at,
                                 m.in_total - pending_.received);
            return false;
        }
        std::memcpy(static_cast<uint8_t *>(pending_.block) + at, d.bytes.data(), d.bytes.size());
        pending_.received += d.bytes.size();
        return true;
    }

    // Posts the pending collective on the team.
    bool launch() {
        Pending f = std::move(pending_);
        pending_ = Pending{};
        const channel::CollPost &p = f.head;
        auto *base = static_cast<uint8_t *>(f.block);
        void *src = f.block ? base + f.src_off : nullptr;
        void *dst = f.block ? base + f.dst_off : nullptr;
        client::Request *r = nullptr;
        dp_status_t s;
        if (f.message) {
            channel::P2pPost m;
            std::memcpy(&m, &f.head, sizeof(m));
            client::TeamP2p *messages = nullptr;
            s = team_->p2p(&messages);
            if (s == DP_OK)
                s = messages->post(m.opcode, m.flags, f.block, m.bytes, m.peer, m.tag, &r);
        } else if (coll::is_vector(f.collective)) {
            const size_t *a = f.arrays.data();
            s = team_->post_vector(f.collective, src, a, a + size_, dst, a + 2 * size_,
                                   a + 3 * size_, dp_dtype_t(p.dtype), dp_op_t(p.redop), p.root,
                                   &r);
        } else {
            s = team_->post(f.collective, src, dst, p.count, dp_dtype_t(p.dtype),
                            dp_op_t(p.redop), p.root, &r);
        }
        if (s != DP_OK) {
            if (f.block) context_->pool().release(f.block);
            return refuse(f.post.slot, s == DP_ERR_TOO_LARGE ? DP_COMP_INVALID_SIZE
                                                             : DP_COMP_INVALID_FIELD,
                          std::string("posting it: ") + dp_status_name(s));
        }
        {
            std::lock_guard lock(mutex_);
            in_flight_.push_back({r, f.block, f.post.slot, f.dst_off, f.block ? f.out_len : 0,
                                  f.message, f.rdma, std::move(f.writes)});
        }
        wake_.notify_one();
        return true;
    }

    // Sends each collective's and message's result back as its record
    // completes. A team's collectives complete in their posting order, but
    // a message may complete before older posts (a receive waits for its
    // sender, a send may not), so every record in flight is looked at each
    // turn, and the wait on the oldest is short while others are in flight.
    void complete_loop() {
        for (;;) {
            std::vector<InFlight> ready;
            InFlight oldest;
            size_t waiting = 0;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return !in_flight_.empty() || !reading_; });
                if (in_flight_.empty()) return;
                for (auto it = in_flight_.begin(); it != in_flight_.end();) {
                    if (__atomic_load_n(&it->request->record->status, __ATOMIC_ACQUIRE) != 0) {
                        ready.push_back(*it);
                        it = in_flight_.erase(it);
                    } else {
                        ++it;
                    }
                }
                if (ready.empty()) oldest = in_flight_.front();
                waiting = in_flight_.size();
            }
            for (const InFlight &f : ready) answer(f);
            if (!ready.empty()) continue;
            const dp_status_t s = context_->wait_record(oldest.request->record, DP_WAIT_BLOCK,
                                                        waiting > 1 ? kScanNs : kSliceNs);
            if (s == DP_OK) continue;
            const uint64_t until = drain_until_.load(std::memory_order_relaxed);
            if (s == DP_ERR_TIMEOUT && !stopping_.load(std::memory_order_relaxed) &&
                (until == 0 || timing::now_ns() <= until))
                continue;
            // The agent is gone, we stop, or the member left and its last
            // posts did not end in time: what is left fails alike (its
            // memory stays: the agent may still touch it).
            std::lock_guard lock(mutex_);
            for (const InFlight &rest : in_flight_) {
                control::ProxyDone lost{rest.slot, channel::kCollMemberLost, 0, 0, 0, 0, {}};
                std::vector<uint8_t> out;
                control::encode(lost, &out);
                send(MsgType::kProxyDone, out);
            }
            in_flight_.clear();
            if (!reading_) return;
        }
    }

    // A completed record's answer: the result's bytes (all but the last
    // piece first, then the last with the status), then its slot and block
    // given back.
    void answer(const InFlight &f) {
        const dp_completion_t &rec = *f.request->record;
        control::ProxyDone done;
        done.slot = f.slot;
        done.status = __atomic_load_n(&rec.status, __ATOMIC_ACQUIRE);
        done.bytes_completed = rec.bytes_completed;
        done.result = rec.result;
        done.value = rec.value;
        // A receive's result is the message, which may be shorter than its buffer.
        const uint64_t out_bytes =
            f.message ? std::min(f.out_bytes, rec.bytes_completed) : f.out_bytes;
        bool broken = false;
        if (f.rdma) {
            if (done.status == DP_COMP_SUCCESS && out_bytes && !f.writes.empty()) {
                // Memory mode rdma: straight into the member's memory,
                // delivered before the answer goes (which carries no bytes).
                std::vector<fabric::RmaLink::Piece> writes = f.writes;
                if (f.message) writes.front().bytes = out_bytes;
                const std::string error = rma_->write(writes, rma_deadline(out_bytes));
                if (!error.empty()) {
                    DP_LOG_WARN("team proxy for {}: slot {}: writing the member's memory: {}",
                                options_.peer, f.slot, error);
                    done.status = DP_COMP_ADDRESS_DENIED;
                    broken = rma_->broken();
                }
            }
        } else if (done.status == DP_COMP_SUCCESS && out_bytes) {
            const auto *out = static_cast<const uint8_t *>(f.block) + f.out_offset;
            uint64_t at = 0;
            for (; out_bytes - at > control::kProxyChunkBytes; at += control::kProxyChunkBytes) {
                control::ProxyData d{f.slot, f.out_offset + at,
                                     {out + at, out + at + control::kProxyChunkBytes}};
                std::vector<uint8_t> piece;
                control::encode(d, &piece);
                send(MsgType::kProxyData, piece);
            }
            done.out.assign(out + at, out + out_bytes);
            done.out_offset = f.out_offset + at;
        }
        std::vector<uint8_t> payload;
        control::encode(done, &payload);
        send(MsgType::kProxyDone, payload);
        team_->release(f.request);
        if (f.block) context_->pool().release(f.block);
        // A member whose memory refused us has no RMA link any more: its
        // link ends (the reading thread sees it), and what it still has in
        // flight fails as a member's that left.
        if (broken) ::shutdown(socket_.get(), SHUT_RDWR);
    }

    UniqueFd socket_;
    ProxyOptions options_;
    const std::atomic<bool> &stopping_;
    std::unique_ptr<client::Context> context_;
    std::unique_ptr<fabric::RmaLink> rma_;  // memory mode rdma (PROXY_FABRIC)
    client::Team *team_ = nullptr;
    uint32_t rank_ = 0, size_ = 1;
    std::mutex send_mutex_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<InFlight> in_flight_;  // under mutex_
    Pending pending_;                 // the reading thread's
    bool reading_ = true;             // under mutex_
    std::atomic<uint64_t> drain_until_{0};  // set when reading ends
};

}  // namespace

void serve_team_proxy(UniqueFd socket, const ProxyOptions &options,
                      const std::atomic<bool> &stopping) {
    Proxy(std::move(socket), options, stopping).run();
}

}  // namespace deputy::proxy
