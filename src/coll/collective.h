// What one rank asks for: the collective, its team, its count and types.
//
// Counts are in elements of `dtype`, as in MPI, and mean per collective:
//
//   collective      count is                  source bytes   destination bytes
//   allreduce       the whole vector          n              n
//   reduce_scatter  each rank's result block  P * n          n   (P * n in place)
//   allgather       each rank's contribution  n              P * n
//   alltoall        each block to one peer    P * n          P * n
//   alltoallv       (per peer: counts block)  sum of sends   sum of receives
//   bcast           the whole message         0              n   (root's data is there)
//   barrier         ignored                   0              0
//   reduce          the whole vector          n              n at the root, 0 elsewhere
//   gather          each rank's contribution  n              P * n at the root, 0 elsewhere
//   scatter         each rank's block         P * n at the root, 0 elsewhere   n
//   scan            the whole vector          n              n (ranks 0..r reduced)
//   exscan          the whole vector          n              n (ranks 0..r-1; rank 0: 0)
//   allgatherv      (counts block)            own block      the blocks of every member
//   gatherv         (counts block)            own block      the blocks at the root
//   scatterv        (counts block)            blocks at the root   own block
//   reduce_scatterv (counts block)            every block    own block (reduced)
//
// with n = count * dp_dtype_size(dtype). In place (MPI_IN_PLACE) the source
// buffer does not exist and the input is read from the destination: for
// allgather each rank's block already sits at its slot of the destination;
// for reduce_scatter the P blocks are in the destination and the result goes
// to its first block; allreduce and alltoall read and overwrite the
// destination. bcast and barrier have no in-place form (the flag is ignored).
// The rooted ones as MPI_IN_PLACE at the root: reduce reads the root's input
// from its destination (src == dst); gather's root block already sits at its
// slot of the destination (src == dst + root * n); scatter's root keeps its
// block in its source (dst == src + root * n). scan and exscan have no
// in-place form (has_in_place).
//
// alltoallv, allgatherv, gatherv and scatterv are the *vector* collectives:
// their counts and displacements differ per member and peer, so they travel
// beside the post in a counts block (coll/vector_counts.h) and `count` is
// not used on the wire. The block is alltoallv's (what a member sends to and
// receives from each peer): the client derives it from the others' MPI-like
// arguments (client/coll_api.cc), so all four are alltoallv's moves and run
// its plans. Where a single count describes one (deputy bench coll, the
// table's blocks), that is the equal-count case. alltoallv has no in-place
// form; the others' in-place forms give the member's own block no move
// (its counts block says 0 for it). reduce_scatterv is the reducing one:
// its counts (the same on every member) give block m of every source, which
// reduced is member m's destination; its counts block lists them as the
// blocks each member sends each peer, back to back from the start of its
// source (sdispls the prefix sums), and its own block as what it receives
// from every peer, at the start of its destination (coll/vector_counts.h
// checks that layout, which its plans read). It has no in-place form.
// None has a point-to-point schedule (CollectiveArgs holds one count).
#pragma once

#include <deputy/mover.h>
#include <deputy/status.h>

#include <cstddef>
#include <optional>
#include <string_view>

