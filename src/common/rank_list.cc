#include "common/rank_list.h"

#include <fmt/format.h>

namespace deputy {

std::string rank_list(const std::vector<uint32_t> &ranks) {
    constexpr size_t kMaxChars = 300;
    std::string out;
    size_t i = 0;
    while (i < ranks.size()) {
        size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        if (out.size() >= kMaxChars) {
            out += fmt::format(", ... ({} in all)", ranks.size());
            return out;
        }
        if (!out.empty()) out += ", ";
        out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
        i = j + 1;
    }
    return out;
}

}  // namespace deputy
