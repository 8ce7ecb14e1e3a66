/* The Fortran entry points (mpif.h and `use mpi`) of deputy's point-to-point
 * calls, for Open MPI: its Fortran bindings call PMPI_* directly, so without
 * these a Fortran program's messages would go to MPI past the library, on a
 * communicator whose messages deputy carries (DEPUTY_MPI_P2P=1) as well:
 * a receive of one would wait for ever for a message sent the other way.
 * Each converts its arguments as Open MPI's binding does and calls the
 * library's C function, which carries the call or passes it to MPI
 * (fortran_entry_points.c has the why and the how; the request calls, the
 * waits and tests, MPI_START and MPI_STARTALL among them, are there).
 * Point-to-point buffers may be MPI_BOTTOM, never MPI_IN_PLACE
 * (receive_buffer). The calls the library refuses on such a communicator
 * (the buffered sends, the matched probes) are here too, so that a Fortran
 * program meets the same error as a C one.
 *
 * MPICH needs none: its MPI_SEND ... call the C MPI_Send ... Under MPICH
 * this file compiles to nothing. */
#include <mpi.h>

#if defined(OPEN_MPI)

#include "mpi/fortran_entry_points.h"

/* The calls of one shape: a message (buffer, count, datatype), a peer (the
 * destination, or a receive's source), a tag, a communicator and, for a
 * nonblocking call or a persistent request's creation, a request. */
#define DEPUTY_F_MESSAGE(impl, c_call, lower, upper)                                         \
    static void impl(void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *peer,          \
                     MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *ierror) {                       \
        set_ierror(ierror, c_call(receive_buffer(buf), (int)*count, MPI_Type_f2c(*datatype), \
                                  (int)*peer, (int)*tag, MPI_Comm_f2c(*comm)));              \
    }                                                                                        \
    DEPUTY_F_ALIASES(impl, lower, upper)

#define DEPUTY_F_MESSAGE_REQUEST(impl, c_call, lower, upper)                                   \
    static void impl(void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *peer,            \
                     MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierror) {      \
        MPI_Request c_request = MPI_REQUEST_NULL;                                              \
        int rc = c_call(receive_buffer(buf), (int)*count, MPI_Type_f2c(*datatype), (int)*peer, \
                        (int)*tag, MPI_Comm_f2c(*comm), &c_request);                           \
        set_request(request, rc, c_request);                                                   \
        set_ierror(ierror, rc);                                                                \
    }                                                                                          \
    DEPUTY_F_ALIASES(impl, lower, upper)

/* The sends, MPI_IRECV, and the creations of persistent requests (started
 * by MPI_START / MPI_STARTALL). */
DEPUTY_F_MESSAGE(f_send, MPI_Send, mpi_send, MPI_SEND);
DEPUTY_F_MESSAGE(f_ssend, MPI_Ssend, mpi_ssend, MPI_SSEND);
DEPUTY_F_MESSAGE(f_rsend, MPI_Rsend, mpi_rsend, MPI_RSEND);
DEPUTY_F_MESSAGE(f_bsend, MPI_Bsend, mpi_bsend, MPI_BSEND);
DEPUTY_F_MESSAGE_REQUEST(f_isend, MPI_Isend, mpi_isend, MPI_ISEND);
DEPUTY_F_MESSAGE_REQUEST(f_issend, MPI_Issend, mpi_issend, MPI_ISSEND);
DEPUTY_F_MESSAGE_REQUEST(f_irsend, MPI_Irsend, mpi_irsend, MPI_IRSEND);
DEPUTY_F_MESSAGE_REQUEST(f_ibsend, MPI_Ibsend, mpi_ibsend, MPI_IBSEND);
DEPUTY_F_MESSAGE_REQUEST(f_irecv, MPI_Irecv, mpi_irecv, MPI_IRECV);
DEPUTY_F_MESSAGE_REQUEST(f_send_init, MPI_Send_init, mpi_send_init, MPI_SEND_INIT);
DEPUTY_F_MESSAGE_REQUEST(f_ssend_init, MPI_Ssend_init, mpi_ssend_init, MPI_SSEND_INIT);
DEPUTY_F_MESSAGE_REQUEST(f_rsend_init, MPI_Rsend_init, mpi_rsend_init, MPI_RSEND_INIT);
DEPUTY_F_MESSAGE_REQUEST(f_bsend_init, MPI_Bsend_init, mpi_bsend_init, MPI_BSEND_INIT);
DEPUTY_F_MESSAGE_REQUEST(f_recv_init, MPI_Recv_init, mpi_recv_init, MPI_RECV_INIT);

/* ---- with a status ---- */

