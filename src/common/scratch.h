// Large temporary buffers, reused per thread. The agent's engines copy a
// client's ordinary memory through bounce buffers of up to tens of MiB per
// descriptor: fresh memory each time would cost a page fault per 4 KiB
// (the copy's own price again), and malloc would keep what it once grew to
// for good. So each thread keeps the mappings it used, reuses them, and
// gives them all back with trim() when it goes idle (an engine before it
// sleeps): a busy thread pays no faults, an idle process holds nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace deputy::scratch {

class Buffer {
  public:
    Buffer() = default;
    ~Buffer() { reset(); }
    Buffer(Buffer &&other) noexcept
        : data_(std::exchange(other.data_, nullptr)),
          size_(std::exchange(other.size_, 0)),
          capacity_(std::exchange(other.capacity_, 0)) {}
    Buffer &operator=(Buffer &&other) noexcept {
        if (this != &other) {
            reset();
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
            capacity_ = std::exchange(other.capacity_, 0);
        }
        return *this;
    }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    uint8_t *data() const { return data_; }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    // Back to this thread's cache (or unmapped, past its cap).
    void reset();

  private:
    friend Buffer get(size_t bytes);
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    size_t capacity_ = 0;
};

// `bytes` of uninitialised memory (nullptr data when the system has none).
Buffer get(size_t bytes);
// Unmaps what this thread's cache holds.
void trim();
// Bytes this thread's cache holds now (for tests).
size_t cached_bytes();

}  // namespace deputy::scratch