namespace deputy::coll {

enum class Collective : uint8_t {
    allreduce = 0,
    reduce_scatter,
    allgather,
    alltoall,
    bcast,
    barrier,
    alltoallv,
    reduce,
    gather,
    scatter,
    scan,
    exscan,
    allgatherv,
    gatherv,
    scatterv,
    reduce_scatterv,
};
inline constexpr int kCollectiveCount = 16;

// Which members' buffers a rooted collective uses (MPI's rules).
enum class Rooting : uint8_t {
    none,
    one_buffer,   // bcast: the root's data goes out of its buffer into the others'
    into_root,    // reduce, gather(v): every member's source, the root's destination only
    out_of_root,  // scatter(v): the root's source only, every member's destination
};

// The one table of collectives: what every layer that names one uses (the
// client's posts and staged copies, the wire, the agent's engine and its
// step between nodes, `deputy bench coll`). In blocks of n = count x
// element bytes, per member, with buffers as the C API passes them
// (include/deputy/coll.h): src and dst pointers, bcast's one buffer in both.
struct CollectiveInfo {
    Collective collective;
    const char *name;        // "allreduce"
    bool reduces;            // uses dtype arithmetic and op
    Rooting rooting;         // none, or which buffers the root names
    uint8_t source_blocks;   // 0, 1 (n) or kBlocksPerMember (P x n) bytes read at src
    uint8_t dest_blocks;     // likewise, bytes written at dst
    // nccl-tests' bus bandwidth factor: busbw = algbw x factor(P), and the
    // factor as a formula for table notes ("2(n-1)/n").
    struct BusFactor {
        double (*of)(int size);
        const char *formula;
    } bus_factor;
    // Counts per member and peer in a counts block (coll/vector_counts.h);
    // the blocks above are then those of equal counts.
    bool vector = false;
    // Has point-to-point schedules (coll/algorithms.h: `deputy bench coll
    // --sched`). The agents' plans run every collective; the vector ones
    // cannot have one (CollectiveArgs holds one count), and those added
    // with reduce and scan have none yet.
    bool scheduled = true;
};
inline constexpr uint8_t kBlocksPerMember = 255;  // "P blocks"

const CollectiveInfo &collective_info(Collective c);
const char *collective_name(Collective c);  // "allreduce", "reduce_scatter", ...
std::optional<Collective> collective_from_name(std::string_view name);
// A raw byte (from the wire) as a collective; nullopt when it names none.
std::optional<Collective> collective_from_byte(uint8_t value);

// Bytes member `rank` reads at src and writes at dst for `count` elements
// of `element_bytes` (bcast: the root reads, the others write its buffer;
// alltoallv: with equal counts — its real ranges come from its counts
// block, coll/vector_counts.h).
struct MemberBytes {
    uint64_t source = 0, destination = 0;
};
MemberBytes member_bytes(Collective c, uint64_t count, uint64_t element_bytes, uint32_t size,
                         uint32_t rank = 0, uint32_t root = 0);
// Whether [a, +alen) and [b, +blen) share a byte (empty ranges share none).
inline bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
    return alen && blen && a < b + blen && b < a + alen;
}

struct CollectiveArgs {
    Collective collective = Collective::allreduce;
    int rank = 0;  // this rank's index in the team, 0 <= rank < size
    int size = 1;  // team size P
    size_t count = 0;
    dp_dtype_t dtype = DP_UINT8;
    dp_op_t op = DP_SUM;  // the reducing collectives only
    int root = 0;         // rooted collectives only
    bool in_place = false;
    // Messages (and the reductions that follow them) are split into pieces of
    // at most this many bytes, rounded down to whole elements (at least one),
    // so that a receiver can reduce or forward piece k while piece k+1 is on
    // the wire. 0: one piece per message.
    size_t chunk_bytes = 0;
};

// DP_OK, or DP_ERR_INVALID for a rank, size, root, dtype or op out of its
// domain, or DP_ERR_TOO_LARGE when a buffer size would overflow size_t.
dp_status_t check_args(const CollectiveArgs &args);

// Bytes of the source and destination buffers the schedule for `args` may
// touch (see the table above). Only meaningful for arguments check_args accepts.
size_t source_bytes(const CollectiveArgs &args);
size_t destination_bytes(const CollectiveArgs &args);

// Whether a collective reduces (and so uses dtype's arithmetic and op).
inline bool reduces(Collective c) { return collective_info(c).reduces; }
// Whether it has a root (which its members must agree on).
inline bool rooted(Collective c) { return collective_info(c).rooting != Rooting::none; }
// Whether the collective's counts come in a counts block.
inline bool is_vector(Collective c) { return collective_info(c).vector; }
// Whether it has point-to-point schedules (CollectiveInfo::scheduled).
inline bool has_schedule(Collective c) { return collective_info(c).scheduled; }
// Whether deputy offers an in-place form of the collective (MPI's
// MPI_IN_PLACE for alltoallv is not one of them).
// scan and exscan have none either: member r's result would overwrite an
// input that the results of the members after it read.
inline bool has_in_place(Collective c) {
    return c != Collective::bcast && c != Collective::barrier && c != Collective::alltoallv &&
           c != Collective::scan && c != Collective::exscan && c != Collective::reduce_scatterv;
}

}  // namespace deputy::coll
