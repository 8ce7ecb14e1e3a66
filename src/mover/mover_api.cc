// The mover's C API: thin wrappers over mover::Device.
#include <deputy/mover.h>

#include <cstring>
#include <string>

#include "common/log.h"
#include "mover/config.h"
#include "mover/device.h"
#include "mover/remote_device.h"
#include "mover/wait.h"

// Exactly one of the two is set: a device in this process, or one the agent
// hosts for us (src/client).
struct dp_mover {
    std::unique_ptr<deputy::mover::Device> device;
    std::unique_ptr<deputy::mover::RemoteDevice> remote;
};

namespace deputy::mover {
dp_mover_t *make_remote_mover(std::unique_ptr<RemoteDevice> remote) {
    return new dp_mover{nullptr, std::move(remote)};
}
const Device *local_device(const dp_mover_t *mover) { return mover->device.get(); }
}  // namespace deputy::mover

namespace {

thread_local std::string t_last_error;

dp_status_t open_device(const deputy::mover::DeviceConfig &config, dp_mover_t **mover) {
    std::unique_ptr<deputy::mover::Device> device;
    dp_status_t s = deputy::mover::Device::create(config, &device, &t_last_error);
    if (s != DP_OK) {
        DP_LOG_ERROR("dp_mover_open: {}", t_last_error);
        return s;
    }
    *mover = new dp_mover{std::move(device), nullptr};
    return DP_OK;
}

}  // namespace

extern "C" dp_status_t dp_mover_open(const dp_mover_config_t *config, dp_mover_t **mover) {
    if (mover == nullptr) return DP_ERR_INVALID;
    *mover = nullptr;
    dp_mover_config_t defaults = DP_MOVER_CONFIG_INITIALIZER;
    deputy::mover::DeviceConfig device_config;
    dp_status_t s = deputy::mover::config_from_struct(config ? *config : defaults, &device_config,
                                                      &t_last_error);
    if (s != DP_OK) {
        DP_LOG_ERROR("dp_mover_open: {}", t_last_error);
        return s;
    }
    return open_device(device_config, mover);
}

extern "C" dp_status_t dp_mover_open_json(const char *json_text, dp_mover_t **mover,
                                          const char **error) {
    if (error) *error = nullptr;
    if (mover == nullptr || json_text == nullptr) return DP_ERR_INVALID;
    *mover = nullptr;
    deputy::mover::DeviceConfig device_config;
    dp_status_t s = deputy::mover::config_from_json(json_text, &device_config, &t_last_error);
    if (s == DP_OK) s = open_device(device_config, mover);
    else DP_LOG_ERROR("dp_mover_open_json: {}", t_last_error);
    if (s != DP_OK && error) *error = t_last_error.c_str();
    return s;
}

extern "C" dp_status_t dp_mover_close(dp_mover_t *mover) {
    if (mover == nullptr) return DP_ERR_INVALID;
    delete mover;
    return DP_OK;
}

extern "C" dp_status_t dp_mover_submit(dp_mover_t *mover, uint32_t wq, const dp_desc_t *desc) {
    if (mover == nullptr || desc == nullptr) return DP_ERR_INVALID;
    if (mover->remote) return mover->remote->submit(wq, *desc);
    return mover->device->submit(wq, *desc);
}

extern "C" dp_status_t dp_mover_wait(dp_mover_t *mover, dp_completion_t *comp, dp_wait_mode_t mode,
                                     int64_t timeout_ns) {
    if (mover == nullptr || comp == nullptr) return DP_ERR_INVALID;
    if (mover->remote) return mover->remote->wait(comp, mode, timeout_ns);
    if (mode == DP_WAIT_DEFAULT) mode = mover->device->config().wait_mode;
    if (mode > DP_WAIT_BLOCK) return DP_ERR_INVALID;
    return deputy::mover::wait_completion(comp, mode, timeout_ns);
}

extern "C" dp_status_t dp_mover_get_stats(dp_mover_t *mover, dp_mover_stats_t *stats) {
    if (mover == nullptr || stats == nullptr || stats->size == 0) return DP_ERR_INVALID;
    dp_mover_stats_t full;
    if (mover->remote) mover->remote->stats(&full);
    else mover->device->stats(&full);
    // Copy only what the caller's (possibly older, smaller) struct holds.
    size_t bytes = std::min(stats->size, sizeof(full));
    size_t caller_size = stats->size;
    std::memcpy(stats, &full, bytes);
    stats->size = caller_size;
    return DP_OK;
}
