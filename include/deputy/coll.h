/* deputy — teams and offloaded collectives.
 *
 * A team is a set of processes attached to the same agent (any processes:
 * MPI ranks, threads' contexts, launched programs). Each member calls
 * dp_team_create with the same key and size and its own rank; creation
 * completes when all `size` members joined.
 *
 * A collective is posted as one 64-byte descriptor into the caller's ring;
 * the call returns at once. The agent waits until every member posted the
 * same operation (in the team's posting order), checks that they agree, and
 * moves and reduces the bytes itself — reading sources and writing results
 * directly in the members' memory (mapped: dp_malloc; direct: registered
 * with dp_mem_register), reductions on the mover's engines — then sets each
 * member's completion flag. dp_test is one load of that flag; the host never
 * calls anything for data to move.
 *
 * Staged memory mode (DP_MEMORY_STAGED): buffers may be any memory; the
 * library copies sources into bounce buffers in the pool at post and copies
 * the result out in the dp_test/dp_wait that first sees success (the
 * baseline: two host copies). A bounce buffer that does not fit the pool
 * fails the post with DP_ERR_NOMEM.
 *
 * Memory mode rdma (DP_MEMORY_RDMA, an agent on another host): buffers may
 * be any memory and are not copied; the agent's side reads the sources and
 * writes the result in them by RMA. They must stay valid, and the result
 * unread, until dp_test/dp_wait sees the operation done. A team whose
 * agent cannot reach this process by the provider fails dp_team_create
 * (DP_ERR_UNSUPPORTED, DP_ERR_DENIED).
 *
 * Errors of an operation (reported by dp_test/dp_wait):
 *   DP_ERR_MISMATCH    members disagree on op, count, dtype, reduction or root (alltoallv: a
 *                      member's scounts[m] and member m's rcounts[r] differ)
 *   DP_ERR_AGENT_LOST  a member left or died (the team is then broken), or the agent died
 *   DP_ERR_DENIED      a buffer is outside what its member owns or registered
 *   DP_ERR_TOO_LARGE   bytes above the agent's limit per operation */
#ifndef DEPUTY_COLL_H
#define DEPUTY_COLL_H

#include <deputy/context.h>
#include <deputy/export.h>
#include <deputy/mover.h>
#include <deputy/status.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_team dp_team_t;
typedef struct dp_request dp_request_t;

/* Joins team `key` as `rank` of `size` (1..DP_TEAM_MAX_SIZE, members on
 * every node together; an agent serves as many as its max_clients, and
 * waiting members run a one-node team's operations themselves only up to
 * 256 members: above, the agent runs them all). Blocks until
 * all members joined or timeout_ms passes (0: 30000): DP_ERR_TIMEOUT naming
 * the missing ranks; DP_ERR_MISMATCH if members disagree on size;
 * DP_ERR_INVALID for a rank outside 0..size-1 or taken twice, or when this
 * context joined the team already (a context is one rank of a team).
 * Threads may create teams on one context at the same time, each waiting
 * for its own; DP_ERR_TOO_LARGE when the context has the agent's
 * max_pending_joins (32) joins waiting already. */
#define DP_TEAM_MAX_SIZE 16384
#define DP_TEAM_MAX_OUTSTANDING 64 /* posted, not yet completed, operations per member */
DP_API dp_status_t dp_team_create(dp_context_t *ctx, const char *key, int rank, int size,
                                  dp_team_t **team);
DP_API dp_status_t dp_team_create_timeout(dp_context_t *ctx, const char *key, int rank, int size,
                                          unsigned timeout_ms, dp_team_t **team);
/* Leaves the team. Outstanding requests must be completed and freed first. */
DP_API dp_status_t dp_team_destroy(dp_team_t *team);
DP_API int dp_team_rank(const dp_team_t *team);
DP_API int dp_team_size(const dp_team_t *team);

/* Non-blocking collectives. `count` is in elements of `dtype`. src may
 * equal dst (in place) for allreduce, allgather (src = dst + rank*count
 * elements) and alltoall. Buffers must stay untouched until completion. */
DP_API dp_status_t dp_iallreduce(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                 dp_op_t op, dp_team_t *team, dp_request_t **req);
/* src holds size*count elements; member r receives block r reduced. */
DP_API dp_status_t dp_ireduce_scatter(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                      dp_op_t op, dp_team_t *team, dp_request_t **req);
/* dst holds size*count elements: block m is member m's src. */
DP_API dp_status_t dp_iallgather(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                 dp_team_t *team, dp_request_t **req);
/* src and dst hold size*count elements: dst block m of member r = src block r of member m. */
DP_API dp_status_t dp_ialltoall(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                dp_team_t *team, dp_request_t **req);
DP_API dp_status_t dp_ibcast(void *buf, size_t count, dp_dtype_t dtype, int root, dp_team_t *team,
                             dp_request_t **req);
