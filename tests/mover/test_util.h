// Helpers shared by the mover's device-level tests: owning handles, guarded
// buffers, descriptor builders and "submit, wait, copy the record out".
// The scalar reference implementations live in reference.h.
#pragma once

#include <deputy/mover.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace deputy::test {

struct MoverCloser {
    void operator()(dp_mover_t *mover) const { EXPECT_EQ(dp_mover_close(mover), DP_OK); }
};
// Closing joins the engines, so a test that returns early leaks no thread.
using MoverPtr = std::unique_ptr<dp_mover_t, MoverCloser>;

inline MoverPtr open_mover(const dp_mover_config_t &config) {
    dp_mover_t *mover = nullptr;
    dp_status_t s = dp_mover_open(&config, &mover);
    EXPECT_EQ(s, DP_OK) << dp_status_name(s);
    return MoverPtr(mover);
}

inline MoverPtr open_mover(uint32_t engines = 1, uint32_t wqs = 1,
                           dp_wq_mode_t mode = DP_WQ_DEDICATED, uint32_t wq_size = 128) {
    dp_mover_config_t config = DP_MOVER_CONFIG_INITIALIZER;
    config.num_engines = engines;
    config.num_wqs = wqs;
    config.wq_mode = mode;
    config.wq_size = wq_size;
    return open_mover(config);
}

template <typename T>
uint64_t addr(T *p) {
    return reinterpret_cast<uint64_t>(p);
}

// A buffer whose data starts `offset` bytes after a 64-byte boundary (to test
// unaligned addresses), framed by guard bytes that must never change.
class Guarded {
  public:
    static constexpr size_t kGuard = 64;

    explicit Guarded(size_t size, size_t offset = 0, uint8_t guard = 0xA5)
        : size_(size), offset_(offset), guard_(guard) {
        total_ = kGuard + offset + size + kGuard;
        raw_ = static_cast<uint8_t *>(std::aligned_alloc(64, (total_ + 63) / 64 * 64));
        std::memset(raw_, guard, total_);
    }
    ~Guarded() { std::free(raw_); }
    Guarded(const Guarded &) = delete;
    Guarded &operator=(const Guarded &) = delete;

    uint8_t *data() { return raw_ + kGuard + offset_; }
    const uint8_t *data() const { return raw_ + kGuard + offset_; }
    uint64_t address() { return addr(data()); }
    size_t size() const { return size_; }

    // True when every byte outside [data, data + size) still holds the guard.
    bool guards_intact() const {
        for (size_t i = 0; i < kGuard + offset_; ++i)
            if (raw_[i] != guard_) return false;
        for (size_t i = kGuard + offset_ + size_; i < total_; ++i)
            if (raw_[i] != guard_) return false;
        return true;
    }
    // A copy of the data and its guards, to prove later that nothing changed.
    std::vector<uint8_t> snapshot() const { return std::vector<uint8_t>(raw_, raw_ + total_); }
    bool unchanged_since(const std::vector<uint8_t> &snap) const {
        return snap.size() == total_ && std::memcmp(snap.data(), raw_, total_) == 0;
    }

    void fill_random(uint64_t seed) {
        std::mt19937_64 rng(seed);
        size_t i = 0;
        for (; i + 8 <= size_; i += 8) {
            uint64_t v = rng();
            std::memcpy(data() + i, &v, 8);
        }
        for (; i < size_; ++i) data()[i] = uint8_t(rng());
    }
    void fill_byte(uint8_t b) { std::memset(data(), b, size_); }

  private:
    size_t size_, offset_, total_;
    uint8_t guard_;
    uint8_t *raw_;
};

// Offset of the first differing byte, or n when equal.
inline size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) return i;
    return n;
}

// What a completion record said, copied out of the volatile record.
struct Record {
    uint8_t status = DP_COMP_PENDING;
    uint32_t result = 0;
    uint64_t bytes = 0;
    uint64_t value = 0;
    uint64_t user = 0;
};

inline Record read_record(const dp_completion_t &c) {
    Record r;
    r.status = __atomic_load_n(&c.status, __ATOMIC_ACQUIRE);
    r.result = c.result;
    r.bytes = c.bytes_completed;
    r.value = c.value;
    r.user = c.user;
    return r;
}

inline std::string status_text(uint8_t status) {
    return std::to_string(status) + " (" + dp_comp_status_name(dp_comp_status_t(status)) + ")";
}

// Compares every field of a record; the message names the status by name.
#define EXPECT_RECORD(rec, st, res, byt, val, usr)                                          \
    do {                                                                                    \
        const ::deputy::test::Record r_ = (rec);                                            \
        EXPECT_EQ(::deputy::test::status_text(r_.status), ::deputy::test::status_text(st)); \
        EXPECT_EQ(r_.result, uint32_t(res)) << "result";                                    \
        EXPECT_EQ(r_.bytes, uint64_t(byt)) << "bytes_completed";                            \
        EXPECT_EQ(r_.value, uint64_t(val)) << "value";                                      \
        EXPECT_EQ(r_.user, uint64_t(usr)) << "user";                                        \
    } while (0)

// Generous bound for "never hangs": a broken engine fails the test instead of
// blocking the suite.
inline constexpr int64_t kWaitBoundNs = 20'000'000'000;

// Submits until the queue takes it (a full shared queue answers retry).
inline dp_status_t submit_retry(dp_mover_t *mover, uint32_t wq, const dp_desc_t &desc) {
    for (;;) {
        dp_status_t s = dp_mover_submit(mover, wq, &desc);
        if (s != DP_ERR_RETRY) return s;
        std::this_thread::yield();
    }
}

// Runs one descriptor with a completion record and returns the record.
inline Record run(dp_mover_t *mover, dp_desc_t desc, uint32_t wq = 0) {
    dp_completion_t comp;
    std::memset(&comp, 0, sizeof(comp));
    desc.flags |= DP_FLAG_COMPLETION;
    desc.completion = addr(&comp);
    EXPECT_EQ(submit_retry(mover, wq, desc), DP_OK);
    EXPECT_EQ(dp_mover_wait(mover, &comp, DP_WAIT_SPIN, kWaitBoundNs), DP_OK);
    return read_record(comp);
}

// One in-process device for a test; run() submits one descriptor with a
// record and returns what the record said.
class MoverFixture : public ::testing::Test {
  protected:
    void SetUp() override {
        mover_ = open_mover();
        ASSERT_NE(mover_, nullptr);
    }
    Record run(const dp_desc_t &d) { return test::run(mover_.get(), d); }
    MoverPtr mover_;
};

inline dp_desc_t make_desc(uint8_t opcode, uint64_t dst, uint64_t src, uint64_t size,
                           uint64_t src2 = 0, uint64_t aux = 0, uint64_t user = 0) {
    dp_desc_t d;
    std::memset(&d, 0, sizeof(d));
    d.opcode = opcode;
    d.dst = dst;
    d.src = src;
    d.src2 = src2;
    d.size = size;
    d.aux = aux;
    d.user = user;
    return d;
}

inline dp_desc_t make_reduce(dp_dtype_t dtype, dp_op_t op, uint64_t dst, uint64_t src,
                             uint64_t src2, uint64_t size, bool accumulate = false) {
    dp_desc_t d = make_desc(DP_OP_REDUCE, dst, src, size, src2);
    d.dtype = uint8_t(dtype);
    d.redop = uint8_t(op);
    if (accumulate) d.flags |= DP_FLAG_ACCUMULATE;
    return d;
}

}  // namespace deputy::test
