#include "common/stack_clear.h"

#include <alloca.h>
#include <sodium.h>

namespace deputy {

[[gnu::noinline]] void clear_stack_below(size_t bytes) {
    void *area = alloca(bytes);
    sodium_memzero(area, bytes);
    asm volatile("" : : "r"(area) : "memory");  // the area counts as used
}

}  // namespace deputy
