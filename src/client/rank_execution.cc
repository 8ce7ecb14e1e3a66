#include "client/rank_execution.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "client/context.h"
#include "client/team.h"
#include "coll/collective.h"
#include "coll/local_plan.h"
#include "coll/transport/memory/task_runner.h"
#include "common/check.h"
#include "common/cpu_relax.h"
#include "common/log.h"
#include "common/timing.h"
#include "mover/execute.h"
#include "mover/kernels.h"
#include "mover/names.h"

namespace deputy::client {

namespace {

using channel::CollPost;
using coll::Collective;

// A member runs its plans in tasks of this many bytes: a reduction's
// pieces then stay in the cache between the members' inputs.
constexpr uint64_t kTaskBytes = 64 << 10;

// Valid: what the members may run; anything else the agent reports itself.
bool runnable(const CollPost &p, uint32_t size) {
    return channel::head_invalid(p, size) == 0;
}

// Whether any of a member's send blocks shares a byte with one of its
// receive blocks (what it writes while its teammates read). Sorted by
// start, an interval overlaps one of the other kind exactly when it starts
// before the furthest end of that kind seen so far.
bool sends_meet_receives(const coll::MemberVector &v, uint64_t src, uint64_t dst) {
    struct Interval {
        uint64_t start, end;
        bool send;
    };
    std::vector<Interval> all;
    all.reserve(v.send.size() + v.recv.size());
    for (const coll::VectorBlock &b : v.send)
        if (b.bytes) all.push_back({src + b.offset, src + b.end(), true});
    for (const coll::VectorBlock &b : v.recv)
        if (b.bytes) all.push_back({dst + b.offset, dst + b.end(), false});
    std::sort(all.begin(), all.end(),
              [](const Interval &a, const Interval &b) { return a.start < b.start; });
    uint64_t furthest[2] = {0, 0};  // [send]
    for (const Interval &i : all) {
        if (i.start < furthest[!i.send]) return true;
        furthest[i.send] = std::max(furthest[i.send], i.end);
    }
    return false;
}

}  // namespace

// The buffers of one operation as this member runs its tasks: every
// member's source through its read-only view (this member's too: begin()
// puts the destination in scratch when it overlaps the source, so no write
// aliases a read), and this member's destination (or that scratch) as the
// one output it writes. Nothing is copied: the views map everything the
// posts name (checked by gather()).
class RankExecution::OwnOutputs final : public coll::TaskBuffers {
  public:
    OwnOutputs(uint32_t rank, const std::vector<View> &views,
               const std::vector<channel::CollPost> &posts, uint8_t *out)
        : rank_(rank), views_(views), posts_(posts), out_(out) {}
    uint8_t *in_place(const coll::Piece &p, uint64_t len, bool write) const override {
        if (p.where == coll::Where::destination && p.rank == rank_) return out_ + p.offset;
        // Teammates' destinations are theirs to write (and are being
        // written): never an input here.
        if (write || p.where != coll::Where::source || p.rank >= views_.size()) return nullptr;
        return const_cast<uint8_t *>(views_[p.rank].at(posts_[p.rank].src + p.offset, len));
    }
    bool copy_in(const coll::Piece &, void *, uint64_t, std::string *why) const override {
        *why = "a piece outside the members' views";
        return false;
    }
    bool copy_out(const coll::Piece &, const void *, uint64_t, std::string *why) const override {
        *why = "an output that is not this member's destination";
        return false;
    }
    bool writes(const coll::Piece &p) const override {
        return p.where == coll::Where::destination && p.rank == rank_;
    }

