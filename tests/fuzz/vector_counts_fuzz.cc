// libFuzzer target for alltoallv's counts block (coll/vector_counts.h): the
// bytes a member writes into its pool, which the agent copies and decodes.
// Built by tests/fuzz/CMakeLists.txt, run by scripts/fuzz.sh.
//
// Input: byte 0 is the team size (1..64, folded), byte 1 picks the element
// size (0, 1, 2, 4, 8), byte 2 the limit on bytes per member (2^(byte % 64));
// the rest is the block, of whatever length (the decoder must refuse every
// length but the team's).
//
// Besides ASan and UBSan (any report stops the run), the target aborts when
// a property breaks:
//   - the status is DP_OK, DP_ERR_INVALID, DP_ERR_DENIED or DP_ERR_TOO_LARGE,
//     with a reason whenever it is not DP_OK;
//   - DP_ERR_INVALID exactly when the length is not the team's or the
//     element size is 0;
//   - accepted: one block per member and side, each of count x element
//     bytes at displacement x element (0 and 0 for a count of 0), ending
//     below 2^64, and totals that are the sums and within the limit;
//   - vector_difference over a team whose every rank has these counts is
//     empty exactly when every send[m] has the bytes of every recv[r]
//     (checked pair by pair);
//   - reduce_scatterv's layout check accepts exactly the blocks that lie
//     back to back from 0 with one result block at 0, and the decode every
//     runner calls (decode_collective_counts) applies it to reduce_scatterv
//     only.
#include <deputy/log.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "coll/vector_counts.h"
#include "common/log.h"

