#include "agent/team_engine.h"

#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "agent/team_engine_state.h"
#include "channel/coll_desc.h"
#include "common/log.h"
#include "common/scratch.h"
#include "common/timing.h"
#include "mover/kernels.h"
#include "mover/wait.h"
#include "mover/names.h"

namespace deputy::agent {
namespace {

namespace ch = channel;

// Bytes per chunk: a batch's worth of work for one engine. Small enough that
// a 1 MiB allreduce spreads over 4 batches (both engines busy), large enough
// that per-batch overhead stays small next to the copy.
constexpr uint64_t kChunkBytes = 256 << 10;
// Operations moving at most this many bytes in total run on the service
// thread itself (see start()).
constexpr uint64_t kInlineBytes = 256 << 10;
// Copy-only operations pack this many independent moves per batch.
constexpr size_t kMovesPerBatch = 16;
// A member may not queue more posts than this (the client keeps under it).
constexpr size_t kMaxQueued = DP_TEAM_MAX_OUTSTANDING;

dp_desc_t move_desc(void *dst, const void *src, uint64_t len) {
    dp_desc_t d{};
    d.opcode = DP_OP_MEMMOVE;
    d.dst = reinterpret_cast<uint64_t>(dst);
    d.src = reinterpret_cast<uint64_t>(src);
    d.size = len;
    return d;
}

dp_desc_t reduce_desc(void *dst, const void *a, const void *b, uint64_t len, uint8_t dtype,
                      uint8_t op) {
    dp_desc_t d{};
    d.opcode = DP_OP_REDUCE;
    d.dtype = dtype;
    d.redop = op;
    d.dst = reinterpret_cast<uint64_t>(dst);
    d.src = reinterpret_cast<uint64_t>(a);
    if (b) {
        d.src2 = reinterpret_cast<uint64_t>(b);
    } else {
        d.flags = DP_FLAG_ACCUMULATE;  // dst = dst op a
    }
    d.size = len;
    return d;
}

uint8_t* ptr(void *p) { return static_cast<uint8_t *>(p); }

}  // namespace

SecretDigest secret_digest(const std::string &secret) {
    SecretDigest d{};
    crypto_generichash(d.data(), d.size(), reinterpret_cast<const unsigned char *>(secret.data()),
                       secret.size(), nullptr, 0);
    return d;
}

bool same_digest(const SecretDigest &a, const SecretDigest &b) {
    return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

uint32_t TeamEngine::teams_of(uint32_t client) const {
    uint32_t n = 0;
    for (const auto &[id, t] : teams_)
        n += std::count(t->members.begin(), t->members.end(), client) != 0;
    for (const auto &[key, j] : joining_) n += j.client == client;
    return n;
}

TeamEngine::TeamEngine(mover::Device *device, const mover::ExecLimits &limits,
                       const AgentConfig &config, Hooks hooks, Internode *internode)
    : device_(device), limits_(limits), config_(config), hooks_(std::move(hooks)),
      internode_(internode) {}

TeamEngine::~TeamEngine() = default;

void TeamEngine::join(ClientSession &s, const ch::control::TeamJoin &m) {
    auto answer = [&](dp_status_t status, std::string why) {
        if (status != DP_OK)
            DP_LOG_LIMITED(s.space().log(), "agent: team join from client {} (pid {}) refused: {}",
                           s.id, s.creds.pid, why);
        hooks_.send_ready(s, {status, 0, std::move(why)});
    };
    if (m.size == 0 || m.size > DP_TEAM_MAX_SIZE)
        return answer(DP_ERR_INVALID, fmt::format("team '{}': size {} (1..{})", m.key, m.size,
                                                  DP_TEAM_MAX_SIZE));
    if (m.rank >= m.size)
        return answer(DP_ERR_INVALID,
                      fmt::format("team '{}': rank {} is not in 0..{}", m.key, m.rank, m.size - 1));
    if (teams_of(s.id) >= config_.max_teams_per_client)
        return answer(DP_ERR_TOO_LARGE,
                      fmt::format("team '{}': this client is in {} teams already "
                                  "(max_teams_per_client = {})",
                                  m.key, teams_of(s.id), config_.max_teams_per_client));
    const SecretDigest secret = secret_digest(m.secret);
    if (multi_node()) return join_nodes(s, m, secret);
    Team *t = nullptr;
    if (auto it = forming_.find(m.key); it != forming_.end()) {
        t = teams_.at(it->second).get();
        if (!same_digest(t->secret, secret))
            return answer(DP_ERR_DENIED,
                          fmt::format("team '{}': wrong job secret (the team forming under this "
                                      "key belongs to another job)",
                                      m.key));
    } else {
        if (forming_.size() >= config_.max_forming_teams)
            return answer(DP_ERR_TOO_LARGE,
                          fmt::format("team '{}': {} teams are forming already "
                                      "(max_forming_teams = {})",
                                      m.key, forming_.size(), config_.max_forming_teams));
        auto team = std::make_unique<Team>();
        team->id = next_team_id_++;
        team->key = m.key;
        team->secret = secret;
        team->size = m.size;
        team->members.assign(m.size, 0);
        team->timeout_ms = m.timeout_ms ? m.timeout_ms : uint32_t(kDefaultTeamTimeoutMs);
        team->deadline_ns = timing::now_ns() + uint64_t(team->timeout_ms) * 1'000'000;
        t = team.get();
        forming_[m.key] = team->id;
        teams_[team->id] = std::move(team);
    }
    if (t->size != m.size)
        return answer(DP_ERR_MISMATCH, fmt::format("team '{}' has size {}; this member says {}",
                                                   m.key, t->size, m.size));
    if (t->members[m.rank] != 0)
        return answer(DP_ERR_INVALID,
                      fmt::format("team '{}': rank {} joined already", m.key, m.rank));
    t->members[m.rank] = s.id;
    if (std::count(t->members.begin(), t->members.end(), 0u) != 0) return;  // wait for the rest
    forming_.erase(t->key);
    t->ready = true;
    // Per-member state only for teams that formed: a forming team costs a
    // few bytes per rank, whatever a flood of joins asks for.
    t->queues.resize(t->size);
    for (uint32_t r = 0; r < t->size; ++r) t->local_ranks.push_back(r);
    DP_LOG_INFO("agent: team {} '{}' formed: {} member(s)", t->id, t->key, t->size);
    for (uint32_t id : t->members)
        if (ClientSession *c = hooks_.find_client(id)) hooks_.send_ready(*c, {DP_OK, t->id, ""});
}

void TeamEngine::form_timeouts() {
    if (forming_.empty()) return;
    const uint64_t now = timing::now_ns();
    for (auto it = forming_.begin(); it != forming_.end();) {
        Team &t = *teams_.at(it->second);
        if (now < t.deadline_ns) {
            ++it;
            continue;
        }
        std::string missing;
        uint32_t joined = 0;
        for (uint32_t r = 0; r < t.size; ++r) {
            if (t.members[r]) ++joined;
            else missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
        std::string why = fmt::format("team '{}': {} of {} members joined within {} ms; missing "
                                      "rank(s) {}",
                                      t.key, joined, t.size, t.timeout_ms, missing);
        DP_LOG_WARN("agent: {}", why);
        for (uint32_t id : t.members)
            if (ClientSession *c = id ? hooks_.find_client(id) : nullptr)
                hooks_.send_ready(*c, {DP_ERR_TIMEOUT, 0, why});
        const uint32_t team_id = t.id;
        it = forming_.erase(it);
        teams_.erase(team_id);
    }
}

TeamEngine::Team *TeamEngine::find_member_team(const ClientSession &s, uint32_t team_id,
                                               uint32_t *rank) {
    auto it = teams_.find(team_id);
    if (it == teams_.end() || !it->second->ready) return nullptr;
    Team &t = *it->second;
    for (uint32_t r = 0; r < t.size; ++r)
        if (t.members[r] == s.id) {
            *rank = r;
            return &t;
        }
    return nullptr;
}

dp_status_t TeamEngine::leave(ClientSession &s, uint32_t team_id, std::string *reason) {
    uint32_t rank = 0;
    Team *t = find_member_team(s, team_id, &rank);
    if (!t) {
        *reason = fmt::format("not a member of team {}", team_id);
        return DP_ERR_INVALID;
    }
    // An operation still running keeps going: it holds the memory it uses.
    break_team(*t, fmt::format("rank {} left team '{}'", rank, t->key));
    t->members[rank] = 0;
    if (std::count(t->members.begin(), t->members.end(), 0u) == t->size) {
        retire(*t);
        teams_.erase(team_id);
    }
    return DP_OK;
}

void TeamEngine::break_team(Team &t, const std::string &why) {
    if (!t.broken) {
        t.broken = true;
        t.broken_reason = why;
        // The other nodes' agents break it too; our step in flight fails.
        if (t.spans_nodes) internode_->broken(t.uid, why);
    }
    for (uint32_t r = 0; r < t.size; ++r) {
        for (const dp_desc_t &d : t.queues[r]) {
            publish(t.members[r], d.completion, DP_COMP_MEMBER_LOST, 0, d.user);
            ++failed_ops_;
        }
        t.queues[r].clear();
    }
}

void TeamEngine::client_gone(ClientSession &s) {
    std::vector<uint32_t> emptied;
    for (auto &[id, team] : teams_) {
        Team &t = *team;
        auto at = std::find(t.members.begin(), t.members.end(), s.id);
        if (at == t.members.end()) continue;
        const uint32_t rank = uint32_t(at - t.members.begin());
        if (!t.ready) {  // still forming: the others keep waiting for a new rank `rank`
            *at = 0;
            if (std::count(t.members.begin(), t.members.end(), 0u) == t.size) emptied.push_back(id);
            continue;
        }
        // An operation running over this client's buffers goes on: it holds
        // their memory (Execution::memories), so nothing waits here.
        *at = 0;
        break_team(t, fmt::format("rank {} (pid {}) of team '{}' left or died", rank, s.creds.pid,
                                  t.key));
        DP_LOG_WARN("agent: {}", t.broken_reason);
        if (std::count(t.members.begin(), t.members.end(), 0u) == t.size) emptied.push_back(id);
    }
    for (uint32_t id : emptied) {
        if (!teams_.at(id)->ready) forming_.erase(teams_.at(id)->key);
        retire(*teams_.at(id));
        teams_.erase(id);
    }
    forget_joins(s.id);
}

void TeamEngine::post(ClientSession &s, const dp_desc_t &d) {
    uint32_t rank = 0;
    Team *t = find_member_team(s, uint32_t(d.src2), &rank);
    if (!t) {
        DP_LOG_LIMITED(s.space().log(), "client {}: {} for team {}, of which it is not a member",
                       s.id, ch::coll_opcode_name(d.opcode), uint32_t(d.src2));
        publish(s.id, d.completion, DP_COMP_INVALID_FIELD, 0, d.user);
        return;
    }
    if (t->broken) {
        publish(s.id, d.completion, DP_COMP_MEMBER_LOST, 0, d.user);
        return;
    }
    if (t->queues[rank].size() >= kMaxQueued) {
        publish(s.id, d.completion, DP_COMP_INVALID_BATCH, 0, d.user);
        return;
    }
    t->queues[rank].push_back(d);
    try_start(*t);
}

void TeamEngine::try_start(Team &t) {
    while (!t.running && !t.broken) {
        for (uint32_t r : t.local_ranks)
            if (t.queues[r].empty()) return;
        std::vector<dp_desc_t> heads(t.size);
        for (uint32_t r : t.local_ranks) {
            heads[r] = t.queues[r].front();
            t.queues[r].pop_front();
        }
        if (t.spans_nodes) start_nodes(t, std::move(heads));
        else start(t, std::move(heads));
    }
}

void TeamEngine::fail_all(const std::vector<dp_desc_t> &heads, Team &t, uint8_t status) {
    for (uint32_t r : t.local_ranks)
        publish(t.members[r], heads[r].completion, status, 0, heads[r].user);
    ++failed_ops_;
}

void TeamEngine::start(Team &t, std::vector<dp_desc_t> heads) {
    const dp_desc_t &h0 = heads[0];
    const uint32_t p = t.size;
    // The members must agree; name the first difference.
    for (uint32_t r = 1; r < p; ++r) {
        const std::string diff = head_difference(h0, heads[r]);
        if (!diff.empty()) {
            DP_LOG_WARN("agent: team '{}' operation {}: rank 0 and rank {} disagree: {}", t.key,
                        t.ops, r, diff);
            ++t.ops;
            return fail_all(heads, t, DP_COMP_MISMATCH);
        }
    }
    ++t.ops;
    const uint8_t op = h0.opcode;
    const uint64_t esize = mover::dtype_size(h0.dtype);
    if (uint8_t invalid = head_invalid(h0, p)) return fail_all(heads, t, invalid);
    if (op == ch::kCollBarrier || h0.size == 0) {
        t.running = std::make_unique<Execution>();
        t.running->heads = std::move(heads);
        return finish(t, DP_COMP_SUCCESS);
    }
    const CollLengths len = coll_lengths(op, h0.size, esize, p);
    // Where every buffer is: all in the pools -> engines; else bounce.
    std::vector<uint8_t *> src(p), dst(p);
    std::vector<std::shared_ptr<ClientMemory>> memories(p);
    bool all_mapped = true;
    for (uint32_t r = 0; r < p; ++r) {
        ClientSession *c = hooks_.find_client(t.members[r]);
        if (!c) return fail_all(heads, t, DP_COMP_MEMBER_LOST);
        memories[r] = c->memory;
        const ClientSpace &space = c->space();
        src[r] = ptr(space.translate(heads[r].src, len.src, mover::Access::read));
        dst[r] = ptr(space.translate(heads[r].dst, len.dst, mover::Access::write));
        if (!src[r] || !dst[r]) {
            const bool src_ok = src[r] || space.direct_allows(heads[r].src, len.src);
            const bool dst_ok = dst[r] || space.direct_allows(heads[r].dst, len.dst);
            if (!src_ok || !dst_ok) {
                DP_LOG_LIMITED(space.log(),
                               "agent: team '{}' {}: rank {}'s {} [0x{:x}, +{}) is outside its "
                               "pool and registered memory",
                               t.key, ch::coll_opcode_name(op), r,
                               src_ok ? "destination" : "source",
                               src_ok ? heads[r].dst : heads[r].src, src_ok ? len.dst : len.src);
                return fail_all(heads, t, DP_COMP_ADDRESS_DENIED);
            }
            all_mapped = false;
        }
    }
    bool in_place_alltoall = false;
    if (op == ch::kCollAlltoall)
        for (uint32_t r = 0; r < p; ++r) in_place_alltoall |= heads[r].src == heads[r].dst;
    if (!all_mapped || in_place_alltoall) {
        std::string why;
        const bool ok = run_bounced(t, heads, &why);
        if (!ok) DP_LOG_WARN("agent: team '{}' {}: {}", t.key, ch::coll_opcode_name(op), why);
        t.running = std::make_unique<Execution>();
        t.running->heads = std::move(heads);
        t.running->bytes = len.dst;
        return finish(t, ok ? DP_COMP_SUCCESS : DP_COMP_ADDRESS_DENIED);
    }

    auto ex = std::make_unique<Execution>();
    ex->bytes = len.dst;
    ex->memories = std::move(memories);
    const uint64_t n = h0.size * esize;
    const uint64_t chunk = std::max<uint64_t>(esize, kChunkBytes / esize * esize);
    const uint8_t dt = h0.dtype, rop = h0.redop;
    std::vector<dp_desc_t> moves;  // packed copy-only work
    auto add_move = [&](void *d, const void *s, uint64_t l) {
        if (d == s) return;
        for (uint64_t off = 0; off < l; off += chunk) {
            moves.push_back(move_desc(ptr(d) + off, static_cast<const uint8_t *>(s) + off,
                                      std::min(chunk, l - off)));
            if (moves.size() == kMovesPerBatch) ex->batches.push_back(std::move(moves)), moves = {};
        }
    };
    // One block reduced across members into `out`: out = b0 op b1 op ... (rank order).
    auto reduce_block = [&](uint8_t *out, const std::vector<const uint8_t *> &blocks, uint64_t l,
                            std::vector<uint8_t *> copies) {
        for (uint64_t off = 0; off < l; off += chunk) {
            const uint64_t c = std::min(chunk, l - off);
            std::vector<dp_desc_t> b;
            if (p == 1) {
                if (out != blocks[0]) b.push_back(move_desc(out + off, blocks[0] + off, c));
            } else {
                if (out == blocks[0]) b.push_back(reduce_desc(out + off, blocks[1] + off, nullptr, c, dt, rop));
                else b.push_back(reduce_desc(out + off, blocks[0] + off, blocks[1] + off, c, dt, rop));
                for (uint32_t m = 2; m < p; ++m)
                    b.push_back(reduce_desc(out + off, blocks[m] + off, nullptr, c, dt, rop));
            }
            for (uint8_t *copy : copies)
                if (copy != out) b.push_back(move_desc(copy + off, out + off, c));
            if (!b.empty()) ex->batches.push_back(std::move(b));
        }
    };
    switch (op) {
        case ch::kCollAllreduce: {
            std::vector<const uint8_t *> blocks(src.begin(), src.end());
            reduce_block(dst[0], blocks, n, std::vector<uint8_t *>(dst.begin() + 1, dst.end()));
            break;
        }
        case ch::kCollReduceScatter:
            for (uint32_t r = 0; r < p; ++r) {
                std::vector<const uint8_t *> blocks(p);
                for (uint32_t m = 0; m < p; ++m) blocks[m] = src[m] + r * n;
                reduce_block(dst[r], blocks, n, {});
            }
            break;
        case ch::kCollAllgather:
            for (uint32_t r = 0; r < p; ++r)
                for (uint32_t m = 0; m < p; ++m) add_move(dst[r] + m * n, src[m], n);
            break;
        case ch::kCollAlltoall:
            for (uint32_t r = 0; r < p; ++r)
                for (uint32_t m = 0; m < p; ++m) add_move(dst[r] + m * n, src[m] + r * n, n);
            break;
        case ch::kCollBcast: {
            const uint32_t root = uint32_t(h0.aux);
            for (uint32_t r = 0; r < p; ++r)
                if (r != root) add_move(dst[r], src[root], n);
            break;
        }
    }
    if (!moves.empty()) ex->batches.push_back(std::move(moves));
    ex->records.reset(new dp_completion_t[ex->batches.size() ? ex->batches.size() : 1]());
    ex->heads = std::move(heads);
    t.running = std::move(ex);
    if (t.running->batches.empty()) return finish(t, DP_COMP_SUCCESS);
    if (uint64_t(p) * len.dst <= kInlineBytes) {
        // Small: waking an engine and being woken by it costs more than the
        // work, so the service thread runs the batches itself.
        uint8_t status = DP_COMP_SUCCESS;
        static const mover::LocalAddressSpace local;
        for (const std::vector<dp_desc_t> &members : t.running->batches) {
            dp_desc_t batch{};
            batch.opcode = DP_OP_BATCH;
            batch.src = reinterpret_cast<uint64_t>(members.data());
            batch.size = members.size();
            mover::OpResult r = mover::execute(batch, local, limits_);
            if (r.status != DP_COMP_SUCCESS && status == DP_COMP_SUCCESS) status = r.status;
        }
        return finish(t, status);
    }
    advance(t);
}

bool TeamEngine::advance(Team &t) {
    Execution &ex = *t.running;
    while (ex.submitted < ex.batches.size()) {
        dp_desc_t batch{};
        batch.opcode = DP_OP_BATCH;
        batch.flags = DP_FLAG_COMPLETION;
        batch.completion = reinterpret_cast<uint64_t>(&ex.records[ex.submitted]);
        batch.src = reinterpret_cast<uint64_t>(ex.batches[ex.submitted].data());
        batch.size = ex.batches[ex.submitted].size();
        if (device_->submit(0, batch) != DP_OK) break;  // full: the rest next turn
        ++ex.submitted;
    }
    uint8_t status = DP_COMP_SUCCESS;
    for (size_t i = 0; i < ex.submitted; ++i) {
        uint8_t st = __atomic_load_n(&ex.records[i].status, __ATOMIC_ACQUIRE);
        if (st == DP_COMP_PENDING) return false;
        if (st != DP_COMP_SUCCESS && status == DP_COMP_SUCCESS) status = st;
    }
    if (ex.submitted < ex.batches.size()) return false;
    finish(t, status);
    return true;
}

void TeamEngine::finish(Team &t, uint8_t status) {
    std::unique_ptr<Execution> ex = std::move(t.running);
    for (uint32_t r : t.local_ranks)
        publish(t.members[r], ex->heads[r].completion, status, ex->bytes, ex->heads[r].user);
    if (status == DP_COMP_SUCCESS) {
        ++completed_ops_;
        bytes_ += ex->bytes;
    } else {
        ++failed_ops_;
        DP_LOG_WARN("agent: team '{}' {} failed: {}", t.key,
                    ch::coll_opcode_name(ex->heads[0].opcode),
                    mover::comp_status_name(status));
    }
    try_start(t);
}

void TeamEngine::publish(uint32_t client_id, uint64_t record, uint8_t status, uint64_t bytes,
                         uint64_t user) {
    ClientSession *c = client_id ? hooks_.find_client(client_id) : nullptr;
    if (!c) return;
    mover::OpResult result;
    result.status = status;
    result.bytes = bytes;
    if (!c->space().publish(record, result, user))
        DP_LOG_LIMITED(c->space().log(),
                       "client {}: collective completion record 0x{:x} is misaligned or outside "
                       "its pool and registered memory; the result cannot be reported",
                       c->id, record);
}

bool TeamEngine::read_member(uint32_t client, uint64_t addr, void *out, uint64_t len,
                             std::string *why) {
    ClientSession *c = hooks_.find_client(client);
    if (!c) return *why = "the member is gone", false;
    return c->space().read(addr, out, len, why);
}

bool TeamEngine::write_member(uint32_t client, uint64_t addr, const void *in, uint64_t len,
                              std::string *why) {
    ClientSession *c = hooks_.find_client(client);
    if (!c) return *why = "the member is gone", false;
    return c->space().write(addr, in, len, why);
}

bool TeamEngine::run_bounced(Team &t, const std::vector<dp_desc_t> &heads, std::string *why) {
    const uint32_t p = t.size;
    const dp_desc_t &h0 = heads[0];
    const uint64_t esize = mover::dtype_size(h0.dtype);
    const uint64_t n = h0.size * esize;
    auto read = [&](uint32_t r, uint64_t addr, void *out, uint64_t len) {
        return read_member(t.members[r], addr, out, len, why);
    };
    auto write = [&](uint32_t r, uint64_t addr, const void *in, uint64_t len) {
        return write_member(t.members[r], addr, in, len, why);
    };
    const uint64_t chunk = std::max<uint64_t>(esize, (1ull << 20) / esize * esize);
    // Reused between operations, given back when the thread goes idle
    // (common/scratch.h).
    scratch::Buffer acc = scratch::get(chunk), tmp = scratch::get(chunk);
    if (!acc.data() || !tmp.data()) return *why = "the agent is out of memory", false;
    const auto dt = dp_dtype_t(h0.dtype);
    const auto rop = dp_op_t(h0.redop);
    // Reduce block at byte offset `base` of every member's src into acc, in rank order.
    auto reduce_into = [&](uint64_t base, uint64_t off, uint64_t len) {
        if (!read(0, heads[0].src + base + off, acc.data(), len)) return false;
        for (uint32_t m = 1; m < p; ++m) {
            if (!read(m, heads[m].src + base + off, tmp.data(), len)) return false;
            mover::kernels::reduce(acc.data(), acc.data(), tmp.data(), len / esize, dt, rop);
        }
        return true;
    };
    switch (h0.opcode) {
        case ch::kCollAllreduce:
            for (uint64_t off = 0; off < n; off += chunk) {
                const uint64_t len = std::min(chunk, n - off);
                if (!reduce_into(0, off, len)) return false;
                for (uint32_t r = 0; r < p; ++r)
                    if (!write(r, heads[r].dst + off, acc.data(), len)) return false;
            }
            return true;
        case ch::kCollReduceScatter:
            for (uint32_t r = 0; r < p; ++r)
                for (uint64_t off = 0; off < n; off += chunk) {
                    const uint64_t len = std::min(chunk, n - off);
                    if (!reduce_into(r * n, off, len) || !write(r, heads[r].dst + off, acc.data(), len))
                        return false;
                }
            return true;
        case ch::kCollAllgather:
            for (uint32_t m = 0; m < p; ++m)
                for (uint64_t off = 0; off < n; off += chunk) {
                    const uint64_t len = std::min(chunk, n - off);
                    if (!read(m, heads[m].src + off, tmp.data(), len)) return false;
                    for (uint32_t r = 0; r < p; ++r) {
                        if (r == m && heads[r].dst + m * n == heads[m].src) continue;  // in place
                        if (!write(r, heads[r].dst + m * n + off, tmp.data(), len)) return false;
                    }
                }
            return true;
        case ch::kCollAlltoall: {
            // Everything is read before anything is written: in place works.
            if (uint64_t(p) * p * n > config_.max_direct_bytes) {
                *why = fmt::format("alltoall through bounce buffers needs {} bytes, above "
                                   "max_direct_bytes {}",
                                   uint64_t(p) * p * n, config_.max_direct_bytes);
                return false;
            }
            scratch::Buffer all = scratch::get(size_t(p) * p * n);
            if (!all.data()) return *why = "the agent is out of memory", false;
            for (uint32_t m = 0; m < p; ++m)
                if (!read(m, heads[m].src, all.data() + size_t(m) * p * n, p * n)) return false;
            for (uint32_t r = 0; r < p; ++r)
                for (uint32_t m = 0; m < p; ++m)
                    if (!write(r, heads[r].dst + m * n, all.data() + (size_t(m) * p + r) * n, n))
                        return false;
            return true;
        }
        case ch::kCollBcast: {
            const uint32_t root = uint32_t(h0.aux);
            for (uint64_t off = 0; off < n; off += chunk) {
                const uint64_t len = std::min(chunk, n - off);
                if (!read(root, heads[root].src + off, tmp.data(), len)) return false;
                for (uint32_t r = 0; r < p; ++r)
                    if (r != root && !write(r, heads[r].dst + off, tmp.data(), len)) return false;
            }
            return true;
        }
    }
    return true;
}

bool TeamEngine::poll_orphans() {
    bool any = false;
    for (size_t i = 0; i < orphans_.size();) {
        Execution &ex = *orphans_[i];
        bool done = true;
        for (size_t b = 0; b < ex.submitted && done; ++b)
            done = __atomic_load_n(&ex.records[b].status, __ATOMIC_ACQUIRE) != DP_COMP_PENDING;
        if (!done) {
            ++i;
            continue;
        }
        orphans_[i] = std::move(orphans_.back());  // frees its records and releases the memory
        orphans_.pop_back();
        any = true;
    }
    return any;
}

bool TeamEngine::progress() {
    form_timeouts();
    bool worked = poll_internode();
    if (!orphans_.empty()) worked |= poll_orphans();
    for (auto &[id, t] : teams_)
        if (t->running && !t->running->node_step) worked |= advance(*t);
    return worked;
}

bool TeamEngine::in_flight() const {
    // Inter-node steps wake the service thread through the Internode's
    // event fd; only the engines' batches need this thread to watch them.
    for (const auto &[id, t] : teams_)
        if (t->running && !t->running->node_step) return true;
    return false;
}

void TeamEngine::wait_for_progress(int64_t timeout_ns) {
    for (auto &[id, t] : teams_) {
        if (!t->running || t->running->node_step) continue;
        Execution &ex = *t->running;
        for (size_t i = 0; i < ex.submitted; ++i)
            if (!dp_mover_poll(&ex.records[i])) {
                mover::wait_completion(&ex.records[i], DP_WAIT_BLOCK, timeout_ns);
                return;
            }
    }
}

bool TeamEngine::busy() const { return !forming_.empty() || !orphans_.empty(); }

void TeamEngine::info(nlohmann::json *out) const {
    nlohmann::json teams = nlohmann::json::array();
    for (const auto &[id, t] : teams_)
        // The key is a label: joining also needs the job's secret, of which
        // nothing is shown.
        teams.push_back({{"id", id},
                         {"key", t->key},
                         {"size", t->size},
                         {"ready", t->ready},
                         {"broken", t->broken},
                         {"operations", t->ops},
                         {"local_ranks", t->local_ranks.size()},
                         {"spans_nodes", t->spans_nodes},
                         {"inter_node_steps", t->inter_algorithms}});
    (*out)["teams"] = teams;
    if (internode_) (*out)["internode"] = internode_->describe();
    (*out)["collectives"] = {{"completed", completed_ops_},
                             {"failed", failed_ops_},
                             {"bytes", bytes_},
                             {"orphaned_running", orphans_.size()}};
}

}  // namespace deputy::agent
