// The collectives libdeputy-mpi intercepts: each decides whether deputy
// runs it (the same decision on every member: it depends only on what MPI
// requires the members to agree on, and for a tuned blocking form on the
// sequence of collectives on the communicator: tuning.h) and either posts
// it to the communicator's team or calls the MPI library's PMPI_ entry
// unchanged.
//
// The order of the checks keeps the pass-through path short: the threshold
// (a type size and a compare) comes first.
#include "mpi/comm_teams.h"
#include "mpi/datatypes.h"
#include "mpi/offload_requests.h"
#include "mpi/runtime.h"
#include "mpi/tuning.h"

#include <deputy/coll.h>
#include <mpi.h>

#include "mpi/export.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace deputy::mpi {
namespace {

size_t type_size(MPI_Datatype type) {
    int size = 0;
    PMPI_Type_size(type, &size);
    return size > 0 ? size_t(size) : 0;
}

// The first checks, shared by every operation: false (counted) to pass.
bool worth_offloading(Operation op, size_t bytes) {
    const Runtime &rt = runtime();
    if (!rt.initialized || rt.disabled) {
        count_passed(op, rt.disabled ? PassReason::disabled : PassReason::no_agent);
        return false;
    }
    const size_t threshold = rt.thresholds[size_t(op)];
    if (threshold == kNever || (bytes < threshold && threshold != kTune) ||
        (bytes == 0 && op != Operation::ibarrier && op != Operation::barrier)) {
        count_passed(op, PassReason::below_threshold);
        return false;
    }
    return true;
}

// The communicator's team, or null (counted) to pass. A blocking operation
// forms a team not formed yet (collective: every member reaches it on the
// same operation); a nonblocking one never does (comm_teams.h).
CommTeam *team_of(Operation op, MPI_Comm comm) {
    CommTeam *ct = comm_team(comm, !operation_info(op).nonblocking);
    if (!ct->team) count_passed(op, ct->why_not);
    return ct->team ? ct : nullptr;
}

bool reach(const void *p, size_t bytes, RangePins *pins, Operation op) {
    std::string error;
    if (reach_memory(runtime().context, p, bytes, pins, &error) == DP_OK) return true;
    fatal(std::string(operation_info(op).mpi_name) + ": " + error);
}

int finish(Operation op, CommTeam *ct, RangePins pins, Post post, MPI_Request *request,
           Finish then = {}) {
    if (request)
        return start_request(request_kind(op), ct, std::move(pins), std::move(post),
                             std::move(then), request);
    return run_blocking(request_kind(op), ct, std::move(pins), post, then);
}

// The team for a reduction of `count` elements, or null (counted) to pass;
// refuse_in_place: the operation's in-place form is one deputy does not
// run. *span: the bytes the elements span in a buffer (count x extent: a
// pair like MPI_DOUBLE_INT has padding that MPI_Type_size leaves out).
CommTeam *reducing_team(Operation op, int count, MPI_Datatype type, MPI_Op mpi_op,
                        bool refuse_in_place, MPI_Comm comm, dp_dtype_t *dtype, dp_op_t *dop,
                        size_t *span) {
    if (!worth_offloading(op, size_t(count > 0 ? count : 0) * type_size(type))) return nullptr;
    size_t element = 0;
    PassReason why;
    *span = 0;
    if (!reduction_type(type, dtype, &element, &why)) count_passed(op, why);
    else if (!reduction_op(mpi_op, dop)) count_passed(op, PassReason::user_op);
    // (MPI_BAND on a float is MPI's to refuse, with its own error.)
    else if (!dp_op_applies(*dtype, *dop)) count_passed(op, PassReason::unsupported_datatype);
    else if (refuse_in_place) count_passed(op, PassReason::in_place);
    else {
        *span = size_t(count) * element;
        return team_of(op, comm);
    }
    return nullptr;
}

// --- one function per collective; request == nullptr: the blocking form ---

int allreduce(Operation op, const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
              MPI_Op mpi_op, MPI_Comm comm, MPI_Request *request) {
    const size_t bytes = size_t(count > 0 ? count : 0) * type_size(type);
    dp_dtype_t dtype;
    dp_op_t dop;
    auto to_mpi = [&] {
        return request ? PMPI_Iallreduce(sendbuf, recvbuf, count, type, mpi_op, comm, request)
                       : PMPI_Allreduce(sendbuf, recvbuf, count, type, mpi_op, comm);
    };
    size_t span = 0;
    CommTeam *ct = reducing_team(op, count, type, mpi_op, false, comm, &dtype, &dop, &span);
    if (!ct) return to_mpi();
    TunedCall tuned(op, ct, comm, bytes);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    RangePins pins;
    reach(src, span, &pins, op);
    reach(recvbuf, span, &pins, op);
    dp_team_t *team = ct->team;
    const size_t n = size_t(count);
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return dp_iallreduce(src, recvbuf, n, dtype, dop, team, req);
    }, request));
}

int reduce_scatter_block(Operation op, const void *sendbuf, void *recvbuf, int recvcount,
                         MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm, MPI_Request *request) {
    const size_t bytes = size_t(recvcount > 0 ? recvcount : 0) * type_size(type);
    dp_dtype_t dtype;
    dp_op_t dop;
    // deputy's plan writes a member's block while others still read the
    // same buffer: in place it would read results.
    auto to_mpi = [&] {
        return request ? PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, type, mpi_op,
                                                    comm, request)
                       : PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, mpi_op,
                                                   comm);
    };
    size_t span = 0;
    CommTeam *ct = reducing_team(op, recvcount, type, mpi_op, sendbuf == MPI_IN_PLACE, comm,
                                 &dtype, &dop, &span);
    if (!ct) return to_mpi();
    TunedCall tuned(op, ct, comm, bytes);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    RangePins pins;
    reach(sendbuf, span * size_t(ct->size), &pins, op);
    reach(recvbuf, span, &pins, op);
    dp_team_t *team = ct->team;
    const size_t n = size_t(recvcount);
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return dp_ireduce_scatter(sendbuf, recvbuf, n, dtype, dop, team, req);
    }, request));
}