static void f_recv(void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *source,
                   MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierror) {
    MPI_Status c;
    int rc = MPI_Recv(receive_buffer(buf), (int)*count, MPI_Type_f2c(*datatype), (int)*source,
                      (int)*tag, MPI_Comm_f2c(*comm), c_status(status, &c));
    set_status(status, rc, &c);
    set_ierror(ierror, rc);
}
DEPUTY_F_ALIASES(f_recv, mpi_recv, MPI_RECV);

static void f_sendrecv(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, MPI_Fint *dest,
                       MPI_Fint *sendtag, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *recvtype,
                       MPI_Fint *source, MPI_Fint *recvtag, MPI_Fint *comm, MPI_Fint *status,
                       MPI_Fint *ierror) {
    MPI_Status c;
    int rc = MPI_Sendrecv(receive_buffer(sendbuf), (int)*sendcount, MPI_Type_f2c(*sendtype),
                          (int)*dest, (int)*sendtag, receive_buffer(recvbuf), (int)*recvcount,
                          MPI_Type_f2c(*recvtype), (int)*source, (int)*recvtag,
                          MPI_Comm_f2c(*comm), c_status(status, &c));
    set_status(status, rc, &c);
    set_ierror(ierror, rc);
}
DEPUTY_F_ALIASES(f_sendrecv, mpi_sendrecv, MPI_SENDRECV);

static void f_sendrecv_replace(void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *dest,
                               MPI_Fint *sendtag, MPI_Fint *source, MPI_Fint *recvtag,
                               MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierror) {
    MPI_Status c;
    int rc = MPI_Sendrecv_replace(receive_buffer(buf), (int)*count, MPI_Type_f2c(*datatype),
                                  (int)*dest, (int)*sendtag, (int)*source, (int)*recvtag,
                                  MPI_Comm_f2c(*comm), c_status(status, &c));
    set_status(status, rc, &c);
    set_ierror(ierror, rc);
}
DEPUTY_F_ALIASES(f_sendrecv_replace, mpi_sendrecv_replace, MPI_SENDRECV_REPLACE);

/* ---- probes ---- */

/* MPI_PROBE, MPI_IPROBE and the matched MPI_MPROBE, MPI_IMPROBE: the
 * nonblocking ones have a flag, the matched ones a message (MPI_Message_c2f
 * out); the message and the status come back only when one was found. */
static void probe(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *flag,
                  MPI_Fint *message, MPI_Fint *status, MPI_Fint *ierror) {
    MPI_Status c;
    MPI_Status *cs = c_status(status, &c);
    MPI_Message c_message = MPI_MESSAGE_NULL;
    MPI_Comm c_comm = MPI_Comm_f2c(*comm);
    int c_flag = 1, rc;
    if (message == NULL) {
        rc = flag != NULL ? MPI_Iprobe((int)*source, (int)*tag, c_comm, &c_flag, cs)
                          : MPI_Probe((int)*source, (int)*tag, c_comm, cs);
    } else {
        rc = flag != NULL ? MPI_Improbe((int)*source, (int)*tag, c_comm, &c_flag, &c_message, cs)
                          : MPI_Mprobe((int)*source, (int)*tag, c_comm, &c_message, cs);
        if (rc == MPI_SUCCESS && c_flag) {
            *message = MPI_Message_c2f(c_message);
        }
    }
    set_flag_status(flag, status, rc, c_flag, &c);
    set_ierror(ierror, rc);
}

static void f_probe(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *status,
                    MPI_Fint *ierror) {
    probe(source, tag, comm, NULL, NULL, status, ierror);
}
DEPUTY_F_ALIASES(f_probe, mpi_probe, MPI_PROBE);

static void f_iprobe(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *flag,
                     MPI_Fint *status, MPI_Fint *ierror) {
    probe(source, tag, comm, flag, NULL, status, ierror);
}
DEPUTY_F_ALIASES(f_iprobe, mpi_iprobe, MPI_IPROBE);

static void f_mprobe(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *message,
                     MPI_Fint *status, MPI_Fint *ierror) {
    probe(source, tag, comm, NULL, message, status, ierror);
}
DEPUTY_F_ALIASES(f_mprobe, mpi_mprobe, MPI_MPROBE);

static void f_improbe(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *flag,
                      MPI_Fint *message, MPI_Fint *status, MPI_Fint *ierror) {
    probe(source, tag, comm, flag, message, status, ierror);
}
DEPUTY_F_ALIASES(f_improbe, mpi_improbe, MPI_IMPROBE);

#elif defined(MPICH)
/* Nothing: libmpichfort calls the C MPI_* functions (see the top). */
#else
#error "deputy's Fortran entry points know Open MPI and MPICH only"
#endif
