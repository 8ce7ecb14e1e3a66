#include "agent/agent_config.h"

#include <deputy/coll.h>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/affinity.h"
#include "common/check.h"
#include "common/log.h"
#include "mover/space_table.h"

namespace deputy::agent {

bool valid_inter_algorithm(const std::string &name) {
    for (const char *a : {"auto", "native", "ring", "recursive_doubling", "rd", "rabenseifner"})
        if (name == a) return true;
    return false;
}

namespace {

using nlohmann::json;

struct KeyError {
    std::string message;
};

uint64_t get_uint(const json &v, const std::string &path, uint64_t max) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
        throw KeyError{fmt::format("{}: expected a non-negative integer, got {}", path,
                                   v.type_name())};
    uint64_t x = v.get<uint64_t>();
    if (x > max) throw KeyError{fmt::format("{}: {} is above the limit {}", path, x, max)};
    return x;
}

std::string get_string(const json &v, const std::string &path) {
    if (!v.is_string())
        throw KeyError{fmt::format("{}: expected a string, got {}", path, v.type_name())};
    return v.get<std::string>();
}

void read_token_file(const std::string &path, std::string *token) {
    std::ifstream in(path);
    if (!in) throw KeyError{fmt::format("agent.token_file: cannot read '{}'", path)};
    std::getline(in, *token);
    if (token->empty()) throw KeyError{fmt::format("agent.token_file: '{}' is empty", path)};
}

void apply_agent_keys(const json &agent, AgentConfig *c) {
    if (!agent.is_object())
        throw KeyError{fmt::format("agent: expected an object, got {}", agent.type_name())};
    for (const auto &[key, v] : agent.items()) {
        const std::string path = "agent." + key;
        if (key == "socket") c->socket_path = get_string(v, path);
        else if (key == "token") c->token = get_string(v, path);
        else if (key == "token_file") read_token_file(get_string(v, path), &c->token);
        else if (key == "engines") {
            c->engines = uint32_t(get_uint(v, path, DP_MOVER_MAX_ENGINES));
            c->engines_set = true;
        }
        else if (key == "cpus") c->cpus = get_string(v, path);
        else if (key == "backend") {
            c->backend = get_string(v, path);
            if (c->backend != "software" && c->backend != "idxd")
                throw KeyError{fmt::format("{}: '{}' is not 'software' or 'idxd'", path, c->backend)};
        }
        else if (key == "idxd_queue") c->idxd_queue = get_string(v, path);
        else if (key == "agent_cores") c->agent_cores = get_string(v, path);
        else if (key == "pool_bytes") c->pool_bytes = get_uint(v, path, 1ull << 40);
        else if (key == "max_pool_bytes") c->max_pool_bytes = get_uint(v, path, 1ull << 40);
        else if (key == "ring_size") c->ring_size = uint32_t(get_uint(v, path, 65536));
        else if (key == "max_ring_size") c->max_ring_size = uint32_t(get_uint(v, path, 65536));
        else if (key == "max_clients") c->max_clients = uint32_t(get_uint(v, path, 1000));
        else if (key == "max_connecting") c->max_connecting = uint32_t(get_uint(v, path, 65536));
        else if (key == "attach_timeout_ms")
            c->attach_timeout_ms = uint32_t(get_uint(v, path, 600000));
        else if (key == "max_total_pool_bytes") c->max_total_pool_bytes = get_uint(v, path, 1ull << 48);
        else if (key == "pool_pages") {
            const std::string how = get_string(v, path);
            if (how != "prefault" && how != "lazy")
                throw KeyError{fmt::format("{}: '{}' is not prefault or lazy", path, how)};
            c->pool_prefault = how == "prefault";
        }
        else if (key == "max_teams_per_client")
            c->max_teams_per_client = uint32_t(get_uint(v, path, 65536));
        else if (key == "max_forming_teams") c->max_forming_teams = uint32_t(get_uint(v, path, 1u << 20));
        else if (key == "max_process_pending_joins")
            c->max_process_pending_joins = uint32_t(get_uint(v, path, 1u << 20));
        else if (key == "max_team_timeout_ms")
            c->max_team_timeout_ms = uint32_t(get_uint(v, path, UINT32_MAX));
        else if (key == "engine_hold_ms") c->engine_hold_ms = uint32_t(get_uint(v, path, 600000));
        else if (key == "max_process_clients")
            c->max_process_clients = uint32_t(get_uint(v, path, 1u << 20));
        else if (key == "max_pending_joins")
            c->max_pending_joins = uint32_t(get_uint(v, path, 65536));
        else if (key == "max_team_queue") c->max_team_queue = uint32_t(get_uint(v, path, 65536));
        else if (key == "max_queued_counts_bytes")
            c->max_queued_counts_bytes = get_uint(v, path, 1ull << 32);
        else if (key == "test_stand_in_key") c->test_stand_in_key = get_string(v, path);
        else if (key == "test_stand_in_block")
            c->test_stand_in_block = uint32_t(get_uint(v, path, DP_TEAM_MAX_SIZE));
        else if (key == "coll_chunk_bytes") c->coll_chunk_bytes = get_uint(v, path, 1ull << 30);
        else if (key == "coll_direct_chunk_bytes")
            c->coll_direct_chunk_bytes = get_uint(v, path, 1ull << 30);
        else if (key == "coll_inline_bytes") c->coll_inline_bytes = get_uint(v, path, 1ull << 20);
        else if (key == "rank_execution_bytes") {
            c->rank_execution_bytes = get_uint(v, path, 1ull << 36);
            c->rank_execution_set = true;
        }
        else if (key == "p2p_eager_bytes") c->p2p_eager_bytes = get_uint(v, path, 16ull << 20);
        else if (key == "p2p_held_bytes") c->p2p_held_bytes = get_uint(v, path, 1ull << 40);
        else if (key == "p2p_held_messages")
            c->p2p_held_messages = get_uint(v, path, 1ull << 32);
        else if (key == "exit_when_unused_ms")
            c->exit_when_unused_ms = uint32_t(get_uint(v, path, 86'400'000));
        else if (key == "p2p_node_eager_bytes")
            c->p2p_node_eager_bytes = get_uint(v, path, 16ull << 20);
        else if (key == "p2p_node_credit_bytes")
            c->p2p_node_credit_bytes = get_uint(v, path, 1ull << 40);
        else if (key == "p2p_node_stage_bytes")
            c->p2p_node_stage_bytes = get_uint(v, path, 1ull << 40);
        else if (key == "max_registrations")
            c->max_registrations = uint32_t(get_uint(v, path, 65536));
        else if (key == "max_heap_bytes") c->max_heap_bytes = get_uint(v, path, 1ull << 46);
        else if (key == "max_staged_bytes") c->max_staged_bytes = get_uint(v, path, 4ull << 20);
        else if (key == "max_direct_bytes") c->max_direct_bytes = get_uint(v, path, 1ull << 32);
        else if (key == "idle_spin_us") {
            c->idle_spin_us = uint32_t(get_uint(v, path, 1000000));
            c->idle_spin_set = true;
        }
        else if (key == "engine_idle_spin_us")
            c->engine_idle_spin_us = uint32_t(get_uint(v, path, 1000000));
        else if (key == "listen") c->listen = get_string(v, path);
        else if (key == "key_file") c->key_file = get_string(v, path);
        else if (key == "insecure_tcp") {
            if (!v.is_boolean())
                throw KeyError{fmt::format("{}: expected true or false, got {}", path, v.dump())};
            c->insecure_tcp = v.get<bool>();
        }
        else if (key == "max_remote_clients")
            c->max_remote_clients = uint32_t(get_uint(v, path, 65536));
        else if (key == "max_handshakes") c->max_handshakes = uint32_t(get_uint(v, path, 4096));
        else if (key == "handshake_timeout_ms")
            c->handshake_timeout_ms = uint32_t(get_uint(v, path, 600000));
        else if (key == "remote_timeout_ms")
            c->remote_timeout_ms = uint32_t(get_uint(v, path, 3'600'000));
        else if (key == "dumpable") {
            if (!v.is_boolean())
                throw KeyError{fmt::format("{}: expected true or false, got {}", path, v.dump())};
            c->dumpable = v.get<bool>();
        }
        else if (key == "idle_poll") {
            const std::string how = get_string(v, path);
            if (how != "pause" && how != "yield")
                throw KeyError{fmt::format("{}: '{}' is not pause or yield", path, how)};
            c->idle_yield = how == "yield";
        }
        else if (key == "log_level") {
            c->log_level = v.is_number_integer() ? std::to_string(v.get<int64_t>()) : get_string(v, path);
            if (!log::parse_level(c->log_level))
                throw KeyError{fmt::format("{}: '{}' is not a level (10..70 or a name such as "
                                           "info)", path, c->log_level)};
        } else if (key == "request_timeout_ms")
            c->request_timeout_ms = uint32_t(get_uint(v, path, 600000));
        else if (key == "node_timeout_ms")
            c->node_timeout_ms = uint32_t(get_uint(v, path, 3600000));
        else if (key == "inter_algorithm") {
            c->inter_algorithm = get_string(v, path);
            if (!valid_inter_algorithm(c->inter_algorithm))
                throw KeyError{fmt::format("{}: '{}' is not one of {}", path, c->inter_algorithm,
                                           kInterAlgorithms)};
        }
        else throw KeyError{fmt::format("{}: unknown key", path)};
    }
}

bool power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

void apply_backend(AgentConfig *c) {
    if (c->backend.empty()) return;
    c->device.backend = c->backend == "idxd" ? mover::DeviceConfig::Backend::idxd
                                             : mover::DeviceConfig::Backend::software;
    c->device.idxd_queue = c->idxd_queue;
}

// agent_cores -> cpus, the service thread's CPUs and the engine count.
dp_status_t place_agent(AgentConfig *c, std::string *error) {
    c->placed = true;
    if (c->agent_cores.empty()) return DP_OK;
    if (!c->cpus.empty()) {
        const bool flag = c->agent_cores_flag.rfind("--", 0) == 0;
        *error = fmt::format("{} and {} both say where the engines run; give one",
                             c->agent_cores_flag, flag ? "--cpus" : "agent.cpus");
        return DP_ERR_INVALID;
    }
    AgentCores request;
    DP_CHECK(parse_agent_cores(c->agent_cores, c->agent_cores_flag, &request, error));
    Topology topology;
    DP_CHECK(load_machine_topology(&topology, error));
    DP_CHECK(compute_placement(topology, request, c->agent_cores_flag, &c->placement, error));
    c->topology = topology.summary();
    if (!c->placement.pinned()) return DP_OK;
    std::string cpus;
    for (int cpu : c->placement.engine_cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(cpu);
    c->cpus = cpus;
    if (!c->engines_set && !c->device_given && c->placement.agent_cores > 0)
        c->engines = uint32_t(std::min(c->placement.agent_cores, DP_MOVER_MAX_ENGINES));
    return DP_OK;
}

// The engines poll as the service thread does ("idle_poll"), for
// engine_idle_spin_us when given; polite ones that share the ranks' CPUs
// (nothing pinned) also yield after this much work without a break.
// Measured on 2 CPUs (docs/PERFORMANCE.md, "Engines shared by teams"): an
// 8-byte allreduce's p99 beside another team's 64 MiB ones was 110-130x its
// p99 alone without yielding; a yield after each descriptor of 64 KiB or
// more (the rule before this one) cost messages of 64 KiB-4 MiB 3-5x their
// bandwidth (docs/decisions/2026-11-30-polite-engines-by-time.md).
constexpr uint64_t kSharedEngineYieldNs = 50'000;

void apply_engine_polling(AgentConfig *c) {
    c->device.idle_yield = c->idle_yield;
    c->device.yield_after_ns = c->idle_yield && c->device.cpus.empty() ? kSharedEngineYieldNs : 0;
    if (c->engine_idle_spin_us) c->device.idle_spin_us = *c->engine_idle_spin_us;
}

}  // namespace

uint32_t shared_placement_engines(size_t agent_cpus) {
    // Two engines, measured (docs/decisions/2026-11-26-engines-in-shared-
    // placement.md, "Engines when the agent shares the ranks' CPUs"): while the ranks wait, a large operation's
    // chunks run on both of their cores; small operations run on the service
    // thread and are not slower; idle engines yield their CPU. More than two
    // has not been measured on a machine with more cores.
    return uint32_t(std::min<size_t>(std::max<size_t>(agent_cpus, 1), 2));
}

dp_status_t load_config_text(const std::string &text, AgentConfig *config, std::string *error) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::parse_error &e) {
        *error = fmt::format("agent config: not valid JSON: {}", e.what());
        return DP_ERR_INVALID;
    }
    try {
        const json *device = nullptr;
        if (doc.is_object() && (doc.contains("agent") || doc.contains("device"))) {
            for (const auto &[key, v] : doc.items()) {
                if (key == "agent") apply_agent_keys(v, config);
                else if (key == "device") device = &v;
                else throw KeyError{fmt::format("{}: unknown key (expected 'agent' or 'device')", key)};
            }
        } else {
            device = &doc;
        }
        if (device) {
            std::string device_error;
            if (mover::config_from_json(device->dump(), &config->device, &device_error) != DP_OK)
                throw KeyError{"device: " + device_error};
            config->device_given = true;
        }
    } catch (const KeyError &e) {
        *error = "agent config: " + e.message;
        return DP_ERR_INVALID;
    }
    return DP_OK;
}

