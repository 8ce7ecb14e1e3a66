#include "bench/coll/collective.h"

#include <vector>

namespace deputy::bench::coll {
namespace {

using ::deputy::coll::CollectiveInfo;
using ::deputy::coll::collective_info;
using ::deputy::coll::kBlocksPerMember;

// Every collective of the table, blocking then non-blocking ("i" prefix).
const std::vector<OpInfo> &ops() {
    static const std::vector<OpInfo> all = [] {
        std::vector<OpInfo> out;
        for (int i = 0; i < ::deputy::coll::kCollectiveCount; ++i) {
            const Coll c = static_cast<Coll>(i);
            out.push_back({collective_name(c), c, false});
            out.push_back({std::string("i") + collective_name(c), c, true});
        }
        return out;
    }();
    return all;
}

size_t elems(uint8_t table_blocks, size_t count, int ranks) {
    return table_blocks == kBlocksPerMember ? count * size_t(ranks) : count * table_blocks;
}

}  // namespace

bool blocked(Coll c) {
    const CollectiveInfo &info = collective_info(c);
    return info.source_blocks == kBlocksPerMember || info.dest_blocks == kBlocksPerMember;
}

const OpInfo *find_op(std::string_view name) {
    for (const OpInfo &op : ops())
        if (name == op.name) return &op;
    return nullptr;
}

std::string op_names() {
    std::string out;
    for (const OpInfo &op : ops()) out += (out.empty() ? "" : ", ") + op.name;
    return out;
}

size_t send_elems(Coll c, size_t count, int ranks) {
    return elems(collective_info(c).source_blocks, count, ranks);
}

size_t recv_elems(Coll c, size_t count, int ranks) {
    return elems(collective_info(c).dest_blocks, count, ranks);
}

size_t count_for_size(Coll c, uint64_t bytes, size_t elem_bytes, int ranks) {
    if (collective_info(c).dest_blocks == 0) return 0;  // barrier
    return size_t(bytes / (elem_bytes * (blocked(c) ? size_t(ranks) : 1)));
}

uint64_t size_of(Coll c, size_t count, size_t elem_bytes, int ranks) {
    if (collective_info(c).dest_blocks == 0) return 0;
    return uint64_t(count) * elem_bytes * (blocked(c) ? uint64_t(ranks) : 1);
}

}  // namespace deputy::bench::coll
