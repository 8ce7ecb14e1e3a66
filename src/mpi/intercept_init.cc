// MPI_Init / MPI_Finalize and memory: where libdeputy-mpi attaches to the
// agent and detaches, and where MPI_Alloc_mem hands out mapped memory.
#include "mpi/registered_memory.h"
#include "mpi/runtime.h"

#include <mpi.h>

#include "mpi/export.h"

using deputy::mpi::runtime;

extern "C" {

DEPUTY_MPI_EXPORT int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) return rc;
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    deputy::mpi::runtime_start(provided);
    return rc;
}

DEPUTY_MPI_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc != MPI_SUCCESS) return rc;
    deputy::mpi::runtime_start(*provided);
    return rc;
}

DEPUTY_MPI_EXPORT int MPI_Finalize(void) {
    deputy::mpi::runtime_stop();
    return PMPI_Finalize();
}

// Memory from deputy's pool: the agent reads and writes it in place (zero
// copies). A request larger than the pool, or without an agent, is MPI's.
DEPUTY_MPI_EXPORT int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr) {
    dp_context_t *ctx = runtime().context;
    if (ctx && size > 0) {
        if (void *p = dp_malloc(ctx, size_t(size))) {
            deputy::mpi::note_pool_allocation(p, size_t(size));
            *static_cast<void **>(baseptr) = p;
            return MPI_SUCCESS;
        }
    }
    return PMPI_Alloc_mem(size, info, baseptr);
}

DEPUTY_MPI_EXPORT int MPI_Free_mem(void *base) {
    if (deputy::mpi::forget_pool_allocation(base)) {
        // After MPI_Finalize the pool is gone with the context.
        if (dp_context_t *ctx = runtime().context) dp_free(ctx, base);
        return MPI_SUCCESS;
    }
    return PMPI_Free_mem(base);
}

}  // extern "C"