// MPI_Reduce_scatter: per-rank counts, the same array on every rank, so
// every rank decides alike (its size: the largest count). Equal counts run
// as reduce_scatter_block; others as deputy's reduce_scatterv. deputy has
// no in-place form of either (as reduce_scatter_block).
int reduce_scatter(Operation op, const void *sendbuf, void *recvbuf, const int *recvcounts,
                   MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm, MPI_Request *request) {
    auto to_mpi = [&] {
        return request ? PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, mpi_op, comm,
                                              request)
                       : PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, mpi_op, comm);
    };
    int size = 0, me = 0;
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_rank(comm, &me);
    int largest = 0;
    bool equal = true;
    for (int m = 0; m < size; ++m) {
        largest = std::max(largest, recvcounts[m]);
        equal &= recvcounts[m] == recvcounts[0];
    }
    const size_t bytes = size_t(largest) * type_size(type);
    dp_dtype_t dtype;
    dp_op_t dop;
    size_t span = 0;  // of the largest block
    CommTeam *ct = reducing_team(op, largest, type, mpi_op, sendbuf == MPI_IN_PLACE, comm, &dtype,
                                 &dop, &span);
    if (!ct) return to_mpi();
    TunedCall tuned(op, ct, comm, bytes);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    const size_t element = largest > 0 ? span / size_t(largest) : 0;
    auto counts = std::make_shared<std::vector<size_t>>(size_t(size));
    size_t total = 0;
    for (int m = 0; m < size; ++m) {
        if (recvcounts[m] < 0)
            fatal(std::string(operation_info(op).mpi_name) + ": a negative count (MPI_ERR_COUNT)");
        (*counts)[size_t(m)] = size_t(recvcounts[m]);
        total += size_t(recvcounts[m]);
    }
    RangePins pins;
    reach(sendbuf, total * element, &pins, op);
    reach(recvbuf, size_t(recvcounts[me]) * element, &pins, op);
    dp_team_t *team = ct->team;
    const size_t n = size_t(recvcounts[0]);
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return equal ? dp_ireduce_scatter(sendbuf, recvbuf, n, dtype, dop, team, req)
                     : dp_ireduce_scatterv(sendbuf, recvbuf, counts->data(), dtype, dop, team,
                                           req);
    }, request));
}

int reduce(Operation op, const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
           MPI_Op mpi_op, int root, MPI_Comm comm, MPI_Request *request) {
    // Count, type and op are the same on every rank (MPI): every rank
    // takes the same decision. MPI_IN_PLACE is the root's: its input is in
    // its receive buffer (src == dst, deputy's in-place form).
    const size_t bytes = size_t(count > 0 ? count : 0) * type_size(type);
    dp_dtype_t dtype;
    dp_op_t dop;
    auto to_mpi = [&] {
        return request ? PMPI_Ireduce(sendbuf, recvbuf, count, type, mpi_op, root, comm, request)
                       : PMPI_Reduce(sendbuf, recvbuf, count, type, mpi_op, root, comm);
    };
    size_t span = 0;
    CommTeam *ct = reducing_team(op, count, type, mpi_op, false, comm, &dtype, &dop, &span);
    if (!ct) return to_mpi();
    TunedCall tuned(op, ct, comm, bytes);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    const bool at_root = ct->rank == root;
    const void *src = sendbuf == MPI_IN_PLACE && at_root ? recvbuf : sendbuf;
    void *dst = at_root ? recvbuf : nullptr;  // significant at the root only
    RangePins pins;
    reach(src, span, &pins, op);
    if (dst) reach(dst, span, &pins, op);
    dp_team_t *team = ct->team;
    const size_t n = size_t(count);
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return dp_ireduce(src, dst, n, dtype, dop, root, team, req);
    }, request));
}

// MPI_Scan and MPI_Exscan. deputy has no in-place form of them (a member's
// result would overwrite an input later members read), and MPI lets any
// rank pass MPI_IN_PLACE on its own, so passing such a call to MPI would
// split the ranks between two libraries: in place, the input is copied
// aside first (kept with the request until it completes).
int scan(Operation op, bool exclusive, const void *sendbuf, void *recvbuf, int count,
         MPI_Datatype type, MPI_Op mpi_op, MPI_Comm comm, MPI_Request *request) {
    const size_t bytes = size_t(count > 0 ? count : 0) * type_size(type);
    dp_dtype_t dtype;
    dp_op_t dop;
    auto to_mpi = [&] {
        if (exclusive)
            return request ? PMPI_Iexscan(sendbuf, recvbuf, count, type, mpi_op, comm, request)
                           : PMPI_Exscan(sendbuf, recvbuf, count, type, mpi_op, comm);
        return request ? PMPI_Iscan(sendbuf, recvbuf, count, type, mpi_op, comm, request)
                       : PMPI_Scan(sendbuf, recvbuf, count, type, mpi_op, comm);
    };
    size_t span = 0;
    CommTeam *ct = reducing_team(op, count, type, mpi_op, false, comm, &dtype, &dop, &span);
    if (!ct) return to_mpi();
    TunedCall tuned(op, ct, comm, bytes);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    std::shared_ptr<std::vector<uint8_t>> aside;
    const void *src = sendbuf;
    if (sendbuf == MPI_IN_PLACE) {
        const auto *in = static_cast<const uint8_t *>(recvbuf);
        aside = std::make_shared<std::vector<uint8_t>>(in, in + span);
        src = aside->data();
    }
    RangePins pins;
    reach(src, span, &pins, op);
    reach(recvbuf, span, &pins, op);
    dp_team_t *team = ct->team;
    const size_t n = size_t(count);
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        (void)aside;  // (held until the request is gone)
        return exclusive ? dp_iexscan(src, recvbuf, n, dtype, dop, team, req)
                         : dp_iscan(src, recvbuf, n, dtype, dop, team, req);
    }, request));
}

