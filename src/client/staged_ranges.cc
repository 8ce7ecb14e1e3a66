#include "client/staged_ranges.h"

#include "mover/dif.h"

namespace deputy::client {

dp_status_t plan_staged(const dp_desc_t &d, StagedPlan *plan) {
    plan->send.clear();
    plan->writes.clear();
    auto send = [&](uint64_t addr, uint64_t len) {
        if (addr && len) plan->send.push_back({addr, len});
    };
    auto write = [&](uint64_t addr, uint64_t len) {
        if (addr && len) plan->writes.push_back({addr, len});
    };
    switch (d.opcode) {
        case DP_OP_NOOP:
        case DP_OP_DRAIN: break;
        case DP_OP_MEMMOVE: send(d.src, d.size), write(d.dst, d.size); break;
        case DP_OP_FILL: write(d.dst, d.size); break;
        case DP_OP_COMPARE: send(d.src, d.size), send(d.src2, d.size); break;
        case DP_OP_COMPARE_PATTERN: send(d.src, d.size); break;
        case DP_OP_CREATE_DELTA:
            send(d.src, d.size), send(d.src2, d.size), send(d.dst, d.aux), write(d.dst, d.aux);
            break;
        case DP_OP_APPLY_DELTA:
            send(d.src, d.aux), send(d.dst, d.size), write(d.dst, d.size);
            break;
        case DP_OP_DUALCAST:
            send(d.src, d.size), write(d.dst, d.size), write(d.src2, d.size);
            break;
        case DP_OP_CRC32C: send(d.src, d.size); break;
        case DP_OP_COPY_CRC32C: send(d.src, d.size), write(d.dst, d.size); break;
        case DP_OP_DIF_CHECK:
        case DP_OP_DIF_INSERT:
        case DP_OP_DIF_STRIP:
        case DP_OP_DIF_UPDATE: {
            // A shape the agent would refuse travels as it is: the agent
            // answers with the status that names the field.
            mover::DifShape shape;
            if (mover::dif_shape(d, &shape) != DP_COMP_SUCCESS) break;
            send(d.src, shape.src_bytes);
            if (d.opcode != DP_OP_DIF_CHECK) write(d.dst, shape.dst_bytes);
            break;
        }
        case DP_OP_REDUCE:
            send(d.src, d.size);
            if (d.flags & DP_FLAG_ACCUMULATE) send(d.dst, d.size);
            else send(d.src2, d.size);
            write(d.dst, d.size);
            break;
        case DP_OP_BATCH:
        case DP_OP_CACHE_FLUSH: return DP_ERR_UNSUPPORTED;
        default: break;  // the agent answers DP_COMP_INVALID_OPCODE
    }
    return DP_OK;
}

}  // namespace deputy::client
