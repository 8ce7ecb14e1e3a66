#include "bench/rail/wire.h"

#include "bench/rail/rail_error.h"

namespace deputy::rail {

const char *msg_name(MsgType type) {
    auto index = size_t(type);
    return index < kMsgNames.size() ? kMsgNames[index] : "?";
}

bool msg_type_valid(uint16_t raw) { return raw >= 1 && raw < kMsgNames.size(); }

std::string to_hex(const std::vector<uint8_t> &bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (uint8_t b : bytes) {
        out += kDigits[b >> 4];
        out += kDigits[b & 15];
    }
    return out;
}

std::vector<uint8_t> from_hex(const std::string &text, const char *field_name) {
    auto nibble = [&](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw RailError(std::string("field '") + field_name + "' is not hex");
    };
    if (text.size() % 2 != 0)
        throw RailError(std::string("field '") + field_name + "' has an odd number of hex digits");
    std::vector<uint8_t> out(text.size() / 2);
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = uint8_t(nibble(text[2 * i]) << 4 | nibble(text[2 * i + 1]));
    return out;
}

template <typename T>
T field(const nlohmann::json &body, const char *msg, const char *key) {
    auto it = body.find(key);
    bool ok = it != body.end();
    if (ok) {
        if constexpr (std::is_same_v<T, bool>) ok = it->is_boolean();
        else if constexpr (std::is_same_v<T, std::string>) ok = it->is_string();
        else if constexpr (std::is_floating_point_v<T>) ok = it->is_number();
        else if constexpr (std::is_unsigned_v<T>) ok = it->is_number_unsigned() || (it->is_number_integer() && it->template get<int64_t>() >= 0);
        else if constexpr (std::is_integral_v<T>) ok = it->is_number_integer();
        else ok = true;
    }
    if (!ok)
        throw RailError(std::string(msg) + ": field '" + key + "' is missing or has the wrong type");
    return it->get<T>();
}

template bool field<bool>(const nlohmann::json &, const char *, const char *);
template int field<int>(const nlohmann::json &, const char *, const char *);
template uint64_t field<uint64_t>(const nlohmann::json &, const char *, const char *);
template double field<double>(const nlohmann::json &, const char *, const char *);
template std::string field<std::string>(const nlohmann::json &, const char *, const char *);
template nlohmann::json field<nlohmann::json>(const nlohmann::json &, const char *, const char *);

}  // namespace deputy::rail
