// Work queues under concurrency, the suite the ThreadSanitizer run executes:
// the ring alone (MPSC, MPMC, SPSC) and the device (3 producers on a shared
// queue with 2 engines, a dedicated queue, DRAIN and blocking waits racing
// with engines). Every descriptor carries a unique tag; each test checks that
// every tag comes out exactly once, none lost, none duplicated.
#include <deputy/mover.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cpu_relax.h"
#include "mover/test_util.h"
#include "mover/work_queue.h"

namespace deputy::test {
namespace {

// 10^6 submits through the shared queue normally (issue #2); the other
// device tests use a fraction, they exercise other paths. ThreadSanitizer
// slows every access 5-15x, so its run uses 2 * 10^5 (>= 10^5), which still
// makes thousands of full-queue laps and retries per producer; the
// interleavings TSan checks are the same.
#if defined(__SANITIZE_THREAD__)
constexpr uint64_t kTotal = 200'000;
constexpr int kRounds = 10;
#else
constexpr uint64_t kTotal = 1'000'000;
constexpr int kRounds = 50;
#endif
constexpr int kProducers = 3;

// A formatted ring in 64-byte aligned memory, freed on scope exit.
struct Ring {
    explicit Ring(uint32_t size)
        : memory(std::aligned_alloc(64, (mover::WorkQueue::bytes_for(size) + 63) / 64 * 64)),
          queue(mover::WorkQueue::format(memory, size)) {}
    ~Ring() { std::free(memory); }
    void *memory;
    mover::WorkQueue queue;
};

uint64_t tag(int producer, uint64_t seq) {
    return (uint64_t(producer) << 40) | seq;
}

// A broken ring does not fail, it spins forever (a producer whose claimed
// slot is never freed). The watchdog turns such a hang into a prompt failure
// naming the test instead of a ctest timeout.
class Watchdog {
  public:
    Watchdog() {
        thread_ = std::thread([this] {
            std::unique_lock<std::mutex> lock(mutex_);
            if (!cv_.wait_for(lock, kLimit, [this] { return done_; })) {
                std::fprintf(stderr, "%s hung for %lld s: lost or duplicated descriptor?\n",
                             ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                             static_cast<long long>(kLimit.count()));
                std::abort();
            }
        });
    }
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        cv_.notify_one();
        thread_.join();
    }

