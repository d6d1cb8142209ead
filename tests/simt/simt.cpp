// The SIMT emulation's runtime: fibers, barriers, warp exchange, cp.async groups, launches (see simt.h).
#include "simt.h"

#include <setjmp.h>
#include <ucontext.h>

#if defined(__SANITIZE_THREAD__)
// Shared-memory race detector: under ThreadSanitizer every emulated thread is a TSan fiber; switches do not
// synchronise, barriers do (release on arrival, acquire on leaving), so two accesses of different threads to the
// same address, one a write, with no barrier between them are reported as a data race. Launch boundaries
// synchronise too (blocks run one after another: races between blocks are not looked for). The emulator's own
// bookkeeping is excluded with TSan's ignore annotations.
#include <sanitizer/tsan_interface.h>
extern "C" void __tsan_write16(void* addr);
extern "C" void __tsan_read16(void* addr);
extern "C" void AnnotateIgnoreReadsBegin(const char* f, int l);
extern "C" void AnnotateIgnoreReadsEnd(const char* f, int l);
extern "C" void AnnotateIgnoreWritesBegin(const char* f, int l);
extern "C" void AnnotateIgnoreWritesEnd(const char* f, int l);
#define LA_TSAN 1
#define IGNORE_BEGIN() (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define IGNORE_END() (AnnotateIgnoreReadsEnd(__FILE__, __LINE__), AnnotateIgnoreWritesEnd(__FILE__, __LINE__))
#else
#define LA_TSAN 0
#define __tsan_write16(p) (void)0
#define __tsan_read16(p) (void)0
#define IGNORE_BEGIN() (void)0
#define IGNORE_END() (void)0
#endif

#include <algorithm>
#include <map>
#include <memory>

// Fiber switches: swapcontext saves and restores the signal mask, a system call per switch (89% of the emulation's
// time in test_simt_forward, measured with perf). Outside TSan a fiber is entered once with setcontext and switched
// with _setjmp/_longjmp after that (no signal mask: nothing here changes it). Under TSan the plain ucontext switches
// stay (TSan's longjmp interceptor does not expect jumps between fiber stacks).
#define LA_SIMT_JMP (!LA_TSAN)

