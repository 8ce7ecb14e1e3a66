/* The Fortran entry points (mpif.h and `use mpi`) of deputy's PMPI library.
 *
 * Why they exist: Open MPI's Fortran bindings (libmpi_mpifh) call the C
 * PMPI_* functions directly (`nm -D libmpi_mpifh.so` lists `U PMPI_Iallreduce`
 * and no `U MPI_Iallreduce`), so the library's C MPI_* functions never see a
 * Fortran program's calls. Here every call the library intercepts gets its
 * Fortran symbol, which converts the arguments the way Open MPI's own binding
 * does and calls the library's C MPI_* function:
 *   - handles: MPI_Comm_f2c, MPI_Type_f2c, MPI_Op_f2c, MPI_Info_f2c in,
 *     MPI_Request_c2f and MPI_Comm_c2f out (only on success, as Open MPI);
 *   - buffers: the addresses of Fortran's MPI_IN_PLACE / MPI_BOTTOM (common
 *     blocks, see below) become C's MPI_IN_PLACE / MPI_BOTTOM;
 *   - INTEGER counts and displacements: MPI_Fint is C int (checked below), so
 *     arrays are passed as they are. A converted copy could not be used: a
 *     nonblocking alltoallv reads its count arrays until it completes;
 *   - ierror: set to the C function's return value.
 * Each is exported under the four spellings Fortran compilers produce for a
 * routine name: gfortran's `mpi_iallreduce_`, f2c/g77's `mpi_iallreduce__`
 * (names with an underscore get two), `mpi_iallreduce` (xlf, -fno-underscoring)
 * and `MPI_IALLREDUCE` (upper case), as Open MPI's libmpi_mpifh exports them.
 * Preloaded or linked before libmpi_mpifh, these shadow Open MPI's. The
 * point-to-point calls (DEPUTY_MPI_P2P=1) are in fortran_p2p_entry_points.c,
 * the conversions both files share in fortran_entry_points.h.
 *
 * The calls that take requests are here too. MPI_WAIT, MPI_WAITALL,
 * MPI_WAITANY and MPI_WAITSOME, because while a thread is in the library's
 * C MPI_Wait*, deputy's requests it waits for are tested as a wait, so the
 * members of a team may run an operation themselves (intercept_wait.cc):
 * Open MPI's MPI_WAIT calls PMPI_Wait, which would complete them as well,
 * but only through the agent. The tests, MPI_REQUEST_GET_STATUS,
 * MPI_START, MPI_STARTALL, MPI_REQUEST_FREE and MPI_CANCEL, because of the
 * persistent requests the library carries (persistent_requests.h): their
 * handle stands for the operation only in the library's C functions, and
 * Open MPI's PMPI_Test would answer for an inactive request.
 *
 * MPICH needs none of this: its Fortran bindings (libmpichfort) call the C
 * MPI_* functions (`U MPI_Iallreduce`), after translating MPICH's own
 * sentinels (the addresses of common /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE,
 * recorded in MPIR_F_MPI_BOTTOM / MPIR_F_MPI_IN_PLACE by mpirinitf_ on the
 * first Fortran call). So a preloaded library's C MPI_* functions already
 * see MPICH Fortran calls, and defining Fortran symbols here would only
 * duplicate that translation and its lazy initialisation, which is MPICH's
 * internal business (its MPI_TEST, MPI_START, MPI_SEND ... call MPI_Test,
 * MPI_Start, MPI_Send ... as well). Under MPICH this file compiles to
 * nothing.
 *
 * `use mpi_f08` is not intercepted here: Open MPI's f08 routines
 * (mpi_iallreduce_f08_ in libmpi_usempif08) call ompi_iallreduce_f, the body
 * of the mpif.h routine, directly, not through the symbols defined here, so
 * such a program reaches MPI unchanged. Under MPICH the f08 collectives
 * call the C MPI_* functions but MPI_Init, MPI_Wait and MPI_Finalize call
 * PMPI_*, so the library sees collectives it was never initialised for and
 * passes them to MPI (docs/mpi-fortran.md has the measurement).
 */
#include <mpi.h>

#if defined(OPEN_MPI)

#include <stddef.h>
#include <stdlib.h>

#include "mpi/fortran_entry_points.h"

/* ---- start and end ---- */

typedef void f_init_t(MPI_Fint *ierror);
static void f_init(MPI_Fint *ierror) {
    /* As Open MPI's MPI_INIT: no command line reaches C from Fortran. */
    int argc = 0;
    char **argv = NULL;
    set_ierror(ierror, MPI_Init(&argc, &argv));
}
DEPUTY_F_EXPORT(f_init_t, f_init, mpi_init, MPI_INIT);

