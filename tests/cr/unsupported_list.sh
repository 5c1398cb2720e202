#!/bin/bash
# unsupported_list.sh: stasis-run --unsupported lists the MPI calls that
# switch checkpoints off, from the same table the wrappers are made from:
# calls stasis refuses (MPI_Comm_spawn, MPI_Open_port), never one it
# restores (MPI_Comm_split, the tool interface's handles and sessions),
# and every function of mpi.h is classified.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
list=$CR_TMP/list
"$CR_STASIS_RUN" --unsupported >"$list" || cr_fail "stasis-run --unsupported exited with $?"
for call in MPI_Comm_spawn MPI_Open_port; do
	grep -qx "  $call" "$list" || cr_fail "$call is not listed"
done
for call in MPI_Comm_split MPI_Type_create_struct MPI_Send_init MPI_Op_create MPI_File_open MPI_Win_create \
	MPI_Win_allocate_shared MPI_Win_shared_query MPI_File_iwrite_at MPI_File_write_all_begin \
	MPI_File_iwrite_at_all MPI_Comm_idup MPI_Grequest_start MPI_Register_datarep MPI_T_init_thread \
	MPI_T_cvar_get_info MPI_T_cvar_handle_alloc MPI_T_cvar_write MPI_T_pvar_session_create \
	MPI_T_pvar_handle_alloc; do
	if grep -qx "  $call" "$list"; then
		cr_fail "$call is listed, but stasis restores it"
	fi
done
line=$(grep -E '^[0-9]+ of the [0-9]+ functions of mpi.h are classified' "$list") ||
	cr_fail "the list does not say how many calls are classified"
read -r classified _ _ total _ <<<"$line"
[[ $classified == "$total" ]] || cr_fail "not every function of mpi.h is classified: $line"
cr_pass "stasis-run --unsupported: $(tail -n 1 "$list")"
