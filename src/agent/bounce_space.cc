#include "agent/bounce_space.h"

#include <fmt/format.h>

#include <cstring>

namespace deputy::agent {

void *BounceSpace::translate(uint64_t addr, uint64_t len, mover::Access access) const {
    const bool record = access == mover::Access::record;
    // A record in the pool is bounced too (and not fetched: the mover writes
    // all of it), so that it is published after the data it reports.
    bool pooled_record = false;
    if (in_place_) {
        if (void *p = in_place_->translate(addr, len, access)) {
            if (!record) return p;
            pooled_record = true;
        }
    }
    if (addr == 0 || addr + len < addr) return nullptr;
    if (!pooled_record && !allowed_(addr, len)) {
        refusal_ = fmt::format("[0x{:x}, +{}) is not in memory this client registered", addr, len);
        return nullptr;
    }
    if (!pooled_record && len > max_bytes_ - used_bytes_) {
        refusal_ = fmt::format("[0x{:x}, +{}) needs more than max_direct_bytes/max_staged_bytes "
                               "({} bytes per descriptor)",
                               addr, len, max_bytes_);
        return nullptr;
    }
    auto bounce = std::make_unique<Bounce>();
    bounce->addr = addr;
    bounce->written = access != mover::Access::read;
    bounce->record = record;
    if (len) {
        bounce->bytes = scratch::get(len);
        if (!bounce->bytes.data()) {
            refusal_ = fmt::format("[0x{:x}, +{}): the agent is out of memory", addr, len);
            return nullptr;
        }
    }
    if (pooled_record) {
        std::memset(bounce->bytes.data(), 0, len);
    } else if (len && !fetch_(addr, len, bounce->written, bounce->bytes.data())) {
        refusal_ = fmt::format("[0x{:x}, +{}) could not be read from the client", addr, len);
        return nullptr;
    } else {
        used_bytes_ += len;
    }
    // A 0-byte range still needs a valid pointer.
    void *p = len ? static_cast<void *>(bounce->bytes.data()) : &zero_length_target_;
    bounces_.push_back(std::move(bounce));
    return p;
}

std::vector<const BounceSpace::Bounce *> BounceSpace::write_back_order() const {
    std::vector<const Bounce *> order;
    const Bounce *record = nullptr;  // waits for the data of its member
    for (const auto &b : bounces_) {
        if (b->record) {
            if (record) order.push_back(record);
            record = b.get();
        } else if (b->written) {
            order.push_back(b.get());
        }
    }
    if (record) order.push_back(record);
    return order;
}

}  // namespace deputy::agent