  private:
#if defined(__SANITIZE_THREAD__)
    static constexpr std::chrono::seconds kLimit{600};
#else
    static constexpr std::chrono::seconds kLimit{120};
#endif
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

// Waiting for the other side: spin briefly (so two threads really do race on
// the ring's indices), then give the CPU away (this machine may have two).
void backoff(unsigned &spins) {
    if (++spins % 64 != 0) {
        cpu_relax();
    } else {
        std::this_thread::yield();
    }
}

// Pops until `total` descriptors came out (or `stop`), calling on_pop for each.
template <typename OnPop>
void consume(mover::WorkQueue &queue, std::atomic<uint64_t> &popped, uint64_t total, OnPop on_pop) {
    dp_desc_t desc;
    uint32_t pasid;
    uint64_t position;
    unsigned spins = 0;
    while (popped.load(std::memory_order_relaxed) < total) {
        if (queue.pop(
                &desc, &pasid, &position, [] {}, [] {})) {
            popped.fetch_add(1, std::memory_order_relaxed);
            on_pop(desc, pasid, position);
        } else {
            backoff(spins);
        }
    }
}

void produce_shared(mover::WorkQueue &queue, int producer, uint64_t count,
                    std::atomic<uint64_t> &full) {
    unsigned spins = 0;
    for (uint64_t seq = 0; seq < count; ++seq) {
        dp_desc_t d = make_desc(DP_OP_NOOP, 0, 0, 0, 0, 0, tag(producer, seq));
        while (!queue.push_shared(d, uint32_t(producer))) {
            full.fetch_add(1, std::memory_order_relaxed);
            backoff(spins);
        }
    }
}

TEST(RingConcurrency, SharedQueueProducersRaceEachOther) {
    Watchdog watchdog;
    // Producers only, into a ring with room for the whole round: nothing
    // waits, so the producers' claims on `tail` collide as often as the
    // machine allows. The ring is then drained and checked each round.
    constexpr uint32_t kRingSize = 1 << 18;  // 32 MiB: rounds long enough to overlap
    constexpr uint64_t kPerRound = kRingSize / kProducers;
    Ring ring(kRingSize);
    uint64_t rounds = 0;
    for (uint64_t done = 0; done < kTotal; done += kPerRound * kProducers, ++rounds) {
        std::atomic<int> ready{0};
        std::atomic<uint64_t> full{0};
        std::vector<std::thread> producers;
        for (int p = 0; p < kProducers; ++p) {
            producers.emplace_back([&, p] {
                // Start together: the race is the point.
                ready.fetch_add(1);
                while (ready.load() < kProducers) cpu_relax();
                for (uint64_t seq = 0; seq < kPerRound; ++seq) {
                    dp_desc_t d =
                        make_desc(DP_OP_NOOP, 0, 0, 0, 0, 0, tag(p, rounds * kPerRound + seq));
                    if (!ring.queue.push_shared(d, uint32_t(p))) {
                        full.fetch_add(1);  // cannot happen: the round fits
                        return;
                    }
                }
            });
        }
        for (auto &t : producers) t.join();
        ASSERT_EQ(full.load(), 0u) << "the ring had room for the whole round";
        std::vector<uint64_t> next(kProducers, rounds * kPerRound);
        uint64_t popped = 0, errors = 0;
        dp_desc_t d;
        uint32_t pasid;
        uint64_t pos;
        while (ring.queue.pop(
            &d, &pasid, &pos, [] {}, [] {})) {
            const int p = int(d.user >> 40);
            const uint64_t seq = d.user & ((uint64_t(1) << 40) - 1);
            if (p >= kProducers || pasid != uint32_t(p) || seq != next[p]) ++errors;
            if (p < kProducers) next[p] = seq + 1;
            ++popped;
        }
        ASSERT_EQ(errors, 0u) << "round " << rounds;
        ASSERT_EQ(popped, kPerRound * kProducers) << "round " << rounds;
        for (int p = 0; p < kProducers; ++p) ASSERT_EQ(next[p], (rounds + 1) * kPerRound);
        ASSERT_EQ(ring.queue.submitted(), (rounds + 1) * kPerRound * kProducers);
    }
}

TEST(RingConcurrency, SharedQueueManyProducersOneConsumer) {
    Watchdog watchdog;
    Ring ring(256);
    const uint64_t per_producer = kTotal / kProducers;
    const uint64_t total = per_producer * kProducers;
    std::atomic<uint64_t> popped{0}, full{0};
    // One consumer: positions come out in order, so each producer's own tags
    // must come out in the order it pushed them.
    std::vector<uint64_t> next(kProducers, 0);
    uint64_t errors = 0, last_position = 0;
    bool first = true;
    std::thread consumer([&] {
        consume(ring.queue, popped, total, [&](const dp_desc_t &d, uint32_t pasid, uint64_t pos) {
            const int p = int(d.user >> 40);
            const uint64_t seq = d.user & ((uint64_t(1) << 40) - 1);
            if (p >= kProducers || pasid != uint32_t(p) || seq != next[p]) ++errors;
            if (p < kProducers) next[p] = seq + 1;
            if (!first && pos != last_position + 1) ++errors;
            first = false;
            last_position = pos;
        });
    });
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p)
        producers.emplace_back([&, p] { produce_shared(ring.queue, p, per_producer, full); });
    for (auto &t : producers) t.join();
    consumer.join();
    EXPECT_EQ(errors, 0u);
    for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], per_producer) << "producer " << p;
    EXPECT_EQ(popped.load(), total);
    EXPECT_EQ(ring.queue.submitted(), total);
    // Nothing is left behind.
    dp_desc_t d;
    uint32_t pasid;
    uint64_t pos;
    EXPECT_FALSE(ring.queue.pop(
        &d, &pasid, &pos, [] {}, [] {}));
    EXPECT_FALSE(ring.queue.maybe_nonempty());
}

