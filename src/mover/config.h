// Device configuration: groups of work queues and engines, accel-config
// shaped, validated before a single thread starts.
#pragma once

#include <deputy/mover.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deputy::mover {

struct WqConfig {
    std::string name;  // "wq0.0"
    dp_wq_mode_t mode = DP_WQ_DEDICATED;
    uint32_t size = 128;
    uint32_t priority = 10;  // 1..15: descriptors taken per turn (weighted round-robin)
    uint32_t max_batch_size = 64;
    uint64_t max_transfer_size = 2ull << 30;
    // Shared queues, as DSA's WQ threshold: a submit that finds this many
    // descriptors queued is refused (DP_ERR_RETRY) even with slots free,
    // keeping the rest for whoever submits next. 0: the queue's size.
    uint32_t threshold = 0;
    // DSA's block-on-fault: the device waits out a page fault instead of
    // completing partially. Only a DSA queue (the idxd backend) has
    // faults to wait for; the software device keeps the key so that a
    // configuration saved from one loads as it was.
    bool block_on_fault = false;
};

struct GroupConfig {
    std::string name;               // "group0.0"
    std::vector<uint32_t> wqs;      // indices into DeviceConfig::wqs
    uint32_t engines = 0;           // engines serving this group
};

struct DeviceConfig {
    std::string name = "dsa0";
    std::vector<WqConfig> wqs;
    std::vector<GroupConfig> groups;
    std::vector<int> cpus;          // engine pinning, round-robin; empty = unpinned
    uint64_t nt_threshold = 0;      // 0 = kDefaultNtThreshold
    dp_wait_mode_t wait_mode = DP_WAIT_SPIN;
    uint32_t idle_spin_us = 200;    // engines poll this long before sleeping
    // Idle polls call sched_yield instead of pause: for engines that share
    // cores with the threads that give them work (an agent without cores of
    // its own), so that a poll never holds a core a rank or the agent's
    // service thread is waiting for. Not a JSON key: the agent sets it.
    bool idle_yield = false;
    // Engines that share their CPUs with the ranks and the agent's service
    // thread yield the CPU once they have worked this long without a break
    // (0: never), at the end of a descriptor: whoever waits for that CPU
    // gets it within tens of microseconds instead of a scheduler slice
    // (milliseconds), so one team's small operation is not stuck behind
    // another's large one. By time, not per descriptor: a yield costs
    // context switches, and a descriptor of cached bytes takes 2-3 us.
    // Not a JSON key: the agent sets it when nothing pins its engines
    // (docs/collectives.md, "Polite engines where cores are shared").
    uint64_t yield_after_ns = 0;
    bool start_engines = true;      // tests set false to fill queues deterministically
    // What runs the descriptors: the software engines' kernels, or a DSA
    // work queue the engines hand them to (idxd/hw_queue.h). With "idxd"
    // and no usable queue, the software engines run and the device says why.
    enum class Backend { software, idxd } backend = Backend::software;
    std::string idxd_queue;         // "" any, "dsa0", "dsa0/wq0.0", "standin[/shared|/inline]"

    uint32_t total_engines() const;
};

// Limits every configuration is checked against.
inline constexpr uint32_t kMaxWqSize = 65536;
inline constexpr uint32_t kMaxBatchSize = 4096;
// Destination writes of this many bytes or more default to non-temporal
// stores (measured: docs/PERFORMANCE.md, "cache control threshold").
inline constexpr uint64_t kDefaultNtThreshold = 1ull << 20;

// From the C struct (one group). Returns DP_ERR_INVALID with *error naming
// the field.
dp_status_t config_from_struct(const dp_mover_config_t &in, DeviceConfig *out, std::string *error);

// From accel-config JSON text: a device object or a one-element array of it,
// with "groups": [{"grouped_workqueues": [...], "grouped_engines": [...]}].
// Hardware-only keys accel-config writes (read buffers, cdev, op_cap, ...) are
// accepted and ignored; any other unknown key or a wrong type is an error
// naming its path ("groups[0].grouped_workqueues[1].size").
dp_status_t config_from_json(const std::string &text, DeviceConfig *out, std::string *error);

// The configuration as accel-config JSON, as `accel-config save-config`
// writes a device (one-element array, groups with their queues and
// engines), plus deputy's device keys (cpu_list, wait_mode, nt_threshold,
// idle_spin_us, backend, idxd_queue). config_from_json reads it back to the
// same configuration.
std::string config_to_json(const DeviceConfig &config);

// Checks ranges and consistency (sizes powers of two, every queue served by an
// engine, ...). Both loaders call it.
dp_status_t validate_config(const DeviceConfig &config, std::string *error);

const char *wait_mode_name(dp_wait_mode_t mode);
// "spin", "pause", "yield", "block" -> mode; false for anything else.
bool parse_wait_mode(const std::string &text, dp_wait_mode_t *mode);

}  // namespace deputy::mover
