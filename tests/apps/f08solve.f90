! f08solve: a Jacobi solver on the mpi_f08 bindings, a checkpoint test
! subject for `use mpi_f08` (issue 16): a Cartesian communicator,
! non-blocking halo exchanges with a derived datatype, a persistent
! request, a user reduction operation, and routines on the `use mpi`
! bindings mixed in (handles passed as their INTEGER, comm%MPI_VAL), one
! of them making datatypes with MPI-1's MPI_TYPE_HVECTOR and
! MPI_TYPE_HINDEXED.
!
!   f08solve [N [ITERS]]
!
! The ranks form a periodic 2-D grid (MPI_Dims_create, MPI_Cart_create,
! reordering allowed). Each owns an N x N block with one halo cell each
! side; every step it sends its edges to its four neighbours (rows of the
! block are strided in Fortran: an MPI_Type_vector), relaxes the block,
! passes a token east with a persistent send, and every 8 steps sums the
! change over the grid with a user operation and over its row (the
! communicator of MPI_Cart_sub, duplicated by MPI_Comm_idup) through `use mpi`, and broadcasts picks
! of a work array with the MPI-1 datatypes. Most calls leave the
! optional IERROR out, as f08 programs do.
!
! Output (rank 0, stdout, at the end): one line with a checksum.
module f08solve_mpi1
  implicit none
