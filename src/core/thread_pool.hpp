// A persistent pool of compute threads with a blocking parallel_for.
//
// The pool owns size()-1 worker threads; the thread that calls parallel_for is the last member
// and takes part in the work, so ThreadPool(1) runs everything on the caller. Workers sleep on a
// condition variable between jobs after a short spin.
//
// Contract:
//   - parallel_for returns when every index has been visited exactly once.
//   - Called from inside a task of the same pool (nested use), it runs the range inline on the
//     calling thread: safe, never deadlocks, just not parallel.
//   - Called from several outside threads at once, the calls are serialized.
//   - An exception thrown by a task is rethrown to the caller after all tasks have stopped
//     (the first one wins); the remaining chunks are skipped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.hpp"

namespace infer {

class ThreadPool {
 public:
  // n_threads <= 0: one per hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n). `grain` is the chunk length
  // (0: about four chunks per thread).
  void parallel_for(size_t n, FunctionRef<void(size_t begin, size_t end)> fn, size_t grain = 0);

  // True on a thread that is currently running a task of this pool.
  bool in_task() const noexcept;

 private:
  struct Job;
  void worker_main(int index);
  void run_chunks(Job& job) noexcept;

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // serializes outside callers

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};
  Job* job_ = nullptr;     // guarded by mutex_ for publication
  std::atomic<int> busy_workers_{0};  // workers inside the current job (joined under mutex_)
  bool stop_ = false;
};

}  // namespace infer