DP_API dp_status_t dp_ibarrier(dp_team_t *team, dp_request_t **req);
/* Vector all-to-all: member r sends scounts[m] elements starting at element sdispls[m] of src
 * to member m, which receives them starting at element rdispls[r] of its dst (its rcounts[r]
 * must equal; otherwise DP_ERR_MISMATCH on every member). The four arrays have dp_team_size()
 * entries, counts and displacements in elements of dtype; they are read during the call (the
 * caller may reuse them at once). src == dst is DP_ERR_INVALID (no in-place form), and so are
 * receive blocks that overlap. Bytes of dst outside the receive blocks are left untouched. */
DP_API dp_status_t dp_ialltoallv(const void *src, const size_t *scounts, const size_t *sdispls,
                                 void *dst, const size_t *rcounts, const size_t *rdispls,
                                 dp_dtype_t dtype, dp_team_t *team, dp_request_t **req);
/* Vector gathers and scatters (MPI_Iallgatherv, MPI_Igatherv, MPI_Iscatterv). Counts and
 * displacements in elements of dtype, dp_team_size() entries, read during the call; receive
 * blocks that overlap are DP_ERR_INVALID; bytes of dst outside the receive blocks are left
 * untouched. `count` is this member's own block, which must equal its entry in the counts
 * (DP_ERR_MISMATCH); members whose blocks disagree fail with DP_ERR_MISMATCH on every member.
 * Every member's dst receives member m's src (rcounts[m] elements) at element rdispls[m]. In
 * place: src == dst + rdispls[rank] elements (the block is already there). */
DP_API dp_status_t dp_iallgatherv(const void *src, size_t count, void *dst,
                                  const size_t *rcounts, const size_t *rdispls, dp_dtype_t dtype,
                                  dp_team_t *team, dp_request_t **req);
/* As allgatherv into the root's dst only: dst, rcounts and rdispls are the root's (NULL
 * elsewhere). In place at the root: src == dst + rdispls[root] elements. */
DP_API dp_status_t dp_igatherv(const void *src, size_t count, void *dst, const size_t *rcounts,
                               const size_t *rdispls, dp_dtype_t dtype, int root,
                               dp_team_t *team, dp_request_t **req);
/* Member m's dst receives the root's scounts[m] elements from element sdispls[m] of its src:
 * src, scounts and sdispls are the root's (NULL elsewhere). In place at the root:
 * dst == src + sdispls[root] elements. */
DP_API dp_status_t dp_iscatterv(const void *src, const size_t *scounts, const size_t *sdispls,
                                void *dst, size_t count, dp_dtype_t dtype, int root,
                                dp_team_t *team, dp_request_t **req);
/* Reduce-scatter with per-member counts (MPI_Ireduce_scatter): counts[m] elements, the same
 * array on every member (else DP_ERR_MISMATCH on every member); src holds every block back to
 * back (sum of counts), member r's dst receives block r reduced in rank order. No in-place
 * form. */
DP_API dp_status_t dp_ireduce_scatterv(const void *src, void *dst, const size_t *counts,
                                       dp_dtype_t dtype, dp_op_t op, dp_team_t *team,
                                       dp_request_t **req);

/* Rooted and prefix collectives (MPI_Ireduce, MPI_Igather, MPI_Iscatter, MPI_Iscan,
 * MPI_Iexscan). A buffer a member does not use may be NULL: dst on every member but the root
 * for reduce and gather, src on every member but the root for scatter, dst on rank 0 for
 * exscan. */
/* The root's dst receives every member's src reduced, in rank order. In place at the root:
 * src == dst. */
DP_API dp_status_t dp_ireduce(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                              dp_op_t op, int root, dp_team_t *team, dp_request_t **req);
/* The root's dst holds size*count elements: block m is member m's src. In place at the root:
 * src = dst + root*count elements. */
DP_API dp_status_t dp_igather(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                              int root, dp_team_t *team, dp_request_t **req);
/* The root's src holds size*count elements: member m's dst receives block m. In place at the
 * root: dst = src + root*count elements. */
DP_API dp_status_t dp_iscatter(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                               int root, dp_team_t *team, dp_request_t **req);
/* Member r's dst receives the src of members 0..r reduced in rank order (inclusive prefix). */
DP_API dp_status_t dp_iscan(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                            dp_op_t op, dp_team_t *team, dp_request_t **req);
/* Member r's dst receives the src of members 0..r-1 reduced in rank order; rank 0's dst is
 * not written (MPI leaves it undefined). */
