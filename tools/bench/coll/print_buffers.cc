#include "bench/coll/print_buffers.h"

#include <cstdio>

namespace deputy::bench::coll {
namespace {

void print_block(const char *heading, const std::vector<std::string> &per_rank, const Dtype &t) {
    std::printf("           ----%s---\n", heading);
    for (size_t r = 0; r < per_rank.size(); ++r) {
        std::string line = " Rank " + std::to_string(r) + " |";
        const size_t n = per_rank[r].size() / t.bytes;
        for (size_t i = 0; i < n; ++i) line += " " + format_element(t, per_rank[r].data(), i);
        std::printf("%s\n", line.c_str());
    }
}

}  // namespace

void print_buffers(const World &world, const Pattern &p, const void *send, const void *recv,
                   const std::string &title) {
    if (p.coll == Coll::barrier) return;
    const size_t eb = p.dtype->bytes;
    auto sends = world.gather(send, send_elems(p.coll, p.count, p.ranks) * eb);
    auto recvs = world.gather(recv, recv_elems(p.coll, p.count, p.ranks) * eb);
    if (world.rank() != 0) return;
    std::printf("# %s\n", title.c_str());
    print_block("send buffs", sends, *p.dtype);
    print_block("recv buffs", recvs, *p.dtype);
    std::fflush(stdout);
}

}  // namespace deputy::bench::coll