// Moving collectives move bytes: one dense element type on both sides of
// the same size, counted in bytes.
bool movable(Operation op, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
             int recvcount, MPI_Datatype recvtype, size_t *block_bytes) {
    size_t element = 0;
    PassReason why;
    if (!dense_type_bytes(recvtype, &element, &why)) {
        count_passed(op, why);
        return false;
    }
    *block_bytes = size_t(recvcount > 0 ? recvcount : 0) * element;
    if (sendbuf != MPI_IN_PLACE && (sendtype != recvtype || sendcount != recvcount)) {
        size_t send_element = 0;
        if (!dense_type_bytes(sendtype, &send_element, &why) ||
            size_t(sendcount > 0 ? sendcount : 0) * send_element != *block_bytes) {
            count_passed(op, PassReason::mixed_datatypes);
            return false;
        }
    }
    return true;
}

// The team for a moving collective (allgather, alltoall), or null (counted)
// to pass; *block_bytes: one block in bytes.
CommTeam *moving_team(Operation op, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                      int recvcount, MPI_Datatype recvtype, MPI_Comm comm, size_t *block_bytes) {
    if (worth_offloading(op, size_t(recvcount > 0 ? recvcount : 0) * type_size(recvtype)) &&
        movable(op, sendbuf, sendcount, sendtype, recvcount, recvtype, block_bytes))
        return team_of(op, comm);
    return nullptr;
}

int allgather(Operation op, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
              void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
              MPI_Request *request) {
    size_t block = 0;
    auto to_mpi = [&] {
        return request ? PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                         recvtype, comm, request)
                       : PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                        recvtype, comm);
    };
    CommTeam *ct = moving_team(op, sendbuf, sendcount, sendtype, recvcount, recvtype, comm, &block);
    if (!ct) return to_mpi();
    TunedCall tuned(op, ct, comm, block);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    const void *src = sendbuf == MPI_IN_PLACE
                          ? static_cast<const uint8_t *>(recvbuf) + size_t(ct->rank) * block
                          : sendbuf;
    RangePins pins;
    reach(src, block, &pins, op);
    reach(recvbuf, block * size_t(ct->size), &pins, op);
    dp_team_t *team = ct->team;
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return dp_iallgather(src, recvbuf, block, DP_UINT8, team, req);
    }, request));
}

int alltoall(Operation op, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
             void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
             MPI_Request *request) {
    size_t block = 0;
    auto to_mpi = [&] {
        return request ? PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                        recvtype, comm, request)
                       : PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                       recvtype, comm);
    };
    CommTeam *ct = moving_team(op, sendbuf, sendcount, sendtype, recvcount, recvtype, comm, &block);
    if (!ct) return to_mpi();
    TunedCall tuned(op, ct, comm, block);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    RangePins pins;
    reach(src, block * size_t(ct->size), &pins, op);
    reach(recvbuf, block * size_t(ct->size), &pins, op);
    dp_team_t *team = ct->team;
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return dp_ialltoall(src, recvbuf, block, DP_UINT8, team, req);
    }, request));
}

// The ranks' counts differ, so no size threshold can be agreed without
// communicating: alltoallv is offloaded when its threshold is 0 and never
// otherwise. Counts and displacements go to deputy in bytes, so send and
// receive types only need to be dense.
int alltoallv(Operation op, const void *sendbuf, const int *sendcounts, const int *sdispls,
              MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *rdispls,
              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    const Runtime &rt = runtime();
    size_t send_element = 0, recv_element = 0;
    PassReason why;
    CommTeam *ct = nullptr;
    if (!rt.initialized || rt.disabled)
        count_passed(op, rt.disabled ? PassReason::disabled : PassReason::no_agent);
    else if (rt.thresholds[size_t(op)] != 0) count_passed(op, PassReason::below_threshold);
    else if (sendbuf == MPI_IN_PLACE) count_passed(op, PassReason::in_place);
    else if (!dense_type_bytes(recvtype, &recv_element, &why) ||
             !dense_type_bytes(sendtype, &send_element, &why))
        count_passed(op, why);
    else ct = team_of(op, comm);
    if (!ct) {
        return request ? PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                         recvcounts, rdispls, recvtype, comm, request)
                       : PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                        recvcounts, rdispls, recvtype, comm);
    }
    // Copied now: MPI lets the caller reuse its arrays once the call
    // returns, and a post made again after DP_ERR_RETRY needs them.
    struct Layout {
        explicit Layout(size_t n) : scounts(n), sdispls(n), rcounts(n), rdispls(n) {}
        std::vector<size_t> scounts, sdispls, rcounts, rdispls;
    };
    auto layout = std::make_shared<Layout>(size_t(ct->size));
    size_t send_extent = 0, recv_extent = 0;
    for (int m = 0; m < ct->size; ++m) {
        if (sendcounts[m] < 0 || sdispls[m] < 0 || recvcounts[m] < 0 || rdispls[m] < 0)
            fatal(std::string(operation_info(op).mpi_name) +
                  ": a negative count or displacement (MPI_ERR_COUNT / MPI_ERR_ARG)");
        const size_t i = size_t(m);
        layout->scounts[i] = size_t(sendcounts[m]) * send_element;
        layout->sdispls[i] = size_t(sdispls[m]) * send_element;
        layout->rcounts[i] = size_t(recvcounts[m]) * recv_element;
        layout->rdispls[i] = size_t(rdispls[m]) * recv_element;
        if (layout->scounts[i])
            send_extent = std::max(send_extent, layout->sdispls[i] + layout->scounts[i]);
        if (layout->rcounts[i])
            recv_extent = std::max(recv_extent, layout->rdispls[i] + layout->rcounts[i]);
    }
    RangePins pins;
    reach(sendbuf, send_extent, &pins, op);
    reach(recvbuf, recv_extent, &pins, op);
    dp_team_t *team = ct->team;
    return finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return dp_ialltoallv(sendbuf, layout->scounts.data(), layout->sdispls.data(), recvbuf,
                             layout->rcounts.data(), layout->rdispls.data(), DP_UINT8, team,
                             req);
    }, request);
}

