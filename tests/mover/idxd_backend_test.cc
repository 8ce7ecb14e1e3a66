// The mover's idxd backend, short of a DSA device (this machine has none):
// the descriptor layout against the specification, then every opcode run
// through the stand-in device's portal, bit-exact against the software
// kernels, with page faults, ENQCMD refusals, transfers longer than the
// device takes, and operations the device fails; then the device as the C
// API opens it from JSON.
#include <deputy/mover.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mover/device.h"
#include "mover/execute.h"
#include "mover/idxd/hw_queue.h"
#include "mover/reference.h"
#include "mover/test_util.h"

namespace deputy::mover::idxd {
namespace {

using test::addr;

TEST(IdxdAbiTest, OpcodeFlagsAndPasidSitWhereTheSpecificationPutsThem) {
    dsa_hw_desc d;
    std::memset(&d, 0, sizeof(d));
    d.opcode = DSA_OPCODE_COPY_CRC;
    d.flags = 0xABCDEF;
    d.pasid = 0xFEDCB;
    d.priv = 1;
    unsigned char bytes[64];
    std::memcpy(bytes, &d, sizeof(bytes));
    // Bytes 0-3: PASID in bits 19:0, U/S (privilege) in bit 31.
    EXPECT_EQ(bytes[0], 0xCB);
    EXPECT_EQ(bytes[1], 0xED);
    EXPECT_EQ(bytes[2], 0x0F);
    EXPECT_EQ(bytes[3], 0x80);
    // Bytes 4-6: the 24 flag bits; byte 7: the opcode.
    EXPECT_EQ(bytes[4], 0xEF);
    EXPECT_EQ(bytes[5], 0xCD);
    EXPECT_EQ(bytes[6], 0xAB);
    EXPECT_EQ(bytes[7], 0x11);
    // The flag bits the backend uses, by the specification's numbers.
    EXPECT_EQ(IDXD_OP_FLAG_FENCE, 1u << 0);
    EXPECT_EQ(IDXD_OP_FLAG_BOF, 1u << 1);
    EXPECT_EQ(IDXD_OP_FLAG_CRAV, 1u << 2);
    EXPECT_EQ(IDXD_OP_FLAG_RCR, 1u << 3);
    EXPECT_EQ(IDXD_OP_FLAG_CR, 1u << 7);
    EXPECT_EQ(IDXD_OP_FLAG_CC, 1u << 8);
    // Opcodes and statuses the backend relies on.
    EXPECT_EQ(DSA_OPCODE_MEMMOVE, 0x03);
    EXPECT_EQ(DSA_OPCODE_DUALCAST, 0x09);
    EXPECT_EQ(DSA_OPCODE_CRCGEN, 0x10);
    EXPECT_EQ(DSA_OPCODE_CFLUSH, 0x20);
    EXPECT_EQ(DSA_COMP_PAGE_FAULT_NOBOF, 0x03);
    EXPECT_EQ(DSA_COMP_BATCH_FAIL, 0x05);
    EXPECT_EQ(DSA_COMP_BAD_OPCODE, 0x10);
}

// One operation's buffers, filled the same way for both runs.
struct Buffers4 {
    static constexpr size_t kBytes = 64 * 1024;
    uint8_t *src, *src2, *dst, *dst2;
    explicit Buffers4(uint32_t seed) {
        for (uint8_t **p : {&src, &src2, &dst, &dst2}) {
            *p = static_cast<uint8_t *>(std::aligned_alloc(4096, kBytes));
        }
        std::mt19937 rng(seed);
        for (size_t i = 0; i < kBytes; ++i) {
            src[i] = uint8_t(rng());
            src2[i] = src[i];
            dst[i] = uint8_t(rng());
            dst2[i] = uint8_t(rng());
        }
    }
    ~Buffers4() {
        for (uint8_t *p : {src, src2, dst, dst2}) std::free(p);
    }
    Buffers4(const Buffers4 &) = delete;
    Buffers4 &operator=(const Buffers4 &) = delete;
};

struct Case {
    std::string name;
    std::function<dp_desc_t(Buffers4 &)> make;
    bool offloaded;  // the device runs it (else the CPU does)
};

std::vector<Case> every_opcode() {
    std::vector<Case> cases;
    auto desc = [](uint8_t op, uint64_t size) {
        dp_desc_t d;
        std::memset(&d, 0, sizeof(d));
        d.opcode = op;
        d.size = size;
        return d;
    };
    cases.push_back({"memmove", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_MEMMOVE, 40000);
                         d.src = addr(b.src + 3);
                         d.dst = addr(b.dst + 5);
                         return d;
                     }, true});
    cases.push_back({"memmove_overlapping", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_MEMMOVE, 30000);
                         d.src = addr(b.dst);
                         d.dst = addr(b.dst + 100);
                         return d;
                     }, false});
    cases.push_back({"fill", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_FILL, 9999);
                         d.src2 = 0x1122334455667788ull;
                         d.dst = addr(b.dst + 1);
                         return d;
                     }, true});
    cases.push_back({"compare_equal", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_COMPARE, 50000);
                         d.src = addr(b.src);
                         d.src2 = addr(b.src2);
                         return d;
                     }, true});
    cases.push_back({"compare_differ", [=](Buffers4 &b) {
                         b.src2[37777] ^= 0x40;
                         dp_desc_t d = desc(DP_OP_COMPARE, 50000);
                         d.src = addr(b.src);
                         d.src2 = addr(b.src2);
                         return d;
                     }, true});
    cases.push_back({"compare_pattern_equal", [=](Buffers4 &b) {
                         for (size_t i = 0; i < 20000; ++i) b.src[i] = uint8_t(0x5A + i % 8);
                         dp_desc_t d = desc(DP_OP_COMPARE_PATTERN, 20000);
                         d.src = addr(b.src);
                         d.src2 = 0x6160'5F5E'5D5C'5B5Aull;
                         return d;
                     }, true});
    cases.push_back({"compare_pattern_differ", [=](Buffers4 &b) {
                         for (size_t i = 0; i < 20000; ++i) b.src[i] = uint8_t(0x5A + i % 8);
                         b.src[12345] = 0;
                         dp_desc_t d = desc(DP_OP_COMPARE_PATTERN, 20000);
                         d.src = addr(b.src);
                         d.src2 = 0x6160'5F5E'5D5C'5B5Aull;
                         return d;
                     }, true});
    for (int differences : {0, 7, 900}) {
        cases.push_back({"create_delta_" + std::to_string(differences), [=](Buffers4 &b) {
                             for (int i = 0; i < differences; ++i) b.src2[i * 16] ^= 0xFF;
                             dp_desc_t d = desc(DP_OP_CREATE_DELTA, 16384);
                             d.src = addr(b.src);
                             d.src2 = addr(b.src2);
                             d.dst = addr(b.dst);
                             d.aux = 500 * DP_DELTA_ENTRY_SIZE;  // 900 differences overflow it
                             return d;
                         }, true});
    }
    cases.push_back({"apply_delta", [=](Buffers4 &b) {
                         // Entries {granule, 8 bytes}: granules 0, 3 and 511.
                         uint8_t *record = b.src;
                         const uint16_t granules[] = {0, 3, 511};
                         for (int k = 0; k < 3; ++k) std::memcpy(record + k * 10, &granules[k], 2);
                         dp_desc_t d = desc(DP_OP_APPLY_DELTA, 4096);
                         d.src = addr(record);
                         d.dst = addr(b.dst);
                         d.aux = 30;
                         return d;
                     }, true});
    cases.push_back({"apply_delta_granule_outside", [=](Buffers4 &b) {
                         uint16_t granule = 600;  // dst has 512 granules
                         std::memcpy(b.src, &granule, 2);
                         dp_desc_t d = desc(DP_OP_APPLY_DELTA, 4096);
                         d.src = addr(b.src);
                         d.dst = addr(b.dst);
                         d.aux = 10;
                         return d;
                     }, true});
    cases.push_back({"dualcast", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_DUALCAST, 12000);
                         d.src = addr(b.src + 8);
                         d.dst = addr(b.dst + 64);
                         d.src2 = addr(b.dst2 + 64);  // same offset in its page
                         return d;
                     }, true});
    cases.push_back({"dualcast_page_offsets_differ", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_DUALCAST, 12000);
                         d.src = addr(b.src);
                         d.dst = addr(b.dst);
                         d.src2 = addr(b.dst2 + 8);
                         return d;
                     }, false});
    cases.push_back({"crc32c", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_CRC32C, 45678);
                         d.src = addr(b.src + 1);
                         d.src2 = 0x1234;
                         return d;
                     }, true});
    cases.push_back({"copy_crc32c", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_COPY_CRC32C, 45678);
                         d.src = addr(b.src);
                         d.dst = addr(b.dst + 7);
                         d.src2 = 0xFFFFFFFF;
                         return d;
                     }, true});
    // DIF: sources reaching past 8 KiB (the fault test's page), tuples
    // made by the test's reference.
    cases.push_back({"dif_insert", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_DIF_INSERT, 8 * 4096);
                         d.src = addr(b.src);
                         d.dst = addr(b.dst + 64);
                         d.op_flags = DP_DIF_BLOCK_4096 | DP_DIF_INVERT_CRC_SEED;
                         d.redop = DP_DIF_DST_APP_TAG_INCREMENT;
                         d.aux = DP_DIF_TAGS(1000, 0, 7);
                         return d;
                     }, true});
    for (bool damaged : {false, true}) {
        cases.push_back({damaged ? "dif_check_error" : "dif_check", [=](Buffers4 &b) {
                             test::ref_protect(b.src, 512, 20, 5, 6, 0);
                             if (damaged) b.src[15 * 520 + 3] ^= 1;
                             dp_desc_t d = desc(DP_OP_DIF_CHECK, 20 * 520);
                             d.src = addr(b.src);
                             d.src2 = DP_DIF_TAGS(5, 0, 6);
                             return d;
                         }, true});
    }
    cases.push_back({"dif_strip", [=](Buffers4 &b) {
                         test::ref_protect(b.src, 4096, 3, 9, 9, DP_DIF_INVERT_CRC_RESULT);
                         dp_desc_t d = desc(DP_OP_DIF_STRIP, 3 * 4104);
                         d.op_flags = DP_DIF_BLOCK_4096 | DP_DIF_INVERT_CRC_RESULT;
                         d.src = addr(b.src);
                         d.dst = addr(b.dst + 8);
                         d.src2 = DP_DIF_TAGS(9, 0, 9);
                         return d;
                     }, true});
    cases.push_back({"dif_update", [=](Buffers4 &b) {
                         test::ref_protect(b.src, 520, 30, 1, 2, 0);
                         dp_desc_t d = desc(DP_OP_DIF_UPDATE, 30 * 528);
                         d.op_flags = DP_DIF_BLOCK_520;
                         d.src = addr(b.src);
                         d.dst = addr(b.dst);
                         d.src2 = DP_DIF_TAGS(1, 0, 2);
                         d.redop = DP_DIF_DST_GUARD_PASS | DP_DIF_DST_REF_TAG_FIXED;
                         d.aux = DP_DIF_TAGS(77, 0, 3);
                         return d;
                     }, true});
    cases.push_back({"cache_flush", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_CACHE_FLUSH, 8192);
                         d.dst = addr(b.dst);
                         return d;
                     }, true});
    cases.push_back({"reduce", [=](Buffers4 &b) {
                         dp_desc_t d = desc(DP_OP_REDUCE, 4096);
                         d.dtype = DP_INT32;
                         d.redop = DP_SUM;
                         d.src = addr(b.src);
                         d.src2 = addr(b.src2);
                         d.dst = addr(b.dst);
                         return d;
                     }, false});
    return cases;
}