TEST(RingConcurrency, SharedQueueManyProducersTwoConsumers) {
    Watchdog watchdog;
    Ring ring(64);
    const uint64_t per_producer = kTotal / kProducers;
    const uint64_t total = per_producer * kProducers;
    std::atomic<uint64_t> popped{0}, full{0};
    std::vector<std::vector<uint64_t>> seen(2);
    std::vector<std::thread> consumers;
    for (int c = 0; c < 2; ++c) {
        consumers.emplace_back([&, c] {
            seen[c].reserve(total);
            consume(ring.queue, popped, total,
                    [&](const dp_desc_t &d, uint32_t, uint64_t) { seen[c].push_back(d.user); });
        });
    }
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p)
        producers.emplace_back([&, p] { produce_shared(ring.queue, p, per_producer, full); });
    for (auto &t : producers) t.join();
    for (auto &t : consumers) t.join();
    // Every tag exactly once across both consumers.
    std::vector<uint8_t> count(total, 0);
    uint64_t bad = 0;
    for (const auto &list : seen) {
        for (uint64_t user : list) {
            const uint64_t p = user >> 40, seq = user & ((uint64_t(1) << 40) - 1);
            if (p >= uint64_t(kProducers) || seq >= per_producer) {
                ++bad;
                continue;
            }
            ++count[p * per_producer + seq];
        }
    }
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(seen[0].size() + seen[1].size(), total);
    uint64_t lost = 0, duplicated = 0;
    for (uint8_t c : count) {
        lost += c == 0;
        duplicated += c > 1;
    }
    EXPECT_EQ(lost, 0u);
    EXPECT_EQ(duplicated, 0u);
}

TEST(RingConcurrency, DedicatedQueueSingleProducerInOrder) {
    Watchdog watchdog;
    Ring ring(32);
    std::atomic<uint64_t> popped{0};
    uint64_t expect = 0, errors = 0;
    std::thread consumer([&] {
        consume(ring.queue, popped, kTotal, [&](const dp_desc_t &d, uint32_t, uint64_t pos) {
            if (d.user != expect || pos != expect) ++errors;
            ++expect;
        });
    });
    for (uint64_t i = 0; i < kTotal; ++i) {
        dp_desc_t d = make_desc(DP_OP_NOOP, 0, 0, 0, 0, 0, i);
        while (!ring.queue.push_dedicated(d, 0)) std::this_thread::yield();
    }
    consumer.join();
    EXPECT_EQ(errors, 0u);
    EXPECT_EQ(expect, kTotal);
}

// ---- through the device ------------------------------------------------------

// Every descriptor i adds 1 to counts[i] (REDUCE uint64 sum, ACCUMULATE) and
// writes records[i]: a lost descriptor leaves counts[i] == 0 and the record
// pending, a duplicated one leaves counts[i] == 2.
struct Hammer {
    explicit Hammer(uint64_t n) : counts(n, 0), records(n) {
        std::memset(records.data(), 0, n * sizeof(dp_completion_t));
    }

    dp_desc_t descriptor(uint64_t i) {
        dp_desc_t d =
            make_reduce(DP_UINT64, DP_SUM, addr(&counts[i]), addr(&one), 0, sizeof(uint64_t), true);
        d.flags |= DP_FLAG_COMPLETION;
        d.completion = addr(&records[i]);
        d.user = i;
        return d;
    }

    // Producer p submits every i with i % producers == p; returns its retries.
    uint64_t produce(dp_mover_t *mover, uint32_t wq, int p, int producers) {
        uint64_t retries = 0;
        for (uint64_t i = uint64_t(p); i < counts.size(); i += uint64_t(producers)) {
            dp_desc_t d = descriptor(i);
            for (;;) {
                dp_status_t s = dp_mover_submit(mover, wq, &d);
                if (s == DP_OK) break;
                if (s != DP_ERR_RETRY) {
                    ADD_FAILURE() << "submit returned " << dp_status_name(s);
                    return retries;
                }
                ++retries;
                std::this_thread::yield();
            }
        }
        return retries;
    }

    // Waits for every record and checks every tag came out exactly once.
    void check(dp_mover_t *mover) {
        uint64_t pending = 0, bad_record = 0, lost = 0, duplicated = 0;
        for (uint64_t i = 0; i < counts.size(); ++i) {
            if (dp_mover_wait(mover, &records[i], DP_WAIT_YIELD, kWaitBoundNs) != DP_OK) {
                ++pending;
                continue;
            }
            Record r = read_record(records[i]);
            if (r.status != DP_COMP_SUCCESS || r.user != i || r.bytes != 8 || r.result != 0 ||
                r.value != 0)
                ++bad_record;
            lost += counts[i] == 0;
            duplicated += counts[i] > 1;
        }
        EXPECT_EQ(pending, 0u);
        EXPECT_EQ(bad_record, 0u);
        EXPECT_EQ(lost, 0u);
        EXPECT_EQ(duplicated, 0u);
    }

