// The dependency tracker is what makes builders correct by construction, so
// its three hazards, partial overlaps and independence are pinned down here.
#include "coll/dependency_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace deputy::coll {
namespace {

// Steps added one by one; returns each step's sorted, unique dependencies.
class Tracked {
  public:
    std::vector<StepId> add(std::vector<Region> reads, std::vector<Region> writes) {
        std::vector<StepId> deps;
        tracker_.access(next_++, reads, writes, deps);
        std::sort(deps.begin(), deps.end());
        deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
        return deps;
    }

  private:
    DependencyTracker tracker_;
    StepId next_ = 0;
};

using Ids = std::vector<StepId>;

TEST(DependencyTrackerTest, ReadAfterWriteWaitsForTheLastWriter) {
    Tracked t;
    EXPECT_EQ(t.add({}, {scratch_region(0, 16)}), Ids{});   // 0 writes
    EXPECT_EQ(t.add({}, {scratch_region(0, 16)}), Ids{0});  // 1 rewrites (WAW)
    EXPECT_EQ(t.add({scratch_region(4, 4)}, {}), Ids{1});   // 2 reads: the last writer only
}

TEST(DependencyTrackerTest, WriteAfterReadWaitsForEveryReaderSinceTheWrite) {
    Tracked t;
    t.add({}, {destination_region(0, 8)});                             // 0
    t.add({destination_region(0, 4)}, {});                             // 1
    t.add({destination_region(4, 4)}, {});                             // 2
    t.add({destination_region(6, 2)}, {});                             // 3
    EXPECT_EQ(t.add({}, {destination_region(2, 4)}), (Ids{0, 1, 2}));  // 4: 3 is disjoint
    EXPECT_EQ(t.add({destination_region(0, 8)}, {}), (Ids{0, 4}));     // 5: writers of each byte
}

TEST(DependencyTrackerTest, DisjointRangesAndBuffersStayIndependent) {
    Tracked t;
    t.add({}, {scratch_region(0, 8)});
    EXPECT_EQ(t.add({}, {scratch_region(8, 8)}), Ids{});
    EXPECT_EQ(t.add({}, {destination_region(0, 8)}), Ids{});
    EXPECT_EQ(t.add({source_region(0, 8)}, {}), Ids{});
    EXPECT_EQ(t.add({scratch_region(4, 8)}, {}), (Ids{0, 1}));
}

TEST(DependencyTrackerTest, InPlaceUpdateDoesNotWaitForItself) {
    Tracked t;
    t.add({}, {scratch_region(0, 8)});  // 0
    EXPECT_EQ(t.add({scratch_region(0, 8), source_region(0, 8)}, {scratch_region(0, 8)}),
              Ids{0});                                     // 1
    EXPECT_EQ(t.add({}, {scratch_region(0, 8)}), Ids{1});  // its read is covered by its write
}

TEST(DependencyTrackerTest, EmptyRegionsTouchNothing) {
    Tracked t;
    t.add({}, {scratch_region(0, 8)});
    EXPECT_EQ(t.add({scratch_region(0, 0)}, {scratch_region(4, 0)}), Ids{});
}

TEST(DependencyTrackerTest, ManySplitsKeepTheirHistory) {
    Tracked t;
    for (StepId i = 0; i < 64; ++i) t.add({}, {scratch_region(i, 1)});
    EXPECT_EQ(t.add({scratch_region(10, 3)}, {}), (Ids{10, 11, 12}));
    EXPECT_EQ(t.add({}, {scratch_region(0, 64)}).size(), 65u);  // 64 writers and the reader
}

}  // namespace
}  // namespace deputy::coll
