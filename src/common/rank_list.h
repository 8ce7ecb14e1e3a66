// Ranks as a person reads them in a message: runs as ranges ("0-5, 9,
// 12-4095"), cut after a few hundred characters with the count of the
// rest, so that a team of thousands missing most of its members still
// fits an answer (channel::control::kMaxReasonBytes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deputy {

// `ranks` ascending.
std::string rank_list(const std::vector<uint32_t> &ranks);

}  // namespace deputy
