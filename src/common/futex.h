// futex wait/wake on a 32-bit word. Not the PRIVATE variants: the word may
// live in a memfd segment shared with another process (the agent).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace deputy {

// Sleeps while *word == expected, at most timeout_ns (<0: no limit). Returns
// 0 when woken or the word changed, ETIMEDOUT, or EINTR.
inline int futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    timespec ts, *tsp = nullptr;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    long rc = syscall(SYS_futex, word, FUTEX_WAIT, expected, tsp, nullptr, 0);
    if (rc == 0) return 0;
    return errno == EAGAIN ? 0 : errno;
}

inline void futex_wake(uint32_t *word, int count) {
    syscall(SYS_futex, word, FUTEX_WAKE, count, nullptr, nullptr, 0);
}

}  // namespace deputy