// --- gather and scatter ---
//
// MPI makes one side of a rooted move significant at the root only (a
// gather's receive buffer, a scatter's send buffer), so every rank decides
// from the other side, which all of them have: its type must be dense, its
// bytes (count x type size) the block. At the root the root-only side must
// describe the same bytes but may be any datatype: dense, deputy reads or
// writes it directly; derived (a resized vector that places each rank's
// block in a column of a matrix, say), deputy moves the blocks through a
// packed copy that MPI_Pack / MPI_Unpack translate. The root never passes
// alone to MPI while the others offload.

// Whether MPI_Pack of a dense predefined type is its bytes unchanged (both
// MPIs in a homogeneous job): the packed copy is what deputy moves.
bool packing_is_copying() {
    static const bool same = [] {
        const int32_t values[3] = {1, -2, 0x01020304};
        unsigned char packed[64] = {};
        int size = 0, position = 0;
        if (PMPI_Pack_size(3, MPI_INT32_T, MPI_COMM_SELF, &size) != MPI_SUCCESS ||
            size != int(sizeof values) ||
            PMPI_Pack(values, 3, MPI_INT32_T, packed, int(sizeof packed), &position,
                      MPI_COMM_SELF) != MPI_SUCCESS ||
            position != int(sizeof values))
            return false;
        return std::memcmp(packed, values, sizeof values) == 0;
    }();
    return same;
}

// Counts and displacements go to deputy in bytes (DP_UINT8), copied now:
// MPI lets the caller reuse its arrays once the call returns, and a post
// made again after DP_ERR_RETRY needs them.
struct ByteBlocks {
    explicit ByteBlocks(size_t n) : counts(n), displs(n) {}
    std::vector<size_t> counts, displs;
};

// `counts` / `displs` (elements of `element` bytes, `size` of them) as
// bytes; the extent they span. A negative entry is the caller's error.
std::shared_ptr<ByteBlocks> byte_blocks(Operation op, const int *counts, const int *displs,
                                        int size, size_t element, size_t *extent) {
    auto b = std::make_shared<ByteBlocks>(size_t(size));
    *extent = 0;
    for (int m = 0; m < size; ++m) {
        if (counts[m] < 0 || displs[m] < 0)
            fatal(std::string(operation_info(op).mpi_name) +
                  ": a negative count or displacement (MPI_ERR_COUNT / MPI_ERR_ARG)");
        const size_t i = size_t(m);
        b->counts[i] = size_t(counts[m]) * element;
        b->displs[i] = size_t(displs[m]) * element;
        if (b->counts[i]) *extent = std::max(*extent, b->displs[i] + b->counts[i]);
    }
    return b;
}

// The root's side of a rooted move (gather's or gatherv's receive buffer,
// scatter's or scatterv's send buffer: `counts` / `displs` of `type`, in
// its elements) as deputy sees it: dense, deputy's blocks are in the
// buffer itself; derived, in a packed copy with the blocks back to back,
// which MPI_Pack / MPI_Unpack translate block by block. gather and scatter
// are the case of equal blocks (root_equal_blocks).
struct RootBlocks {
    uint8_t *base = nullptr;                     // what deputy reads or writes
    std::shared_ptr<std::vector<uint8_t>> copy;  // the packed copy, if any
    std::shared_ptr<ByteBlocks> blocks;          // in base
    size_t extent = 0;                           // bytes of base deputy touches
    MPI_Aint type_extent = 0;
    std::vector<int> counts, displs;  // the caller's, for packing (elements of type)
};
bool root_blocks(Operation op, void *buffer, const int *counts, const int *displs,
                 MPI_Datatype type, int size, RootBlocks *out) {
    out->counts.assign(counts, counts + size);
    out->displs.assign(displs, displs + size);
    size_t element = 0;
    PassReason why;
    if (dense_type_bytes(type, &element, &why)) {
        out->base = static_cast<uint8_t *>(buffer);
        out->blocks = byte_blocks(op, counts, displs, size, element, &out->extent);
        out->type_extent = MPI_Aint(element);
        return true;
    }
    MPI_Aint lb = 0;
    if (PMPI_Type_get_extent(type, &lb, &out->type_extent) != MPI_SUCCESS) {
        count_passed(op, PassReason::derived_datatype);
        return false;
    }
    if (!packing_is_copying())
        fatal(std::string(operation_info(op).mpi_name) +
              ": the root's datatype is derived and this MPI's packed form is not the data's "
              "bytes; give the root a predefined datatype, or set DEPUTY_MPI_THRESHOLDS=" +
              operation_info(op).key + "=never");
    // Packed, block m is counts[m] x the type's size, back to back.
    std::vector<int> packed_displs(static_cast<size_t>(size), 0);
    int64_t at = 0;
    const size_t tsize = type_size(type);
    for (int m = 0; m < size; ++m) {
        packed_displs[size_t(m)] = int(at);
        at += counts[m] > 0 ? counts[m] : 0;
        if (at > INT_MAX) {
            count_passed(op, PassReason::too_large);
            return false;
        }
    }
    out->blocks = byte_blocks(op, counts, packed_displs.data(), size, tsize, &out->extent);
    out->copy = std::make_shared<std::vector<uint8_t>>(size_t(at) * tsize);
    out->base = out->copy->data();
    return true;
}