contains
  ! The `use mpi` part of the program: an integer handle from f08's.
  subroutine row_sum(comm, x, total)
    use mpi
    integer, intent(in) :: comm
    double precision, intent(in) :: x
    double precision, intent(out) :: total
    integer :: ierr

    call mpi_allreduce(x, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
  end subroutine row_sum

  ! MPI-1's constructors, with INTEGER stride and displacements (bytes):
  ! every other double, four of them; one double, then two from the fourth.
  subroutine mpi1_types(hv, hi)
    use mpi
    integer, intent(out) :: hv, hi
    integer :: ierr

    call mpi_type_hvector(4, 1, 16, MPI_DOUBLE_PRECISION, hv, ierr)
    call mpi_type_commit(hv, ierr)
    call mpi_type_hindexed(2, [1, 2], [0, 24], MPI_DOUBLE_PRECISION, hi, ierr)
    call mpi_type_commit(hi, ierr)
  end subroutine mpi1_types
end module f08solve_mpi1

module f08solve_op
  use mpi_f08
  implicit none
contains
  ! MPI_User_function of mpi_f08: a sum, elementwise.
  subroutine sumsq(invec, inoutvec, len, datatype)
    use, intrinsic :: iso_c_binding, only : c_ptr, c_f_pointer
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    double precision, pointer :: a(:), b(:)

    if (datatype /= MPI_DOUBLE_PRECISION) stop 'sumsq: not doubles'
    call c_f_pointer(invec, a, [len])
    call c_f_pointer(inoutvec, b, [len])
    b = a + b
  end subroutine sumsq
end module f08solve_op

program f08solve
  use mpi_f08
  use f08solve_mpi1
  use f08solve_op
  implicit none
  integer :: n, iters, rank, size, it, i, j, north, south, west, east, ierr
  integer :: dims(2), coords(2), cnt
  logical :: periods(2), keep(2)
  type(MPI_Comm) :: grid, row, rowsub
  type(MPI_Datatype) :: edge_row, hv, hi
  double precision :: work(8)
  type(MPI_Request) :: reqs(8), ping
  type(MPI_Status) :: statuses(8)
  type(MPI_Op) :: op
  character(len=32) :: arg
  double precision, allocatable :: u(:,:), v(:,:)
  double precision :: local(2), global(2), check, rsum, tok_out, tok_in

  n = 96
  iters = 3000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) iters
  end if

  call MPI_Init()
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  dims = 0
  call MPI_Dims_create(size, 2, dims)
  periods = .true.
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .true., grid, ierr)
  call MPI_Comm_rank(grid, rank)
  call MPI_Cart_coords(grid, rank, 2, coords)
  call MPI_Cart_shift(grid, 0, 1, north, south)
  call MPI_Cart_shift(grid, 1, 1, west, east)
  keep = [.false., .true.]
  ! The row communicator: a duplicate (MPI_Comm_idup) of MPI_Cart_sub's.
  call MPI_Cart_sub(grid, keep, rowsub)
  call MPI_Comm_idup(rowsub, row, ping)
  call MPI_Wait(ping, MPI_STATUS_IGNORE)
  call MPI_Comm_free(rowsub)

  ! A row of u(0:n+1, 0:n+1) without its halo ends: n elements n+2 apart.
  call MPI_Type_vector(n, 1, n + 2, MPI_DOUBLE_PRECISION, edge_row)
  call MPI_Type_commit(edge_row)
  call mpi1_types(hv%MPI_VAL, hi%MPI_VAL)
  call MPI_Op_create(sumsq, .true., op)
  ! A persistent send of a token around the row, started every step.
  call MPI_Send_init(tok_out, 1, MPI_DOUBLE_PRECISION, east, 9, grid, ping)

  allocate(u(0:n + 1, 0:n + 1), v(0:n + 1, 0:n + 1))
  do j = 0, n + 1
    do i = 0, n + 1
      u(i, j) = dble(mod(rank * 7919 + i * 31 + j * 17, 1009)) / 1009.0d0
    end do
  end do
  v = u

  check = 0
  do it = 1, iters
    ! Columns are contiguous, rows strided: north/south get rows.
    call MPI_Irecv(u(0, 1), 1, edge_row, north, 1, grid, reqs(1))
    call MPI_Irecv(u(n + 1, 1), 1, edge_row, south, 2, grid, reqs(2))
    call MPI_Irecv(u(1, 0), n, MPI_DOUBLE_PRECISION, west, 3, grid, reqs(3))
    call MPI_Irecv(u(1, n + 1), n, MPI_DOUBLE_PRECISION, east, 4, grid, reqs(4))
    call MPI_Isend(u(n, 1), 1, edge_row, south, 1, grid, reqs(5))
    call MPI_Isend(u(1, 1), 1, edge_row, north, 2, grid, reqs(6))
    call MPI_Isend(u(1, n), n, MPI_DOUBLE_PRECISION, east, 3, grid, reqs(7))
    call MPI_Isend(u(1, 1), n, MPI_DOUBLE_PRECISION, west, 4, grid, reqs(8))
    call MPI_Waitall(8, reqs, statuses)
    call MPI_Get_count(statuses(3), MPI_DOUBLE_PRECISION, cnt)
    if (cnt /= n .or. statuses(3)%MPI_SOURCE /= west) then
      print *, 'f08solve: bad status', cnt, statuses(3)%MPI_SOURCE
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if

    do j = 1, n
      do i = 1, n
        v(i, j) = 0.25d0 * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1))
      end do
    end do
    local(1) = sum((v(1:n, 1:n) - u(1:n, 1:n))**2)
    local(2) = sum(v(1:n, 1:n))
    u(1:n, 1:n) = v(1:n, 1:n) + 1.0d-3 * dble(mod(it + rank, 7))

    tok_out = dble(it + rank)
    call MPI_Start(ping)
    call MPI_Recv(tok_in, 1, MPI_DOUBLE_PRECISION, west, 9, grid, MPI_STATUS_IGNORE)
    call MPI_Wait(ping, MPI_STATUS_IGNORE)
    check = check + 1.0d-6 * tok_in

    if (mod(it, 8) == 0) then
      call MPI_Allreduce(local, global, 2, MPI_DOUBLE_PRECISION, op, grid)
      call row_sum(row%MPI_VAL, local(2), rsum)
      check = check + global(1) + 1.0d-9 * global(2) + 1.0d-12 * rsum
      ! The root's picks of work over everybody's.
      work = [(dble(rank * 8 + i) + u(i, i), i = 1, 8)]
      call MPI_Bcast(work, 1, hv, mod(it / 8, size), grid)
      call MPI_Bcast(work, 1, hi, mod(it / 8 + 1, size), grid)
      check = check + 1.0d-6 * sum(work)
    end if
  end do

  call MPI_Request_free(ping)
  call MPI_Op_free(op)
  call MPI_Type_free(edge_row)
  call MPI_Type_free(hv)
  call MPI_Type_free(hi)
  call MPI_Allreduce(MPI_IN_PLACE, check, 1, MPI_DOUBLE_PRECISION, MPI_SUM, grid)
  if (rank == 0) then
    write(*, '(a, i0, a, i0, a, i0, a, i0, a, i0, a, es24.16)') 'f08solve: n=', n, &
      ' iters=', iters, ' ranks=', size, ' grid=', dims(1), 'x', dims(2), ' check=', check
  end if
  call MPI_Comm_free(row)
  call MPI_Comm_free(grid)
  call MPI_Finalize()
end program f08solve
