#include "channel/coll_post.h"

#include "mover/names.h"

namespace deputy::channel {

const char *coll_status_name(uint8_t status) {
    switch (status) {
        case kCollMismatch: return "mismatch";
        case kCollMemberLost: return "member_lost";
        case kCollQueueFull: return "queue_full";
        default: return mover::comp_status_name(status);
    }
}

}  // namespace deputy::channel
