// T10 DIF on ISA-L's CRC16 T10-DIF (which picks its own PCLMUL version at
// run time, so there is no per-ISA variant here). INSERT computes each guard
// while it copies the block (crc16_t10dif_copy); the operations that check
// judge a block before they copy it, so a failing block writes nothing.
#include <isa-l/crc.h>

#include <cstring>

#include "mover/kernels.h"

namespace deputy::mover::kernels {
namespace {

struct Tags {
    uint32_t ref;
    uint16_t mask;
    uint16_t app;
};
Tags unpack(uint64_t word) { return {uint32_t(word), uint16_t(word >> 32), uint16_t(word >> 48)}; }
uint64_t pack(const Tags &t) { return DP_DIF_TAGS(t.ref, t.mask, t.app); }

// The tags block `i` carries, from the seeds and the tags' types.
Tags tags_of_block(const Tags &seed, uint64_t i, bool ref_fixed, bool app_increment) {
    Tags t = seed;
    if (!ref_fixed) t.ref = uint32_t(seed.ref + i);
    if (app_increment) t.app = uint16_t(seed.app + i);
    return t;
}

// The 8-byte tuple, big-endian on the medium.
struct Tuple {
    uint16_t guard;
    uint16_t app;
    uint32_t ref;
};
Tuple read_tuple(const uint8_t *p) {
    return {uint16_t(p[0] << 8 | p[1]), uint16_t(p[2] << 8 | p[3]),
            uint32_t(p[4]) << 24 | uint32_t(p[5]) << 16 | uint32_t(p[6]) << 8 | p[7]};
}
void write_tuple(uint8_t *p, const Tuple &t) {
    const uint8_t bytes[8] = {uint8_t(t.guard >> 8), uint8_t(t.guard), uint8_t(t.app >> 8),
                              uint8_t(t.app),        uint8_t(t.ref >> 24), uint8_t(t.ref >> 16),
                              uint8_t(t.ref >> 8),   uint8_t(t.ref)};
    std::memcpy(p, bytes, sizeof(bytes));
}

uint16_t seed_of(unsigned op_flags) { return op_flags & DP_DIF_INVERT_CRC_SEED ? 0xffff : 0; }
uint16_t finish(uint16_t crc, unsigned op_flags) {
    return op_flags & DP_DIF_INVERT_CRC_RESULT ? uint16_t(~crc) : crc;
}

// The guard of `data`, copied to `copy_to` on the way when it is not null.
uint16_t guard_of(const uint8_t *data, uint8_t *copy_to, uint32_t n, unsigned op_flags) {
    // ISA-L's prototypes lack const; they only read the source.
    auto *in = const_cast<uint8_t *>(data);
    const uint16_t crc = copy_to ? crc16_t10dif_copy(seed_of(op_flags), copy_to, in, n)
                                 : crc16_t10dif(seed_of(op_flags), in, n);
    return finish(crc, op_flags);
}

// What failed in a source block's tuple (DP_DIF_ERR_*), 0 when it passed or
// escaped. `guard` is the block's computed guard.
uint32_t check(const Tuple &have, uint16_t guard, const Tags &want, unsigned src_flags) {
    const bool app_f = have.app == 0xffff;
    const bool app_ref_f = app_f && have.ref == 0xffffffffu;
    if ((src_flags & DP_DIF_SRC_ALL_F_DETECT) && app_ref_f && have.guard == 0xffff)
        return src_flags & DP_DIF_SRC_ALL_F_ERROR ? DP_DIF_ERR_ALL_F : 0;
    if ((src_flags & DP_DIF_SRC_APP_F_DETECT) && app_f) return 0;
    if ((src_flags & DP_DIF_SRC_APP_REF_F_DETECT) && app_ref_f) return 0;
    uint32_t error = 0;
    if (!(src_flags & DP_DIF_SRC_GUARD_CHECK_OFF) && have.guard != guard) error |= DP_DIF_ERR_GUARD;
    if (((have.app ^ want.app) & ~unsigned(want.mask) & 0xffffu) != 0) error |= DP_DIF_ERR_APP_TAG;
    if (!(src_flags & DP_DIF_SRC_REF_TAG_CHECK_OFF) && have.ref != want.ref)
        error |= DP_DIF_ERR_REF_TAG;
    return error;
}

}  // namespace

uint16_t dif_guard(const void *block, size_t n, unsigned op_flags) {
    return finish(crc16_t10dif(seed_of(op_flags), static_cast<const unsigned char *>(block), n),
                  op_flags);
}

DifOutcome dif(const DifJob &job, const void *src, void *dst, uint64_t blocks) {
    const bool reads_tuples = job.opcode != DP_OP_DIF_INSERT;
    const bool writes_tuples = job.opcode == DP_OP_DIF_INSERT || job.opcode == DP_OP_DIF_UPDATE;
    const uint32_t n = job.block;
    const uint64_t in_stride = reads_tuples ? n + DP_DIF_TUPLE_SIZE : n;
    const uint64_t out_stride = writes_tuples ? n + DP_DIF_TUPLE_SIZE : n;
    const Tags src_seed = unpack(job.src_tags), dst_seed = unpack(job.dst_tags);
    const bool src_ref_fixed = job.src_flags & DP_DIF_SRC_REF_TAG_FIXED;
    const bool src_app_increment = job.src_flags & DP_DIF_SRC_APP_TAG_INCREMENT;
    const bool dst_ref_fixed = job.dst_flags & DP_DIF_DST_REF_TAG_FIXED;
    const bool dst_app_increment = job.dst_flags & DP_DIF_DST_APP_TAG_INCREMENT;
    // The guard is needed unless nothing reads or writes it: STRIP without
    // the guard check copies the block and nothing else.
    const bool need_guard = !(job.src_flags & DP_DIF_SRC_GUARD_CHECK_OFF) ||
                            (writes_tuples && !(job.dst_flags & DP_DIF_DST_GUARD_PASS));

    const auto *in = static_cast<const uint8_t *>(src);
    auto *out = static_cast<uint8_t *>(dst);
    DifOutcome outcome;
    uint64_t i = 0;
    for (; i < blocks; ++i) {
        const uint8_t *data = in + i * in_stride;
        uint8_t *copy_to = out ? out + i * out_stride : nullptr;
        uint16_t guard = 0;
        Tuple have{};
        if (reads_tuples) {
            // Judged before a byte of it is written: a failing block leaves
            // the destination as it was (the block is in L1 for the copy).
            if (need_guard) guard = guard_of(data, nullptr, n, job.op_flags);
            have = read_tuple(data + n);
            const Tags want = tags_of_block(src_seed, i, src_ref_fixed, src_app_increment);
            if (uint32_t error = check(have, guard, want, job.src_flags); error != 0) {
                outcome.error = error;
                break;
            }
            if (copy_to) std::memcpy(copy_to, data, n);
        } else {
            guard = guard_of(data, copy_to, n, job.op_flags);  // INSERT: one pass
        }
        if (writes_tuples) {
            const Tags made = tags_of_block(dst_seed, i, dst_ref_fixed, dst_app_increment);
            Tuple t{guard, made.app, made.ref};
            if (job.dst_flags & DP_DIF_DST_GUARD_PASS) t.guard = have.guard;
            if (job.dst_flags & DP_DIF_DST_APP_TAG_PASS) t.app = have.app;
            if (job.dst_flags & DP_DIF_DST_REF_TAG_PASS) t.ref = have.ref;
            write_tuple(copy_to + n, t);
        }
    }
    outcome.blocks = i;
    outcome.next_tags = dif_next_tags(job, i);
    return outcome;
}

uint64_t dif_next_tags(const DifJob &job, uint64_t blocks) {
    if (job.opcode == DP_OP_DIF_INSERT)
        return pack(tags_of_block(unpack(job.dst_tags), blocks,
                                  job.dst_flags & DP_DIF_DST_REF_TAG_FIXED,
                                  job.dst_flags & DP_DIF_DST_APP_TAG_INCREMENT));
    return pack(tags_of_block(unpack(job.src_tags), blocks, job.src_flags & DP_DIF_SRC_REF_TAG_FIXED,
                              job.src_flags & DP_DIF_SRC_APP_TAG_INCREMENT));
}

}  // namespace deputy::mover::kernels