namespace la_simt {

Coords* g_cur = nullptr;
dim3 g_block_dim, g_grid_dim;

namespace {

enum class St { Run, WaitBlock, WaitWarp, Done };

struct Copy {
  void* dst;
  unsigned char data[16];
  int bytes;
};

struct Fiber {
  ucontext_t ctx;
  jmp_buf jb;            // LA_SIMT_JMP: where the fiber resumes (valid once started)
  bool started = false;  // LA_SIMT_JMP: entered since its makecontext
  std::vector<char> stack;
  Coords c;
  St st = St::Run;
  std::vector<Copy> open;                 // cp.async issued since the last commit
  std::vector<std::vector<Copy>> groups;  // committed, oldest first
  void* tsan = nullptr;                   // its ThreadSanitizer fiber
};

constexpr size_t kStack = 256 * 1024;

std::vector<std::string> g_errors;
int g_sms = 132, g_optin = 227 * 1024;
int g_dev = 0;  // a new device index per set_device: launchers cache attributes per device
cudaError_t g_last = cudaSuccess;
std::map<std::pair<const void*, int>, int> g_attr;  // kernel -> max dynamic shared memory (set by cudaFuncSetAttribute)

ucontext_t g_sched;
#if LA_SIMT_JMP
jmp_buf g_sched_jb;  // the scheduler's resume point
#endif
std::vector<std::unique_ptr<Fiber>> g_fibers;
int g_running = -1;
void (*g_body)(void*) = nullptr;
void* g_ctx = nullptr;
std::vector<unsigned char> g_smem;
std::vector<uint64_t> g_xchg;  // per warp: 32 words
std::vector<char> g_warp_tokens;
#if LA_TSAN
char g_block_token, g_launch_token, g_end_token;  // synchronisation addresses for the race detector
void* g_sched_tsan = nullptr;
#endif

// A macro, not a function: an instrumented function's exit hook would run on the scheduler's TSan fiber.
#if LA_TSAN
#define to_scheduler() __tsan_switch_to_fiber(g_sched_tsan, __tsan_switch_to_fiber_no_sync)
#else
#define to_scheduler() (void)0
#endif

Fiber& me() {
  IGNORE_BEGIN();  // g_running and g_fibers are the scheduler's bookkeeping
  Fiber& f = *g_fibers[g_running];
  IGNORE_END();
  return f;
}

// Not instrumented: it ends on the scheduler's TSan fiber (its function-exit hook would pop the wrong stack).
#if LA_TSAN
__attribute__((no_sanitize_thread))
#endif
void trampoline() {
#if LA_TSAN
  __tsan_acquire(&g_launch_token);  // the launch happens after the host wrote the inputs
#endif
  g_body(g_ctx);
#if LA_TSAN
  __tsan_release(&g_end_token);
#endif
  IGNORE_BEGIN();
  me().st = St::Done;
  IGNORE_END();
  to_scheduler();
#if LA_SIMT_JMP
  _longjmp(g_sched_jb, 1);  // never returns: uc_link's context would be the scheduler's at the fiber's first entry
#endif
  // returning switches to uc_link (the scheduler)
}

void wait(St s) {
  IGNORE_BEGIN();
  Fiber& f = me();
  f.st = s;
  to_scheduler();
#if LA_SIMT_JMP
  if (_setjmp(f.jb) == 0) _longjmp(g_sched_jb, 1);
#else
  swapcontext(&f.ctx, &g_sched);
#endif
  g_cur = &me().c;
  IGNORE_END();
}

void apply(std::vector<Copy>& g) {
  for (Copy& c : g) {
    __tsan_write16(c.dst);
    if (c.bytes >= 16) std::memcpy(c.dst, c.data, 16);
    else {
      std::memcpy(c.dst, c.data, c.bytes);
      std::memset(static_cast<unsigned char*>(c.dst) + c.bytes, 0, 16 - c.bytes);
    }
  }
}

}  // namespace

void set_device(int sm_count, int smem_optin_bytes) {
  g_sms = sm_count;
  g_optin = smem_optin_bytes;
  ++g_dev;
}

std::vector<std::string> take_errors() {
  std::vector<std::string> e;
  e.swap(g_errors);
  return e;
}
void report(const std::string& what) {
  IGNORE_BEGIN();
  if (g_errors.size() < 20) g_errors.push_back(what);
  IGNORE_END();
}

static int linear_tid() {
  IGNORE_BEGIN();
  const int t = g_running;
  IGNORE_END();
  return t;
}
int lane_id() { return linear_tid() & 31; }
Coords& coords() {
  IGNORE_BEGIN();  // g_cur changes at every switch; the coordinates it points to were set before the launch
  Coords* c = g_cur;
  IGNORE_END();
  return *c;
}

void syncthreads() {
#if LA_TSAN
  __tsan_release(&g_block_token);
  wait(St::WaitBlock);
  __tsan_acquire(&g_block_token);
#else
  wait(St::WaitBlock);
#endif
}
void syncwarp() {
#if LA_TSAN
  char* tok = &g_warp_tokens[size_t(linear_tid() >> 5)];
  __tsan_release(tok);
  wait(St::WaitWarp);
  __tsan_acquire(tok);
#else
  wait(St::WaitWarp);
#endif
}

uint64_t warp_exchange(uint64_t mine, int src) {
  const int warp = linear_tid() >> 5;
  uint64_t* x = &g_xchg[size_t(warp) * 32];
  syncwarp();  // the previous exchange's readers are done
  IGNORE_BEGIN();
  x[lane_id()] = mine;
  IGNORE_END();
  syncwarp();
  IGNORE_BEGIN();
  const uint64_t r = x[src & 31];
  IGNORE_END();
  return r;
}

unsigned warp_ballot(bool pred) {
  const int warp = linear_tid() >> 5;
  uint64_t* x = &g_xchg[size_t(warp) * 32];
  syncwarp();
  IGNORE_BEGIN();
  x[lane_id()] = pred;
  IGNORE_END();
  syncwarp();
  IGNORE_BEGIN();
  unsigned m = 0;
  const int n = std::min<int>(32, int(g_fibers.size()) - warp * 32);
  for (int l = 0; l < n; ++l)
    if (x[l] && g_fibers[warp * 32 + l]->st != St::Done) m |= 1u << l;
  IGNORE_END();
  return m;
}

// 128-byte aligned, as `extern __shared__ __align__(128)` is on a GPU.
void* dynamic_smem() { return g_smem.data() + (128 - reinterpret_cast<uintptr_t>(g_smem.data()) % 128) % 128; }

void cp_async16(void* dst, const void* src, int src_bytes) {
  IGNORE_BEGIN();
  Copy c;
  c.dst = dst;
  c.bytes = src_bytes < 0 ? 0 : (src_bytes > 16 ? 16 : src_bytes);
  IGNORE_END();
  if (c.bytes) std::memcpy(c.data, src, c.bytes);  // the kernel's global read
  if (reinterpret_cast<uintptr_t>(dst) % 16) report("cp.async: destination not 16-byte aligned");
  std::memset(dst, 0xff, 16);  // poisoned until the group is waited for (a write of this thread)
  __tsan_write16(dst);  // said explicitly: a constant-size memset may be expanded inline, uninstrumented
  IGNORE_BEGIN();
  me().open.push_back(c);
  IGNORE_END();
}
void cp_async_commit() {
  IGNORE_BEGIN();
  Fiber& f = me();
  f.groups.push_back(std::move(f.open));
  f.open.clear();
  IGNORE_END();
}
void cp_async_wait(int n) {
  Fiber& f = me();
  while (int(f.groups.size()) > n) {
    apply(f.groups.front());  // the copies land: writes of this thread
    IGNORE_BEGIN();
    f.groups.erase(f.groups.begin());
    IGNORE_END();
  }
}

void run_grid(dim3 grid, dim3 block, size_t smem, const void* fn, void (*body)(void*), void* ctx) {
  const auto key = std::make_pair(fn, g_dev);
  const int limit = g_attr.count(key) ? g_attr[key] : 48 * 1024;
  const size_t threads = size_t(block.x) * block.y * block.z;
  if (smem > size_t(limit) || smem > size_t(g_optin) || threads == 0 || threads > 1024 || grid.x == 0 ||
      grid.y == 0 || grid.z == 0) {
    report("launch: " + std::to_string(smem) + " bytes of dynamic shared memory (kernel limit " +
           std::to_string(limit) + ", device opt-in " + std::to_string(g_optin) + "), " + std::to_string(threads) +
           " threads");
    g_last = cudaErrorInvalidValue;
    return;
  }
#if LA_TSAN
  g_sched_tsan = __tsan_get_current_fiber();
#endif
  g_block_dim = block;
  g_grid_dim = grid;
  g_body = body;
  g_ctx = ctx;
  g_fibers.resize(threads);
  for (auto& f : g_fibers)
    if (!f) {
      f = std::make_unique<Fiber>();
      f->stack.resize(kStack);
#if LA_TSAN
      f->tsan = __tsan_create_fiber(0);
#endif
    }
  g_xchg.assign((threads + 31) / 32 * 32, 0);
  g_warp_tokens.assign((threads + 31) / 32, 0);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        g_smem.assign(smem + 128, 0xa5);  // uninitialised shared memory is garbage, not zero
        for (size_t t = 0; t < threads; ++t) {
          Fiber& f = *g_fibers[t];
          f.c.block = {bx, by, bz};
          f.c.thread = {unsigned(t % block.x), unsigned(t / block.x % block.y), unsigned(t / (block.x * block.y))};
          f.st = St::Run;
          f.open.clear();
          f.groups.clear();
          f.started = false;
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = &g_sched;
          makecontext(&f.ctx, trampoline, 0);
        }
#if LA_TSAN
        __tsan_release(&g_launch_token);
#endif
        for (;;) {
          for (size_t t = 0; t < threads; ++t) {
            if (g_fibers[t]->st != St::Run) continue;
            g_running = int(t);
            g_cur = &g_fibers[t]->c;
            // Read the fiber table before switching TSan's fiber: after the switch, accesses count as the emulated
            // thread's, and the table's growth by a wider launch would read as a race with that thread.
            ucontext_t* to = &g_fibers[t]->ctx;
#if LA_TSAN
            __tsan_switch_to_fiber(g_fibers[t]->tsan, __tsan_switch_to_fiber_no_sync);
#endif
#if LA_SIMT_JMP
            // Nothing the scheduler keeps in locals changes while the fiber runs (setjmp's rule).
            if (_setjmp(g_sched_jb) == 0) {
              Fiber& f = *g_fibers[t];
              if (f.started) _longjmp(f.jb, 1);
              f.started = true;
              setcontext(to);
            }
#else
            swapcontext(&g_sched, to);
#endif
          }
          // Release complete barriers: a warp's when all its live lanes wait at a warp barrier, the block's when
          // all live threads wait at __syncthreads.
          bool any = false, all_done = true, all_block = true;
          for (size_t w = 0; w < threads; w += 32) {
            bool full = true, some = false;
            for (size_t t = w; t < std::min(threads, w + 32); ++t) {
              const St s = g_fibers[t]->st;
              if (s == St::Done) continue;
              some = true;
              full = full && s == St::WaitWarp;
            }
            if (some && full) {
              for (size_t t = w; t < std::min(threads, w + 32); ++t)
                if (g_fibers[t]->st == St::WaitWarp) g_fibers[t]->st = St::Run;
              any = true;
            }
          }
          if (any) continue;
          for (size_t t = 0; t < threads; ++t) {
            const St s = g_fibers[t]->st;
            all_done = all_done && s == St::Done;
            all_block = all_block && (s == St::Done || s == St::WaitBlock);
          }
          if (all_done) break;
          if (all_block) {
            for (size_t t = 0; t < threads; ++t)
              if (g_fibers[t]->st == St::WaitBlock) g_fibers[t]->st = St::Run;
            continue;
          }
          report("deadlock: threads wait at different barriers (divergent __syncthreads or warp operation)");
          return;  // the fibers are abandoned; their stacks are reset by the next launch
        }
        for (size_t t = 0; t < threads; ++t) {  // copies never waited for still land (no kernel should rely on it)
          Fiber& f = *g_fibers[t];
          for (auto& g : f.groups) apply(g);
          apply(f.open);
          f.groups.clear();
          f.open.clear();
        }
#if LA_TSAN
        __tsan_acquire(&g_end_token);  // the host reads the outputs after the kernel
#endif
      }
  g_running = -1;
  g_cur = nullptr;
}

}  // namespace la_simt

using namespace la_simt;

cudaError_t cudaGetDevice(int* dev) {
  *dev = g_dev;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrMultiProcessorCount ? g_sms : a == cudaDevAttrMaxSharedMemoryPerBlockOptin ? g_optin : 0;
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* fn, cudaFuncAttribute, int v) {
  if (v > g_optin) return cudaErrorInvalidValue;
  g_attr[{fn, g_dev}] = v;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
