// The shape of a DIF descriptor (mover.h, "DIF operations"): its block
// size, block count and destination bytes, decoded from its fields and
// checked. The one place that knows how many bytes a DIF operation reads and
// writes: execution, the stand-in device and the staged client ask it.
#pragma once

#include <deputy/mover.h>

#include <cstdint>

#include "mover/kernels.h"

namespace deputy::mover {

inline bool is_dif(unsigned opcode) {
    return opcode == DP_OP_DIF_CHECK || opcode == DP_OP_DIF_INSERT ||
           opcode == DP_OP_DIF_STRIP || opcode == DP_OP_DIF_UPDATE;
}

// Data bytes per block for op_flags' block-size code.
uint32_t dif_block_bytes(unsigned op_flags);

struct DifShape {
    uint32_t block = 0;      // data bytes per block
    uint64_t blocks = 0;
    uint64_t src_bytes = 0;  // = the descriptor's size
    uint64_t dst_bytes = 0;  // 0 for CHECK
};

// DP_COMP_SUCCESS with *shape filled, or the status a device answers: the
// size not a whole number of blocks (INVALID_SIZE), a flag bit that means
// nothing for this opcode (INVALID_FIELD). The descriptor's other fields are
// the caller's to check (execute.cc's field use).
uint8_t dif_shape(const dp_desc_t &d, DifShape *shape);

// The shape of a descriptor dif_shape() already accepted.
inline DifShape checked_dif_shape(const dp_desc_t &d) {
    DifShape shape;
    (void)dif_shape(d, &shape);
    return shape;
}

// The kernels' job for a checked descriptor of that shape.
inline kernels::DifJob dif_job(const dp_desc_t &d, const DifShape &shape) {
    return {d.opcode, shape.block, d.op_flags, d.dtype, d.redop, d.src2, d.aux};
}

}  // namespace deputy::mover
