// Highway's vqsort on the inputs of bench/python/bench_library_sort.py, for
// docs/benchmarks.md ("The library's sort and top-k"): the best
// of REPS sorts of N random f32 keys, or of N (u32 key, u32 value) pairs
// (hwy::K32V32), each sort on a fresh copy of the same data. Prints
// "vqsort KIND N BEST_MS". Built only when libhwy-contrib is found.
//
//   bench_vqsort f32|kv N REPS
#include <hwy/contrib/sort/vqsort.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

template <typename T>
static double best_ms(const std::vector<T> &data, int reps) {
  hwy::Sorter sorter;
  std::vector<T> work(data.size());
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    std::memcpy(work.data(), data.data(), data.size() * sizeof(T));
    auto t0 = std::chrono::steady_clock::now();
    sorter(work.data(), work.size(), hwy::SortAscending());
    auto t1 = std::chrono::steady_clock::now();
    double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    if (ms < best) best = ms;
  }
  for (size_t i = 1; i < work.size(); i++)
    if (work[i] < work[i - 1]) {
      std::fprintf(stderr, "bench_vqsort: not sorted at %zu\n", i);
      std::exit(1);
    }
  return best;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: bench_vqsort f32|kv N REPS\n");
    return 2;
  }
  const char *kind = argv[1];
  size_t n = std::strtoull(argv[2], nullptr, 10);
  int reps = std::atoi(argv[3]);
  std::mt19937 rng(1);
  double ms = 0;
  if (std::strcmp(kind, "f32") == 0) {
    std::normal_distribution<float> dist;
    std::vector<float> data(n);
    for (auto &x : data) x = dist(rng);
    ms = best_ms(data, reps);
  } else if (std::strcmp(kind, "kv") == 0) {
    std::vector<hwy::K32V32> data(n);
    for (size_t i = 0; i < n; i++) {
      data[i].key = rng();
      data[i].value = (uint32_t)i;
    }
    ms = best_ms(data, reps);
  } else {
    std::fprintf(stderr, "bench_vqsort: kind is f32 or kv, not %s\n", kind);
    return 2;
  }
  std::printf("vqsort %s %zu %.3f\n", kind, n, ms);
  return 0;
}
