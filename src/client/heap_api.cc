// The C API of include/deputy/heap.h: thin wrappers over client::SharedHeap.
#include <deputy/heap.h>

#include "client/shared_heap.h"

using deputy::client::SharedHeap;

extern "C" void *dp_heap_alloc(size_t bytes, size_t alignment, int zeroed) {
    SharedHeap *heap = SharedHeap::instance();
    return heap ? heap->allocate(bytes, alignment, zeroed != 0) : nullptr;
}

extern "C" int dp_heap_free(void *ptr) {
    SharedHeap *heap = SharedHeap::existing();
    return heap && heap->release(ptr) ? 1 : 0;
}

extern "C" int dp_heap_contains(const void *ptr, size_t bytes) {
    const SharedHeap *heap = SharedHeap::existing();
    return heap && heap->contains(ptr, bytes) ? 1 : 0;
}

extern "C" size_t dp_heap_usable_size(const void *ptr) {
    const SharedHeap *heap = SharedHeap::existing();
    return heap ? heap->usable_size(ptr) : 0;
}
