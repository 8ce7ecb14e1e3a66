// The C API of include/deputy/context.h: thin wrappers over client::Context.
#include <deputy/context.h>
#include <deputy/heap.h>
#include <dirent.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "channel/control.h"
#include "client/agent_mover.h"
#include "client/context.h"
#include "client/handles.h"
#include "common/affinity.h"
#include "common/check.h"
#include "common/log.h"


namespace {
namespace control = deputy::channel::control;
using deputy::channel::MsgType;

// Heap memory is reached in place once the heap is shared: registering a
// range of it is a no-op (and costs the agent no registration slot).
bool in_shared_heap(dp_context_t *ctx, const void *addr, size_t bytes) {
    return ctx->impl->heap_shared() && dp_heap_contains(addr, bytes);
}
}  // namespace

extern "C" dp_status_t dp_init(const dp_config_t *config, dp_context_t **ctx) {
    if (ctx == nullptr) return DP_ERR_INVALID;
    *ctx = nullptr;
    deputy::client::ClientOptions options;
    DP_CHECK(deputy::client::options_from_config(config, &options));
    std::unique_ptr<deputy::client::Context> impl;
    DP_CHECK(deputy::client::Context::open(options, &impl));
    *ctx = new dp_context{std::move(impl)};
    return DP_OK;
}

extern "C" dp_status_t dp_finalize(dp_context_t *ctx) {
    if (ctx == nullptr) return DP_ERR_INVALID;
    if (int open = ctx->impl->open_movers().load(); open != 0)
        DP_FAIL(DP_ERR_INVALID, "dp_finalize: {} mover(s) from dp_mover_attach still open; "
                "dp_mover_close them first", open);
    delete ctx;
    return DP_OK;
}

extern "C" void *dp_malloc(dp_context_t *ctx, size_t bytes) {
    if (ctx == nullptr) return nullptr;
    return ctx->impl->pool().allocate(bytes);
}

extern "C" void dp_free(dp_context_t *ctx, void *ptr) {
    if (ctx == nullptr || ptr == nullptr) return;
    if (!ctx->impl->pool().release(ptr))
        DP_LOG_ERROR("dp_free: {} was not returned by dp_malloc on this context", ptr);
}

extern "C" dp_status_t dp_mem_register(dp_context_t *ctx, const void *addr, size_t bytes) {
    if (ctx == nullptr || addr == nullptr || bytes == 0) return DP_ERR_INVALID;
    if (in_shared_heap(ctx, addr, bytes)) return DP_OK;
    // A remote agent reaches no memory of this host in place: every
    // operation takes its bytes per post (staged, or exposed for RMA), so
    // there is nothing to register, and a program written for a local
    // agent runs unchanged.
    if (ctx->impl->remote()) return DP_OK;
    control::Register m{reinterpret_cast<uint64_t>(addr), bytes, control::RegionKind::kDirect};
    std::vector<uint8_t> payload;
    control::encode(m, &payload);
    return ctx->impl->simple_request(MsgType::kRegister, payload, "dp_mem_register");
}

extern "C" dp_status_t dp_mem_deregister(dp_context_t *ctx, const void *addr) {
    if (ctx == nullptr || addr == nullptr) return DP_ERR_INVALID;
    if (in_shared_heap(ctx, addr, 1) || ctx->impl->remote()) return DP_OK;
    std::vector<uint8_t> payload;
    control::encode_deregister(reinterpret_cast<uint64_t>(addr), &payload);
    return ctx->impl->simple_request(MsgType::kDeregister, payload, "dp_mem_deregister");
}

extern "C" dp_memory_mode_t dp_memory_mode(dp_context_t *ctx) {
    return ctx ? ctx->impl->options().memory_mode : DP_MEMORY_DIRECT;
}

extern "C" int dp_mem_mapped(dp_context_t *ctx, const void *addr, size_t bytes) {
    return ctx != nullptr && ctx->impl->mapped(addr, bytes) ? 1 : 0;
}

extern "C" dp_status_t dp_mover_attach(dp_context_t *ctx, dp_mover_t **mover) {
    if (ctx == nullptr || mover == nullptr) return DP_ERR_INVALID;
    *mover = nullptr;
    DP_CHECK(ctx->impl->check_alive_now());
    *mover = deputy::mover::make_remote_mover(
        std::make_unique<deputy::client::AgentMover>(ctx->impl.get()));
    return DP_OK;
}

extern "C" int dp_agent_cpus(dp_context_t *ctx, unsigned char *mask, size_t bytes) {
    if (ctx == nullptr || (mask == nullptr && bytes != 0)) return DP_ERR_INVALID;
    if (bytes) std::memset(mask, 0, bytes);
    if (ctx->impl->remote()) return DP_ERR_UNSUPPORTED;  // its CPUs are another host's
    const pid_t agent = ctx->impl->agent_pid();
    const std::string tasks = "/proc/" + std::to_string(agent) + "/task";
    DIR *dir = opendir(tasks.c_str());
    if (!dir) return DP_ERR_AGENT_LOST;
    int count = 0;
    while (dirent *e = readdir(dir)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        for (int cpu : deputy::affinity::allowed_cpus(pid_t(std::atoi(e->d_name)))) {
            if (size_t(cpu) / 8 >= bytes) continue;
            unsigned char &byte = mask[cpu / 8];
            const unsigned char bit = static_cast<unsigned char>(1u << (cpu % 8));
            if (!(byte & bit)) ++count;
            byte |= bit;
        }
    }
    closedir(dir);
    return count;
}

extern "C" dp_status_t dp_agent_check(dp_context_t *ctx) {
    if (ctx == nullptr) return DP_ERR_INVALID;
    return ctx->impl->check_alive_now();
}
