// Ordinary memory (malloc, stack, static) made reachable by the agent.
//
// The agent reads and writes a rank's ordinary buffers with cross-memory
// attach on ranges the rank registered. Registering costs a round trip to
// the agent, so ranges are registered once per mapping (the whole mapping
// of /proc/self/maps that holds the buffer: the heap, one large malloc's
// mmap, the stack) and remembered. A registration is only a permission on
// the rank's own address space, so a stale one (the mapping since unmapped)
// reaches nothing of anyone else's; the agent's limit on registrations per
// client is met by forgetting the ranges no outstanding request uses.
// Memory from MPI_Alloc_mem (the mapped pool) needs nothing.
#pragma once

#include <deputy/context.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace deputy::mpi {

// Ranges an outstanding request relies on: released when it completes.
using RangePins = std::vector<uint64_t>;

// Makes [addr, addr+bytes) reachable; appends the pinned range to *pins.
// DP_ERR_DENIED with *error when the buffer is not mapped memory of this
// process.
dp_status_t reach_memory(dp_context_t *ctx, const void *addr, size_t bytes, RangePins *pins,
                         std::string *error);
void release_memory(const RangePins &pins);

// MPI_Alloc_mem's pool allocations, which need no registration.
void note_pool_allocation(const void *addr, size_t bytes);
bool forget_pool_allocation(const void *addr);  // false: not one of ours

}  // namespace deputy::mpi