// A stand-in device behind a portal, and the limits that route to it.
struct Rig {
    std::unique_ptr<HwQueue> hw;
    StandInDevice *device = nullptr;
    ExecLimits limits{1ull << 31, 64, 1ull << 20, nullptr};

    explicit Rig(dp_wq_mode_t mode, uint64_t device_transfer = 1ull << 31,
                 uint64_t queue_transfer = 1ull << 31, bool block_on_fault = false) {
        StandInDevice::Options options;
        options.max_transfer_size = device_transfer;
        options.block_on_fault = block_on_fault;
        auto stand_in = std::make_unique<StandInDevice>(options);
        device = stand_in.get();
        QueueInfo q;
        q.device = "standin";
        q.name = "test";
        q.enabled = true;
        q.mode = mode;
        q.size = options.queue_size;
        q.max_batch_size = options.max_batch_size;
        q.max_transfer_size = queue_transfer;
        q.block_on_fault = block_on_fault;
        auto portal = Portal::stand_in(device, mode);
        hw = std::make_unique<HwQueue>(std::move(portal), std::move(stand_in), q, DP_WAIT_PAUSE);
        limits.hw = hw.get();
    }
};

void expect_same(const OpResult &want, const OpResult &got, const Buffers4 &a, const Buffers4 &b,
                 const std::string &what) {
    EXPECT_EQ(int(got.status), int(want.status)) << what;
    EXPECT_EQ(got.result, want.result) << what;
    EXPECT_EQ(got.bytes, want.bytes) << what;
    EXPECT_EQ(got.value, want.value) << what;
    EXPECT_EQ(std::memcmp(a.dst, b.dst, Buffers4::kBytes), 0) << what << ": dst differs";
    EXPECT_EQ(std::memcmp(a.dst2, b.dst2, Buffers4::kBytes), 0) << what << ": dst2 differs";
    EXPECT_EQ(std::memcmp(a.src, b.src, Buffers4::kBytes), 0) << what << ": src differs";
}

