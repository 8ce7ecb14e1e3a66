// The posting engine of one device (the server side): pages written
// round-robin over the device's rails, each rail with a queue of pending
// writes that stay queued on -FI_EAGAIN and are retried after progress, up to
// `batch` posts per rail per progress call, completions read in bursts, and
// an end-of-stream signal on each rail's last write.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/rail/fabric.h"
#include "bench/rail/start_gate.h"

namespace deputy::rail {

// Live numbers of one rail, written by its device thread only (relaxed
// stores), read by the reporter.
struct alignas(64) RailCounters {
    std::atomic<uint64_t> writes{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> eagain{0};
};

struct WritePlan {
    uint64_t page_size = 0;
    uint64_t pages = 0;             // per pass: every page of every buffer of the device
    uint64_t pages_per_buffer = 0;  // page g goes to buffer g / this, at its page g % this
    uint64_t repeat = 1;
    double duration_s = 0;  // > 0: passes until this long has passed
    int batch = 16;
    int tx_depth = 64;
    bool warmup = true;
    bool signal_with_data = true;  // FI_REMOTE_CQ_DATA on the last write; else delivery-complete
    double timeout_s = 30;
};

// What a rail writes to: the client's buffer for this device, on this rail.
struct RemoteBuffer {
    fi_addr_t peer = FI_ADDR_UNSPEC;
    uint64_t base = 0;
    uint64_t key = 0;
};

struct WriterRail {
    Rail *rail = nullptr;
    void *desc = nullptr;  // local descriptor of the source buffer (FI_MR_LOCAL)
    std::vector<RemoteBuffer> remotes;  // the device's buffers in order, one peer
    RailCounters *counters = nullptr;
    uint32_t signal = 0;  // immediate data of the last write
};

struct RailStats {
    uint64_t writes = 0;
    uint64_t bytes = 0;
    uint64_t eagain = 0;
    uint64_t first_completion_ns = 0;  // after the timed start; 0 if none
};

struct DeviceStats {
    uint64_t warmup_ns = 0;
    uint64_t warmup_writes = 0;
    uint64_t start_ns = 0;  // timing::now_ns() at the start of the timed region
    uint64_t end_ns = 0;    // ... and when the last completion was read
    bool cancelled = false;
    std::vector<RailStats> rails;
};

// The immediate data a rail's last write carries (fits 4-byte cq_data_size).
inline uint32_t end_signal(int global_rail) { return 0xD0000000u | uint32_t(global_rail); }

class DeviceWriter {
public:
    DeviceWriter(int device, const uint8_t *source, std::vector<WriterRail> rails,
                 const WritePlan &plan);
    ~DeviceWriter();
    DeviceWriter(const DeviceWriter &) = delete;
    DeviceWriter &operator=(const DeviceWriter &) = delete;

    // Warm-up, `gate`, then the timed stream. Throws RailError on failure;
    // returns with .cancelled when `cancel` is set by another thread.
    DeviceStats run(StartGate &gate, const std::atomic<bool> &cancel);

private:
    struct State;
    void warm_up(DeviceStats &stats, const std::atomic<bool> &cancel);
    void stream(DeviceStats &stats, const std::atomic<bool> &cancel);

    int device_;
    const uint8_t *source_;
    WritePlan plan_;
    std::unique_ptr<State> state_;
};

}  // namespace deputy::rail
