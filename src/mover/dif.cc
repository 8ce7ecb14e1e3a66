#include "mover/dif.h"

namespace deputy::mover {

uint32_t dif_block_bytes(unsigned op_flags) {
    static constexpr uint32_t kBlocks[4] = {512, 520, 4096, 4104};
    return kBlocks[op_flags & 3u];
}

uint8_t dif_shape(const dp_desc_t &d, DifShape *shape) {
    if (d.op_flags & ~DP_DIF_FLAGS_ALL) return DP_COMP_INVALID_FIELD;
    const bool reads_tuples = d.opcode != DP_OP_DIF_INSERT;
    const bool writes_tuples = d.opcode == DP_OP_DIF_INSERT || d.opcode == DP_OP_DIF_UPDATE;
    // Destination flags mean something only where tuples are written, and
    // pass-through only where there is a source tuple to pass.
    if (!writes_tuples && d.redop != 0) return DP_COMP_INVALID_FIELD;
    if (d.redop & ~DP_DIF_DST_FLAGS_ALL) return DP_COMP_INVALID_FIELD;
    const unsigned pass = DP_DIF_DST_APP_TAG_PASS | DP_DIF_DST_GUARD_PASS | DP_DIF_DST_REF_TAG_PASS;
    if (d.opcode == DP_OP_DIF_INSERT && (d.redop & pass)) return DP_COMP_INVALID_FIELD;
    if (!reads_tuples && d.dtype != 0) return DP_COMP_INVALID_FIELD;

    const uint32_t block = dif_block_bytes(d.op_flags);
    const uint64_t unit = reads_tuples ? block + DP_DIF_TUPLE_SIZE : block;
    if (d.size == 0 || d.size % unit != 0) return DP_COMP_INVALID_SIZE;
    shape->block = block;
    shape->blocks = d.size / unit;
    shape->src_bytes = d.size;
    switch (d.opcode) {
        case DP_OP_DIF_CHECK: shape->dst_bytes = 0; break;
        case DP_OP_DIF_STRIP: shape->dst_bytes = shape->blocks * block; break;
        case DP_OP_DIF_UPDATE: shape->dst_bytes = d.size; break;
        case DP_OP_DIF_INSERT:
            if (__builtin_mul_overflow(shape->blocks, uint64_t(block + DP_DIF_TUPLE_SIZE),
                                       &shape->dst_bytes))
                return DP_COMP_INVALID_SIZE;
            break;
        default: return DP_COMP_INVALID_OPCODE;
    }
    return DP_COMP_SUCCESS;
}

}  // namespace deputy::mover
