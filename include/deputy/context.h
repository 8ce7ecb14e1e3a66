/* deputy — attaching to the agent: contexts, mapped memory, registration.
 *
 * dp_init connects to the node's agent (`deputy agent`) over its Unix socket
 * and receives this process's segment: a ring for mover descriptors and a
 * mapped memory pool. The agent hosts the mover device; this process posts
 * descriptors and keeps computing.
 *
 * Memory the agent can reach, by mode:
 *  - mapped: memory from dp_malloc lives in the shared segment, memory from
 *    dp_heap_alloc (deputy/heap.h) in the shared heap dp_init shares with
 *    the agent; the agent's engines read and write both in place (zero copies).
 *  - direct: ordinary memory registered with dp_mem_register; the agent
 *    copies with process_vm_readv/writev (one copy).
 *  - staged (dp_config_t.memory_mode = DP_MEMORY_STAGED): every descriptor
 *    travels with its source bytes over the socket and its results come
 *    back (the baseline, and the default for an agent on another host).
 *  - rdma (DP_MEMORY_RDMA, an agent on another host only): a team's
 *    collectives and messages expose the caller's own buffers through
 *    libfabric (dp_config_t.fabric_provider), one key per buffer and
 *    operation, revoked when it ends; the agent's side reads the sources
 *    and writes the results there itself, so the host copies nothing. The
 *    mover's operations stay staged.
 * Any other address in a descriptor fails with DP_COMP_ADDRESS_DENIED and
 * nothing is read or written. Completion records must be in mapped memory
 * (or, without waking block-mode waiters, in a registered range).
 *
 * If the agent dies or stops, every later and pending call returns
 * DP_ERR_AGENT_LOST within lost_timeout_ms (default 1000). */
#ifndef DEPUTY_CONTEXT_H
#define DEPUTY_CONTEXT_H

#include <deputy/export.h>
#include <deputy/mover.h>
#include <deputy/status.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_context dp_context_t;

typedef enum dp_memory_mode {
    DP_MEMORY_DIRECT = 0, /* mapped for dp_malloc memory, direct for registered ranges */
    DP_MEMORY_STAGED = 1, /* bytes through the channel */
    DP_MEMORY_RDMA = 2    /* a remote agent reads and writes the caller's buffers by RMA */
} dp_memory_mode_t;

typedef struct dp_config {
    size_t size;                 /* sizeof(dp_config_t), for ABI growth */
    const char *agent;           /* socket path; NULL: $DEPUTY_AGENT, else the default */
    const char *token;           /* per-job token; NULL: $DEPUTY_TOKEN, else none */
    uint64_t pool_bytes;         /* mapped pool; 0: the agent's default */
    uint32_t ring_size;          /* descriptors in this process's ring; 0: agent default */
    uint32_t memory_mode;        /* dp_memory_mode_t; $DEPUTY_MEMORY=staged or rdma also
                                    selects */
    uint32_t wq_mode;            /* DP_WQ_DEDICATED: one submitting thread; SHARED: any */
    uint32_t wait_mode;          /* dp_wait_mode_t for dp_mover_wait and dp_wait; DEFAULT: poll
                                    2 us (operations of at most 4 MiB: then yield the CPU
                                    until 50 us), then sleep (waiting ranks leave the cores to
                                    the agent) */
    uint32_t lost_timeout_ms;    /* bound on noticing a dead agent; 0: 1000 */
    uint32_t connect_timeout_ms; /* how long dp_init waits for an agent; 0: 1000 */
    const char *job_secret;      /* the job's secret: dp_team_create needs it, and only
                                    processes holding the same secret form a team. NULL:
                                    from the socket $DEPUTY_JOB_SECRET_FD names (deputy
                                    launch passes one), else $DEPUTY_JOB_SECRET. dp_init
                                    takes either out of the environment, whatever this
                                    field says */
    const char *key_file;        /* an agent on another host (agent "tcp://HOST:PORT"): the
                                    file holding the secure session's key (the agent's
                                    --key). NULL: $DEPUTY_KEY */
    const char *fabric_provider; /* memory mode rdma: the libfabric provider ("tcp", "verbs",
                                    "efa"), the agent's side uses the same. NULL:
                                    $DEPUTY_FABRIC_PROVIDER, else "tcp" */
    uint32_t cpu_shared;         /* nonzero: processes this one waits for (teammates) share
                                    its CPUs, more of them than CPUs (ranks on one core).
                                    DP_WAIT_DEFAULT then yields at once instead of polling
                                    2 us first: the result it waits for may need its CPU */
} dp_config_t;

