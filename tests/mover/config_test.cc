// accel-config-shaped JSON (src/mover/config.cc): a configuration as
// accel-config saves it loads as is, errors name the offending key by its
// path, and several groups with per-queue priorities configure the device
// the way they say.
#include "mover/config.h"

#include <deputy/mover.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mover/address_space.h"
#include "mover/device.h"
#include "mover/test_util.h"

namespace deputy::test {
namespace {

using mover::DeviceConfig;

// "enable dsa0 with 1 engine and 1 work queue, max_batch_size 64" as
// accel-config saves it, hardware-only keys and empty groups included.
const char *const kAccelConfigSaved = R"json(
[
  {
    "dev":"dsa0",
    "read_buffer_limit":0,
    "max_groups":4,
    "max_work_queues":8,
    "max_engines":4,
    "work_queue_size":128,
    "numa_node":0,
    "op_cap":"00000000,00000000,00000000,00000000,00000000,00000000,00000001,003f03ff",
    "gen_cap":"0x40915f0107",
    "version":"0x100",
    "state":"enabled",
    "max_read_buffers":96,
    "max_batch_size":1024,
    "max_transfer_size":2147483648,
    "configurable":1,
    "pasid_enabled":1,
    "cdev_major":237,
    "clients":0,
    "groups":[
      {
        "dev":"group0.0",
        "read_buffers_reserved":0,
        "use_read_buffer_limit":0,
        "read_buffers_allowed":96,
        "grouped_workqueues":[
          {
            "dev":"wq0.0",
            "mode":"dedicated",
            "size":128,
            "group_id":0,
            "priority":10,
            "block_on_fault":0,
            "max_batch_size":64,
            "max_transfer_size":2097152,
            "cdev_minor":0,
            "type":"user",
            "name":"app0",
            "threshold":0,
            "ats_disable":-2,
            "state":"enabled",
            "clients":0
          }
        ],
        "grouped_engines":[
          {
            "dev":"engine0.0",
            "group_id":0
          }
        ]
      },
      {
        "dev":"group0.1",
        "read_buffers_reserved":0,
        "use_read_buffer_limit":0,
        "read_buffers_allowed":96
      },
      {
        "dev":"group0.2",
        "read_buffers_reserved":0,
        "use_read_buffer_limit":0,
        "read_buffers_allowed":96
      },
      {
        "dev":"group0.3",
        "read_buffers_reserved":0,
        "use_read_buffer_limit":0,
        "read_buffers_allowed":96
      }
    ],
    "ungrouped_engines":[
      {
        "dev":"engine0.1"
      },
      {
        "dev":"engine0.2"
      },
      {
        "dev":"engine0.3"
      }
    ]
  }
]

)json";

dp_status_t parse(const std::string &text, DeviceConfig *config, std::string *error) {
    return mover::config_from_json(text, config, error);
}

// The error for `text`, which must be refused.
std::string error_of(const std::string &text) {
    DeviceConfig config;
    std::string error;
    EXPECT_EQ(parse(text, &config, &error), DP_ERR_INVALID) << text;
    return error;
}

// A one-group device whose only work queue is {wq_body}, with extra group and
// device keys (each ending in ", ").
std::string device_with(const std::string &wq_body, const std::string &group_fields = "",
                        const std::string &device_fields = "") {
    return R"({"dev": "dsa0", )" + device_fields + R"("groups": [{"dev": "group0.0", )" +
           group_fields + R"("grouped_workqueues": [{)" + wq_body +
           R"(}], "grouped_engines": [{"dev": "engine0.0"}]}]})";
}

// The same with a valid queue plus `wq_fields` (each ending in ", ").
std::string with_wq(const std::string &wq_fields, const std::string &group_fields = "",
                    const std::string &device_fields = "") {
    return device_with(wq_fields + R"("dev": "wq0.0", "mode": "dedicated", "size": 16)",
                       group_fields, device_fields);
}

TEST(MoverConfig, AccelConfigSavedLoads) {
    DeviceConfig config;
    std::string error;
    ASSERT_EQ(parse(kAccelConfigSaved, &config, &error), DP_OK) << error;
    EXPECT_EQ(config.name, "dsa0");
    ASSERT_EQ(config.wqs.size(), 1u);
    const mover::WqConfig &wq = config.wqs[0];
    EXPECT_EQ(wq.name, "wq0.0");
    EXPECT_EQ(wq.mode, DP_WQ_DEDICATED);
    EXPECT_EQ(wq.size, 128u);
    EXPECT_EQ(wq.priority, 10u);
    EXPECT_EQ(wq.max_batch_size, 64u);          // the queue's, not the device's 1024
    EXPECT_EQ(wq.max_transfer_size, 2097152u);  // the queue's, not the device's 2 GiB
    // The three empty groups configure nothing and are dropped.
    ASSERT_EQ(config.groups.size(), 1u);
    EXPECT_EQ(config.groups[0].name, "group0.0");
    EXPECT_EQ(config.groups[0].wqs, std::vector<uint32_t>{0});
    EXPECT_EQ(config.groups[0].engines, 1u);
    EXPECT_EQ(config.total_engines(), 1u);
    EXPECT_TRUE(config.cpus.empty());
    EXPECT_EQ(config.wait_mode, DP_WAIT_SPIN);
}

TEST(MoverConfig, AccelConfigSavedOpensAWorkingDevice) {
    dp_mover_t *raw = nullptr;
    const char *error = "unset";
    ASSERT_EQ(dp_mover_open_json(kAccelConfigSaved, &raw, &error), DP_OK);
    EXPECT_EQ(error, nullptr);
    MoverPtr mover(raw);
    dp_mover_stats_t stats;
    stats.size = sizeof(stats);
    ASSERT_EQ(dp_mover_get_stats(mover.get(), &stats), DP_OK);
    EXPECT_EQ(stats.num_engines, 1u);
    EXPECT_EQ(stats.num_wqs, 1u);
    // The queue's limits are the ones enforced.
    const size_t max = 2097152;
    Guarded src(max + 1), dst(max + 1);
    src.fill_random(1);
    EXPECT_RECORD(run(mover.get(), make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), max)),
                  DP_COMP_SUCCESS, 0, max, 0, 0);
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), max), 0);
    EXPECT_RECORD(run(mover.get(), make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), max + 1)),
                  DP_COMP_INVALID_SIZE, 0, 0, 0, 0);
    std::vector<dp_desc_t> noops(65, make_desc(DP_OP_NOOP, 0, 0, 0));
    EXPECT_RECORD(run(mover.get(), make_desc(DP_OP_BATCH, 0, addr(noops.data()), 65)),
                  DP_COMP_INVALID_BATCH, 0, 0, 0, 0);
    EXPECT_RECORD(run(mover.get(), make_desc(DP_OP_BATCH, 0, addr(noops.data()), 64)),
                  DP_COMP_SUCCESS, 0, 64, 0, 0);
}