  private:
    uint32_t rank_;
    const std::vector<View> &views_;
    const std::vector<channel::CollPost> &posts_;
    uint8_t *out_;
};

const uint8_t *RankExecution::Range::at(uint64_t addr, uint64_t len) const {
    if (bytes == 0 || addr < member_base || addr - member_base > bytes ||
        len > bytes - (addr - member_base))
        return nullptr;
    return base + (addr - member_base);
}

std::unique_ptr<RankExecution> RankExecution::create(Context *ctx, uint32_t rank, uint32_t size,
                                                     const channel::control::TeamReady &ready,
                                                     std::vector<Segment> segments) {
    if (ready.board_bytes == 0) return nullptr;
    std::unique_ptr<RankExecution> x(new RankExecution());
    x->ctx_ = ctx;
    x->rank_ = rank;
    x->size_ = size;
    x->claim_ = ctx->options().rank_execution;
    x->mine_.resize(channel::kBoardSlots);
    size_t heaps = 0;
    for (const channel::control::PoolView &v : ready.pools) heaps += v.heap_bytes != 0;
    if (segments.size() != size_t(size) + 1 + heaps || ready.pools.size() != size ||
        ready.board_bytes != channel::TeamBoard::bytes(size)) {
        DP_LOG_WARN("deputy team: the agent offered a board without its views; the agent runs "
                    "this team's operations");
        return nullptr;  // (no board mapped: the others cannot claim without our posts)
    }
    if (!segments[0].valid() || !segments[0].writable() ||
        segments[0].size() != ready.board_bytes) {
        DP_LOG_WARN("deputy team: the agent's board is not a writable segment of {} bytes; the "
                    "agent runs this team's operations",
                    ready.board_bytes);
        return nullptr;
    }
    x->board_segment_ = std::move(segments[0]);
    x->board_ = channel::TeamBoard(x->board_segment_.data(), size);
    bool usable = x->claim_;
    // One of rank r's files, read-only (nullptr: not usable, logged).
    auto map_view = [&](uint32_t r, Segment &view, uint64_t bytes,
                        const char *what) -> const uint8_t * {
        if (!view.valid() || view.size() != bytes) {
            DP_LOG_WARN("deputy team: rank {}'s {} view is not usable ({} bytes, {} announced); "
                        "the agent runs this team's operations",
                        r, what, view.size(), bytes);
            return nullptr;
        }
        x->mappings_.push_back(std::move(view));
        return static_cast<const uint8_t *>(x->mappings_.back().data());
    };
    size_t next_heap = size_t(size) + 1;
    for (uint32_t r = 0; r < size && usable; ++r) {
        const channel::control::PoolView &v = ready.pools[r];
        if (v.pool_offset > v.segment_bytes || v.pool_bytes > v.segment_bytes - v.pool_offset) {
            DP_LOG_WARN("deputy team: rank {}'s pool view is out of its segment; the agent runs "
                        "this team's operations",
                        r);
            usable = false;
            break;
        }
        View view;
        const uint8_t *segment = map_view(r, segments[r + 1], v.segment_bytes, "pool");
        usable = segment != nullptr;
        if (usable) view.pool = {segment + v.pool_offset, v.member_base, v.pool_bytes};
        if (usable && v.heap_bytes) {
            const uint8_t *heap = map_view(r, segments[next_heap++], v.heap_bytes, "heap");
            usable = heap != nullptr;
            view.heap = {heap, v.heap_base, v.heap_bytes};
        }
        x->views_.push_back(view);
    }
    // Before this member's first post: nobody claims an operation then.
    if (!usable) x->board_.header().agent_only.store(1, std::memory_order_release);
    return x;
}

RankExecution::~RankExecution() = default;

dp_status_t RankExecution::before_post(uint64_t seq) {
    auto &started = board_.header().agent_started;
    // A broken team's agent starts nothing more: it fails every post, so
    // there is nothing to wait for (and waiting would never end).
    while (seq > started.load(std::memory_order_acquire) + DP_TEAM_MAX_OUTSTANDING &&
           !board_.broken()) {
        // The members ran ahead: the agent takes the operations it finds
        // claimed at once, as soon as it gets a core.
        ctx_->ring_doorbell_if_sleeping();
        DP_CHECK(ctx_->check_alive());
        sched_yield();
    }
    return DP_OK;
}

void RankExecution::posted(uint64_t seq, const CollPost &post, Request *req) {
    std::lock_guard<std::mutex> lock(mutex_);
    Mine &m = mine(seq);
    m.seq = seq;
    m.post = post;
    m.req = req;
    posted_ = std::max(posted_, seq);
    board_.write_post(rank_, seq, post);
}

void RankExecution::released(Request *req) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (Mine &m = mine(req->sequence); m.req == req) m.req = nullptr;
}

