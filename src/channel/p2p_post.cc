#include "channel/p2p_post.h"

namespace deputy::channel {

const char *p2p_opcode_name(uint8_t opcode) {
    switch (opcode) {
        case kP2pSend: return "send";
        case kP2pRecv: return "recv";
        case kP2pProbe: return "probe";
        default: return "unknown";
    }
}

uint8_t p2p_post_invalid(const P2pPost &p, uint32_t team_size) {
    if (!is_p2p_post(p.opcode)) return DP_COMP_INVALID_OPCODE;
    if (p.reserved0[0] || p.reserved0[1] || p.reserved1) return DP_COMP_INVALID_FIELD;
    if ((p.opcode == kP2pProbe && p.card) || (p.opcode == kP2pRecv && p.card > DP_P2P_MAX_OUTSTANDING))
        return DP_COMP_INVALID_FIELD;
    const bool send = p.opcode == kP2pSend;
    if (p.flags & ~(send ? kP2pSynchronous : 0)) return DP_COMP_INVALID_FIELD;
    // A send names one member and one tag; a receive or probe may take any.
    if (p.peer < (send ? 0 : DP_ANY_SOURCE) || (p.peer >= 0 && uint32_t(p.peer) >= team_size))
        return DP_COMP_INVALID_FIELD;
    if (p.tag < (send ? 0 : DP_ANY_TAG)) return DP_COMP_INVALID_FIELD;
    if (p.opcode == kP2pProbe && (p.buf || p.bytes)) return DP_COMP_INVALID_FIELD;
    if (p.bytes > kMaxCollBytes) return DP_COMP_INVALID_SIZE;
    return 0;
}

}  // namespace deputy::channel
