#include "bench/rail/pattern.h"

#include <algorithm>
#include <cstring>

namespace deputy::rail {
namespace {

// SplitMix64: one multiply-xorshift step per 8 bytes; good enough that a
// shifted or swapped page never matches by chance.
inline uint64_t splitmix(uint64_t &state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t page_state(uint64_t seed, uint32_t device, uint64_t page) {
    uint64_t state = seed;
    uint64_t mixed = splitmix(state) ^ (uint64_t(device) << 48) ^ page;
    return splitmix(mixed);
}

char hex_digit(unsigned v) { return "0123456789abcdef"[v & 15]; }

}  // namespace

void fill_page(uint8_t *dst, size_t len, uint64_t seed, uint32_t device, uint64_t page) {
    uint64_t state = page_state(seed, device, page);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = splitmix(state);
        std::memcpy(dst + i, &v, 8);
    }
    if (i < len) {
        uint64_t v = splitmix(state);
        std::memcpy(dst + i, &v, len - i);
    }
}

std::string Mismatch::describe() const {
    std::string out = "device " + std::to_string(device) + " page " + std::to_string(page) +
                      " offset " + std::to_string(offset) + ": expected 0x";
    out += hex_digit(expected >> 4);
    out += hex_digit(expected);
    out += " got 0x";
    out += hex_digit(actual >> 4);
    out += hex_digit(actual);
    out += " (" + std::to_string(bytes_differ) + " bytes of the page differ)";
    return out;
}

void VerifyReport::merge(const VerifyReport &other, size_t max_report) {
    checked_bytes += other.checked_bytes;
    bad_pages += other.bad_pages;
    bad_bytes += other.bad_bytes;
    for (const auto &m : other.first)
        if (first.size() < max_report) first.push_back(m);
}

VerifyReport verify_pages(const uint8_t *buf, size_t page_size, uint64_t pages,
                          uint64_t first_page, uint64_t seed, uint32_t device, size_t max_report) {
    VerifyReport report;
    std::vector<uint8_t> expected(page_size);
    for (uint64_t i = 0; i < pages; ++i) {
        const uint64_t page = first_page + i;
        const uint8_t *got = buf + i * page_size;
        fill_page(expected.data(), page_size, seed, device, page);
        report.checked_bytes += page_size;
        if (std::memcmp(got, expected.data(), page_size) == 0) continue;
        Mismatch m;
        m.device = device;
        m.page = page;
        bool first = true;
        for (size_t i = 0; i < page_size; ++i) {
            if (got[i] == expected[i]) continue;
            if (first) {
                m.offset = i;
                m.expected = expected[i];
                m.actual = got[i];
                first = false;
            }
            ++m.bytes_differ;
        }
        ++report.bad_pages;
        report.bad_bytes += m.bytes_differ;
        if (report.first.size() < max_report) report.first.push_back(m);
    }
    return report;
}

}  // namespace deputy::rail
