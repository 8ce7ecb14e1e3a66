// A region: which buffer of one rank a schedule step touches, and where.
//
// Schedules never hold addresses. A step names one of three buffers per rank
// (the user's source, the user's destination, the collective's scratch) plus
// a byte range, and whoever runs the schedule binds the names to memory: a
// pointer in the in-memory test executor, a registered range of a client's
// address space in the agent. That is what lets one schedule run on any
// transport and lets the runtime check every access against the buffer sizes
// the schedule declares.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deputy::coll {

enum class BufferId : uint8_t {
    source = 0,       // the caller's input; read only, absent when in place
    destination = 1,  // the caller's output (and input, when in place)
    scratch = 2,      // temporary space the schedule asks the runtime for
};
inline constexpr int kBufferCount = 3;

const char *buffer_name(BufferId id);  // "source", "destination", "scratch"

struct Region {
    BufferId buffer = BufferId::scratch;
    size_t offset = 0;  // bytes from the start of the buffer
    size_t bytes = 0;   // 0: the step moves no data (a barrier's token)

    size_t end() const { return offset + bytes; }
    bool empty() const { return bytes == 0; }

    // The part [from, from + length) of this region, relative to its start.
    Region sub(size_t from, size_t length) const { return {buffer, offset + from, length}; }

    friend bool operator==(const Region &, const Region &) = default;
};

inline Region source_region(size_t offset, size_t bytes) {
    return {BufferId::source, offset, bytes};
}
inline Region destination_region(size_t offset, size_t bytes) {
    return {BufferId::destination, offset, bytes};
}
inline Region scratch_region(size_t offset, size_t bytes) {
    return {BufferId::scratch, offset, bytes};
}

// True when both regions touch at least one common byte. Empty regions
// overlap nothing.
inline bool overlaps(const Region &a, const Region &b) {
    return a.buffer == b.buffer && !a.empty() && !b.empty() && a.offset < b.end() &&
           b.offset < a.end();
}

}  // namespace deputy::coll
