// The C API of include/deputy/coll.h: teams and collectives over client::Team.
#include <deputy/coll.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "coll/collective.h"
#include "client/handles.h"
#include "client/p2p.h"
#include "client/team.h"
#include "common/check.h"
#include "common/log.h"
#include "mover/names.h"

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
    // A range check, not dp_dtype_size(): that one is exported, so the call
    // would go through the PLT.
    if (c != Collective::barrier && unsigned(dtype) >= DP_DTYPE_COUNT)
        DP_FAIL(DP_ERR_INVALID, "deputy {}: dtype {} is not a dp_dtype_t", collective_name(c),
                int(dtype));
    const Team &t = *team->impl;
    if (deputy::coll::rooted(c) && root >= uint64_t(t.size()))
        DP_FAIL(DP_ERR_INVALID, "deputy {}: root {} is not a rank of this team (0..{})",
                collective_name(c), int64_t(root), t.size() - 1);
    // The buffers this member uses (the table's rule: a rooted collective's
    // other members may pass NULL for the side they do not use).
    if (count > 0 && c != Collective::barrier) {
        const deputy::coll::MemberBytes need = deputy::coll::member_bytes(
            c, count, deputy::mover::dtype_size(dtype), uint32_t(t.size()), uint32_t(t.rank()),
            uint32_t(root));
        if ((need.source && src == nullptr) || (need.destination && dst == nullptr))
            DP_FAIL(DP_ERR_INVALID, "deputy {}: a NULL {} with count {} (rank {})",
                    collective_name(c), need.source && !src ? "source" : "destination", count,
                    t.rank());
        if (c != Collective::bcast && !deputy::coll::has_in_place(c) && need.source &&
            need.destination && deputy::coll::ranges_overlap(uint64_t(src), need.source,
                                                             uint64_t(dst), need.destination))
            DP_FAIL(DP_ERR_INVALID,
                    "deputy {}: source and destination overlap: it has no in-place form; give "
                    "two buffers",
                    collective_name(c));
    }
    if (deputy::coll::reduces(c) && !deputy::mover::op_applies(unsigned(dtype), unsigned(op))) {
        if (unsigned(op) >= DP_OP_COUNT)
            DP_FAIL(DP_ERR_INVALID, "deputy {}: reduction {} is not a dp_op_t",
                    collective_name(c), int(op));
        DP_FAIL(DP_ERR_INVALID, "deputy {}: {} does not apply to {} (logical and bitwise "
                "reductions take integer types)",
                collective_name(c), dp_op_name(op), dp_dtype_name(dtype));
    }
    Request *r = nullptr;
    DP_CHECK(team->impl->post(c, src, dst, count, dtype, op, root, &r));
    // A dp_request_t is the Request itself (first member): no allocation.
    *req = reinterpret_cast<dp_request_t *>(r);
    return DP_OK;
}

Request *unwrap(dp_request_t *req) { return reinterpret_cast<Request *>(req); }

// A root as post() checks it: a negative one is out of range too.
uint64_t root_of(int root) { return root < 0 ? UINT64_MAX : uint64_t(root); }

dp_status_t post_and_wait(dp_team_t *team, Collective c, const void *src, void *dst,
                          size_t count, dp_dtype_t dtype, dp_op_t op, uint64_t root) {
    dp_request_t *req = nullptr;
    DP_CHECK(post(team, c, src, dst, count, dtype, op, root, &req));
    dp_status_t s = dp_wait(req);
    dp_request_free(req);
    return s;
}

