! fcallbacks: a Fortran (`use mpi`) solver whose MPI callbacks check the
! handles MPI gives them against the program's own (issue 16): a user
! reduction op on a derived datatype (pairs of doubles: the larger of the
! first, the sum of the second), a communicator attribute whose copy
! function adds one at every MPI_COMM_DUP and whose delete function counts
! frees, an error handler called through MPI_COMM_CALL_ERRHANDLER, and
! generalized requests (MPI_GREQUEST_START, one a step, completed the step
! after and waited for the step after that) whose query function gives
! their extra state (the step) as the status's element count.
! A callback given a handle the program does not hold (a datatype,
! communicator or keyval other than its own, or another extra state) stops
! the job with MPI_ABORT, naming it.
!
!   fcallbacks [N [ITERS]]
!
! Output (rank 0, stdout, at the end): one line with a checksum and how
! many times each callback ran.
module fcb
  use mpi
  implicit none
  integer :: pairtype, work, keyval
  integer :: dups = 0, deletes = 0, errors = 0, gfreed = 0
  ! Each generalized request's extra state: Open MPI passes the variable
  ! itself (by reference) to the request's functions.
  integer(kind=MPI_ADDRESS_KIND) :: gsteps(0:2)
contains
  subroutine fail(what)
    character(len=*), intent(in) :: what
    integer :: ierr

    write(0, '(a, a)') 'fcallbacks: a callback was given a wrong handle: ', what
    call mpi_abort(MPI_COMM_WORLD, 3, ierr)
  end subroutine fail

  subroutine pairop(invec, inoutvec, len, datatype)
    integer :: len, datatype, i
    double precision :: invec(2, len), inoutvec(2, len)

    if (datatype /= pairtype) call fail('the op''s datatype')
    do i = 1, len
      inoutvec(1, i) = max(invec(1, i), inoutvec(1, i))
      inoutvec(2, i) = invec(2, i) + inoutvec(2, i)
    end do
  end subroutine pairop

  subroutine copyfn(oldcomm, kv, extra, valin, valout, flag, ierr)
    integer :: oldcomm, kv, ierr
    integer(kind=MPI_ADDRESS_KIND) :: extra, valin, valout
    logical :: flag

    if (oldcomm /= work) call fail('the copy function''s communicator')
    if (kv /= keyval) call fail('the copy function''s keyval')
    if (extra /= 4242) call fail('the copy function''s extra state')
    valout = valin + 1
    flag = .true.
    dups = dups + 1
    ierr = MPI_SUCCESS
  end subroutine copyfn

  subroutine deletefn(comm, kv, val, extra, ierr)
    integer :: comm, kv, ierr
    integer(kind=MPI_ADDRESS_KIND) :: val, extra

    ! Not the communicator: Open MPI 4.1 gives a delete function run by
    ! MPI_COMM_FREE the handle 0, the freed one's INTEGER being gone.
    if (kv /= keyval) call fail('the delete function''s keyval')
    if (extra /= 4242) call fail('the delete function''s extra state')
    deletes = deletes + int(val)
    ierr = MPI_SUCCESS
  end subroutine deletefn

  subroutine handler(comm, code)
    integer :: comm, code

    if (comm /= work) call fail('the error handler''s communicator')
    errors = errors + code
  end subroutine handler

  subroutine gquery(extra, status, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra
    integer :: status(MPI_STATUS_SIZE), ierr

    call mpi_status_set_elements(status, MPI_INTEGER, int(extra), ierr)
    call mpi_status_set_cancelled(status, .false., ierr)
    ierr = MPI_SUCCESS
  end subroutine gquery

  subroutine gfree(extra, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra
    integer :: ierr

    if (extra < 1) call fail('the free function''s extra state')
    gfreed = gfreed + 1
    ierr = MPI_SUCCESS
  end subroutine gfree

  subroutine gcancel(extra, complete, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra
    logical :: complete
    integer :: ierr

    ierr = MPI_SUCCESS
  end subroutine gcancel

  ! Wait for the generalized request of step s.
  subroutine gwait(req, s)
    integer :: req, s, cnt, ierr
    integer :: status(MPI_STATUS_SIZE)

    call mpi_wait(req, status, ierr)
    call mpi_get_elements(status, MPI_INTEGER, cnt, ierr)
    if (cnt /= s .or. req /= MPI_REQUEST_NULL) call fail('a generalized request''s status')
  end subroutine gwait
end module fcb

program fcallbacks
  use mpi
  use fcb
  implicit none
  integer :: n, iters, rank, size, it, i, op, eh, dup, ierr, greq(0:2)
  integer(kind=MPI_ADDRESS_KIND) :: extra, val
  logical :: flag
  character(len=32) :: arg
  double precision, allocatable :: x(:, :), y(:, :)
  double precision :: check

  n = 64
  iters = 20000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) iters
  end if

  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, size, ierr)
  call mpi_comm_dup(MPI_COMM_WORLD, work, ierr)
  call mpi_type_contiguous(2, MPI_DOUBLE_PRECISION, pairtype, ierr)
  call mpi_type_commit(pairtype, ierr)
  call mpi_op_create(pairop, .true., op, ierr)
  extra = 4242
  call mpi_comm_create_keyval(copyfn, deletefn, keyval, extra, ierr)
  val = 1
  call mpi_comm_set_attr(work, keyval, val, ierr)
  call mpi_comm_create_errhandler(handler, eh, ierr)
  call mpi_comm_set_errhandler(work, eh, ierr)

  allocate(x(2, n), y(2, n))
  do i = 1, n
    x(1, i) = dble(mod(rank * 131 + i * 17, 97)) / 97.0d0
    x(2, i) = dble(mod(rank * 29 + i * 7, 89)) / 89.0d0
  end do
  check = 0
  do it = 1, iters
    do i = 1, n
      x(1, i) = mod(x(1, i) * 1.618033988d0 + 0.25d0, 1.0d0)
      x(2, i) = mod(x(2, i) * 2.718281828d0 + x(1, i), 1.0d0)
    end do
    gsteps(mod(it, 3)) = it
    call mpi_grequest_start(gquery, gfree, gcancel, gsteps(mod(it, 3)), greq(mod(it, 3)), ierr)
    if (it >= 2) call mpi_grequest_complete(greq(mod(it - 1, 3)), ierr)
    if (it >= 3) call gwait(greq(mod(it - 2, 3)), it - 2)
    call mpi_allreduce(x, y, n, pairtype, op, work, ierr)
    x(2, :) = y(2, :) / dble(size)
    check = check + sum(y(1, :)) * 1.0d-3
    if (mod(it, 64) == 0) then
      call mpi_comm_dup(work, dup, ierr)
      call mpi_comm_get_attr(dup, keyval, val, flag, ierr)
      if (.not. flag .or. val /= 2) call fail('(the attribute value of a dup)')
      call mpi_comm_free(dup, ierr)
      call mpi_comm_call_errhandler(work, 3, ierr)
    end if
  end do
  check = check + sum(x)
  call mpi_grequest_complete(greq(mod(iters, 3)), ierr)
  if (iters >= 2) call gwait(greq(mod(iters - 1, 3)), iters - 1)
  call gwait(greq(mod(iters, 3)), iters)
  if (gfreed /= iters) call fail('(generalized requests freed)')
  call mpi_comm_free(work, ierr)
  if (rank == 0) write(*, '(a, i0, a, es25.17e3, 3(a, i0))') 'fcallbacks: iters=', iters, &
      ' check=', check, ' dups=', dups, ' deletes=', deletes, ' errors=', errors
  call mpi_finalize(ierr)
end program fcallbacks