DP_API dp_status_t dp_iexscan(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                              dp_op_t op, dp_team_t *team, dp_request_t **req);

/* *done = 1 once complete; the return value is then the operation's status.
 * While not complete: DP_OK with *done = 0 (or DP_ERR_AGENT_LOST). */
DP_API dp_status_t dp_test(dp_request_t *req, int *done);
/* Waits (the context's wait mode) and returns the operation's status. */
DP_API dp_status_t dp_wait(dp_request_t *req);
/* One turn of a wait the caller runs itself (an MPI library's wait, which
 * must progress other requests between turns): as dp_test, and the caller
 * promises to call it (or dp_test, or dp_wait) again until *done, as a wait
 * does. As in dp_wait, the members of a team whose every member waits for
 * an operation the agent has not started may then run it themselves
 * (docs/collectives.md, "Members running an operation themselves"). A
 * caller that may stop calling before *done (it tests between compute
 * phases) uses dp_test. */
DP_API dp_status_t dp_test_in_wait(dp_request_t *req, int *done);
/* Ends such waits on the teams' operations before they are done (an
 * MPI_Waitany that returned another request): those that no member has
 * started go to the agent, and this member's part of any its teammates run
 * themselves is done before it returns, so that none of them waits for the
 * caller to come back. Every team the caller waited on in one call: a
 * teammate may be leaving the same teams at once, in another order. DP_OK,
 * or DP_ERR_AGENT_LOST. Not needed once the operations waited for are done. */
DP_API dp_status_t dp_teams_leave_wait(dp_team_t *const *teams, size_t count);
DP_API void dp_request_free(dp_request_t *req);

/* Blocking forms: post + wait + free. */
DP_API dp_status_t dp_allreduce(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                dp_op_t op, dp_team_t *team);
DP_API dp_status_t dp_reduce_scatter(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                     dp_op_t op, dp_team_t *team);
DP_API dp_status_t dp_allgather(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                dp_team_t *team);
DP_API dp_status_t dp_alltoall(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                               dp_team_t *team);
DP_API dp_status_t dp_bcast(void *buf, size_t count, dp_dtype_t dtype, int root, dp_team_t *team);
DP_API dp_status_t dp_barrier(dp_team_t *team);
DP_API dp_status_t dp_alltoallv(const void *src, const size_t *scounts, const size_t *sdispls,
                                void *dst, const size_t *rcounts, const size_t *rdispls,
                                dp_dtype_t dtype, dp_team_t *team);
DP_API dp_status_t dp_reduce(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                             dp_op_t op, int root, dp_team_t *team);
DP_API dp_status_t dp_gather(const void *src, void *dst, size_t count, dp_dtype_t dtype, int root,
                             dp_team_t *team);
DP_API dp_status_t dp_scatter(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                              int root, dp_team_t *team);
DP_API dp_status_t dp_scan(const void *src, void *dst, size_t count, dp_dtype_t dtype, dp_op_t op,
                           dp_team_t *team);
DP_API dp_status_t dp_exscan(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                             dp_op_t op, dp_team_t *team);
DP_API dp_status_t dp_allgatherv(const void *src, size_t count, void *dst,
                                 const size_t *rcounts, const size_t *rdispls, dp_dtype_t dtype,
                                 dp_team_t *team);
DP_API dp_status_t dp_gatherv(const void *src, size_t count, void *dst, const size_t *rcounts,
                              const size_t *rdispls, dp_dtype_t dtype, int root, dp_team_t *team);
DP_API dp_status_t dp_scatterv(const void *src, const size_t *scounts, const size_t *sdispls,
                               void *dst, size_t count, dp_dtype_t dtype, int root,
                               dp_team_t *team);
DP_API dp_status_t dp_reduce_scatterv(const void *src, void *dst, const size_t *counts,
                                      dp_dtype_t dtype, dp_op_t op, dp_team_t *team);

/* nccl-tests' bus bandwidth factor of the collective named `name` ("allreduce",
 * "reduce_scatter", "allgather", ...: as `deputy bench coll --op` names them) on `size`
 * ranks: busbw = algbw x factor, for benchmarks that report as nccl-tests do (the one
 * table deputy's own benchmarks use). 0 for an unknown name or size < 1. */
DP_API double dp_coll_bus_factor(const char *name, int size);

#ifdef __cplusplus
}
#endif

#endif /* DEPUTY_COLL_H */
