// Groups mode: seeded random groups of sends, receives and collectives. Every rank derives the
// same plan for a group from (seed, iteration), then posts its own part of it in an order of its
// own: the order is shuffled per rank, keeping only what matching needs (collectives in plan
// order, and the transfers to one peer, or from one peer, in plan order). A daemon that matched a
// group in posting order, or completed it only in order, would hang here (the watchdog turns that
// into a failure) or deliver data to the wrong buffer.
//
// Big-group mode: one group with more operations than the daemon keeps in flight per client.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ {
namespace {

// splitmix64: the same sequence on every rank, independent of the standard library.
class SeededRng {
 public:
  explicit SeededRng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

// One operation of a group's plan: a transfer src -> dst, or a collective every rank joins.
struct PlannedOp {
  bool transfer = false;
  int src = 0;
  int dst = 0;
  Case coll;  // the collective (and, for transfers, dtype, count and seed)
};

// What one rank posts for a planned op.
enum class Role { Send, Recv, Collective };

struct Posted {
  size_t plan;
  Role role;
  Mem mem;
  uint8_t* a = nullptr;  // send side (or the collective's a)
  uint8_t* b = nullptr;  // receive side (or the collective's b)
  CaseBuffers bufs;
  hc_request_t req = nullptr;
};

std::vector<PlannedOp> planGroup(uint64_t seed, uint64_t iter, int nranks) {
  SeededRng rng(mixBits(seed, 0, iter));
  const uint64_t counts[] = {0, 1, 7, 100, 4097, 65536};
  const Coll colls[] = {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::AllToAll,
                        Coll::ReduceScatter};
  std::vector<PlannedOp> plan(1 + rng.below(10));
  for (size_t i = 0; i < plan.size(); ++i) {
    PlannedOp& p = plan[i];
    p.coll.dtype = kAllDtypes[rng.below(std::size(kAllDtypes))];
    p.coll.count = counts[rng.below(rng.below(8) == 0 ? 6 : 5)];
    p.coll.seed = mixBits(seed, 1, iter * 64 + i);
    p.transfer = rng.below(10) < 6;
    if (p.transfer) {
      p.src = static_cast<int>(rng.below(static_cast<uint64_t>(nranks)));
      p.dst = static_cast<int>(rng.below(static_cast<uint64_t>(nranks)));
      continue;
    }
    p.coll.coll = colls[rng.below(std::size(colls))];
    p.coll.red = rng.below(2) == 0 ? Red::Sum : Red::Max;
    p.coll.root = static_cast<int>(rng.below(static_cast<uint64_t>(nranks)));
  }
  return plan;
}

// This rank's part of the plan, in a shuffled order that keeps each matching channel in order.
std::vector<Posted> myShuffledPart(const std::vector<PlannedOp>& plan, int rank, int nranks,
                                   SeededRng& rng) {
  // Channel 0: collectives; 1 + d: sends to d; 1 + nranks + s: receives from s.
  std::vector<std::vector<Posted>> channels(1 + 2 * static_cast<size_t>(nranks));
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedOp& p = plan[i];
    Mem mem = rng.below(5) == 0 ? Mem::User : Mem::Shared;
    if (!p.transfer) {
      channels[0].push_back(Posted{i, Role::Collective, mem});
      continue;
    }
    if (p.src == rank) channels[1 + p.dst].push_back(Posted{i, Role::Send, mem});
    if (p.dst == rank) channels[1 + nranks + p.src].push_back(Posted{i, Role::Recv, mem});
  }
  std::vector<Posted> out;
  std::vector<size_t> next(channels.size(), 0);
  for (;;) {
    std::vector<size_t> open;
    for (size_t c = 0; c < channels.size(); ++c) {
      if (next[c] < channels[c].size()) open.push_back(c);
    }
    if (open.empty()) break;
    size_t c = open[rng.below(open.size())];
    out.push_back(channels[c][next[c]++]);
  }
  return out;
}

// Buffers of one group, shared (hc_mem_alloc) and plain heap, carved per posted op.
class GroupArena {
 public:
  ~GroupArena() { (void)hc_mem_free(shared_); }
  bool reserve(uint64_t bytes) {
    (void)hc_mem_free(shared_);
    shared_ = nullptr;
    void* p = nullptr;
    if (hc_mem_alloc(&p, bytes) != HC_OK) return false;
    shared_ = static_cast<uint8_t*>(p);
    heap_ = std::make_unique<uint8_t[]>(bytes);
    used_ = 0;
    return true;
  }
  uint8_t* take(Mem mem, uint64_t bytes) {
    uint8_t* p = (mem == Mem::User ? heap_.get() : shared_) + used_;
    used_ += (bytes + 63) / 64 * 64;
    return p;
  }

