#include "agent/client_process.h"

#include <fmt/format.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/timing.h"

namespace deputy::agent {
namespace {

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5 (asm-generic/socket.h); older headers lack it
#endif

// process_vm_* may stop short (a range crossing into an unmapped page, or
// the kernel's per-call limit); continue until done or no progress.
// *exiting: the call found no process or no address space (ESRCH).
// *reached: a call on this process succeeded before. Then EPERM means the
// client is inside a private window (it makes itself undumpable for the
// microseconds it takes to map a segment it received): try again for up to
// kWindowRetryNs. A process that never let us in is refused at once.
constexpr uint64_t kWindowRetryNs = 50'000'000;

template <typename Call>
bool transfer(const char *what, pid_t pid, uint64_t addr, char *local, size_t len, Call call,
              size_t *done, std::string *error, std::atomic<bool> *exiting,
              std::atomic<bool> *reached) {
    *done = 0;
    uint64_t refused_since = 0;
    while (*done < len) {
        iovec mine{local + *done, len - *done};
        iovec theirs{reinterpret_cast<void *>(addr + *done), len - *done};
        ssize_t n = call(pid, &mine, 1, &theirs, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EPERM && reached->load(std::memory_order_relaxed)) {
            const uint64_t now = timing::now_ns();
            if (refused_since == 0) refused_since = now;
            if (now - refused_since < kWindowRetryNs) {
                usleep(20);
                continue;
            }
        }
        if (n > 0 && !reached->load(std::memory_order_relaxed))
            reached->store(true, std::memory_order_relaxed);
        if (n <= 0) {
            if (n < 0 && errno == ESRCH) exiting->store(true, std::memory_order_relaxed);
            *error =
                fmt::format("{} of pid {} at 0x{:x} (+{} of {} bytes): {}", what, pid, addr + *done,
                            len - *done, len, n < 0 ? std::strerror(errno) : "no progress");
            return false;
        }
        *done += size_t(n);
    }
    return true;
}

}  // namespace

bool ClientProcess::peer_pidfd_disabled() {
    const char *v = std::getenv("DEPUTY_AGENT_NO_PEERPIDFD");
    return v && *v && std::strcmp(v, "0") != 0;
}

dp_status_t ClientProcess::open(int socket, const channel::sock::PeerCredentials &peer,
                                ClientProcess *out, std::string *error) {
    out->pid_ = peer.pid;
    out->verified_ = false;
    int fd = -1;
    socklen_t len = sizeof(fd);
    if (!peer_pidfd_disabled() && getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 &&
        fd >= 0) {
        // The kernel's own record of who connected: no pid lookup, no race.
        out->pidfd_.reset(fd);
        out->verified_ = true;
    } else {
        out->pidfd_.reset(int(syscall(SYS_pidfd_open, peer.pid, 0)));
        if (!out->pidfd_) {
            *error = fmt::format("pidfd_open({}): {}", peer.pid, std::strerror(errno));
            return DP_ERR_DENIED;
        }
    }
    if (!out->alive()) {
        *error = fmt::format("process {} exited before it was attached", peer.pid);
        return DP_ERR_DENIED;
    }
    return DP_OK;
}

bool ClientProcess::check_proof(const uint8_t *seen, const std::array<uint8_t, kProofBytes> &proof,
                                std::string *error) {
    if (sodium_memcmp(seen, proof.data(), proof.size()) != 0) {
        *error = fmt::format(
            "pid {} does not hold the identity proof its connection sent (the "
            "process that connected is gone and its pid belongs to another)",
            pid_);
        return false;
    }
    verified_ = true;
    return true;
}

std::shared_ptr<ClientProcess> ClientProcess::remote() {
    auto p = std::make_shared<ClientProcess>();
    p->remote_ = true;
    return p;
}

bool ClientProcess::alive() const {
    if (exiting_.load(std::memory_order_relaxed)) return false;
    if (remote_) return true;
    pollfd p{pidfd_.get(), POLLIN, 0};
    // The pidfd becomes readable when the process exits.
    return poll(&p, 1, 0) == 0;
}

bool ClientProcess::refused(const mover::SubmitterCall &call, std::string *error) const {
    *error = fmt::format("another call into process {}'s memory has held an engine for {} ms (a "
                         "page it does not let the kernel fill: userfaultfd, a stalled file); "
                         "no other call goes in until it returns",
                         pid_, call.held_ns() / 1'000'000);
    return false;
}

bool ClientProcess::read(uint64_t addr, void *dst, size_t len, std::string *error) const {
    if (remote_) return *error = "a remote client's memory is out of reach", false;
    if (!alive()) return *error = fmt::format("process {} exited", pid_), false;
    mover::SubmitterCall call(owner_key());
    if (!call.admitted()) return refused(call, error);
    size_t done = 0;
    if (!transfer("process_vm_readv", pid_, addr, static_cast<char *>(dst), len, process_vm_readv,
                  &done, error, &exiting_, &reached_))
        return false;
    // If it died meanwhile, the pid may have named another process.
    if (!alive()) return *error = fmt::format("process {} exited during a read", pid_), false;
    return true;
}

bool ClientProcess::write(uint64_t addr, const void *src, size_t len, size_t *written,
                          std::string *error) const {
    *written = 0;
    if (remote_) return *error = "a remote client's memory is out of reach", false;
    if (!alive()) return *error = fmt::format("process {} exited", pid_), false;
    mover::SubmitterCall call(owner_key());
    if (!call.admitted()) return refused(call, error);
    return transfer("process_vm_writev", pid_, addr,
                    const_cast<char *>(static_cast<const char *>(src)), len, process_vm_writev,
                    written, error, &exiting_, &reached_);
}

}  // namespace deputy::agent
