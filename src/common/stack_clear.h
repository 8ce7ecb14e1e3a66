// Clearing what a secret left on the calling thread's stack. Copies the
// code never named (a hash's message words in its own frame, a buffer a
// callee used) stay in stack memory below the caller's frame until
// something else overwrites it: this overwrites `bytes` of it now.
// Call it from a frame no deeper than the ones that held the secret.
#pragma once

#include <cstddef>

namespace deputy {

void clear_stack_below(size_t bytes = 64 << 10);

}  // namespace deputy
