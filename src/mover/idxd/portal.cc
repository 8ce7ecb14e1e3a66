#include "mover/idxd/portal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mover/idxd/standin_device.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace deputy::mover::idxd {
namespace {

constexpr size_t kPortalBytes = 4096;

#if defined(__x86_64__)
bool cpuid7_ecx_bit(unsigned bit) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (c >> bit) & 1u;
}

// The instructions, compiled for CPUs that have them and called only
// after CPUID said so (map() refuses otherwise).
__attribute__((target("movdir64b"))) void write_movdir64b(void *portal, const void *desc) {
    // Orders the descriptor's own stores (and the completion record's reset)
    // before the device can read it: MOVDIR64B is weakly ordered.
    _mm_sfence();
    _movdir64b(portal, desc);
}

__attribute__((target("enqcmd"))) bool write_enqcmd(void *portal, const void *desc) {
    _mm_sfence();
    return _enqcmd(portal, desc) == 0;  // ZF set: the device refused it
}
#else
// DSA's portals are x86's: an Arm build has stand-in queues only, and
// map() refuses a device queue for want of the instruction.
bool cpuid7_ecx_bit(unsigned) { return false; }
void write_movdir64b(void *, const void *) {}
bool write_enqcmd(void *, const void *) { return false; }
#endif

}  // namespace

bool cpu_has_movdir64b() { return cpuid7_ecx_bit(28); }
bool cpu_has_enqcmd() { return cpuid7_ecx_bit(29); }

dp_status_t Portal::map(const QueueInfo &queue, std::unique_ptr<Portal> *out, std::string *why) {
    const bool shared = queue.mode == DP_WQ_SHARED;
    if (shared ? !cpu_has_enqcmd() : !cpu_has_movdir64b()) {
        *why = std::string("this CPU has no ") + (shared ? "ENQCMD" : "MOVDIR64B") +
               ", the instruction a " + (shared ? "shared" : "dedicated") + " queue (" +
               queue.device + "/" + queue.name + ") takes descriptors with";
        return DP_ERR_UNSUPPORTED;
    }
    int fd = ::open(queue.device_path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        *why = queue.device_path + " does not open: " + std::strerror(errno);
        return DP_ERR_UNSUPPORTED;
    }
    void *page = ::mmap(nullptr, kPortalBytes, PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (page == MAP_FAILED) {
        *why = queue.device_path + "'s portal does not map: " + std::strerror(errno);
        ::close(fd);
        return DP_ERR_UNSUPPORTED;
    }
    std::unique_ptr<Portal> portal(new Portal);
    portal->mode_ = queue.mode;
    portal->page_ = page;
    portal->fd_ = fd;
    *out = std::move(portal);
    return DP_OK;
}

std::unique_ptr<Portal> Portal::stand_in(StandInDevice *device, dp_wq_mode_t mode) {
    std::unique_ptr<Portal> portal(new Portal);
    portal->mode_ = mode;
    portal->stand_in_ = device;
    return portal;
}

Portal::~Portal() {
    if (page_ != nullptr) ::munmap(page_, kPortalBytes);
    if (fd_ >= 0) ::close(fd_);
}

bool Portal::submit(const dsa_hw_desc &desc) {
    if (stand_in_ != nullptr) return stand_in_->write(desc, mode_ == DP_WQ_SHARED);
    if (mode_ == DP_WQ_SHARED) return write_enqcmd(page_, &desc);
    write_movdir64b(page_, &desc);
    return true;
}

}  // namespace deputy::mover::idxd