TEST(MoverConfig, DeviceObjectWithoutTheArrayAndComments) {
    DeviceConfig config;
    std::string error;
    ASSERT_EQ(parse("// a single device object is fine too\n" + with_wq(R"("priority": 3, )"),
                    &config, &error),
              DP_OK)
        << error;
    ASSERT_EQ(config.wqs.size(), 1u);
    EXPECT_EQ(config.wqs[0].priority, 3u);
    EXPECT_EQ(config.wqs[0].size, 16u);
}

TEST(MoverConfig, DeputyKeys) {
    DeviceConfig config;
    std::string error;
    ASSERT_EQ(parse(with_wq("", "",
                            R"("cpu_list": "0,2-3", "nt_threshold": 65536, "idle_spin_us": 50, )"
                            R"("wait_mode": "block", )"),
                    &config, &error),
              DP_OK)
        << error;
    EXPECT_EQ(config.cpus, (std::vector<int>{0, 2, 3}));
    EXPECT_EQ(config.nt_threshold, 65536u);
    EXPECT_EQ(config.idle_spin_us, 50u);
    EXPECT_EQ(config.wait_mode, DP_WAIT_BLOCK);
}

TEST(MoverConfig, SavedAsAccelConfigJsonItLoadsBackTheSame) {
    DeviceConfig config;
    std::string error;
    const std::string text = R"({"dev": "dsa2", "cpu_list": "1,3", "wait_mode": "pause",
        "nt_threshold": 65536, "idle_spin_us": 70, "backend": "idxd", "idxd_queue": "dsa0",
        "groups": [
          {"dev": "group2.0", "grouped_workqueues": [
             {"dev": "wq2.0", "mode": "shared", "size": 64, "priority": 7, "threshold": 40,
              "max_batch_size": 32, "max_transfer_size": 1048576, "block_on_fault": 1},
             {"dev": "wq2.1", "mode": "dedicated", "size": 8, "priority": 3}],
           "grouped_engines": [{"dev": "engine2.0"}, {"dev": "engine2.1"}]},
          {"dev": "group2.1", "grouped_workqueues": [{"dev": "wq2.2", "size": 16}],
           "grouped_engines": [{"dev": "engine2.2"}]}]})";
    ASSERT_EQ(parse(text, &config, &error), DP_OK) << error;
    const std::string saved = mover::config_to_json(config);
    DeviceConfig again;
    ASSERT_EQ(parse(saved, &again, &error), DP_OK) << error << "\n" << saved;
    EXPECT_EQ(again.name, "dsa2");
    EXPECT_EQ(again.cpus, config.cpus);
    EXPECT_EQ(again.wait_mode, DP_WAIT_PAUSE);
    EXPECT_EQ(again.nt_threshold, 65536u);
    EXPECT_EQ(again.idle_spin_us, 70u);
    EXPECT_EQ(again.backend, DeviceConfig::Backend::idxd);
    EXPECT_EQ(again.idxd_queue, "dsa0");
    ASSERT_EQ(again.wqs.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        const auto &a = config.wqs[i], &b = again.wqs[i];
        EXPECT_EQ(b.name, a.name);
        EXPECT_EQ(b.mode, a.mode);
        EXPECT_EQ(b.size, a.size);
        EXPECT_EQ(b.priority, a.priority);
        EXPECT_EQ(b.threshold, a.threshold);
        EXPECT_EQ(b.max_batch_size, a.max_batch_size);
        EXPECT_EQ(b.max_transfer_size, a.max_transfer_size);
        EXPECT_EQ(b.block_on_fault, a.block_on_fault);
    }
    EXPECT_EQ(again.wqs[0].threshold, 40u);
    EXPECT_TRUE(again.wqs[0].block_on_fault);
    ASSERT_EQ(again.groups.size(), 2u);
    for (size_t g = 0; g < 2; ++g) {
        EXPECT_EQ(again.groups[g].name, config.groups[g].name);
        EXPECT_EQ(again.groups[g].wqs, config.groups[g].wqs);
        EXPECT_EQ(again.groups[g].engines, config.groups[g].engines);
    }
    // accel-config's own names and shape: engines numbered after the device.
    EXPECT_NE(saved.find("\"engine2.2\""), std::string::npos) << saved;
    EXPECT_NE(saved.find("\"grouped_workqueues\""), std::string::npos) << saved;
    EXPECT_EQ(mover::config_to_json(again), saved);
}