typedef void f_init_thread_t(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror);
static void f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror) {
    int argc = 0;
    char **argv = NULL;
    int c_provided = MPI_THREAD_SINGLE;
    int rc = MPI_Init_thread(&argc, &argv, (int)*required, &c_provided);
    if (rc == MPI_SUCCESS) {
        *provided = (MPI_Fint)c_provided;
    }
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_init_thread_t, f_init_thread, mpi_init_thread, MPI_INIT_THREAD);

typedef void f_finalize_t(MPI_Fint *ierror);
static void f_finalize(MPI_Fint *ierror) { set_ierror(ierror, MPI_Finalize()); }
DEPUTY_F_EXPORT(f_finalize_t, f_finalize, mpi_finalize, MPI_FINALIZE);

/* ---- communicators and memory ---- */

typedef void f_comm_free_t(MPI_Fint *comm, MPI_Fint *ierror);
static void f_comm_free(MPI_Fint *comm, MPI_Fint *ierror) {
    MPI_Comm c_comm = MPI_Comm_f2c(*comm);
    int rc = MPI_Comm_free(&c_comm);
    if (rc == MPI_SUCCESS) {
        *comm = MPI_Comm_c2f(c_comm); /* MPI_COMM_NULL's Fortran handle */
    }
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_comm_free_t, f_comm_free, mpi_comm_free, MPI_COMM_FREE);

/* The library forms a communicator's team when the communicator is created
 * (intercept_communicators.cc); these reach its C functions. */
static void set_comm(MPI_Fint *newcomm, int rc, MPI_Comm c_newcomm) {
    if (rc == MPI_SUCCESS) {
        *newcomm = MPI_Comm_c2f(c_newcomm);
    }
}

typedef void f_comm_dup_t(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierror);
static void f_comm_dup(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierror) {
    MPI_Comm c_newcomm = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(MPI_Comm_f2c(*comm), &c_newcomm);
    set_comm(newcomm, rc, c_newcomm);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_comm_dup_t, f_comm_dup, mpi_comm_dup, MPI_COMM_DUP);

typedef void f_comm_split_t(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm,
                            MPI_Fint *ierror);
static void f_comm_split(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm,
                         MPI_Fint *ierror) {
    MPI_Comm c_newcomm = MPI_COMM_NULL;
    int rc = MPI_Comm_split(MPI_Comm_f2c(*comm), (int)*color, (int)*key, &c_newcomm);
    set_comm(newcomm, rc, c_newcomm);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_comm_split_t, f_comm_split, mpi_comm_split, MPI_COMM_SPLIT);

typedef void f_comm_split_type_t(MPI_Fint *comm, MPI_Fint *split_type, MPI_Fint *key,
                                 MPI_Fint *info, MPI_Fint *newcomm, MPI_Fint *ierror);
static void f_comm_split_type(MPI_Fint *comm, MPI_Fint *split_type, MPI_Fint *key, MPI_Fint *info,
                              MPI_Fint *newcomm, MPI_Fint *ierror) {
    MPI_Comm c_newcomm = MPI_COMM_NULL;
    int rc = MPI_Comm_split_type(MPI_Comm_f2c(*comm), (int)*split_type, (int)*key,
                                 MPI_Info_f2c(*info), &c_newcomm);
    set_comm(newcomm, rc, c_newcomm);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_comm_split_type_t, f_comm_split_type, mpi_comm_split_type, MPI_COMM_SPLIT_TYPE);

typedef void f_comm_create_t(MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm,
                             MPI_Fint *ierror);
static void f_comm_create(MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm, MPI_Fint *ierror) {
    MPI_Comm c_newcomm = MPI_COMM_NULL;
    int rc = MPI_Comm_create(MPI_Comm_f2c(*comm), MPI_Group_f2c(*group), &c_newcomm);
    set_comm(newcomm, rc, c_newcomm);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_comm_create_t, f_comm_create, mpi_comm_create, MPI_COMM_CREATE);

/* BASEPTR is INTEGER(KIND=MPI_ADDRESS_KIND) (mpif.h) or TYPE(C_PTR)
 * (`use mpi`'s MPI_ALLOC_MEM_CPTR): either way the address of a
 * pointer-sized slot that receives the memory's address. */
