// The C API of include/deputy/coll.h: teams and collectives over client::Team.
#include <deputy/coll.h>

#include "coll/collective.h"
#include "client/handles.h"
#include "client/team.h"
#include "common/check.h"
#include "common/log.h"

struct dp_team {
    deputy::client::Team *impl;
};

struct dp_request {
    deputy::client::Request impl;
};

namespace {

using deputy::client::Request;
using deputy::client::Team;
using deputy::coll::Collective;
using deputy::coll::collective_name;

// The post and test paths are [[gnu::hot]]: the compiler puts them in
// .text.hot, a few contiguous lines of code, instead of pages apart (see
// client/team.h for why pages matter here).
[[gnu::hot]] dp_status_t post(dp_team_t *team, Collective c, const void *src, void *dst,
                              size_t count, dp_dtype_t dtype, dp_op_t op, uint64_t root,
                              dp_request_t **req) {
    if (team == nullptr || req == nullptr) return DP_ERR_INVALID;
    *req = nullptr;
    if (count > 0 && c != Collective::barrier && (src == nullptr || dst == nullptr))
        DP_FAIL(DP_ERR_INVALID, "deputy {}: a NULL buffer with count {}", collective_name(c),
                count);
    // A range check, not dp_dtype_size(): that one is exported, so the call
    // would go through the PLT.
    if (c != Collective::barrier && unsigned(dtype) >= DP_DTYPE_COUNT)
        DP_FAIL(DP_ERR_INVALID, "deputy {}: dtype {} is not a dp_dtype_t", collective_name(c),
                int(dtype));
    if (deputy::coll::reduces(c) && (op < 0 || op >= DP_OP_COUNT))
        DP_FAIL(DP_ERR_INVALID, "deputy {}: reduction {} is not a dp_op_t", collective_name(c),
                int(op));
    Request *r = nullptr;
    DP_CHECK(team->impl->post(c, src, dst, count, dtype, op, root, &r));
    // A dp_request_t is the Request itself (first member): no allocation.
    *req = reinterpret_cast<dp_request_t *>(r);
    return DP_OK;
}

Request *unwrap(dp_request_t *req) { return reinterpret_cast<Request *>(req); }

dp_status_t post_and_wait(dp_team_t *team, Collective c, const void *src, void *dst,
                          size_t count, dp_dtype_t dtype, dp_op_t op, uint64_t root) {
    dp_request_t *req = nullptr;
    DP_CHECK(post(team, c, src, dst, count, dtype, op, root, &req));
    dp_status_t s = dp_wait(req);
    dp_request_free(req);
    return s;
}

}  // namespace

extern "C" dp_status_t dp_team_create_timeout(dp_context_t *ctx, const char *key, int rank,
                                              int size, unsigned timeout_ms, dp_team_t **team) {
    if (ctx == nullptr || key == nullptr || team == nullptr) return DP_ERR_INVALID;
    *team = nullptr;
    Team *t = nullptr;
    DP_CHECK(Team::join(ctx->impl.get(), key, rank, size, timeout_ms, &t));
    *team = new dp_team{t};
    return DP_OK;
}

extern "C" dp_status_t dp_team_create(dp_context_t *ctx, const char *key, int rank, int size,
                                      dp_team_t **team) {
    return dp_team_create_timeout(ctx, key, rank, size, 0, team);
}

extern "C" dp_status_t dp_team_destroy(dp_team_t *team) {
    if (team == nullptr) return DP_ERR_INVALID;
    if (int n = team->impl->outstanding(); n != 0)
        DP_FAIL(DP_ERR_INVALID, "dp_team_destroy: {} request(s) not yet freed", n);
    dp_status_t s = team->impl->leave();
    delete team->impl;
    delete team;
    // Leaving a team whose agent is gone is still a clean local teardown.
    return s == DP_ERR_AGENT_LOST ? DP_OK : s;
}

extern "C" int dp_team_rank(const dp_team_t *team) { return team ? team->impl->rank() : -1; }
extern "C" int dp_team_size(const dp_team_t *team) { return team ? team->impl->size() : -1; }

