// Shared-memory segments: anonymous memfd files mapped MAP_SHARED. They have
// no name in /dev/shm (nothing to clean up after a crash, nothing another
// user can open by guessing a path); a segment travels between processes
// only as an fd passed over a Unix socket (SCM_RIGHTS), and lives until the
// last mapping and fd are gone.
#pragma once

#include <deputy/status.h>

#include <cstddef>
#include <string>

#include "common/fd.h"

namespace deputy {

class Segment {
  public:
    Segment() = default;
    ~Segment();
    Segment(Segment &&other) noexcept;
    Segment &operator=(Segment &&other) noexcept;
    Segment(const Segment &) = delete;
    Segment &operator=(const Segment &) = delete;

    // Whether mapping allocates and maps every page at once. Prefault where
    // a benchmark must not time first touches (a channel's rings); lazy
    // where memory should be committed only as it is used (a client's pool:
    // an agent serving 128 processes must not commit 128 pools up front, nor
    // spend its service thread faulting them in).
    enum class Pages { prefault, lazy };

    // Whether the segment can be closed to new writers later. Any process
    // of the user can open a memfd writable again through /proc/<pid>/fd
    // (the file's mode, not the fd's, decides), so a segment others get an
    // fd of (a read-only view included) is closed once its own writers
    // mapped it: `closable` leaves that to close_to_new_writers();
    // `unrestricted` seals F_SEAL_SEAL with the size (a channel's rings,
    // which the peer maps writable).
    enum class Writers { unrestricted, closable };

    // Creates a zero-filled segment of at least `bytes` (rounded up to the page
    // size) and maps it. The size is then sealed (F_SEAL_SHRINK,
    // F_SEAL_GROW), so whoever maps the fd later can rely on it.
    // `name` only labels the memfd in /proc/<pid>/fd. DP_ERR_NOMEM when the
    // memory is not there, DP_ERR_IO for other syscall failures.
    static dp_status_t create(const std::string &name, size_t bytes, Segment *out,
                              Pages pages = Pages::prefault,
                              Writers writers = Writers::unrestricted);

    // From now on nobody maps the segment writable or write()s it, through
    // any fd of it (F_SEAL_FUTURE_WRITE, Linux 5.1): mappings made before
    // keep writing. DP_ERR_UNSUPPORTED on a kernel without the seal,
    // DP_ERR_IO when the fd cannot take it (not ours to seal).
    dp_status_t close_to_new_writers() const;

    // Maps a segment received from another process, taking ownership of `fd`.
    // Refuses with DP_ERR_DENIED an fd that is not a memfd sealed against
    // shrinking and growing: its owner could truncate it while we read it,
    // turning our loads into SIGBUS. `expected_bytes` (0: any) must equal the
    // file size when given, so a peer cannot hand over a smaller file than
    // announced.
    // `access`: read_only for a view (an fd opened O_RDONLY cannot be mapped
    // writable; a segment closed to new writers cannot either).
    enum class Access { read_write, read_only };
    static dp_status_t map(UniqueFd fd, size_t expected_bytes, Segment *out,
                           Pages pages = Pages::prefault, Access access = Access::read_write);
    // Maps a segment that came with a message as its fd allows (read-write
    // when the peer sent it O_RDWR, else read-only), lazily, and closes the
    // fd: a file a process holds no fd of cannot be opened again through
    // its /proc/<pid>/fd. Call it inside a PrivateWindow that covered the
    // recvmsg(). On failure (logged, as map()'s) *out is left invalid.
    static dp_status_t map_received(UniqueFd fd, Segment *out);
    // map()'s checks alone, logging nothing (for an fd from a peer that may
    // be hostile): DP_OK, or DP_ERR_DENIED / DP_ERR_INVALID with *why.
    static dp_status_t check_received(int fd, size_t expected_bytes, std::string *why);

    // Every mapping has an inaccessible guard page on each side: an access
    // that runs off either end faults here instead of landing in whatever
    // the kernel mapped next (another client's segment, in the agent).
    static size_t guard_bytes();

    bool valid() const { return base_ != nullptr; }
    void *data() const { return base_; }
    size_t size() const { return size_; }
    // The memfd, to pass to another process (it stays owned by the segment).
    int fd() const { return fd_.get(); }
    // Whether this process's mapping can write (views are read-only).
    bool writable() const { return writable_; }
    // The byte at `offset`; offset must be < size() (not checked here).
    std::byte *at(size_t offset) const { return static_cast<std::byte *>(base_) + offset; }

    // Closes the fd and keeps the mapping: nobody can reach the file through
    // this process any more (close_to_new_writers() needs the fd: seal first).
    void close_fd() { fd_.reset(); }

    // Unmaps and closes now (the destructor does the same).
    void reset();

  private:
    UniqueFd fd_;
    void *base_ = nullptr;
    size_t size_ = 0;
    bool writable_ = false;
};

}  // namespace deputy
