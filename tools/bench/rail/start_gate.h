// A one-shot barrier the device threads pass between warm-up and the timed
// region, so every device starts timing together. Unlike std::barrier it
// gives up when the run is cancelled (a thread that failed never arrives).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace deputy::rail {

class StartGate {
public:
    // on_open: run once, by the last party to arrive, before any passes
    // (what the run announces between warm-up and the timed region).
    explicit StartGate(int parties, std::function<void()> on_open = {})
        : waiting_(parties), on_open_(std::move(on_open)) {}

    // True once all parties arrived; false if `cancel` became true first.
    bool arrive_and_wait(const std::atomic<bool> &cancel) {
        std::unique_lock lock(mutex_);
        if (--waiting_ == 0) {
            if (on_open_) on_open_();
            cv_.notify_all();
            return true;
        }
        while (waiting_ > 0) {
            if (cancel.load()) return false;
            cv_.wait_for(lock, std::chrono::milliseconds(20));
        }
        return true;
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    int waiting_;
    std::function<void()> on_open_;
};

}  // namespace deputy::rail