bool RankExecution::gather(uint64_t seq, const Mine &mine, std::vector<CollPost> *posts,
                           uint8_t *status) {
    posts->resize(size_);
    for (uint32_t r = 0; r < size_; ++r) {
        if (r == rank_) {
            (*posts)[r] = mine.post;
            continue;
        }
        if (!board_.read_post(r, seq, &(*posts)[r])) return false;
    }
    *status = DP_COMP_SUCCESS;
    for (const CollPost &p : *posts)
        if (!runnable(p, size_) || !channel::head_difference(p, (*posts)[0]).empty()) return false;
    const CollPost &h = (*posts)[0];
    const Collective c = *coll::collective_from_byte(uint8_t(h.opcode - channel::kCollPostBase));
    const uint64_t esize = c == Collective::barrier ? 1 : mover::dtype_size(h.dtype);
    const uint64_t max_bytes = board_.header().max_bytes;
    if (coll::is_vector(c)) return gather_vectors(c, *posts, esize, max_bytes);
    for (uint32_t r = 0; r < size_; ++r) {
        const coll::MemberBytes need = coll::member_bytes(c, h.count, esize, size_, r, h.root);
        const CollPost &p = (*posts)[r];
        if (need.destination > max_bytes || (need.source && !views_[r].at(p.src, need.source)) ||
            (need.destination && !views_[r].at(p.dst, need.destination)))
            return false;
    }
    return true;
}

bool RankExecution::gather_vectors(Collective c, const std::vector<CollPost> &posts,
                                   uint64_t element_bytes, uint64_t max_bytes) {
    const uint64_t block_bytes = coll::vector_counts_bytes(size_);
    vectors_.resize(size_);
    counts_copy_.resize(block_bytes);
    std::vector<const coll::MemberVector *> present(size_);
    for (uint32_t r = 0; r < size_; ++r) {
        const CollPost &p = posts[r];
        const uint8_t *block =
            p.counts_bytes == block_bytes ? views_[r].at(p.counts, block_bytes) : nullptr;
        if (!block) return false;
        // Read once: its owner could be rewriting it (a member that is not
        // the library); everything below, and the plan, use this copy.
        std::memcpy(counts_copy_.data(), block, block_bytes);
        coll::MemberVector &v = vectors_[r];
        std::string why;
        if (coll::decode_collective_counts(c, counts_copy_.data(), block_bytes, size_,
                                           element_bytes, max_bytes, &v, &why) != DP_OK)
            return false;
        uint64_t end;
        for (int side = 0; side < 2; ++side)
            for (const coll::VectorBlock &b : side == 0 ? v.send : v.recv)
                if (b.bytes && (__builtin_add_overflow(side == 0 ? p.src : p.dst, b.end(), &end) ||
                                !views_[r].at(end - b.bytes, b.bytes)))
                    return false;
        if (sends_meet_receives(v, p.src, p.dst)) return false;
        present[r] = &v;
    }
    return coll::vector_difference(present).empty();
}

bool RankExecution::claimable(uint64_t seq, const Mine &mine) {
    if (!claim_ || board_.header().agent_only.load(std::memory_order_acquire) || board_.broken() ||
        board_.completed() + 1 < seq)
        return false;
    for (uint32_t r = 0; r < size_; ++r)
        if (board_.waiting(r) < seq) return false;  // it might not come to run its part
    std::vector<CollPost> posts;
    uint8_t status;
    return gather(seq, mine, &posts, &status);
}

