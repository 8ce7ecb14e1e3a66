! offload_check: the collectives deputy's PMPI library intercepts, called from
! Fortran (`use mpi`), each checked bit for bit against the result computed
! here, and one line per case with a hash of every rank's result:
!
!   mpirun -np 2 offload_check [init|init_thread] [all|nonblocking|p2p]
!
! run_fortran_check.sh runs it without and with the library and compares the
! lines, then reads the library's report to see the calls were offloaded.
! `p2p` runs the point-to-point cases instead (MPI_ISEND ... MPI_STARTALL,
! checked the same way, for DEPUTY_MPI_P2P=1), and prints the messages and
! bytes the ranks sent, which the agent's counters must match.
!
! The data are small integers (scaled by 1/4 for REAL and DOUBLE PRECISION),
! so a sum over the ranks is exact in any order: MPI and the agent may
! reduce in different orders and must still agree to the bit. Every value is
! kept as 4-byte words whatever the datatype (the bits of a REAL or DOUBLE
! PRECISION put there with TRANSFER), which lets one routine per collective
! serve all three datatypes. Receive buffers start as `garbage`, so a word a
! collective must not write (the gaps between alltoallv blocks) is checked too.
!
! Buffers are passed as their first element (sendw(1)), as MPI_IN_PLACE and
! MPI_BOTTOM are scalars: MPICH's `use mpi` has no interfaces for choice
! arguments, and gfortran rejects one external routine called with a scalar
! here and an array there (mpifort.mpich's -fallow-argument-mismatch only
! turns that into a warning). The element's address is the buffer's.
!
! The buffers are module variables: an external procedure (MPI_WAIT) may
! change those, so the compiler cannot keep a stale copy of a buffer that a
! nonblocking collective fills in after it was started.
module check_state
    use mpi
    implicit none
    integer, parameter :: garbage = -559038737  ! 0xDEADBEEF
    integer, parameter :: ring_tag = 77
    integer, parameter :: counts(4) = [0, 1, 13, 4097]
    integer, parameter :: n_methods = 5
    character(len=*), parameter :: methods(0:n_methods - 1) = &
        [character(len=8) :: 'wait', 'waitall', 'test', 'waitany', 'waitsome']
    integer :: world_rank, world_size
    integer :: cases = 0, failures = 0
    logical :: case_ok
    integer, allocatable :: sendw(:), recvw(:), wantw(:)
    ! case_loc's pairs (module variables too: see above)
    real(8), allocatable :: ds(:, :), dr(:, :)
    integer, allocatable :: is(:, :), ir(:, :)
    integer :: ring_token
    ! the point-to-point cases' persistent buffers (module variables too),
    ! and what this rank sent (sent)
    integer, allocatable :: ring_in(:)
    integer :: self_in, self_out
    integer(8) :: p2p_messages = 0, p2p_bytes = 0
