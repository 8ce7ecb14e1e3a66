#include "bench/coll/session.h"

#include <deputy/heap.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "channel/agent_address.h"
#include "channel/agent_info.h"
#include "common/affinity.h"
#include "common/log.h"
#include "common/units.h"

namespace deputy::bench::coll {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kAgentDefaultPool = 64ull << 20;  // docs/agent.md: pool_bytes default

uint64_t round_up(uint64_t n, uint64_t to) {
    return (n + to - 1) / to * to;
}

std::string random_hex(int words) {
    std::random_device rd;
    std::string out;
    for (int i = 0; i < words; ++i) out += fmt::format("{:08x}", rd());
    return out;
}

}  // namespace

uint64_t pool_bytes_for(uint64_t send_bytes, uint64_t recv_bytes) {
    return round_up(send_bytes + recv_bytes, 1ull << 20) + (2ull << 20);
}

bool DeputySession::open(const World &world, Memory memory, dp_wait_mode_t wait,
                         const std::string &agent_socket, uint64_t pool_bytes) {
    dp_config_t config = DP_CONFIG_INITIALIZER;
    config.agent = agent_socket.empty() ? nullptr : agent_socket.c_str();
    agent_address_ = channel::resolve_agent_address(agent_socket);
    config.memory_mode = memory == Memory::staged ? DP_MEMORY_STAGED
                         : memory == Memory::rdma ? DP_MEMORY_RDMA
                                                  : DP_MEMORY_DIRECT;
    config.wait_mode = wait;
    // Mapped buffers live in the pool; staged mode's bounce buffers too.
    if (memory != Memory::direct && memory != Memory::heap && pool_bytes > kAgentDefaultPool)
        config.pool_bytes = pool_bytes;
    // The team needs the job's secret: rank 0's (deputy launch's, or one it
    // draws), broadcast, so that only this job's ranks hold it.
    const char *launched = std::getenv("DEPUTY_JOB_SECRET");
    secret_ = world.broadcast(world.rank() != 0            ? std::string()
                              : launched && *launched ? std::string(launched)
                                                      : random_hex(8));
    config.job_secret = secret_.c_str();
    dp_status_t s = dp_init(&config, &ctx_);
    if (s != DP_OK) {
        DP_APP_ERROR("rank {}: dp_init: {}{}", world.rank(), dp_strerror(s),
                     s == DP_ERR_NO_AGENT ? " (start one: deputy agent --daemon; or set "
                                                "DEPUTY_AGENT / --agent-socket; or --no-deputy)"
                     : config.pool_bytes != 0
                             ? fmt::format(" (asked for a {} pool for --memory {}: raise the "
                                           "agent's max_pool_bytes or use --memory direct)",
                                           units::format_size(config.pool_bytes),
                                           memory_name(memory))
                             : "");
        ctx_ = nullptr;
    }
    if (!world.all(ctx_ != nullptr)) return false;

    key_ = world.broadcast(world.rank() == 0 ? "bench-coll-" + random_hex(2) : std::string());
    s = dp_team_create(ctx_, key_.c_str(), world.rank(), world.size(), &team_);
    if (s != DP_OK) {
        DP_APP_ERROR("rank {}: dp_team_create(key {}, rank {}, size {}) with --memory {}: {}",
                     world.rank(), key_, world.rank(), world.size(), memory_name(memory),
                     dp_strerror(s));
        team_ = nullptr;
    }
    return world.all(team_ != nullptr);
}

bool DeputySession::probe(const World &world, Memory memory, void *send, void *recv) {
    dp_status_t s = dp_allreduce(send, recv, 1, DP_UINT8, DP_SUM, team_);
    if (s != DP_OK)
        DP_APP_ERROR("rank {}: --memory {}: a deputy allreduce on these buffers fails: {}",
                     world.rank(), memory_name(memory), dp_strerror(s));
    return world.all(s == DP_OK);
}

nlohmann::json DeputySession::agent_info() const {
    // An agent on another host (tcp://) answers no info request over the
    // network: its placement and counters are unknown here.
    if (agent_address_.rfind("tcp://", 0) == 0) return {};
    std::string text, error;
    const char *token = std::getenv("DEPUTY_TOKEN");
    if (channel::request_agent_info(agent_address_, token ? token : "", 1'000'000'000, &text,
                                    &error) != DP_OK)
        return {};
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    return j.is_discarded() || !j.is_object() ? nlohmann::json{} : j;
}