dp_status_t load_config_file(const std::string &path, AgentConfig *config, std::string *error) {
    std::ifstream in(path);
    if (!in) {
        *error = fmt::format("agent config: cannot read '{}'", path);
        return DP_ERR_IO;
    }
    std::stringstream text;
    text << in.rdbuf();
    return load_config_text(text.str(), config, error);
}

dp_status_t finalize_config(AgentConfig *c, std::string *error) {
    auto bad = [&](std::string text) {
        *error = "agent config: " + std::move(text);
        return DP_ERR_INVALID;
    };
    if (!power_of_two(c->ring_size) || c->ring_size > c->max_ring_size)
        return bad(fmt::format("ring_size {} must be a power of two <= max_ring_size {}",
                               c->ring_size, c->max_ring_size));
    if (c->pool_bytes > c->max_pool_bytes)
        return bad(fmt::format("pool_bytes {} is above max_pool_bytes {}", c->pool_bytes,
                               c->max_pool_bytes));
    if (c->max_clients == 0) return bad("max_clients must be at least 1");
    // One device address space per client; slot 0 is the agent's own.
    if (c->max_clients >= mover::SpaceTable::kSlots)
        return bad(fmt::format("max_clients {} must be below {}", c->max_clients,
                               mover::SpaceTable::kSlots));
    if (c->max_connecting == 0) return bad("max_connecting must be at least 1");
    if (!c->listen.empty() && c->listen.rfind("tcp://", 0) != 0)
        return bad(fmt::format("listen '{}' is not tcp://ADDR:PORT", c->listen));
    if (!c->listen.empty() && c->key_file.empty() && !c->insecure_tcp)
        return bad("listen needs key_file (a key file as `deputy bench channel --keygen FILE` "
                   "makes it), or insecure_tcp to serve remote clients in clear");
    if (c->max_handshakes == 0) return bad("max_handshakes must be at least 1");
    if (c->handshake_timeout_ms == 0) return bad("handshake_timeout_ms must be at least 1");
    if (c->attach_timeout_ms == 0) return bad("attach_timeout_ms must be at least 1");
    if (c->max_teams_per_client == 0) return bad("max_teams_per_client must be at least 1");
    if (c->max_forming_teams == 0) return bad("max_forming_teams must be at least 1");
    if (c->max_pending_joins == 0) return bad("max_pending_joins must be at least 1");
    if (c->max_process_pending_joins == 0)
        return bad("max_process_pending_joins must be at least 1");
    if (c->max_team_timeout_ms == 0) return bad("max_team_timeout_ms must be at least 1");
    if (c->max_process_clients == 0) return bad("max_process_clients must be at least 1");
    if (c->engine_hold_ms == 0) return bad("engine_hold_ms must be at least 1");
    if (c->max_team_queue == 0) return bad("max_team_queue must be at least 1");
    // (Below 512 KiB a member of the largest teams cannot post a vector
    // collective at all: docs/agent.md.)
    if (c->max_queued_counts_bytes < 4096) return bad("max_queued_counts_bytes must be at least 4096");
    if (c->test_stand_in_key.empty() != (c->test_stand_in_block == 0))
        return bad("test_stand_in_key and test_stand_in_block go together (a key, and a block "
                   "of at least 1 rank)");
    if (c->coll_chunk_bytes < 4096) return bad("coll_chunk_bytes must be at least 4096");
    if (c->coll_direct_chunk_bytes < 4096) return bad("coll_direct_chunk_bytes must be at least 4096");
    if (c->max_heap_bytes == 0) {
        const uint64_t memory = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
        c->max_heap_bytes = (memory + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    }
    if (c->max_total_pool_bytes == 0)
        c->max_total_pool_bytes = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
    if (c->pool_bytes > c->max_total_pool_bytes)
        return bad(fmt::format("pool_bytes {} is above max_total_pool_bytes {}", c->pool_bytes,
                               c->max_total_pool_bytes));
    // A command-line flag's error stands alone; a file key's says it is the file's.
    if (!c->placed && place_agent(c, error) != DP_OK)
        return c->agent_cores_flag.rfind("--", 0) == 0 ? DP_ERR_INVALID : bad(*error);
    if (!c->engines_set && !c->device_given && c->cpus.empty())
        c->engines = shared_placement_engines(affinity::allowed_cpus(0).size());
    if (!c->rank_execution_set && !c->cpus.empty()) c->rank_execution_bytes = 0;
    if (!c->cpus.empty()) {
        // CPUs of its own: the agent keeps polling them while a job runs.
        // Asleep, it made every post after a compute phase longer than its
        // 50 us window pay a doorbell and a wake-up (4-7 us against 0.6-1.1
        // through libdeputy-mpi), and operations of 256 KiB-1 MiB overlapped
        // 68-95 % instead of 92-99 % (docs/decisions/2026-11-26-own-core-
        // agent-polls.md, "An agent with a core of its own keeps polling it").
        if (!c->idle_spin_set) c->idle_spin_us = kOwnCoreIdleSpinUs;
        // Its engines too, when they leave the service thread a CPU. As
        // many engines as CPUs share them with the service thread, which
        // moves small operations itself: an idle engine polling beside it
        // took turns with it at every sched_yield, and osu_latency took
        // 6.1 us a message against 5.4 with the device's 200 us window
        // (docs/decisions/2026-11-30-one-cpu-agent-threads.md).
        std::vector<int> cpus;
        if (!c->engine_idle_spin_us && !c->device_given &&
            affinity::parse_cpu_list(c->cpus, &cpus, error) == DP_OK && cpus.size() > c->engines)
            c->engine_idle_spin_us = kOwnCoreIdleSpinUs;
    }
    if (!c->idxd_queue.empty() && c->backend != "idxd")
        return bad("idxd_queue '" + c->idxd_queue + "' is set but backend is not 'idxd'");
    if (c->device_given) {
        if (!c->cpus.empty()) {
            std::vector<int> cpus;
            if (affinity::parse_cpu_list(c->cpus, &cpus, error) != DP_OK) return bad("cpus: " + *error);
            c->device.cpus = cpus;
        }
        if (!c->backend.empty() && c->device.backend != mover::DeviceConfig::Backend::software)
            return bad("backend: the device sets its own backend; give it in one place");
        apply_backend(c);
        apply_engine_polling(c);
        return DP_OK;
    }
    if (c->engines == 0) return bad("engines must be at least 1");
    dp_mover_config_t simple = DP_MOVER_CONFIG_INITIALIZER;
    simple.num_engines = c->engines;
    simple.num_wqs = 1;
    simple.wq_size = 1024;
    simple.cpu_list = c->cpus.empty() ? nullptr : c->cpus.c_str();
    std::string device_error;
    if (mover::config_from_struct(simple, &c->device, &device_error) != DP_OK)
        return bad(device_error);
    apply_backend(c);
    apply_engine_polling(c);
    return DP_OK;
}

}  // namespace deputy::agent
