! fsplit: a Fortran MPI program that splits its communicator and sends a
! derived datatype, a checkpoint test subject for virtual handles through
! the Fortran bindings.
!
!   fsplit [N [ITERS]]
!
! The ranks form two groups by parity (mpi_comm_split of a duplicate of
! MPI_COMM_WORLD). Each rank owns an N x N array; every step it sends one
! column of it (an mpi_type_vector of stride N) around the ring of world,
! reduces a row sum in its group, and ends with an allreduce on the
! duplicate of the world communicator. An mpi_type_contiguous of two
! columns is broadcast in the group every 16 steps.
!
! Output (rank 0, stdout, at the end): one line with a checksum.
program fsplit
  use mpi
  implicit none
  integer :: n, iters, ierr, rank, size, left, right, it, i, j
  integer :: world, group, grank, column, twocols, status(MPI_STATUS_SIZE)
  character(len=32) :: arg
  double precision, allocatable :: a(:,:), col(:), two(:,:)
  double precision :: s, gs, check

  n = 128
  iters = 2000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read(arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read(arg, *) iters
  end if

  call mpi_init(ierr)
  call mpi_comm_dup(MPI_COMM_WORLD, world, ierr)
  call mpi_comm_rank(world, rank, ierr)
  call mpi_comm_size(world, size, ierr)
  call mpi_comm_split(world, mod(rank, 2), rank, group, ierr)
  call mpi_comm_rank(group, grank, ierr)
  left = mod(rank + size - 1, size)
  right = mod(rank + 1, size)

  ! One column of a(n, n) is contiguous in Fortran; a row is strided.
  call mpi_type_vector(n, 1, n, MPI_DOUBLE_PRECISION, column, ierr)
  call mpi_type_commit(column, ierr)
  call mpi_type_contiguous(2 * n, MPI_DOUBLE_PRECISION, twocols, ierr)
  call mpi_type_commit(twocols, ierr)

  allocate(a(n, n), col(n), two(n, 2))
  do j = 1, n
    do i = 1, n
      a(i, j) = dble(mod(rank * 7919 + i * 31 + j, 1009)) / 1009.0d0
    end do
  end do

  check = 0
  do it = 1, iters
    ! Row mod(it, n) + 1 of a travels right as one strided vector.
    call mpi_sendrecv(a(mod(it, n) + 1, 1), 1, column, right, 1, col, n, &
                      MPI_DOUBLE_PRECISION, left, 1, world, status, ierr)
    do j = 1, n
      a(mod(it, n) + 1, j) = 0.5d0 * (a(mod(it, n) + 1, j) + col(j))
    end do
    s = sum(a(:, mod(it, n) + 1))
    call mpi_allreduce(s, gs, 1, MPI_DOUBLE_PRECISION, MPI_SUM, group, ierr)
    check = check + gs * 1.0d-3
    if (mod(it, 16) == 0) then
      two = a(:, 1:2)
      call mpi_bcast(two, 1, twocols, 0, group, ierr)
      check = check + two(mod(it, n) + 1, 2)
    end if
    call mpi_allreduce(MPI_IN_PLACE, check, 1, MPI_DOUBLE_PRECISION, MPI_MAX, world, ierr)
  end do

  call mpi_type_free(column, ierr)
  call mpi_type_free(twocols, ierr)
  call mpi_comm_free(group, ierr)
  call mpi_comm_free(world, ierr)
  if (rank == 0) then
    write(*, '(a, i0, a, i0, a, i0, a, es24.16)') 'fsplit: n=', n, ' iters=', iters, &
      ' ranks=', size, ' check=', check
  end if
  call mpi_finalize(ierr)
end program fsplit