    const uint64_t one = 1;
    std::vector<uint64_t> counts;
    std::vector<dp_completion_t> records;
};

void hammer(dp_mover_t *mover, uint32_t wq, int producers, uint64_t n) {
    Hammer h(n);
    std::atomic<uint64_t> retries{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p)
        threads.emplace_back([&, p] { retries += h.produce(mover, wq, p, producers); });
    for (auto &t : threads) t.join();
    h.check(mover);
    dp_mover_stats_t stats;
    stats.size = sizeof(stats);
    // An engine counts a descriptor just after publishing its record
    // (mover.h), its completion and then its bytes, each a counter of its
    // own: the last counts may trail the records h.check saw, and the bytes
    // the completions (799992 of 800000 once, with completed already at n).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
        ASSERT_EQ(dp_mover_get_stats(mover, &stats), DP_OK);
    } while ((stats.completed < n || stats.bytes < 8 * n) &&
             std::chrono::steady_clock::now() < deadline);
    EXPECT_EQ(stats.submitted, n);
    EXPECT_EQ(stats.completed, n);
    EXPECT_EQ(stats.failed, 0u);
    EXPECT_EQ(stats.bytes, 8 * n);
    EXPECT_EQ(stats.retries, retries.load());
}

TEST(DeviceConcurrency, SharedQueueThreeProducersTwoEngines) {
    Watchdog watchdog;
    MoverPtr mover = open_mover(2, 1, DP_WQ_SHARED, 128);
    ASSERT_NE(mover, nullptr);
    hammer(mover.get(), 0, kProducers, kTotal);
}

TEST(DeviceConcurrency, SharedQueueThreeProducersOneEngineSmallQueue) {
    Watchdog watchdog;
    // A 4-slot queue is full most of the time: the retry path is the hot one.
    MoverPtr mover = open_mover(1, 1, DP_WQ_SHARED, 4);
    ASSERT_NE(mover, nullptr);
    hammer(mover.get(), 0, kProducers, kTotal / 20);
}

TEST(DeviceConcurrency, DedicatedQueueOneProducerOneEngine) {
    Watchdog watchdog;
    MoverPtr mover = open_mover(1, 1, DP_WQ_DEDICATED, 64);
    ASSERT_NE(mover, nullptr);
    hammer(mover.get(), 0, 1, kTotal / 10);
}

TEST(DeviceConcurrency, DedicatedQueueOneProducerTwoEngines) {
    Watchdog watchdog;
    MoverPtr mover = open_mover(2, 1, DP_WQ_DEDICATED, 64);
    ASSERT_NE(mover, nullptr);
    hammer(mover.get(), 0, 1, kTotal / 10);
}

TEST(DeviceConcurrency, OneProducerPerDedicatedQueueTwoEngines) {
    Watchdog watchdog;
    // Two dedicated queues in one group, each with its own producer thread.
    MoverPtr mover = open_mover(2, 2, DP_WQ_DEDICATED, 32);
    ASSERT_NE(mover, nullptr);
    const uint64_t n = kTotal / 20;
    Hammer a(n), b(n);
    std::thread ta([&] { a.produce(mover.get(), 0, 0, 1); });
    std::thread tb([&] { b.produce(mover.get(), 1, 0, 1); });
    ta.join();
    tb.join();
    a.check(mover.get());
    b.check(mover.get());
}