// A vector collective's checks before its post (`fn` names the caller's
// function in errors): what the library can tell from the arguments alone.
// Buffer ranges are the agent's to check (it knows the member's memory);
// counts that disagree between members are its too.
dp_status_t post_vector(const char *fn, Collective c, const void *src, const size_t *scounts,
                        const size_t *sdispls, void *dst, const size_t *rcounts,
                        const size_t *rdispls, dp_dtype_t dtype, dp_op_t op, uint64_t root,
                        dp_team_t *team, dp_request_t **req) {
    if (unsigned(dtype) >= DP_DTYPE_COUNT)
        DP_FAIL(DP_ERR_INVALID, "{}: dtype {} is not a dp_dtype_t", fn, int(dtype));
    if (c == Collective::alltoallv && src != nullptr && src == dst)
        DP_FAIL(DP_ERR_INVALID, "{}: src == dst: alltoallv has no in-place form; give two buffers",
                fn);
    const int p = team->impl->size();
    for (int m = 0; m < p; ++m) {
        if (scounts[m] && !src)
            DP_FAIL(DP_ERR_INVALID, "{}: src is NULL with {} elements for member {}", fn,
                    scounts[m], m);
        if (rcounts[m] && !dst)
            DP_FAIL(DP_ERR_INVALID, "{}: dst is NULL with {} elements from member {}", fn,
                    rcounts[m], m);
    }
    // MPI forbids writing a location twice: receive blocks that overlap are
    // a caller's mistake, named here rather than left to chance. (A block
    // whose end overflows is left to the agent, which refuses it.
    // reduce_scatterv's receive blocks are one, from every member.)
    std::vector<std::pair<size_t, int>> starts;
    for (int m = 0; m < p && c != Collective::reduce_scatterv; ++m)
        if (size_t end; rcounts[m] && !__builtin_add_overflow(rdispls[m], rcounts[m], &end))
            starts.push_back({rdispls[m], m});
    std::sort(starts.begin(), starts.end());
    for (size_t i = 1; i < starts.size(); ++i) {
        const int a = starts[i - 1].second, b = starts[i].second;
        if (starts[i].first < rdispls[a] + rcounts[a])
            DP_FAIL(DP_ERR_INVALID,
                    "{}: receive blocks {} and {} overlap (displacement {} + count {} > {})", fn,
                    a, b, rdispls[a], rcounts[a], rdispls[b]);
    }
    Request *r = nullptr;
    DP_CHECK(team->impl->post_vector(c, src, scounts, sdispls, dst, rcounts, rdispls, dtype, op,
                                     root, &r));
    *req = reinterpret_cast<dp_request_t *>(r);
    return DP_OK;
}

dp_status_t post_alltoallv(const void *src, const size_t *scounts, const size_t *sdispls,
                           void *dst, const size_t *rcounts, const size_t *rdispls,
                           dp_dtype_t dtype, dp_team_t *team, dp_request_t **req) {
    if (team == nullptr || req == nullptr) return DP_ERR_INVALID;
    *req = nullptr;
    if (!scounts || !sdispls || !rcounts || !rdispls)
        DP_FAIL(DP_ERR_INVALID,
                "dp_ialltoallv: {} is NULL (scounts, sdispls, rcounts and rdispls each need "
                "dp_team_size() entries)",
                !scounts ? "scounts" : !sdispls ? "sdispls" : !rcounts ? "rcounts" : "rdispls");
    return post_vector("dp_ialltoallv", Collective::alltoallv, src, scounts, sdispls, dst,
                       rcounts, rdispls, dtype, DP_SUM, 0, team, req);
}

// allgatherv, gatherv and scatterv as alltoallv's blocks (coll/collective.h):
// what this member sends to and receives from each peer, derived from MPI's
// arguments. In place, the member's own block moves nowhere (0 both ways).
struct VectorBlocks {
    explicit VectorBlocks(const dp_team_t *team)
        : scounts(size_t(team->impl->size())), sdispls(scounts.size()), rcounts(scounts.size()),
          rdispls(scounts.size()) {}
    std::vector<size_t> scounts, sdispls, rcounts, rdispls;
};

// Whether `p` is `base` + `elements` elements of `dtype` (the in-place forms).
bool at_element(const void *p, const void *base, size_t elements, dp_dtype_t dtype) {
    return p != nullptr && base != nullptr &&
           p == static_cast<const uint8_t *>(base) + elements * dp_dtype_size(dtype);
}

// The checks the three share; `gathers`: rcounts/rdispls are this member's
// (allgatherv everywhere, gatherv at the root), else scounts/sdispls (scatterv
// at the root). DP_OK, or the error (set).
dp_status_t vector_arrays(const char *fn, dp_team_t *team, dp_request_t **req, dp_dtype_t dtype,
                          const size_t *counts, const size_t *displs, const char *counts_name,
                          const char *displs_name, bool needed) {
    if (team == nullptr || req == nullptr) return DP_ERR_INVALID;
    *req = nullptr;
    if (unsigned(dtype) >= DP_DTYPE_COUNT)
        DP_FAIL(DP_ERR_INVALID, "{}: dtype {} is not a dp_dtype_t", fn, int(dtype));
    if (needed && (!counts || !displs))
        DP_FAIL(DP_ERR_INVALID, "{}: {} is NULL (it needs dp_team_size() entries)", fn,
                !counts ? counts_name : displs_name);
    return DP_OK;
}

