// Rate limit for messages an untrusted peer can cause (the agent's warnings
// about one client's garbage): at most `per_second` pass in any one-second
// window; the rest are counted, and the count is logged once, with the
// first message of the next window or when the limiter goes away. Garbage
// at a million descriptors a second then costs a few lines, not gigabytes.
// Thread-safe: the agent's service thread and its engines share a client's.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "common/log.h"
#include "common/timing.h"

namespace deputy {

class LogLimiter {
  public:
    explicit LogLimiter(std::string who, uint32_t per_second = 20)
        : who_(std::move(who)), per_second_(per_second) {}
    ~LogLimiter() { flush(); }
    LogLimiter(const LogLimiter &) = delete;
    LogLimiter &operator=(const LogLimiter &) = delete;

    // True when one more message may be logged now.
    bool allow() {
        std::lock_guard<std::mutex> lock(mutex_);
        const uint64_t now = timing::now_ns();
        if (now - window_start_ns_ >= 1'000'000'000) {
            report_locked();
            window_start_ns_ = now;
            passed_ = 0;
        }
        if (passed_ < per_second_) {
            ++passed_;
            return true;
        }
        ++suppressed_;
        ++total_suppressed_;
        return false;
    }
    // Logs the count suppressed in a window that has ended, if any: call
    // now and then, so a burst's count is not held back until the next one.
    void flush_if_due() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (timing::now_ns() - window_start_ns_ >= 1'000'000'000) report_locked();
    }
    // Logs the count suppressed so far, if any.
    void flush() {
        std::lock_guard<std::mutex> lock(mutex_);
        report_locked();
    }
    uint64_t total_suppressed() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return total_suppressed_;
    }

  private:
    void report_locked() {
        if (suppressed_ == 0) return;
        DP_LOG_WARN("{}: {} more warning(s) suppressed (at most {} per second)", who_, suppressed_,
                    per_second_);
        suppressed_ = 0;
    }

    mutable std::mutex mutex_;
    std::string who_;
    uint32_t per_second_;
    uint64_t window_start_ns_ = 0;
    uint32_t passed_ = 0;
    uint64_t suppressed_ = 0;
    uint64_t total_suppressed_ = 0;
};

}  // namespace deputy

// Logs at warning level if `limiter` lets one more message through.
#define DP_LOG_LIMITED(limiter, ...)                     \
    do {                                                 \
        if ((limiter).allow()) DP_LOG_WARN(__VA_ARGS__); \
    } while (0)
