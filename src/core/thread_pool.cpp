#include "core/thread_pool.hpp"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define INFER_CPU_RELAX() _mm_pause()
#else
#define INFER_CPU_RELAX() ((void)0)
#endif

namespace infer {

namespace {
thread_local const ThreadPool* tl_pool = nullptr;  // pool whose task this thread is running
constexpr int kSpinIterations = 4000;              // ~10-40 us before sleeping
}  // namespace

struct ThreadPool::Job {
  FunctionRef<void(size_t, size_t)> fn;
  size_t n;
  size_t grain;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 0; i + 1 < n_threads; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::in_task() const noexcept { return tl_pool == this; }

void ThreadPool::run_chunks(Job& job) noexcept {
  const ThreadPool* outer = tl_pool;
  tl_pool = this;
  for (;;) {
    if (job.failed.load(std::memory_order_relaxed)) break;
    size_t begin = job.next.fetch_add(job.grain, std::memory_order_relaxed);
    if (begin >= job.n) break;
    size_t end = std::min(job.n, begin + job.grain);
    try {
      job.fn(begin, end);
    } catch (...) {
      std::lock_guard lock(job.error_mutex);
      if (!job.error) job.error = std::current_exception();
      job.failed.store(true, std::memory_order_relaxed);
    }
  }
  tl_pool = outer;
}

void ThreadPool::worker_main(int) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly: back-to-back jobs (one per layer op) arrive within microseconds.
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++i)
      INFER_CPU_RELAX();
    Job* job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
      seen = generation_.load(std::memory_order_relaxed);
      if (stop_) return;
      job = job_;
      if (!job) continue;
      busy_workers_.fetch_add(1, std::memory_order_relaxed);
    }
    run_chunks(*job);
    if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The caller spins on the count first and sleeps only after that; wake it if it does.
      std::lock_guard lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(size_t n, FunctionRef<void(size_t, size_t)> fn, size_t grain) {
  if (n == 0) return;
  const size_t threads = static_cast<size_t>(size());
  if (grain == 0) grain = std::max<size_t>(1, (n + threads * 4 - 1) / (threads * 4));
  if (threads == 1 || in_task() || n <= grain) {
    // Nested use or nothing to share: run inline. Still mark the thread as in a task so that
    // deeper nesting stays inline too.
    const ThreadPool* outer = tl_pool;
    tl_pool = this;
    struct Restore {
      const ThreadPool* p;
      ~Restore() { tl_pool = p; }
    } restore{outer};
    for (size_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain));
    return;
  }

  std::lock_guard submit(submit_mutex_);
  Job job{fn, n, grain};
  {
    std::lock_guard lock(mutex_);
    job_ = &job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks(job);
  {
    // Workers that have not picked the job up yet must not see it after we return.
    std::lock_guard lock(mutex_);
    job_ = nullptr;
  }
  // The workers still inside the job finish within microseconds, typically: spin before sleeping
  // (a sleep and wake-up costs tens of microseconds, once per operation of every layer).
  for (int i = 0; i < kSpinIterations && busy_workers_.load(std::memory_order_acquire) != 0; ++i) INFER_CPU_RELAX();
  if (busy_workers_.load(std::memory_order_acquire) != 0) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_workers_.load(std::memory_order_acquire) == 0; });
  }
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace infer
