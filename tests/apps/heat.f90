! heat_f: the Fortran 90 twin of heat.c, a checkpoint/restart test subject.
!
! An ordinary MPI program (use mpi) that knows nothing of stasis: a 2-D
! Jacobi solver on an N x N grid split in rows, allocatable arrays, halos
! swapped with MPI_SENDRECV and a residual MPI_ALLREDUCE on MPI_COMM_WORLD
! every sweep. Module variables hold part of the state so
! a restart must restore the Fortran data segment as well as the heap.
!
!   heat_f [N [ITERS [EVERY]]]
!
! Output (rank 0, stdout): with EVERY > 0, a progress line every EVERY
! sweeps (through libgfortran's buffered unit 6: a restart must neither
! lose nor repeat what was written before its checkpoint),
!   heat_f: sweep <I> residual=<17 significant digits>
! and at the end
!   heat_f: n=<N> iters=<ITERS> checksum=<16 hex> residual=<17 significant digits>
module heat_state
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: i8 = selected_int_kind(18)
  integer, parameter :: nhist = 64
  real(dp), save :: history(0:nhist - 1) = 0.0_dp
  integer, save :: sweeps_done = 0
end module heat_state

program heat_f
  use mpi
  use heat_state
  implicit none

  integer :: n, iters, every, rank, nranks, ierr, rows, row0, up, down
  integer :: it, i, j, g, r
  real(dp), allocatable :: u(:, :), v(:, :), src(:, :), all(:, :)
  integer, allocatable :: counts(:), displs(:)
  real(dp) :: local, residual, x, d
  integer(i8) :: h1, h2
  character(len=32) :: arg

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)

  n = 512
  iters = 1000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  every = 0
  if (command_argument_count() >= 3) then
    call get_command_argument(3, arg)
    read (arg, *) every
  end if
  if (n < nranks .or. iters < 1 .or. every < 0) then
    if (rank == 0) write (0, '(a)') 'heat_f: usage: heat_f [N [ITERS [EVERY]]], N >= ranks'
    call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
  end if

  call partition(n, rank, nranks, row0, rows)
  up = rank - 1
  if (rank == 0) up = MPI_PROC_NULL
  down = rank + 1
  if (rank == nranks - 1) down = MPI_PROC_NULL

  ! Column index first (Fortran order): u(:, i) is local row i, rows 0 and
  ! rows+1 are halos.
  allocate (u(0:n - 1, 0:rows + 1), v(0:n - 1, 0:rows + 1))
  u = 0.0_dp
  v = 0.0_dp
  u(0, :) = 1.0_dp   ! hot left border
  v(0, :) = 1.0_dp
  allocate (src(0:n - 1, 1:rows))
  do i = 1, rows
    do j = 0, n - 1
      src(j, i) = source(n, row0 + i - 1, j)
    end do
  end do

  do it = 0, iters - 1
    call MPI_SENDRECV(u(:, 1), n, MPI_DOUBLE_PRECISION, up, 0, &
                      u(:, rows + 1), n, MPI_DOUBLE_PRECISION, down, 0, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_SENDRECV(u(:, rows), n, MPI_DOUBLE_PRECISION, down, 1, &
                      u(:, 0), n, MPI_DOUBLE_PRECISION, up, 1, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    local = 0.0_dp
    do i = 1, rows
      g = row0 + i - 1
      if (g == 0 .or. g == n - 1) cycle
      do j = 1, n - 2
        x = 0.25_dp*(u(j, i - 1) + u(j, i + 1) + u(j - 1, i) + u(j + 1, i)) &
            + 0.01_dp*src(j, i)
        d = x - u(j, i)
        v(j, i) = x
        local = local + d*d
      end do
    end do
    call swap(u, v)
    call MPI_ALLREDUCE(local, residual, 1, MPI_DOUBLE_PRECISION, MPI_SUM, &
                       MPI_COMM_WORLD, ierr)
    history(mod(it, nhist)) = residual
    sweeps_done = sweeps_done + 1
    if (every > 0 .and. rank == 0) then
      if (mod(sweeps_done, every) == 0) &
        write (*, '(a,i0,a,es24.17e3)') 'heat_f: sweep ', sweeps_done, ' residual=', residual
    end if
  end do

  ! Gather the interior rows on rank 0 in global order and hash them.
  allocate (counts(0:nranks - 1), displs(0:nranks - 1))
  do r = 0, nranks - 1
    call partition(n, r, nranks, g, i)
    counts(r) = i*n
    displs(r) = g*n
  end do
  if (rank == 0) then
    allocate (all(0:n - 1, 0:n - 1))
  else
    allocate (all(1, 1))
  end if
  call MPI_GATHERV(u(:, 1:rows), rows*n, MPI_DOUBLE_PRECISION, all, counts, displs, &
                   MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)

  if (rank == 0) then
    h1 = 1_i8
    h2 = 7_i8
    do i = 0, n - 1
      do j = 0, n - 1
        call mix(h1, h2, all(j, i))
      end do
    end do
    do i = 0, nhist - 1
      call mix(h1, h2, history(i))
    end do
    call mix(h1, h2, real(sweeps_done, dp))
    write (*, '(a,i0,a,i0,a,z8.8,z8.8,a,es24.17e3)') 'heat_f: n=', n, ' iters=', iters, &
      ' checksum=', h1, h2, ' residual=', residual
  end if

  deallocate (u, v, src, all, counts, displs)
  call MPI_FINALIZE(ierr)

contains

  subroutine partition(n, rank, nranks, row0, rows)
    integer, intent(in) :: n, rank, nranks
    integer, intent(out) :: row0, rows
    integer :: base, extra
    base = n/nranks
    extra = mod(n, nranks)
    rows = base
    if (rank < extra) rows = rows + 1
    row0 = rank*base + min(rank, extra)
  end subroutine partition

  ! Source term of global cell (g, j): the hot spots of heat.c, in integers
  ! so it is exact.
  real(dp) function source(n, g, j)
    integer, intent(in) :: n, g, j
    integer :: h
    h = mod(mod(g*7919, 1009) + mod(j*104729, 1009), 1009)
    source = 0.0_dp
    if ((g == n/3 .and. j > n/4 .and. j < n/2) .or. (j == 2*n/3 .and. g > n/2)) then
      source = 1.0_dp
    else if (h < 3) then
      source = 0.25_dp
    end if
  end function source

  subroutine swap(a, b)
    real(dp), allocatable, intent(inout) :: a(:, :), b(:, :)
    real(dp), allocatable :: t(:, :)
    call move_alloc(a, t)
    call move_alloc(b, a)
    call move_alloc(t, b)
  end subroutine swap

  ! Two polynomial hashes modulo the primes 2^31-1 and 2^31-19 over the
  ! 32-bit halves of x's bit pattern; every product stays below 2^62, so no
  ! integer overflow (undefined in Fortran) can occur.
  subroutine mix(h1, h2, x)
    integer(i8), intent(inout) :: h1, h2
    real(dp), intent(in) :: x
    integer(i8), parameter :: p1 = 2147483647_i8, p2 = 2147483629_i8
    integer(i8) :: bits, lo, hi
    bits = transfer(x, bits)
    lo = iand(bits, 4294967295_i8)
    hi = iand(ishft(bits, -32), 4294967295_i8)
    h1 = mod(mod(h1*1000003_i8, p1) + mod(lo, p1), p1)
    h1 = mod(mod(h1*1000003_i8, p1) + mod(hi, p1), p1)
    h2 = mod(mod(h2*999983_i8, p2) + mod(lo, p2), p2)
    h2 = mod(mod(h2*999983_i8, p2) + mod(hi, p2), p2)
  end subroutine mix
end program heat_f
