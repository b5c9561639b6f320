// Split mode: hc_comm_split into several colors plus NOCOLOR ranks, verified collectives and a
// ring exchange on every new communicator at the same time (each rank is its own process), then
// the parent again, then a second split (one color, reversed keys) of the parent.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ {
namespace {

constexpr int kSubIterations = 12;

// Every third rank (2, 5, ...) stays out; the others alternate between colors 0 and 1. Color 1
// orders its ranks by descending key (reversed), color 0 gives every rank the same key (ordered
// by parent rank).
int colorOf(int rank) { return rank % 3 == 2 ? HC_SPLIT_NOCOLOR : rank % 2; }
int keyOf(int rank) { return colorOf(rank) == 1 ? 100 - rank : 7; }

// The parent ranks of color's communicator in their new rank order, computed from the rule
// NCCL documents: by key, ties by parent rank.
std::vector<int> membersOf(int color, int nranks, int (*key)(int), int (*colorFn)(int)) {
  std::vector<int> members;
  for (int r = 0; r < nranks; ++r) {
    if (colorFn(r) == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int x, int y) { return key(x) < key(y); });
  return members;
}

int sameColor(int) { return 0; }
int reversedKey(int rank) { return -rank; }

struct Tally {
  uint64_t wrong = 0;
  uint64_t errors = 0;
};

// Runs and verifies one case on comm, whose rank and size this rank already checked.
void runChecked(CaseRunner& runner, const Case& c, const char* where, Tally* t) {
  watchdogNote(std::string(where) + ": " + describe(c));
  CaseResult r = runner.run(c);
  if (r.status != HC_OK) {
    ++t->errors;
    std::printf("ERROR %s: %s: status=%d text=%s\n", where, describe(c).c_str(), r.status,
                r.error.c_str());
  } else if (r.wrong != 0) {
    t->wrong += r.wrong;
    std::printf("WRONG %s: %s: %llu wrong, first %s\n", where, describe(c).c_str(),
                static_cast<unsigned long long>(r.wrong), r.firstWrong.c_str());
  }
}

// Splits comm and checks the new communicator's size and this rank's place in it. Returns the
// new communicator (null for NOCOLOR, or when the split failed, which is counted).
hc_comm_t splitAndCheck(hc_comm_t comm, int rank, int nranks, int (*colorFn)(int), int (*key)(int),
                        const char* what, Tally* t) {
  watchdogNote(what);
  hc_comm_t sub = nullptr;
  hc_status_t rc = hc_comm_split(comm, colorFn(rank), key(rank), &sub, nullptr);
  if (rc != HC_OK) {
    ++t->errors;
    std::printf("ERROR %s: hc_comm_split(color %d, key %d): status=%d text=%s\n", what,
                colorFn(rank), key(rank), rc, hc_get_last_error(comm));
    return nullptr;
  }
  if (colorFn(rank) == HC_SPLIT_NOCOLOR) {
    std::printf("split rank=-1 size=0\n");
    if (sub != nullptr) {
      ++t->wrong;
      std::printf("WRONG %s: a NOCOLOR rank got a communicator\n", what);
    }
    return nullptr;
  }
  std::vector<int> members = membersOf(colorFn(rank), nranks, key, colorFn);
  const int wantRank =
      static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  int gotRank = -1, gotSize = -1;
  if (sub == nullptr || hc_comm_user_rank(sub, &gotRank) != HC_OK ||
      hc_comm_count(sub, &gotSize) != HC_OK) {
    ++t->errors;
    std::printf("ERROR %s: no usable communicator from hc_comm_split\n", what);
    return sub;
  }
  std::printf("split rank=%d size=%d\n", gotRank, gotSize);
  if (gotRank != wantRank || gotSize != static_cast<int>(members.size())) {
    ++t->wrong;
    std::printf("WRONG %s: parent rank %d is rank %d of %d, expected rank %d of %zu\n", what, rank,
                gotRank, gotSize, wantRank, members.size());
  }
  return sub;
}

// The sub-communicator's workload; every member runs the same list.
void runOnSub(hc_comm_t sub, int subRank, int subSize, uint64_t seed, const char* where, Tally* t) {
  CaseRunner runner(sub, subRank, subSize);
  if (std::string e = runner.allocate(4097); !e.empty()) {
    ++t->errors;
    std::printf("ERROR %s: %s\n", where, e.c_str());
    return;
  }
  for (int i = 0; i < kSubIterations && t->errors == 0; ++i) {
    const uint64_t s = seed + 16 * static_cast<uint64_t>(i);
    runChecked(runner, Case{Coll::AllReduce, HC_INT32, Red::Sum, 4097, false, 0, s}, where, t);
    runChecked(runner, Case{Coll::AllGather, HC_BFLOAT16, Red::Sum, 100, i % 2 == 1, 0, s + 1},
               where, t);
    runChecked(runner, Case{Coll::SendRecv, HC_FLOAT32, Red::Sum, 257, false, 0, s + 2}, where, t);
    runChecked(runner,
               Case{Coll::Broadcast, HC_FLOAT8E5M2, Red::Sum, 33, false, i % subSize, s + 3}, where,
               t);
  }
}

}  // namespace

