#include "mover/config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "common/affinity.h"

namespace deputy::mover {
namespace {

using nlohmann::json;

// Keys accel-config's save-config writes that describe hardware state a
// software device has no use for. Accepted so a saved config loads as is.
const std::set<std::string> kIgnoredDeviceKeys = {
    "read_buffer_limit", "max_groups", "max_work_queues", "max_engines", "work_queue_size",
    "numa_node", "op_cap", "gen_cap", "version", "state", "max_read_buffers", "max_batch_size",
    "max_transfer_size", "configurable", "pasid_enabled", "cdev_major", "clients",
    "ungrouped_engines", "ims_size", "max_sgl_size", "evl_size", "token_limit",
    "max_tokens", "max_work_queues_size", "iaa_cap"};
const std::set<std::string> kIgnoredGroupKeys = {
    "read_buffers_reserved", "use_read_buffer_limit", "read_buffers_allowed", "tokens_reserved",
    "use_token_limit", "tokens_allowed", "traffic_class_a", "traffic_class_b", "desc_progress_limit",
    "batch_progress_limit", "group_id"};
const std::set<std::string> kIgnoredWqKeys = {
    "group_id", "cdev_minor", "type", "ats_disable", "clients",
    "driver_name", "prs_disable", "op_config"};
const std::set<std::string> kIgnoredEngineKeys = {"group_id"};

struct ParseError {
    std::string message;
};

[[noreturn]] void fail(const std::string &path, const std::string &what) {
    throw ParseError{path + ": " + what};
}

const json &require_type(const json &value, const std::string &path, json::value_t type,
                         const char *expected) {
    bool ok = value.type() == type ||
              (type == json::value_t::number_unsigned && value.is_number_integer() &&
               value.get<int64_t>() >= 0);
    if (!ok) fail(path, std::string("expected ") + expected + ", got " + value.type_name());
    return value;
}

uint64_t get_uint(const json &value, const std::string &path) {
    return require_type(value, path, json::value_t::number_unsigned, "a non-negative integer")
        .get<uint64_t>();
}

std::string get_string(const json &value, const std::string &path) {
    return require_type(value, path, json::value_t::string, "a string").get<std::string>();
}

uint32_t get_u32(const json &value, const std::string &path) {
    uint64_t v = get_uint(value, path);
    if (v > UINT32_MAX) fail(path, "value " + std::to_string(v) + " is above 4294967295");
    return uint32_t(v);
}

void parse_wq(const json &node, const std::string &path, DeviceConfig *config, GroupConfig *group) {
    require_type(node, path, json::value_t::object, "an object");
    WqConfig wq;
    wq.name = "wq0." + std::to_string(config->wqs.size());
    bool enabled = true;
    for (const auto &[key, value] : node.items()) {
        std::string at = path + "." + key;
        if (key == "dev" || key == "name") {
            if (key == "dev") wq.name = get_string(value, at);
            else get_string(value, at);
        } else if (key == "mode") {
            std::string mode = get_string(value, at);
            if (mode == "dedicated") wq.mode = DP_WQ_DEDICATED;
            else if (mode == "shared") wq.mode = DP_WQ_SHARED;
            else fail(at, "'" + mode + "' is not 'dedicated' or 'shared'");
        } else if (key == "size") {
            wq.size = get_u32(value, at);
        } else if (key == "priority") {
            wq.priority = get_u32(value, at);
        } else if (key == "max_batch_size") {
            wq.max_batch_size = get_u32(value, at);
        } else if (key == "max_transfer_size") {
            wq.max_transfer_size = get_uint(value, at);
        } else if (key == "threshold") {
            wq.threshold = get_u32(value, at);
        } else if (key == "block_on_fault") {
            // accel-config writes 0 or 1.
            if (value.is_boolean()) wq.block_on_fault = value.get<bool>();
            else if (uint64_t v = get_uint(value, at); v <= 1) wq.block_on_fault = v == 1;
            else fail(at, "expected 0 or 1, got " + std::to_string(v));
        } else if (key == "state") {
            enabled = get_string(value, at) != "disabled";
        } else if (!kIgnoredWqKeys.count(key)) {
            fail(at, "unknown key");
        }
    }
    if (!enabled) return;
    group->wqs.push_back(uint32_t(config->wqs.size()));
    config->wqs.push_back(wq);
}

void parse_group(const json &node, const std::string &path, DeviceConfig *config) {
    require_type(node, path, json::value_t::object, "an object");
    GroupConfig group;
    group.name = "group0." + std::to_string(config->groups.size());
    for (const auto &[key, value] : node.items()) {
        std::string at = path + "." + key;
        if (key == "dev") {
            group.name = get_string(value, at);
        } else if (key == "grouped_workqueues") {
            require_type(value, at, json::value_t::array, "an array");
            for (size_t i = 0; i < value.size(); ++i)
                parse_wq(value[i], at + "[" + std::to_string(i) + "]", config, &group);
        } else if (key == "grouped_engines") {
            require_type(value, at, json::value_t::array, "an array");
            for (size_t i = 0; i < value.size(); ++i) {
                std::string engine_at = at + "[" + std::to_string(i) + "]";
                require_type(value[i], engine_at, json::value_t::object, "an object");
                for (const auto &[engine_key, engine_value] : value[i].items()) {
                    if (engine_key == "dev") get_string(engine_value, engine_at + ".dev");
                    else if (!kIgnoredEngineKeys.count(engine_key))
                        fail(engine_at + "." + engine_key, "unknown key");
                }
                ++group.engines;
            }
        } else if (!kIgnoredGroupKeys.count(key)) {
            fail(at, "unknown key");
        }
    }
    // accel-config lists unused groups too; they configure nothing.
    if (!group.wqs.empty() || group.engines != 0) config->groups.push_back(group);
}

void parse_device(const json &node, DeviceConfig *config) {
    require_type(node, "device", json::value_t::object, "an object");
    bool has_groups = false;
    for (const auto &[key, value] : node.items()) {
        if (key == "dev") {
            config->name = get_string(value, key);
        } else if (key == "groups") {
            require_type(value, key, json::value_t::array, "an array");
            for (size_t i = 0; i < value.size(); ++i)
                parse_group(value[i], "groups[" + std::to_string(i) + "]", config);
            has_groups = true;
        } else if (key == "cpu_list") {
            std::string list = get_string(value, key), error;
            if (affinity::parse_cpu_list(list, &config->cpus, &error) != DP_OK) fail(key, error);
        } else if (key == "nt_threshold") {
            config->nt_threshold = get_uint(value, key);
        } else if (key == "idle_spin_us") {
            config->idle_spin_us = get_u32(value, key);
        } else if (key == "wait_mode") {
            std::string mode = get_string(value, key);
            if (!parse_wait_mode(mode, &config->wait_mode))
                fail(key, "'" + mode + "' is not one of spin, pause, yield, block");
        } else if (key == "backend") {
            std::string backend = get_string(value, key);
            if (backend == "software") config->backend = DeviceConfig::Backend::software;
            else if (backend == "idxd") config->backend = DeviceConfig::Backend::idxd;
            else fail(key, "'" + backend + "' is not 'software' or 'idxd'");
        } else if (key == "idxd_queue") {
            config->idxd_queue = get_string(value, key);
        } else if (!kIgnoredDeviceKeys.count(key)) {
            fail(key, "unknown key");
        }
    }
    if (!has_groups) fail("groups", "missing: a device needs at least one group");
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

uint32_t DeviceConfig::total_engines() const {
    uint32_t total = 0;
    for (const auto &group : groups) total += group.engines;
    return total;
}

dp_status_t validate_config(const DeviceConfig &config, std::string *error) {
    auto bad = [&](const std::string &message) {
        *error = message;
        return DP_ERR_INVALID;
    };
    if (config.wqs.empty()) return bad("no work queue configured");
    if (config.wqs.size() > DP_MOVER_MAX_WQS)
        return bad(std::to_string(config.wqs.size()) + " work queues, the limit is " +
                   std::to_string(DP_MOVER_MAX_WQS));
    uint32_t engines = config.total_engines();
    if (engines == 0) return bad("no engine configured");
    if (engines > DP_MOVER_MAX_ENGINES)
        return bad(std::to_string(engines) + " engines, the limit is " +
                   std::to_string(DP_MOVER_MAX_ENGINES));
    for (const auto &wq : config.wqs) {
        if (wq.size == 0 || wq.size > kMaxWqSize || !is_power_of_two(wq.size))
            return bad(wq.name + ".size = " + std::to_string(wq.size) +
                       ": must be a power of two from 1 to " + std::to_string(kMaxWqSize));
        if (wq.priority < 1 || wq.priority > 15)
            return bad(wq.name + ".priority = " + std::to_string(wq.priority) +
                       ": must be 1..15");
        if (wq.threshold > wq.size)
            return bad(wq.name + ".threshold = " + std::to_string(wq.threshold) +
                       ": above the queue's size " + std::to_string(wq.size));
        if (wq.threshold != 0 && wq.mode == DP_WQ_DEDICATED)
            return bad(wq.name + ".threshold = " + std::to_string(wq.threshold) +
                       ": only a shared queue has a threshold");
        if (wq.max_batch_size < 1 || wq.max_batch_size > kMaxBatchSize)
            return bad(wq.name + ".max_batch_size = " + std::to_string(wq.max_batch_size) +
                       ": must be 1.." + std::to_string(kMaxBatchSize));
        if (wq.max_transfer_size < 1)
            return bad(wq.name + ".max_transfer_size = 0: must be at least 1");
    }
    for (const auto &group : config.groups) {
        if (!group.wqs.empty() && group.engines == 0)
            return bad(group.name + " has work queues but no engine: its descriptors would never run");
    }
    if (!config.idxd_queue.empty() && config.backend != DeviceConfig::Backend::idxd)
        return bad("idxd_queue '" + config.idxd_queue + "' is set but backend is not 'idxd'");
    return DP_OK;
}

dp_status_t config_from_struct(const dp_mover_config_t &in, DeviceConfig *out, std::string *error) {
    if (in.size < sizeof(dp_mover_config_t)) {
        *error = "dp_mover_config_t.size is " + std::to_string(in.size) +
                 ": initialise the struct with DP_MOVER_CONFIG_INITIALIZER";
        return DP_ERR_INVALID;
    }
    if (in.wq_mode != DP_WQ_DEDICATED && in.wq_mode != DP_WQ_SHARED) {
        *error = "wq_mode = " + std::to_string(in.wq_mode) + ": not DP_WQ_DEDICATED or DP_WQ_SHARED";
        return DP_ERR_INVALID;
    }
    if (in.num_wqs > DP_MOVER_MAX_WQS) {
        *error = "num_wqs = " + std::to_string(in.num_wqs) + ", the limit is " +
                 std::to_string(DP_MOVER_MAX_WQS);
        return DP_ERR_INVALID;
    }
    DeviceConfig config;
    GroupConfig group{"group0.0", {}, in.num_engines};
    for (uint32_t i = 0; i < in.num_wqs; ++i) {
        WqConfig wq;
        wq.name = "wq0." + std::to_string(i);
        wq.mode = dp_wq_mode_t(in.wq_mode);
        wq.size = in.wq_size;
        wq.max_batch_size = in.max_batch_size;
        wq.max_transfer_size = in.max_transfer_size;
        group.wqs.push_back(i);
        config.wqs.push_back(wq);
    }
    config.groups.push_back(group);
    config.nt_threshold = in.nt_threshold;
    if (in.wait_mode > DP_WAIT_BLOCK) {
        *error = "wait_mode = " + std::to_string(in.wait_mode) + ": not a dp_wait_mode_t";
        return DP_ERR_INVALID;
    }
    config.wait_mode = dp_wait_mode_t(in.wait_mode);
    if (in.cpu_list != nullptr &&
        affinity::parse_cpu_list(in.cpu_list, &config.cpus, error) != DP_OK)
        return DP_ERR_INVALID;
    if (dp_status_t s = validate_config(config, error); s != DP_OK) return s;
    *out = std::move(config);
    return DP_OK;
}

dp_status_t config_from_json(const std::string &text, DeviceConfig *out, std::string *error) {
    DeviceConfig config;
    try {
        json doc = json::parse(text, nullptr, true, /*ignore_comments=*/true);
        if (doc.is_array()) {
            if (doc.size() != 1) fail("(top level)", "expected one device, got " +
                                                         std::to_string(doc.size()));
            doc = doc[0];
        }
        parse_device(doc, &config);
    } catch (const json::parse_error &e) {
        *error = std::string("not valid JSON: ") + e.what();
        return DP_ERR_INVALID;
    } catch (const ParseError &e) {
        *error = e.message;
        return DP_ERR_INVALID;
    }
    if (dp_status_t s = validate_config(config, error); s != DP_OK) return s;
    *out = std::move(config);
    return DP_OK;
}

std::string config_to_json(const DeviceConfig &config) {
    // "dsa0" -> "0": accel-config numbers a device's engines and groups
    // after it (engine0.3, group0.1).
    const size_t digits = config.name.find_first_of("0123456789");
    const std::string number = digits == std::string::npos ? "0" : config.name.substr(digits);
    json groups = json::array();
    uint32_t next_engine = 0;
    for (size_t g = 0; g < config.groups.size(); ++g) {
        const GroupConfig &group = config.groups[g];
        json wqs = json::array();
        for (uint32_t index : group.wqs) {
            const WqConfig &wq = config.wqs[index];
            wqs.push_back({{"dev", wq.name},
                           {"mode", wq.mode == DP_WQ_SHARED ? "shared" : "dedicated"},
                           {"size", wq.size},
                           {"group_id", g},
                           {"priority", wq.priority},
                           {"block_on_fault", wq.block_on_fault ? 1 : 0},
                           {"max_batch_size", wq.max_batch_size},
                           {"max_transfer_size", wq.max_transfer_size},
                           {"threshold", wq.threshold},
                           {"type", "user"},
                           {"state", "enabled"}});
        }
        json engines = json::array();
        for (uint32_t e = 0; e < group.engines; ++e)
            engines.push_back({{"dev", "engine" + number + "." + std::to_string(next_engine++)},
                               {"group_id", g}});
        groups.push_back(
            {{"dev", group.name}, {"grouped_workqueues", wqs}, {"grouped_engines", engines}});
    }
    std::string cpu_list;
    for (int cpu : config.cpus) cpu_list += (cpu_list.empty() ? "" : ",") + std::to_string(cpu);
    json device = {{"dev", config.name},
                   {"state", "enabled"},
                   {"groups", groups},
                   {"wait_mode", wait_mode_name(config.wait_mode)},
                   {"nt_threshold", config.nt_threshold},
                   {"idle_spin_us", config.idle_spin_us},
                   {"backend", config.backend == DeviceConfig::Backend::idxd ? "idxd" : "software"}};
    if (!cpu_list.empty()) device["cpu_list"] = cpu_list;
    if (!config.idxd_queue.empty()) device["idxd_queue"] = config.idxd_queue;
    return json::array({device}).dump(2) + "\n";
}

const char *wait_mode_name(dp_wait_mode_t mode) {
    switch (mode) {
        case DP_WAIT_SPIN: return "spin";
        case DP_WAIT_PAUSE: return "pause";
        case DP_WAIT_YIELD: return "yield";
        case DP_WAIT_BLOCK: return "block";
        default: return "default";
    }
}

bool parse_wait_mode(const std::string &text, dp_wait_mode_t *mode) {
    for (dp_wait_mode_t m : {DP_WAIT_SPIN, DP_WAIT_PAUSE, DP_WAIT_YIELD, DP_WAIT_BLOCK}) {
        if (text == wait_mode_name(m)) {
            *mode = m;
            return true;
        }
    }
    return false;
}

}  // namespace deputy::mover