contains
    integer function words_per(dt)
        integer, intent(in) :: dt
        words_per = 1
        if (dt == MPI_DOUBLE_PRECISION) words_per = 2
    end function words_per

    character(len=16) function type_name(dt)
        integer, intent(in) :: dt
        type_name = 'integer'
        if (dt == MPI_REAL) type_name = 'real'
        if (dt == MPI_DOUBLE_PRECISION) type_name = 'double'
    end function type_name

    ! Element k of rank r's input in case number `salt`.
    integer function val(k, r, salt)
        integer, intent(in) :: k, r, salt
        val = mod(k * 7 + r * 13 + salt * 5, 61) - 30
    end function val

    ! The reduction of element k over the `n` ranks of a communicator.
    integer function reduced(k, salt, op, n)
        integer, intent(in) :: k, salt, op, n
        integer :: r
        reduced = val(k, 0, salt)
        do r = 1, n - 1
            if (op == MPI_SUM) then
                reduced = reduced + val(k, r, salt)
            else
                reduced = max(reduced, val(k, r, salt))
            end if
        end do
    end function reduced

    ! Stores integer value v as element i (1-based) of datatype dt.
    subroutine put(words, dt, i, v)
        integer, intent(inout) :: words(:)
        integer, intent(in) :: dt, i, v
        real(4) :: s
        real(8) :: d
        if (dt == MPI_INTEGER) then
            words(i) = v
        else if (dt == MPI_REAL) then
            s = real(v, 4) * 0.25
            words(i) = transfer(s, 0)
        else
            d = real(v, 8) * 0.25d0
            words(2 * i - 1:2 * i) = transfer(d, words(1:2))
        end if
    end subroutine put

    ! Fresh buffers of `nsend` and `nrecv` words; the receive buffer and the
    ! expected result start as garbage.
    subroutine fresh(nsend, nrecv)
        integer, intent(in) :: nsend, nrecv
        if (allocated(sendw)) deallocate (sendw, recvw, wantw)
        allocate (sendw(max(nsend, 1)), recvw(max(nrecv, 1)), wantw(max(nrecv, 1)))
        sendw = garbage
        recvw = garbage
        wantw = garbage
    end subroutine fresh

    subroutine note(ierr, what)
        integer, intent(in) :: ierr
        character(len=*), intent(in) :: what
        if (ierr /= MPI_SUCCESS) then
            case_ok = .false.
            write (*, '("rank ",i0,": ",a," returned ierror ",i0)') world_rank, what, ierr
        end if
    end subroutine note

    subroutine start_case()
        cases = cases + 1
        case_ok = .true.
    end subroutine start_case

    integer(8) function hash(w)
        integer, intent(in) :: w(:)
        integer :: i
        hash = 17
        do i = 1, size(w)
            hash = mod(hash * 1000003_8 + iand(int(w(i), 8), 4294967295_8), 2147483647_8)
        end do
    end function hash

    ! Ends a case: every rank's hash and verdict, printed by rank 0.
    subroutine finish(name, got, want)
        character(len=*), intent(in) :: name
        integer, intent(in) :: got(:), want(:)
        integer(8) :: mine(2)
        integer(8), allocatable :: table(:, :)
        integer :: r, ierr
        if (size(got) /= size(want)) then
            case_ok = .false.
        else if (any(got /= want)) then
            case_ok = .false.
        end if
        mine(1) = hash(got)
        mine(2) = merge(1_8, 0_8, case_ok)
        allocate (table(2, 0:world_size - 1))
        call MPI_GATHER(mine, 2, MPI_INTEGER8, table, 2, MPI_INTEGER8, 0, MPI_COMM_WORLD, ierr)
        if (world_rank /= 0) return
        do r = 0, world_size - 1
            if (table(2, r) /= 1) failures = failures + 1
            write (*, '("case ",a," rank=",i0," words=",i0," hash=",i0,1x,a)') trim(name), r, &
                size(got), table(1, r), trim(merge('ok ', 'BAD', table(2, r) == 1))
        end do
    end subroutine finish

    ! "iallreduce integer sum n=13 inplace wait": the collective, datatype,
    ! reduction (none for the others), count, buffer and completion.
    character(len=96) function label(op, dt, redop, n, inplace, blocking)
        character(len=*), intent(in) :: op
        integer, intent(in) :: dt, redop, n
        logical, intent(in) :: inplace, blocking
        character(len=8) :: how
        character(len=4) :: reduction
        how = methods(mod(cases, n_methods))
        if (blocking) how = 'blocking'
        reduction = ''
        if (redop == MPI_SUM) reduction = ' sum'
        if (redop == MPI_MAX) reduction = ' max'
        write (label, '(a,1x,a,a,1x,"n=",i0,1x,a,1x,a)') trim(op), trim(type_name(dt)), &
            trim(reduction), n, trim(merge('inplace   ', 'outofplace', inplace)), trim(how)
    end function label

    ! A receive's status must name its sender and tag, whichever library's
    ! MPI_WAIT or MPI_WAITALL filled it in.
    subroutine check_status(status, from, what)
        integer, intent(in) :: status(MPI_STATUS_SIZE), from
        character(len=*), intent(in) :: what
        if (status(MPI_SOURCE) /= from .or. status(MPI_TAG) /= ring_tag) then
            case_ok = .false.
            write (*, '("rank ",i0,": ",a,": status source ",i0," tag ",i0)') world_rank, what, &
                status(MPI_SOURCE), status(MPI_TAG)
        end if
    end subroutine check_status

    ! Completes `req` the way the case number picks: MPI_WAIT (then a token
    ! passed round a ring, each request with MPI_WAIT); MPI_WAITALL,
    ! MPI_WAITANY or MPI_WAITSOME together with MPI's own requests (the same
    ! ring); or MPI_TEST until it says done. The handle must come back as
    ! MPI_REQUEST_NULL.
    subroutine complete(req)
        integer, intent(inout) :: req
        integer :: reqs(3), statuses(MPI_STATUS_SIZE, 3), status(MPI_STATUS_SIZE), ierr
        integer :: token, from, method
        logical :: flag
        from = mod(world_rank - 1 + world_size, world_size)
        token = world_rank * 100000 + cases
        method = mod(cases, n_methods)
        if (method == 1 .or. method >= 3) then
            ring_token = -1
            call MPI_IRECV(ring_token, 1, MPI_INTEGER, from, ring_tag, MPI_COMM_WORLD, reqs(1), &
                           ierr)
            call note(ierr, 'MPI_IRECV')
            reqs(2) = req
            call MPI_ISEND(token, 1, MPI_INTEGER, mod(world_rank + 1, world_size), ring_tag, &
                           MPI_COMM_WORLD, reqs(3), ierr)
            call note(ierr, 'MPI_ISEND')
        end if
        select case (method)
        case (0)
            call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
            call note(ierr, 'MPI_WAIT')
            ring_token = -1
            call MPI_IRECV(ring_token, 1, MPI_INTEGER, from, ring_tag, MPI_COMM_WORLD, reqs(1), &
                           ierr)
            call note(ierr, 'MPI_IRECV')
            call MPI_ISEND(token, 1, MPI_INTEGER, mod(world_rank + 1, world_size), ring_tag, &
                           MPI_COMM_WORLD, reqs(3), ierr)
            call note(ierr, 'MPI_ISEND')
            call MPI_WAIT(reqs(3), MPI_STATUS_IGNORE, ierr)
            call note(ierr, 'MPI_WAIT')
            call MPI_WAIT(reqs(1), status, ierr)
            call note(ierr, 'MPI_WAIT')
            call check_status(status, from, 'MPI_WAIT')
            if (ring_token /= from * 100000 + cases .or. reqs(1) /= MPI_REQUEST_NULL .or. &
                reqs(3) /= MPI_REQUEST_NULL) then
                case_ok = .false.
                write (*, '("rank ",i0,": MPI_WAIT: token ",i0,", requests ",2(i0,1x))') &
                    world_rank, ring_token, reqs(1), reqs(3)
            end if
        case (1)
            call MPI_WAITALL(3, reqs, statuses, ierr)
            call note(ierr, 'MPI_WAITALL')
            call check_status(statuses(:, 1), from, 'MPI_WAITALL')
            req = reqs(2)
            if (ring_token /= from * 100000 + cases .or. any(reqs /= MPI_REQUEST_NULL)) then
                case_ok = .false.
                write (*, '("rank ",i0,": MPI_WAITALL: token ",i0,", requests ",3(i0,1x))') &
                    world_rank, ring_token, reqs
            end if
        case (2)
            flag = .false.
            do while (.not. flag)
                call MPI_TEST(req, flag, MPI_STATUS_IGNORE, ierr)
                call note(ierr, 'MPI_TEST')
                if (ierr /= MPI_SUCCESS) exit
            end do
        case default
            call complete_some(reqs, from, method == 3)
            req = reqs(2)
            if (ring_token /= from * 100000 + cases .or. any(reqs /= MPI_REQUEST_NULL)) then
                case_ok = .false.
                write (*, '("rank ",i0,": ",a,": token ",i0,", requests ",3(i0,1x))') &
                    world_rank, trim(methods(method)), ring_token, reqs
            end if
        end select
        if (req /= MPI_REQUEST_NULL) then
            case_ok = .false.
            write (*, '("rank ",i0,": request not MPI_REQUEST_NULL after completion")') world_rank
        end if
    end subroutine complete

    ! MPI_WAITANY (`use_any`) or MPI_WAITSOME on the three requests until
    ! every one was returned once, by its Fortran index (from 1); MPI_WAITSOME
    ! once more: with nothing active, MPI_UNDEFINED. (MPICH 4.0.2's
    ! MPI_WAITANY returns MPI_UNDEFINED + 1 there, library or not: its
    ! binding adds 1 to any index.) The receive's status (request 1) must
    ! name its sender.
    subroutine complete_some(reqs, from, use_any)
        integer, intent(inout) :: reqs(3)
        integer, intent(in) :: from
        logical, intent(in) :: use_any
        integer :: statuses(MPI_STATUS_SIZE, 3), indices(3), outcount, k, j, ierr
        logical :: seen(3)
        character(len=12) :: what
        what = merge('MPI_WAITANY ', 'MPI_WAITSOME', use_any)
        seen = .false.
        do k = 1, merge(3, 4, use_any)
            if (use_any) then
                call MPI_WAITANY(3, reqs, indices(1), statuses(:, 1), ierr)
                outcount = 1
                if (indices(1) == MPI_UNDEFINED) outcount = MPI_UNDEFINED
            else
                call MPI_WAITSOME(3, reqs, outcount, indices, statuses, ierr)
            end if
            call note(ierr, trim(what))
            if (ierr /= MPI_SUCCESS) return
            if (outcount == MPI_UNDEFINED) exit
            do j = 1, outcount
                if (indices(j) < 1 .or. indices(j) > 3) then
                    case_ok = .false.
                    write (*, '("rank ",i0,": ",a,": index ",i0)') world_rank, trim(what), &
                        indices(j)
                    return
                end if
                if (seen(indices(j))) then
                    case_ok = .false.
                    write (*, '("rank ",i0,": ",a,": request ",i0," returned twice")') &
                        world_rank, trim(what), indices(j)
                end if
                seen(indices(j)) = .true.
                if (indices(j) == 1) call check_status(statuses(:, j), from, trim(what))
            end do
        end do
        if (.not. all(seen) .or. (.not. use_any .and. outcount /= MPI_UNDEFINED)) then
            case_ok = .false.
            write (*, '("rank ",i0,": ",a,": returned ",3(l1,1x),"then ",i0)') world_rank, &
                trim(what), seen, outcount
        end if
    end subroutine complete_some

    ! ---- the collectives ----

    subroutine case_allreduce(blocking, dt, op, n, inplace, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: dt, op, n, comm
        integer :: w, k, me, np, req, ierr
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        call fresh(n * w, n * w)
        do k = 1, n
            call put(sendw, dt, k, val(k, me, cases))
            call put(wantw, dt, k, reduced(k, cases, op, np))
        end do
        if (inplace) recvw = sendw
        if (blocking .and. inplace) then
            call MPI_ALLREDUCE(MPI_IN_PLACE, recvw(1), n, dt, op, comm, ierr)
        else if (blocking) then
            call MPI_ALLREDUCE(sendw(1), recvw(1), n, dt, op, comm, ierr)
        else if (inplace) then
            call MPI_IALLREDUCE(MPI_IN_PLACE, recvw(1), n, dt, op, comm, req, ierr)
        else
            call MPI_IALLREDUCE(sendw(1), recvw(1), n, dt, op, comm, req, ierr)
        end if
        call note(ierr, 'allreduce')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        call finish(label(merge('allreduce ', 'iallreduce', blocking), dt, op, n, inplace, &
                          blocking), recvw(1:n * w), wantw(1:n * w))
    end subroutine case_allreduce

    ! n is the count each rank receives; in place, the input is the receive
    ! buffer and the result lands in its first n elements.
    subroutine case_reduce_scatter_block(blocking, dt, op, n, inplace, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: dt, op, n, comm
        integer :: w, k, me, np, req, ierr
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        call fresh(n * np * w, n * np * w)
        do k = 1, n * np
            call put(sendw, dt, k, val(k, me, cases))
        end do
        do k = 1, n
            call put(wantw, dt, k, reduced(me * n + k, cases, op, np))
        end do
        if (inplace) recvw = sendw
        if (blocking .and. inplace) then
            call MPI_REDUCE_SCATTER_BLOCK(MPI_IN_PLACE, recvw(1), n, dt, op, comm, ierr)
        else if (blocking) then
            call MPI_REDUCE_SCATTER_BLOCK(sendw(1), recvw(1), n, dt, op, comm, ierr)
        else if (inplace) then
            call MPI_IREDUCE_SCATTER_BLOCK(MPI_IN_PLACE, recvw(1), n, dt, op, comm, req, ierr)
        else
            call MPI_IREDUCE_SCATTER_BLOCK(sendw(1), recvw(1), n, dt, op, comm, req, ierr)
        end if
        call note(ierr, 'reduce_scatter_block')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        call finish(label(merge('reduce_scatter_block ', 'ireduce_scatter_block', blocking), &
                          dt, op, n, inplace, blocking), recvw(1:n * w), wantw(1:n * w))
    end subroutine case_reduce_scatter_block

    subroutine case_allgather(blocking, dt, n, inplace, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: dt, n, comm
        integer :: w, k, j, me, np, req, ierr
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        call fresh(n * w, n * np * w)
        do k = 1, n
            call put(sendw, dt, k, val(k, me, cases))
        end do
        do j = 0, np - 1
            do k = 1, n
                call put(wantw, dt, j * n + k, val(k, j, cases))
            end do
        end do
        if (inplace) recvw(me * n * w + 1:(me + 1) * n * w) = sendw(1:n * w)
        if (blocking .and. inplace) then
            call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), n, dt, comm, ierr)
        else if (blocking) then
            call MPI_ALLGATHER(sendw(1), n, dt, recvw(1), n, dt, comm, ierr)
        else if (inplace) then
            call MPI_IALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), n, dt, comm, req, &
                                ierr)
        else
            call MPI_IALLGATHER(sendw(1), n, dt, recvw(1), n, dt, comm, req, ierr)
        end if
        call note(ierr, 'allgather')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        call finish(label(merge('allgather ', 'iallgather', blocking), dt, MPI_OP_NULL, n, &
                          inplace, blocking), recvw(1:n * np * w), wantw(1:n * np * w))
    end subroutine case_allgather

    subroutine case_alltoall(blocking, dt, n, inplace, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: dt, n, comm
        integer :: w, k, j, me, np, req, ierr
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        call fresh(n * np * w, n * np * w)
        do j = 0, np - 1
            do k = 1, n
                call put(sendw, dt, j * n + k, val(j * n + k, me, cases))
                call put(wantw, dt, j * n + k, val(me * n + k, j, cases))
            end do
        end do
        if (inplace) recvw = sendw
        if (blocking .and. inplace) then
            call MPI_ALLTOALL(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), n, dt, comm, ierr)
        else if (blocking) then
            call MPI_ALLTOALL(sendw(1), n, dt, recvw(1), n, dt, comm, ierr)
        else if (inplace) then
            call MPI_IALLTOALL(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), n, dt, comm, req, ierr)
        else
            call MPI_IALLTOALL(sendw(1), n, dt, recvw(1), n, dt, comm, req, ierr)
        end if
        call note(ierr, 'alltoall')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        call finish(label(merge('alltoall ', 'ialltoall', blocking), dt, MPI_OP_NULL, n, inplace, &
                          blocking), recvw(1:n * np * w), wantw(1:n * np * w))
    end subroutine case_alltoall

    ! Elements rank a sends rank b. In place the exchange must be symmetric
    ! (one count array serves both directions), so the count is too.
    integer function vcount(a, b, n, inplace)
        integer, intent(in) :: a, b, n
        logical, intent(in) :: inplace
        vcount = 0
        if (n == 0) return
        if (inplace) then
            vcount = n + mod(a + b, 3)
        else
            vcount = n + mod(a + 2 * b, 3)
        end if
    end function vcount

    ! Blocks at uneven displacements with gaps between them (one element
    ! between send blocks, two between receive blocks), which must keep
    ! their garbage.
    subroutine case_alltoallv(blocking, dt, n, inplace, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: dt, n, comm
        integer :: w, k, j, me, np, req, ierr, stotal, rtotal
        integer, allocatable :: scounts(:), sdispls(:), rcounts(:), rdispls(:)
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        allocate (scounts(0:np - 1), sdispls(0:np - 1), rcounts(0:np - 1), rdispls(0:np - 1))
        stotal = 0
        rtotal = 0
        do j = 0, np - 1
            scounts(j) = vcount(me, j, n, inplace)
            rcounts(j) = vcount(j, me, n, inplace)
            sdispls(j) = stotal + 1
            rdispls(j) = rtotal + 2
            stotal = sdispls(j) + scounts(j)
            rtotal = rdispls(j) + rcounts(j)
        end do
        call fresh(stotal * w, rtotal * w)
        do j = 0, np - 1
            do k = 1, scounts(j)
                call put(sendw, dt, sdispls(j) + k, val(k + 7 * j, me, cases))
            end do
            do k = 1, rcounts(j)
                call put(wantw, dt, rdispls(j) + k, val(k + 7 * me, j, cases))
                if (inplace) call put(recvw, dt, rdispls(j) + k, val(k + 7 * j, me, cases))
            end do
        end do
        if (blocking .and. inplace) then
            call MPI_ALLTOALLV(MPI_IN_PLACE, scounts, sdispls, MPI_DATATYPE_NULL, recvw(1), &
                               rcounts, rdispls, dt, comm, ierr)
        else if (blocking) then
            call MPI_ALLTOALLV(sendw(1), scounts, sdispls, dt, recvw(1), rcounts, rdispls, dt, &
                               comm, ierr)
        else if (inplace) then
            call MPI_IALLTOALLV(MPI_IN_PLACE, scounts, sdispls, MPI_DATATYPE_NULL, recvw(1), &
                                rcounts, rdispls, dt, comm, req, ierr)
        else
            call MPI_IALLTOALLV(sendw(1), scounts, sdispls, dt, recvw(1), rcounts, rdispls, dt, &
                                comm, req, ierr)
        end if
        call note(ierr, 'alltoallv')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        call finish(label(merge('alltoallv ', 'ialltoallv', blocking), dt, MPI_OP_NULL, n, &
                          inplace, blocking), recvw(1:rtotal * w), wantw(1:rtotal * w))
    end subroutine case_alltoallv

    ! The root's result only (the others' receive buffers are not MPI's to
    ! define); in place, the root's input is its receive buffer.
    subroutine case_reduce(blocking, dt, op, n, inplace, root, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: dt, op, n, root, comm
        integer :: w, k, me, np, req, ierr, m
        character(len=96) :: name
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        call fresh(n * w, n * w)
        do k = 1, n
            call put(sendw, dt, k, val(k, me, cases))
            call put(wantw, dt, k, reduced(k, cases, op, np))
        end do
        if (inplace .and. me == root) recvw = sendw
        if (inplace .and. me == root) then
            if (blocking) then
                call MPI_REDUCE(MPI_IN_PLACE, recvw(1), n, dt, op, root, comm, ierr)
            else
                call MPI_IREDUCE(MPI_IN_PLACE, recvw(1), n, dt, op, root, comm, req, ierr)
            end if
        else if (blocking) then
            call MPI_REDUCE(sendw(1), recvw(1), n, dt, op, root, comm, ierr)
        else
            call MPI_IREDUCE(sendw(1), recvw(1), n, dt, op, root, comm, req, ierr)
        end if
        call note(ierr, 'reduce')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        name = label(merge('reduce ', 'ireduce', blocking), dt, op, n, inplace, blocking)
        write (name, '(a," root=",i0)') trim(name), root
        m = merge(n * w, 0, me == root)
        call finish(name, recvw(1:m), wantw(1:m))
    end subroutine case_reduce

    ! MPI_SCAN (exclusive false) and MPI_EXSCAN: rank r reduces ranks 0..r
    ! (0..r-1); exscan's rank 0 receives nothing MPI defines (not compared).
    subroutine case_scan(blocking, exclusive, dt, op, n, inplace, comm)
        logical, intent(in) :: blocking, exclusive, inplace
        integer, intent(in) :: dt, op, n, comm
        integer :: w, k, me, req, ierr, m
        character(len=16) :: what
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        w = words_per(dt)
        call fresh(n * w, n * w)
        do k = 1, n
            call put(sendw, dt, k, val(k, me, cases))
            if (exclusive .and. me > 0) call put(wantw, dt, k, reduced(k, cases, op, me))
            if (.not. exclusive) call put(wantw, dt, k, reduced(k, cases, op, me + 1))
        end do
        if (inplace) recvw = sendw
        if (exclusive .and. blocking) then
            if (inplace) call MPI_EXSCAN(MPI_IN_PLACE, recvw(1), n, dt, op, comm, ierr)
            if (.not. inplace) call MPI_EXSCAN(sendw(1), recvw(1), n, dt, op, comm, ierr)
        else if (exclusive) then
            if (inplace) call MPI_IEXSCAN(MPI_IN_PLACE, recvw(1), n, dt, op, comm, req, ierr)
            if (.not. inplace) call MPI_IEXSCAN(sendw(1), recvw(1), n, dt, op, comm, req, ierr)
        else if (blocking) then
            if (inplace) call MPI_SCAN(MPI_IN_PLACE, recvw(1), n, dt, op, comm, ierr)
            if (.not. inplace) call MPI_SCAN(sendw(1), recvw(1), n, dt, op, comm, ierr)
        else
            if (inplace) call MPI_ISCAN(MPI_IN_PLACE, recvw(1), n, dt, op, comm, req, ierr)
            if (.not. inplace) call MPI_ISCAN(sendw(1), recvw(1), n, dt, op, comm, req, ierr)
        end if
        what = merge('exscan', 'scan  ', exclusive)
        call note(ierr, trim(what))
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        if (.not. blocking) what = 'i' // trim(what)
        m = merge(0, n * w, exclusive .and. me == 0)
        call finish(label(what, dt, op, n, inplace, blocking), recvw(1:m), wantw(1:m))
    end subroutine case_scan

    ! The root's receive buffer holds every rank's block in rank order; in
    ! place, the root's own block is already there.
    subroutine case_gather(blocking, dt, n, inplace, root, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: dt, n, root, comm
        integer :: w, k, j, me, np, req, ierr, m
        character(len=96) :: name
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        call fresh(n * w, n * np * w)
        do k = 1, n
            call put(sendw, dt, k, val(k, me, cases))
        end do
        do j = 0, np - 1
            do k = 1, n
                call put(wantw, dt, j * n + k, val(k, j, cases))
            end do
        end do
        if (inplace .and. me == root) then
            recvw(me * n * w + 1:(me + 1) * n * w) = sendw(1:n * w)
            if (blocking) then
                call MPI_GATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), n, dt, root, comm, &
                                ierr)
            else
                call MPI_IGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), n, dt, root, comm, &
                                 req, ierr)
            end if
        else if (blocking) then
            call MPI_GATHER(sendw(1), n, dt, recvw(1), n, dt, root, comm, ierr)
        else
            call MPI_IGATHER(sendw(1), n, dt, recvw(1), n, dt, root, comm, req, ierr)
        end if
        call note(ierr, 'gather')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        name = label(merge('gather ', 'igather', blocking), dt, MPI_OP_NULL, n, inplace, blocking)
        write (name, '(a," root=",i0)') trim(name), root
        m = merge(n * np * w, 0, me == root)
        call finish(name, recvw(1:m), wantw(1:m))
    end subroutine case_gather

    ! Each rank receives its block of the root's send buffer; in place, the
    ! root keeps its own block where it is (nothing to compare there).
    subroutine case_scatter(blocking, dt, n, inplace, root, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: dt, n, root, comm
        integer :: w, k, j, me, np, req, ierr, m
        character(len=96) :: name
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        call fresh(n * np * w, n * w)
        do j = 0, np - 1
            do k = 1, n
                call put(sendw, dt, j * n + k, val(k, j, cases))
            end do
        end do
        do k = 1, n
            call put(wantw, dt, k, val(k, me, cases))
        end do
        if (inplace .and. me == root) then
            if (blocking) then
                call MPI_SCATTER(sendw(1), n, dt, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, &
                                 ierr)
            else
                call MPI_ISCATTER(sendw(1), n, dt, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, &
                                  req, ierr)
            end if
        else if (blocking) then
            call MPI_SCATTER(sendw(1), n, dt, recvw(1), n, dt, root, comm, ierr)
        else
            call MPI_ISCATTER(sendw(1), n, dt, recvw(1), n, dt, root, comm, req, ierr)
        end if
        call note(ierr, 'scatter')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        name = label(merge('scatter ', 'iscatter', blocking), dt, MPI_OP_NULL, n, inplace, blocking)
        write (name, '(a," root=",i0)') trim(name), root
        m = merge(0, n * w, inplace .and. me == root)
        call finish(name, recvw(1:m), wantw(1:m))
    end subroutine case_scatter

    ! MPI_MAXLOC / MPI_MINLOC on MPI_2DOUBLE_PRECISION and MPI_2INTEGER (a
    ! pivot search): values that tie across ranks, indices that run against
    ! the rank order, so only MPI's rule (of equal values the lower index)
    ! gives the expected index.
    subroutine case_loc(blocking, maxloc, dbl, n, comm)
        logical, intent(in) :: blocking, maxloc, dbl
        integer, intent(in) :: n, comm
        integer :: k, r, me, np, req, ierr, op, dt, w
        integer :: v, x, bv, bx
        character(len=96) :: name
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        op = merge(MPI_MAXLOC, MPI_MINLOC, maxloc)
        dt = merge(MPI_2DOUBLE_PRECISION, MPI_2INTEGER, dbl)
        w = merge(4, 2, dbl)  ! words per pair
        call fresh(0, n * w)
        if (allocated(ds)) deallocate (ds, dr, is, ir)
        allocate (ds(2, max(n, 1)), dr(2, max(n, 1)), is(2, max(n, 1)), ir(2, max(n, 1)))
        do k = 1, n
            is(1, k) = mod(abs(val(k, me, cases)), 3)
            is(2, k) = (np - 1 - me) * 2 + mod(k, 2)
            ds(:, k) = real(is(:, k), 8)
            ! the expected pair, over every rank
            do r = 0, np - 1
                v = mod(abs(val(k, r, cases)), 3)
                x = (np - 1 - r) * 2 + mod(k, 2)
                if (r == 0) then
                    bv = v
                    bx = x
                else if ((maxloc .and. v > bv) .or. (.not. maxloc .and. v < bv) .or. &
                         (v == bv .and. x < bx)) then
                    bv = v
                    bx = x
                end if
            end do
            if (dbl) then
                wantw((k - 1) * 4 + 1:k * 4) = transfer([real(bv, 8), real(bx, 8)], wantw, 4)
            else
                wantw((k - 1) * 2 + 1:k * 2) = [bv, bx]
            end if
        end do
        if (dbl .and. blocking) then
            call MPI_ALLREDUCE(ds(1, 1), dr(1, 1), n, dt, op, comm, ierr)
        else if (dbl) then
            call MPI_IALLREDUCE(ds(1, 1), dr(1, 1), n, dt, op, comm, req, ierr)
        else if (blocking) then
            call MPI_ALLREDUCE(is(1, 1), ir(1, 1), n, dt, op, comm, ierr)
        else
            call MPI_IALLREDUCE(is(1, 1), ir(1, 1), n, dt, op, comm, req, ierr)
        end if
        call note(ierr, 'allreduce loc')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        do k = 1, n
            if (dbl) then
                recvw((k - 1) * 4 + 1:k * 4) = transfer(dr(:, k), recvw, 4)
            else
                recvw((k - 1) * 2 + 1:k * 2) = ir(:, k)
            end if
        end do
        write (name, '(a,"allreduce ",a,1x,a," n=",i0,1x,a)') trim(merge('  ', 'i ', blocking)), &
            trim(merge('2double ', '2integer', dbl)), trim(merge('maxloc', 'minloc', maxloc)), n, &
            trim(merge('blocking', 'wait    ', blocking))
        call finish(adjustl(name), recvw(1:n * w), wantw(1:n * w))
    end subroutine case_loc

    ! The vector gathers and scatters (which: 0 allgatherv, 1 gatherv, 2
    ! scatterv): rank m's block has gvcount(n, m) elements (some 0), in the
    ! gathering buffer in reverse rank order with 2-element gaps that must
    ! stay as they were.
    integer function gvcount(n, m)
        integer, intent(in) :: n, m
        gvcount = n + mod(m, 3)
        if (n == 0 .or. mod(m, 4) == 3) gvcount = 0
    end function gvcount

    subroutine case_vgather(blocking, which, dt, n, inplace, root, comm)
        logical, intent(in) :: blocking, inplace
        integer, intent(in) :: which, dt, n, root, comm
        integer :: w, k, m, me, np, req, ierr, at, extent, own, mw
        integer, allocatable :: cnt(:), dsp(:)
        logical :: here
        character(len=96) :: name
        character(len=12) :: what
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        allocate (cnt(0:np - 1), dsp(0:np - 1))
        at = 2
        do m = np - 1, 0, -1
            cnt(m) = gvcount(n, m)
            dsp(m) = at
            at = at + cnt(m) + 2
        end do
        extent = at
        own = cnt(me)
        here = inplace .and. (which == 0 .or. me == root)
        if (which == 2) then
            call fresh(extent * w, max(own, 1) * w)
            if (me == root) then
                do m = 0, np - 1
                    do k = 1, cnt(m)
                        call put(sendw, dt, dsp(m) + k, val(k, m, cases))
                    end do
                end do
            end if
            do k = 1, own
                call put(wantw, dt, k, val(k, me, cases))
            end do
        else
            call fresh(max(own, 1) * w, extent * w)
            do k = 1, own
                call put(sendw, dt, k, val(k, me, cases))
            end do
            do m = 0, np - 1
                do k = 1, cnt(m)
                    call put(wantw, dt, dsp(m) + k, val(k, m, cases))
                end do
            end do
            if (here) recvw(dsp(me) * w + 1:(dsp(me) + own) * w) = sendw(1:own * w)
        end if
        if (which == 0 .and. here) then
            if (blocking) call MPI_ALLGATHERV(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), cnt, &
                                              dsp, dt, comm, ierr)
            if (.not. blocking) call MPI_IALLGATHERV(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, &
                                                     recvw(1), cnt, dsp, dt, comm, req, ierr)
        else if (which == 0) then
            if (blocking) call MPI_ALLGATHERV(sendw(1), own, dt, recvw(1), cnt, dsp, dt, comm, &
                                              ierr)
            if (.not. blocking) call MPI_IALLGATHERV(sendw(1), own, dt, recvw(1), cnt, dsp, dt, &
                                                     comm, req, ierr)
        else if (which == 1 .and. here) then
            if (blocking) call MPI_GATHERV(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), cnt, &
                                           dsp, dt, root, comm, ierr)
            if (.not. blocking) call MPI_IGATHERV(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvw(1), &
                                                  cnt, dsp, dt, root, comm, req, ierr)
        else if (which == 1) then
            if (blocking) call MPI_GATHERV(sendw(1), own, dt, recvw(1), cnt, dsp, dt, root, &
                                           comm, ierr)
            if (.not. blocking) call MPI_IGATHERV(sendw(1), own, dt, recvw(1), cnt, dsp, dt, &
                                                  root, comm, req, ierr)
        else if (here) then
            if (blocking) call MPI_SCATTERV(sendw(1), cnt, dsp, dt, MPI_IN_PLACE, 0, &
                                            MPI_DATATYPE_NULL, root, comm, ierr)
            if (.not. blocking) call MPI_ISCATTERV(sendw(1), cnt, dsp, dt, MPI_IN_PLACE, 0, &
                                                   MPI_DATATYPE_NULL, root, comm, req, ierr)
        else
            if (blocking) call MPI_SCATTERV(sendw(1), cnt, dsp, dt, recvw(1), own, dt, root, &
                                            comm, ierr)
            if (.not. blocking) call MPI_ISCATTERV(sendw(1), cnt, dsp, dt, recvw(1), own, dt, &
                                                   root, comm, req, ierr)
        end if
        what = 'allgatherv'
        if (which == 1) what = 'gatherv'
        if (which == 2) what = 'scatterv'
        call note(ierr, trim(what))
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        if (.not. blocking) what = 'i' // trim(what)
        name = label(what, dt, MPI_OP_NULL, n, inplace, blocking)
        write (name, '(a," root=",i0)') trim(name), root
        ! what this rank receives: the gathering buffer (gaps included), or
        ! its block; nothing off a gatherv's root or at a scatterv's root in place
        mw = extent * w
        if (which == 2) mw = own * w
        if ((which == 1 .and. me /= root) .or. (which == 2 .and. here)) mw = 0
        call finish(name, recvw(1:mw), wantw(1:mw))
    end subroutine case_vgather

    ! MPI_REDUCE_SCATTER, out of place: equal counts (n each) in even
    ! cases, n + mod(rank, 2) in odd ones (the library runs them as
    ! reduce_scatter_block and as reduce_scatterv).
    subroutine case_reduce_scatter(blocking, dt, op, n, comm)
        logical, intent(in) :: blocking
        integer, intent(in) :: dt, op, n, comm
        integer :: w, k, m, me, np, req, ierr, first, total
        integer, allocatable :: cnt(:)
        character(len=24) :: what
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        w = words_per(dt)
        allocate (cnt(0:np - 1))
        do m = 0, np - 1
            cnt(m) = n
            if (n > 0 .and. mod(cases, 2) == 1) cnt(m) = n + mod(m, 2)
        end do
        total = sum(cnt)
        first = sum(cnt(0:me)) - cnt(me)
        call fresh(max(total, 1) * w, max(cnt(me), 1) * w)
        do k = 1, total
            call put(sendw, dt, k, val(k, me, cases))
        end do
        do k = 1, cnt(me)
            call put(wantw, dt, k, reduced(first + k, cases, op, np))
        end do
        if (blocking) then
            call MPI_REDUCE_SCATTER(sendw(1), recvw(1), cnt, dt, op, comm, ierr)
        else
            call MPI_IREDUCE_SCATTER(sendw(1), recvw(1), cnt, dt, op, comm, req, ierr)
        end if
        call note(ierr, 'reduce_scatter')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        what = merge('reduce_scatter ', 'ireduce_scatter', blocking)
        call finish(label(what, dt, op, n, .false., blocking), recvw(1:cnt(me) * w), &
                    wantw(1:cnt(me) * w))
    end subroutine case_reduce_scatter

    subroutine case_bcast(blocking, dt, n, root, comm)
        logical, intent(in) :: blocking
        integer, intent(in) :: dt, n, root, comm
        integer :: w, k, me, req, ierr
        character(len=96) :: name
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        w = words_per(dt)
        call fresh(0, n * w)
        do k = 1, n
            call put(wantw, dt, k, val(k, root, cases))
        end do
        if (me == root) recvw = wantw
        if (blocking) then
            call MPI_BCAST(recvw(1), n, dt, root, comm, ierr)
        else
            call MPI_IBCAST(recvw(1), n, dt, root, comm, req, ierr)
        end if
        call note(ierr, 'bcast')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        name = label(merge('bcast ', 'ibcast', blocking), dt, MPI_OP_NULL, n, .false., blocking)
        write (name, '(a," root=",i0)') trim(name), root
        call finish(name, recvw(1:n * w), wantw(1:n * w))
    end subroutine case_bcast

    subroutine case_barrier(blocking, comm)
        logical, intent(in) :: blocking
        integer, intent(in) :: comm
        integer :: req, ierr
        call start_case()
        if (blocking) then
            call MPI_BARRIER(comm, ierr)
        else
            call MPI_IBARRIER(comm, req, ierr)
        end if
        call note(ierr, 'barrier')
        if (.not. blocking .and. ierr == MPI_SUCCESS) call complete(req)
        call finish(label(merge('barrier ', 'ibarrier', blocking), MPI_INTEGER, MPI_OP_NULL, 0, &
                          .false., blocking), recvw(1:0), wantw(1:0))
    end subroutine case_barrier

    ! More requests in one MPI_WAITALL than the library converts on its stack
    ! (16), statuses ignored: one allreduce of one INTEGER per request, each
    ! into its own element.
    subroutine case_waitall_many(comm)
        integer, intent(in) :: comm
        integer, parameter :: n = 20
        integer :: k, me, np, ierr, reqs(n)
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        call fresh(n, n)
        do k = 1, n
            sendw(k) = val(k, me, cases)
            wantw(k) = reduced(k, cases, MPI_SUM, np)
            call MPI_IALLREDUCE(sendw(k), recvw(k), 1, MPI_INTEGER, MPI_SUM, comm, reqs(k), ierr)
            call note(ierr, 'MPI_IALLREDUCE')
        end do
        call MPI_WAITALL(n, reqs, MPI_STATUSES_IGNORE, ierr)
        call note(ierr, 'MPI_WAITALL')
        if (any(reqs /= MPI_REQUEST_NULL)) then
            case_ok = .false.
            write (*, '("rank ",i0,": MPI_WAITALL of ",i0,": a request is not MPI_REQUEST_NULL")') &
                world_rank, n
        end if
        call finish('iallreduce integer sum n=1 x20 waitall', recvw, wantw)
    end subroutine case_waitall_many

    ! MPI_IN_PLACE and MPI_BOTTOM together: the receive buffer is described
    ! by a datatype holding its absolute address (block j of an allgather
    ! lands one extent, n INTEGERs, further). MPI_BOTTOM's address passed on
    ! untranslated would be taken for a buffer. (Not an allreduce: Open MPI
    ! defines no predefined reduction on a derived datatype.)
    subroutine case_bottom(comm)
        integer, intent(in) :: comm
        integer, parameter :: n = 13
        integer :: k, j, me, np, ierr, req, btype
        integer(kind=MPI_ADDRESS_KIND) :: addr(1)
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        call fresh(0, n * np)
        do j = 0, np - 1
            do k = 1, n
                wantw(j * n + k) = val(k, j, cases)
            end do
        end do
        recvw(me * n + 1:me * n + n) = wantw(me * n + 1:me * n + n)
        call MPI_GET_ADDRESS(recvw(1), addr(1), ierr)
        call MPI_TYPE_CREATE_HINDEXED(1, [n], addr, MPI_INTEGER, btype, ierr)
        call MPI_TYPE_COMMIT(btype, ierr)
        call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, MPI_BOTTOM, 1, btype, comm, ierr)
        call note(ierr, 'MPI_ALLGATHER(MPI_IN_PLACE, MPI_BOTTOM)')
        call finish('allgather integer n=13 inplace bottom blocking', recvw(1:n * np), &
                    wantw(1:n * np))
        call MPI_TYPE_FREE(btype, ierr)

        call start_case()
        call fresh(n, n)
        do k = 1, n
            wantw(k) = val(k, 0, cases)
        end do
        if (me == 0) recvw = wantw
        call MPI_GET_ADDRESS(recvw(1), addr(1), ierr)
        call MPI_TYPE_CREATE_HINDEXED(1, [n], addr, MPI_INTEGER, btype, ierr)
        call MPI_TYPE_COMMIT(btype, ierr)
        call MPI_IBCAST(MPI_BOTTOM, 1, btype, 0, comm, req, ierr)
        call note(ierr, 'MPI_IBCAST(MPI_BOTTOM)')
        if (ierr == MPI_SUCCESS) call complete(req)
        call finish('ibcast integer n=13 bottom root=0', recvw(1:n), wantw(1:n))
        call MPI_TYPE_FREE(btype, ierr)
    end subroutine case_bottom

    ! Buffers from MPI_ALLOC_MEM (which the library may place in memory the
    ! agent can reach), given back with MPI_FREE_MEM.
    subroutine case_alloc_mem(comm)
        use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
        integer, intent(in) :: comm
        integer, parameter :: n = 4097
        integer(kind=MPI_ADDRESS_KIND) :: bytes, sbase, rbase
        integer, pointer, contiguous :: sp(:), rp(:)
        type(c_ptr) :: cp
        integer :: k, me, np, ierr, req
        call start_case()
        call MPI_COMM_RANK(comm, me, ierr)
        call MPI_COMM_SIZE(comm, np, ierr)
        call fresh(0, 2 * n)
        bytes = 8_MPI_ADDRESS_KIND * n
        call MPI_ALLOC_MEM(bytes, MPI_INFO_NULL, sbase, ierr)
        call note(ierr, 'MPI_ALLOC_MEM')
        call MPI_ALLOC_MEM(bytes, MPI_INFO_NULL, rbase, ierr)
        call note(ierr, 'MPI_ALLOC_MEM')
        if (.not. case_ok) then
            call finish('iallreduce double sum n=4097 alloc_mem', recvw(1:0), wantw(1:2))
            return
        end if
        cp = transfer(sbase, cp)
        call c_f_pointer(cp, sp, [2 * n])
        cp = transfer(rbase, cp)
        call c_f_pointer(cp, rp, [2 * n])
        rp = garbage
        do k = 1, n
            call put(sp, MPI_DOUBLE_PRECISION, k, val(k, me, cases))
            call put(wantw, MPI_DOUBLE_PRECISION, k, reduced(k, cases, MPI_SUM, np))
        end do
        call MPI_IALLREDUCE(sp(1), rp(1), n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, req, ierr)
        call note(ierr, 'MPI_IALLREDUCE')
        if (ierr == MPI_SUCCESS) call complete(req)
        recvw = rp
        call MPI_FREE_MEM(sp(1), ierr)
        call note(ierr, 'MPI_FREE_MEM')
        call MPI_FREE_MEM(rp(1), ierr)
        call note(ierr, 'MPI_FREE_MEM')
        call finish('iallreduce double sum n=4097 alloc_mem', recvw, wantw)
    end subroutine case_alloc_mem

    ! ---- point-to-point (selection 'p2p', run with DEPUTY_MPI_P2P=1) ----

    ! Word i of the message rank r sends in case number `salt`.
    integer function pval(i, r, salt)
        integer, intent(in) :: i, r, salt
        pval = r * 1000003 + i * 31 + salt * 7
    end function pval

    ! This rank sent a message of n INTEGERs on a communicator of the world's
    ! ranks (whose messages the agent carries with the library): the run
    ! checks the agent's count against these.
    subroutine sent(n)
        integer, intent(in) :: n
        p2p_messages = p2p_messages + 1
        p2p_bytes = p2p_bytes + 4_8 * n
    end subroutine sent

    ! A receive's (or probe's) status: its source, tag and INTEGER count.
    subroutine check_message(status, from, tag, n, what)
        integer, intent(in) :: status(MPI_STATUS_SIZE), from, tag, n
        character(len=*), intent(in) :: what
        integer :: count, ierr
        count = -1
        call MPI_GET_COUNT(status, MPI_INTEGER, count, ierr)
        if (status(MPI_SOURCE) /= from .or. status(MPI_TAG) /= tag .or. count /= n) then
            case_ok = .false.
            write (*, '("rank ",i0,": ",a,": status source ",i0," tag ",i0," count ",i0)') &
                world_rank, what, status(MPI_SOURCE), status(MPI_TAG), count
        end if
    end subroutine check_message

    ! Completes every request of `reqs`, each one's status in its column of
    ! `statuses`, by `method`: 0 MPI_WAITALL, 1 MPI_WAIT each, 2 MPI_TESTALL,
    ! 3 MPI_WAITANY, 4 MPI_TESTSOME, 5 MPI_TESTANY, 6 MPI_WAITSOME (the last
    ! four until nothing is active). Each must be returned exactly once.
    ! (MPICH 4.0.2's MPI_WAITANY and MPI_TESTANY return MPI_UNDEFINED + 1
    ! when nothing is active: see complete_some.)
    subroutine complete_all(reqs, statuses, method)
        integer, intent(inout) :: reqs(:)
        integer, intent(out) :: statuses(MPI_STATUS_SIZE, size(reqs))
        integer, intent(in) :: method
        integer :: n, k, j, idx, outcount, ierr
        integer :: indices(size(reqs)), got(MPI_STATUS_SIZE, size(reqs))
        logical :: flag, seen(size(reqs))
        n = size(reqs)
        seen = .false.
        statuses = -1
        select case (method)
        case (0)
            call MPI_WAITALL(n, reqs, statuses, ierr)
            call note(ierr, 'MPI_WAITALL')
            seen = .true.
        case (1)
            do k = 1, n
                call MPI_WAIT(reqs(k), statuses(:, k), ierr)
                call note(ierr, 'MPI_WAIT')
            end do
            seen = .true.
        case (2)
            flag = .false.
            do while (.not. flag)
                call MPI_TESTALL(n, reqs, flag, statuses, ierr)
                call note(ierr, 'MPI_TESTALL')
                if (ierr /= MPI_SUCCESS) exit
            end do
            seen = .true.
        case (3, 5)
            do
                if (method == 3) then
                    call MPI_WAITANY(n, reqs, idx, got(:, 1), ierr)
                    flag = .true.
                else
                    call MPI_TESTANY(n, reqs, idx, flag, got(:, 1), ierr)
                end if
                call note(ierr, 'MPI_WAITANY/MPI_TESTANY')
                if (ierr /= MPI_SUCCESS) exit
                if (.not. flag) cycle
                if (idx == MPI_UNDEFINED .or. idx == MPI_UNDEFINED + 1) exit
                call returned(idx, got(:, 1))
            end do
        case default
            do
                if (method == 6) then
                    call MPI_WAITSOME(n, reqs, outcount, indices, got, ierr)
                else
                    call MPI_TESTSOME(n, reqs, outcount, indices, got, ierr)
                end if
                call note(ierr, 'MPI_WAITSOME/MPI_TESTSOME')
                if (ierr /= MPI_SUCCESS .or. outcount == MPI_UNDEFINED) exit
                do j = 1, outcount
                    call returned(indices(j), got(:, j))
                end do
            end do
        end select
        if (.not. all(seen)) then
            case_ok = .false.
            write (*, '("rank ",i0,": method ",i0,": returned ",5(l1,1x))') world_rank, method, seen
        end if
    contains
        subroutine returned(i, status)
            integer, intent(in) :: i, status(MPI_STATUS_SIZE)
            if (i < 1 .or. i > n) then
                case_ok = .false.
                write (*, '("rank ",i0,": method ",i0,": index ",i0)') world_rank, method, i
            else
                if (seen(i)) then
                    case_ok = .false.
                    write (*, '("rank ",i0,": method ",i0,": request ",i0," returned twice")') &
                        world_rank, method, i
                end if
                seen(i) = .true.
                statuses(:, i) = status
            end if
        end subroutine returned
    end subroutine complete_all

    ! MPI_ISEND / MPI_IRECV of n INTEGERs around the ring, an MPI_IBARRIER
    ! in the same array, completed by `method` (complete_all). The word past
    ! the message must stay garbage.
    subroutine case_p2p_ring(n, method)
        integer, intent(in) :: n, method
        integer :: reqs(3), statuses(MPI_STATUS_SIZE, 3), ierr, i, left, right
        character(len=64) :: name
        call start_case()
        right = mod(world_rank + 1, world_size)
        left = mod(world_rank - 1 + world_size, world_size)
        call fresh(n, n + 1)
        do i = 1, n
            sendw(i) = pval(i, world_rank, cases)
            wantw(i) = pval(i, left, cases)
        end do
        call MPI_IRECV(recvw(1), n, MPI_INTEGER, left, 40, MPI_COMM_WORLD, reqs(1), ierr)
        call note(ierr, 'MPI_IRECV')
        call MPI_ISEND(sendw(1), n, MPI_INTEGER, right, 40, MPI_COMM_WORLD, reqs(2), ierr)
        call note(ierr, 'MPI_ISEND')
        call sent(n)
        call MPI_IBARRIER(MPI_COMM_WORLD, reqs(3), ierr)
        call note(ierr, 'MPI_IBARRIER')
        call complete_all(reqs, statuses, method)
        call check_message(statuses(:, 1), left, 40, n, 'ring receive')
        if (any(reqs /= MPI_REQUEST_NULL)) then
            case_ok = .false.
            write (*, '("rank ",i0,": ring: a request is not MPI_REQUEST_NULL")') world_rank
        end if
        write (name, '("p2p isend irecv n=",i0," method=",i0)') n, method
        call finish(trim(name), recvw(1:n + 1), wantw(1:n + 1))
    end subroutine case_p2p_ring

    ! Every rank but 0 sends rank 0 two messages with MPI_SEND (tags rank and
    ! 1000 + rank), which takes them with MPI_RECV from MPI_ANY_SOURCE with
    ! MPI_ANY_TAG and answers each sender's second with MPI_RSEND (its
    ! receive posted before it sent).
    subroutine case_p2p_any()
        integer :: status(MPI_STATUS_SIZE), v(2), m, answer, req, ierr
        call start_case()
        call fresh(2, 2 * max(world_size - 1, 1))
        if (world_rank == 0) then
            do m = 1, 2 * (world_size - 1)
                call MPI_RECV(v(1), 2, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &
                              status, ierr)
                call note(ierr, 'MPI_RECV')
                call check_message(status, v(1), v(2), 2, 'MPI_RECV any source')
                if (v(2) >= 1000) then
                    recvw(2 * v(1)) = v(2)
                    answer = 2 * v(1)
                    call MPI_RSEND(answer, 1, MPI_INTEGER, v(1), 7, MPI_COMM_WORLD, ierr)
                    call note(ierr, 'MPI_RSEND')
                    call sent(1)
                else
                    recvw(2 * v(1) - 1) = v(2)
                end if
            end do
            do m = 1, world_size - 1
                wantw(2 * m - 1) = m
                wantw(2 * m) = 1000 + m
            end do
            if (world_size == 1) recvw = wantw
            call finish('p2p send recv any_source any_tag rsend', recvw, wantw)
        else
            call MPI_IRECV(recvw(1), 1, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, req, ierr)
            call note(ierr, 'MPI_IRECV')
            v = [world_rank, world_rank]
            call MPI_SEND(v(1), 2, MPI_INTEGER, 0, world_rank, MPI_COMM_WORLD, ierr)
            call note(ierr, 'MPI_SEND')
            call sent(2)
            v(2) = 1000 + world_rank
            call MPI_SEND(v(1), 2, MPI_INTEGER, 0, 1000 + world_rank, MPI_COMM_WORLD, ierr)
            call note(ierr, 'MPI_SEND')
            call sent(2)
            call MPI_WAIT(req, status, ierr)
            call note(ierr, 'MPI_WAIT')
            call check_message(status, 0, 7, 1, 'the answer')
            wantw(1) = 2 * world_rank
            call finish('p2p send recv any_source any_tag rsend', recvw(1:1), wantw(1:1))
        end if
    end subroutine case_p2p_any

    ! MPI_SENDRECV and MPI_SENDRECV_REPLACE of n INTEGERs around the ring of
    ! `comm` (a duplicate of the world: deputy carries its messages too).
    subroutine case_p2p_sendrecv(n, comm)
        integer, intent(in) :: n, comm
        integer :: status(MPI_STATUS_SIZE), i, left, right, ierr
        call start_case()
        right = mod(world_rank + 1, world_size)
        left = mod(world_rank - 1 + world_size, world_size)
        call fresh(n, 2 * n)
        do i = 1, n
            sendw(i) = pval(i, world_rank, cases)
            wantw(i) = pval(i, left, cases)
            wantw(n + i) = pval(i, left, cases + 1)
            recvw(n + i) = pval(i, world_rank, cases + 1)
        end do
        call MPI_SENDRECV(sendw(1), n, MPI_INTEGER, right, 3, recvw(1), n, MPI_INTEGER, left, 3, &
                          comm, status, ierr)
        call note(ierr, 'MPI_SENDRECV')
        call check_message(status, left, 3, n, 'MPI_SENDRECV')
        call sent(n)
        call MPI_SENDRECV_REPLACE(recvw(n + 1), n, MPI_INTEGER, right, 4, left, 4, comm, status, &
                                  ierr)
        call note(ierr, 'MPI_SENDRECV_REPLACE')
        call check_message(status, left, 4, n, 'MPI_SENDRECV_REPLACE')
        call sent(n)
        call finish('p2p sendrecv sendrecv_replace', recvw, wantw)
    end subroutine case_p2p_sendrecv

    ! Each rank sends its right neighbour a message of a length only the
    ! sender knows; the receiver finds it with MPI_PROBE (even ranks) or
    ! MPI_IPROBE in a loop (odd), then receives exactly that many.
    subroutine case_p2p_probe()
        integer :: status(MPI_STATUS_SIZE), req, i, n, left, right, ierr
        logical :: flag
        call start_case()
        right = mod(world_rank + 1, world_size)
        left = mod(world_rank - 1 + world_size, world_size)
        n = 1000 + 37 * world_rank
        call fresh(n, 1000 + 37 * left)
        do i = 1, n
            sendw(i) = pval(i, world_rank, cases)
        end do
        do i = 1, size(wantw)
            wantw(i) = pval(i, left, cases)
        end do
        call MPI_ISEND(sendw(1), n, MPI_INTEGER, right, 5, MPI_COMM_WORLD, req, ierr)
        call note(ierr, 'MPI_ISEND')
        call sent(n)
        if (mod(world_rank, 2) == 1) then
            flag = .false.
            do while (.not. flag)
                call MPI_IPROBE(left, MPI_ANY_TAG, MPI_COMM_WORLD, flag, status, ierr)
                call note(ierr, 'MPI_IPROBE')
                if (ierr /= MPI_SUCCESS) exit
            end do
        else
            call MPI_PROBE(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, status, ierr)
            call note(ierr, 'MPI_PROBE')
        end if
        call check_message(status, left, 5, size(recvw), 'probe')
        call MPI_RECV(recvw(1), size(recvw), MPI_INTEGER, status(MPI_SOURCE), status(MPI_TAG), &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
        call note(ierr, 'MPI_RECV')
        call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        call note(ierr, 'MPI_WAIT')
        call finish('p2p probe iprobe recv', recvw, wantw)
    end subroutine case_p2p_probe

    ! Synchronous and ready sends around the ring: MPI_ISSEND waited after
    ! the receive, MPI_SSEND with the receive posted first, MPI_IRSEND once
    ! every rank posted its receive (a barrier between).
    subroutine case_p2p_sync()
        integer :: reqs(2), left, right, ierr
        call start_case()
        right = mod(world_rank + 1, world_size)
        left = mod(world_rank - 1 + world_size, world_size)
        call fresh(1, 3)
        sendw(1) = 100 + world_rank
        wantw = 100 + left
        call MPI_ISSEND(sendw(1), 1, MPI_INTEGER, right, 21, MPI_COMM_WORLD, reqs(1), ierr)
        call note(ierr, 'MPI_ISSEND')
        call sent(1)
        call MPI_RECV(recvw(1), 1, MPI_INTEGER, left, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
        call note(ierr, 'MPI_RECV')
        call MPI_WAIT(reqs(1), MPI_STATUS_IGNORE, ierr)
        call MPI_IRECV(recvw(2), 1, MPI_INTEGER, left, 22, MPI_COMM_WORLD, reqs(1), ierr)
        call MPI_SSEND(sendw(1), 1, MPI_INTEGER, right, 22, MPI_COMM_WORLD, ierr)
        call note(ierr, 'MPI_SSEND')
        call sent(1)
        call MPI_WAIT(reqs(1), MPI_STATUS_IGNORE, ierr)
        call MPI_IRECV(recvw(3), 1, MPI_INTEGER, left, 23, MPI_COMM_WORLD, reqs(1), ierr)
        call MPI_BARRIER(MPI_COMM_WORLD, ierr)
        call MPI_IRSEND(sendw(1), 1, MPI_INTEGER, right, 23, MPI_COMM_WORLD, reqs(2), ierr)
        call note(ierr, 'MPI_IRSEND')
        call sent(1)
        call MPI_WAITALL(2, reqs, MPI_STATUSES_IGNORE, ierr)
        call note(ierr, 'MPI_WAITALL')
        call finish('p2p issend ssend irsend', recvw, wantw)
    end subroutine case_p2p_sync

    ! Persistent requests around the ring: a receive (MPI_RECV_INIT) and a
    ! send of n INTEGERs (`kind` 0 MPI_SEND_INIT, 1 MPI_SSEND_INIT, 2
    ! MPI_RSEND_INIT), with a persistent pair of MPI's own (a message to
    ! itself on MPI_COMM_SELF, which MPI carries) and an MPI_IBARRIER,
    ! started `rounds` times by MPI_STARTALL (a ready send with MPI_START once
    ! every rank started its receive), the send buffer changed each time, and
    ! completed by the methods of complete_all in turn. The requests stay the
    ! same handles; an inactive one tests complete with an empty status;
    ! MPI_REQUEST_FREE makes them MPI_REQUEST_NULL. Rank r's rounds land in
    ! words (round - 1) * n + 1.. of the result.
    subroutine case_p2p_persistent(n, kind, rounds)
        integer, intent(in) :: n, kind, rounds
        integer :: reqs(5), saved(4), statuses(MPI_STATUS_SIZE, 5), status(MPI_STATUS_SIZE)
        integer :: some(3), i, round, left, right, ierr, first
        logical :: flag
        character(len=64) :: name
        call start_case()
        first = cases
        right = mod(world_rank + 1, world_size)
        left = mod(world_rank - 1 + world_size, world_size)
        call fresh(n, n * rounds)
        if (allocated(ring_in)) deallocate (ring_in)
        allocate (ring_in(n + 1))
        call MPI_RECV_INIT(ring_in(1), n, MPI_INTEGER, left, 50 + kind, MPI_COMM_WORLD, reqs(1), &
                           ierr)
        call note(ierr, 'MPI_RECV_INIT')
        select case (kind)
        case (0)
            call MPI_SEND_INIT(sendw(1), n, MPI_INTEGER, right, 50, MPI_COMM_WORLD, reqs(2), ierr)
        case (1)
            call MPI_SSEND_INIT(sendw(1), n, MPI_INTEGER, right, 51, MPI_COMM_WORLD, reqs(2), ierr)
        case default
            call MPI_RSEND_INIT(sendw(1), n, MPI_INTEGER, right, 52, MPI_COMM_WORLD, reqs(2), ierr)
        end select
        call note(ierr, 'MPI_*SEND_INIT')
        call MPI_RECV_INIT(self_in, 1, MPI_INTEGER, 0, 31, MPI_COMM_SELF, reqs(3), ierr)
        call MPI_SEND_INIT(self_out, 1, MPI_INTEGER, 0, 31, MPI_COMM_SELF, reqs(4), ierr)
        saved = reqs(1:4)
        call check_inactive(reqs(1), 'a receive never started')
        do round = 1, rounds
            do i = 1, n
                sendw(i) = pval(i, world_rank, first + round)
                wantw((round - 1) * n + i) = pval(i, left, first + round)
            end do
            ring_in(1:n + 1) = garbage
            self_out = 1000 * world_rank + round
            self_in = -1
            if (kind == 2) then
                some = [reqs(1), reqs(3), reqs(4)]
                call MPI_STARTALL(3, some, ierr)
                call note(ierr, 'MPI_STARTALL')
                call MPI_BARRIER(MPI_COMM_WORLD, ierr)
                call MPI_START(reqs(2), ierr)
                call note(ierr, 'MPI_START')
            else
                call MPI_STARTALL(4, reqs, ierr)
                call note(ierr, 'MPI_STARTALL')
            end if
            call sent(n)
            call MPI_IBARRIER(MPI_COMM_WORLD, reqs(5), ierr)
            call complete_all(reqs, statuses, mod(round - 1 + 3 * kind, 7))
            if (any(reqs(1:4) /= saved) .or. reqs(5) /= MPI_REQUEST_NULL) then
                case_ok = .false.
                write (*, '("rank ",i0,": persistent round ",i0,": requests ",5(i0,1x))') &
                    world_rank, round, reqs
            end if
            call check_message(statuses(:, 1), left, 50 + kind, n, 'persistent receive')
            call check_message(statuses(:, 3), 0, 31, 1, 'MPI''s own persistent receive')
            if (self_in /= self_out .or. ring_in(n + 1) /= garbage) then
                case_ok = .false.
                write (*, '("rank ",i0,": persistent round ",i0,": self ",i0,", past ",i0)') &
                    world_rank, round, self_in, ring_in(n + 1)
            end if
            recvw((round - 1) * n + 1:round * n) = ring_in(1:n)
            call check_inactive(reqs(1), 'a completed receive')
        end do
        ! Once more by MPI_START, polled with MPI_REQUEST_GET_STATUS (which
        ! frees nothing), then waited for.
        if (kind == 0) then
            do i = 1, n
                sendw(i) = pval(i, world_rank, first + rounds)
            end do
            call MPI_START(reqs(1), ierr)
            call MPI_START(reqs(2), ierr)
            call sent(n)
            flag = .false.
            do while (.not. flag)
                call MPI_REQUEST_GET_STATUS(reqs(1), flag, status, ierr)
                call note(ierr, 'MPI_REQUEST_GET_STATUS')
                if (ierr /= MPI_SUCCESS) exit
            end do
            call check_message(status, left, 50, n, 'MPI_REQUEST_GET_STATUS')
            call MPI_WAIT(reqs(1), status, ierr)
            call check_message(status, left, 50, n, 'MPI_WAIT after MPI_REQUEST_GET_STATUS')
            call MPI_WAIT(reqs(2), MPI_STATUS_IGNORE, ierr)
            if (any(ring_in(1:n) /= recvw((rounds - 1) * n + 1:rounds * n)) .or. &
                any(reqs(1:2) /= saved(1:2))) then
                case_ok = .false.
                write (*, '("rank ",i0,": persistent: MPI_START round")') world_rank
            end if
        end if
        do i = 1, 4
            call MPI_REQUEST_FREE(reqs(i), ierr)
            call note(ierr, 'MPI_REQUEST_FREE')
        end do
        if (any(reqs(1:4) /= MPI_REQUEST_NULL)) then
            case_ok = .false.
            write (*, '("rank ",i0,": MPI_REQUEST_FREE left ",4(i0,1x))') world_rank, reqs(1:4)
        end if
        write (name, '("p2p persistent kind=",i0," n=",i0," rounds=",i0)') kind, n, rounds
        call finish(trim(name), recvw, wantw)
    end subroutine case_p2p_persistent

    ! An inactive persistent request: MPI_TEST says complete at once, with
    ! an empty status (source MPI_ANY_SOURCE, tag MPI_ANY_TAG, no element),
    ! and leaves the request as it was.
    subroutine check_inactive(req, what)
        integer, intent(inout) :: req
        character(len=*), intent(in) :: what
        integer :: status(MPI_STATUS_SIZE), before, ierr
        logical :: flag
        before = req
        flag = .false.
        call MPI_TEST(req, flag, status, ierr)
        call note(ierr, 'MPI_TEST')
        if (.not. flag .or. req /= before .or. req == MPI_REQUEST_NULL) then
            case_ok = .false.
            write (*, '("rank ",i0,": inactive, ",a,": flag ",l1,", request ",i0)') world_rank, &
                what, flag, req
        end if
        call check_message(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, 'inactive, '//what)
    end subroutine check_inactive

    ! The point-to-point cases; then the messages and bytes every rank sent,
    ! summed, on rank 0's `p2p` line.
    subroutine p2p_cases(dup)
        integer, intent(in) :: dup
        integer :: method, ci, ierr
        integer(8) :: mine(2), total(2)
        integer, parameter :: sizes(4) = [0, 1, 1025, 30000]
        do ci = 1, size(sizes)
            do method = 0, 6
                if (method == mod(ci, 7) .or. ci == 3) call case_p2p_ring(sizes(ci), method)
            end do
        end do
        call case_p2p_any()
        call case_p2p_sendrecv(3000, dup)
        call case_p2p_probe()
        call case_p2p_sync()
        call case_p2p_persistent(1025, 0, 7)
        call case_p2p_persistent(30000, 1, 3)
        call case_p2p_persistent(7, 2, 3)
        mine = [p2p_messages, p2p_bytes]
        call MPI_REDUCE(mine, total, 2, MPI_INTEGER8, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
        if (world_rank == 0) then
            write (*, '("offload_check: p2p ",i0," messages ",i0," bytes")') total(1), total(2)
        end if
    end subroutine p2p_cases
end module check_state

program offload_check
    use mpi
    use check_state
    implicit none
    integer :: ierr, provided, ti, oi, ci, dt, op, n, reversed, dup
    integer :: types(3), ops(2)
    logical :: blocking, inplace
    integer :: b, ip
    character(len=32) :: mode, which

    mode = 'init'
    if (command_argument_count() >= 1) call get_command_argument(1, mode)
    ! 'nonblocking': only the cases that complete a request (the others
    ! wait inside the library's blocking calls).
    which = 'all'
    if (command_argument_count() >= 2) call get_command_argument(2, which)
    if (which /= 'all' .and. which /= 'nonblocking' .and. which /= 'p2p') then
        write (*, '("offload_check: unknown selection ''",a,"'' (all, nonblocking or p2p)")') &
            trim(which)
        error stop 2
    end if
    if (mode == 'init_thread') then
        call MPI_INIT_THREAD(MPI_THREAD_FUNNELED, provided, ierr)
        if (ierr == MPI_SUCCESS .and. (provided < MPI_THREAD_SINGLE .or. &
                                       provided > MPI_THREAD_MULTIPLE)) ierr = -1
    else if (mode == 'init') then
        call MPI_INIT(ierr)
    else
        write (*, '("offload_check: unknown mode ''",a,"'' (init or init_thread)")') trim(mode)
        error stop 2
    end if
    if (ierr /= MPI_SUCCESS) then
        write (*, '("offload_check: ",a," returned ierror ",i0)') trim(mode), ierr
        error stop 1
    end if
    call MPI_COMM_RANK(MPI_COMM_WORLD, world_rank, ierr)
    call MPI_COMM_SIZE(MPI_COMM_WORLD, world_size, ierr)
    ! A communicator whose ranks run backwards, and a duplicate of the world:
    ! the library must map each communicator's ranks, and both are freed
    ! through MPI_COMM_FREE at the end.
    call MPI_COMM_SPLIT(MPI_COMM_WORLD, 0, world_size - world_rank, reversed, ierr)
    call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)

    if (which == 'p2p') then
        call p2p_cases(dup)
    else
        types = [MPI_INTEGER, MPI_REAL, MPI_DOUBLE_PRECISION]
        ops = [MPI_SUM, MPI_MAX]
        do b = 0, merge(0, 1, which == 'nonblocking')
            blocking = b == 1
            do ti = 1, 3
                dt = types(ti)
                do ci = 1, size(counts)
                    n = counts(ci)
                    do ip = 0, 1
                        inplace = ip == 1
                        do oi = 1, 2
                            op = ops(oi)
                            call case_allreduce(blocking, dt, op, n, inplace, MPI_COMM_WORLD)
                            call case_reduce_scatter_block(blocking, dt, op, n, inplace, dup)
                            if (.not. inplace) &
                                call case_reduce_scatter(blocking, dt, op, n, reversed)
                        end do
                        ! roots first and last, on the world and on the reversed ranks
                        ! (not in place at the last root with 4097 elements: MPICH 4.0's
                        ! own MPI_Reduce crashes there, without deputy)
                        call case_reduce(blocking, dt, ops(ip + 1), n, inplace, &
                                         merge(0, world_size - 1, ti /= 2 .or. &
                                               (inplace .and. n > 13)), MPI_COMM_WORLD)
                        call case_scan(blocking, .false., dt, ops(2 - ip), n, inplace, dup)
                        call case_scan(blocking, .true., dt, ops(ip + 1), n, inplace, reversed)
                        call case_gather(blocking, dt, n, inplace, merge(0, world_size - 1, &
                                         ci /= 2), MPI_COMM_WORLD)
                        call case_scatter(blocking, dt, n, inplace, merge(world_size - 1, 0, &
                                          ci /= 3), reversed)
                        call case_vgather(blocking, 0, dt, n, inplace, 0, reversed)
                        call case_vgather(blocking, 1, dt, n, inplace, merge(world_size - 1, 0, &
                                          ci /= 3), MPI_COMM_WORLD)
                        call case_vgather(blocking, 2, dt, n, inplace, merge(0, world_size - 1, &
                                          ci /= 4), dup)
                        call case_allgather(blocking, dt, n, inplace, MPI_COMM_WORLD)
                        call case_alltoall(blocking, dt, n, inplace, reversed)
                        call case_alltoallv(blocking, dt, n, inplace, reversed)
                    end do
                    call case_bcast(blocking, dt, n, 0, MPI_COMM_WORLD)
                    call case_bcast(blocking, dt, n, world_size - 1, reversed)
                end do
            end do
            do ci = 1, size(counts)
                call case_loc(blocking, mod(ci, 2) == 0, .true., counts(ci), MPI_COMM_WORLD)
                call case_loc(blocking, mod(ci, 2) == 1, .false., counts(ci), reversed)
            end do
            call case_barrier(blocking, MPI_COMM_WORLD)
            call case_barrier(blocking, reversed)
            call case_barrier(blocking, dup)
        end do
        call case_bottom(MPI_COMM_WORLD)
        call case_alloc_mem(dup)
        call case_waitall_many(MPI_COMM_WORLD)
    end if

    call start_case()
    call MPI_COMM_FREE(reversed, ierr)
    call note(ierr, 'MPI_COMM_FREE')
    call MPI_COMM_FREE(dup, ierr)
    call note(ierr, 'MPI_COMM_FREE')
    if (reversed /= MPI_COMM_NULL .or. dup /= MPI_COMM_NULL) then
        case_ok = .false.
        write (*, '("rank ",i0,": MPI_COMM_FREE left a handle that is not MPI_COMM_NULL")') &
            world_rank
    end if
    call finish('comm_free', recvw(1:0), wantw(1:0))

    if (world_rank == 0) then
        write (*, '("offload_check: ",i0," ranks, ",i0," cases, ",i0," failed")') world_size, &
            cases, failures
    end if
    call MPI_FINALIZE(ierr)
    if (ierr /= MPI_SUCCESS) error stop 1
    if (failures > 0) error stop 1
end program offload_check