// Runs `c` on the CPU and through the rig; `before` marks pages or refusals
// on the rig's side. Returns the device's descriptor count.
uint64_t run_both(const Case &c, Rig &rig, const std::function<void(Buffers4 &)> &before = {}) {
    LocalAddressSpace space;
    const ExecLimits cpu{1ull << 31, 64, 1ull << 20, nullptr};
    Buffers4 a(7), b(7);
    const OpResult want = execute(c.make(a), space, cpu);
    const dp_desc_t d = c.make(b);
    if (before) before(b);
    const uint64_t submitted = rig.hw->counters().submitted.load();
    const OpResult got = execute(d, space, rig.limits);
    expect_same(want, got, a, b, c.name);
    return rig.hw->counters().submitted.load() - submitted;
}

class IdxdStandInTest : public ::testing::TestWithParam<dp_wq_mode_t> {};

TEST_P(IdxdStandInTest, EveryOpcodeMatchesTheSoftwareKernelsBitForBit) {
    Rig rig(GetParam());
    for (const Case &c : every_opcode()) {
        const uint64_t submitted = run_both(c, rig);
        EXPECT_EQ(submitted, c.offloaded ? 1u : 0u) << c.name;
    }
    // The invalid delta record: the device refused it, the CPU found it
    // invalid too (INVALID_FIELD, compared above).
    EXPECT_EQ(rig.hw->counters().fallbacks.load(), 1u);
    EXPECT_EQ(rig.hw->counters().faults.load(), 0u);
}

