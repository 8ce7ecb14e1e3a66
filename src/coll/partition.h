// How algorithms cut a vector into blocks.
#pragma once

#include <cstddef>

#include "coll/region.h"

namespace deputy::coll {

// `count` elements cut into `parts` contiguous blocks whose sizes differ by at
// most one element, the larger ones first (the classic ring allreduce's
// layout): block i has count / parts + (i < count % parts) elements. Works for any count,
// including count < parts (the trailing blocks are then empty).
class BlockPartition {
  public:
    BlockPartition(size_t count, size_t parts, size_t element_bytes)
        : base_(count / parts), extra_(count % parts), element_bytes_(element_bytes) {}

    size_t elements(size_t i) const { return base_ + (i < extra_ ? 1 : 0); }
    size_t first_element(size_t i) const { return i * base_ + (i < extra_ ? i : extra_); }
    size_t bytes(size_t i) const { return elements(i) * element_bytes_; }
    size_t offset(size_t i) const { return first_element(i) * element_bytes_; }
    // Blocks [first, last) as one byte range (they are contiguous).
    size_t bytes(size_t first, size_t last) const { return offset(last) - offset(first); }
    size_t largest_bytes() const { return bytes(0); }

    // Block i (or blocks [first, last)) as a region of `buffer`, which holds
    // the vector from `base` on.
    Region region(BufferId buffer, size_t i, size_t base = 0) const {
        return {buffer, base + offset(i), bytes(i)};
    }
    Region region(BufferId buffer, size_t first, size_t last, size_t base) const {
        return {buffer, base + offset(first), bytes(first, last)};
    }

  private:
    size_t base_;
    size_t extra_;
    size_t element_bytes_;
};

}  // namespace deputy::coll
