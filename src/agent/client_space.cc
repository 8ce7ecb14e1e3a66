#include "agent/client_space.h"

#include <fmt/format.h>

#include <cstring>
#include <mutex>

#include "agent/bounce_space.h"
#include "mover/names.h"

namespace deputy::agent {

ClientSpace::ClientSpace(uint32_t client_id, std::byte *agent_pool, uint64_t pool_bytes,
                         std::shared_ptr<const ClientProcess> process, uint64_t max_direct_bytes)
    : client_id_(client_id),
      agent_pool_(agent_pool),
      pool_bytes_(pool_bytes),
      process_(std::move(process)),
      max_direct_bytes_(max_direct_bytes),
      log_(fmt::format("agent: client {}", client_id)) {}

namespace {

// [addr, +len) inside [base, +bytes): where, from `at` (the same bytes as
// the agent maps them); nullptr otherwise. An empty range at the very end is
// not inside.
void *window(uint64_t base, uint64_t bytes, std::byte *at, uint64_t addr, uint64_t len) {
    if (base == 0 || addr < base) return nullptr;
    const uint64_t offset = addr - base;
    if (offset > bytes || len > bytes - offset) return nullptr;
    if (len == 0 && offset == bytes) return nullptr;
    return at + offset;
}

}  // namespace

void *ClientSpace::translate(uint64_t addr, uint64_t len, mover::Access) const {
    if (void *p = window(client_pool_.load(std::memory_order_acquire), pool_bytes_, agent_pool_,
                         addr, len))
        return p;
    return window(client_heap_.load(std::memory_order_acquire), heap_bytes_, agent_heap_, addr,
                  len);
}

void ClientSpace::add_range(uint64_t addr, uint64_t len) {
    std::unique_lock lock(ranges_mutex_);
    ranges_.push_back({addr, len});
    range_count_.store(ranges_.size(), std::memory_order_release);
}

bool ClientSpace::remove_range(uint64_t addr) {
    std::unique_lock lock(ranges_mutex_);
    for (size_t i = 0; i < ranges_.size(); ++i) {
        if (ranges_[i].addr != addr) continue;
        ranges_.erase(ranges_.begin() + long(i));
        range_count_.store(ranges_.size(), std::memory_order_release);
        return true;
    }
    return false;
}

bool ClientSpace::direct_allows(uint64_t addr, uint64_t len) const {
    if (range_count() == 0) return false;
    std::shared_lock lock(ranges_mutex_);
    for (const DirectRange &r : ranges_)
        if (addr >= r.addr && addr - r.addr <= r.len && len <= r.len - (addr - r.addr)) return true;
    return false;
}

bool ClientSpace::touches_direct(uint64_t addr) const {
    std::shared_lock lock(ranges_mutex_);
    for (const DirectRange &r : ranges_)
        if (addr >= r.addr && addr - r.addr < r.len) return true;
    return false;
}

bool ClientSpace::needs_bounce(const dp_desc_t &d) const {
    if (range_count() == 0 || d.opcode == DP_OP_DRAIN) return false;
    // A batch's members may point anywhere: bounce the whole batch.
    if (d.opcode == DP_OP_BATCH) return true;
    // src2 is a pattern or a seed for some opcodes; a value that happens to
    // fall in a registered range only sends the descriptor the slower way.
    return touches_direct(d.src) || touches_direct(d.dst) || touches_direct(d.src2) ||
           ((d.flags & DP_FLAG_COMPLETION) && touches_direct(d.completion));
}

bool ClientSpace::run(const dp_desc_t &desc, const mover::ExecLimits &limits,
                      mover::OpResult *result) const {
    if (!needs_bounce(desc)) return AddressSpace::run(desc, limits, result);
    bounced_.fetch_add(1, std::memory_order_relaxed);
    return run_bounced(desc, limits, result);
}

void ClientSpace::report_lost(const dp_desc_t &desc, const char *queue) const {
    DP_LOG_LIMITED(log_,
                   "client {}: {}: completion address {:#x} is misaligned or outside its pool "
                   "and registered memory; {} not executed",
                   client_id_, queue, desc.completion, mover::opcode_name(desc.opcode));
}

bool ClientSpace::run_bounced(const dp_desc_t &d, const mover::ExecLimits &limits,
                              mover::OpResult *result) const {
    // The record first: like the engines, a descriptor whose record cannot
    // be reached does not run.
    const bool wants_record = d.flags & DP_FLAG_COMPLETION;
    if (wants_record && (d.completion % alignof(dp_completion_t) != 0 ||
                         (!in_pool(d.completion, sizeof(dp_completion_t)) &&
                          !direct_allows(d.completion, sizeof(dp_completion_t)))))
        return false;
    std::string io_error;
    BounceSpace space(
        this, [this](uint64_t a, uint64_t l) { return direct_allows(a, l); },
        [this, &io_error](uint64_t a, uint64_t l, bool, void *dst) {
            return process_->read(a, dst, l, &io_error);
        },
        max_direct_bytes_);
    dp_desc_t body = d;
    body.completion = 0;
    body.flags &= ~uint32_t(DP_FLAG_COMPLETION);
    *result = mover::execute(body, space, limits);
    const bool wrote = mover::is_success(result->status) || result->status == DP_COMP_BATCH_FAILED;
    if (wrote) {
        // In the order the kernel asked for them (dst before dualcast's
        // second destination), a batch member's record after its data,
        // through publish(). A fault part-way stops here: what was written
        // stays, the rest (later records too) is untouched, and the status
        // says where.
        for (const BounceSpace::Bounce *b : space.write_back_order()) {
            if (b->record) {
                dp_completion_t rec;
                std::memcpy(&rec, b->bytes.data(), sizeof rec);
                mover::OpResult member;
                member.status = rec.status;
                member.result = rec.result;
                member.bytes = rec.bytes_completed;
                member.value = rec.value;
                publish(b->addr, member, rec.user);
                continue;
            }
            if (b->bytes.empty()) continue;
            size_t written = 0;
            if (!process_->write(b->addr, b->bytes.data(), b->bytes.size(), &written, &io_error)) {
                DP_LOG_LIMITED(log_, "client {}: {}: direct write-back faulted: {}", client_id_,
                               mover::opcode_name(d.opcode), io_error);
                *result = {};
                result->status = DP_COMP_PAGE_FAULT;
                result->bytes = written;
                result->value = b->addr + written;
                break;
            }
        }
    }
    if (result->status == DP_COMP_ADDRESS_DENIED)
        DP_LOG_LIMITED(log_, "client {}: {} denied: {}{}", client_id_, mover::opcode_name(d.opcode),
                       space.refusal(), io_error.empty() ? "" : " (" + io_error + ")");
    if (wants_record) publish(d.completion, *result, d.user);
    return true;
}

bool ClientSpace::read(uint64_t addr, void *out, uint64_t len, std::string *why) const {
    if (void *q = translate(addr, len, mover::Access::read)) return std::memcpy(out, q, len), true;
    if (!direct_allows(addr, len)) {
        *why = fmt::format("[0x{:x}, +{}) is outside the client's pool and registered memory", addr,
                           len);
        return false;
    }
    return process_->read(addr, out, len, why);
}

bool ClientSpace::write(uint64_t addr, const void *in, uint64_t len, std::string *why) const {
    if (void *q = translate(addr, len, mover::Access::write)) return std::memcpy(q, in, len), true;
    if (!direct_allows(addr, len)) {
        *why = fmt::format("[0x{:x}, +{}) is outside the client's pool and registered memory", addr,
                           len);
        return false;
    }
    size_t written = 0;
    return process_->write(addr, in, len, &written, why);
}

bool ClientSpace::publish_in_place(uint64_t record, const mover::OpResult &result,
                                   uint64_t user) const {
    if (record % alignof(dp_completion_t) != 0) return false;
    auto *rec = static_cast<dp_completion_t *>(
        translate(record, sizeof(dp_completion_t), mover::Access::write));
    if (rec) mover::publish_completion(rec, result, user);
    return rec != nullptr;
}

bool ClientSpace::publish(uint64_t record, const mover::OpResult &result, uint64_t user) const {
    if (publish_in_place(record, result, user)) return true;
    if (record % alignof(dp_completion_t) != 0) return false;
    if (!direct_allows(record, sizeof(dp_completion_t))) return false;
    dp_completion_t local{};
    mover::publish_completion(&local, result, user);
    // Everything but the status first, then the status byte: a client
    // polling the record never sees "done" before the rest is there.
    auto *bytes = reinterpret_cast<const uint8_t *>(&local);
    std::string error;
    size_t written = 0;
    if (!process_->write(record + 1, bytes + 1, sizeof(local) - 1, &written, &error) ||
        !process_->write(record, bytes, 1, &written, &error))
        DP_LOG_LIMITED(log_, "client {}: completion record write failed: {}", client_id_, error);
    return true;
}

}  // namespace deputy::agent
