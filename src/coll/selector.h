// Choosing an algorithm (and its chunk size) for a collective call.
//
// The rules, with n the bytes of the collective's `count` (see
// collective.h) and P the team size; every threshold is a tunable below,
// settable by name (set_tunable) from the agent's configuration:
//
//   allreduce       n < allreduce_small_bytes                  recursive_doubling
//                   n >= allreduce_ring_bytes, P not 2^k        ring
//                   otherwise                                  rabenseifner
//   reduce_scatter                                             ring
//   allgather       P * n < allgather_small_bytes              recursive_doubling
//                   otherwise                                  ring
//   alltoall        n <= alltoall_bruck_bytes and
//                   P >= alltoall_bruck_min_team               bruck
//                   otherwise                                  pairwise
//   bcast           n >= bcast_chain_bytes and P >= 3          chain
//                   otherwise                                  binomial
//   barrier                                                    dissemination
//   alltoallv       none (its counts differ per peer: no schedule)
//
// Why (docs/algorithms.md has the alpha-beta costs): small messages are
// latency-bound, so the log2 P-round algorithms win; large ones are
// bandwidth-bound, where Rabenseifner and the ring both move 2 (P-1)/P n,
// Rabenseifner in fewer rounds but, off powers of two, with a fold that costs
// n more, which the ring does not pay. The defaults are the classic MPICH
// crossovers scaled for an agent doing memory copies (~5 GB/s, a few µs per
// step); `deputy bench coll` is the tool to re-measure them.
//
// An override by name ("allreduce=ring") bypasses the rules for one
// collective. Pipelining algorithms get chunk_bytes as their piece size.
#pragma once

#include <deputy/status.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "coll/algorithms.h"
#include "coll/collective.h"

namespace deputy::coll {

struct SelectorTunables {
    size_t allreduce_small_bytes = 16 * 1024;
    size_t allreduce_ring_bytes = 1024 * 1024;
    size_t allgather_small_bytes = 64 * 1024;
    size_t alltoall_bruck_bytes = 256;
    size_t alltoall_bruck_min_team = 8;
    size_t bcast_chain_bytes = 256 * 1024;
    // Piece size of pipelined messages; 0 disables pipelining.
    size_t chunk_bytes = 128 * 1024;
};

struct SelectorConfig {
    SelectorTunables tunables;
    // Per collective: the forced algorithm, or nullptr to follow the rules.
    const Algorithm *forced[kCollectiveCount] = {};
};

struct Selection {
    const Algorithm *algorithm = nullptr;
    size_t chunk_bytes = 0;  // to put in CollectiveArgs::chunk_bytes
};

// The algorithm for `args` (whose chunk_bytes is ignored). Never fails for
// arguments check_args() accepts, except that a collective without
// schedules (alltoallv) gets algorithm == nullptr.
Selection select_algorithm(const CollectiveArgs &args, const SelectorConfig &config);

// Overrides from text: "allreduce=ring,bcast=chain"; "auto" as the algorithm
// restores the rules. Algorithms by short or full name. On DP_ERR_INVALID
// config is unchanged and *error (if non-null) names the bad item.
dp_status_t set_overrides(SelectorConfig &config, std::string_view spec, std::string *error);

// A tunable by its field name above ("allreduce_small_bytes", ...).
dp_status_t set_tunable(SelectorTunables &tunables, std::string_view name, size_t value);

}  // namespace deputy::coll