dp_status_t check_root(const char *fn, dp_team_t *team, int root) {
    if (root < 0 || root >= team->impl->size())
        DP_FAIL(DP_ERR_INVALID, "{}: root {} is not a rank of this team (0..{})", fn, root,
                team->impl->size() - 1);
    return DP_OK;
}

// This member's own block must be as long where it lands as where it
// leaves (MPI: the signatures match).
dp_status_t check_own(const char *fn, const char *name, int rank, size_t given, size_t count) {
    if (given != count)
        DP_FAIL(DP_ERR_MISMATCH, "{}: count {} but {}[{}] (this member's own block) is {}", fn,
                count, name, rank, given);
    return DP_OK;
}

dp_status_t post_reduce_scatterv(const void *src, void *dst, const size_t *counts,
                                 dp_dtype_t dtype, dp_op_t op, dp_team_t *team,
                                 dp_request_t **req) {
    constexpr const char *fn = "dp_ireduce_scatterv";
    DP_CHECK(vector_arrays(fn, team, req, dtype, counts, counts, "counts", "counts", true));
    if (!deputy::mover::op_applies(unsigned(dtype), unsigned(op)))
        DP_FAIL(DP_ERR_INVALID, "{}: reduction {} does not apply to dtype {}", fn, dp_op_name(op),
                dp_dtype_name(dtype));
    const int me = team->impl->rank(), p = team->impl->size();
    if (src != nullptr && src == dst)
        DP_FAIL(DP_ERR_INVALID, "{}: src == dst: reduce_scatterv has no in-place form", fn);
    VectorBlocks b(team);
    size_t at = 0;
    for (int m = 0; m < p; ++m) {
        b.scounts[size_t(m)] = counts[m];  // block m of the source, back to back
        b.sdispls[size_t(m)] = at;
        at += counts[m];
        b.rcounts[size_t(m)] = counts[me];  // this member's block, from everyone
    }
    return post_vector(fn, Collective::reduce_scatterv, src, b.scounts.data(), b.sdispls.data(),
                       dst, b.rcounts.data(), b.rdispls.data(), dtype, op, 0, team, req);
}

dp_status_t post_allgatherv(const void *src, size_t count, void *dst, const size_t *rcounts,
                            const size_t *rdispls, dp_dtype_t dtype, dp_team_t *team,
                            dp_request_t **req) {
    constexpr const char *fn = "dp_iallgatherv";
    DP_CHECK(vector_arrays(fn, team, req, dtype, rcounts, rdispls, "rcounts", "rdispls", true));
    const int me = team->impl->rank(), p = team->impl->size();
    DP_CHECK(check_own(fn, "rcounts", me, rcounts[me], count));
    const bool in_place = at_element(src, dst, rdispls[me], dtype);
    VectorBlocks b(team);
    for (int m = 0; m < p; ++m) {
        b.scounts[size_t(m)] = count;  // the same block to everyone, from src
        b.rcounts[size_t(m)] = rcounts[m];
        b.rdispls[size_t(m)] = rdispls[m];
    }
    if (in_place) b.scounts[size_t(me)] = b.rcounts[size_t(me)] = 0;
    return post_vector(fn, Collective::allgatherv, src, b.scounts.data(), b.sdispls.data(), dst,
                       b.rcounts.data(), b.rdispls.data(), dtype, DP_SUM, 0, team, req);
}

