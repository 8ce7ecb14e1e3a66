#include "bench/rail/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "bench/rail/rail_error.h"
#include "common/units.h"

namespace deputy::rail {

namespace {

// Transparent huge pages need 2 MiB-aligned, 2 MiB-sized ranges. With them a
// CMA copy (shm) or a registration pins one folio per 2 MiB instead of one
// page per 4 KiB, which is much of the per-write cost on this machine.
constexpr size_t kHugePage = size_t(2) << 20;

}  // namespace

Buffer::Buffer(size_t bytes) : size_(bytes) {
    mapped_ = (std::max<size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
    // Over-allocate by one huge page, keep an aligned window, unmap the rest.
    size_t span = mapped_ + kHugePage;
    void *p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw RailError("cannot map a " + units::format_size(bytes) +
                        " buffer: mmap: " + std::strerror(errno));
    auto base = reinterpret_cast<uintptr_t>(p);
    uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > base) munmap(p, aligned - base);
    size_t tail = base + span - (aligned + mapped_);
    if (tail > 0) munmap(reinterpret_cast<void *>(aligned + mapped_), tail);
    data_ = reinterpret_cast<uint8_t *>(aligned);
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