typedef void f_alloc_mem_t(MPI_Aint *size, MPI_Fint *info, void *baseptr, MPI_Fint *ierror);
static void f_alloc_mem(MPI_Aint *size, MPI_Fint *info, void *baseptr, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Alloc_mem(*size, MPI_Info_f2c(*info), baseptr));
}
DEPUTY_F_EXPORT(f_alloc_mem_t, f_alloc_mem, mpi_alloc_mem, MPI_ALLOC_MEM);
DEPUTY_F_EXPORT(f_alloc_mem_t, f_alloc_mem, mpi_alloc_mem_cptr, MPI_ALLOC_MEM_CPTR);

/* BASE is a choice argument: Fortran passes the memory's address. */
typedef void f_free_mem_t(void *base, MPI_Fint *ierror);
static void f_free_mem(void *base, MPI_Fint *ierror) { set_ierror(ierror, MPI_Free_mem(base)); }
DEPUTY_F_EXPORT(f_free_mem_t, f_free_mem, mpi_free_mem, MPI_FREE_MEM);

/* ---- waits ---- */

typedef void f_wait_t(MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierror);
static void f_wait(MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_Request_f2c(*request);
    MPI_Status c_status;
    int rc = MPI_Wait(&c_request, &c_status);
    if (rc == MPI_SUCCESS) {
        /* MPI_REQUEST_NULL's handle once complete, as Open MPI's binding;
         * the same request again if it is persistent. */
        *request = MPI_Request_c2f(c_request);
        if (!is_status_ignore(status)) {
            MPI_Status_c2f(&c_status, status);
        }
    }
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_wait_t, f_wait, mpi_wait, MPI_WAIT);

/* Converted copies of a Fortran request array (a C request is a pointer, a
 * Fortran one an index), with room for as many C statuses and indices: on
 * the stack for the few requests programs wait for together. */
enum { kOnStack = 16 };
typedef struct {
    MPI_Request stack_requests[kOnStack];
    MPI_Status stack_statuses[kOnStack];
    int stack_indices[kOnStack];
    MPI_Request *requests;
    MPI_Status *statuses;
    int *indices;
} c_requests_t;

/* 1, or 0 with ierror set to MPI_ERR_NO_MEM (nothing to free then). */
static int c_requests_make(c_requests_t *c, const MPI_Fint *count, const MPI_Fint *requests,
                           MPI_Fint *ierror) {
    const int n = *count > 0 ? (int)*count : 0;
    c->requests = c->stack_requests;
    c->statuses = c->stack_statuses;
    c->indices = c->stack_indices;
    if (n > kOnStack) {
        c->requests = malloc((size_t)n * sizeof *c->requests);
        c->statuses = malloc((size_t)n * sizeof *c->statuses);
        c->indices = malloc((size_t)n * sizeof *c->indices);
        if (c->requests == NULL || c->statuses == NULL || c->indices == NULL) {
            free(c->requests);
            free(c->statuses);
            free(c->indices);
            set_ierror(ierror, MPI_ERR_NO_MEM);
            return 0;
        }
    }
    for (int i = 0; i < n; ++i) {
        c->requests[i] = MPI_Request_f2c(requests[i]);
    }
    return 1;
}

static void c_requests_free(c_requests_t *c) {
    if (c->requests != c->stack_requests) {
        free(c->requests);
        free(c->statuses);
        free(c->indices);
    }
}

/* Request i's handle and status back to Fortran after it completed:
 * MPI_REQUEST_NULL's handle, or the same request again if it is
 * persistent. */
static void c_requests_return(const c_requests_t *c, int i, int status_slot,
                              MPI_Fint *requests, MPI_Fint *statuses) {
    requests[i] = MPI_Request_c2f(c->requests[i]);
    if (!is_statuses_ignore(statuses)) {
        MPI_Status_c2f(&c->statuses[status_slot],
                       statuses + (size_t)status_slot * kFortranStatusInts);
    }
}

typedef void f_waitall_t(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *statuses,
                         MPI_Fint *ierror);
static void f_waitall(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *statuses,
                      MPI_Fint *ierror) {
    c_requests_t c;
    if (!c_requests_make(&c, count, requests, ierror)) {
        return;
    }
    int rc = MPI_Waitall((int)*count, c.requests, c.statuses); /* a negative count: MPI's error */
    if (rc == MPI_SUCCESS) {
        for (int i = 0; i < (int)*count; ++i) {
            c_requests_return(&c, i, i, requests, statuses);
        }
    }
    c_requests_free(&c);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_waitall_t, f_waitall, mpi_waitall, MPI_WAITALL);

/* Fortran's indices count from 1; MPI_UNDEFINED (nothing active) stays. */
typedef void f_waitany_t(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *status,
                         MPI_Fint *ierror);