namespace {

using deputy::coll::MemberVector;
using deputy::coll::vector_counts_bytes;

[[noreturn]] void fail(const char *what, int line) {
    std::fprintf(stderr, "vector_counts_fuzz:%d: property broken: %s\n", line, what);
    std::abort();
}
#define REQUIRE(cond)                       \
    do {                                    \
        if (!(cond)) fail(#cond, __LINE__); \
    } while (0)

constexpr uint64_t kElementSizes[] = {0, 1, 2, 4, 8};

uint64_t entry(const uint8_t *block, uint32_t array, uint32_t entries, uint32_t i) {
    uint64_t v;
    std::memcpy(&v, block + (uint64_t(array) * entries + i) * 8, 8);
    return v;
}

int write_corpus(const char *dir) {
    struct Input {
        const char *name;
        uint8_t team, element, limit;
        std::vector<uint64_t> block;
    };
    const std::vector<Input> inputs = {
        {"two-members", 2, 3, 36, {3, 5, 0, 16, 3, 7, 0, 3}},
        {"zeros-and-gaps", 3, 1, 36, {0, 4, 1, 99, 10, 20, 2, 0, 9, 5, 40, 0}},
        {"overflow", 1, 4, 36, {uint64_t(1) << 62, 0, 1, 0}},
        {"too-large", 2, 2, 10, {600, 500, 0, 600, 1, 1, 0, 1}},
    };
    for (const Input &s : inputs) {
        std::string path = std::string(dir) + "/" + s.name;
        FILE *f = std::fopen(path.c_str(), "wb");
        const uint8_t head[3] = {uint8_t(s.team - 1), s.element, s.limit};  // byte 0: size - 1
        if (!f || std::fwrite(head, 1, 3, f) != 3 ||
            std::fwrite(s.block.data(), 8, s.block.size(), f) != s.block.size() ||
            std::fclose(f) != 0) {
            std::perror(path.c_str());
            return 1;
        }
    }
    std::printf("vector_counts_fuzz: wrote %zu corpus inputs to %s\n", inputs.size(), dir);
    return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
    deputy::log::set_sdk_level(DP_LOG_DISABLE);
    constexpr std::string_view flag = "-write_corpus=";
    for (int i = 1; i < *argc; ++i) {
        std::string_view arg = (*argv)[i];
        if (arg.substr(0, flag.size()) == flag) std::exit(write_corpus((*argv)[i] + flag.size()));
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const uint32_t p = uint32_t(data[0] % 64) + 1;
    const uint64_t e = kElementSizes[data[1] % 5];
    const uint64_t max = uint64_t(1) << (data[2] % 64);
    // A copy of its own, as the agent's is: exactly the block's bytes, so
    // ASan sees any read past them.
    const std::vector<uint8_t> block(data + 3, data + size);
    MemberVector v;
    std::string why;
    const dp_status_t s =
        deputy::coll::decode_vector_counts(block.data(), block.size(), p, e, max, &v, &why);
    REQUIRE(s == DP_OK || s == DP_ERR_INVALID || s == DP_ERR_DENIED || s == DP_ERR_TOO_LARGE);
    REQUIRE((s == DP_OK) == why.empty());
    REQUIRE((s == DP_ERR_INVALID) == (block.size() != vector_counts_bytes(p) || e == 0));
    if (s != DP_OK) return 0;
    REQUIRE(v.send.size() == p && v.recv.size() == p);
    uint64_t totals[2] = {0, 0};
    for (uint32_t side = 0; side < 2; ++side) {
        const auto &blocks = side == 0 ? v.send : v.recv;
        for (uint32_t i = 0; i < p; ++i) {
            const uint64_t count = entry(block.data(), side * 2, p, i);
            const uint64_t displ = entry(block.data(), side * 2 + 1, p, i);
            if (count == 0) {
                REQUIRE(blocks[i].bytes == 0 && blocks[i].offset == 0);
                continue;
            }
            REQUIRE(blocks[i].bytes / e == count && blocks[i].bytes % e == 0);
            REQUIRE(blocks[i].offset / e == displ && blocks[i].offset % e == 0);
            REQUIRE(blocks[i].end() >= blocks[i].offset);  // no wrap
            totals[side] += blocks[i].bytes;
            REQUIRE(totals[side] <= max);
        }
    }
    REQUIRE(totals[0] == v.send_total && totals[1] == v.recv_total);
    // Every rank with these counts: they agree exactly when every pair does.
    std::vector<const MemberVector *> all(p, &v);
    bool agree = true;
    for (uint32_t r = 0; r < p; ++r)
        for (uint32_t m = 0; m < p; ++m) agree &= v.send[m].bytes == v.recv[r].bytes;
    REQUIRE(deputy::coll::vector_difference(all).empty() == agree);
    // reduce_scatterv's layout is accepted exactly when every send block
    // that has bytes starts where the ones before it end, and every
    // receive block is [0, +recv[0]); what it accepts tiles [0, send_total).
    bool tiles = true;
    uint64_t at = 0;
    for (uint32_t m = 0; m < p; ++m) {
        tiles &= v.send[m].bytes == 0 || v.send[m].offset == at;
        at += v.send[m].bytes;
    }
    for (uint32_t m = 0; m < p; ++m)
        tiles &= v.recv[m].offset == 0 && v.recv[m].bytes == v.recv[0].bytes;
    REQUIRE(deputy::coll::reduction_layout_problem(v).empty() == tiles);
    REQUIRE(!tiles || at == v.send_total);
    // What every runner calls (the agent, members running it themselves):
    // the decode alone for a moving collective, with the layout for the
    // reducing one.
    using deputy::coll::Collective;
    MemberVector again;
    std::string why_again;
    REQUIRE(deputy::coll::decode_collective_counts(Collective::alltoallv, block.data(),
                                                   block.size(), p, e, max, &again,
                                                   &why_again) == DP_OK);
    REQUIRE(deputy::coll::decode_collective_counts(Collective::reduce_scatterv, block.data(),
                                                   block.size(), p, e, max, &again,
                                                   &why_again) ==
            (tiles ? DP_OK : DP_ERR_INVALID));
    (void)deputy::coll::reduction_layout_digest(v);
    return 0;
}