// gather's and scatter's root side: `size` blocks of `count`, back to back,
// each of `block` bytes (the side every rank has); blocks of other bytes are
// erroneous, and MPI says so.
bool root_equal_blocks(Operation op, void *buffer, int count, MPI_Datatype type, size_t block,
                       int size, RootBlocks *out) {
    const int n = count > 0 ? count : 0;
    if (type_size(type) * size_t(n) != block) {
        count_passed(op, PassReason::mixed_datatypes);
        return false;
    }
    if (int64_t(n) * size > INT_MAX) {  // (the displacements are ints)
        count_passed(op, PassReason::too_large);
        return false;
    }
    std::vector<int> counts(size_t(size), n), displs(size_t(size), 0);
    for (int m = 0; m < size; ++m) displs[size_t(m)] = m * n;
    return root_blocks(op, buffer, counts.data(), displs.data(), type, size, out);
}

// A derived root: member m's block of the caller's buffer into the packed
// copy (its own, in place, for a gather(v); all of them for a scatter(v),
// whose send buffer MPI lets be read from the call on).
void pack_root_block(const RootBlocks &side, const void *buffer, MPI_Datatype type, int m) {
    const size_t i = size_t(m);
    if (!side.copy || side.counts[i] <= 0) return;
    int position = 0;
    PMPI_Pack(static_cast<const uint8_t *>(buffer) + MPI_Aint(side.displs[i]) * side.type_extent,
              side.counts[i], type, side.base + side.blocks->displs[i],
              int(side.blocks->counts[i]), &position, MPI_COMM_SELF);
}

// A derived root of a gather(v): the packed copy into the caller's buffer,
// block by block, once the operation is done (nothing for a dense one).
Finish unpack_root_blocks(const RootBlocks &side, void *buffer, MPI_Datatype type) {
    if (!side.copy) return {};
    return [copy = side.copy, blocks = side.blocks, c = side.counts, d = side.displs, buffer,
            type, te = side.type_extent] {
        for (size_t m = 0; m < c.size(); ++m) {
            if (c[m] <= 0) continue;
            int position = 0;
            PMPI_Unpack(copy->data() + blocks->displs[m], int(blocks->counts[m]), &position,
                        static_cast<uint8_t *>(buffer) + MPI_Aint(d[m]) * te, c[m], type,
                        MPI_COMM_SELF);
        }
    };
}

// The team for a gather or scatter decided from the side every rank has
// (`count` of `type`), or null (counted) to pass; *block: its bytes. The
// root in place has only its root-only side, whose type may be derived
// (`root_only`): its bytes decide alone, as the others' do.
CommTeam *rooted_team(Operation op, int count, MPI_Datatype type, bool root_only, int root,
                      MPI_Comm comm, size_t *block) {
    *block = size_t(count > 0 ? count : 0) * type_size(type);
    if (!worth_offloading(op, *block)) return nullptr;
    size_t element = 0;
    PassReason why;
    if (!root_only && !dense_type_bytes(type, &element, &why)) {
        count_passed(op, why);
        return nullptr;
    }
    CommTeam *ct = team_of(op, comm);
    if (ct && (root < 0 || root >= ct->size)) {
        count_passed(op, PassReason::bad_argument);  // MPI_ERR_ROOT is MPI's to return
        return nullptr;
    }
    return ct;
}

int gather(Operation op, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
           void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
           MPI_Request *request) {
    auto to_mpi = [&] {
        return request ? PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                      root, comm, request)
                       : PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                     root, comm);
    };
    int me = -1;
    PMPI_Comm_rank(comm, &me);
    // In place, the root's send side is its own block of the receive buffer.
    const bool in_place = me == root && sendbuf == MPI_IN_PLACE;
    size_t block = 0;
    CommTeam *ct = in_place ? rooted_team(op, recvcount, recvtype, true, root, comm, &block)
                            : rooted_team(op, sendcount, sendtype, false, root, comm, &block);
    if (!ct) return to_mpi();
    RootBlocks side;
    if (me == root &&
        !root_equal_blocks(op, recvbuf, recvcount, recvtype, block, ct->size, &side))
        return to_mpi();
    TunedCall tuned(op, ct, comm, block);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    const void *src = sendbuf;
    if (in_place) {  // its block, where deputy expects it (the packed copy's, if any)
        pack_root_block(side, recvbuf, recvtype, root);
        src = side.base + side.blocks->displs[size_t(root)];
    }
    RangePins pins;
    reach(src, block, &pins, op);
    if (side.base) reach(side.base, side.extent, &pins, op);
    Finish then = unpack_root_blocks(side, recvbuf, recvtype);
    dp_team_t *team = ct->team;
    uint8_t *dst = side.base;
    return tuned.done(finish(op, ct, std::move(pins), [=, copy = side.copy](dp_request_t **req) {
        (void)copy;  // (held until the request is gone)
        return dp_igather(src, dst, block, DP_UINT8, root, team, req);
    }, request, std::move(then)));
}

