#include "common/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/check.h"
#include "common/sys_error.h"

namespace deputy {
namespace {

// Seals the receiver relies on: the size cannot change. (More seals do not
// hurt it: F_SEAL_WRITE cannot be added while it has the segment mapped
// writable, F_SEAL_FUTURE_WRITE leaves its mapping writing.)
constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

size_t page_size() {
    static const size_t size = size_t(sysconf(_SC_PAGESIZE));
    return size;
}

}  // namespace

Segment::~Segment() {
    reset();
}

Segment::Segment(Segment &&other) noexcept
    : fd_(std::move(other.fd_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      writable_(std::exchange(other.writable_, false)) {}

Segment &Segment::operator=(Segment &&other) noexcept {
    if (this != &other) {
        reset();
        fd_ = std::move(other.fd_);
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        writable_ = std::exchange(other.writable_, false);
    }
    return *this;
}

void Segment::reset() {
    if (base_ != nullptr) munmap(static_cast<char *>(base_) - guard_bytes(), size_ + 2 * guard_bytes());
    base_ = nullptr;
    size_ = 0;
    writable_ = false;
    fd_.reset();
}

size_t Segment::guard_bytes() { return page_size(); }

dp_status_t Segment::close_to_new_writers() const {
    if (fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) == 0) return DP_OK;
    const int err = errno;
    // EINVAL: a kernel before 5.1, which does not know the seal.
    return err == EINVAL ? DP_ERR_UNSUPPORTED : DP_ERR_IO;
}

namespace {

// Reserves size + two guard pages with no access, then maps the file over the
// middle: the guards stay PROT_NONE for as long as the mapping lives.
void *map_guarded(int fd, size_t size, Segment::Pages pages,
                  Segment::Access access = Segment::Access::read_write) {
    const size_t guard = Segment::guard_bytes();
    void *area = mmap(nullptr, size + 2 * guard, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED) return MAP_FAILED;
    const int populate = pages == Segment::Pages::prefault ? MAP_POPULATE : 0;
    const int prot = access == Segment::Access::read_write ? PROT_READ | PROT_WRITE : PROT_READ;
    void *base = mmap(static_cast<char *>(area) + guard, size, prot,
                      MAP_SHARED | MAP_FIXED | populate, fd, 0);
    if (base == MAP_FAILED) {
        const int err = errno;
        munmap(area, size + 2 * guard);
        errno = err;
    }
    return base;
}

}  // namespace

dp_status_t Segment::create(const std::string &name, size_t bytes, Segment *out, Pages pages,
                            Writers writers) {
    if (bytes == 0) DP_FAIL(DP_ERR_INVALID, "segment '{}': size 0", name);
    const size_t page = page_size();
    if (bytes > SIZE_MAX - 3 * page) DP_FAIL(DP_ERR_TOO_LARGE, "segment '{}': {} bytes", name, bytes);
    const size_t size = (bytes + page - 1) / page * page;

    // CLOEXEC: a segment reaches a child only when we pass it on purpose.
    UniqueFd fd(memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) DP_FAIL_ERRNO(DP_ERR_IO, "memfd_create('{}')", name);
    if (ftruncate(fd.get(), off_t(size)) != 0) {
        int err = errno;
        DP_FAIL(err == ENOMEM || err == EFBIG || err == ENOSPC ? DP_ERR_NOMEM : DP_ERR_IO,
                "segment '{}': ftruncate to {} bytes: {}", name, size, std::strerror(err));
    }
    if (fcntl(fd.get(), F_ADD_SEALS, kSizeSeals) != 0)
        DP_FAIL_ERRNO(DP_ERR_IO, "segment '{}': F_ADD_SEALS", name);
    void *base = map_guarded(fd.get(), size, pages);
    if (base != MAP_FAILED && writers == Writers::unrestricted &&
        fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SEAL) != 0) {
        const int err = errno;
        munmap(static_cast<std::byte *>(base) - guard_bytes(), size + 2 * guard_bytes());
        DP_FAIL(DP_ERR_IO, "segment '{}': F_ADD_SEALS: {}", name, std::strerror(err));
    }
    if (base == MAP_FAILED) {
        int err = errno;
        DP_FAIL(err == ENOMEM ? DP_ERR_NOMEM : DP_ERR_IO, "segment '{}': mmap {} bytes: {}", name,
                size, std::strerror(err));
    }
    out->reset();
    out->fd_ = std::move(fd);
    out->base_ = base;
    out->size_ = size;
    out->writable_ = true;
    DP_LOG_DEBUG("segment '{}': {} bytes, memfd {}", name, size, out->fd_.get());
    return DP_OK;
}

dp_status_t Segment::check_received(int fd, size_t expected_bytes, std::string *why) {
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) {
        *why = fmt::format("fd {} is not a sealable memfd", fd);
        return DP_ERR_DENIED;
    }
    if ((seals & kSizeSeals) != kSizeSeals) {
        *why = fmt::format("memfd {} can still shrink or grow (seals 0x{:x})", fd, seals);
        return DP_ERR_DENIED;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        *why = fmt::format("fstat: {}", std::strerror(errno));
        return DP_ERR_DENIED;
    }
    if (st.st_size == 0) {
        *why = "the memfd is empty";
        return DP_ERR_INVALID;
    }
    if (expected_bytes != 0 && size_t(st.st_size) != expected_bytes) {
        *why = fmt::format("the memfd has {} bytes, the peer announced {}", st.st_size,
                           expected_bytes);
        return DP_ERR_INVALID;
    }
    return DP_OK;
}

dp_status_t Segment::map(UniqueFd fd, size_t expected_bytes, Segment *out, Pages pages,
                         Access access) {
    if (!fd) DP_FAIL(DP_ERR_INVALID, "segment map: no fd");
    std::string why;
    if (const dp_status_t st = check_received(fd.get(), expected_bytes, &why); st != DP_OK)
        DP_FAIL(st, "segment map: {}", why);
    struct stat st {};
    fstat(fd.get(), &st);
    const size_t size = size_t(st.st_size);
    void *base = map_guarded(fd.get(), size, pages, access);
    if (base == MAP_FAILED) {
        int err = errno;  // logging may clobber errno before DP_FAIL returns
        DP_FAIL(err == ENOMEM ? DP_ERR_NOMEM : DP_ERR_IO, "segment map: mmap {} bytes: {}", size,
                std::strerror(err));
    }
    out->reset();
    out->fd_ = std::move(fd);
    out->base_ = base;
    out->size_ = size;
    out->writable_ = access == Access::read_write;
    return DP_OK;
}

dp_status_t Segment::map_received(UniqueFd fd, Segment *out) {
    out->reset();
    const int flags = fcntl(fd.get(), F_GETFL);
    const Access access =
        flags >= 0 && (flags & O_ACCMODE) == O_RDWR ? Access::read_write : Access::read_only;
    DP_CHECK(map(std::move(fd), 0, out, Pages::lazy, access));
    out->close_fd();
    return DP_OK;
}

}  // namespace deputy