void RankExecution::begin(uint64_t seq, const Mine &mine) {
    Open o;
    o.seq = seq;
    std::vector<CollPost> posts;
    uint8_t status = DP_COMP_SUCCESS;
    if (!gather(seq, mine, &posts, &status)) {
        // Claimed when all was well: a member changed its post since. Read
        // nothing; count as done so that nobody waits for us.
        o.status = channel::kCollMismatch;
        if (board_.count_read(seq) == size_) board_.notify();
        open_.push_back(std::move(o));
        return;
    }
    const CollPost &h = posts[rank_];
    const Collective c = *coll::collective_from_byte(uint8_t(h.opcode - channel::kCollPostBase));
    const uint64_t esize = c == Collective::barrier ? 1 : mover::dtype_size(h.dtype);
    const bool vector = coll::is_vector(c);
    const uint64_t n = vector ? vectors_[rank_].send_total + vectors_[rank_].recv_total
                              : h.count * esize;
    const coll::MemberBytes need =
        vector ? coll::MemberBytes{vectors_[rank_].send_total, vectors_[rank_].recv_total}
               : coll::member_bytes(c, h.count, esize, size_, rank_, h.root);
    uint8_t *dst = reinterpret_cast<uint8_t *>(h.dst);
    uint8_t *out = dst;
    o.status = DP_COMP_SUCCESS;
    o.bytes = need.destination;
    // Our source is read by the others until they all counted: a
    // destination over it waits in scratch (a vector collective's blocks
    // never meet: gather_vectors()).
    if (!vector && need.destination &&
        coll::ranges_overlap(h.src, need.source, h.dst, need.destination)) {
        o.scratch = scratch::get(need.destination);
        if (!o.scratch.data()) o.status = DP_COMP_ADDRESS_DENIED;
        out = o.scratch.data();
        o.dst = dst;
    }
    if (o.status == DP_COMP_SUCCESS && n) {
        // The agent's plan for this operation (coll/local_plan.h), cut in
        // pieces that stay in the cache between the members' inputs; this
        // member runs the tasks that write its destination (the plan holds
        // only its share of those: LocalArgs::writer), and writes only
        // that: the same tasks, inputs in the same order, the same
        // kernels, so the same bytes as the agent's engines would write.
        coll::LocalArgs args;
        args.collective = c;
        args.size = size_;
        args.count = h.count;
        args.dtype = dp_dtype_t(h.dtype);
        args.op = coll::reduces(c) ? dp_op_t(h.redop) : DP_SUM;
        args.root = h.root;
        args.chunk_bytes = kTaskBytes;
        args.vectors = &vectors_;
        args.writer = rank_;
        if (vector || planned_for_ != args) {
            // (a vector collective's blocks are not in args: planned each time)
            plan_ = coll::build_local_plan(args);
            planned_for_.reset();
            if (!vector) planned_for_ = args;
        }
        const OwnOutputs buffers(rank_, views_, posts, out);
        std::string why;
        for (const coll::Task &task : plan_.tasks) {
            if (!coll::task_writes(plan_, task, buffers)) continue;
            o.status = coll::run_task(plan_, task, buffers, &why);
            if (o.status != DP_COMP_SUCCESS) {
                DP_LOG_WARN("deputy team: rank {} could not run its part of operation {}: {}",
                            rank_, seq, why);
                break;
            }
        }
    }
    if (board_.count_read(seq) == size_) board_.notify();
    open_.push_back(std::move(o));
}

bool RankExecution::try_finish(Open &o) {
    const bool broken = board_.broken();
    if (board_.readers(o.seq) < size_ && !broken) return false;
    uint8_t status = o.status;
    if (board_.readers(o.seq) < size_) status = channel::kCollMemberLost;
    else if (status == DP_COMP_SUCCESS && o.dst) std::memcpy(o.dst, o.scratch.data(), o.bytes);
    o.scratch.reset();
    if (board_.count_written(o.seq) == size_) {
        board_.complete(o.seq);
        // The agent may hold the next operation for this one.
        ctx_->ring_doorbell_if_sleeping();
    }
    write_record(o.seq, status, status == DP_COMP_SUCCESS ? o.bytes : 0);
    return true;
}

void RankExecution::write_record(uint64_t seq, uint8_t status, uint64_t bytes) {
    Mine &m = mine(seq);
    if (m.seq != seq || !m.req) return;  // freed by the caller meanwhile
    mover::OpResult result;
    result.status = status;
    result.bytes = bytes;
    mover::publish_completion(m.req->record, result, seq - 1);
}

bool RankExecution::step(uint64_t upto, bool may_claim) {
    bool moved = false;
    for (size_t i = 0; i < open_.size();) {
        if (try_finish(open_[i])) {
            open_.erase(open_.begin() + long(i));
            moved = true;
        } else {
            ++i;
        }
    }
    upto = std::min(upto, posted_);
    // Operations finished for the team need nothing more from us (ours
    // among them: the team's count includes our write). Skipping them here
    // matters: a member that only tests operations the agent runs calls no
    // step() for many of them, and their board slots get reused.
    // (No operation finishes before every member posted it: a count past
    // ours is a teammate's scribble, which must not make us skip our part.)
    executed_ = std::max(executed_, std::min(board_.completed(), posted_));
    while (executed_ < upto) {
        const uint64_t seq = executed_ + 1;
        channel::BoardOwner owner = board_.owner(seq);
        if (owner == channel::kOwnerNone) {
            if (!may_claim || !claimable(seq, mine(seq))) break;
            owner = board_.claim(seq, channel::kOwnerRanks);
            if (owner == channel::kOwnerRanks) board_.notify();  // the others have a part now
        }
        if (owner == channel::kOwnerRanks) {
            if (board_.broken()) {  // a member left: fail ours, read nothing
                write_record(seq, channel::kCollMemberLost, 0);
            } else if (mine(seq).seq == seq) {
                begin(seq, mine(seq));
                if (try_finish(open_.back())) open_.pop_back();
            } else {  // posted 128 operations past one never waited for: none of ours
                begin(seq, Mine{seq, {}, nullptr});
                if (try_finish(open_.back())) open_.pop_back();
            }
        } else if (owner != channel::kOwnerAgent) {
            break;
        }
        executed_ = seq;
        moved = true;
    }
    return moved;
}