#define DP_CONFIG_INITIALIZER                                                                    \
    {                                                                                            \
        sizeof(dp_config_t), NULL, NULL, 0, 0, DP_MEMORY_DIRECT, DP_WQ_DEDICATED, DP_WAIT_DEFAULT, \
            0, 0, NULL, NULL, NULL, 0                                                            \
    }

/* Connects and attaches. NULL config = defaults and environment.
 * DP_ERR_NO_AGENT: nobody answers at the address; DP_ERR_DENIED: the agent
 * refused (another user, wrong or missing token; the reason is logged). */
DP_API dp_status_t dp_init(const dp_config_t *config, dp_context_t **ctx);

/* Detaches; the agent frees this process's ring, pool and registrations.
 * Memory from dp_malloc is gone afterwards. Safe after DP_ERR_AGENT_LOST. */
DP_API dp_status_t dp_finalize(dp_context_t *ctx);

/* Mapped memory, 64-byte aligned, from the pool; NULL when it is exhausted. */
DP_API void *dp_malloc(dp_context_t *ctx, size_t bytes);
DP_API void dp_free(dp_context_t *ctx, void *ptr);

/* Lets the agent read and write [addr, addr+bytes) (memory mode direct).
 * DP_ERR_UNSUPPORTED when the kernel refuses cross-memory attach (use
 * staged mode), DP_ERR_TOO_LARGE beyond the agent's max_registrations.
 * An agent busy proving many ranges at once (a job's ranks starting
 * together) is asked again for up to max(lost_timeout_ms, 5 s) before
 * DP_ERR_RETRY is returned; dp_init does the same for a crowd attaching.
 * A range inside the shared heap (deputy/heap.h), which dp_init shares with
 * the agent, needs nothing: both calls return DP_OK and change nothing; so
 * with a remote agent (DEPUTY_AGENT=tcp://...), which takes every
 * operation's bytes per post (staged, or by RMA in memory mode rdma). */
DP_API dp_status_t dp_mem_register(dp_context_t *ctx, const void *addr, size_t bytes);
DP_API dp_status_t dp_mem_deregister(dp_context_t *ctx, const void *addr);

/* Non-zero when the agent reaches [addr, addr+bytes) in place, with no
 * registration and no copy: the range is in this context's pool (dp_malloc)
 * or in the shared heap the agent maps. */
DP_API int dp_mem_mapped(dp_context_t *ctx, const void *addr, size_t bytes);

/* The memory mode this context works in (DP_MEMORY_DIRECT, _STAGED or
 * _RDMA), as dp_init settled it from the config and DEPUTY_MEMORY: a
 * context attached to an agent on another host is staged unless rdma was
 * asked for; rdma with a local agent is DP_ERR_INVALID. In staged and rdma
 * mode any buffer may be passed as it is; nothing needs dp_mem_register. */
DP_API dp_memory_mode_t dp_memory_mode(dp_context_t *ctx);

/* The mover device the agent hosts, as a dp_mover_t: dp_mover_submit,
 * dp_mover_wait, dp_mover_get_stats and dp_mover_close work as for a local
 * device (wq must be 0: each process has one ring). Close it before
 * dp_finalize. */
DP_API dp_status_t dp_mover_attach(dp_context_t *ctx, dp_mover_t **mover);

/* The CPUs the agent's threads may run on, as the kernel says (their
 * affinity), not the agent: bit c of mask[c / 8] for CPU c, `bytes` bytes
 * (cpu_set_t is laid out so). A caller whose own CPUs meet none of these
 * has its agent on cores of its own. Returns how many CPUs are set, or a
 * negative dp_status_t (DP_ERR_AGENT_LOST: the agent is gone). */
DP_API int dp_agent_cpus(dp_context_t *ctx, unsigned char *mask, size_t bytes);

/* DP_OK while the agent serves this context, DP_ERR_AGENT_LOST otherwise. */
DP_API dp_status_t dp_agent_check(dp_context_t *ctx);

#ifdef __cplusplus
}
#endif

#endif /* DEPUTY_CONTEXT_H */
