// Options of `deputy bench rail` and their validation. The client's request
// carries the workload (page size, pages, repeat, ...); the server takes it
// from the wire, so validate() runs on both sides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deputy::rail {

enum class Role { kServer, kClient, kLoopback };
const char *role_name(Role role);

inline constexpr uint16_t kDefaultPort = 47611;

struct RailOptions {
    Role role = Role::kLoopback;
    std::string connect;           // client: host[:port]
    std::string bind = "0.0.0.0";  // server: listen address
    uint16_t port = kDefaultPort;  // server: listen port (0: any)

    std::string provider = "tcp";
    std::string domain;  // "", one name, a comma list (one per rail) or "all"

    int rails = 1;
    int devices = 1;
    bool topology_given = false;  // server: --rails/--devices were on the command line

    std::string pin;         // CPU list, as given
    std::vector<int> cpus;   // parsed by validate()

    uint64_t page_size = 64 * 1024;
    uint64_t pages = 256;    // pages per buffer
    uint64_t buffers = 1;    // buffers per device, each registered on its own (the
                             // multi-rail article's buffers per GPU)
    uint64_t repeat = 16;
    double duration_s = 0;  // > 0: repeat passes until this long has passed
    int batch = 16;         // writes posted per rail per progress call
    int tx_depth = 64;      // writes in flight per rail (clamped to the provider's tx size)
    double link_gbps = 100;  // per rail, for "% of link"
    double sample_interval_s = 0.25;  // the live line's and samples_gbps' interval
    // Client: microseconds its device threads sleep after an empty poll; -1
    // picks per provider (rx_poll_us_for). Providers that move data in the
    // receiver's progress (tcp) need 0, busy polling.
    int rx_poll_us = -1;
    // How the client learns a rail's stream ended: "auto" (immediate data
    // where the provider has it, else a message), "data" (require immediate
    // data), "message" (a delivery-complete last write, then RESULT).
    std::string end_signal = "auto";
    bool warmup = true;
    bool verify = true;
    uint64_t seed = 1;

    bool quiet = false;
    bool progress = false;
    std::string out;             // JSON results file
    double timeout_s = 30;       // OOB messages and completion waits
    double accept_timeout_s = 300;

    int rails_per_device() const { return rails / devices; }
    uint64_t buffer_bytes() const { return page_size * pages; }
    uint64_t device_bytes() const { return buffer_bytes() * buffers; }
    uint64_t device_pages() const { return pages * buffers; }  // per pass
};

// Checks every field; throws RailError naming the flag and its limit.
void validate(RailOptions &options);

// The receiver's poll pause for `provider_name` when --rx-poll-us is -1:
// 100 us on shm, where the writer copies the data itself (CMA) and the
// receiver's progress only recycles command slots (busy polling there
// contends with the writer for shm's region lock); 0 (busy) elsewhere.
int rx_poll_us_for(const std::string &provider_name, int requested);

// Total physical memory in bytes (for the buffer-size limit).
uint64_t physical_memory_bytes();

}  // namespace deputy::rail
