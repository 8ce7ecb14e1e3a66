#include "bench/rail/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "bench/rail/rail_error.h"
#include "common/units.h"

namespace deputy::rail {

Buffer::Buffer(size_t bytes) : size_(bytes) {
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    mapped_ = (bytes + page - 1) / page * page;
    if (mapped_ == 0) mapped_ = page;
    void *p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw RailError("cannot map a " + units::format_size(bytes) +
                        " buffer: mmap: " + std::strerror(errno));
    data_ = static_cast<uint8_t *>(p);
    madvise(data_, mapped_, MADV_HUGEPAGE);  // advice only; failure is harmless
    // Pre-fault: write every page once (zeroes: the client's "unwritten" state).
    std::memset(data_, 0, mapped_);
}

Buffer::~Buffer() {
    if (data_ != nullptr) munmap(data_, mapped_);
}

Buffer::Buffer(Buffer &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

Buffer &Buffer::operator=(Buffer &&other) noexcept {
    if (this != &other) {
        if (data_ != nullptr) munmap(data_, mapped_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, 0);
    }
    return *this;
}

}  // namespace deputy::rail
