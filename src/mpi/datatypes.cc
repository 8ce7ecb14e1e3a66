#include "mpi/datatypes.h"

#include <type_traits>
#include <vector>

namespace deputy::mpi {
namespace {

struct KnownType {
    MPI_Datatype handle;
    dp_dtype_t dtype;
    size_t bytes;    // the extent: what one element spans in a buffer
    bool reducible;  // MPI_SUM etc. apply (not to bytes and characters)
    bool moves;      // a moving collective may take it (not the pairs: below)
};
std::vector<KnownType> g_known;  // written once in datatypes_start, read-only after

enum class Kind { signed_int, unsigned_int, floating, bytes };

void add(MPI_Datatype type, Kind kind) {
    if (type == MPI_DATATYPE_NULL) return;  // a Fortran type this MPI was built without
    int size = 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0) return;
    dp_dtype_t dtype;
    switch (kind) {
        case Kind::signed_int:
        case Kind::unsigned_int: {
            const bool u = kind == Kind::unsigned_int;
            if (size == 1) dtype = u ? DP_UINT8 : DP_INT8;
            else if (size == 2) dtype = u ? DP_UINT16 : DP_INT16;
            else if (size == 4) dtype = u ? DP_UINT32 : DP_INT32;
            else if (size == 8) dtype = u ? DP_UINT64 : DP_INT64;
            else return;
            break;
        }
        case Kind::floating:
            if (size == 4) dtype = DP_FLOAT32;
            else if (size == 8) dtype = DP_FLOAT64;
            else return;  // long double, REAL*16: MPI reduces them
            break;
        case Kind::bytes:
            dtype = DP_UINT8;
            break;
    }
    g_known.push_back({type, dtype, size_t(size), kind != Kind::bytes, true});
}

// MPI's (value, index) pairs for MINLOC / MAXLOC, when MPI lays them out as
// deputy's pair (mover.h: C's struct, padding included). They reduce only:
// a moving collective asks the generic check, which takes the dense ones
// and leaves those with padding (MPI_DOUBLE_INT: 12 bytes in 16) to MPI.
void add_pair(MPI_Datatype type, dp_dtype_t dtype) {
    if (type == MPI_DATATYPE_NULL) return;
    MPI_Aint lb = 0, extent = 0;
    if (PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS || lb != 0 ||
        size_t(extent) != dp_dtype_size(dtype))
        return;  // not the layout deputy reduces (MPI passes it on)
    g_known.push_back({type, dtype, size_t(extent), true, false});
}

const KnownType *find(MPI_Datatype type) {
    for (const KnownType &k : g_known)
        if (k.handle == type) return &k;
    return nullptr;
}

}  // namespace

