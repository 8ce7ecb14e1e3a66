#include "common/units.h"

#include <cctype>
#include <charconv>

namespace deputy::units {

std::optional<uint64_t> parse_size(std::string_view text) {
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr == text.data()) return std::nullopt;
    std::string_view suffix(ptr, size_t(text.data() + text.size() - ptr));
    std::string s;
    for (char c : suffix) s += char(std::tolower((unsigned char)c));
    if (s.size() > 1 && s.back() == 'b') s.pop_back();   // "kb", "kib"
    if (s.size() > 1 && s.back() == 'i') s.pop_back();   // "ki"
    unsigned shift;
    if (s.empty()) shift = 0;
    else if (s == "k") shift = 10;
    else if (s == "m") shift = 20;
    else if (s == "g") shift = 30;
    else if (s == "t") shift = 40;
    else return std::nullopt;
    if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
    return value << shift;
}

std::string format_size(uint64_t bytes) {
    static constexpr const char *kSuffix[] = {"", "K", "M", "G", "T"};
    unsigned i = 0;
    while (i < 4 && bytes != 0 && bytes % 1024 == 0) {
        bytes /= 1024;
        ++i;
    }
    return std::to_string(bytes) + kSuffix[i];
}

}  // namespace deputy::units
