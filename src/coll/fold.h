// How power-of-two algorithms (recursive doubling, recursive halving) run on
// a team of any size.
//
// With p2 the largest power of two <= P and rem = P - p2, the first 2 * rem
// ranks pair up as (2i, 2i+1): the even rank hands its data to the odd one
// and sits out; the odd one takes part as "new rank" i. Ranks from 2 * rem on
// take part as new rank rank - rem. The p2 new ranks run the power-of-two
// algorithm, then each odd rank of a pair hands the result back to its even
// partner. The price is one extra full-size message on each side of a pair.
//
// New rank i stands for the ranks [first_covered(i), first_covered(i + 1)):
// two for i < rem, one after. These are contiguous, so a range of new ranks
// is a contiguous range of ranks too (recursive-doubling allgather relies on
// it to move whole windows of blocks in one message).
#pragma once

namespace deputy::coll {

struct Fold {
    Fold(int rank, int size) : rank(rank) {
        while (p2 * 2 <= size) p2 *= 2;
        rem = size - p2;
        if (rank < 2 * rem) {
            new_rank = rank % 2 == 0 ? -1 : rank / 2;
        } else {
            new_rank = rank - rem;
        }
    }

    bool sits_out() const { return new_rank < 0; }   // the even rank of a pair
    bool in_pair() const { return rank < 2 * rem; }  // either rank of a pair
    int pair_partner() const { return rank % 2 == 0 ? rank + 1 : rank - 1; }
    // The rank that takes part as new rank i.
    int member(int i) const { return i < rem ? 2 * i + 1 : i + rem; }
    // The first rank new rank i stands for; first_covered(p2) == P.
    int first_covered(int i) const { return i < rem ? 2 * i : i + rem; }

    int rank;
    int p2 = 1;
    int rem = 0;
    int new_rank = -1;  // -1 while sitting out
};

// floor(log2(x)) for x >= 1; ceil_log2(1) == 0.
inline int floor_log2(int x) {
    int l = 0;
    while ((2 << l) <= x) ++l;
    return l;
}
inline int ceil_log2(int x) {
    int l = 0;
    while ((1 << l) < x) ++l;
    return l;
}

}  // namespace deputy::coll
