// The bytes a run writes and checks. Page `page` of device `device` holds a
// stream from a PRNG seeded by (seed, device, page), so the client can check
// every byte without the server sending the data twice, and a misplaced
// page (right bytes, wrong place) is caught too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace deputy::rail {

// Fills `len` bytes with the pattern of (seed, device, page).
void fill_page(uint8_t *dst, size_t len, uint64_t seed, uint32_t device, uint64_t page);

struct Mismatch {
    uint32_t device = 0;
    uint64_t page = 0;
    uint64_t offset = 0;        // first differing byte within the page
    uint8_t expected = 0;
    uint8_t actual = 0;
    uint64_t bytes_differ = 0;  // differing bytes in this page
    std::string describe() const;
};

struct VerifyReport {
    uint64_t checked_bytes = 0;
    uint64_t bad_pages = 0;
    uint64_t bad_bytes = 0;
    std::vector<Mismatch> first;  // at most max_report entries
    void merge(const VerifyReport &other, size_t max_report);
};

// Checks `pages` pages of `page_size` bytes at `buf` against device
// `device`'s pages first_page, first_page + 1, ...; records up to
// `max_report` mismatching pages.
VerifyReport verify_pages(const uint8_t *buf, size_t page_size, uint64_t pages,
                          uint64_t first_page, uint64_t seed, uint32_t device, size_t max_report);

}  // namespace deputy::rail
