// Page-aligned anonymous memory for one device's pages, pre-faulted so first
// touch (very slow on this machine) never lands in the timed region.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deputy::rail {

class Buffer {
public:
    Buffer() = default;
    // Maps `bytes` (rounded up to 2 MiB, 2 MiB-aligned), asks for huge
    // pages and touches every page. Throws RailError if the mapping fails.
    explicit Buffer(size_t bytes);
    ~Buffer();
    Buffer(Buffer &&other) noexcept;
    Buffer &operator=(Buffer &&other) noexcept;
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    uint8_t *data() const { return data_; }
    size_t size() const { return size_; }

private:
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    size_t mapped_ = 0;
};

}  // namespace deputy::rail