dp_status_t board_wait_turn(Context *ctx, const channel::TeamBoard &board, uint32_t seen,
                            uint64_t start_ns, bool yield_first) {
    // As dp_wait waits for a record (Context::wait_record): poll in the
    // modes that never sleep and, in the adaptive one, with pause and then
    // yielding for a while; then sleep on the board.
    const dp_wait_mode_t mode = ctx->options().wait_mode;
    const bool adaptive = ctx->options().adaptive_wait;
    const int64_t poll_ns = adaptive ? ctx->options().adaptive_poll_ns : 0;
    const int64_t yield_ns = adaptive && yield_first ? kAdaptiveYieldNs : 0;
    const int64_t waited = int64_t(timing::now_ns() - start_ns);
    if (mode != DP_WAIT_BLOCK || waited < yield_ns) {
        if (mode == DP_WAIT_YIELD || (mode == DP_WAIT_BLOCK && waited >= poll_ns))
            sched_yield();
        else
            cpu_relax();
        return ctx->check_alive();
    }
    DP_CHECK(ctx->check_alive_now());
    board.sleep(seen, int64_t(ctx->check_period_ns()));
    return DP_OK;
}

dp_status_t RankExecution::wait(Request *req) {
    const uint64_t start = timing::now_ns();
    mark_waiting(req->sequence);
    struct Leave {
        const channel::TeamBoard &board;
        uint32_t rank;
        ~Leave() { board.set_waiting(rank, 0); }
    } leave{board_, rank_};
    for (;;) {
        const uint32_t seen = board_.epoch();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            step(req->sequence, true);
        }
        if (__atomic_load_n(&req->record->status, __ATOMIC_ACQUIRE) != DP_COMP_PENDING)
            return DP_OK;
        // Every claim, count and finished operation bumps the board.
        DP_CHECK(board_wait_turn(ctx_, board_, seen, start, req->yield_first));
    }
}

void RankExecution::progress() {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (lock.owns_lock()) step(posted_, false);
}

void RankExecution::mark_waiting(uint64_t seq) {
    uint64_t seen = highest_mark_.load(std::memory_order_relaxed);
    while (seen < seq && !highest_mark_.compare_exchange_weak(seen, seq, std::memory_order_relaxed)) {
    }
    board_.set_waiting(rank_, seq);
}

dp_status_t RankExecution::leave_wait(bool *done) {
    std::lock_guard<std::mutex> lock(mutex_);
    // From here no teammate finds this member waiting (the mark's exchange
    // and their reads of it are sequentially consistent). One that read it
    // before may still be about to claim an operation up to it for the
    // ranks: the claim word decides, whoever comes first.
    const uint64_t mark = board_.withdraw(rank_);
    const uint64_t upto =
        std::min(std::max(mark, highest_mark_.load(std::memory_order_relaxed)), posted_);
    const uint64_t finished = std::max(executed_, std::min(board_.completed(), posted_));
    for (uint64_t seq = finished + 1; seq <= upto; ++seq)
        board_.claim(seq, channel::kOwnerAgent);  // unclaimed: the agent's now
    // The teammates' claims won where the owner is the ranks: this member's
    // part of those is owed (its reads now, its record once every member
    // has read). They were all waiting when they claimed, so each reads
    // its source without needing anything more from us.
    step(posted_, false);
    *done = open_.empty();
    return *done ? DP_OK : ctx_->check_alive();
}

void RankExecution::progress_in_wait(Request *req) {
    // Nobody clears the mark: once req is done it is below every later
    // operation, and a claim needs every member's mark at or above the
    // operation's (claimable()), so it claims nothing more.
    if (board_.waiting(rank_) < req->sequence) mark_waiting(req->sequence);
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (lock.owns_lock()) step(req->sequence, true);
}

}  // namespace deputy::client
