#include "bench/rail/writer.h"

#include <sched.h>

#include <algorithm>
#include <deque>

#include "bench/rail/rail_error.h"
#include "common/timing.h"

namespace deputy::rail {
namespace {

inline constexpr int kCqBurst = 64;

// Per-write context handed to libfabric; fi_context2 first so providers
// that ask for FI_CONTEXT/FI_CONTEXT2 may use it.
struct OpContext {
    fi_context2 fi;
    uint32_t slot;
    uint32_t page;
    bool last;
};

struct PendingWrite {
    uint32_t page;
    bool last;
};

struct RailState {
    WriterRail binding;
    std::deque<PendingWrite> pending;  // generated, not yet accepted by the provider
    std::vector<OpContext> slots;
    std::vector<uint32_t> free_slots;
    uint32_t depth = 0;
    uint32_t inflight = 0;
    bool finished = false;  // the last write completed
    RailStats stats;
    uint64_t last_progress_ns = 0;
};

std::string page_text(uint64_t page) { return "page " + std::to_string(page); }

// Where page `page` of the device lands: its buffer's key and address.
struct Target {
    fi_addr_t peer;
    uint64_t addr;
    uint64_t key;
};

Target target_of(const WriterRail &rail, const WritePlan &plan, uint64_t page) {
    const RemoteBuffer &buffer = rail.remotes[page / plan.pages_per_buffer];
    return {buffer.peer, buffer.base + (page % plan.pages_per_buffer) * plan.page_size,
            buffer.key};
}

}  // namespace

struct DeviceWriter::State {
    std::vector<RailState> rails;
    // Generator: pass `pass`, page `index`, write number `seq` (rail = seq % rails).
    uint64_t pass = 0;
    uint64_t index = 0;
    uint64_t seq = 0;
    bool final_pass = false;
    bool exhausted = false;
    uint64_t start_ns = 0;
};

DeviceWriter::DeviceWriter(int device, const uint8_t *source, std::vector<WriterRail> rails,
                           const WritePlan &plan)
    : device_(device), source_(source), plan_(plan), state_(std::make_unique<State>()) {
    for (auto &binding : rails) {
        RailState rs;
        rs.binding = binding;
        size_t provider_depth = std::max<size_t>(binding.rail->tx_size(), 1);
        rs.depth = uint32_t(std::min<size_t>(size_t(plan.tx_depth), provider_depth));
        rs.slots.resize(rs.depth);
        for (uint32_t i = 0; i < rs.depth; ++i) {
            rs.slots[i].slot = i;
            rs.free_slots.push_back(rs.depth - 1 - i);
        }
        if (binding.remotes.empty() ||
            binding.remotes.size() * plan.pages_per_buffer != plan.pages)
            throw RailError(binding.rail->where() + ": " +
                            std::to_string(binding.remotes.size()) + " remote buffers for " +
                            std::to_string(plan.pages) + " pages of " +
                            std::to_string(plan.pages_per_buffer) + " per buffer");
        if (plan.page_size > binding.rail->max_msg_size())
            throw RailError(binding.rail->where() + ": --page-size " +
                            std::to_string(plan.page_size) + " exceeds the provider's max_msg_size " +
                            std::to_string(binding.rail->max_msg_size()));
        state_->rails.push_back(std::move(rs));
    }
}

DeviceWriter::~DeviceWriter() = default;

DeviceStats DeviceWriter::run(StartGate &gate, const std::atomic<bool> &cancel) {
    DeviceStats stats;
    stats.rails.resize(state_->rails.size());
    if (plan_.warmup) warm_up(stats, cancel);
    if (!gate.arrive_and_wait(cancel) || cancel.load()) {
        stats.cancelled = true;
        return stats;
    }
    stream(stats, cancel);
    for (size_t k = 0; k < state_->rails.size(); ++k) stats.rails[k] = state_->rails[k].stats;
    return stats;
}

// One write through every rail, each completed, before the clock starts:
// connection set-up (rxm connects on first use) and the peer's first-touch
// costs land here, not in the timed region.
void DeviceWriter::warm_up(DeviceStats &stats, const std::atomic<bool> &cancel) {
    uint64_t t0 = timing::now_ns();
    size_t n = state_->rails.size();
    std::vector<bool> posted(n, false), done(n, false);
    size_t remaining = n;
    fi_cq_data_entry entries[kCqBurst];
    while (remaining > 0) {
        if (cancel.load()) return;
        for (size_t k = 0; k < n; ++k) {
            RailState &rs = state_->rails[k];
            if (posted[k]) continue;
            uint64_t page = k % plan_.pages;
            OpContext &ctx = rs.slots[0];
            ctx.page = uint32_t(page);
            ctx.last = false;
            const Target to = target_of(rs.binding, plan_, page);
            ssize_t ret = fi_write(rs.binding.rail->ep(), source_ + page * plan_.page_size,
                                   plan_.page_size, rs.binding.desc, to.peer, to.addr, to.key,
                                   &ctx);
            if (ret == -FI_EAGAIN) continue;
            if (ret) rs.binding.rail->fail("fi_write (warm-up, " + page_text(page) + ")", int(ret));
            posted[k] = true;
        }
        for (size_t k = 0; k < n; ++k) {
            RailState &rs = state_->rails[k];
            ssize_t got = fi_cq_read(rs.binding.rail->cq(), entries, kCqBurst);
            if (got == -FI_EAGAIN) continue;
            if (got == -FI_EAVAIL) {
                fi_cq_err_entry err{};
                fi_cq_readerr(rs.binding.rail->cq(), &err, 0);
                char buf[256] = {};
                const char *detail =
                    fi_cq_strerror(rs.binding.rail->cq(), err.prov_errno, err.err_data, buf, sizeof(buf));
                throw RailError(rs.binding.rail->where() + ": warm-up write failed: " +
                                fi_error_text(-err.err) + "; provider: " + (detail ? detail : "?"));
            }
            if (got < 0) rs.binding.rail->fail("fi_cq_read (warm-up)", int(got));
            for (ssize_t i = 0; i < got; ++i) {
                if (entries[i].op_context == &rs.slots[0] && !done[k]) {
                    done[k] = true;
                    --remaining;
                }
            }
        }
        if (timing::now_ns() - t0 > uint64_t(plan_.timeout_s * 1e9)) {
            for (size_t k = 0; k < n; ++k)
                if (!done[k])
                    throw RailError(state_->rails[k].binding.rail->where() +
                                    ": the warm-up write did not complete within " +
                                    std::to_string(int(plan_.timeout_s)) +
                                    " s (fi_cq_read; is the peer reachable on this provider?)");
        }
    }
    stats.warmup_ns = timing::now_ns() - t0;
    stats.warmup_writes = n;
}

void DeviceWriter::stream(DeviceStats &stats, const std::atomic<bool> &cancel) {
    State &s = *state_;
    const uint64_t rpd = s.rails.size();
    const uint64_t page_size = plan_.page_size;
    const uint64_t timeout_ns = uint64_t(plan_.timeout_s * 1e9);
    const size_t batch = size_t(plan_.batch);
    const bool duration_mode = plan_.duration_s > 0;

    s.start_ns = timing::now_ns();
    stats.start_ns = s.start_ns;
    for (auto &rs : s.rails) rs.last_progress_ns = s.start_ns;
    s.final_pass = !duration_mode && plan_.repeat == 1;

    fi_cq_data_entry entries[kCqBurst];
    uint64_t loops = 0;
    size_t finished = 0;
    while (finished < rpd) {
        if ((++loops & 63) == 0 && cancel.load(std::memory_order_relaxed)) {
            stats.cancelled = true;
            return;
        }

        // 1. Generate writes round-robin over the rails, at most `batch`
        //    queued per rail, so a slow rail holds the others back (as a
        //    real round-robin does) without the queues growing.
        while (!s.exhausted) {
            RailState &rs = s.rails[s.seq % rpd];
            if (rs.pending.size() >= batch) break;
            bool last = s.final_pass && s.index + rpd >= plan_.pages;
            rs.pending.push_back({uint32_t(s.index), last});
            ++s.seq;
            if (++s.index == plan_.pages) {
                s.index = 0;
                ++s.pass;
                if (s.final_pass) {
                    s.exhausted = true;
                } else if (duration_mode) {
                    // Final pass if another one would end past the duration.
                    double elapsed = double(timing::now_ns() - s.start_ns) * 1e-9;
                    double per_pass = elapsed / double(s.pass);
                    s.final_pass = elapsed + per_pass >= plan_.duration_s;
                } else {
                    s.final_pass = s.pass + 1 == plan_.repeat;
                }
            }
        }

        // 2. Post up to `batch` writes per rail; -FI_EAGAIN leaves the write
        //    at the head of its queue for the next round.
        for (auto &rs : s.rails) {
            size_t posted = 0;
            while (posted < batch && !rs.pending.empty() && rs.inflight < rs.depth) {
                PendingWrite w = rs.pending.front();
                // The signal write goes last: after every other write on the rail completed.
                if (w.last && rs.inflight > 0) break;
                OpContext &ctx = rs.slots[rs.free_slots.back()];
                ctx.page = w.page;
                ctx.last = w.last;
                const uint8_t *buf = source_ + uint64_t(w.page) * page_size;
                const Target to = target_of(rs.binding, plan_, w.page);
                ssize_t ret;
                if (!w.last) {
                    ret = fi_write(rs.binding.rail->ep(), buf, page_size, rs.binding.desc,
                                   to.peer, to.addr, to.key, &ctx);
                } else if (plan_.signal_with_data) {
                    ret = fi_writedata(rs.binding.rail->ep(), buf, page_size, rs.binding.desc,
                                       rs.binding.signal, to.peer, to.addr, to.key, &ctx);
                } else {
                    iovec iov{const_cast<uint8_t *>(buf), page_size};
                    fi_rma_iov rma{to.addr, page_size, to.key};
                    void *desc = rs.binding.desc;
                    fi_msg_rma msg{};
                    msg.msg_iov = &iov;
                    msg.desc = &desc;
                    msg.iov_count = 1;
                    msg.addr = to.peer;
                    msg.rma_iov = &rma;
                    msg.rma_iov_count = 1;
                    msg.context = &ctx;
                    ret = fi_writemsg(rs.binding.rail->ep(), &msg,
                                      FI_DELIVERY_COMPLETE | FI_COMPLETION);
                }
                if (ret == -FI_EAGAIN) {
                    ++rs.stats.eagain;
                    rs.binding.counters->eagain.store(rs.stats.eagain, std::memory_order_relaxed);
                    break;
                }
                if (ret)
                    rs.binding.rail->fail(std::string(w.last ? (plan_.signal_with_data
                                                                    ? "fi_writedata"
                                                                    : "fi_writemsg")
                                                             : "fi_write") +
                                              " (" + page_text(w.page) + ")",
                                          int(ret));
                rs.free_slots.pop_back();
                rs.pending.pop_front();
                ++rs.inflight;
                ++posted;
            }
            if (posted > 0) rs.last_progress_ns = timing::now_ns();
        }

        // A rail with work but no completion (and no accepted post) for
        // --timeout seconds is stuck: say which and how much is in flight.
        if ((loops & 1023) == 0) {
            uint64_t now = timing::now_ns();
            for (auto &rs : s.rails) {
                if (rs.finished || now - rs.last_progress_ns <= timeout_ns) continue;
                throw RailError(rs.binding.rail->where() + ": no completion for " +
                                std::to_string(int(plan_.timeout_s)) + " s with " +
                                std::to_string(rs.inflight) + " writes in flight and " +
                                std::to_string(rs.pending.size()) +
                                " pending (fi_cq_read; --timeout)");
            }
        }

        // 3. Completions, read in bursts. A rail with nothing in flight is
        //    still polled while it has work: reading the CQ is what drives
        //    the provider's progress (e.g. ofi_rxm finishing a connection
        //    after answering -FI_EAGAIN).
        for (auto &rs : s.rails) {
            if (rs.finished) continue;
            ssize_t got = fi_cq_read(rs.binding.rail->cq(), entries, kCqBurst);
            if (got == -FI_EAGAIN) continue;
            if (got == -FI_EAVAIL) {
                fi_cq_err_entry err{};
                fi_cq_readerr(rs.binding.rail->cq(), &err, 0);
                char buf[256] = {};
                const char *detail =
                    fi_cq_strerror(rs.binding.rail->cq(), err.prov_errno, err.err_data, buf, sizeof(buf));
                auto *ctx = static_cast<OpContext *>(err.op_context);
                throw RailError(rs.binding.rail->where() + ": write of " +
                                (ctx ? page_text(ctx->page) : std::string("a page")) +
                                " failed: " + fi_error_text(-err.err) +
                                "; provider: " + (detail ? detail : "?"));
            }
            if (got < 0) rs.binding.rail->fail("fi_cq_read", int(got));
            uint64_t now = timing::now_ns();
            for (ssize_t i = 0; i < got; ++i) {
                auto *ctx = static_cast<OpContext *>(entries[i].op_context);
                if (ctx == nullptr) continue;
                rs.free_slots.push_back(ctx->slot);
                --rs.inflight;
                ++rs.stats.writes;
                rs.stats.bytes += page_size;
                if (ctx->last) {
                    rs.finished = true;
                    ++finished;
                }
            }
            if (got > 0) {
                if (rs.stats.first_completion_ns == 0) rs.stats.first_completion_ns = now - s.start_ns;
                rs.last_progress_ns = now;
                rs.binding.counters->writes.store(rs.stats.writes, std::memory_order_relaxed);
                rs.binding.counters->bytes.store(rs.stats.bytes, std::memory_order_relaxed);
            }
        }
    }
    stats.end_ns = timing::now_ns();
}

}  // namespace deputy::rail
