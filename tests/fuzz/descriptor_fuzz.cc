// libFuzzer target for what the agent's engines read from a client's
// segment: a 64-byte descriptor (from the client's ring) and the memory it
// points into (the client's pool), where BATCH member arrays and APPLY_DELTA
// records live. Built by tests/fuzz/CMakeLists.txt, run by scripts/fuzz.sh.
//
// Input: bytes 0..63 are the descriptor; the rest is copied to the start of
// a 64 KiB "pool" mapped between two inaccessible guard pages, as a client
// segment is (common/segment.h). Addresses in the descriptor are the
// client's: [kBase, kBase + 64 KiB) is the pool, anything else is refused,
// as the agent's ClientSpace refuses it. The fuzzer steers addresses into
// the pool through the seed corpus (tests/fuzz/corpus/descriptor).
//
// Besides ASan and UBSan (any report stops the run; the guard pages turn an
// overrun of the pool into a crash even without ASan's redzones), the
// target aborts when a property breaks:
//   - the status is a defined dp_comp_status_t;
//   - a single descriptor (not a batch) writes nothing outside the
//     destinations its opcode names and its completion record, and a
//     refused one (invalid, denied, overlap) writes nothing at all.
#include <deputy/log.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "mover/dif.h"
#include "mover/execute.h"

