// The rows of one hc-perf run, computed once before the ranks are forked so that the parent and
// every rank walk the same list. Sizes and counts follow nccl-tests' getCollByteCount: the size
// column is max(send, recv) bytes, the count column the count argument of the call.
#pragma once

#include <cstddef>
#include <vector>

#include "bench/perf_options.h"

namespace hc::bench {

struct Case {
  OpKind op;
  hc_dtype_t dtype;
  hc_redop_t redop;  // kNoRedop when the collective has none
  int root;          // -1 when the collective has none
  size_t bytes;      // the size column
  size_t count;      // the count column: the count passed to the call
  size_t sendCount;  // elements in the send buffer
  size_t recvCount;  // elements in the receive buffer
  // In-place layout, in elements, times the rank (nccl-tests): allgather and gather send from
  // recv + rank * sendInplaceOffset; reduce-scatter and scatter receive into
  // send + rank * recvInplaceOffset.
  size_t sendInplaceOffset;
  size_t recvInplaceOffset;
  int group;         // index of the (op, dtype, redop) table this row belongs to
  bool firstOfOp;    // print the column header before this row
  bool lastOfGroup;  // print the group's trailers after this row
  // hc-perf measures memory bandwidth right before and after this case, for its bound, while
  // the ranks wait (they start it only when the parent says so).
  bool measuredBound = false;
};

std::vector<Case> buildCases(const Options& opts);

// nccl-tests bus bandwidth factors: busbw = algbw * factor: allreduce 2(n-1)/n; allgather,
// reduce_scatter, alltoall, gather and scatter (n-1)/n; broadcast, reduce and sendrecv 1.
double busFactor(OpKind op, int nranks);

// Bytes per rank the largest buffer of any case needs (each rank allocates this once).
size_t maxBufferBytes(const std::vector<Case>& cases);

}  // namespace hc::bench
