#include "agent/process_memory.h"

#include <fmt/format.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace deputy::agent {
namespace {

// process_vm_* may stop short (a range crossing into an unmapped page, or
// the kernel's per-call limit); continue until done or no progress.
template <typename Call>
bool transfer(const char *what, pid_t pid, uint64_t addr, char *local, size_t len, Call call,
              std::string *error) {
    size_t done = 0;
    while (done < len) {
        iovec mine{local + done, len - done};
        iovec theirs{reinterpret_cast<void *>(addr + done), len - done};
        ssize_t n = call(pid, &mine, 1, &theirs, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            *error = fmt::format("{} of pid {} at 0x{:x} (+{} of {} bytes): {}", what, pid,
                                 addr + done, len - done, len,
                                 n < 0 ? std::strerror(errno) : "no progress");
            return false;
        }
        done += size_t(n);
    }
    return true;
}

}  // namespace

bool read_process_memory(pid_t pid, uint64_t addr, void *dst, size_t len, std::string *error) {
    return transfer("process_vm_readv", pid, addr, static_cast<char *>(dst), len,
                    process_vm_readv, error);
}

bool write_process_memory(pid_t pid, uint64_t addr, const void *src, size_t len,
                          std::string *error) {
    return transfer("process_vm_writev", pid, addr,
                    const_cast<char *>(static_cast<const char *>(src)), len, process_vm_writev,
                    error);
}

}  // namespace deputy::agent
