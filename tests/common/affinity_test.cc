// CPU lists both ways, pinning a thread to a set, and what the scheduler
// says about a thread (the numbers `deputy info` shows for the engines).
#include "common/affinity.h"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/thread_sched.h"

namespace deputy {
namespace {

TEST(Affinity, FormatsCpuListsAsRanges) {
    EXPECT_EQ(affinity::format_cpu_list({}), "");
    EXPECT_EQ(affinity::format_cpu_list({3}), "3");
    EXPECT_EQ(affinity::format_cpu_list({5, 0, 1, 2, 7, 8, 2}), "0-2,5,7-8");
    std::vector<int> cpus;
    std::string error;
    ASSERT_EQ(affinity::parse_cpu_list(affinity::format_cpu_list({0, 2, 3, 4, 9}), &cpus, &error),
              DP_OK);
    EXPECT_EQ(cpus, (std::vector<int>{0, 2, 3, 4, 9}));
}

TEST(Affinity, PinsAThreadToASetAndReadsItBack) {
    std::thread([] {
        const std::vector<int> all = affinity::allowed_cpus(0);
        ASSERT_FALSE(all.empty());
        ASSERT_EQ(affinity::pin_current_thread_to({all.back()}), DP_OK);
        EXPECT_EQ(affinity::allowed_cpus(0), std::vector<int>{all.back()});
        EXPECT_EQ(affinity::allowed_cpus(current_tid()), std::vector<int>{all.back()});
        EXPECT_EQ(affinity::current_cpu(), all.back());
        // A thread started now inherits the set.
        std::thread([&] { EXPECT_EQ(affinity::allowed_cpus(0), std::vector<int>{all.back()}); })
            .join();
        EXPECT_EQ(affinity::pin_current_thread_to({100000}), DP_ERR_INVALID);
        EXPECT_EQ(affinity::pin_current_thread_to({}), DP_ERR_INVALID);
    }).join();
}

TEST(ThreadSched, ABusyThreadHasOnCpuTimeAndALastCpu) {
    std::thread([] {
        // 30 ms of the thread's own CPU time (not wall time: the machine
        // may be busy); schedstat may lag a scheduler tick behind.
        auto cpu_ns = [] {
            timespec t;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
            return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_nsec);
        };
        while (cpu_ns() < 30'000'000u) {
        }
        ThreadSched s;
        ASSERT_TRUE(read_thread_sched(getpid(), current_tid(), &s));
        EXPECT_GE(s.on_cpu_ns, 15'000'000u);
        EXPECT_GE(s.timeslices, 1u);
        EXPECT_EQ(s.allowed_cpus, affinity::allowed_cpus(0));
        EXPECT_NE(std::find(s.allowed_cpus.begin(), s.allowed_cpus.end(), s.last_cpu),
                  s.allowed_cpus.end());
    }).join();
    ThreadSched gone;
    EXPECT_FALSE(read_thread_sched(getpid(), 0x7ffffff0, &gone));
    EXPECT_TRUE(gone.allowed_cpus.empty());
    EXPECT_EQ(gone.last_cpu, -1);
}

}  // namespace
}  // namespace deputy
