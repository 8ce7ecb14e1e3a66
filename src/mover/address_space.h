// How the device turns descriptor addresses into pointers it may touch.
//
// Descriptors carry 64-bit addresses, never pointers of the device's own
// process. Each submitter has an address space (DSA calls its id a PASID):
// in-process it is the identity; behind the agent it maps a client's
// registered ranges and refuses everything else. The device asks before it
// reads or writes a single byte, so a refused range leaves memory untouched.
#pragma once

#include <deputy/mover.h>

#include <cstdint>

namespace deputy::mover {

// record: a completion record, written. A space that copies memory rather
// than addressing it (the agent's bounce buffers) writes records back after
// the data, status byte last, so a poller never sees "done" before the bytes.
enum class Access { read, write, record };
struct OpResult;
struct ExecLimits;

class AddressSpace {
public:
    virtual ~AddressSpace() = default;
    // A pointer to [addr, addr+len) when the submitter may access it so;
    // nullptr otherwise. len == 0 is allowed and still needs a valid addr.
    virtual void *translate(uint64_t addr, uint64_t len, Access access) const = 0;

    // What an engine does with one descriptor of this space (any but DRAIN):
    // run it and publish its completion record. The default (execute.cc)
    // executes in place through translate(). A space whose memory the engine
    // cannot address in place (another process's ordinary memory, reached
    // by copies) overrides it. False when the descriptor asked for a record
    // this space cannot write: it did not run (like DSA, it could not report).
    virtual bool run(const dp_desc_t &desc, const ExecLimits &limits, OpResult *result) const;

    // Logs a descriptor that could not report. A space serving an untrusted
    // submitter rate-limits, so garbage cannot flood the log.
    virtual void report_lost(const dp_desc_t &desc, const char *queue) const;

    // An engine is done with `desc` (run, refused or drained), still inside
    // the space: a space that counts its submitter's work in flight (the
    // agent's, for fairness between clients) counts it out here.
    virtual void finished(const dp_desc_t &) const {}

    // True when the submitter hands this space's DRAIN to the engines only
    // once all its earlier descriptors finished (the agent holds a client's
    // DRAIN back until then): the engine then completes it without waiting
    // for the whole queue, which other submitters share and whose work one
    // of them may hold (stall_watch.h).
    virtual bool orders_own_drains() const { return false; }
};

// The calling process's own memory: addresses are pointers. Refuses only what
// can never be valid (null, wrap-around past the top of the address space).
class LocalAddressSpace final : public AddressSpace {
public:
    void *translate(uint64_t addr, uint64_t len, Access) const override {
        if (addr == 0 || addr + len < addr) return nullptr;
        return reinterpret_cast<void *>(addr);
    }
};

}  // namespace deputy::mover