TEST_P(IdxdStandInTest, PageFaultsArePartialCompletionsResumedAfterTouchingThePage) {
    Rig rig(GetParam());
    uint64_t expected_faults = 0;
    for (const Case &c : every_opcode()) {
        if (!c.offloaded) continue;
        // A page in the middle of every buffer the operation may touch.
        const uint64_t submitted = run_both(c, rig, [&](Buffers4 &b) {
            for (uint8_t *p : {b.src, b.src2, b.dst, b.dst2}) rig.device->mark_not_present(p + 8192);
        });
        const uint64_t faults = rig.device->counters().faults;
        EXPECT_GE(submitted, 1u) << c.name;
        EXPECT_EQ(rig.hw->counters().faults.load(), faults) << c.name;
        expected_faults = faults;
    }
    // Every operation reaching past 8 KiB met at least one fault.
    EXPECT_GE(expected_faults, 10u);
    EXPECT_EQ(rig.device->counters().blocked, 0u);
}

TEST_P(IdxdStandInTest, TransfersLongerThanTheDeviceTakesAreCutAndChained) {
    // Not a multiple of 8: a fill's pattern and a compare's offsets must
    // carry across the cuts.
    Rig rig(GetParam(), 1ull << 31, /*queue_transfer=*/4100);
    for (const Case &c : every_opcode()) {
        if (c.name != "memmove" && c.name != "crc32c" && c.name != "copy_crc32c" &&
            c.name != "compare_differ" && c.name != "fill")
            continue;
        const uint64_t submitted = run_both(c, rig);
        const uint64_t size = c.make(*std::make_unique<Buffers4>(7)).size;
        // compare_differ stops at the chunk holding the difference (37777).
        const uint64_t expected = c.name == "compare_differ" ? 37777 / 4100 + 1 : (size + 4099) / 4100;
        EXPECT_EQ(submitted, expected) << c.name;
    }
}