int runSplit(hc_comm_t comm, const WorkerOptions& o) {
  Tally t;
  // Round 1: several colors and NOCOLOR ranks; the new communicators work at the same time.
  hc_comm_t sub = splitAndCheck(comm, o.rank, o.nranks, colorOf, keyOf, "split by color", &t);
  if (sub != nullptr && t.errors == 0) {
    int subRank = 0, subSize = 0;
    (void)hc_comm_user_rank(sub, &subRank);
    (void)hc_comm_count(sub, &subSize);
    std::string where = "color " + std::to_string(colorOf(o.rank));
    runOnSub(sub, subRank, subSize, o.seed + 1000 * static_cast<uint64_t>(colorOf(o.rank)),
             where.c_str(), &t);
  }
  // The parent keeps working, its sequence unaffected by the split and the children's ops.
  if (t.errors == 0) {
    CaseRunner parent(comm, o.rank, o.nranks);
    if (std::string e = parent.allocate(4097); !e.empty()) {
      ++t.errors;
      std::printf("ERROR parent: %s\n", e.c_str());
    } else {
      runChecked(parent, Case{Coll::AllReduce, HC_FLOAT16, Red::Sum, 4097, false, 0, o.seed + 7},
                 "parent", &t);
      runChecked(parent, Case{Coll::AllToAll, HC_INT64, Red::Sum, 33, false, 0, o.seed + 8},
                 "parent", &t);
    }
  }
  // Round 2: one color with reversed keys: the new ranks are the parent ranks reversed.
  hc_comm_t dup = nullptr;
  if (t.errors == 0) {
    dup = splitAndCheck(comm, o.rank, o.nranks, sameColor, reversedKey, "split reversed", &t);
  }
  if (dup != nullptr && t.errors == 0) {
    CaseRunner runner(dup, o.nranks - 1 - o.rank, o.nranks);
    if (std::string e = runner.allocate(4097); !e.empty()) {
      ++t.errors;
      std::printf("ERROR reversed: %s\n", e.c_str());
    } else {
      runChecked(runner, Case{Coll::Gather, HC_INT8, Red::Sum, 7, false, 0, o.seed + 9}, "reversed",
                 &t);
      runChecked(runner, Case{Coll::SendRecv, HC_UINT64, Red::Sum, 4097, false, 0, o.seed + 10},
                 "reversed", &t);
    }
  }
  for (hc_comm_t c : {sub, dup}) {
    if (c == nullptr) continue;
    hc_status_t rc = t.errors == 0 ? hc_comm_destroy(c) : hc_comm_abort(c);
    if (rc != HC_OK) {
      ++t.errors;
      printStatus("destroy", rc, nullptr);
    }
  }
  std::printf("errors %llu\n#wrong %llu\n", static_cast<unsigned long long>(t.errors),
              static_cast<unsigned long long>(t.wrong));
  if (t.errors != 0) return kExitOpFailed;
  return t.wrong == 0 ? kExitOk : kExitWrong;
}

}  // namespace hc::integ