int scatter(Operation op, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
            void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
            MPI_Request *request) {
    auto to_mpi = [&] {
        return request ? PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                       recvtype, root, comm, request)
                       : PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                      recvtype, root, comm);
    };
    int me = -1;
    PMPI_Comm_rank(comm, &me);
    // In place, the root's receive side is its own block of the send buffer.
    const bool in_place = me == root && recvbuf == MPI_IN_PLACE;
    size_t block = 0;
    CommTeam *ct = in_place ? rooted_team(op, sendcount, sendtype, true, root, comm, &block)
                            : rooted_team(op, recvcount, recvtype, false, root, comm, &block);
    if (!ct) return to_mpi();
    RootBlocks side;
    if (me == root && !root_equal_blocks(op, const_cast<void *>(sendbuf), sendcount, sendtype,
                                         block, ct->size, &side))
        return to_mpi();
    TunedCall tuned(op, ct, comm, block);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    for (int m = 0; side.copy && m < ct->size; ++m) pack_root_block(side, sendbuf, sendtype, m);
    void *dst = in_place ? side.base + side.blocks->displs[size_t(root)] : recvbuf;
    RangePins pins;
    reach(dst, block, &pins, op);
    if (side.base) reach(side.base, side.extent, &pins, op);
    dp_team_t *team = ct->team;
    const uint8_t *src = side.base;
    return tuned.done(finish(op, ct, std::move(pins), [=, copy = side.copy](dp_request_t **req) {
        (void)copy;  // (held until the request is gone)
        return dp_iscatter(src, dst, block, DP_UINT8, root, team, req);
    }, request));
}

// --- the vector gathers and scatters ---
//
// The ranks' counts of a gatherv or scatterv are the root's alone, so no
// size can be agreed without communicating: offloaded when the threshold
// is 0, never otherwise (as alltoallv). Allgatherv's counts are everyone's:
// its size is their mean block.
bool vector_worth_offloading(Operation op) {
    const Runtime &rt = runtime();
    if (!rt.initialized || rt.disabled) {
        count_passed(op, rt.disabled ? PassReason::disabled : PassReason::no_agent);
        return false;
    }
    if (rt.thresholds[size_t(op)] != 0) {
        count_passed(op, PassReason::below_threshold);
        return false;
    }
    return true;
}

int allgatherv(Operation op, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, const int *recvcounts, const int *displs, MPI_Datatype recvtype,
               MPI_Comm comm, MPI_Request *request) {
    auto to_mpi = [&] {
        return request ? PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                                          displs, recvtype, comm, request)
                       : PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                                         displs, recvtype, comm);
    };
    int size = 0, me = 0;
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_rank(comm, &me);
    // Compared by its mean block, allgather's unit (every rank has every
    // count, so every rank decides alike).
    size_t total = 0;
    for (int m = 0; m < size; ++m) total += size_t(recvcounts[m] > 0 ? recvcounts[m] : 0);
    const size_t bytes = total * type_size(recvtype) / size_t(size > 0 ? size : 1);
    size_t element = 0;
    CommTeam *ct = nullptr;
    if (worth_offloading(op, bytes) &&
        movable(op, sendbuf, sendcount, sendtype, recvcounts[me], recvtype, &element))
        ct = team_of(op, comm);
    if (!ct) return to_mpi();
    element = type_size(recvtype);  // (dense: its size is its extent)
    TunedCall tuned(op, ct, comm, bytes);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    size_t extent = 0;
    auto blocks = byte_blocks(op, recvcounts, displs, size, element, &extent);
    const size_t own = blocks->counts[size_t(me)];
    const void *src = sendbuf == MPI_IN_PLACE
                          ? static_cast<const uint8_t *>(recvbuf) + blocks->displs[size_t(me)]
                          : sendbuf;
    RangePins pins;
    reach(src, own, &pins, op);
    reach(recvbuf, extent, &pins, op);
    dp_team_t *team = ct->team;
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return dp_iallgatherv(src, own, recvbuf, blocks->counts.data(), blocks->displs.data(),
                              DP_UINT8, team, req);
    }, request));
}

// The team for a gatherv or scatterv, or null (counted) to pass. The side
// every rank has decides (`type`: a gatherv's send type, a scatterv's
// receive type; *element its bytes); the root in place has only its own.
CommTeam *vector_rooted_team(Operation op, bool in_place, MPI_Datatype type, int root,
                             MPI_Comm comm, size_t *element) {
    PassReason why;
    CommTeam *ct = nullptr;
    if (vector_worth_offloading(op)) {
        if (!in_place && !dense_type_bytes(type, element, &why)) count_passed(op, why);
        else ct = team_of(op, comm);
    }
    if (ct && (root < 0 || root >= ct->size)) {
        count_passed(op, PassReason::bad_argument);  // MPI_ERR_ROOT is MPI's to return
        ct = nullptr;
    }
    return ct;
}

