#!/bin/bash
# The layer check fails on an upward include, a duplicate header name and a
# stasis-inspect include above the redundancy layer, and passes on the tree
# as it is. Runs tools/check_layers.py on a copy of the source tree.
set -u
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

copy() {
	rm -rf "$tmp/t" && mkdir -p "$tmp/t/tools" &&
		cp "$src/meson.build" "$tmp/t/" &&
		cp -r "$src"/{util,format,redundancy,fenix,alloc,session,memory,process,mpi,engine,preload} "$tmp/t/" &&
		cp -r "$src/tools/inspect" "$tmp/t/tools/"
}
check() { python3 "$src/tools/check_layers.py" "$tmp/t" >"$tmp/out" 2>&1; }

copy || fail "cannot copy the tree"
check || { cat "$tmp/out"; fail "the tree as it is does not pass"; }

copy && sed -i '0,/#include "/s//#include "checkpoint.h"\n#include "/' "$tmp/t/util/log.c"
check && fail "an include of engine/ from util/ passed"
grep -q 'util/log.c:.*checkpoint.h of engine/, a layer util/ may not see' "$tmp/out" || { cat "$tmp/out"; fail "not named"; }

copy && echo '#include "coord.h"' >>"$tmp/t/process/fds.h"
check && fail "an include of mpi/ from process/ passed"

copy && cp "$tmp/t/util/log.h" "$tmp/t/engine/log.h"
check && fail "a header name in two layers passed"

copy && echo '#include "fenix_int.h"' >>"$tmp/t/engine/start.c"
check && fail "a layer above fenix/ including it passed"
grep -q 'engine/start.c:.*fenix_int.h of fenix/' "$tmp/out" || { cat "$tmp/out"; fail "fenix include not named"; }

copy && echo '#include "session.h"' >>"$tmp/t/tools/inspect/json.c"
check && fail "stasis-inspect including the session layer passed"

copy && echo '#include "fenix_int.h"' >>"$tmp/t/tools/inspect/fenix.c"
check && fail "stasis-inspect including fenix/ beyond its reader fx_file.h passed"
copy && echo '#include "fx_file.h"' >>"$tmp/t/tools/inspect/json.c"
check || { cat "$tmp/out"; fail "stasis-inspect including fenix/'s reader fx_file.h refused"; }

echo "PASS: upward includes, includes of the leaf fenix/, duplicate headers and inspect's reach are refused"
