! windows_f: one-sided communication from Fortran, a checkpoint test
! subject for windows made through the Fortran bindings (issue 16):
!   - a window from MPI_Win_allocate (mpi_f08: its base a TYPE(C_PTR)),
!     a 1-D ring of blocks whose halo cells neighbours MPI_Put in a
!     fence epoch every step;
!   - a window from MPI_Win_create over a program array of rank 0's, to
!     which every rank MPI_Puts its block's sum and MPI_Accumulates a count
!     under MPI_Win_lock each step;
!   - a window from MPI_Win_create_dynamic with a program array attached,
!     into which the left neighbour MPI_Puts at the array's absolute
!     address under MPI_Win_lock_all each step;
!   - a window from MPI_Win_allocate_shared on the node's ranks
!     (MPI_Comm_split_type) under one MPI_Win_lock_all: each step a rank
!     writes its sum into its part and reads its right neighbour's straight
!     from memory (MPI_Win_shared_query), between node barriers;
!   - an attribute cached on the first window (MPI_Win_create_keyval,
!     MPI_Win_set_attr), and one on MPI_COMM_WORLD with MPI-1's
!     MPI_KEYVAL_CREATE / MPI_ATTR_PUT through `use mpi`; both read back
!     every step into the checksum (a value lost at a restart changes it).
!
!   windows_f [N [ITERS]]
!
! Output (rank 0, stdout, at the end): one line with a checksum.
module windows_f_mpi1
  implicit none
contains
  ! MPI-1's keyval on MPI_COMM_WORLD, through `use mpi`.
  subroutine mpi1_put(rank, keyval)
    use mpi
    integer, intent(in) :: rank
    integer, intent(out) :: keyval
    integer :: ierr, extra

    extra = 7
    call mpi_keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, keyval, extra, ierr)
    call mpi_attr_put(MPI_COMM_WORLD, keyval, 4242 + rank, ierr)
  end subroutine mpi1_put

  integer function mpi1_get(keyval)
    use mpi
    integer, intent(in) :: keyval
    integer :: ierr, val
    logical :: flag

    call mpi_attr_get(MPI_COMM_WORLD, keyval, val, flag, ierr)
    mpi1_get = -1
    if (flag) mpi1_get = val
  end function mpi1_get
end module windows_f_mpi1

