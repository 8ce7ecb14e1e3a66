#include "bench/rail/target.h"

#include <sched.h>
#include <time.h>

#include <cstdio>

#include "bench/rail/rail_error.h"
#include "common/timing.h"

namespace deputy::rail {
namespace {

inline constexpr int kCqBurst = 16;

std::string hex32(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%08llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

DeviceTarget::DeviceTarget(std::vector<TargetRail> rails, bool expect_signals, double timeout_s,
                           int rx_poll_us)
    : rails_(std::move(rails)),
      expect_signals_(expect_signals),
      timeout_s_(timeout_s),
      rx_poll_us_(rx_poll_us) {}

bool DeviceTarget::run(const TargetControl &control) {
    std::vector<bool> seen(rails_.size(), false);
    size_t remaining = expect_signals_ ? rails_.size() : 0;
    fi_cq_data_entry entries[kCqBurst];
    uint64_t loops = 0;
    for (;;) {
        if (control.cancel.load(std::memory_order_relaxed)) return false;
        bool server_done = control.server_done.load(std::memory_order_acquire);
        if (expect_signals_ ? remaining == 0 : server_done) return true;
        bool any = false;
        for (size_t k = 0; k < rails_.size(); ++k) {
            Rail &rail = *rails_[k].rail;
            ssize_t got = fi_cq_read(rail.cq(), entries, kCqBurst);
            if (got == -FI_EAGAIN) continue;
            if (got == -FI_EAVAIL) {
                fi_cq_err_entry err{};
                fi_cq_readerr(rail.cq(), &err, 0);
                char buf[256] = {};
                const char *detail =
                    fi_cq_strerror(rail.cq(), err.prov_errno, err.err_data, buf, sizeof(buf));
                throw RailError(rail.where() + ": completion error while receiving writes: " +
                                fi_error_text(-err.err) + "; provider: " + (detail ? detail : "?"));
            }
            if (got < 0) rail.fail("fi_cq_read", int(got));
            any = true;
            for (ssize_t i = 0; i < got; ++i) {
                if (!(entries[i].flags & FI_REMOTE_CQ_DATA)) continue;
                if (entries[i].data != rails_[k].signal)
                    throw RailError(rail.where() + ": received immediate data " +
                                    hex32(entries[i].data) + ", expected " +
                                    hex32(rails_[k].signal));
                if (seen[k])
                    throw RailError(rail.where() + ": received the end-of-stream signal twice");
                seen[k] = true;
                ++signals_;
                --remaining;
            }
        }
        if (server_done && (++loops & 1023) == 0) {
            uint64_t since = timing::now_ns() - control.server_done_ns.load();
            if (double(since) * 1e-9 > timeout_s_) {
                for (size_t k = 0; k < rails_.size(); ++k)
                    if (!seen[k])
                        throw RailError(rails_[k].rail->where() +
                                        ": no end-of-stream signal (immediate data " +
                                        hex32(rails_[k].signal) + ") within " +
                                        std::to_string(int(timeout_s_)) +
                                        " s after the server finished (--timeout)");
            }
        }
        // Nothing arrived: let a writer sharing this core run (2-core loopback).
        // Nothing arrived: pause (see rx_poll_us), or at least let a writer
        // sharing this core run (2-core loopback).
        if (!any) {
            if (rx_poll_us_ > 0) {
                timespec ts{0, long(rx_poll_us_) * 1000};
                nanosleep(&ts, nullptr);
            } else {
                sched_yield();
            }
        }
    }
}

}  // namespace deputy::rail