INSTANTIATE_TEST_SUITE_P(Modes, IdxdStandInTest, ::testing::Values(DP_WQ_DEDICATED, DP_WQ_SHARED),
                         [](const auto &info) {
                             return std::string(info.param == DP_WQ_SHARED ? "Shared" : "Dedicated");
                         });

TEST(IdxdStandInTest, ASharedQueueThatRefusesIsWrittenAgain) {
    Rig rig(DP_WQ_SHARED);
    rig.device->refuse_next(3);
    run_both(every_opcode()[0], rig);
    EXPECT_EQ(rig.hw->counters().retries.load(), 3u);
    EXPECT_EQ(rig.device->counters().refused, 3u);
}

TEST(IdxdStandInTest, BlockOnFaultLetsTheDeviceWaitOutItsFaults) {
    Rig rig(DP_WQ_DEDICATED, 1ull << 31, 1ull << 31, /*block_on_fault=*/true);
    run_both(every_opcode()[0], rig, [&](Buffers4 &b) {
        rig.device->mark_not_present(b.src + 8192);
        rig.device->mark_not_present(b.dst + 16384);
    });
    EXPECT_EQ(rig.device->counters().blocked, 2u);
    EXPECT_EQ(rig.device->counters().faults, 0u);
    EXPECT_EQ(rig.hw->counters().faults.load(), 0u);
}

TEST(IdxdStandInTest, AnOperationTheDeviceFailsRunsOnTheCpu) {
    // The queue says 2 GiB, the device takes 1 KiB: it refuses the size.
    Rig rig(DP_WQ_DEDICATED, /*device_transfer=*/1024);
    run_both(every_opcode()[0], rig);
    EXPECT_EQ(rig.hw->counters().fallbacks.load(), 1u);
}

// A batch built twice (CPU, device) from the same recipe; members' records
// compared field by field. Returns the device's descriptor count.
using BatchRecipe = std::function<size_t(Buffers4 &, dp_desc_t *members)>;

uint64_t run_batch_both(const BatchRecipe &recipe, Rig &rig,
                        const std::function<void(Buffers4 &)> &before = {}) {
    LocalAddressSpace space;
    Buffers4 a(3), b(3);
    alignas(64) dp_desc_t ma[8], mb[8];
    dp_completion_t ra[8], rb[8];
    auto batch = [&](Buffers4 &x, dp_desc_t *members, dp_completion_t *records) {
        std::memset(members, 0, 8 * sizeof(dp_desc_t));
        const size_t n = recipe(x, members);
        for (size_t i = 0; i < n; ++i) {
            members[i].flags |= DP_FLAG_COMPLETION;
            members[i].completion = addr(&records[i]);
            std::memset(&records[i], 0, sizeof(records[i]));
        }
        dp_desc_t d;
        std::memset(&d, 0, sizeof(d));
        d.opcode = DP_OP_BATCH;
        d.src = addr(members);
        d.size = n;
        return d;
    };
    const OpResult want = execute(batch(a, ma, ra), space, {1ull << 31, 64, 1ull << 20, nullptr});
    const dp_desc_t d = batch(b, mb, rb);
    if (before) before(b);
    const uint64_t submitted = rig.hw->counters().submitted.load();
    const OpResult got = execute(d, space, rig.limits);
    expect_same(want, got, a, b, "batch");
    EXPECT_EQ(got.members, want.members);
    EXPECT_EQ(got.member_failures, want.member_failures);
    for (uint64_t i = 0; i < d.size; ++i) {
        EXPECT_EQ(int(rb[i].status), int(ra[i].status)) << "member " << i;
        EXPECT_EQ(rb[i].result, ra[i].result) << "member " << i;
        EXPECT_EQ(rb[i].value, ra[i].value) << "member " << i;
        EXPECT_EQ(rb[i].bytes_completed, ra[i].bytes_completed) << "member " << i;
    }
    return rig.hw->counters().submitted.load() - submitted;
}