TEST(MoverConfig, AThresholdBelongsToASharedQueueWithinItsSize) {
    EXPECT_NE(error_of(device_with(R"("dev": "wq0.0", "mode": "shared", "size": 16, "threshold": 17)"))
                  .find("wq0.0.threshold = 17: above the queue's size 16"),
              std::string::npos);
    EXPECT_NE(error_of(device_with(R"("dev": "wq0.0", "mode": "dedicated", "size": 16, "threshold": 4)"))
                  .find("wq0.0.threshold = 4: only a shared queue has a threshold"),
              std::string::npos);
    EXPECT_NE(error_of(with_wq(R"("block_on_fault": 2, )")).find("block_on_fault: expected 0 or 1"),
              std::string::npos);
}

TEST(MoverConfig, ASharedQueueRefusesAtItsThresholdWithSlotsFree) {
    DeviceConfig config;
    std::string error;
    ASSERT_EQ(parse(device_with(R"("dev": "wq0.0", "mode": "shared", "size": 16, "threshold": 3)"),
                    &config, &error),
              DP_OK)
        << error;
    config.start_engines = false;  // nothing drains the queue
    std::unique_ptr<mover::Device> device;
    ASSERT_EQ(mover::Device::create(config, &device, &error), DP_OK) << error;
    dp_desc_t noop{};
    for (int i = 0; i < 3; ++i) EXPECT_EQ(device->submit(0, noop), DP_OK) << i;
    EXPECT_EQ(device->submit(0, noop), DP_ERR_RETRY);
    dp_mover_stats_t stats;
    device->stats(&stats);
    EXPECT_EQ(stats.retries, 1u);
    device->start_engines();  // close() finishes what was queued
}