dp_status_t post_gatherv(const void *src, size_t count, void *dst, const size_t *rcounts,
                         const size_t *rdispls, dp_dtype_t dtype, int root, dp_team_t *team,
                         dp_request_t **req) {
    constexpr const char *fn = "dp_igatherv";
    if (team == nullptr || req == nullptr) return DP_ERR_INVALID;
    DP_CHECK(check_root(fn, team, root));
    const int me = team->impl->rank(), p = team->impl->size();
    DP_CHECK(vector_arrays(fn, team, req, dtype, rcounts, rdispls, "rcounts", "rdispls",
                           me == root));
    VectorBlocks b(team);
    b.scounts[size_t(root)] = count;
    if (me == root) {
        DP_CHECK(check_own(fn, "rcounts", me, rcounts[me], count));
        for (int m = 0; m < p; ++m) {
            b.rcounts[size_t(m)] = rcounts[m];
            b.rdispls[size_t(m)] = rdispls[m];
        }
        if (at_element(src, dst, rdispls[me], dtype)) b.scounts[size_t(me)] = b.rcounts[size_t(me)] = 0;
    }
    return post_vector(fn, Collective::gatherv, src, b.scounts.data(), b.sdispls.data(), dst,
                       b.rcounts.data(), b.rdispls.data(), dtype, DP_SUM, uint64_t(root), team,
                       req);
}

dp_status_t post_scatterv(const void *src, const size_t *scounts, const size_t *sdispls,
                          void *dst, size_t count, dp_dtype_t dtype, int root, dp_team_t *team,
                          dp_request_t **req) {
    constexpr const char *fn = "dp_iscatterv";
    if (team == nullptr || req == nullptr) return DP_ERR_INVALID;
    DP_CHECK(check_root(fn, team, root));
    const int me = team->impl->rank(), p = team->impl->size();
    DP_CHECK(vector_arrays(fn, team, req, dtype, scounts, sdispls, "scounts", "sdispls",
                           me == root));
    VectorBlocks b(team);
    b.rcounts[size_t(root)] = count;
    if (me == root) {
        DP_CHECK(check_own(fn, "scounts", me, scounts[me], count));
        for (int m = 0; m < p; ++m) {
            b.scounts[size_t(m)] = scounts[m];
            b.sdispls[size_t(m)] = sdispls[m];
        }
        if (at_element(dst, src, sdispls[me], dtype)) b.scounts[size_t(me)] = b.rcounts[size_t(me)] = 0;
    }
    return post_vector(fn, Collective::scatterv, src, b.scounts.data(), b.sdispls.data(), dst,
                       b.rcounts.data(), b.rdispls.data(), dtype, DP_SUM, uint64_t(root), team,
                       req);
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
    return post(team, Collective::bcast, buf, buf, count, dtype, DP_SUM, root_of(root), req);
}
extern "C" [[gnu::hot]] dp_status_t dp_ibarrier(dp_team_t *team, dp_request_t **req) {
    return post(team, Collective::barrier, nullptr, nullptr, 0, DP_UINT8, DP_SUM, 0, req);
}
extern "C" dp_status_t dp_ireduce(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                  dp_op_t op, int root, dp_team_t *team, dp_request_t **req) {
    return post(team, Collective::reduce, src, dst, count, dtype, op, root_of(root), req);
}
extern "C" dp_status_t dp_igather(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                  int root, dp_team_t *team, dp_request_t **req) {
    return post(team, Collective::gather, src, dst, count, dtype, DP_SUM, root_of(root), req);
}
extern "C" dp_status_t dp_iscatter(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                   int root, dp_team_t *team, dp_request_t **req) {
    return post(team, Collective::scatter, src, dst, count, dtype, DP_SUM, root_of(root), req);
}
extern "C" dp_status_t dp_iscan(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                dp_op_t op, dp_team_t *team, dp_request_t **req) {
    return post(team, Collective::scan, src, dst, count, dtype, op, 0, req);
}
extern "C" dp_status_t dp_iexscan(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                  dp_op_t op, dp_team_t *team, dp_request_t **req) {
    return post(team, Collective::exscan, src, dst, count, dtype, op, 0, req);
}