static void f_waitany(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *status,
                      MPI_Fint *ierror) {
    c_requests_t c;
    if (!c_requests_make(&c, count, requests, ierror)) {
        return;
    }
    int c_index = MPI_UNDEFINED;
    int rc = MPI_Waitany((int)*count, c.requests, &c_index, &c.statuses[0]);
    if (rc == MPI_SUCCESS) {
        if (c_index != MPI_UNDEFINED) {
            requests[c_index] = MPI_Request_c2f(c.requests[c_index]);
        }
        *index = (MPI_Fint)(c_index == MPI_UNDEFINED ? MPI_UNDEFINED : c_index + 1);
        if (!is_status_ignore(status)) {
            MPI_Status_c2f(&c.statuses[0], status);
        }
    }
    c_requests_free(&c);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_waitany_t, f_waitany, mpi_waitany, MPI_WAITANY);

/* MPI_WAITSOME and MPI_TESTSOME (`c_some`): the requests returned and
 * their indices, counted from 1. */
static void some(int (*c_some)(int, MPI_Request[], int *, int[], MPI_Status[]),
                 MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount, MPI_Fint *indices,
                 MPI_Fint *statuses, MPI_Fint *ierror) {
    c_requests_t c;
    if (!c_requests_make(&c, incount, requests, ierror)) {
        return;
    }
    int c_outcount = MPI_UNDEFINED;
    int rc = c_some((int)*incount, c.requests, &c_outcount, c.indices, c.statuses);
    if (rc == MPI_SUCCESS) {
        if (c_outcount != MPI_UNDEFINED) {
            for (int k = 0; k < c_outcount; ++k) {
                c_requests_return(&c, c.indices[k], k, requests, statuses);
                indices[k] = (MPI_Fint)(c.indices[k] + 1);
            }
        }
        *outcount = (MPI_Fint)c_outcount;
    }
    c_requests_free(&c);
    set_ierror(ierror, rc);
}

typedef void f_waitsome_t(MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                          MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierror);
static void f_waitsome(MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                       MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierror) {
    some(MPI_Waitsome, incount, requests, outcount, indices, statuses, ierror);
}
DEPUTY_F_EXPORT(f_waitsome_t, f_waitsome, mpi_waitsome, MPI_WAITSOME);

/* The tests, MPI_REQUEST_GET_STATUS, MPI_START, MPI_STARTALL,
 * MPI_REQUEST_FREE and MPI_CANCEL: Open MPI's would call PMPI_* on the
 * handle of a persistent request the library carries, which stands for
 * the operation only in the library's C functions (persistent_requests.h):
 * MPI itself would take it for an inactive request. Converted as the
 * waits; a flag comes back as a LOGICAL, a status only once complete. */
static void f_test(MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_Request_f2c(*request);
    MPI_Status c;
    int c_flag = 0;
    int rc = MPI_Test(&c_request, &c_flag, c_status(status, &c));
    if (rc == MPI_SUCCESS) {
        *request = MPI_Request_c2f(c_request);
    }
    set_flag_status(flag, status, rc, c_flag, &c);
    set_ierror(ierror, rc);
}
DEPUTY_F_ALIASES(f_test, mpi_test, MPI_TEST);

static void f_testall(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *flag, MPI_Fint *statuses,
                      MPI_Fint *ierror) {
    c_requests_t c;
    if (!c_requests_make(&c, count, requests, ierror)) {
        return;
    }
    int c_flag = 0;
    int rc = MPI_Testall((int)*count, c.requests, &c_flag, c.statuses);
    if (rc == MPI_SUCCESS) {
        set_logical(flag, c_flag);
        for (int i = 0; c_flag && i < (int)*count; ++i) {
            c_requests_return(&c, i, i, requests, statuses);
        }
    }
    c_requests_free(&c);
    set_ierror(ierror, rc);
}
DEPUTY_F_ALIASES(f_testall, mpi_testall, MPI_TESTALL);

static void f_testany(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *flag,
                      MPI_Fint *status, MPI_Fint *ierror) {
    c_requests_t c;
    if (!c_requests_make(&c, count, requests, ierror)) {
        return;
    }
    int c_index = MPI_UNDEFINED, c_flag = 0;
    int rc = MPI_Testany((int)*count, c.requests, &c_index, &c_flag, &c.statuses[0]);
    if (rc == MPI_SUCCESS) {
        if (c_flag && c_index != MPI_UNDEFINED) {
            requests[c_index] = MPI_Request_c2f(c.requests[c_index]);
        }
        *index = (MPI_Fint)(c_index == MPI_UNDEFINED ? MPI_UNDEFINED : c_index + 1);
    }
    set_flag_status(flag, status, rc, c_flag, &c.statuses[0]);
    c_requests_free(&c);
    set_ierror(ierror, rc);
}
DEPUTY_F_ALIASES(f_testany, mpi_testany, MPI_TESTANY);