int gatherv(Operation op, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
            void *recvbuf, const int *recvcounts, const int *displs, MPI_Datatype recvtype,
            int root, MPI_Comm comm, MPI_Request *request) {
    auto to_mpi = [&] {
        return request ? PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                       recvtype, root, comm, request)
                       : PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                      recvtype, root, comm);
    };
    int me = -1;
    PMPI_Comm_rank(comm, &me);
    const bool in_place = me == root && sendbuf == MPI_IN_PLACE;
    size_t element = 0;
    CommTeam *ct = vector_rooted_team(op, in_place, sendtype, root, comm, &element);
    if (!ct) return to_mpi();
    RootBlocks side;
    if (me == root && !root_blocks(op, recvbuf, recvcounts, displs, recvtype, ct->size, &side))
        return to_mpi();
    const size_t own = me == root ? side.blocks->counts[size_t(me)]
                                  : size_t(sendcount > 0 ? sendcount : 0) * element;
    const void *src = sendbuf;
    if (in_place) {  // its block, where deputy expects it (the packed copy's, if any)
        pack_root_block(side, recvbuf, recvtype, me);
        src = side.base + side.blocks->displs[size_t(me)];
    }
    RangePins pins;
    reach(src, own, &pins, op);
    if (side.base) reach(side.base, side.extent, &pins, op);
    Finish then = unpack_root_blocks(side, recvbuf, recvtype);
    dp_team_t *team = ct->team;
    uint8_t *dst = side.base;
    std::shared_ptr<ByteBlocks> blocks = side.blocks;
    return finish(op, ct, std::move(pins), [=, copy = side.copy](dp_request_t **req) {
        (void)copy;  // (held until the request is gone)
        return dp_igatherv(src, own, dst, blocks ? blocks->counts.data() : nullptr,
                           blocks ? blocks->displs.data() : nullptr, DP_UINT8, root, team, req);
    }, request, std::move(then));
}

int scatterv(Operation op, const void *sendbuf, const int *sendcounts, const int *displs,
             MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
             MPI_Comm comm, MPI_Request *request) {
    auto to_mpi = [&] {
        return request ? PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
                                        recvcount, recvtype, root, comm, request)
                       : PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                       recvtype, root, comm);
    };
    int me = -1;
    PMPI_Comm_rank(comm, &me);
    const bool in_place = me == root && recvbuf == MPI_IN_PLACE;
    size_t element = 0;
    CommTeam *ct = vector_rooted_team(op, in_place, recvtype, root, comm, &element);
    if (!ct) return to_mpi();
    RootBlocks side;
    if (me == root && !root_blocks(op, const_cast<void *>(sendbuf), sendcounts, displs, sendtype,
                                   ct->size, &side))
        return to_mpi();
    for (int m = 0; side.copy && m < ct->size; ++m) pack_root_block(side, sendbuf, sendtype, m);
    const size_t own = me == root ? side.blocks->counts[size_t(me)]
                                  : size_t(recvcount > 0 ? recvcount : 0) * element;
    void *dst = in_place ? side.base + side.blocks->displs[size_t(me)] : recvbuf;
    RangePins pins;
    reach(dst, own, &pins, op);
    if (side.base) reach(side.base, side.extent, &pins, op);
    dp_team_t *team = ct->team;
    const uint8_t *src = side.base;
    std::shared_ptr<ByteBlocks> blocks = side.blocks;
    return finish(op, ct, std::move(pins), [=, copy = side.copy](dp_request_t **req) {
        (void)copy;  // (held until the request is gone)
        return dp_iscatterv(src, blocks ? blocks->counts.data() : nullptr,
                            blocks ? blocks->displs.data() : nullptr, dst, own, DP_UINT8, root,
                            team, req);
    }, request);
}

int bcast(Operation op, void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
          MPI_Request *request) {
    size_t element = 0;
    PassReason why;
    CommTeam *ct = nullptr;
    if (worth_offloading(op, size_t(count > 0 ? count : 0) * type_size(type))) {
        if (!dense_type_bytes(type, &element, &why)) count_passed(op, why);
        else ct = team_of(op, comm);
    }
    auto to_mpi = [&] {
        return request ? PMPI_Ibcast(buffer, count, type, root, comm, request)
                       : PMPI_Bcast(buffer, count, type, root, comm);
    };
    if (!ct) return to_mpi();
    const size_t bytes = size_t(count) * element;
    TunedCall tuned(op, ct, comm, bytes);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    RangePins pins;
    reach(buffer, bytes, &pins, op);
    dp_team_t *team = ct->team;
    return tuned.done(finish(op, ct, std::move(pins), [=](dp_request_t **req) {
        return dp_ibcast(buffer, bytes, DP_UINT8, root, team, req);
    }, request));
}

int barrier(Operation op, MPI_Comm comm, MPI_Request *request) {
    CommTeam *ct = worth_offloading(op, 0) ? team_of(op, comm) : nullptr;
    auto to_mpi = [&] { return request ? PMPI_Ibarrier(comm, request) : PMPI_Barrier(comm); };
    if (!ct) return to_mpi();
    TunedCall tuned(op, ct, comm, 0);
    if (tuned.to_mpi()) return tuned.done(to_mpi());
    dp_team_t *team = ct->team;
    return tuned.done(finish(op, ct, {}, [=](dp_request_t **req) { return dp_ibarrier(team, req); },
                             request));
}

}  // namespace
}  // namespace deputy::mpi

using deputy::mpi::Operation;