 private:
  uint8_t* shared_ = nullptr;
  std::unique_ptr<uint8_t[]> heap_;
  uint64_t used_ = 0;
};

hc_status_t post(hc_comm_t comm, const PlannedOp& p, Posted& x) {
  const Case& c = p.coll;
  switch (x.role) {
    case Role::Send:
      return hc_send(x.a, c.count, c.dtype, p.dst, comm, nullptr, &x.req);
    case Role::Recv:
      return hc_recv(x.b, c.count, c.dtype, p.src, comm, nullptr, &x.req);
    case Role::Collective:
      break;
  }
  const void* s = x.bufs.send;
  void* r = x.bufs.recv;
  const hc_redop_t op = c.red == Red::Sum ? HC_SUM : HC_MAX;
  switch (c.coll) {
    case Coll::AllReduce:
      return hc_allreduce(s, r, c.count, c.dtype, op, comm, nullptr, &x.req);
    case Coll::AllGather:
      return hc_allgather(s, r, c.count, c.dtype, comm, nullptr, &x.req);
    case Coll::Broadcast:
      return hc_broadcast(s, r, c.count, c.dtype, c.root, comm, nullptr, &x.req);
    case Coll::AllToAll:
      return hc_alltoall(s, r, c.count, c.dtype, comm, nullptr, &x.req);
    case Coll::ReduceScatter:
      return hc_reduce_scatter(s, r, c.count, c.dtype, op, comm, nullptr, &x.req);
    default:
      return HC_INTERNAL;
  }
}

std::string describeOp(const PlannedOp& p, Role role) {
  if (!p.transfer) return describe(p.coll);
  return std::string(role == Role::Send ? "send " : "recv ") + std::to_string(p.src) + "->" +
         std::to_string(p.dst) + " " + std::string(dtypeName(p.coll.dtype)) +
         " count=" + std::to_string(p.coll.count);
}

}  // namespace

