// An owning file descriptor. Every fd the runtime creates is held by one of
// these from the syscall that made it to its close, so an early return on an
// error path can never leak one (the agent serves many clients for days; a
// leaked fd per failed client is how such daemons die).
#pragma once

#include <unistd.h>

#include <utility>

namespace deputy {

class UniqueFd {
  public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd &&other) noexcept : fd_(other.release()) {}
    UniqueFd &operator=(UniqueFd &&other) noexcept {
        if (this != &other) reset(other.release());
        return *this;
    }
    UniqueFd(const UniqueFd &) = delete;
    UniqueFd &operator=(const UniqueFd &) = delete;

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    explicit operator bool() const { return valid(); }

    // Gives up ownership: the caller closes the returned fd.
    int release() { return std::exchange(fd_, -1); }

    // Closes the held fd (if any) and takes `fd`. close() errors are ignored
    // on purpose: on Linux the fd is released even when close reports EINTR
    // or EIO, and retrying could close an fd another thread just received.
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

  private:
    int fd_ = -1;
};

}  // namespace deputy
