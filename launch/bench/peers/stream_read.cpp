// Streaming-read bandwidth of this machine, for launch/bench/peers/bench-peers.sh: the memory floor of decoding (every weight
// byte streamed once per token) is weight bytes / this bandwidth. launch/bench/peers/bench-peers.sh compiles it
// (-O3 -march=native) into ${LOOKAHEAD_DEPS}, never into the repository.
//   stream_read THREADS [MiB=1024] [REPS=10]   -> prints one JSON line {"threads", "bytes", "best_gbps", ...}
// Hand-written rather than STREAM: STREAM measures copy/scale/add/triad (read+write traffic); decoding only reads,
// so the figure wanted is a pure read of a buffer far larger than the caches, split across T threads like the
// weight rows of a GEMM. Each thread sums its slice with independent accumulators (the compiler vectorizes it),
// and the sum is printed so the loads cannot be optimized away. Best of REPS, as each rep reads the whole buffer.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

uint64_t sum_slice(const uint64_t* p, size_t n) {
    // Eight accumulators: independent dependency chains so the loads, not the adds, set the pace.
    uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) a[k] += p[i + k];
    for (; i < n; ++i) a[0] += p[i];
    uint64_t s = 0;
    for (int k = 0; k < 8; ++k) s += a[k];
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: stream_read THREADS [MiB=1024] [REPS=10]\n");
        return 2;
    }
    const int threads = std::atoi(argv[1]);
    const long mib = argc > 2 ? std::atol(argv[2]) : 1024;
    const int reps = argc > 3 ? std::atoi(argv[3]) : 10;
    if (threads < 1 || threads > 1024 || mib < 16 || reps < 1) {
        std::fprintf(stderr, "stream_read: error: need THREADS in 1..1024, MiB >= 16, REPS >= 1\n");
        return 2;
    }
    const size_t n = static_cast<size_t>(mib) * (1u << 20) / sizeof(uint64_t);
    std::vector<uint64_t> buf(n);
    // First touch by the threads that will read each slice (NUMA placement), with non-zero data.
    const size_t per = (n + threads - 1) / threads;
    auto run = [&](auto&& body) {
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] {
                const size_t b = std::min(n, t * per), e = std::min(n, b + per);
                body(t, b, e);
            });
        for (auto& th : ts) th.join();
    };
    run([&](int, size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) buf[i] = i * 2654435761u;
    });
    std::vector<uint64_t> sums(threads);
    double best = 1e30, total = 0;
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        run([&](int t, size_t b, size_t e) { sums[t] += sum_slice(buf.data() + b, e - b); });
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        times.push_back(s);
        best = std::min(best, s);
        total += s;
    }
    std::sort(times.begin(), times.end());
    uint64_t check = 0;
    for (auto s : sums) check ^= s;
    const double bytes = static_cast<double>(n) * sizeof(uint64_t);
    std::printf("{\"threads\": %d, \"bytes\": %.0f, \"reps\": %d, \"best_gbps\": %.3f, \"median_gbps\": %.3f, "
                "\"mean_gbps\": %.3f, \"check\": %llu}\n",
                threads, bytes, reps, bytes / best / 1e9, bytes / times[times.size() / 2] / 1e9,
                bytes * reps / total / 1e9, static_cast<unsigned long long>(check & 0xffff));
    return 0;
}
