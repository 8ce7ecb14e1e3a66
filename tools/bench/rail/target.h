// The client side of one device: drives progress on the device's rails
// (providers with manual progress place incoming writes only when polled)
// and waits for each rail's end-of-stream signal, the immediate data of the
// server's last write.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "bench/rail/fabric.h"

namespace deputy::rail {

struct TargetRail {
    Rail *rail = nullptr;
    uint32_t signal = 0;  // expected immediate data (end_signal of the global rail)
};

struct TargetControl {
    std::atomic<bool> cancel{false};   // stop now (an error elsewhere)
    std::atomic<bool> server_done{false};  // the server reported RESULT
    std::atomic<uint64_t> server_done_ns{0};
};

class DeviceTarget {
public:
    // rx_poll_us: microseconds to sleep after a poll that found nothing
    // (0: busy polling, yielding the core).
    DeviceTarget(std::vector<TargetRail> rails, bool expect_signals, double timeout_s,
                 int rx_poll_us);

    // Returns when every rail saw its signal (or, without signals, when the
    // server is done). Throws RailError on a completion error, unexpected
    // data, or a signal missing `timeout_s` after the server finished.
    // Returns false if cancelled.
    bool run(const TargetControl &control);

    uint64_t signals_seen() const { return signals_; }

private:
    std::vector<TargetRail> rails_;
    bool expect_signals_;
    double timeout_s_;
    int rx_poll_us_;
    uint64_t signals_ = 0;
};

}  // namespace deputy::rail
