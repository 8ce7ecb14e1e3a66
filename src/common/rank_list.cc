#include "common/rank_list.h"

#include <fmt/format.h>

#include "common/runs.h"

namespace deputy {

std::string rank_list(const std::vector<uint32_t> &ranks) {
    constexpr size_t kMaxChars = 300;
    std::string out;
    auto consecutive = [](uint32_t a, uint32_t b) { return b == a + 1; };
    for_each_run(ranks, consecutive, [&](size_t i, size_t end) {
        if (out.size() >= kMaxChars) {
            out += fmt::format(", ... ({} in all)", ranks.size());
            return false;
        }
        if (!out.empty()) out += ", ";
        out += end == i + 1 ? fmt::format("{}", ranks[i])
                            : fmt::format("{}-{}", ranks[i], ranks[end - 1]);
        return true;
    });
    return out;
}

}  // namespace deputy
