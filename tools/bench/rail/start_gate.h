// A one-shot barrier the device threads pass between warm-up and the timed
// region, so every device starts timing together. Unlike std::barrier it
// gives up when the run is cancelled (a thread that failed never arrives).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace deputy::rail {

class StartGate {
public:
    explicit StartGate(int parties) : waiting_(parties) {}

    // True once all parties arrived; false if `cancel` became true first.
    bool arrive_and_wait(const std::atomic<bool> &cancel) {
        std::unique_lock lock(mutex_);
        if (--waiting_ == 0) {
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
};

}  // namespace deputy::rail
