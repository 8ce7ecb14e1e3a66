#include "bench/rail/options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

#include "bench/rail/rail_error.h"
#include "common/affinity.h"
#include "common/units.h"

namespace deputy::rail {
namespace {

inline constexpr int kMaxRails = 256;
inline constexpr uint64_t kMaxPageSize = 1ull << 30;
inline constexpr uint64_t kMaxPages = 1ull << 24;
inline constexpr int kMaxBatch = 1024;
inline constexpr uint64_t kMaxBuffers = 64;
inline constexpr int kMaxDepth = 65536;

[[noreturn]] void bad(const std::string &message) { throw RailError(message); }

template <typename T>
void check_range(const char *flag, T value, T low, T high) {
    if (value < low || value > high)
        bad(std::string(flag) + " " + std::to_string(value) + " is out of range (" +
            std::to_string(low) + "-" + std::to_string(high) + ")");
}

}  // namespace

const char *role_name(Role role) {
    switch (role) {
    case Role::kServer: return "server";
    case Role::kClient: return "client";
    case Role::kLoopback: return "loopback";
    }
    return "?";
}

int rx_poll_us_for(const std::string &provider_name, int requested) {
    if (requested >= 0) return requested;
    return provider_name == "shm" ? 100 : 0;
}

uint64_t physical_memory_bytes() {
    long pages = sysconf(_SC_PHYS_PAGES);
    long size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0) return 0;
    return uint64_t(pages) * uint64_t(size);
}

void validate(RailOptions &o) {
    if (o.provider.empty()) bad("--provider is empty (examples: tcp, shm, verbs, efa)");
    check_range("--rails", o.rails, 1, kMaxRails);
    check_range("--devices", o.devices, 1, kMaxRails);
    if (o.rails % o.devices != 0)
        bad("--rails " + std::to_string(o.rails) + " is not divisible by --devices " +
            std::to_string(o.devices) + " (each device gets the same number of rails)");
    check_range<uint64_t>("--page-size", o.page_size, 1, kMaxPageSize);
    check_range<uint64_t>("--pages", o.pages, 1, kMaxPages);
    check_range<uint64_t>("--buffers", o.buffers, 1, kMaxBuffers);
    if (o.pages < uint64_t(o.rails_per_device()))
        bad("--pages " + std::to_string(o.pages) + " is less than the rails per device (" +
            std::to_string(o.rails_per_device()) + "): every rail needs a page to write");
    check_range<uint64_t>("--repeat", o.repeat, 1, uint64_t(1) << 32);
    if (!(o.duration_s >= 0) || o.duration_s > 86400)
        bad("--duration " + std::to_string(o.duration_s) + " is out of range (0-86400 seconds)");
    check_range("--batch", o.batch, 1, kMaxBatch);
    check_range("--tx-depth", o.tx_depth, 1, kMaxDepth);
    if (!(o.link_gbps > 0) || !std::isfinite(o.link_gbps))
        bad("--link-gbps must be a positive number of Gbit/s per rail");
    if (!(o.sample_interval_s >= 0.001) || o.sample_interval_s > 60)
        bad(fmt::format("--sample-interval {}: out of range (0.001-60 seconds)",
                        o.sample_interval_s));
    if (o.end_signal != "auto" && o.end_signal != "data" && o.end_signal != "message")
        bad("--end-signal '" + o.end_signal + "' is not one of auto, data, message");
    check_range("--rx-poll-us", o.rx_poll_us, -1, 1000000);
    if (!(o.timeout_s > 0) || o.timeout_s > 86400)
        bad("--timeout " + std::to_string(o.timeout_s) + " is out of range (0-86400 seconds, > 0)");
    if (!(o.accept_timeout_s >= 0) || o.accept_timeout_s > 86400)
        bad("--accept-timeout is out of range (0-86400 seconds; 0 waits forever)");

    // Buffers: one per device on each side; loopback holds both sides.
    uint64_t sides = o.role == Role::kLoopback ? 2 : 1;
    uint64_t total = o.device_bytes() * uint64_t(o.devices) * sides;
    uint64_t limit = physical_memory_bytes() / 2;
    if (limit != 0 && total > limit)
        bad("--pages x --page-size x --buffers x --devices" +
            std::string(sides == 2 ? " x 2 sides" : "") +
            " = " + units::format_size(total) + " exceeds half of this machine's memory (" +
            units::format_size(limit) + ")");

    o.cpus.clear();
    if (!o.pin.empty()) {
        std::string error;
        if (affinity::parse_cpu_list(o.pin, &o.cpus, &error) != DP_OK) bad("--pin: " + error);
        int count = affinity::cpu_count();
        for (int cpu : o.cpus)
            if (cpu >= count)
                bad("--pin: CPU " + std::to_string(cpu) + " does not exist (this machine has 0-" +
                    std::to_string(count - 1) + ")");
    }
}

}  // namespace deputy::rail
