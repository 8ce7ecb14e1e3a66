// Name tables of the mover's enums: what tables, logs and JSON print.
#include "mover/names.h"

#include <deputy/mover.h>

#include <array>

namespace {

struct OpcodeName {
    dp_opcode_t op;
    const char *name;
};

constexpr std::array<OpcodeName, 18> kOpcodeNames{{
    {DP_OP_NOOP, "noop"},
    {DP_OP_BATCH, "batch"},
    {DP_OP_DRAIN, "drain"},
    {DP_OP_MEMMOVE, "memmove"},
    {DP_OP_FILL, "fill"},
    {DP_OP_COMPARE, "compare"},
    {DP_OP_COMPARE_PATTERN, "compare_pattern"},
    {DP_OP_CREATE_DELTA, "create_delta"},
    {DP_OP_APPLY_DELTA, "apply_delta"},
    {DP_OP_DUALCAST, "dualcast"},
    {DP_OP_CRC32C, "crc32c"},
    {DP_OP_COPY_CRC32C, "copy_crc32c"},
    {DP_OP_DIF_CHECK, "dif_check"},
    {DP_OP_DIF_INSERT, "dif_insert"},
    {DP_OP_DIF_STRIP, "dif_strip"},
    {DP_OP_DIF_UPDATE, "dif_update"},
    {DP_OP_CACHE_FLUSH, "cache_flush"},
    {DP_OP_REDUCE, "reduce"},
}};

constexpr std::array<const char *, DP_COMP_STATUS_COUNT> kCompStatusNames{{
    "pending", "success", "false_predicate", "invalid_opcode", "invalid_size", "invalid_flags",
    "invalid_field", "batch_failed", "overlap", "delta_overflow", "address_denied", "abandoned",
    "invalid_batch", "page_fault", "dif_error",
}};
static_assert(DP_COMP_STATUS_COUNT == 15, "completion status names out of date");

constexpr std::array<const char *, DP_DTYPE_COUNT> kDtypeNames{{
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "bfloat16", "float32", "float64", "float32_int32", "float64_int32", "int64_int32",
    "int32_int32", "int16_int32", "float32_float32", "float64_float64",
}};
// The pairs' sizes are their C structs' (padding included).
constexpr std::array<size_t, DP_DTYPE_COUNT> kDtypeSizes{
    {1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16, 16, 8, 8, 8, 16}};
constexpr std::array<const char *, DP_OP_COUNT> kOpNames{{
    "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor", "minloc", "maxloc",
}};

}  // namespace

namespace deputy::mover {

const char *opcode_name(unsigned raw) {
    for (const auto &row : kOpcodeNames)
        if (unsigned(row.op) == raw) return row.name;
    return "unknown";
}

bool opcode_from_name(std::string_view name, dp_opcode_t *op) {
    for (const auto &row : kOpcodeNames)
        if (name == row.name) return *op = row.op, true;
    return false;
}

std::string opcode_names() {
    std::string all;
    for (const auto &row : kOpcodeNames) all += (all.empty() ? "" : " ") + std::string(row.name);
    return all;
}

const char *comp_status_name(unsigned raw) {
    return raw < kCompStatusNames.size() ? kCompStatusNames[raw] : "unknown";
}

size_t dtype_size(unsigned raw) { return raw < kDtypeSizes.size() ? kDtypeSizes[raw] : 0; }



}  // namespace deputy::mover

extern "C" const char *dp_opcode_name(dp_opcode_t op) {
    return deputy::mover::opcode_name(unsigned(op));
}

extern "C" const char *dp_comp_status_name(dp_comp_status_t status) {
    return deputy::mover::comp_status_name(unsigned(status));
}

extern "C" const char *dp_dtype_name(dp_dtype_t dtype) {
    unsigned index = unsigned(dtype);
    return index < kDtypeNames.size() ? kDtypeNames[index] : "unknown";
}

extern "C" int dp_op_applies(dp_dtype_t dtype, dp_op_t op) {
    return deputy::mover::op_applies(unsigned(dtype), unsigned(op)) ? 1 : 0;
}

extern "C" const char *dp_op_name(dp_op_t op) {
    unsigned index = unsigned(op);
    return index < kOpNames.size() ? kOpNames[index] : "unknown";
}

extern "C" size_t dp_dtype_size(dp_dtype_t dtype) {
    return deputy::mover::dtype_size(unsigned(dtype));
}