TEST(DeviceConcurrency, DrainWhileOtherProducersSubmit) {
    Watchdog watchdog;
    // Each producer submits a burst of copies then a DRAIN on the shared
    // queue; once its drain completes, its own earlier copies must be complete
    // and correct, whatever the other producer and the two engines are doing.
    MoverPtr mover = open_mover(2, 1, DP_WQ_SHARED, 64);
    ASSERT_NE(mover, nullptr);
    constexpr size_t kBurst = 16, kBytes = 16 * 1024;
    Guarded src(kBytes);
    src.fill_random(21);
    std::atomic<uint64_t> early{0}, wrong{0}, stuck{0};
    auto producer = [&](int p) {
        std::vector<std::unique_ptr<Guarded>> dsts;
        for (size_t i = 0; i < kBurst; ++i) dsts.push_back(std::make_unique<Guarded>(kBytes));
        std::vector<dp_completion_t> records(kBurst);
        dp_completion_t drain;
        for (int round = 0; round < kRounds; ++round) {
            std::memset(records.data(), 0, kBurst * sizeof(dp_completion_t));
            std::memset(&drain, 0, sizeof(drain));
            for (size_t i = 0; i < kBurst; ++i) {
                dsts[i]->fill_byte(uint8_t(round + p));
                dp_desc_t d =
                    make_desc(DP_OP_MEMMOVE, dsts[i]->address(), src.address(), kBytes, 0, 0, i);
                d.flags = DP_FLAG_COMPLETION;
                d.completion = addr(&records[i]);
                ASSERT_EQ(submit_retry(mover.get(), 0, d), DP_OK);
            }
            dp_desc_t d = make_desc(DP_OP_DRAIN, 0, 0, 0, 0, 0, 1000 + p);
            d.flags = DP_FLAG_COMPLETION;
            d.completion = addr(&drain);
            ASSERT_EQ(submit_retry(mover.get(), 0, d), DP_OK);
            if (dp_mover_wait(mover.get(), &drain, p == 0 ? DP_WAIT_BLOCK : DP_WAIT_YIELD,
                              kWaitBoundNs) != DP_OK) {
                ++stuck;
                return;
            }
            if (read_record(drain).status != DP_COMP_SUCCESS) ++wrong;
            for (size_t i = 0; i < kBurst; ++i) {
                if (!dp_mover_poll(&records[i])) {
                    ++early;  // the drain completed before this copy
                    continue;
                }
                if (read_record(records[i]).status != DP_COMP_SUCCESS ||
                    std::memcmp(dsts[i]->data(), src.data(), kBytes) != 0)
                    ++wrong;
            }
            // Records must stay valid until the engines are done with them.
            for (size_t i = 0; i < kBurst; ++i)
                ASSERT_EQ(dp_mover_wait(mover.get(), &records[i], DP_WAIT_YIELD, kWaitBoundNs),
                          DP_OK);
        }
    };
    std::thread t0(producer, 0), t1(producer, 1);
    t0.join();
    t1.join();
    EXPECT_EQ(stuck.load(), 0u);
    EXPECT_EQ(early.load(), 0u);
    EXPECT_EQ(wrong.load(), 0u);
}

TEST(DeviceConcurrency, BlockingWaitersRaceWithEngines) {
    Watchdog watchdog;
    // Waiters announce themselves in the record while the engine publishes:
    // every wake-up must arrive (a lost one would hit the bound and fail).
    MoverPtr mover = open_mover(2, 1, DP_WQ_SHARED, 32);
    ASSERT_NE(mover, nullptr);
#if defined(__SANITIZE_THREAD__)
    constexpr int kIterations = 300;
#else
    constexpr int kIterations = 2000;
#endif
    std::atomic<uint64_t> failures{0};
    auto worker = [&](int t) {
        Guarded src(4096), dst(4096);
        src.fill_random(uint64_t(t) + 50);
        for (int i = 0; i < kIterations; ++i) {
            dp_completion_t comp;
            std::memset(&comp, 0, sizeof(comp));
            dp_desc_t d = make_desc(DP_OP_MEMMOVE, dst.address(), src.address(),
                                    1 + size_t(i) % 4096, 0, 0, uint64_t(i));
            d.flags = DP_FLAG_COMPLETION;
            d.completion = addr(&comp);
            if (submit_retry(mover.get(), 0, d) != DP_OK ||
                dp_mover_wait(mover.get(), &comp, DP_WAIT_BLOCK, kWaitBoundNs) != DP_OK ||
                read_record(comp).status != DP_COMP_SUCCESS ||
                read_record(comp).user != uint64_t(i) ||
                std::memcmp(dst.data(), src.data(), 1 + size_t(i) % 4096) != 0) {
                ++failures;
                return;
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kProducers; ++t) threads.emplace_back(worker, t);
    for (auto &t : threads) t.join();
    EXPECT_EQ(failures.load(), 0u);
}

}  // namespace
}  // namespace deputy::test
