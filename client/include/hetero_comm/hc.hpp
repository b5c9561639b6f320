// hetero_comm/hc.hpp: a thin C++ layer over hc.h. Owning handles (Comm, Request, Buffer) that
// release themselves, and hc_status_t returned as-is: no exceptions cross this header.
#pragma once

#include <cstddef>
#include <utility>

#include "hetero_comm/hc.h"

namespace hetero_comm {

class Request {
 public:
  Request() = default;
  Request(Request&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  Request& operator=(Request&& o) noexcept {
    if (this != &o) {
      reset();
      r_ = std::exchange(o.r_, nullptr);
    }
    return *this;
  }
  ~Request() { reset(); }
  hc_request_t* out() { return &r_; }
  bool pending() const { return r_ != nullptr; }
  hc_status_t wait() { return r_ == nullptr ? HC_OK : hc_wait(&r_); }
  // Abandoning a request waits for it: its buffers must stay valid until it completes.
  void reset() {
    if (r_ != nullptr) (void)hc_wait(&r_);
  }

 private:
  hc_request_t r_ = nullptr;
};

class Comm {
 public:
  Comm() = default;
  Comm(Comm&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Comm& operator=(Comm&& o) noexcept {
    if (this != &o) {
      destroy();
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  ~Comm() { destroy(); }

  hc_status_t init(int nranks, const hc_unique_id_t& id, int rank) {
    destroy();
    return hc_comm_init_rank(&c_, nranks, id, rank);
  }
  hc_comm_t get() const { return c_; }
  int rank() const {
    int r = -1;
    (void)hc_comm_user_rank(c_, &r);
    return r;
  }
  int size() const {
    int n = 0;
    (void)hc_comm_count(c_, &n);
    return n;
  }
  const char* lastError() const { return hc_get_last_error(c_); }
  hc_status_t abort() { return hc_comm_abort(std::exchange(c_, nullptr)); }
  hc_status_t destroy() { return c_ == nullptr ? HC_OK : hc_comm_destroy(std::exchange(c_, nullptr)); }

  template <typename T>
  hc_status_t allreduce(const T* send, T* recv, size_t count, hc_dtype_t dtype, hc_redop_t op,
                        Request* req = nullptr) {
    return hc_allreduce(send, recv, count, dtype, op, c_, nullptr, req ? req->out() : nullptr);
  }

 private:
  hc_comm_t c_ = nullptr;
};

// Memory from the daemon's segment for this process, freed on destruction.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) { status_ = hc_mem_alloc(&p_, bytes); }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), status_(o.status_) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      (void)hc_mem_free(p_);
      p_ = std::exchange(o.p_, nullptr);
      status_ = o.status_;
    }
    return *this;
  }
  ~Buffer() { (void)hc_mem_free(p_); }
  hc_status_t status() const { return status_; }
  template <typename T = void>
  T* data() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  hc_status_t status_ = HC_OK;
};

}  // namespace hetero_comm