TEST(MoverConfig, DisabledQueueIsSkipped) {
    DeviceConfig config;
    std::string error;
    const std::string text = R"({"groups": [{"grouped_workqueues": [
        {"dev": "wq0.0", "state": "disabled", "size": 100},
        {"dev": "wq0.1", "state": "enabled", "size": 32, "mode": "shared"}],
        "grouped_engines": [{"dev": "engine0.0"}]}]})";
    ASSERT_EQ(parse(text, &config, &error), DP_OK) << error;
    ASSERT_EQ(config.wqs.size(), 1u);
    EXPECT_EQ(config.wqs[0].name, "wq0.1");
    EXPECT_EQ(config.wqs[0].mode, DP_WQ_SHARED);
    EXPECT_EQ(config.groups[0].wqs, std::vector<uint32_t>{0});
}

TEST(MoverConfig, ErrorsNameTheKeyPath) {
    struct Row {
        std::string text;
        std::string error;
    };
    const std::string wq_path = "groups[0].grouped_workqueues[0]";
    const std::vector<Row> rows = {
        {with_wq(R"("colour": "red", )"), wq_path + ".colour: unknown key"},
        {with_wq("", R"("colour": 1, )"), "groups[0].colour: unknown key"},
        {with_wq("", "", R"("colour": 1, )"), "colour: unknown key"},
        {R"({"groups": [{"grouped_workqueues": [{"size": "big"}],
            "grouped_engines": [{}]}]})",
         wq_path + ".size: expected a non-negative integer, got string"},
        {R"({"groups": [{"grouped_workqueues": [{"size": -4}], "grouped_engines": [{}]}]})",
         wq_path + ".size: expected a non-negative integer, got number"},
        {R"({"groups": [{"grouped_workqueues": [{"size": 4294967296}],
            "grouped_engines": [{}]}]})",
         wq_path + ".size: value 4294967296 is above 4294967295"},
        {R"({"groups": [{"grouped_workqueues": [{"size": 16.5}], "grouped_engines": [{}]}]})",
         wq_path + ".size: expected a non-negative integer, got number"},
        {device_with(R"("dev": "wq0.0", "mode": "fifo")"),
         wq_path + ".mode: 'fifo' is not 'dedicated' or 'shared'"},
        {with_wq(R"("priority": "high", )"),
         wq_path + ".priority: expected a non-negative integer, got string"},
        {device_with(R"("dev": 7, "size": 16)"), wq_path + ".dev: expected a string, got number"},
        {R"({"groups": [{"grouped_workqueues": [{}],
            "grouped_engines": [{"dev": "engine0.0", "speed": 2}]}]})",
         "groups[0].grouped_engines[0].speed: unknown key"},
        {R"({"groups": [{"grouped_workqueues": [{}], "grouped_engines": ["engine0.0"]}]})",
         "groups[0].grouped_engines[0]: expected an object, got string"},
        {R"({"groups": [{"grouped_workqueues": {}, "grouped_engines": []}]})",
         "groups[0].grouped_workqueues: expected an array, got object"},
        {R"({"groups": [{"grouped_workqueues": [{}, 3], "grouped_engines": [{}]}]})",
         "groups[0].grouped_workqueues[1]: expected an object, got number"},
        {R"({"groups": {}})", "groups: expected an array, got object"},
        {R"({"dev": "dsa0"})", "groups: missing: a device needs at least one group"},
        {R"([{"groups": []}, {"groups": []}])", "(top level): expected one device, got 2"},
        {R"("dsa0")", "device: expected an object, got string"},
        {with_wq("", "", R"("wait_mode": "busy", )"),
         "wait_mode: 'busy' is not one of spin, pause, yield, block"},
        {with_wq("", "", R"("cpu_list": "0,x", )"),
         "cpu_list: bad CPU list element 'x' (expected N or N-M)"},
        {with_wq("", "", R"("nt_threshold": true, )"),
         "nt_threshold: expected a non-negative integer, got boolean"},
        // Checks on values name the queue or group by its dev name and the key.
        {R"({"groups": [{"dev": "group0.0", "grouped_workqueues": [{"dev": "wq0.0"}],
                          "grouped_engines": [{"dev": "engine0.0"}]},
                         {"dev": "group0.1", "grouped_workqueues": [{"dev": "wq0.1"}]}]})",
         "group0.1 has work queues but no engine: its descriptors would never run"},
        {R"({"groups": [{"dev": "group0.0", "grouped_workqueues": [{"dev": "wq0.0"}]}]})",
         "no engine configured"},
        {device_with(R"("dev": "wq0.0", "size": 100)"),
         "wq0.0.size = 100: must be a power of two from 1 to 65536"},
        {device_with(R"("dev": "wq0.0", "size": 131072)"),
         "wq0.0.size = 131072: must be a power of two from 1 to 65536"},
        {device_with(R"("dev": "wq0.0", "size": 0)"),
         "wq0.0.size = 0: must be a power of two from 1 to 65536"},
        {with_wq(R"("priority": 0, )"), "wq0.0.priority = 0: must be 1..15"},
        {with_wq(R"("priority": 16, )"), "wq0.0.priority = 16: must be 1..15"},
        {with_wq(R"("max_batch_size": 0, )"), "wq0.0.max_batch_size = 0: must be 1..4096"},
        {with_wq(R"("max_batch_size": 4097, )"), "wq0.0.max_batch_size = 4097: must be 1..4096"},
        {with_wq(R"("max_transfer_size": 0, )"), "wq0.0.max_transfer_size = 0: must be at least 1"},
        {R"({"groups": [{"grouped_engines": [{}]}]})", "no work queue configured"},
        {R"({"groups": [{"grouped_engines": [{}]}, {"grouped_workqueues": [{}]}]})",
         "group0.1 has work queues but no engine: its descriptors would never run"},
    };
    for (const Row &row : rows) {
        SCOPED_TRACE(row.text);
        EXPECT_EQ(error_of(row.text), row.error);
    }
}