extern "C" dp_status_t dp_ialltoallv(const void *src, const size_t *scounts,
                                     const size_t *sdispls, void *dst, const size_t *rcounts,
                                     const size_t *rdispls, dp_dtype_t dtype, dp_team_t *team,
                                     dp_request_t **req) {
    return post_alltoallv(src, scounts, sdispls, dst, rcounts, rdispls, dtype, team, req);
}
extern "C" dp_status_t dp_ireduce_scatterv(const void *src, void *dst, const size_t *counts,
                                           dp_dtype_t dtype, dp_op_t op, dp_team_t *team,
                                           dp_request_t **req) {
    return post_reduce_scatterv(src, dst, counts, dtype, op, team, req);
}
extern "C" dp_status_t dp_iallgatherv(const void *src, size_t count, void *dst,
                                      const size_t *rcounts, const size_t *rdispls,
                                      dp_dtype_t dtype, dp_team_t *team, dp_request_t **req) {
    return post_allgatherv(src, count, dst, rcounts, rdispls, dtype, team, req);
}
extern "C" dp_status_t dp_igatherv(const void *src, size_t count, void *dst,
                                   const size_t *rcounts, const size_t *rdispls, dp_dtype_t dtype,
                                   int root, dp_team_t *team, dp_request_t **req) {
    return post_gatherv(src, count, dst, rcounts, rdispls, dtype, root, team, req);
}
extern "C" dp_status_t dp_iscatterv(const void *src, const size_t *scounts,
                                    const size_t *sdispls, void *dst, size_t count,
                                    dp_dtype_t dtype, int root, dp_team_t *team,
                                    dp_request_t **req) {
    return post_scatterv(src, scounts, sdispls, dst, count, dtype, root, team, req);
}

namespace {

// dp_test and dp_test_in_wait: `in_wait` says the caller comes back until
// the operation is done.
[[gnu::hot]] dp_status_t test(dp_request_t *req, int *done, bool in_wait) {
    if (req == nullptr || done == nullptr) return DP_ERR_INVALID;
    Request *r = unwrap(req);
    const uint8_t status = __atomic_load_n(&r->record->status, __ATOMIC_ACQUIRE);
    if (status != DP_COMP_PENDING) {
        *done = 1;
        return deputy::client::request_result(r);
    }
    if (r->p2p && deputy::client::TeamP2p::carded(r)) [[unlikely]] {
        // Messages the members copy themselves move only while they call us.
        deputy::client::TeamP2p *p2p = nullptr;
        if (r->team->p2p(&p2p) == DP_OK) p2p->progress(r);
        if (__atomic_load_n(&r->record->status, __ATOMIC_ACQUIRE) != DP_COMP_PENDING) {
            *done = 1;
            return deputy::client::request_result(r);
        }
    } else if (deputy::client::RankExecution *ranks = r->p2p ? nullptr : r->team->ranks())
        [[unlikely]] {
        // The members' own operations move only while they call us.
        if (in_wait)
            ranks->progress_in_wait(r);
        else
            ranks->progress();
        if (__atomic_load_n(&r->record->status, __ATOMIC_ACQUIRE) != DP_COMP_PENDING) {
            *done = 1;
            return deputy::client::request_result(r);
        }
    }
    *done = 0;
    return r->team->context()->check_alive();
}

}  // namespace

extern "C" [[gnu::hot]] dp_status_t dp_test(dp_request_t *req, int *done) {
    return test(req, done, false);
}

extern "C" dp_status_t dp_test_in_wait(dp_request_t *req, int *done) {
    return test(req, done, true);
}

extern "C" dp_status_t dp_teams_leave_wait(dp_team_t *const *teams, size_t count) {
    if (teams == nullptr && count != 0) return DP_ERR_INVALID;
    std::vector<deputy::client::RankExecution *> owing;
    for (size_t i = 0; i < count; ++i) {
        if (teams[i] == nullptr) return DP_ERR_INVALID;
        if (deputy::client::RankExecution *ranks = teams[i]->impl->ranks()) owing.push_back(ranks);
    }
    // Turns over every team until none owes anything: the first turn
    // withdraws from all of them and does this member's reads for all,
    // before any waits for a teammate's. A teammate leaving the same teams
    // in another order then never waits for a read this member would do
    // only after its own wait on another team.
    dp_status_t result = DP_OK;
    while (!owing.empty()) {
        for (size_t i = 0; i < owing.size();) {
            bool done = false;
            const dp_status_t st = owing[i]->leave_wait(&done);
            if (st != DP_OK) result = st;
            if (done || st != DP_OK) {
                owing.erase(owing.begin() + long(i));
            } else {
                ++i;
            }
        }
        if (!owing.empty()) sched_yield();
    }
    return result;
}

