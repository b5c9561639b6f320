#include "bench/perf_cases.h"

#include <algorithm>

namespace hc::bench {
namespace {

Case makeCase(OpKind op, hc_dtype_t dtype, hc_redop_t redop, int root, size_t size, int nranks) {
  const size_t ws = dtypeSize(dtype);
  const size_t n = static_cast<size_t>(nranks);
  const size_t count = size / ws;
  Case c{};
  c.op = op;
  c.dtype = dtype;
  c.redop = redop;
  c.root = root;
  switch (op) {
    case OpKind::AllReduce:
    case OpKind::Broadcast:
    case OpKind::Reduce:
      c.sendCount = c.recvCount = c.count = count;
      break;
    case OpKind::AllGather:  // size = total gathered bytes
      c.sendCount = c.count = count / n;
      c.recvCount = c.sendCount * n;
      c.sendInplaceOffset = c.sendCount;
      break;
    case OpKind::ReduceScatter:  // size = total input bytes
      c.recvCount = c.count = count / n;
      c.sendCount = c.recvCount * n;
      c.recvInplaceOffset = c.recvCount;
      break;
    case OpKind::AllToAll:  // size = each rank's whole send (and receive) buffer
      c.count = count / n;
      c.sendCount = c.recvCount = c.count * n;
      break;
    case OpKind::Gather:  // size = the root's gathered bytes
      c.sendCount = c.count = count / n;
      c.recvCount = c.sendCount * n;
      c.sendInplaceOffset = c.sendCount;
      break;
    case OpKind::Scatter:  // size = the root's scattered bytes
      c.recvCount = c.count = count / n;
      c.sendCount = c.recvCount * n;
      c.recvInplaceOffset = c.recvCount;
      break;
    case OpKind::SendRecv:  // size = the bytes each rank sends (and receives)
      c.sendCount = c.recvCount = c.count = count;
      break;
    case OpKind::Barrier:
      break;
  }
  c.bytes = std::max(c.sendCount, c.recvCount) * ws;
  return c;
}

}  // namespace

std::vector<Case> buildCases(const Options& opts) {
  std::vector<Case> cases;
  int group = 0;
  for (OpKind op : opts.ops) {
    bool first = true;
    if (op == OpKind::Barrier) {  // no data: one row
      Case c = makeCase(op, HC_INT8, kNoRedop, -1, 0, opts.nranks);
      c.group = group++;
      c.firstOfOp = c.lastOfGroup = true;
      cases.push_back(c);
      continue;
    }
    std::vector<hc_redop_t> redops = hasRedop(op) ? opts.redops : std::vector<hc_redop_t>{kNoRedop};
    int root = hasRoot(op) ? opts.root : -1;
    for (hc_dtype_t dtype : opts.dtypes) {
      for (hc_redop_t redop : redops) {
        for (size_t size = opts.minBytes; size <= opts.maxBytes;) {
          Case c = makeCase(op, dtype, redop, root, size, opts.nranks);
          c.group = group;
          c.firstOfOp = first;
          first = false;
          cases.push_back(c);
          size_t next = opts.stepFactor > 1 ? size * opts.stepFactor : size + opts.stepBytes;
          if (next <= size) break;  // -b 0 with a factor, or overflow
          size = next;
        }
        cases.back().lastOfGroup = true;
        ++group;
      }
    }
  }
  return cases;
}

double busFactor(OpKind op, int nranks) {
  double n = nranks;
  switch (op) {
    case OpKind::AllReduce:
      return 2.0 * (n - 1) / n;
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::AllToAll:
    case OpKind::Gather:
    case OpKind::Scatter:
      return (n - 1) / n;
    case OpKind::Broadcast:
    case OpKind::Reduce:
    case OpKind::SendRecv:
      return 1.0;
    case OpKind::Barrier:
      return 0.0;
  }
  return 0.0;
}

size_t maxBufferBytes(const std::vector<Case>& cases) {
  size_t m = 0;
  for (const Case& c : cases) m = std::max(m, c.bytes);
  return m;
}

}  // namespace hc::bench