TEST(MoverConfig, InvalidJsonIsNamedAsSuch) {
    std::string error = error_of(R"({"groups": [)");
    EXPECT_EQ(error.rfind("not valid JSON: ", 0), 0u) << error;
}

TEST(MoverConfig, OpenJsonReportsTheErrorAndNoDevice) {
    dp_mover_t *mover = reinterpret_cast<dp_mover_t *>(0x1);
    const char *error = nullptr;
    EXPECT_EQ(dp_mover_open_json(with_wq(R"("priority": 0, )").c_str(), &mover, &error),
              DP_ERR_INVALID);
    EXPECT_EQ(mover, nullptr);
    ASSERT_NE(error, nullptr);
    EXPECT_STREQ(error, "wq0.0.priority = 0: must be 1..15");
    // The same through a parse error.
    EXPECT_EQ(dp_mover_open_json("{", &mover, &error), DP_ERR_INVALID);
    ASSERT_NE(error, nullptr);
    EXPECT_EQ(std::string(error).rfind("not valid JSON: ", 0), 0u) << error;
    // NULL arguments.
    EXPECT_EQ(dp_mover_open_json(nullptr, &mover, &error), DP_ERR_INVALID);
    EXPECT_EQ(dp_mover_open_json(kAccelConfigSaved, nullptr, nullptr), DP_ERR_INVALID);
    // NULL error pointer is allowed.
    EXPECT_EQ(dp_mover_open_json("[]", &mover, nullptr), DP_ERR_INVALID);
}

