// Runs of a sequence: the maximal stretches in which each element follows
// the one before it (consecutive ranks, ranks on one node). Rank lists in
// messages to a person (common/rank_list.h) and in messages between agents
// (the joins and member maps of agent/mpi/mpi_membership.cc) are written
// as runs, so that a team of thousands placed in blocks takes a few.
#pragma once

#include <cstddef>
#include <vector>

namespace deputy {

// Calls fn(first, end) for each run [first, end) of `v` in order, where
// v[k] continues a run when follows(v[k - 1], v[k]); stops early when fn
// returns false.
template <typename T, typename Follows, typename Fn>
void for_each_run(const std::vector<T> &v, Follows follows, Fn fn) {
    for (size_t i = 0; i < v.size();) {
        size_t j = i + 1;
        while (j < v.size() && follows(v[j - 1], v[j])) ++j;
        if (!fn(i, j)) return;
        i = j;
    }
}

}  // namespace deputy