extern "C" [[gnu::hot]] dp_status_t dp_iallreduce(const void *src, void *dst, size_t count,
                                                  dp_dtype_t dtype, dp_op_t op, dp_team_t *team,
                                                  dp_request_t **req) {
    return post(team, Collective::allreduce, src, dst, count, dtype, op, 0, req);
}
extern "C" [[gnu::hot]] dp_status_t dp_ireduce_scatter(const void *src, void *dst,
                                                       size_t count, dp_dtype_t dtype, dp_op_t op,
                                                       dp_team_t *team, dp_request_t **req) {
    return post(team, Collective::reduce_scatter, src, dst, count, dtype, op, 0, req);
}
extern "C" [[gnu::hot]] dp_status_t dp_iallgather(const void *src, void *dst, size_t count,
                                                  dp_dtype_t dtype, dp_team_t *team,
                                                  dp_request_t **req) {
    return post(team, Collective::allgather, src, dst, count, dtype, DP_SUM, 0, req);
}
extern "C" [[gnu::hot]] dp_status_t dp_ialltoall(const void *src, void *dst, size_t count,
                                                  dp_dtype_t dtype, dp_team_t *team,
                                                  dp_request_t **req) {
    return post(team, Collective::alltoall, src, dst, count, dtype, DP_SUM, 0, req);
}
extern "C" [[gnu::hot]] dp_status_t dp_ibcast(void *buf, size_t count, dp_dtype_t dtype,
                                              int root, dp_team_t *team, dp_request_t **req) {
    if (team && (root < 0 || root >= team->impl->size()))
        DP_FAIL(DP_ERR_INVALID, "dp_ibcast: root {} is not a rank of this team (0..{})", root,
                team->impl->size() - 1);
    return post(team, Collective::bcast, buf, buf, count, dtype, DP_SUM, uint64_t(root), req);
}
extern "C" [[gnu::hot]] dp_status_t dp_ibarrier(dp_team_t *team, dp_request_t **req) {
    return post(team, Collective::barrier, nullptr, nullptr, 0, DP_UINT8, DP_SUM, 0, req);
}

extern "C" [[gnu::hot]] dp_status_t dp_test(dp_request_t *req, int *done) {
    if (req == nullptr || done == nullptr) return DP_ERR_INVALID;
    Request *r = unwrap(req);
    const uint8_t status = __atomic_load_n(&r->record->status, __ATOMIC_ACQUIRE);
    if (status != DP_COMP_PENDING) {
        *done = 1;
        return deputy::client::request_result(r);
    }
    *done = 0;
    return r->team->context()->check_alive();
}

extern "C" dp_status_t dp_wait(dp_request_t *req) {
    if (req == nullptr) return DP_ERR_INVALID;
    Request *r = unwrap(req);
    DP_CHECK(r->team->context()->wait_record(r->record, DP_WAIT_DEFAULT, -1));
    return deputy::client::request_result(r);
}

extern "C" [[gnu::hot]] void dp_request_free(dp_request_t *req) {
    if (req == nullptr) return;
    Request *r = unwrap(req);
    r->team->release(r);
}

extern "C" dp_status_t dp_allreduce(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                    dp_op_t op, dp_team_t *team) {
    return post_and_wait(team, Collective::allreduce, src, dst, count, dtype, op, 0);
}
extern "C" dp_status_t dp_reduce_scatter(const void *src, void *dst, size_t count,
                                         dp_dtype_t dtype, dp_op_t op, dp_team_t *team) {
    return post_and_wait(team, Collective::reduce_scatter, src, dst, count, dtype, op, 0);
}
extern "C" dp_status_t dp_allgather(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                    dp_team_t *team) {
    return post_and_wait(team, Collective::allgather, src, dst, count, dtype, DP_SUM, 0);
}
extern "C" dp_status_t dp_alltoall(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                   dp_team_t *team) {
    return post_and_wait(team, Collective::alltoall, src, dst, count, dtype, DP_SUM, 0);
}
extern "C" dp_status_t dp_bcast(void *buf, size_t count, dp_dtype_t dtype, int root,
                                dp_team_t *team) {
    if (team && (root < 0 || root >= team->impl->size()))
        DP_FAIL(DP_ERR_INVALID, "dp_bcast: root {} is not a rank of this team (0..{})", root,
                team->impl->size() - 1);
    return post_and_wait(team, Collective::bcast, buf, buf, count, dtype, DP_SUM, uint64_t(root));
}
extern "C" dp_status_t dp_barrier(dp_team_t *team) {
    return post_and_wait(team, Collective::barrier, nullptr, nullptr, 0, DP_UINT8, DP_SUM, 0);
}
