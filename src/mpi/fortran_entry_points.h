/* What deputy's Fortran entry points share (Open MPI only: see
 * fortran_entry_points.c for why they exist): the Fortran sentinels, the
 * conversions of buffers, statuses, requests and ierror, and the export
 * of a routine under its four names. Included by fortran_entry_points.c
 * (start and end, communicators, waits and tests, collectives) and
 * fortran_p2p_entry_points.c (point-to-point). */
#pragma once

#include <mpi.h>

#if defined(OPEN_MPI)

#include <stddef.h>

_Static_assert(sizeof(MPI_Fint) == sizeof(int),
               "deputy's Fortran entry points need Fortran INTEGER = C int (MPI_Fint): "
               "count and displacement arrays are passed to C unconverted");

/* Open MPI's Fortran MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS_IGNORE and
 * MPI_STATUSES_IGNORE are common blocks (`common/mpi_fortran_in_place/
 * MPI_IN_PLACE` and the rest in mpif-sentinels.h); a Fortran program passes
 * their address. libmpi exports each block under the one spelling its
 * Fortran compiler produces (gfortran: the trailing underscore), and the
 * dynamic linker binds every reference, the program's, libmpi_mpifh's and
 * these, to the same definition. DEPUTY_F_SENTINEL(is_x, lower, UPPER)
 * declares weak references to all four spellings (the ones this Open MPI
 * does not define stay NULL) and is_x(p), true when p is the block. */
#define DEPUTY_F_SENTINEL(is_x, lower, upper)                                              \
    extern int lower __attribute__((weak));                                                \
    extern int lower##_ __attribute__((weak));                                             \
    extern int lower##__ __attribute__((weak));                                            \
    extern int upper __attribute__((weak));                                                \
    static inline int is_x(const void *p) {                                                \
        return p != NULL && (p == &lower || p == &lower##_ || p == &lower##__ || p == &upper); \
    }
DEPUTY_F_SENTINEL(is_in_place, mpi_fortran_in_place, MPI_FORTRAN_IN_PLACE)
DEPUTY_F_SENTINEL(is_bottom, mpi_fortran_bottom, MPI_FORTRAN_BOTTOM)
DEPUTY_F_SENTINEL(is_status_ignore, mpi_fortran_status_ignore, MPI_FORTRAN_STATUS_IGNORE)
DEPUTY_F_SENTINEL(is_statuses_ignore, mpi_fortran_statuses_ignore, MPI_FORTRAN_STATUSES_IGNORE)

/* A send buffer may be MPI_IN_PLACE or MPI_BOTTOM; a receive buffer only
 * MPI_BOTTOM (a derived datatype of absolute addresses). */
static inline const void *send_buffer(const void *buf) {
    if (is_in_place(buf)) {
        return MPI_IN_PLACE;
    }
    return is_bottom(buf) ? MPI_BOTTOM : buf;
}

static inline void *receive_buffer(void *buf) { return is_bottom(buf) ? MPI_BOTTOM : buf; }

static inline void set_ierror(MPI_Fint *ierror, int rc) {
    /* `use mpi` and mpif.h always pass it; Open MPI's binding checks too. */
    if (ierror != NULL) {
        *ierror = (MPI_Fint)rc;
    }
}

static inline void set_request(MPI_Fint *request, int rc, MPI_Request c_request) {
    if (rc == MPI_SUCCESS) {
        *request = MPI_Request_c2f(c_request);
    }
}

/* Exports `impl` under the four spellings of a Fortran routine name. `type`
 * is the routine's function type, so each alias is declared with the
 * prototype of its target. */
#define DEPUTY_F_EXPORT(type, impl, lower, upper)                                   \
    extern type lower __attribute__((alias(#impl), visibility("default")));        \
    extern type lower##_ __attribute__((alias(#impl), visibility("default")));     \
    extern type lower##__ __attribute__((alias(#impl), visibility("default")));    \
    extern type upper __attribute__((alias(#impl), visibility("default")))

/* DEPUTY_F_EXPORT with the type taken from `impl` itself. */
#define DEPUTY_F_ALIASES(impl, lower, upper) DEPUTY_F_EXPORT(__typeof__(impl), impl, lower, upper)

/* A Fortran LOGICAL result: default LOGICAL is an INTEGER's size, and
 * gfortran's .TRUE. is 1 (Open MPI's OMPI_FORTRAN_VALUE_TRUE with it). */
static inline void set_logical(MPI_Fint *logical, int value) { *logical = value ? 1 : 0; }

/* A Fortran status is MPI_STATUS_SIZE INTEGERs, Open MPI's C status word
 * for word (what MPI_Status_c2f writes). */
enum { kFortranStatusInts = sizeof(MPI_Status) / sizeof(MPI_Fint) };

/* The C status a call fills for a Fortran one: MPI_STATUS_IGNORE when the
 * program passed MPI_STATUS_IGNORE, else *c; set_status converts it back,
 * only when the call succeeded (as Open MPI's binding). */
static inline MPI_Status *c_status(MPI_Fint *status, MPI_Status *c) {
    return is_status_ignore(status) ? MPI_STATUS_IGNORE : c;
}

static inline void set_status(MPI_Fint *status, int rc, const MPI_Status *c) {
    if (rc == MPI_SUCCESS && !is_status_ignore(status)) {
        MPI_Status_c2f(c, status);
    }
}

/* A test's or a nonblocking probe's results, once it succeeded: the flag
 * (none for a blocking call: NULL), the status if complete (c_flag). */
static inline void set_flag_status(MPI_Fint *flag, MPI_Fint *status, int rc, int c_flag,
                                   const MPI_Status *c) {
    if (rc != MPI_SUCCESS) {
        return;
    }
    if (flag != NULL) {
        set_logical(flag, c_flag);
    }
    if (c_flag) {
        set_status(status, rc, c);
    }
}

#endif /* OPEN_MPI */
