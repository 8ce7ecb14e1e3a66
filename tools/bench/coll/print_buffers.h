// --print-buffers: every rank's send and receive buffers, gathered to rank 0
// and printed in rank order, in the layout of DOCA's DPA all-to-all sample:
//            ----send buffs---
//  Rank 0 | 9923 9245 755 8690 ...
//            ----recv buffs---
//  Rank 0 | 9923 9245 8443 835 ...
// For bcast the "send" buffer is the buffer before the call (the root's
// data; the others' sentinel, printed as -1 or nan).
#pragma once

#include <string>

#include "bench/coll/pattern.h"
#include "bench/coll/world.h"

namespace deputy::bench::coll {

void print_buffers(const World &world, const Pattern &p, const void *send, const void *recv,
                   const std::string &title);

}  // namespace deputy::bench::coll
