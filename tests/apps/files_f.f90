! files_f: the Fortran twin of files.c, a checkpoint/restart test subject that
! keeps units open all run long through libgfortran:
!   - unit 11 reads one value per iteration from files.in (formatted,
!     sequential; REWIND at its end);
!   - unit 12 writes a line per iteration to files.log.<rank> (formatted,
!     sequential, STATUS='REPLACE': libgfortran buffers it);
!   - unit 13 writes a record per iteration to files.data.<rank> (unformatted,
!     direct access) and reads back the record of half as many iterations
!     ago;
!   - unit 14 writes progress to /dev/null, as pw.x's ranks but the first do;
!   - unit 15 is a STATUS='SCRATCH' file (libgfortran deletes it as it opens
!     it: only the checkpoint holds its bytes): a record per iteration,
!     every 1000 iterations rewound and read back whole, after which the
!     writes go on at its end;
!   - every 250 iterations a new file files.new.<rank>.<n> is written with
!     STATUS='NEW' (an exclusive create: it must not exist yet; those of a
!     run before in the directory are deleted at the start);
!   - files.data.mpi, shared by every rank through MPI-IO (MPI_FILE_OPEN with
!     a blank-padded CHARACTER name, a view with each rank's displacement),
!     gets each rank's sum with MPI_FILE_WRITE_AT_ALL every 8 iterations;
! an MPI_ALLREDUCE on MPI_COMM_WORLD ends each iteration.
!
!   files_f [N [ITERS]]
!
! Output (rank 0, stdout):
!   files_f: n=<N> iters=<ITERS> checksum=<16 hex> sum=<17 significant digits>
program files_f
  use mpi
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: i8 = selected_int_kind(18)
  integer, parameter :: nrec = 32
  integer :: n, iters, rank, nranks, ierr, it, i, j, ios
  real(dp), allocatable :: x(:)
  real(dp) :: v, s, total, rec(nrec), old(nrec)
  integer(i8) :: h
  character(len=64) :: arg, logname, dataname, mpiname, newname
  integer :: fh, status(MPI_STATUS_SIZE)
  integer(kind=MPI_OFFSET_KIND) :: disp, zero

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  n = 4096
  iters = 2000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if

  write (logname, '(a,i0)') 'files.log.', rank
  write (dataname, '(a,i0)') 'files.data.', rank
  open (11, file='files.in', status='old', action='read')
  open (12, file=logname, status='replace', action='write')
  open (13, file=dataname, status='replace', access='direct', form='unformatted', &
        recl=8*nrec, action='readwrite')
  open (14, file='/dev/null', status='old', action='write')
  open (15, status='scratch', form='unformatted', access='sequential')
  ! The new files of a run before in this directory, gone.
  do i = 0, (iters - 1)/250
    write (newname, '(a,i0,a,i0)') 'files.new.', rank, '.', i
    open (16, file=newname, status='unknown')
    close (16, status='delete')
  end do
  mpiname = 'files.data.mpi'
  call MPI_FILE_OPEN(MPI_COMM_WORLD, mpiname, MPI_MODE_CREATE + MPI_MODE_WRONLY, &
                     MPI_INFO_NULL, fh, ierr)
  zero = 0
  call MPI_FILE_SET_SIZE(fh, zero, ierr)
  disp = 8*rank
  call MPI_FILE_SET_VIEW(fh, disp, MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION, 'native', &
                         MPI_INFO_NULL, ierr)

  allocate (x(0:n - 1))
  do i = 0, n - 1
    x(i) = real(mod(i, 97), dp)/97.0_dp + rank
  end do
  total = 0.0_dp
  h = 0_i8

  do it = 0, iters - 1
    read (11, *, iostat=ios) v
    if (ios /= 0) then
      rewind (11)
      read (11, *) v
    end if
    do i = 0, n - 1
      x(i) = 0.5_dp*x(i) + 0.25_dp*x(mod(i + 1, n)) + 1.0e-3_dp*v
    end do
    s = sum(x)
    write (12, '(a,i0,a,es24.17e3,a,es24.17e3)') 'it ', it, ' in ', v, ' sum ', s
    rec = s + [(real(i, dp), i=1, nrec)]
    write (13, rec=it + 1) rec
    read (13, rec=it/2 + 1) old
    x(mod(it, n)) = x(mod(it, n)) + old(nrec/2)*1.0e-12_dp
    h = ieor(ishftc(h, 7), int(mod(old(1)*1.0e6_dp, 1.0e12_dp), i8))
    write (14, '(a,i0)') 'progress ', it
    write (15) it, s
    if (mod(it, 250) == 0) then
      write (newname, '(a,i0,a,i0)') 'files.new.', rank, '.', it/250
      open (16, file=newname, status='new', action='write')
      write (16, '(a,i0,a,es24.17e3)') 'it ', it, ' sum ', s
      close (16)
    end if
    if (mod(it, 1000) == 999) then
      rewind (15)
      do i = 0, it
        read (15) j, v
        h = ieor(ishftc(h, 3), int(j, i8) + int(mod(v*1.0e3_dp, 1.0e12_dp), i8))
      end do
    end if
    if (mod(it, 8) == 0) then
      disp = int(it/8, MPI_OFFSET_KIND)*nranks
      call MPI_FILE_WRITE_AT_ALL(fh, disp, s, 1, MPI_DOUBLE_PRECISION, status, ierr)
    end if
    call MPI_ALLREDUCE(s, v, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    total = total + v
  end do
  close (11)
  close (12)
  close (13)
  close (14)
  close (15)
  call MPI_FILE_CLOSE(fh, ierr)
  call MPI_ALLREDUCE(MPI_IN_PLACE, h, 1, MPI_INTEGER8, MPI_BXOR, MPI_COMM_WORLD, ierr)
  if (rank == 0) write (*, '(a,i0,a,i0,a,z16.16,a,es24.17e3)') 'files_f: n=', n, ' iters=', &
    iters, ' checksum=', h, ' sum=', total
  call MPI_FINALIZE(ierr)
end program files_f
