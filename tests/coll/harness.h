// One collective on a simulated team, checked end to end: build every
// rank's schedule, check each on its own (validate.h), run them all in the
// memory executor, then compare every destination bit for bit with the
// reference, check that no source changed, and that what each rank sent
// matches docs/algorithms.md (expected_traffic.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "coll/reducer.h"
#include "coll/validate.h"
#include "expected_traffic.h"
#include "memory_executor.h"
#include "reference.h"

namespace deputy::test {

struct Case {
    const coll::Algorithm *algorithm = nullptr;
    int size = 1;
    size_t count = 0;
    dp_dtype_t dtype = DP_INT32;
    dp_op_t op = DP_SUM;
    bool in_place = false;
    size_t chunk_bytes = 0;
    int root = 0;
    uint64_t seed = 1;

    std::string text() const {
        return fmt::format("{} P={} count={} {} {}{} chunk={} root={} seed={}",
                           algorithm->full_name, size, count, dp_dtype_name(dtype), dp_op_name(op),
                           in_place ? " in-place" : "", chunk_bytes, root, seed);
    }

    coll::CollectiveArgs args(int rank) const {
        coll::CollectiveArgs a;
        a.collective = algorithm->collective;
        a.rank = rank;
        a.size = size;
        a.count = count;
        a.dtype = dtype;
        a.op = op;
        a.root = root;
        a.in_place = in_place;
        a.chunk_bytes = chunk_bytes;
        return a;
    }
};

// Every rank's schedule for `c`, each checked alone.
inline testing::AssertionResult build_team(const Case &c, std::vector<coll::Schedule> &out) {
    out.assign(static_cast<size_t>(c.size), {});
    for (int r = 0; r < c.size; ++r) {
        coll::Schedule &s = out[static_cast<size_t>(r)];
        const dp_status_t status = coll::build_schedule(*c.algorithm, c.args(r), &s);
        if (status != DP_OK) {
            return testing::AssertionFailure() << c.text() << ": build: " << dp_status_name(status);
        }
        std::string error;
        if (coll::check_schedule(s, &error) != DP_OK || coll::check_races(s, &error) != DP_OK) {
            return testing::AssertionFailure() << c.text() << " rank " << r << ": " << error;
        }
    }
    return testing::AssertionSuccess();
}

// Where two byte strings first differ, as a readable message.
inline std::string first_difference(const Bytes &want, const unsigned char *got, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (want[i] != got[i]) {
            return fmt::format("byte {} of {}: want {:#04x}, got {:#04x}", i, n, want[i], got[i]);
        }
    }
    return {};
}

inline testing::AssertionResult run_case(const Case &c) {
    std::vector<coll::Schedule> team;
    if (auto built = build_team(c, team); !built) return built;
    const coll::CollectiveArgs shape = c.args(0);
    const bool reduces = coll::reduces(shape.collective);
    const bool in_place = c.in_place && coll::has_in_place(shape.collective);
    const size_t n = c.count * dp_dtype_size(c.dtype);

    std::mt19937_64 random(c.seed);
    std::vector<Bytes> inputs;
    for (int r = 0; r < c.size; ++r) {
        const size_t bytes = input_bytes(shape);
        inputs.push_back(reduces ? exact_data(c.dtype, c.op, bytes / dp_dtype_size(c.dtype), random)
                                 : random_bytes(bytes, random));
    }
    const std::vector<Bytes> expected = expected_outputs(shape, inputs);

    const coll::KernelReducer reducer;
    std::vector<coll::Schedule> schedules = team;
    MemoryExecutor executor(std::move(schedules), reducer);
    for (int r = 0; r < c.size; ++r) {
        Bytes &src = executor.buffer(r, coll::BufferId::source);
        Bytes &dst = executor.buffer(r, coll::BufferId::destination);
        std::fill(dst.begin(), dst.end(), 0xCD);  // output that was never written shows
        const Bytes &in = inputs[static_cast<size_t>(r)];
        if (shape.collective == coll::Collective::bcast) {
            if (r == c.root) std::copy(in.begin(), in.end(), dst.begin());
        } else if (!in_place) {
            std::copy(in.begin(), in.end(), src.begin());
        } else if (shape.collective == coll::Collective::allgather) {
            std::copy(in.begin(), in.end(),
                      dst.begin() + static_cast<long>(static_cast<size_t>(r) * n));
        } else {
            std::copy(in.begin(), in.end(), dst.begin());
        }
    }

    const Execution run = executor.run(c.seed);
    if (!run.ok) return testing::AssertionFailure() << c.text() << ": " << run.error;

    for (int r = 0; r < c.size; ++r) {
        const auto ru = static_cast<size_t>(r);
        const Bytes &dst = executor.buffer(r, coll::BufferId::destination);
        const Bytes &want = expected[ru];
        if (dst.size() < want.size()) {
            return testing::AssertionFailure() << c.text() << " rank " << r << ": destination "
                                               << dst.size() << " bytes, want " << want.size();
        }
        if (auto diff = first_difference(want, dst.data(), want.size()); !diff.empty()) {
            return testing::AssertionFailure() << c.text() << " rank " << r << ": " << diff;
        }
        if (!in_place && shape.collective != coll::Collective::bcast &&
            executor.buffer(r, coll::BufferId::source) != inputs[ru]) {
            return testing::AssertionFailure() << c.text() << " rank " << r << ": source changed";
        }

        const coll::CollectiveArgs a = c.args(r);
        const auto sizes = expected_message_sizes(c.algorithm->full_name, a);
        size_t bytes = 0;
        for (size_t s : sizes) bytes += s;
        const size_t messages =
            expected_messages(c.algorithm->full_name, c.algorithm->pipelines, a);
        const coll::Schedule &s = team[ru];
        if (s.bytes_sent() != bytes || run.bytes_sent[ru] != bytes ||
            s.messages_sent() != messages || run.messages_sent[ru] != messages) {
            return testing::AssertionFailure()
                   << c.text() << " rank " << r << ": sent " << run.bytes_sent[ru] << " bytes in "
                   << run.messages_sent[ru] << " messages (schedule: " << s.bytes_sent() << " in "
                   << s.messages_sent() << "), docs say " << bytes << " in " << messages;
        }
        if (shape.collective == coll::Collective::barrier &&
            run.heard_from[ru] != (uint64_t{1} << c.size) - 1) {
            return testing::AssertionFailure()
                   << c.text() << " rank " << r << " may leave having heard only from "
                   << fmt::format("{:#x}", run.heard_from[ru]);
        }
    }
    return testing::AssertionSuccess();
}

}  // namespace deputy::test
