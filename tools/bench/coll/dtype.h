// Element types of `deputy bench coll`: the twelve dp_dtype_t by name, their
// MPI datatypes (none for float16/bfloat16), and how to write a small
// integer as an element, read one back for printing, and name the range of
// values that every type represents exactly.
#pragma once

#include <deputy/mover.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deputy::bench::coll {

struct Dtype {
    dp_dtype_t dp = DP_FLOAT32;
    const char *name = "float32";
    size_t bytes = 4;
    bool is_float = true;
    bool is_signed = true;
    // Values 0..exact_span-1 (shifted by -exact_span/2 for signed types) are
    // exact in this type: the data and min/max patterns draw from them, so
    // validation compares bytes.
    int64_t exact_span = 10000;
};

// nullptr for an unknown name.
const Dtype *find_dtype(std::string_view name);
const Dtype &dtype_of(dp_dtype_t dp);
// "int8, int16, ..., float64", for error messages.
std::string dtype_names();

// MPI_DATATYPE_NULL for float16 and bfloat16 (MPI has no such types).
MPI_Datatype mpi_type(const Dtype &t);
MPI_Op mpi_op(dp_op_t op);
bool parse_redop(std::string_view name, dp_op_t *op);
std::string redop_names();  // "sum, prod, ..., bxor", from dp_op_name

// Element i of buf := v (v must be exact in the type: see exact_span).
void store(const Dtype &t, void *buf, size_t i, int64_t v);
// Element i as printed: an integer, or %g for floats.
std::string format_element(const Dtype &t, const void *buf, size_t i);

}  // namespace deputy::bench::coll
