// The process's shared heap: ordinary memory that any agent this process
// attaches to maps as well, so the agent's engines read, reduce and write it
// in place (mapped mode) instead of copying it through process_vm_readv /
// writev (direct mode: two kernel copies per byte, 2-4x slower).
//
// One sealed memfd per process, mapped once at a fixed place and shared with
// each context at dp_init (channel message HEAP_SHARE). It is not tied to a
// context: memory from it outlives dp_finalize, and it can be allocated
// before any agent is reached (an MPI program allocates before MPI_Init).
// The large allocations of an unmodified program land here through the
// malloc interposer of libdeputy-mpi / libdeputy-heap (src/preload).
//
// The memfd is sized once (physical memory, or $DEPUTY_HEAP_BYTES) and costs
// nothing until pages are touched. Freed blocks stay committed up to
// kKeepDirtyBytes, wherever they are: a program (or an MPI library's
// allreduce, with its temporary buffer) that frees and allocates the same
// size each iteration must not pay page faults that glibc would not make it
// pay (measured: punching the top on every free made Open MPI's own 1 MiB
// allreduce 3x slower). Beyond that limit the pages go back to the kernel
// (FALLOC_FL_PUNCH_HOLE; they read as zeros after).
//
// fork: the mapping is MADV_DONTFORK; an atfork handler copies the live
// blocks into a new memfd in the parent just before the fork, and the child
// maps that one at the same place. A child so gets its own copy of its
// parent's blocks as they were at fork, as with private memory, rather than
// sharing them with its parent (which a plain MAP_SHARED mapping would do:
// both would write the same pages). The copy costs time in fork in
// proportion to the live blocks; vfork and posix_spawn (what system() and
// subprocess use) copy nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace deputy::client {

class SharedHeap {
  public:
    // Freed blocks kept committed for reuse before pages go back.
    static constexpr size_t kKeepDirtyBytes = size_t(256) << 20;
    // Largest alignment a caller may ask for.
    static constexpr size_t kMaxAlign = size_t(1) << 21;

    // The process's heap, created on first use; nullptr when disabled
    // ($DEPUTY_HEAP_BYTES=0) or when the kernel refused (logged once).
    static SharedHeap *instance();
    // The heap if it exists already; never creates it (the free path).
    static SharedHeap *existing();

    // Page-aligned (or `align`, a power of two up to kMaxAlign) memory of at
    // least `bytes`; nullptr when the heap is full. `zeroed`: the caller
    // needs zeros (fresh or punched pages are not cleared again).
    void *allocate(size_t bytes, size_t align, bool zeroed);
    // False (and nothing changes) for a pointer this heap did not hand out.
    bool release(void *p);
    // The bytes of the block `p` starts; 0 when it is not one.
    size_t usable_size(const void *p) const;

    // One comparison pair, no lock: for free() of every pointer.
    bool contains(const void *p, size_t bytes = 1) const {
        const auto a = reinterpret_cast<uintptr_t>(p);
        return a >= base_ && a - base_ < size_ && bytes <= size_ - (a - base_);
    }
    void *base() const { return reinterpret_cast<void *>(base_); }
    size_t size() const { return size_; }
    // The memfd (owned here), to pass to an agent.
    int fd() const { return fd_; }

    struct Stats {
        size_t live_bytes = 0;   // handed out, not freed
        size_t live_blocks = 0;
        size_t dirty_bytes = 0;  // freed, still committed for reuse (holes and above top)
        size_t top = 0;          // end of the span ever used, below it: blocks and holes
    };
    Stats stats() const;

  private:
    SharedHeap() = default;
    bool create(size_t bytes);
    void punch(size_t offset, size_t len);
    void insert_free(size_t offset, size_t len, bool dirty);
    void trim_dirty();
    size_t kept_bytes() const;
    // atfork
    static void before_fork();
    static void after_fork_parent();
    static void after_fork_child();
    void remake_in_child();
    bool copy_live_blocks(int to_fd) const;

    struct Hole {
        size_t len;
        bool dirty;  // holds old bytes (else reads as zeros)
    };

    uintptr_t base_ = 0;
    size_t size_ = 0;
    int fd_ = -1;
    int child_fd_ = -1;  // between atfork prepare and parent/child: the child's copy
    mutable std::mutex mutex_;
    std::map<size_t, size_t> used_;  // offset -> length
    std::map<size_t, Hole> holes_;   // offset -> hole below top_, never adjacent
    size_t top_ = 0;                 // [top_, size_): no block
    size_t high_ = 0;                // [top_, high_) held blocks once, kept; above: zeros
    size_t dirty_bytes_ = 0;         // in dirty holes
    size_t live_bytes_ = 0;
};

}  // namespace deputy::client
