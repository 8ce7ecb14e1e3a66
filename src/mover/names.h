// Names and sizes for raw descriptor bytes. A client may put any value in a
// descriptor's opcode, dtype or status byte, and in C++ converting a value
// outside an enum's range to the enum is undefined behaviour: code that has
// not validated the byte yet asks these, which take the integer.
#pragma once

#include <deputy/mover.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace deputy::mover {

const char *opcode_name(unsigned raw);       // "memmove", ...; "unknown"
bool opcode_from_name(std::string_view name, dp_opcode_t *op);  // the reverse
std::string opcode_names();                  // every name, space-separated (for errors)
const char *comp_status_name(unsigned raw);  // "success", ...; "unknown"
size_t dtype_size(unsigned raw);             // 0 for anything not a dp_dtype_t
// Whether reduction `op` applies to `dtype` (both raw): sum .. bxor to the
// integer types, sum/prod/min/max to the floating ones, minloc/maxloc to the
// (value, index) pairs and to nothing else. The one rule every layer that
// checks a reduction asks; inline, as a post checks it.
inline bool is_integer_dtype(unsigned raw) { return raw <= unsigned(DP_UINT64); }
inline bool is_pair_dtype(unsigned raw) {
    return raw >= unsigned(DP_FLOAT32_INT32) && raw < unsigned(DP_DTYPE_COUNT);
}
inline bool op_applies(unsigned dtype, unsigned op) {
    if (dtype >= unsigned(DP_DTYPE_COUNT) || op >= unsigned(DP_OP_COUNT)) return false;
    if (is_pair_dtype(dtype)) return op == unsigned(DP_MINLOC) || op == unsigned(DP_MAXLOC);
    if (op == unsigned(DP_MINLOC) || op == unsigned(DP_MAXLOC)) return false;
    return op <= unsigned(DP_MAX) || is_integer_dtype(dtype);
}

}  // namespace deputy::mover
