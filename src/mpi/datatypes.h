// MPI datatypes and reduction operators as deputy's element types and ops.
//
// deputy moves bytes and reduces its element types. A datatype can be
// offloaded when it is predefined (MPI_Type_get_envelope says NAMED) and
// dense (its size equals its extent): moving operations then move
// count x size bytes. Reductions also need the type to be one deputy reduces
// (integers of 1..8 bytes, float, double, by size and signedness, with
// MPI_SUM, MPI_PROD, MIN, MAX and on integers the logical and bitwise ops;
// MPI's (value, index) pairs with MPI_MINLOC and MPI_MAXLOC, over count x
// extent bytes, padding included). Everything else goes to MPI.
#pragma once

#include "mpi/operations.h"

#include <deputy/mover.h>
#include <mpi.h>

#include <cstddef>

namespace deputy::mpi {

// Builds the table of predefined types (once, after MPI_Init).
void datatypes_start();

// Bytes of one element of a type deputy can move; false with the reason.
bool dense_type_bytes(MPI_Datatype type, size_t *bytes, PassReason *why);
// deputy's element type for a reduction over `type` and the bytes one
// element spans (its extent); false with the reason.
bool reduction_type(MPI_Datatype type, dp_dtype_t *dtype, size_t *bytes, PassReason *why);
bool reduction_op(MPI_Op op, dp_op_t *out);

}  // namespace deputy::mpi