// Two groups: group0 holds a low- and a high-priority queue served by one
// engine, group1 one queue served by two engines.
const char *const kTwoGroups = R"json({
  "dev": "dsa1",
  "groups": [
    {"dev": "group1.0",
     "grouped_workqueues": [
       {"dev": "wq1.0", "mode": "dedicated", "size": 64, "priority": 1},
       {"dev": "wq1.1", "mode": "shared", "size": 32, "priority": 3, "max_batch_size": 8}],
     "grouped_engines": [{"dev": "engine1.0"}]},
    {"dev": "group1.1",
     "grouped_workqueues": [
       {"dev": "wq1.2", "mode": "dedicated", "size": 16, "priority": 15,
        "max_transfer_size": 4096}],
     "grouped_engines": [{"dev": "engine1.1"}, {"dev": "engine1.2"}]}
  ]
})json";

TEST(MoverConfig, SeveralGroupsWithPriorities) {
    DeviceConfig config;
    std::string error;
    ASSERT_EQ(parse(kTwoGroups, &config, &error), DP_OK) << error;
    EXPECT_EQ(config.name, "dsa1");
    ASSERT_EQ(config.wqs.size(), 3u);
    EXPECT_EQ(config.wqs[0].name, "wq1.0");
    EXPECT_EQ(config.wqs[0].mode, DP_WQ_DEDICATED);
    EXPECT_EQ(config.wqs[0].size, 64u);
    EXPECT_EQ(config.wqs[0].priority, 1u);
    EXPECT_EQ(config.wqs[1].name, "wq1.1");
    EXPECT_EQ(config.wqs[1].mode, DP_WQ_SHARED);
    EXPECT_EQ(config.wqs[1].priority, 3u);
    EXPECT_EQ(config.wqs[1].max_batch_size, 8u);
    EXPECT_EQ(config.wqs[2].priority, 15u);
    EXPECT_EQ(config.wqs[2].max_transfer_size, 4096u);
    EXPECT_EQ(config.wqs[2].max_batch_size, 64u);  // the default
    ASSERT_EQ(config.groups.size(), 2u);
    EXPECT_EQ(config.groups[0].wqs, (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(config.groups[0].engines, 1u);
    EXPECT_EQ(config.groups[1].wqs, std::vector<uint32_t>{2});
    EXPECT_EQ(config.groups[1].engines, 2u);
    EXPECT_EQ(config.total_engines(), 3u);

    // Through the C API: queues are numbered in configuration order, each
    // with its own limits.
    dp_mover_t *raw = nullptr;
    ASSERT_EQ(dp_mover_open_json(kTwoGroups, &raw, nullptr), DP_OK);
    MoverPtr mover(raw);
    dp_mover_stats_t stats;
    stats.size = sizeof(stats);
    ASSERT_EQ(dp_mover_get_stats(mover.get(), &stats), DP_OK);
    EXPECT_EQ(stats.num_engines, 3u);
    EXPECT_EQ(stats.num_wqs, 3u);
    Guarded src(8192), dst(8192);
    src.fill_random(2);
    for (uint32_t wq = 0; wq < 3; ++wq) {
        SCOPED_TRACE(wq);
        EXPECT_RECORD(
            run(mover.get(), make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), 4096, 0, 0, wq),
                wq),
            DP_COMP_SUCCESS, 0, 4096, 0, wq);
        EXPECT_RECORD(
            run(mover.get(), make_desc(DP_OP_MEMMOVE, dst.address(), src.address(), 8192, 0, 0, wq),
                wq),
            wq == 2 ? DP_COMP_INVALID_SIZE : DP_COMP_SUCCESS, 0, wq == 2 ? 0 : 8192, 0, wq);
    }
    dp_desc_t noops[9];
    for (dp_desc_t &d : noops) d = make_desc(DP_OP_NOOP, 0, 0, 0);
    EXPECT_EQ(run(mover.get(), make_desc(DP_OP_BATCH, 0, addr(noops), 9), 1).status,
              DP_COMP_INVALID_BATCH);
    EXPECT_EQ(run(mover.get(), make_desc(DP_OP_BATCH, 0, addr(noops), 9), 0).status,
              DP_COMP_SUCCESS);
    EXPECT_EQ(dp_mover_submit(mover.get(), 3, &noops[0]), DP_ERR_INVALID);
}