size_t five_members(Buffers4 &x, dp_desc_t *m) {
    m[0].opcode = DP_OP_MEMMOVE;
    m[0].src = addr(x.src);
    m[0].dst = addr(x.dst);
    m[0].size = 20000;
    m[1].opcode = DP_OP_CRC32C;  // reads what member 0 wrote
    m[1].flags = DP_FLAG_FENCE;
    m[1].src = addr(x.dst);
    m[1].size = 20000;
    m[2].opcode = DP_OP_REDUCE;  // deputy's own: on the CPU, between two device batches
    m[2].dtype = DP_UINT8;
    m[2].redop = DP_BXOR;
    m[2].src = addr(x.src);
    m[2].src2 = addr(x.src2);
    m[2].dst = addr(x.dst2);
    m[2].size = 777;
    m[3].opcode = DP_OP_FILL;
    m[3].src2 = 0x0102030405060708ull;
    m[3].dst = addr(x.dst2 + 1000);
    m[3].size = 30001;
    m[4].opcode = DP_OP_COMPARE;
    m[4].src = addr(x.src);
    m[4].src2 = addr(x.dst);
    m[4].size = 20000;
    return 5;
}

TEST(IdxdStandInTest, BatchMembersTheDeviceTakesGoToItAsBatchDescriptors) {
    Rig rig(DP_WQ_DEDICATED);
    // [memmove, crc] one batch descriptor, the reduce on the CPU, [fill, compare] another.
    EXPECT_EQ(run_batch_both(five_members, rig), 2u);
    EXPECT_EQ(rig.device->counters().executed, 4u);
}

TEST(IdxdStandInTest, ABatchMemberThatFaultsRunsAgainAndSoDoesTheFencedOneTheDeviceAbandoned) {
    Rig rig(DP_WQ_SHARED);
    // Member 0 faults; the device abandons member 1 (fenced); both run
    // again alone: 2 batches + 2 single descriptors.
    EXPECT_EQ(run_batch_both(five_members, rig, [&](Buffers4 &b) {
                  rig.device->mark_not_present(b.dst + 12288);
              }),
              4u);
    EXPECT_EQ(rig.device->counters().faults, 1u);
    EXPECT_EQ(rig.hw->counters().faults.load(), 1u);
}

TEST(IdxdStandInTest, AFencedMemberAfterARealFailureIsAbandonedAsOnTheCpu) {
    Rig rig(DP_WQ_DEDICATED);
    run_batch_both(
        [](Buffers4 &x, dp_desc_t *m) {
            uint16_t granule = 600;  // outside dst: the device and the CPU refuse the record
            std::memcpy(x.src, &granule, 2);
            m[0].opcode = DP_OP_APPLY_DELTA;
            m[0].src = addr(x.src);
            m[0].dst = addr(x.dst);
            m[0].size = 4096;
            m[0].aux = 10;
            m[1].opcode = DP_OP_MEMMOVE;
            m[1].src = addr(x.src2);
            m[1].dst = addr(x.dst2);
            m[1].size = 5000;
            m[2].opcode = DP_OP_MEMMOVE;  // fenced: abandoned, and so is the rest
            m[2].flags = DP_FLAG_FENCE;
            m[2].src = addr(x.src2);
            m[2].dst = addr(x.dst + 8192);
            m[2].size = 5000;
            m[3].opcode = DP_OP_FILL;
            m[3].dst = addr(x.dst + 20000);
            m[3].size = 100;
            return size_t(4);
        },
        rig);
    EXPECT_EQ(rig.hw->counters().fallbacks.load(), 2u);  // the member in the batch, then alone
}

// --- the device as dp_mover_open_json opens it ---

std::string device_json(const std::string &extra, int engines = 1) {
    std::string engine_list;
    for (int e = 0; e < engines; ++e)
        engine_list += std::string(e ? "," : "") + "{\"dev\": \"engine0." + std::to_string(e) + "\"}";
    return "{\"dev\": \"dsa0\"" + extra +
           ", \"groups\": [{\"dev\": \"group0.0\", \"grouped_workqueues\": [{\"dev\": \"wq0.0\", "
           "\"mode\": \"dedicated\", \"size\": 16}], \"grouped_engines\": [" +
           engine_list + "]}]}";
}

// Opens a device from JSON with `extra` keys; the test fails without one.
test::MoverPtr open_json(const std::string &extra) {
    dp_mover_t *raw = nullptr;
    const char *error = nullptr;
    EXPECT_EQ(dp_mover_open_json(device_json(extra).c_str(), &raw, &error), DP_OK)
        << (error ? error : "");
    return test::MoverPtr(raw);
}

