#include "agent/bounce_space.h"

#include <fmt/format.h>

namespace deputy::agent {

void *BounceSpace::translate(uint64_t addr, uint64_t len, mover::Access access) const {
    if (in_place_) {
        if (void *p = in_place_->translate(addr, len, access)) return p;
    }
    if (addr == 0 || addr + len < addr) return nullptr;
    if (!allowed_(addr, len)) {
        refusal_ = fmt::format("[0x{:x}, +{}) is not in memory this client registered", addr, len);
        return nullptr;
    }
    if (len > max_bytes_ - used_bytes_) {
        refusal_ = fmt::format("[0x{:x}, +{}) needs more than max_direct_bytes/max_staged_bytes "
                               "({} bytes per descriptor)",
                               addr, len, max_bytes_);
        return nullptr;
    }
    auto bounce = std::make_unique<Bounce>();
    bounce->addr = addr;
    bounce->written = access == mover::Access::write;
    if (len) {
        bounce->bytes = scratch::get(len);
        if (!bounce->bytes.data()) {
            refusal_ = fmt::format("[0x{:x}, +{}): the agent is out of memory", addr, len);
            return nullptr;
        }
    }
    if (len && !fetch_(addr, len, bounce->written, bounce->bytes.data())) {
        refusal_ = fmt::format("[0x{:x}, +{}) could not be read from the client", addr, len);
        return nullptr;
    }
    used_bytes_ += len;
    // A 0-byte range still needs a valid pointer.
    void *p = len ? static_cast<void *>(bounce->bytes.data()) : &zero_length_target_;
    bounces_.push_back(std::move(bounce));
    return p;
}

}  // namespace deputy::agent