// Records the order in which the device touches addresses: with one engine
// the order of FILL destinations is the order of execution.
class RecordingSpace final : public mover::AddressSpace {
  public:
    void *translate(uint64_t addr, uint64_t, mover::Access) const override {
        order.push_back(addr);
        return reinterpret_cast<void *>(addr);
    }
    mutable std::vector<uint64_t> order;  // written by the one engine only
};

TEST(MoverConfig, PriorityIsDescriptorsPerTurn) {
    DeviceConfig config;
    std::string error;
    ASSERT_EQ(parse(kTwoGroups, &config, &error), DP_OK) << error;
    config.start_engines = false;
    std::unique_ptr<mover::Device> device;
    ASSERT_EQ(mover::Device::create(config, &device, &error), DP_OK) << error;
    RecordingSpace space;
    uint32_t pasid = 0;
    ASSERT_EQ(device->add_address_space(&space, &pasid), DP_OK);
    ASSERT_NE(pasid, mover::Device::kLocalPasid);

    // 8 fills on wq1.0 (priority 1) and 8 on wq1.1 (priority 3), queued before
    // the group's single engine starts.
    std::vector<uint64_t> cells(16);
    auto fill = [&](size_t i) {
        return make_desc(DP_OP_FILL, addr(&cells[i]), 0, sizeof(uint64_t), i);
    };
    for (size_t i = 0; i < 8; ++i) ASSERT_EQ(device->submit(0, fill(i), pasid), DP_OK);
    for (size_t i = 8; i < 16; ++i) ASSERT_EQ(device->submit(1, fill(i), pasid), DP_OK);
    device->start_engines();
    device->stop_engines();  // finishes every queued descriptor, then joins

    // Each turn takes up to `priority` descriptors from each queue, the
    // higher priority queue first: 3 of wq1.1, 1 of wq1.0, and so on.
    const std::vector<size_t> expect = {8, 9, 10, 0, 11, 12, 13, 1, 14, 15, 2, 3, 4, 5, 6, 7};
    std::vector<size_t> got;
    for (uint64_t a : space.order) got.push_back(size_t((a - addr(cells.data())) / 8));
    EXPECT_EQ(got, expect);
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(cells[i], i) << i;
    device.reset();  // before `space`, which its engines could still name
}

}  // namespace
}  // namespace deputy::test
