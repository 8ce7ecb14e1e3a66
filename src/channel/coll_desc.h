// How a collective travels from a member to the agent: as one 64-byte
// descriptor in the member's ring, next to its mover descriptors, with an
// opcode the mover never sees (the agent routes 0x80 and above to its team
// engine). Field use:
//   opcode     kCollAllreduce ... kCollBarrier
//   dtype      dp_dtype_t (reducing ops; bytes per element for the others)
//   redop      dp_op_t (reducing ops)
//   flags      0
//   completion the member's completion record (its pool or a registered range)
//   src, dst   the member's buffers (bcast: both the buffer)
//   src2       team id (low 32 bits)
//   size       count in elements
//   aux        root (bcast)
//   user       the member's own sequence number (diagnostics)
#pragma once

#include <deputy/mover.h>

#include <cstdint>

namespace deputy::channel {

enum CollOpcode : uint8_t {
    kCollFirst = 0x80,
    kCollAllreduce = 0x80,
    kCollReduceScatter = 0x81,
    kCollAllgather = 0x82,
    kCollAlltoall = 0x83,
    kCollBcast = 0x84,
    kCollBarrier = 0x85,
    kCollLast = 0x85,
};

inline bool is_coll_opcode(uint8_t opcode) { return opcode >= kCollFirst; }
inline bool coll_reduces(uint8_t opcode) {
    return opcode == kCollAllreduce || opcode == kCollReduceScatter;
}
const char *coll_opcode_name(uint8_t opcode);  // "allreduce", ...; "unknown"

}  // namespace deputy::channel