void datatypes_start() {
    if (!g_known.empty()) return;
    // Most used first: the lookup is a linear scan. Bytes and Fortran
    // characters only move (found here, a moving collective's check skips
    // the three calls that tell an unknown type is dense: 30 ns of a
    // pass-through). MPI_CHAR reduces: Open MPI and MPICH both reduce it as
    // the C char it is (signed here on x86, unsigned on Arm), and OSU's
    // reduction benchmarks use it unless told otherwise.
    add(MPI_BYTE, Kind::bytes);
    add(MPI_CHAR, std::is_signed_v<char> ? Kind::signed_int : Kind::unsigned_int);
    add(MPI_DOUBLE, Kind::floating);
    add(MPI_FLOAT, Kind::floating);
    add(MPI_INT, Kind::signed_int);
    add(MPI_LONG, Kind::signed_int);
    add(MPI_UNSIGNED, Kind::unsigned_int);
    add(MPI_UNSIGNED_LONG, Kind::unsigned_int);
    add(MPI_LONG_LONG, Kind::signed_int);
    add(MPI_UNSIGNED_LONG_LONG, Kind::unsigned_int);
    add(MPI_SHORT, Kind::signed_int);
    add(MPI_UNSIGNED_SHORT, Kind::unsigned_int);
    add(MPI_SIGNED_CHAR, Kind::signed_int);
    add(MPI_UNSIGNED_CHAR, Kind::unsigned_int);
    add(MPI_INT8_T, Kind::signed_int);
    add(MPI_INT16_T, Kind::signed_int);
    add(MPI_INT32_T, Kind::signed_int);
    add(MPI_INT64_T, Kind::signed_int);
    add(MPI_UINT8_T, Kind::unsigned_int);
    add(MPI_UINT16_T, Kind::unsigned_int);
    add(MPI_UINT32_T, Kind::unsigned_int);
    add(MPI_UINT64_T, Kind::unsigned_int);
    add(MPI_AINT, Kind::signed_int);
    add(MPI_OFFSET, Kind::signed_int);
    add(MPI_COUNT, Kind::signed_int);
    // Fortran's, as C sees them (the Fortran entry points convert handles).
    add(MPI_INTEGER, Kind::signed_int);
    add(MPI_REAL, Kind::floating);
    add(MPI_DOUBLE_PRECISION, Kind::floating);
    add(MPI_INTEGER1, Kind::signed_int);
    add(MPI_INTEGER2, Kind::signed_int);
    add(MPI_INTEGER4, Kind::signed_int);
    add(MPI_INTEGER8, Kind::signed_int);
    add(MPI_REAL4, Kind::floating);
    add(MPI_REAL8, Kind::floating);
    add(MPI_CHARACTER, Kind::bytes);
    add_pair(MPI_2INT, DP_INT32_INT32);
    add_pair(MPI_FLOAT_INT, DP_FLOAT32_INT32);
    add_pair(MPI_DOUBLE_INT, DP_FLOAT64_INT32);
    add_pair(MPI_LONG_INT, sizeof(long) == 8 ? DP_INT64_INT32 : DP_INT32_INT32);
    add_pair(MPI_SHORT_INT, DP_INT16_INT32);
    add_pair(MPI_2REAL, DP_FLOAT32_FLOAT32);
    add_pair(MPI_2DOUBLE_PRECISION, DP_FLOAT64_FLOAT64);
    int integer = 0;
    if (MPI_2INTEGER != MPI_DATATYPE_NULL && PMPI_Type_size(MPI_INTEGER, &integer) == MPI_SUCCESS &&
        integer == 4)
        add_pair(MPI_2INTEGER, DP_INT32_INT32);
}

bool dense_type_bytes(MPI_Datatype type, size_t *bytes, PassReason *why) {
    if (const KnownType *k = find(type); k && k->moves) {
        *bytes = k->bytes;
        return true;
    }
    int integers = 0, addresses = 0, types = 0, combiner = 0;
    if (PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) != MPI_SUCCESS ||
        combiner != MPI_COMBINER_NAMED) {
        *why = PassReason::derived_datatype;
        return false;
    }
    int size = 0;
    MPI_Aint lb = 0, extent = 0;
    PMPI_Type_size(type, &size);
    PMPI_Type_get_extent(type, &lb, &extent);
    // Pairs like MPI_LONG_DOUBLE_INT have padding: deputy would move it too,
    // but MPI's own copy may leave it untouched.
    if (size <= 0 || lb != 0 || extent != size) {
        *why = PassReason::derived_datatype;
        return false;
    }
    *bytes = size_t(size);
    return true;
}

bool reduction_type(MPI_Datatype type, dp_dtype_t *dtype, size_t *bytes, PassReason *why) {
    const KnownType *k = find(type);
    if (!k || !k->reducible) {
        int integers = 0, addresses = 0, types = 0, combiner = 0;
        PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
        *why = combiner == MPI_COMBINER_NAMED ? PassReason::unsupported_datatype
                                              : PassReason::derived_datatype;
        return false;
    }
    *dtype = k->dtype;
    *bytes = k->bytes;
    return true;
}

bool reduction_op(MPI_Op op, dp_op_t *out) {
    if (op == MPI_SUM) *out = DP_SUM;
    else if (op == MPI_PROD) *out = DP_PROD;
    else if (op == MPI_MIN) *out = DP_MIN;
    else if (op == MPI_MAX) *out = DP_MAX;
    else if (op == MPI_LAND) *out = DP_LAND;
    else if (op == MPI_LOR) *out = DP_LOR;
    else if (op == MPI_LXOR) *out = DP_LXOR;
    else if (op == MPI_BAND) *out = DP_BAND;
    else if (op == MPI_BOR) *out = DP_BOR;
    else if (op == MPI_BXOR) *out = DP_BXOR;
    else if (op == MPI_MINLOC) *out = DP_MINLOC;
    else if (op == MPI_MAXLOC) *out = DP_MAXLOC;
    else return false;
    return true;
}

}  // namespace deputy::mpi
