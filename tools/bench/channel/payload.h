// The bytes the bench sends: message i carries i (little-endian u64) in its
// first 8 bytes and a fixed pattern after it, so the receiver checks order,
// loss and every byte with one compare against a template it builds from the
// sender's message size alone.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace deputy::bench::channel {

class Payload {
  public:
    explicit Payload(uint64_t size) : bytes_(size) {
        for (uint64_t j = 0; j < size; ++j) bytes_[j] = uint8_t((j * 167 + 13) ^ (j >> 9));
    }
    uint64_t size() const { return bytes_.size(); }

    // The message with sequence number `seq`, built in place.
    const uint8_t *message(uint64_t seq) {
        stamp(bytes_.data(), bytes_.size(), seq);
        return bytes_.data();
    }

    // True if `data` is exactly message `seq`.
    bool matches(const uint8_t *data, uint64_t length, uint64_t seq) const {
        if (length != bytes_.size()) return false;
        uint8_t head[8];
        const uint64_t n = length < 8 ? length : 8;
        for (uint64_t j = 0; j < n; ++j) head[j] = uint8_t(seq >> (8 * j));
        return std::memcmp(data, head, n) == 0 &&
               std::memcmp(data + n, bytes_.data() + n, length - n) == 0;
    }

  private:
    static void stamp(uint8_t *data, uint64_t length, uint64_t seq) {
        for (uint64_t j = 0; j < length && j < 8; ++j) data[j] = uint8_t(seq >> (8 * j));
    }
    std::vector<uint8_t> bytes_;
};

}  // namespace deputy::bench::channel