namespace {

using deputy::mover::Access;
using deputy::mover::AddressSpace;
using deputy::mover::dif_shape;
using deputy::mover::DifShape;
using deputy::mover::ExecLimits;
using deputy::mover::OpResult;

constexpr uint64_t kBase = 0x10000000;
constexpr size_t kPool = 64 << 10;
constexpr size_t kPage = 4096;

[[noreturn]] void fail(const char *what, int line) {
    std::fprintf(stderr, "descriptor_fuzz:%d: property broken: %s\n", line, what);
    std::abort();
}
#define REQUIRE(cond)                       \
    do {                                    \
        if (!(cond)) fail(#cond, __LINE__); \
    } while (0)

uint8_t *guarded_pool() {
    static uint8_t *pool = [] {
        auto *area = static_cast<uint8_t *>(
            mmap(nullptr, kPool + 2 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (area == MAP_FAILED || mprotect(area + kPage, kPool, PROT_READ | PROT_WRITE) != 0)
            std::abort();
        return area + kPage;
    }();
    return pool;
}

class PoolSpace final : public AddressSpace {
  public:
    void *translate(uint64_t addr, uint64_t len, Access) const override {
        if (addr < kBase) return nullptr;
        const uint64_t off = addr - kBase;
        if (off > kPool || len > kPool - off || (len == 0 && off == kPool)) return nullptr;
        return guarded_pool() + off;
    }
};

// The pool ranges a single descriptor may write: its destinations and its
// record. Out-of-pool ranges are dropped (the descriptor is refused then).
struct Range {
    uint64_t lo, hi;
};
std::vector<Range> writable(const dp_desc_t &d) {
    std::vector<Range> out;
    auto add = [&](uint64_t addr, uint64_t len) {
        if (addr >= kBase && addr - kBase <= kPool && len <= kPool)
            out.push_back({addr - kBase, std::min<uint64_t>(addr - kBase + len, kPool)});
    };
    switch (d.opcode) {
        case DP_OP_MEMMOVE:
        case DP_OP_FILL:
        case DP_OP_COPY_CRC32C:
        case DP_OP_APPLY_DELTA:
        case DP_OP_REDUCE:
        case DP_OP_CACHE_FLUSH:
            add(d.dst, d.size);
            break;
        case DP_OP_CREATE_DELTA:
            add(d.dst, d.aux);
            break;
        case DP_OP_DUALCAST:
            add(d.dst, d.size);
            add(d.src2, d.size);
            break;
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE: {
            DifShape shape;
            if (dif_shape(d, &shape) == DP_COMP_SUCCESS) add(d.dst, shape.dst_bytes);
            break;
        }
        default:
            break;
    }
    if (d.flags & DP_FLAG_COMPLETION) add(d.completion, sizeof(dp_completion_t));
    return out;
}

bool refused(uint8_t status) {
    return status == DP_COMP_INVALID_OPCODE || status == DP_COMP_INVALID_SIZE ||
           status == DP_COMP_INVALID_FLAGS || status == DP_COMP_INVALID_FIELD ||
           status == DP_COMP_ADDRESS_DENIED || status == DP_COMP_OVERLAP ||
           status == DP_COMP_INVALID_BATCH;
}

int write_corpus(const char *dir) {
    struct Input {
        const char *name;
        dp_desc_t desc;
        std::vector<uint8_t> pool;
    };
    auto d = [](uint8_t op, uint64_t src, uint64_t dst, uint64_t size) {
        dp_desc_t x{};
        x.opcode = op;
        x.src = src ? kBase + src : 0;
        x.dst = dst ? kBase + dst : 0;
        x.size = size;
        return x;
    };
    std::vector<Input> inputs;
    inputs.push_back(
        {"memmove", d(DP_OP_MEMMOVE, 0x100, 0x2000, 512), std::vector<uint8_t>(1024, 7)});
    dp_desc_t fill = d(DP_OP_FILL, 0, 0x1000, 256);
    fill.src2 = 0x1122334455667788ull;
    fill.flags = DP_FLAG_COMPLETION;
    fill.completion = kBase + 0x3000;
    inputs.push_back({"fill-record", fill, {}});
    // APPLY_DELTA: a record of two entries at pool offset 0.
    dp_desc_t apply = d(DP_OP_APPLY_DELTA, 0x40, 0x1000, 64);
    apply.aux = 20;
    std::vector<uint8_t> delta(0x40 + 20, 0);
    delta[0x40] = 1;
    delta[0x40 + 10] = 7;
    inputs.push_back({"apply-delta", apply, delta});
    dp_desc_t create = d(DP_OP_CREATE_DELTA, 0x100, 0x4000, 64);
    create.src2 = kBase + 0x200;
    create.aux = 80;
    inputs.push_back({"create-delta", create, std::vector<uint8_t>(0x300, 3)});
    // A BATCH of two members at pool offset 0.
    dp_desc_t members[2] = {d(DP_OP_MEMMOVE, 0x1000, 0x2000, 64), d(DP_OP_FILL, 0, 0x3000, 64)};
    members[1].flags = DP_FLAG_COMPLETION | DP_FLAG_FENCE;
    members[1].completion = kBase + 0x4000;
    std::vector<uint8_t> array(sizeof members);
    std::memcpy(array.data(), members, sizeof members);
    inputs.push_back({"batch", d(DP_OP_BATCH, 0, 0, 2), array});
    inputs.back().desc.src = kBase;
    dp_desc_t reduce = d(DP_OP_REDUCE, 0x100, 0x1000, 256);
    reduce.src2 = kBase + 0x400;
    reduce.dtype = DP_FLOAT32;
    reduce.redop = DP_SUM;
    inputs.push_back({"reduce", reduce, {}});
    // DIF: insert two 512-byte blocks, and strip them again (tuples at
    // pool offsets 0x200 and 0x408, tags of the seeds below).
    dp_desc_t insert = d(DP_OP_DIF_INSERT, 0x1000, 0x2000, 1024);
    insert.aux = DP_DIF_TAGS(1, 0, 2);
    inputs.push_back({"dif-insert", insert, std::vector<uint8_t>(0x1400, 5)});
    dp_desc_t strip = d(DP_OP_DIF_STRIP, 0x100, 0x3000, 1040);
    strip.src2 = DP_DIF_TAGS(1, 0xffff, 2);
    strip.dtype = DP_DIF_SRC_GUARD_CHECK_OFF | DP_DIF_SRC_REF_TAG_CHECK_OFF;
    inputs.push_back({"dif-strip", strip, std::vector<uint8_t>(0x600, 9)});
    for (const Input &s : inputs) {
        std::string path = std::string(dir) + "/" + s.name;
        FILE *f = std::fopen(path.c_str(), "wb");
        if (!f || std::fwrite(&s.desc, 1, 64, f) != 64 ||
            (!s.pool.empty() && std::fwrite(s.pool.data(), 1, s.pool.size(), f) != s.pool.size()) ||
            std::fclose(f) != 0) {
            std::perror(path.c_str());
            return 1;
        }
    }
    std::printf("descriptor_fuzz: wrote %zu corpus inputs to %s\n", inputs.size(), dir);
    return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
    deputy::log::set_sdk_level(DP_LOG_DISABLE);  // refusals are checked, not read
    constexpr std::string_view flag = "-write_corpus=";
    for (int i = 1; i < *argc; ++i) {
        std::string_view arg = (*argv)[i];
        if (arg.substr(0, flag.size()) == flag) std::exit(write_corpus((*argv)[i] + flag.size()));
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < sizeof(dp_desc_t)) return 0;
    dp_desc_t desc;
    std::memcpy(&desc, data, sizeof desc);
    uint8_t *pool = guarded_pool();
    const size_t n = std::min(size - sizeof desc, kPool);
    std::memset(pool, 0, kPool);
    std::memcpy(pool, data + sizeof desc, n);
    static std::vector<uint8_t> before(kPool);
    std::memcpy(before.data(), pool, kPool);

    static const PoolSpace space;
    const ExecLimits limits{kPool, 8, 1 << 20};
    OpResult result;
    if (!space.run(desc, limits, &result)) return 0;  // record refused: nothing ran
    REQUIRE(result.status < DP_COMP_STATUS_COUNT);
    if (desc.opcode == DP_OP_BATCH) return 0;
    const std::vector<Range> ok = writable(desc);
    const bool nothing = refused(result.status);
    const size_t record = desc.completion >= kBase ? size_t(desc.completion - kBase) : kPool;
    for (size_t i = 0; i < kPool; ++i) {
        if (pool[i] == before[i]) continue;
        bool allowed = false;
        for (const Range &r : ok) allowed |= i >= r.lo && i < r.hi;
        // A refused descriptor still reports: its record is all it writes.
        if (nothing)
            allowed = (desc.flags & DP_FLAG_COMPLETION) && i >= record &&
                      i < record + sizeof(dp_completion_t);
        REQUIRE(allowed);
    }
    return 0;
}
