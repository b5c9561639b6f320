// The stream model the fake GPU runtimes share (the fake CUDA driver, hc_fake_cuda, and the fake
// HIP runtime, hc_fake_hip_client): each stream is a FIFO run in order by a worker thread of its
// own, as a GPU runs a stream's work after the work queued before it. Items are host functions
// (cuLaunchHostFunc / hipLaunchHostFunc), waits on a 32-bit word in host memory
// (cuStreamWaitValue32 / hipStreamWaitValue32) and "kernels" the tests enqueue through the fakes'
// controls (a delay, then a function of the test's, e.g. one that fills a buffer). Every item
// writes its begin and end to the runtime's log with a sequence number, so a test reads in what
// order the work ran. A stream marked capturing stands for one being captured into a graph: the
// fakes answer cuStreamIsCapturing / hipStreamIsCapturing from it.
//
// Not modelled: implicit synchronisation between the legacy (NULL) stream and blocking streams,
// events, errors of a stream. Header of a test-only library; depends on the C++ library only.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace hc::device::testing {

// The log of one fake runtime: lines "<seq> <stream> <what>", in the order things happened.
// Also appended to the file named by the environment variable given (read once, at
// construction), so a test can read it after the process ended. Threads: any.
class FakeStreamLog {
 public:
  explicit FakeStreamLog(const char* fileVariable);
  ~FakeStreamLog();
  FakeStreamLog(const FakeStreamLog&) = delete;
  FakeStreamLog& operator=(const FakeStreamLog&) = delete;

  // Appends one line; returns its sequence number (1, 2, ...).
  uint64_t append(const std::string& stream, const std::string& what);
  std::string text() const;
  // Copies text() into out (NUL-terminated, cut to capacity - 1 bytes); returns text()'s length,
  // as snprintf does, so a caller may ask again with room enough.
  size_t copy(char* out, size_t capacity) const;

 private:
  mutable std::mutex mutex_;
  uint64_t next_ = 1;  // guarded by mutex_
  std::string text_;   // guarded by mutex_
  FILE* file_ = nullptr;
};

// How a wait item compares the word with its value.
enum class WaitCompare {
  // CU_STREAM_WAIT_VALUE_GEQ: (int32_t)(*word - value) >= 0, so a counter may wrap.
  CudaGeq,
  // hipStreamWaitValueGte: (*word & mask) >= value, unsigned.
  HipGte,
};

class FakeStream {
 public:
  using HostFn = void (*)(void*);

  // Borrowed: the log outlives the stream.
  FakeStream(std::string name, FakeStreamLog& log);
  // Waits until the queued work has run, then stops the worker. A wait that is never satisfied
  // blocks here, as it would block the GPU.
  ~FakeStream();
  FakeStream(const FakeStream&) = delete;
  FakeStream& operator=(const FakeStream&) = delete;

  const std::string& name() const { return name_; }

  // Enqueue; each returns at once.
  void hostFunction(HostFn fn, void* arg);
  // Later items wait until the word satisfies the comparison. The word is polled every 100 us
  // with a sleep between looks: on two cores nothing may spin.
  void waitValue32(const volatile uint32_t* word, uint32_t value, WaitCompare compare,
                   uint32_t mask = 0xFFFFFFFFu);
  // Sleeps delayMs, then runs fn(arg) (when fn is not null).
  void kernel(const std::string& label, int delayMs, HostFn fn, void* arg);
  // Copies bytes from src to dst (cuMemcpyDtoHAsync / hipMemcpyDtoHAsync: device memory is host
  // memory here).
  void copy(void* dst, const void* src, size_t bytes);

  // Runs work on the calling thread once the work queued before it has run, and before anything
  // queued after this returns: how the daemon half of the fake CUDA driver keeps its copies and
  // launches, which it performs at once, in stream order.
  void runInOrder(const std::function<void()>& work);
  // Blocks until every item queued before the call has run (cuStreamSynchronize).
  void synchronize();
  bool idle() const;

  void setCapturing(bool capturing);
  bool capturing() const;

 private:
  struct Item {
    std::string what;  // for the log: "kernel produce", "host-fn", "wait 0x... >= 1"
    const char* endWord;  // "end", or "satisfied" for a wait
    std::function<void()> run;
  };
  void enqueue(Item item);
  void workerLoop();

  const std::string name_;
  FakeStreamLog& log_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;  // guarded by mutex_
  bool running_ = false;    // an item is being run; guarded by mutex_
  bool stopping_ = false;   // guarded by mutex_
  bool capturing_ = false;  // guarded by mutex_
  std::thread worker_;
};

}  // namespace hc::device::testing
