#include "channel/coll_desc.h"

namespace deputy::channel {

const char *coll_opcode_name(uint8_t opcode) {
    switch (opcode) {
        case kCollAllreduce: return "allreduce";
        case kCollReduceScatter: return "reduce_scatter";
        case kCollAllgather: return "allgather";
        case kCollAlltoall: return "alltoall";
        case kCollBcast: return "bcast";
        case kCollBarrier: return "barrier";
        default: return "unknown";
    }
}

}  // namespace deputy::channel