static void f_testsome(MPI_Fint *incount, MPI_Fint *requests, MPI_Fint *outcount,
                       MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierror) {
    some(MPI_Testsome, incount, requests, outcount, indices, statuses, ierror);
}
DEPUTY_F_ALIASES(f_testsome, mpi_testsome, MPI_TESTSOME);

static void f_request_get_status(MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status,
                                 MPI_Fint *ierror) {
    MPI_Status c;
    int c_flag = 0;
    int rc = MPI_Request_get_status(MPI_Request_f2c(*request), &c_flag, c_status(status, &c));
    set_flag_status(flag, status, rc, c_flag, &c);
    set_ierror(ierror, rc);
}
DEPUTY_F_ALIASES(f_request_get_status, mpi_request_get_status, MPI_REQUEST_GET_STATUS);

/* MPI_START, MPI_REQUEST_FREE and MPI_CANCEL (`c_call`) take one request
 * and give its handle back: the same, or MPI_REQUEST_NULL's once freed. */
static void one_request(int (*c_call)(MPI_Request *), MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_Request_f2c(*request);
    int rc = c_call(&c_request);
    if (rc == MPI_SUCCESS) {
        *request = MPI_Request_c2f(c_request);
    }
    set_ierror(ierror, rc);
}

static void f_start(MPI_Fint *request, MPI_Fint *ierror) {
    one_request(MPI_Start, request, ierror);
}
DEPUTY_F_ALIASES(f_start, mpi_start, MPI_START);

static void f_request_free(MPI_Fint *request, MPI_Fint *ierror) {
    one_request(MPI_Request_free, request, ierror);
}
DEPUTY_F_ALIASES(f_request_free, mpi_request_free, MPI_REQUEST_FREE);

static void f_cancel(MPI_Fint *request, MPI_Fint *ierror) {
    one_request(MPI_Cancel, request, ierror);
}
DEPUTY_F_ALIASES(f_cancel, mpi_cancel, MPI_CANCEL);

static void f_startall(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *ierror) {
    c_requests_t c;
    if (!c_requests_make(&c, count, requests, ierror)) {
        return;
    }
    set_ierror(ierror, MPI_Startall((int)*count, c.requests));
    c_requests_free(&c);
}
DEPUTY_F_ALIASES(f_startall, mpi_startall, MPI_STARTALL);

/* ---- nonblocking collectives ---- */

typedef void f_iallreduce_t(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                            MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror);
static void f_iallreduce(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                         MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(send_buffer(sendbuf), receive_buffer(recvbuf), (int)*count,
                            MPI_Type_f2c(*datatype), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm),
                            &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_iallreduce_t, f_iallreduce, mpi_iallreduce, MPI_IALLREDUCE);

typedef void f_ireduce_scatter_block_t(void *sendbuf, void *recvbuf, MPI_Fint *recvcount,
                                       MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                                       MPI_Fint *request, MPI_Fint *ierror);
static void f_ireduce_scatter_block(void *sendbuf, void *recvbuf, MPI_Fint *recvcount,
                                    MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                                    MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce_scatter_block(send_buffer(sendbuf), receive_buffer(recvbuf),
                                       (int)*recvcount, MPI_Type_f2c(*datatype), MPI_Op_f2c(*op),
                                       MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_ireduce_scatter_block_t, f_ireduce_scatter_block, mpi_ireduce_scatter_block,
                MPI_IREDUCE_SCATTER_BLOCK);

typedef void f_iallgather_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                            MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm,
                            MPI_Fint *request, MPI_Fint *ierror);
static void f_iallgather(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                         MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm,
                         MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Iallgather(send_buffer(sendbuf), (int)*sendcount, MPI_Type_f2c(*sendtype),
                            receive_buffer(recvbuf), (int)*recvcount, MPI_Type_f2c(*recvtype),
                            MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_iallgather_t, f_iallgather, mpi_iallgather, MPI_IALLGATHER);

typedef void f_ialltoall_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                           MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm,
                           MPI_Fint *request, MPI_Fint *ierror);
