// The address-space table under engines and an owner racing (run under
// TSan in CI): an engine that got a space from enter() always sees it
// alive until leave(), however the owner retires, releases and reuses the
// slot meanwhile; a stale PASID never reaches the slot's next space.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "mover/space_table.h"

namespace deputy::mover {
namespace {

// A space that knows whether it was freed (the owner poisons it before
// deleting, after idle() said no engine is inside).
struct Probe final : public AddressSpace {
    explicit Probe(uint32_t generation) : generation(generation) {}
    void *translate(uint64_t, uint64_t, Access) const override { return nullptr; }
    std::atomic<bool> alive{true};
    uint32_t generation;
};

TEST(SpaceTableConcurrency, EnteredSpacesStayAliveAndStalePasidsAreDropped) {
    SpaceTable table;
    std::unique_ptr<Probe> current = std::make_unique<Probe>(0);
    uint32_t pasid = 0;
    ASSERT_EQ(table.add(current.get(), &pasid), DP_OK);
    std::atomic<uint32_t> published{pasid};
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> entered{0}, dead_seen{0}, wrong_generation{0};

    std::vector<std::thread> engines;
    for (int e = 0; e < 3; ++e)
        engines.emplace_back([&] {
            while (!stop.load(std::memory_order_relaxed)) {
                const uint32_t p = published.load(std::memory_order_acquire);
                const AddressSpace *space = table.enter(p);
                if (!space) continue;
                const auto *probe = static_cast<const Probe *>(space);
                if (!probe->alive.load(std::memory_order_acquire)) ++dead_seen;
                if (probe->generation != p >> SpaceTable::kSlotBits) ++wrong_generation;
                ++entered;
                table.leave(p);
            }
        });

    // The owner: retire, wait for idle, free, add the next space (often in
    // the same slot, with the next generation).
    // Until the engines got in often enough (they may start late under a
    // sanitizer on a loaded machine), and at least 2000 rounds.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int round = 0;
         round < 2000 || (entered.load() < 2000 && std::chrono::steady_clock::now() < deadline);
         ++round) {
        const uint32_t old = published.load();
        table.retire(old);
        while (!table.idle(old)) std::this_thread::yield();
        current->alive.store(false, std::memory_order_release);
        table.release(old);
        current = std::make_unique<Probe>(((old >> SpaceTable::kSlotBits) + 1) &
                                          (UINT32_MAX >> SpaceTable::kSlotBits));
        uint32_t next = 0;
        ASSERT_EQ(table.add(current.get(), &next), DP_OK);
        ASSERT_NE(next, old);
        published.store(next, std::memory_order_release);
    }
    stop = true;
    for (auto &t : engines) t.join();
    EXPECT_GE(entered.load(), 2000u);
    EXPECT_EQ(dead_seen.load(), 0u);
    EXPECT_EQ(wrong_generation.load(), 0u);
}

TEST(SpaceTableConcurrency, ARetiredPasidIsRefusedAndItsSlotReusedUnderANewOne) {
    SpaceTable table;
    Probe a(0), b(1);
    uint32_t pa = 0, pb = 0;
    ASSERT_EQ(table.add(&a, &pa), DP_OK);
    table.retire(pa);
    EXPECT_EQ(table.enter(pa), nullptr);
    EXPECT_TRUE(table.idle(pa));
    table.release(pa);
    ASSERT_EQ(table.add(&b, &pb), DP_OK);
    EXPECT_EQ(pb & (SpaceTable::kSlots - 1), pa & (SpaceTable::kSlots - 1));  // same slot
    EXPECT_NE(pb, pa);                                                        // new generation
    EXPECT_EQ(table.enter(pa), nullptr);  // the old id still finds nothing
    EXPECT_EQ(table.enter(pb), &b);
    EXPECT_FALSE(table.idle(pb));
    table.leave(pb);
    EXPECT_TRUE(table.idle(pb));
    // A slot in use or retiring is not handed out again.
    table.retire(pb);
    uint32_t pc = 0;
    Probe c(0);
    ASSERT_EQ(table.add(&c, &pc), DP_OK);
    EXPECT_NE(pc & (SpaceTable::kSlots - 1), pb & (SpaceTable::kSlots - 1));
}

}  // namespace
}  // namespace deputy::mover
