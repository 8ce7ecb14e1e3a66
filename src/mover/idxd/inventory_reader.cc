// The DSA inventory through libaccel-config (inventory.h's read_inventory).
// libaccel-config is what `accel-config list` is built on, so what we report
// matches what the user sees there; where version 3.5.3 (the one Debian
// ships) reads something wrong or unsafely, the comment at the call says why
// we read that sysfs attribute ourselves. Debian builds libaccel-config for
// amd64 only (DSA is an Intel x86-64 device): a build without it (aarch64)
// reads an empty inventory that says why.
#include "mover/idxd/inventory.h"

#if DEPUTY_HAVE_ACCEL_CONFIG
#include <accel-config/libaccel_config.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/fd.h"
#include "common/log.h"
#endif

namespace deputy::mover::idxd {

#if DEPUTY_HAVE_ACCEL_CONFIG
namespace {

const char *const kBus = "/sys/bus/dsa";
const char *const kDevices = "/sys/bus/dsa/devices";

// libaccel-config keeps the prefix of the directory it is scanning in a
// global (filename_prefix in libaccfg.c): two contexts enumerating at once
// in two threads would filter each other's directories.
std::mutex g_accfg_mutex;

// The messages of the enumeration running on this thread (under
// g_accfg_mutex), kept for `missing` when sysfs shows devices and
// libaccel-config lists none. The library's log function has no user
// pointer, hence a thread-local.
thread_local std::string *t_accfg_errors = nullptr;

// libaccel-config prints to stderr by default; a process that only asks
// whether DSA is there must not print. Its messages go to our debug log,
// and its errors are kept for `missing`.
void accfg_log(struct accfg_ctx *, int priority, const char *, int, const char *fn,
               const char *format, va_list args) {
    char text[512];
    std::vsnprintf(text, sizeof text, format, args);
    std::string line(text);
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    DP_LOG_DEBUG("libaccel-config: {}: {}", fn ? fn : "?", line);
    if (priority <= LOG_ERR && t_accfg_errors != nullptr && !line.empty()) {
        if (!t_accfg_errors->empty()) *t_accfg_errors += "; ";
        *t_accfg_errors += std::string(fn ? fn : "?") + ": " + line;
    }
}

bool exists(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

// The names in /sys/bus/dsa/devices that are DSA devices ("dsa0"), or
// *error saying why the directory cannot be listed.
std::vector<std::string> dsa_entries(std::string *error) {
    std::vector<std::string> names;
    DIR *d = ::opendir(kDevices);
    if (d == nullptr) {
        *error = std::string("cannot list ") + kDevices + ": " + std::strerror(errno);
        return names;
    }
    while (const dirent *e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("dsa", 0) == 0) names.push_back(name);
    }
    ::closedir(d);
    return names;
}

// libaccel-config returns an attribute it could not read as -errno, in
// whatever type the getter has (a missing max_batch_size reads as
// 4294967294): such values become 0 (or -1 for a node or group), not sizes.
uint32_t sane_u32(unsigned int v) { return int32_t(v) < 0 ? 0 : v; }
uint32_t sane_u32(int v) { return v < 0 ? 0 : uint32_t(v); }
uint64_t sane_u64(uint64_t v) { return int64_t(v) < 0 ? 0 : v; }
int sane_index(int v) { return v < 0 ? -1 : v; }

// The first line of a sysfs attribute of a DSA device or queue, "" when it
// cannot be read.
std::string attribute(const std::string &object, const char *name) {
    const std::string path = std::string(kDevices) + "/" + object + "/" + name;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    char buf[256];
    const ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
    if (n <= 0) return "";
    std::string line(buf, size_t(n));
    if (const size_t nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
    return line;
}

const char *type_name(accfg_wq_type type) {
    switch (type) {
        case ACCFG_WQT_NONE: return "none";
        case ACCFG_WQT_KERNEL: return "kernel";
        case ACCFG_WQT_USER: return "user";
    }
    return "none";
}

QueueInfo read_queue(const std::string &device, accfg_wq *wq) {
    QueueInfo q;
    q.device = device;
    q.name = accfg_wq_get_devname(wq);
    q.device_path = "/dev/dsa/" + q.name;
    q.enabled = accfg_wq_get_state(wq) == ACCFG_WQ_ENABLED;
    q.type = type_name(accfg_wq_get_type(wq));
    // accfg_wq_get_mode re-reads the mode attribute and compares what it
    // read without checking it (3.5.3 crashes on a queue whose mode cannot
    // be read): ask only when the attribute is there.
    const std::string mode_path = std::string(kDevices) + "/" + device + "/" + q.name + "/mode";
    if (::access(mode_path.c_str(), R_OK) == 0)
        q.mode = accfg_wq_get_mode(wq) == ACCFG_WQ_SHARED ? DP_WQ_SHARED : DP_WQ_DEDICATED;
    else
        DP_LOG_DEBUG("idxd inventory: {} unreadable, {}/{} taken as dedicated", mode_path, device,
                     q.name);
    const uint64_t size = accfg_wq_get_size(wq);
    q.size = int64_t(size) < 0 || size > UINT32_MAX ? 0 : uint32_t(size);
    q.priority = sane_u32(accfg_wq_get_priority(wq));
    q.threshold = sane_u32(accfg_wq_get_threshold(wq));
    q.max_batch_size = sane_u32(accfg_wq_get_max_batch_size(wq));
    q.max_transfer_size = sane_u64(accfg_wq_get_max_transfer_size(wq));
    q.block_on_fault = accfg_wq_get_block_on_fault(wq) > 0;
    q.group = sane_index(accfg_wq_get_group_id(wq));
    return q;
}

// Whether every wq* entry of the device has a readable type attribute:
// 3.5.3 reads each queue's type while it lists them and strdup()s what it
// read unchecked, so one queue without it crashes the listing. The idxd
// driver always has it; a half-torn-down or fake tree may not.
bool queues_listable(const std::string &device) {
    const std::string dir = std::string(kDevices) + "/" + device;
    DIR *d = ::opendir(dir.c_str());
    if (d == nullptr) return false;
    bool ok = true;
    while (const dirent *e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("wq", 0) == 0 && ::access((dir + "/" + name + "/type").c_str(), R_OK) != 0) {
            DP_LOG_DEBUG("idxd inventory: {}/{}/type unreadable: {}'s queues left out", dir, name,
                         device);
            ok = false;
        }
    }
    ::closedir(d);
    return ok;
}

DeviceInfo read_device(accfg_device *dev) {
    DeviceInfo d;
    d.name = accfg_device_get_devname(dev);
    d.enabled = accfg_device_get_state(dev) == ACCFG_DEVICE_ENABLED;
    // Read here, not with accfg_device_get_pasid_enabled: 3.5.3 keeps the
    // attribute's text and returns the pointer as the bool, so a device
    // whose pasid_enabled says 0 reports SVA on.
    d.sva = std::strtol(attribute(d.name, "pasid_enabled").c_str(), nullptr, 10) != 0;
    d.numa_node = sane_index(accfg_device_get_numa_node(dev));
    d.max_batch_size = sane_u32(accfg_device_get_max_batch_size(dev));
    d.max_transfer_size = sane_u64(accfg_device_get_max_transfer_size(dev));
    d.max_engines = sane_u32(accfg_device_get_max_engines(dev));
    d.max_groups = sane_u32(accfg_device_get_max_groups(dev));
    d.max_work_queues = sane_u32(accfg_device_get_max_work_queues(dev));
    if (!queues_listable(d.name)) return d;
    accfg_wq *wq;
    accfg_wq_foreach(dev, wq) d.queues.push_back(read_queue(d.name, wq));
    return d;
}

}  // namespace

Inventory read_inventory() {
    Inventory inv;
    if (!exists(kBus)) {
        inv.missing = exists("/sys/module/idxd")
                          ? "the idxd driver is loaded, but there is no DSA bus (/sys/bus/dsa absent)"
                          : "the idxd driver is not loaded (/sys/bus/dsa absent)";
        return inv;
    }
    std::lock_guard<std::mutex> lock(g_accfg_mutex);
    std::string errors;
    // Set for this enumeration only, whichever way it ends.
    struct Capture {
        explicit Capture(std::string *to) { t_accfg_errors = to; }
        ~Capture() { t_accfg_errors = nullptr; }
    } capture(&errors);
    accfg_ctx *raw = nullptr;
    if (const int rc = accfg_new(&raw); rc < 0 || raw == nullptr) {
        inv.missing = std::string("libaccel-config did not start (accfg_new: ") +
                      std::strerror(rc < 0 ? -rc : ENOMEM) + ")";
        return inv;
    }
    const std::unique_ptr<accfg_ctx, accfg_ctx *(*)(accfg_ctx *)> ctx(raw, accfg_unref);
    // accfg_new itself prints only when ACCFG_LOG asks it to; from here on
    // nothing reaches stderr. Errors are kept for `missing` whatever our
    // level; the rest is asked for only when our debug log would show it.
    accfg_set_log_fn(ctx.get(), accfg_log);
    accfg_set_log_priority(ctx.get(),
                           log::sdk().should_log(spdlog::level::debug) ? LOG_DEBUG : LOG_ERR);
    accfg_device *dev;
    accfg_device_foreach(ctx.get(), dev) {
        // IAA devices (iax1) share the dsa bus; only DSA moves memory.
        if (accfg_device_get_type(dev) != ACCFG_DEVICE_DSA) continue;
        inv.devices.push_back(read_device(dev));
    }
    if (inv.devices.empty()) {
        std::string list_error;
        const std::vector<std::string> entries = dsa_entries(&list_error);
        if (!list_error.empty())
            inv.missing = "the DSA bus is there but " + list_error;
        else if (entries.empty())
            inv.missing = "the DSA bus is there but has no device";
        else
            inv.missing = fmt::format(
                "{} lists {}, but libaccel-config read no device there{}", kDevices,
                entries.front() + (entries.size() > 1 ? " and others" : ""),
                errors.empty() ? std::string() : " (" + errors + ")");
    }
    return inv;
}
#else
Inventory read_inventory() {
    Inventory inv;
    inv.missing = "this build has no libaccel-config (Intel DSA is an x86-64 device; Debian "
                  "builds libaccel-config for amd64 only)";
    return inv;
}
#endif

}  // namespace deputy::mover::idxd