extern "C" {

DEPUTY_MPI_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::allreduce(Operation::iallreduce, sendbuf, recvbuf, count, type, op, comm,
                                  request);
}
DEPUTY_MPI_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
    return deputy::mpi::allreduce(Operation::allreduce, sendbuf, recvbuf, count, type, op, comm,
                                  nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::reduce_scatter_block(Operation::ireduce_scatter_block, sendbuf, recvbuf,
                                             recvcount, type, op, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm) {
    return deputy::mpi::reduce_scatter_block(Operation::reduce_scatter_block, sendbuf, recvbuf,
                                             recvcount, type, op, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::allgather(Operation::iallgather, sendbuf, sendcount, sendtype, recvbuf,
                                  recvcount, recvtype, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    return deputy::mpi::allgather(Operation::allgather, sendbuf, sendcount, sendtype, recvbuf,
                                  recvcount, recvtype, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::alltoall(Operation::ialltoall, sendbuf, sendcount, sendtype, recvbuf,
                                 recvcount, recvtype, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    return deputy::mpi::alltoall(Operation::alltoall, sendbuf, sendcount, sendtype, recvbuf,
                                 recvcount, recvtype, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[],
                                     const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                                     const int recvcounts[], const int rdispls[],
                                     MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::alltoallv(Operation::ialltoallv, sendbuf, sendcounts, sdispls, sendtype,
                                  recvbuf, recvcounts, rdispls, recvtype, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
                                    const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                                    const int recvcounts[], const int rdispls[],
                                    MPI_Datatype recvtype, MPI_Comm comm) {
    return deputy::mpi::alltoallv(Operation::alltoallv, sendbuf, sendcounts, sdispls, sendtype,
                                  recvbuf, recvcounts, rdispls, recvtype, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Ibcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request *request) {
    return deputy::mpi::bcast(Operation::ibcast, buffer, count, type, root, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    return deputy::mpi::bcast(Operation::bcast, buffer, count, type, root, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::barrier(Operation::ibarrier, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Barrier(MPI_Comm comm) { return deputy::mpi::barrier(Operation::barrier, comm, nullptr); }
DEPUTY_MPI_EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                                  MPI_Op op, int root, MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::reduce(Operation::ireduce, sendbuf, recvbuf, count, type, op, root, comm,
                               request);
}
DEPUTY_MPI_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                                 MPI_Op op, int root, MPI_Comm comm) {
    return deputy::mpi::reduce(Operation::reduce, sendbuf, recvbuf, count, type, op, root, comm,
                               nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                                MPI_Op op, MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::scan(Operation::iscan, false, sendbuf, recvbuf, count, type, op, comm,
                             request);
}
DEPUTY_MPI_EXPORT int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm comm) {
    return deputy::mpi::scan(Operation::scan, false, sendbuf, recvbuf, count, type, op, comm,
                             nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count,
                                  MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                  MPI_Request *request) {
    return deputy::mpi::scan(Operation::iexscan, true, sendbuf, recvbuf, count, type, op, comm,
                             request);
}
DEPUTY_MPI_EXPORT int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                  void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                                  MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::gather(Operation::igather, sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, root, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                                 MPI_Comm comm) {
    return deputy::mpi::gather(Operation::gather, sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, root, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                   void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                                   MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::scatter(Operation::iscatter, sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, root, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                  void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                                  MPI_Comm comm) {
    return deputy::mpi::scatter(Operation::scatter, sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, root, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                      void *recvbuf, const int recvcounts[], const int displs[],
                                      MPI_Datatype recvtype, MPI_Comm comm,
                                      MPI_Request *request) {
    return deputy::mpi::allgatherv(Operation::iallgatherv, sendbuf, sendcount, sendtype, recvbuf,
                                   recvcounts, displs, recvtype, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                     void *recvbuf, const int recvcounts[], const int displs[],
                                     MPI_Datatype recvtype, MPI_Comm comm) {
    return deputy::mpi::allgatherv(Operation::allgatherv, sendbuf, sendcount, sendtype, recvbuf,
                                   recvcounts, displs, recvtype, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                   void *recvbuf, const int recvcounts[], const int displs[],
                                   MPI_Datatype recvtype, int root, MPI_Comm comm,
                                   MPI_Request *request) {
    return deputy::mpi::gatherv(Operation::igatherv, sendbuf, sendcount, sendtype, recvbuf,
                                recvcounts, displs, recvtype, root, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                  void *recvbuf, const int recvcounts[], const int displs[],
                                  MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return deputy::mpi::gatherv(Operation::gatherv, sendbuf, sendcount, sendtype, recvbuf,
                                recvcounts, displs, recvtype, root, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
                                    const int displs[], MPI_Datatype sendtype, void *recvbuf,
                                    int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                                    MPI_Request *request) {
    return deputy::mpi::scatterv(Operation::iscatterv, sendbuf, sendcounts, displs, sendtype,
                                 recvbuf, recvcount, recvtype, root, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                                   MPI_Datatype sendtype, void *recvbuf, int recvcount,
                                   MPI_Datatype recvtype, int root, MPI_Comm comm) {
    return deputy::mpi::scatterv(Operation::scatterv, sendbuf, sendcounts, displs, sendtype,
                                 recvbuf, recvcount, recvtype, root, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
                                          const int recvcounts[], MPI_Datatype type, MPI_Op op,
                                          MPI_Comm comm, MPI_Request *request) {
    return deputy::mpi::reduce_scatter(Operation::ireduce_scatter, sendbuf, recvbuf, recvcounts,
                                       type, op, comm, request);
}
DEPUTY_MPI_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
                                         const int recvcounts[], MPI_Datatype type, MPI_Op op,
                                         MPI_Comm comm) {
    return deputy::mpi::reduce_scatter(Operation::reduce_scatter, sendbuf, recvbuf, recvcounts,
                                       type, op, comm, nullptr);
}
DEPUTY_MPI_EXPORT int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                                 MPI_Op op, MPI_Comm comm) {
    return deputy::mpi::scan(Operation::exscan, true, sendbuf, recvbuf, count, type, op, comm,
                             nullptr);
}

}  // extern "C"
