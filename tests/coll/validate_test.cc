// check_schedule and check_races must reject each kind of broken schedule
// with a message that names the step, and accept well-formed ones.
#include "coll/validate.h"

#include <gtest/gtest.h>

#include "coll/schedule_builder.h"

namespace deputy::coll {
namespace {

// A hand-made schedule for rank 0 of 2 with 16-byte buffers.
struct Raw {
    Schedule s;
    Raw() {
        s.rank = 0;
        s.size = 2;
        s.buffer_bytes[0] = s.buffer_bytes[1] = s.buffer_bytes[2] = 16;
    }
    StepId add(Step step, std::vector<StepId> deps = {}) {
        step.first_dependency = static_cast<uint32_t>(s.dependency_list.size());
        step.dependency_count = static_cast<uint32_t>(deps.size());
        s.dependency_list.insert(s.dependency_list.end(), deps.begin(), deps.end());
        s.steps.push_back(step);
        return static_cast<StepId>(s.steps.size() - 1);
    }
    std::string problem() {
        std::string error;
        if (check_schedule(s, &error) != DP_OK) return error;
        if (check_races(s, &error) != DP_OK) return error;
        return "";
    }
};

Step send(int peer, Region src, uint32_t tag = 0) {
    Step s;
    s.kind = StepKind::send;
    s.peer = peer;
    s.tag = tag;
    s.src = src;
    return s;
}
Step recv(int peer, Region dst, uint32_t tag = 0) {
    Step s;
    s.kind = StepKind::recv;
    s.peer = peer;
    s.tag = tag;
    s.dst = dst;
    return s;
}
Step reduce(Region dst, Region a, Region b, dp_dtype_t dtype = DP_INT32) {
    Step s;
    s.kind = StepKind::reduce;
    s.dtype = dtype;
    s.dst = dst;
    s.src = a;
    s.src2 = b;
    return s;
}
Step copy(Region dst, Region src) {
    Step s;
    s.kind = StepKind::copy;
    s.dst = dst;
    s.src = src;
    return s;
}

TEST(ValidateTest, WellFormedPasses) {
    Raw r;
    const StepId got = r.add(recv(1, scratch_region(0, 8)));
    r.add(reduce(destination_region(0, 8), source_region(0, 8), scratch_region(0, 8)), {got});
    r.add(reduce(scratch_region(8, 8), scratch_region(8, 8), source_region(8, 8)));  // in place
    r.add(send(1, source_region(0, 16)));  // two readers of the source need no order
    EXPECT_EQ(r.problem(), "");
}

TEST(ValidateTest, RegionOutsideItsBuffer) {
    Raw r;
    r.add(send(1, source_region(8, 9)));
    EXPECT_NE(r.problem().find("outside its buffer"), std::string::npos) << r.problem();
}

TEST(ValidateTest, WritingTheSource) {
    Raw r;
    r.add(recv(1, source_region(0, 4)));
    EXPECT_NE(r.problem().find("source buffer"), std::string::npos) << r.problem();
}

TEST(ValidateTest, BadPeers) {
    Raw self;
    self.add(send(0, source_region(0, 4)));
    EXPECT_NE(self.problem().find("itself"), std::string::npos) << self.problem();
    Raw outside;
    outside.add(recv(2, scratch_region(0, 4)));
    EXPECT_NE(outside.problem().find("outside the team"), std::string::npos) << outside.problem();
}

TEST(ValidateTest, BadReduceOperands) {
    Raw lengths;
    lengths.add(reduce(scratch_region(0, 8), source_region(0, 8), source_region(8, 4)));
    EXPECT_NE(lengths.problem().find("different lengths"), std::string::npos);
    Raw partial;
    partial.add(reduce(scratch_region(0, 8), scratch_region(4, 8), source_region(0, 8)));
    EXPECT_NE(partial.problem().find("partly overlaps"), std::string::npos);
    Raw elements;
    elements.add(reduce(scratch_region(0, 6), source_region(0, 6), source_region(8, 6)));
    EXPECT_NE(elements.problem().find("whole number of elements"), std::string::npos);
    Raw dtype;
    dtype.add(
        reduce(scratch_region(0, 8), source_region(0, 8), source_region(8, 8), DP_DTYPE_COUNT));
    EXPECT_NE(dtype.problem().find("unknown dtype"), std::string::npos);
}

TEST(ValidateTest, BadCopies) {
    Raw overlap;
    overlap.add(copy(scratch_region(0, 8), scratch_region(4, 8)));
    EXPECT_NE(overlap.problem().find("overlap"), std::string::npos);
    Raw lengths;
    lengths.add(copy(scratch_region(0, 8), source_region(0, 4)));
    EXPECT_NE(lengths.problem().find("lengths differ"), std::string::npos);
}

TEST(ValidateTest, DependencyOnALaterStep) {
    Raw r;
    r.add(send(1, source_region(0, 4)), {1});
    r.add(send(1, source_region(4, 4), 1));
    EXPECT_NE(r.problem().find("not earlier"), std::string::npos) << r.problem();
}

TEST(ValidateTest, RepeatedTagsMustBeOrdered) {
    Raw unordered;
    unordered.add(send(1, source_region(0, 4), 7));
    unordered.add(send(1, source_region(4, 4), 7));
    EXPECT_NE(unordered.problem().find("same peer and tag"), std::string::npos);
    Raw ordered;
    const StepId first = ordered.add(send(1, source_region(0, 4), 7));
    ordered.add(send(1, source_region(4, 4), 7), {first});
    ordered.add(recv(1, scratch_region(0, 4), 7));  // the other direction is another channel
    EXPECT_EQ(ordered.problem(), "");
}

TEST(ValidateTest, UnorderedConflictsAreRaces) {
    Raw waw;
    waw.add(recv(1, destination_region(0, 8)));
    waw.add(copy(destination_region(4, 8), source_region(0, 8)));
    EXPECT_NE(waw.problem().find("race"), std::string::npos) << waw.problem();

    Raw war;  // overwriting what a send may still be reading
    war.add(send(1, destination_region(0, 8)));
    war.add(recv(1, destination_region(0, 4)));
    EXPECT_NE(war.problem().find("race"), std::string::npos) << war.problem();

    Raw transitive;  // ordered through a third step: fine
    const StepId a = transitive.add(send(1, destination_region(0, 8)));
    const StepId b = transitive.add(recv(1, scratch_region(0, 4)), {a});
    transitive.add(recv(1, destination_region(0, 4), 1), {b});
    EXPECT_EQ(transitive.problem(), "");
}

TEST(ValidateTest, BuilderOutputHasNoRaces) {
    // The builder's derived dependencies on a tangle of overlapping accesses.
    CollectiveArgs args;
    args.collective = Collective::allreduce;
    args.size = 3;
    args.count = 16;
    args.dtype = DP_INT32;
    args.chunk_bytes = 12;
    ScheduleBuilder b(args, "tangle");
    b.need_scratch(64);
    b.recv_pieces(1, scratch_region(0, 64));
    b.send_pieces(2, scratch_region(8, 40));
    b.recv_reduce_pieces(2, destination_region(0, 32), source_region(0, 32),
                         scratch_region(16, 32));
    b.copy_pieces(scratch_region(0, 16), destination_region(16, 16));
    b.send_pieces(1, scratch_region(0, 64));
    const Schedule s = b.finish();
    std::string error;
    EXPECT_EQ(check_schedule(s, &error), DP_OK) << error;
    EXPECT_EQ(check_races(s, &error), DP_OK) << error;
}

}  // namespace
}  // namespace deputy::coll
