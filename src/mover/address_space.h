// How the device turns descriptor addresses into pointers it may touch.
//
// Descriptors carry 64-bit addresses, never pointers of the device's own
// process. Each submitter has an address space (DSA calls its id a PASID):
// in-process it is the identity; behind the agent it maps a client's
// registered ranges and refuses everything else. The device asks before it
// reads or writes a single byte, so a refused range leaves memory untouched.
#pragma once

#include <cstdint>

namespace deputy::mover {

enum class Access { read, write };

class AddressSpace {
public:
    virtual ~AddressSpace() = default;
    // A pointer to [addr, addr+len) when the submitter may access it so;
    // nullptr otherwise. len == 0 is allowed and still needs a valid addr.
    virtual void *translate(uint64_t addr, uint64_t len, Access access) const = 0;
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