// One memmove of `bytes` through the C API, checked byte for byte.
void memmove_through(dp_mover_t *mover, size_t bytes) {
    std::vector<uint8_t> src(bytes), dst(bytes);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7);
    dp_completion_t record{};
    dp_desc_t d{};
    d.opcode = DP_OP_MEMMOVE;
    d.flags = DP_FLAG_COMPLETION;
    d.completion = addr(&record);
    d.src = addr(src.data());
    d.dst = addr(dst.data());
    d.size = src.size();
    d.user = 42;
    ASSERT_EQ(dp_mover_submit(mover, 0, &d), DP_OK);
    ASSERT_EQ(dp_mover_wait(mover, &record, DP_WAIT_BLOCK, 10'000'000'000), DP_OK);
    EXPECT_EQ(record.status, DP_COMP_SUCCESS);
    EXPECT_EQ(record.bytes_completed, src.size());
    EXPECT_EQ(record.user, 42u);
    EXPECT_EQ(src, dst);
}

TEST(IdxdDeviceTest, TheStandInServesTheCApiUnchanged) {
    for (const char *queue : {"standin", "standin/shared", "standin/inline"}) {
        test::MoverPtr mover =
            open_json(std::string(", \"backend\": \"idxd\", \"idxd_queue\": \"") + queue + "\"");
        ASSERT_NE(mover, nullptr);
        const Device *device = local_device(mover.get());
        ASSERT_NE(device->hw_queue(), nullptr);
        EXPECT_NE(device->backend_description().find("DSA stand-in device"), std::string::npos)
            << device->backend_description();
        memmove_through(mover.get(), 100000);
        EXPECT_EQ(device->hw_queue()->counters().submitted.load(), 1u) << queue;
    }
}

TEST(IdxdDeviceTest, WithoutAUsableQueueTheSoftwareEnginesRunAndSayWhy) {
    // No such device on any machine: the reason names the request.
    test::MoverPtr mover = open_json(", \"backend\": \"idxd\", \"idxd_queue\": \"dsa977/wq977.0\"");
    ASSERT_NE(mover, nullptr);
    const Device *device = local_device(mover.get());
    EXPECT_EQ(device->hw_queue(), nullptr);
    EXPECT_NE(device->backend_description().find("software engines (idxd: "), std::string::npos)
        << device->backend_description();
    // (This machine has no DSA at all, or this build none: that is what the
    // reason says.)
    if (!DEPUTY_HAVE_ACCEL_CONFIG) {
        EXPECT_NE(device->backend_description().find("this build has no libaccel-config"),
                  std::string::npos)
            << device->backend_description();
    } else if (::access("/sys/bus/dsa", F_OK) != 0) {
        EXPECT_NE(device->backend_description().find("idxd driver is not loaded"), std::string::npos)
            << device->backend_description();
    }
    memmove_through(mover.get(), 64);
}

TEST(IdxdDeviceTest, BadBackendKeysAreRefusedByName) {
    dp_mover_t *raw = nullptr;
    const char *error = nullptr;
    EXPECT_EQ(dp_mover_open_json(device_json(", \"backend\": \"dsa\"").c_str(), &raw, &error),
              DP_ERR_INVALID);
    ASSERT_NE(error, nullptr);
    EXPECT_NE(std::string(error).find("backend"), std::string::npos) << error;
    EXPECT_NE(std::string(error).find("'software' or 'idxd'"), std::string::npos) << error;
    EXPECT_EQ(dp_mover_open_json(device_json(", \"idxd_queue\": \"dsa0\"").c_str(), &raw, &error),
              DP_ERR_INVALID);
    EXPECT_NE(std::string(error).find("backend is not 'idxd'"), std::string::npos) << error;
    // More engines than a dedicated queue holds would overrun it.
    EXPECT_EQ(dp_mover_open_json(
                  device_json(", \"backend\": \"idxd\", \"idxd_queue\": \"standin\"", 40).c_str(),
                  &raw, &error),
              DP_ERR_INVALID);
    EXPECT_NE(std::string(error).find("holds 32 descriptors, fewer than the 40 engines"),
              std::string::npos)
        << error;
}

}  // namespace
}  // namespace deputy::mover::idxd