std::string DeputySession::placement(const World &world) const {
    // Each rank against its own agent (ranks on other nodes have theirs).
    const nlohmann::json info = agent_info();
    const nlohmann::json *cpus = nullptr;
    if (info.contains("placement") && info["placement"].contains("engine_cpus"))
        cpus = &info["placement"]["engine_cpus"];
    std::vector<int> engines;
    std::string error;
    const bool known = cpus != nullptr && cpus->is_string() &&
                       affinity::parse_cpu_list(cpus->get<std::string>(), &engines, &error) == DP_OK;
    bool overlap = engines.empty();  // engines unpinned: they run on the ranks' CPUs too
    for (int cpu : affinity::allowed_cpus(0))
        for (int engine : engines) overlap = overlap || engine == cpu;
    const std::vector<double> any = world.maximum({known ? 0.0 : 1.0, overlap ? 1.0 : 0.0});
    if (any[0] > 0) return "";
    return any[1] > 0 ? "shared" : "own-core";
}

std::map<std::string, uint64_t> DeputySession::inter_node_steps() const {
    std::map<std::string, uint64_t> steps;
    const nlohmann::json j = agent_info();
    if (!j.contains("teams")) return steps;
    for (const auto &t : j["teams"])
        if (t.value("key", "") == key_ && t.contains("inter_node_steps"))
            for (const auto &[name, n] : t["inter_node_steps"].items())
                if (n.is_number_unsigned()) steps[name] = n.get<uint64_t>();
    return steps;
}

void DeputySession::close() {
    if (team_ != nullptr) dp_team_destroy(team_);
    team_ = nullptr;
    if (ctx_ != nullptr) dp_finalize(ctx_);
    ctx_ = nullptr;
}

void *Buffers::get(uint64_t bytes, std::string *error, const char *what) {
    bytes = std::max<uint64_t>(bytes, 64);
    void *p = nullptr;
    if (memory_ == Memory::mapped) {
        p = dp_malloc(ctx_, bytes);
        if (p == nullptr) {
            *error = fmt::format(
                "dp_malloc of the {} buffer ({} B) failed: the agent's pool is too "
                "small (raise its pool_bytes/max_pool_bytes, or --memory direct)",
                what, bytes);
            return nullptr;
        }
    } else if (memory_ == Memory::heap) {
        p = dp_heap_alloc(bytes, kPage, 0);
        if (p == nullptr || !dp_mem_mapped(ctx_, p, bytes)) {
            *error = fmt::format("the {} buffer ({} B) is not in a shared heap the agent maps "
                                 "($DEPUTY_HEAP_BYTES too small or 0, or the agent refused it: "
                                 "see its log)",
                                 what, bytes);
            if (p) dp_heap_free(p);
            return nullptr;
        }
    } else {
        p = std::aligned_alloc(kPage, round_up(bytes, kPage));
        if (p == nullptr) {
            *error = fmt::format("cannot allocate the {} buffer ({} B)", what, bytes);
            return nullptr;
        }
    }
    std::memset(p, 0, bytes);  // pre-fault every page
    if (memory_ == Memory::direct) {
        dp_status_t s = dp_mem_register(ctx_, p, bytes);
        if (s != DP_OK) {
            *error = fmt::format("dp_mem_register of the {} buffer ({} B): {}", what, bytes,
                                 dp_strerror(s));
            std::free(p);
            return nullptr;
        }
    }
    return p;
}

void Buffers::put(void *p) {
    if (p == nullptr) return;
    if (memory_ == Memory::mapped) {
        dp_free(ctx_, p);
        return;
    }
    if (memory_ == Memory::heap) {
        dp_heap_free(p);
        return;
    }
    if (memory_ == Memory::direct) dp_mem_deregister(ctx_, p);
    std::free(p);
}

bool Buffers::allocate(Memory memory, dp_context_t *ctx, uint64_t send_bytes, uint64_t recv_bytes,
                       std::string *error) {
    release();
    memory_ = memory;
    ctx_ = ctx;
    send_ = get(send_bytes, error, "send");
    if (send_ == nullptr) return false;
    recv_ = get(recv_bytes, error, "receive");
    return recv_ != nullptr;
}

void Buffers::release() {
    put(send_);
    put(recv_);
    send_ = recv_ = nullptr;
}

}  // namespace deputy::bench::coll
