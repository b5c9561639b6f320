// Shared by the SimDevice tests: the test's own int32 reduction kernel (so these tests do not
// depend on coll/) and a gate that holds a stream's worker inside that kernel until opened.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "daemon/device/device.h"

namespace hc::device::testing {

constexpr Dtype kInt32 = Dtype{2};  // ncclInt32
constexpr RedOp kSum = RedOp{0};    // ncclSum
constexpr RedOp kMax = RedOp{2};    // ncclMax

// While closed, a kernel call blocks (sleeping 1 ms at a time, 20 s at most, so a broken test
// fails instead of hanging).
struct Gate {
  std::atomic<bool> open{true};
  std::atomic<int> waiting{0};
  void hold() {
    waiting.fetch_add(1);
    for (int i = 0; i < 20000 && !open.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    waiting.fetch_sub(1);
  }
};

// int32 sum and max; counts the elements it reduced and the thread it ran on.
struct TestKernel {
  std::atomic<size_t>* elements;
  Gate* gate = nullptr;
  std::atomic<std::thread::id>* ranOn = nullptr;
  void operator()(const ReduceWork& work, size_t begin, size_t end) const {
    if (gate != nullptr) gate->hold();
    if (ranOn != nullptr) ranOn->store(std::this_thread::get_id());
    EXPECT_EQ(work.dtype, kInt32);
    for (size_t e = begin; e < end; ++e) {
      int32_t acc = static_cast<const int32_t*>(work.inputs[0])[e];
      for (size_t i = 1; i < work.inputs.size(); ++i) {
        int32_t x = static_cast<const int32_t*>(work.inputs[i])[e];
        acc = work.redop == kMax ? std::max(acc, x) : acc + x;
      }
      for (void* out : work.outputs) static_cast<int32_t*>(out)[e] = acc;
    }
    *elements += end - begin;
  }
};

// Polls queryEvent until the event completes or fails (10 s at most).
inline Result<bool> waitEvent(Device& device, EventId event) {
  for (int i = 0; i < 10000; ++i) {
    Result<bool> done = device.queryEvent(event);
    if (!done.isOk() || *done) return done;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace hc::device::testing