int runGroups(hc_comm_t comm, const WorkerOptions& o) {
  const uint64_t iters = o.iters != 0 ? o.iters : 40;
  uint64_t wrong = 0, errors = 0, opsPosted = 0;
  GroupArena arena;
  for (uint64_t iter = 0; iter < iters && errors == 0; ++iter) {
    watchdogNote("group " + std::to_string(iter));
    std::vector<PlannedOp> plan = planGroup(o.seed, iter, o.nranks);
    SeededRng rng(mixBits(o.seed, o.rank + 1000, iter));
    std::vector<Posted> mine = myShuffledPart(plan, o.rank, o.nranks, rng);
    uint64_t bytes = 64;
    for (const Posted& x : mine) bytes += 2 * caseBufferBytes(plan[x.plan].coll, o.nranks) + 128;
    if (!arena.reserve(bytes)) {
      std::printf("ERROR hc_mem_alloc(%llu): %s\n", static_cast<unsigned long long>(bytes),
                  hc_get_last_error(nullptr));
      return kExitOpFailed;
    }
    for (Posted& x : mine) {
      const PlannedOp& p = plan[x.plan];
      const uint64_t b = caseBufferBytes(p.coll, o.nranks);
      x.a = arena.take(x.mem, b);
      x.b = arena.take(x.mem, b);
      if (x.role == Role::Send)
        fillTransfer(p.coll.dtype, p.coll.count, p.coll.seed, p.src, o.nranks, x.a);
      if (x.role == Role::Recv) clearTransfer(p.coll.dtype, p.coll.count, x.b);
      if (x.role == Role::Collective) {
        x.bufs.a = x.a;
        x.bufs.b = x.b;
        prepareCase(p.coll, o.rank, o.nranks, &x.bufs);
      }
    }
    // Every fourth group is preceded by a collective outside it, posted without waiting: the
    // group must run after it on every rank, as posting order says.
    const bool before = iter % 4 == 3;
    Posted lead{0, Role::Collective, Mem::Shared};
    PlannedOp leadOp;
    leadOp.coll = Case{Coll::AllReduce, HC_INT32, Red::Sum, 7, false, 0, o.seed + iter};
    std::unique_ptr<uint8_t[]> leadBuf;
    if (before) {
      leadBuf = std::make_unique<uint8_t[]>(caseBufferBytes(leadOp.coll, o.nranks) * 2);
      lead.bufs.a = leadBuf.get();
      lead.bufs.b = leadBuf.get() + caseBufferBytes(leadOp.coll, o.nranks);
      prepareCase(leadOp.coll, o.rank, o.nranks, &lead.bufs);
      if (hc_status_t rc = post(comm, leadOp, lead); rc != HC_OK) {
        std::printf("ERROR group %llu: lead allreduce: status=%d text=%s\n",
                    static_cast<unsigned long long>(iter), rc, hc_get_last_error(comm));
        return kExitOpFailed;
      }
    }
    hc_status_t rc = hc_group_start();
    for (size_t k = 0; k < mine.size() && rc == HC_OK; ++k) {
      rc = post(comm, plan[mine[k].plan], mine[k]);
      if (rc != HC_OK) {
        std::printf("ERROR group %llu: posting %s: status=%d text=%s\n",
                    static_cast<unsigned long long>(iter),
                    describeOp(plan[mine[k].plan], mine[k].role).c_str(), rc,
                    hc_get_last_error(comm));
      }
    }
    hc_status_t endRc = hc_group_end();
    if (rc != HC_OK || endRc != HC_OK) {
      if (endRc != HC_OK)
        std::printf("ERROR group %llu: hc_group_end: status=%d text=%s\n",
                    static_cast<unsigned long long>(iter), endRc, hc_get_last_error(comm));
      return kExitOpFailed;
    }
    opsPosted += mine.size();
    // Waited for in an order of their own as well: completion order is the daemon's business.
    std::vector<size_t> order(mine.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    for (size_t k = order.size(); k > 1; --k) std::swap(order[k - 1], order[rng.below(k)]);
    if (before) {
      if (hc_status_t w = hc_wait(&lead.req); w != HC_OK) {
        std::printf("ERROR group %llu: lead allreduce: status=%d text=%s\n",
                    static_cast<unsigned long long>(iter), w, hc_get_last_error(comm));
        ++errors;
      }
      CaseResult r;
      verifyCase(leadOp.coll, o.rank, o.nranks, lead.bufs, &r);
      wrong += r.wrong;
    }
    for (size_t k : order) {
      Posted& x = mine[k];
      const PlannedOp& p = plan[x.plan];
      if (hc_status_t w = hc_wait(&x.req); w != HC_OK) {
        std::printf("ERROR group %llu: %s: status=%d text=%s\n",
                    static_cast<unsigned long long>(iter), describeOp(p, x.role).c_str(), w,
                    hc_get_last_error(comm));
        ++errors;
        continue;
      }
      CaseResult r;
      if (x.role == Role::Recv) {
        verifyTransfer(p.coll.dtype, p.coll.count, p.coll.seed, p.src, o.nranks, x.b, &r);
      } else if (x.role == Role::Collective) {
        verifyCase(p.coll, o.rank, o.nranks, x.bufs, &r);
      }
      if (r.wrong != 0) {
        std::printf("WRONG group %llu: %s: %llu wrong, first %s\n",
                    static_cast<unsigned long long>(iter), describeOp(p, x.role).c_str(),
                    static_cast<unsigned long long>(r.wrong), r.firstWrong.c_str());
        wrong += r.wrong;
      }
    }
    std::printf("progress %llu\n", static_cast<unsigned long long>(iter));
  }
  std::printf("groups %llu ops %llu errors %llu\n#wrong %llu\n",
              static_cast<unsigned long long>(iters), static_cast<unsigned long long>(opsPosted),
              static_cast<unsigned long long>(errors), static_cast<unsigned long long>(wrong));
  if (errors != 0) return kExitOpFailed;
  return wrong == 0 ? kExitOk : kExitWrong;
}

int runBigGroup(hc_comm_t comm, const WorkerOptions& o) {
  // By default more than the daemon's per-client in-flight limit (4096) and the ring (256
  // entries); --iters sets another number of send/recv pairs.
  const uint64_t kPairs = o.iters != 0 ? o.iters : 2100;
  // One element per transfer, in slots wide enough for the guard bytes checked after it.
  constexpr uint64_t kSlot = 128;
  const int next = (o.rank + 1) % o.nranks;
  const int prev = (o.rank + o.nranks - 1) % o.nranks;
  void* s = nullptr;
  void* r = nullptr;
  if (hc_mem_alloc(&s, kPairs * kSlot) != HC_OK || hc_mem_alloc(&r, kPairs * kSlot) != HC_OK) {
    std::printf("ERROR hc_mem_alloc: %s\n", hc_get_last_error(nullptr));
    return kExitOpFailed;
  }
  auto* send = static_cast<uint8_t*>(s);
  auto* recv = static_cast<uint8_t*>(r);
  std::vector<hc_request_t> reqs(2 * kPairs, nullptr);
  watchdogNote("posting a group of " + std::to_string(2 * kPairs) + " operations");
  hc_status_t rc = hc_group_start();
  for (uint64_t i = 0; i < kPairs && rc == HC_OK; ++i) {
    fillTransfer(HC_INT32, 1, o.seed + i, o.rank, o.nranks, send + i * kSlot);
    clearTransfer(HC_INT32, 1, recv + i * kSlot);
    rc = hc_send(send + i * kSlot, 1, HC_INT32, next, comm, nullptr, &reqs[2 * i]);
    if (rc == HC_OK)
      rc = hc_recv(recv + i * kSlot, 1, HC_INT32, prev, comm, nullptr, &reqs[2 * i + 1]);
  }
  hc_status_t endRc = hc_group_end();
  printStatus("posted", rc != HC_OK ? rc : endRc, comm);
  if (rc != HC_OK || endRc != HC_OK) return kExitOpFailed;
  watchdogNote("waiting for a group of " + std::to_string(2 * kPairs) + " operations");
  uint64_t wrong = 0;
  hc_status_t first = HC_OK;
  for (uint64_t i = 0; i < kPairs; ++i) {
    hc_status_t a = hc_wait(&reqs[2 * i]);
    hc_status_t b = hc_wait(&reqs[2 * i + 1]);
    if (first == HC_OK) first = a != HC_OK ? a : b;
    CaseResult res;
    verifyTransfer(HC_INT32, 1, o.seed + i, prev, o.nranks, recv + i * kSlot, &res);
    wrong += res.wrong;
  }
  printStatus("result", first, comm);
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrong));
  (void)hc_mem_free(s);
  (void)hc_mem_free(r);
  if (first != HC_OK) return kExitOpFailed;
  return wrong == 0 ? kExitOk : kExitWrong;
}

}  // namespace hc::integ
