// state: a C++ checkpoint/restart test subject whose state lives in
// standard containers, i.e. in many small and large heap blocks owned by
// libstdc++ allocators: a std::vector<double>, a std::map<int, std::string>
// (one heap node per entry, rebalanced as it grows and shrinks) and a
// std::string that is appended to and cut. An ordinary MPI program (C API)
// that knows nothing of stasis.
//
//   state [M [ITERS]]
//
// Every iteration: a ring MPI_Sendrecv of a slice of the vector, an update of
// all three containers, and an MPI_Allreduce on MPI_COMM_WORLD (the safe
// point) whose result feeds back into the state, so every rank's state
// depends on every other's.
//
// It ends as IQ-TREE does: MPI_Finalize is called at exit, by the
// destructor of an object made on first use after MPI_Init (a C++
// function-local static, whose destructor libc registers then), after an
// atexit() handler registered after MPI_Init too.
//
// Output (rank 0, stdout, only at the end):
//   state: m=<M> iters=<ITERS> checksum=<16 hex> total=<%.17g>
//   state: atexit handler ran
//   state: finished at exit
// C API only: keep the deprecated C++ bindings (and their warnings) out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int kSlice = 64;     // doubles sent around the ring per iteration
constexpr int kMapKeys = 509;  // map keys cycle through this range
constexpr size_t kLogMax = 1 << 16;

uint64_t fnv(uint64_t h, const void *buf, size_t len)
{
	auto p = static_cast<const unsigned char *>(buf);
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

struct State {
	std::vector<double> vec;
	std::map<int, std::string> map;
	std::string log;

	uint64_t hash() const
	{
		uint64_t h = 0xcbf29ce484222325ull;
		h = fnv(h, vec.data(), vec.size() * sizeof(double));
		for (const auto &kv : map) {
			h = fnv(h, &kv.first, sizeof(kv.first));
			h = fnv(h, kv.second.data(), kv.second.size());
		}
		return fnv(h, log.data(), log.size());
	}
};

// One step of the evolution. Everything is computed from integers and exact
// double operations in a fixed order, so it is the same on every run.
void step(State &s, long it, int rank, const std::vector<double> &from_left, double total)
{
	const size_t m = s.vec.size();
	for (size_t i = 0; i < m; i++) {
		double left = s.vec[(i + m - 1) % m], right = s.vec[(i + 1) % m];
		s.vec[i] = 0.5 * s.vec[i] + 0.25 * (left + right) + 1e-3 * from_left[i % kSlice];
	}
	for (size_t i = 0; i < m; i += 97)
		s.vec[i] += 1e-9 * total;

	int key = static_cast<int>((it * 31 + rank * 7) % kMapKeys);
	char buf[64];
	snprintf(buf, sizeof buf, "%ld:%.6f;", it, s.vec[it % m]);
	if (it % 5 == 3)
		s.map.erase(key);
	else
		s.map[key] += buf;
	if (s.map[key].size() > 512)
		s.map[key].erase(0, 256);

	s.log += buf;
	if (s.log.size() > kLogMax)
		s.log = s.log.substr(s.log.size() / 2); // a new heap block each time
}

// Made on first use, after MPI_Init: ends MPI at exit.
struct Finisher {
	int rank = -1;
	~Finisher()
	{
		if (rank == 0) {
			printf("state: finished at exit\n");
			fflush(stdout);
		}
		MPI_Finalize();
	}
};

Finisher &finisher()
{
	static Finisher f;
	return f;
}

int exit_rank = -1;

void said_at_exit()
{
	if (exit_rank == 0) {
		printf("state: atexit handler ran\n");
		fflush(stdout);
	}
}

} // namespace

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	finisher().rank = rank;
	exit_rank = rank;
	atexit(said_at_exit);

	long m = 1 << 16, iters = 2000;
	if (argc > 1)
		m = atol(argv[1]);
	if (argc > 2)
		iters = atol(argv[2]);
	if (m < kSlice || iters < 1) {
		if (rank == 0)
			fprintf(stderr, "usage: state [M [ITERS]], M >= %d\n", kSlice);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}

	State s;
	s.vec.resize(m);
	for (long i = 0; i < m; i++)
		s.vec[i] = static_cast<double>((i * 2654435761u + rank * 40503u) % 1000003u) / 1000003.0;
	s.log = "rank " + std::to_string(rank) + ";";

	const int right = (rank + 1) % size, left = (rank + size - 1) % size;
	std::vector<double> out(kSlice), in(kSlice);
	double total = 0.0;
	for (long it = 0; it < iters; it++) {
		size_t off = static_cast<size_t>(it * kSlice) % (m - kSlice + 1);
		std::copy(s.vec.begin() + off, s.vec.begin() + off + kSlice, out.begin());
		MPI_Sendrecv(out.data(), kSlice, MPI_DOUBLE, right, 0, in.data(), kSlice, MPI_DOUBLE,
			     left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		step(s, it, rank, in, total);
		double local = s.vec[it % m] + static_cast<double>(s.map.size() + s.log.size());
		MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	}

	uint64_t mine = s.hash();
	std::vector<uint64_t> all(rank == 0 ? size : 0);
	MPI_Gather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		uint64_t h = fnv(0xcbf29ce484222325ull, all.data(), all.size() * sizeof(uint64_t));
		printf("state: m=%ld iters=%ld checksum=%016" PRIx64 " total=%.17g\n", m, iters, h,
		       total);
		fflush(stdout);
	}
	return 0; // MPI_Finalize: at exit, by finisher()
}