extern "C" dp_status_t dp_wait(dp_request_t *req) {
    if (req == nullptr) return DP_ERR_INVALID;
    Request *r = unwrap(req);
    deputy::client::TeamP2p *p2p = nullptr;
    if (r->p2p && deputy::client::TeamP2p::carded(r) && r->team->p2p(&p2p) == DP_OK)
        DP_CHECK(p2p->wait(r));
    else if (deputy::client::RankExecution *ranks = r->p2p ? nullptr : r->team->ranks())
        DP_CHECK(ranks->wait(r));
    else
        DP_CHECK(r->team->context()->wait_record(r->record, DP_WAIT_DEFAULT, -1, r->yield_first));
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
    return post_and_wait(team, Collective::bcast, buf, buf, count, dtype, DP_SUM, root_of(root));
}
extern "C" dp_status_t dp_barrier(dp_team_t *team) {
    return post_and_wait(team, Collective::barrier, nullptr, nullptr, 0, DP_UINT8, DP_SUM, 0);
}
extern "C" dp_status_t dp_reduce(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                 dp_op_t op, int root, dp_team_t *team) {
    return post_and_wait(team, Collective::reduce, src, dst, count, dtype, op, root_of(root));
}
extern "C" dp_status_t dp_gather(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                 int root, dp_team_t *team) {
    return post_and_wait(team, Collective::gather, src, dst, count, dtype, DP_SUM, root_of(root));
}
extern "C" dp_status_t dp_scatter(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                  int root, dp_team_t *team) {
    return post_and_wait(team, Collective::scatter, src, dst, count, dtype, DP_SUM,
                         root_of(root));
}
extern "C" dp_status_t dp_scan(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                               dp_op_t op, dp_team_t *team) {
    return post_and_wait(team, Collective::scan, src, dst, count, dtype, op, 0);
}
extern "C" dp_status_t dp_exscan(const void *src, void *dst, size_t count, dp_dtype_t dtype,
                                 dp_op_t op, dp_team_t *team) {
    return post_and_wait(team, Collective::exscan, src, dst, count, dtype, op, 0);
}
extern "C" dp_status_t dp_alltoallv(const void *src, const size_t *scounts,
                                    const size_t *sdispls, void *dst, const size_t *rcounts,
                                    const size_t *rdispls, dp_dtype_t dtype, dp_team_t *team) {
    dp_request_t *req = nullptr;
    DP_CHECK(post_alltoallv(src, scounts, sdispls, dst, rcounts, rdispls, dtype, team, &req));
    dp_status_t s = dp_wait(req);
    dp_request_free(req);
    return s;
}
extern "C" dp_status_t dp_reduce_scatterv(const void *src, void *dst, const size_t *counts,
                                          dp_dtype_t dtype, dp_op_t op, dp_team_t *team) {
    dp_request_t *req = nullptr;
    DP_CHECK(post_reduce_scatterv(src, dst, counts, dtype, op, team, &req));
    dp_status_t s = dp_wait(req);
    dp_request_free(req);
    return s;
}
extern "C" dp_status_t dp_allgatherv(const void *src, size_t count, void *dst,
                                     const size_t *rcounts, const size_t *rdispls,
                                     dp_dtype_t dtype, dp_team_t *team) {
    dp_request_t *req = nullptr;
    DP_CHECK(post_allgatherv(src, count, dst, rcounts, rdispls, dtype, team, &req));
    dp_status_t s = dp_wait(req);
    dp_request_free(req);
    return s;
}
extern "C" dp_status_t dp_gatherv(const void *src, size_t count, void *dst, const size_t *rcounts,
                                  const size_t *rdispls, dp_dtype_t dtype, int root,
                                  dp_team_t *team) {
    dp_request_t *req = nullptr;
    DP_CHECK(post_gatherv(src, count, dst, rcounts, rdispls, dtype, root, team, &req));
    dp_status_t s = dp_wait(req);
    dp_request_free(req);
    return s;
}
extern "C" dp_status_t dp_scatterv(const void *src, const size_t *scounts, const size_t *sdispls,
                                   void *dst, size_t count, dp_dtype_t dtype, int root,
                                   dp_team_t *team) {
    dp_request_t *req = nullptr;
    DP_CHECK(post_scatterv(src, scounts, sdispls, dst, count, dtype, root, team, &req));
    dp_status_t s = dp_wait(req);
    dp_request_free(req);
    return s;
}

extern "C" double dp_coll_bus_factor(const char *name, int size) {
    if (!name || size < 1) return 0;
    const std::optional<Collective> c = deputy::coll::collective_from_name(name);
    return c ? deputy::coll::collective_info(*c).bus_factor.of(size) : 0;
}