static void f_ialltoall(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                        MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm,
                        MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Ialltoall(send_buffer(sendbuf), (int)*sendcount, MPI_Type_f2c(*sendtype),
                           receive_buffer(recvbuf), (int)*recvcount, MPI_Type_f2c(*recvtype),
                           MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_ialltoall_t, f_ialltoall, mpi_ialltoall, MPI_IALLTOALL);

typedef void f_ialltoallv_t(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls,
                            MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcounts,
                            MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm,
                            MPI_Fint *request, MPI_Fint *ierror);
static void f_ialltoallv(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls,
                         MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcounts,
                         MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm,
                         MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Ialltoallv(send_buffer(sendbuf), (const int *)sendcounts, (const int *)sdispls,
                            MPI_Type_f2c(*sendtype), receive_buffer(recvbuf),
                            (const int *)recvcounts, (const int *)rdispls,
                            MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_ialltoallv_t, f_ialltoallv, mpi_ialltoallv, MPI_IALLTOALLV);

typedef void f_ibcast_t(void *buffer, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root,
                        MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror);
static void f_ibcast(void *buffer, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root,
                     MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Ibcast(receive_buffer(buffer), (int)*count, MPI_Type_f2c(*datatype), (int)*root,
                        MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_ibcast_t, f_ibcast, mpi_ibcast, MPI_IBCAST);

typedef void f_ibarrier_t(MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror);
static void f_ibarrier(MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_ibarrier_t, f_ibarrier, mpi_ibarrier, MPI_IBARRIER);

/* ---- blocking collectives ---- */

typedef void f_allreduce_t(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                           MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror);
static void f_allreduce(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                        MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Allreduce(send_buffer(sendbuf), receive_buffer(recvbuf), (int)*count,
                                     MPI_Type_f2c(*datatype), MPI_Op_f2c(*op),
                                     MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_allreduce_t, f_allreduce, mpi_allreduce, MPI_ALLREDUCE);

typedef void f_reduce_scatter_block_t(void *sendbuf, void *recvbuf, MPI_Fint *recvcount,
                                      MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                                      MPI_Fint *ierror);
static void f_reduce_scatter_block(void *sendbuf, void *recvbuf, MPI_Fint *recvcount,
                                   MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                                   MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Reduce_scatter_block(send_buffer(sendbuf), receive_buffer(recvbuf),
                                                (int)*recvcount, MPI_Type_f2c(*datatype),
                                                MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_reduce_scatter_block_t, f_reduce_scatter_block, mpi_reduce_scatter_block,
                MPI_REDUCE_SCATTER_BLOCK);

typedef void f_allgather_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                           MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm,
                           MPI_Fint *ierror);
static void f_allgather(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                        MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm,
                        MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Allgather(send_buffer(sendbuf), (int)*sendcount,
                                     MPI_Type_f2c(*sendtype), receive_buffer(recvbuf),
                                     (int)*recvcount, MPI_Type_f2c(*recvtype),
                                     MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_allgather_t, f_allgather, mpi_allgather, MPI_ALLGATHER);

typedef void f_alltoall_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                          MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm,
                          MPI_Fint *ierror);
static void f_alltoall(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                       MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm,
                       MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Alltoall(send_buffer(sendbuf), (int)*sendcount,
                                    MPI_Type_f2c(*sendtype), receive_buffer(recvbuf),
                                    (int)*recvcount, MPI_Type_f2c(*recvtype),
                                    MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_alltoall_t, f_alltoall, mpi_alltoall, MPI_ALLTOALL);

typedef void f_alltoallv_t(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls,
                           MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcounts,
                           MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm,
                           MPI_Fint *ierror);
static void f_alltoallv(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls,
                        MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcounts,
                        MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm,
                        MPI_Fint *ierror) {
    set_ierror(ierror,
               MPI_Alltoallv(send_buffer(sendbuf), (const int *)sendcounts,
                             (const int *)sdispls, MPI_Type_f2c(*sendtype),
                             receive_buffer(recvbuf), (const int *)recvcounts,
                             (const int *)rdispls, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_alltoallv_t, f_alltoallv, mpi_alltoallv, MPI_ALLTOALLV);

typedef void f_bcast_t(void *buffer, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root,
                       MPI_Fint *comm, MPI_Fint *ierror);
static void f_bcast(void *buffer, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root,
                    MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Bcast(receive_buffer(buffer), (int)*count, MPI_Type_f2c(*datatype),
                                 (int)*root, MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_bcast_t, f_bcast, mpi_bcast, MPI_BCAST);

typedef void f_barrier_t(MPI_Fint *comm, MPI_Fint *ierror);
static void f_barrier(MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Barrier(MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_barrier_t, f_barrier, mpi_barrier, MPI_BARRIER);

typedef void f_ireduce_t(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                         MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request,
                         MPI_Fint *ierror);
static void f_ireduce(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                      MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request,
                      MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce(send_buffer(sendbuf), receive_buffer(recvbuf), (int)*count,
                         MPI_Type_f2c(*datatype), MPI_Op_f2c(*op), (int)*root,
                         MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_ireduce_t, f_ireduce, mpi_ireduce, MPI_IREDUCE);

typedef void f_reduce_t(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                        MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror);
static void f_reduce(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                     MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Reduce(send_buffer(sendbuf), receive_buffer(recvbuf), (int)*count,
                                  MPI_Type_f2c(*datatype), MPI_Op_f2c(*op), (int)*root,
                                  MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_reduce_t, f_reduce, mpi_reduce, MPI_REDUCE);

/* MPI_Scan / MPI_Exscan and their nonblocking forms share one shape. */
typedef void f_scan_t(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                      MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror);
typedef void f_iscan_t(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                       MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror);
static void f_scan(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                   MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Scan(send_buffer(sendbuf), receive_buffer(recvbuf), (int)*count,
                                MPI_Type_f2c(*datatype), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_scan_t, f_scan, mpi_scan, MPI_SCAN);
static void f_exscan(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                     MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Exscan(send_buffer(sendbuf), receive_buffer(recvbuf), (int)*count,
                                  MPI_Type_f2c(*datatype), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_scan_t, f_exscan, mpi_exscan, MPI_EXSCAN);
static void f_iscan(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                    MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Iscan(send_buffer(sendbuf), receive_buffer(recvbuf), (int)*count,
                       MPI_Type_f2c(*datatype), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_iscan_t, f_iscan, mpi_iscan, MPI_ISCAN);
static void f_iexscan(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                      MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Iexscan(send_buffer(sendbuf), receive_buffer(recvbuf), (int)*count,
                         MPI_Type_f2c(*datatype), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm),
                         &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_iscan_t, f_iexscan, mpi_iexscan, MPI_IEXSCAN);

/* MPI_Gather / MPI_Scatter and their nonblocking forms share one shape. A
 * scatter's receive buffer may be MPI_IN_PLACE at the root. */
typedef void f_gather_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                        MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
                        MPI_Fint *ierror);
typedef void f_igather_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                         MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
                         MPI_Fint *request, MPI_Fint *ierror);
static void f_gather(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                     MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
                     MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Gather(send_buffer(sendbuf), (int)*sendcount, MPI_Type_f2c(*sendtype),
                                  receive_buffer(recvbuf), (int)*recvcount,
                                  MPI_Type_f2c(*recvtype), (int)*root, MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_gather_t, f_gather, mpi_gather, MPI_GATHER);
static void f_scatter(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                      MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
                      MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Scatter(send_buffer(sendbuf), (int)*sendcount,
                                   MPI_Type_f2c(*sendtype), (void *)send_buffer(recvbuf),
                                   (int)*recvcount, MPI_Type_f2c(*recvtype), (int)*root,
                                   MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_gather_t, f_scatter, mpi_scatter, MPI_SCATTER);
static void f_igather(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                      MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
                      MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Igather(send_buffer(sendbuf), (int)*sendcount, MPI_Type_f2c(*sendtype),
                         receive_buffer(recvbuf), (int)*recvcount, MPI_Type_f2c(*recvtype),
                         (int)*root, MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_igather_t, f_igather, mpi_igather, MPI_IGATHER);
static void f_iscatter(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                       MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
                       MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Iscatter(send_buffer(sendbuf), (int)*sendcount, MPI_Type_f2c(*sendtype),
                          (void *)send_buffer(recvbuf), (int)*recvcount, MPI_Type_f2c(*recvtype),
                          (int)*root, MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_igather_t, f_iscatter, mpi_iscatter, MPI_ISCATTER);

/* The vector gathers and scatters. Counts and displacements are Fortran
 * INTEGERs (MPI_Fint, int-sized in both MPIs' default builds, as the
 * alltoallv entry assumes). */
typedef void f_allgatherv_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype,
                            void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *displs,
                            MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *ierror);
static void f_allgatherv(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                         MPI_Fint *recvcounts, MPI_Fint *displs, MPI_Fint *recvtype,
                         MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Allgatherv(send_buffer(sendbuf), (int)*sendcount,
                                      MPI_Type_f2c(*sendtype), receive_buffer(recvbuf),
                                      (const int *)recvcounts, (const int *)displs,
                                      MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_allgatherv_t, f_allgatherv, mpi_allgatherv, MPI_ALLGATHERV);
typedef void f_iallgatherv_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype,
                             void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *displs,
                             MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *request,
                             MPI_Fint *ierror);
static void f_iallgatherv(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                          MPI_Fint *recvcounts, MPI_Fint *displs, MPI_Fint *recvtype,
                          MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Iallgatherv(send_buffer(sendbuf), (int)*sendcount, MPI_Type_f2c(*sendtype),
                             receive_buffer(recvbuf), (const int *)recvcounts,
                             (const int *)displs, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm),
                             &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_iallgatherv_t, f_iallgatherv, mpi_iallgatherv, MPI_IALLGATHERV);
typedef void f_gatherv_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                         MPI_Fint *recvcounts, MPI_Fint *displs, MPI_Fint *recvtype,
                         MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror);
static void f_gatherv(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                      MPI_Fint *recvcounts, MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *root,
                      MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Gatherv(send_buffer(sendbuf), (int)*sendcount,
                                   MPI_Type_f2c(*sendtype), receive_buffer(recvbuf),
                                   (const int *)recvcounts, (const int *)displs,
                                   MPI_Type_f2c(*recvtype), (int)*root, MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_gatherv_t, f_gatherv, mpi_gatherv, MPI_GATHERV);
typedef void f_igatherv_t(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                          MPI_Fint *recvcounts, MPI_Fint *displs, MPI_Fint *recvtype,
                          MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror);
static void f_igatherv(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                       MPI_Fint *recvcounts, MPI_Fint *displs, MPI_Fint *recvtype,
                       MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Igatherv(send_buffer(sendbuf), (int)*sendcount, MPI_Type_f2c(*sendtype),
                          receive_buffer(recvbuf), (const int *)recvcounts, (const int *)displs,
                          MPI_Type_f2c(*recvtype), (int)*root, MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_igatherv_t, f_igatherv, mpi_igatherv, MPI_IGATHERV);
typedef void f_scatterv_t(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *displs,
                          MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
                          MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierror);
static void f_scatterv(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *displs, MPI_Fint *sendtype,
                       void *recvbuf, MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root,
                       MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Scatterv(send_buffer(sendbuf), (const int *)sendcounts,
                                    (const int *)displs, MPI_Type_f2c(*sendtype),
                                    (void *)send_buffer(recvbuf), (int)*recvcount,
                                    MPI_Type_f2c(*recvtype), (int)*root, MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_scatterv_t, f_scatterv, mpi_scatterv, MPI_SCATTERV);
typedef void f_iscatterv_t(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *displs,
                           MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
                           MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
                           MPI_Fint *request, MPI_Fint *ierror);
static void f_iscatterv(void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *displs,
                        MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
                        MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request,
                        MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Iscatterv(send_buffer(sendbuf), (const int *)sendcounts, (const int *)displs,
                           MPI_Type_f2c(*sendtype), (void *)send_buffer(recvbuf),
                           (int)*recvcount, MPI_Type_f2c(*recvtype), (int)*root,
                           MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_iscatterv_t, f_iscatterv, mpi_iscatterv, MPI_ISCATTERV);

typedef void f_reduce_scatter_t(void *sendbuf, void *recvbuf, MPI_Fint *recvcounts,
                                MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                                MPI_Fint *ierror);
static void f_reduce_scatter(void *sendbuf, void *recvbuf, MPI_Fint *recvcounts,
                             MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror) {
    set_ierror(ierror, MPI_Reduce_scatter(send_buffer(sendbuf), receive_buffer(recvbuf),
                                          (const int *)recvcounts, MPI_Type_f2c(*datatype),
                                          MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}
DEPUTY_F_EXPORT(f_reduce_scatter_t, f_reduce_scatter, mpi_reduce_scatter, MPI_REDUCE_SCATTER);
typedef void f_ireduce_scatter_t(void *sendbuf, void *recvbuf, MPI_Fint *recvcounts,
                                 MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                                 MPI_Fint *request, MPI_Fint *ierror);
static void f_ireduce_scatter(void *sendbuf, void *recvbuf, MPI_Fint *recvcounts,
                              MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                              MPI_Fint *request, MPI_Fint *ierror) {
    MPI_Request c_request = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce_scatter(send_buffer(sendbuf), receive_buffer(recvbuf),
                                 (const int *)recvcounts, MPI_Type_f2c(*datatype),
                                 MPI_Op_f2c(*op), MPI_Comm_f2c(*comm), &c_request);
    set_request(request, rc, c_request);
    set_ierror(ierror, rc);
}
DEPUTY_F_EXPORT(f_ireduce_scatter_t, f_ireduce_scatter, mpi_ireduce_scatter, MPI_IREDUCE_SCATTER);

#elif defined(MPICH)
/* Nothing: libmpichfort calls the C MPI_* functions (see the top). */
#else
#error "deputy's Fortran entry points know Open MPI and MPICH only"
#endif
