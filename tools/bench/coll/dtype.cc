#include "bench/coll/dtype.h"

#include <fmt/format.h>

#include <cstring>

#include "mover/kernels/half.h"

namespace deputy::bench::coll {
namespace {

const Dtype kTypes[] = {
    {DP_INT8, "int8", 1, false, true, 100},        {DP_INT16, "int16", 2, false, true, 10000},
    {DP_INT32, "int32", 4, false, true, 10000},    {DP_INT64, "int64", 8, false, true, 10000},
    {DP_UINT8, "uint8", 1, false, false, 200},     {DP_UINT16, "uint16", 2, false, false, 10000},
    {DP_UINT32, "uint32", 4, false, false, 10000}, {DP_UINT64, "uint64", 8, false, false, 10000},
    {DP_FLOAT16, "float16", 2, true, true, 2048},   // 11-bit significand
    {DP_BFLOAT16, "bfloat16", 2, true, true, 256},  // 8-bit significand
    {DP_FLOAT32, "float32", 4, true, true, 10000}, {DP_FLOAT64, "float64", 8, true, true, 10000},
};

template <typename T>
void put(void *buf, size_t i, T v) {
    std::memcpy(static_cast<char *>(buf) + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
T get(const void *buf, size_t i) {
    T v;
    std::memcpy(&v, static_cast<const char *>(buf) + i * sizeof(T), sizeof(T));
    return v;
}

}  // namespace

const Dtype *find_dtype(std::string_view name) {
    for (const Dtype &t : kTypes)
        if (name == t.name) return &t;
    return nullptr;
}

const Dtype &dtype_of(dp_dtype_t dp) {
    for (const Dtype &t : kTypes)
        if (t.dp == dp) return t;
    return kTypes[10];
}

std::string dtype_names() {
    std::string out;
    for (const Dtype &t : kTypes) out += (out.empty() ? "" : ", ") + std::string(t.name);
    return out;
}

MPI_Datatype mpi_type(const Dtype &t) {
    switch (t.dp) {
        case DP_INT8:
            return MPI_INT8_T;
        case DP_INT16:
            return MPI_INT16_T;
        case DP_INT32:
            return MPI_INT32_T;
        case DP_INT64:
            return MPI_INT64_T;
        case DP_UINT8:
            return MPI_UINT8_T;
        case DP_UINT16:
            return MPI_UINT16_T;
        case DP_UINT32:
            return MPI_UINT32_T;
        case DP_UINT64:
            return MPI_UINT64_T;
        case DP_FLOAT32:
            return MPI_FLOAT;
        case DP_FLOAT64:
            return MPI_DOUBLE;
        default:
            return MPI_DATATYPE_NULL;
    }
}

MPI_Op mpi_op(dp_op_t op) {
    switch (op) {
        case DP_SUM:
        case DP_OP_COUNT:
            return MPI_SUM;
        case DP_PROD:
            return MPI_PROD;
        case DP_MIN:
            return MPI_MIN;
        case DP_MAX:
            return MPI_MAX;
        case DP_LAND:
            return MPI_LAND;
        case DP_LOR:
            return MPI_LOR;
        case DP_LXOR:
            return MPI_LXOR;
        case DP_BAND:
            return MPI_BAND;
        case DP_BOR:
            return MPI_BOR;
        case DP_BXOR:
            return MPI_BXOR;
        case DP_MINLOC:
            return MPI_MINLOC;
        case DP_MAXLOC:
            return MPI_MAXLOC;
    }
    return MPI_SUM;
}

std::string redop_names() {
    std::string out;
    for (int o = 0; o < DP_OP_COUNT; ++o)
        out += (out.empty() ? "" : ", ") + std::string(dp_op_name(dp_op_t(o)));
    return out;
}

bool parse_redop(std::string_view name, dp_op_t *op) {
    for (int o = 0; o < DP_OP_COUNT; ++o)
        if (name == dp_op_name(dp_op_t(o))) return *op = dp_op_t(o), true;
    return false;
}

void store(const Dtype &t, void *buf, size_t i, int64_t v) {
    // Integer conversions wrap (C++20: modular), as deputy's and MPI's
    // integer reductions do.
    switch (t.dp) {
        case DP_INT8:
            put(buf, i, int8_t(v));
            break;
        case DP_INT16:
            put(buf, i, int16_t(v));
            break;
        case DP_INT32:
            put(buf, i, int32_t(v));
            break;
        case DP_INT64:
            put(buf, i, int64_t(v));
            break;
        case DP_UINT8:
            put(buf, i, uint8_t(v));
            break;
        case DP_UINT16:
            put(buf, i, uint16_t(v));
            break;
        case DP_UINT32:
            put(buf, i, uint32_t(v));
            break;
        case DP_UINT64:
            put(buf, i, uint64_t(v));
            break;
        case DP_FLOAT16:
            put(buf, i, mover::kernels::float_to_half(float(v)));
            break;
        case DP_BFLOAT16:
            put(buf, i, mover::kernels::float_to_bfloat(float(v)));
            break;
        case DP_FLOAT32:
            put(buf, i, float(v));
            break;
        case DP_FLOAT64:
            put(buf, i, double(v));
            break;
        default:
            break;
    }
}

std::string format_element(const Dtype &t, const void *buf, size_t i) {
    switch (t.dp) {
        case DP_INT8:
            return fmt::format("{}", int(get<int8_t>(buf, i)));
        case DP_INT16:
            return fmt::format("{}", get<int16_t>(buf, i));
        case DP_INT32:
            return fmt::format("{}", get<int32_t>(buf, i));
        case DP_INT64:
            return fmt::format("{}", get<int64_t>(buf, i));
        case DP_UINT8:
            return fmt::format("{}", unsigned(get<uint8_t>(buf, i)));
        case DP_UINT16:
            return fmt::format("{}", get<uint16_t>(buf, i));
        case DP_UINT32:
            return fmt::format("{}", get<uint32_t>(buf, i));
        case DP_UINT64:
            return fmt::format("{}", get<uint64_t>(buf, i));
        case DP_FLOAT16:
            return fmt::format("{:g}", mover::kernels::half_to_float(get<uint16_t>(buf, i)));
        case DP_BFLOAT16:
            return fmt::format("{:g}", mover::kernels::bfloat_to_float(get<uint16_t>(buf, i)));
        case DP_FLOAT32:
            return fmt::format("{:g}", get<float>(buf, i));
        case DP_FLOAT64:
            return fmt::format("{:g}", get<double>(buf, i));
        default:
            return "?";
    }
}

}  // namespace deputy::bench::coll