program windows_f
  use mpi_f08
  use windows_f_mpi1
  use, intrinsic :: iso_c_binding, only : c_ptr, c_f_pointer
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer, parameter :: i8 = selected_int_kind(18)
  integer :: n, iters, rank, nranks, it, i, left, right, keyval, k1, bad
  type(MPI_Win) :: wa, wb, wd, ws
  type(MPI_Comm) :: node
  type(c_ptr) :: cbase, sbase, rbase
  real(dp), pointer :: mine(:), theirs(:)
  integer :: nrank, nsize, du
  real(dp), pointer :: u(:)
  real(dp), allocatable :: t(:)
  real(dp), allocatable, target :: acc(:)
  real(dp), target :: dyn(4)
  integer(kind=MPI_ADDRESS_KIND), allocatable :: addr(:)
  real(dp) :: s
  integer(kind=MPI_ADDRESS_KIND) :: sz, disp, extra, attr, got
  logical :: flag
  integer(i8) :: h
  character(len=32) :: arg

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  n = 2048
  iters = 2000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  left = mod(rank + nranks - 1, nranks)
  right = mod(rank + 1, nranks)

  ! u(1) and u(n+2) are the halo cells the neighbours write.
  sz = 8_MPI_ADDRESS_KIND*(n + 2)
  call MPI_Win_allocate(sz, 8, MPI_INFO_NULL, MPI_COMM_WORLD, cbase, wa)
  call c_f_pointer(cbase, u, [n + 2])
  allocate (t(n + 2), acc(nranks + 1), addr(0:nranks - 1))
  acc = 0.0_dp
  sz = 8_MPI_ADDRESS_KIND*(nranks + 1)
  call MPI_Win_create(acc, sz, 8, MPI_INFO_NULL, MPI_COMM_WORLD, wb)
  dyn = 0.0_dp
  call MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, wd)
  sz = 8*4
  call MPI_Win_attach(wd, dyn, sz)
  call MPI_Get_address(dyn, addr(rank))
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, addr, 1, MPI_AINT, MPI_COMM_WORLD)
  extra = 0
  call MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, keyval, extra)
  attr = 1000003_MPI_ADDRESS_KIND*(rank + 1)
  call MPI_Win_set_attr(wa, keyval, attr)
  call mpi1_put(rank, k1)
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node)
  call MPI_Comm_rank(node, nrank)
  call MPI_Comm_size(node, nsize)
  sz = 8
  call MPI_Win_allocate_shared(sz, 8, MPI_INFO_NULL, node, sbase, ws)
  call c_f_pointer(sbase, mine, [1])
  call MPI_Win_shared_query(ws, mod(nrank + 1, nsize), sz, du, rbase)
  call c_f_pointer(rbase, theirs, [1])
  mine(1) = 0.0_dp
  call MPI_Win_lock_all(MPI_MODE_NOCHECK, ws)

  do i = 1, n + 2
    u(i) = real(mod(i + 31*rank, 97), dp)/97.0_dp
  end do
  h = 0_i8
  bad = 0
  call MPI_Win_fence(0, wa)
  do it = 0, iters - 1
    ! Halo: my first cell to the left's right halo, my last to the right's left.
    disp = n + 1
    call MPI_Put(u(2), 1, MPI_DOUBLE_PRECISION, left, disp, 1, MPI_DOUBLE_PRECISION, wa)
    disp = 0
    call MPI_Put(u(n + 1), 1, MPI_DOUBLE_PRECISION, right, disp, 1, MPI_DOUBLE_PRECISION, wa)
    call MPI_Win_fence(0, wa)
    do i = 2, n + 1
      t(i) = 0.5_dp*u(i) + 0.25_dp*(u(i - 1) + u(i + 1)) + 1.0e-6_dp*it
    end do
    ! The halo read, before a neighbour may put the next step's.
    call MPI_Win_fence(0, wa)
    u(2:n + 1) = t(2:n + 1)
    s = sum(u(2:n + 1))
    disp = rank
    call MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wb)
    call MPI_Put(s, 1, MPI_DOUBLE_PRECISION, 0, disp, 1, MPI_DOUBLE_PRECISION, wb)
    disp = nranks
    call MPI_Accumulate(1.0_dp, 1, MPI_DOUBLE_PRECISION, 0, disp, 1, MPI_DOUBLE_PRECISION, &
                        MPI_SUM, wb)
    call MPI_Win_unlock(0, wb)
    ! Only the left neighbour writes dyn, each step another element.
    disp = addr(right) + 8*mod(it, 4)
    call MPI_Win_lock_all(0, wd)
    call MPI_Put(u(n + 1), 1, MPI_DOUBLE_PRECISION, right, disp, 1, MPI_DOUBLE_PRECISION, wd)
    call MPI_Win_unlock_all(wd)
    call MPI_Win_get_attr(wa, keyval, got, flag)
    if (.not. flag .or. got /= attr) bad = bad + 1
    if (mpi1_get(k1) /= 4242 + rank) bad = bad + 1
    h = ieor(ishftc(h, 7), int(mod(s*1.0e6_dp, 1.0e12_dp), i8) + got + mpi1_get(k1))
    mine(1) = s
    call MPI_Win_sync(ws)
    call MPI_Barrier(node)
    h = ieor(h, int(mod(theirs(1)*1.0e6_dp, 1.0e12_dp), i8))
    call MPI_Barrier(node)
  end do
  call MPI_Win_unlock_all(ws)
  call MPI_Win_free(ws)
  call MPI_Comm_free(node)
  call MPI_Win_fence(MPI_MODE_NOSUCCEED, wa)
  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) then
    call MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wb)
    do i = 1, nranks + 1
      h = ieor(ishftc(h, 5), int(mod(acc(i)*1.0e6_dp, 1.0e12_dp), i8))
    end do
    call MPI_Win_unlock(0, wb)
  end if
  do i = 1, 4
    h = ieor(ishftc(h, 3), int(mod(dyn(i)*1.0e6_dp, 1.0e12_dp), i8))
  end do
  call MPI_Allreduce(MPI_IN_PLACE, h, 1, MPI_INTEGER8, MPI_BXOR, MPI_COMM_WORLD)
  call MPI_Allreduce(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Win_detach(wd, dyn)
  call MPI_Win_free(wd)
  call MPI_Win_free(wb)
  call MPI_Win_free(wa)
  call MPI_Win_free_keyval(keyval)
  if (rank == 0) write (*, '(a,i0,a,i0,a,z16.16,a,i0)') 'windows_f: n=', n, ' iters=', &
    iters, ' checksum=', h, ' attribute errors=', bad
  call MPI_Finalize()
end program windows_f
