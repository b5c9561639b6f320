// Abort mode (an abort while a group or a split is pending) and badargs mode (calls the client
// library or the daemon must refuse).
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ {
namespace {

void waitForFile(const std::string& path) {
  struct stat st;
  while (::stat(path.c_str(), &st) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// The pending operation of the abort mode, on a rank that is not the absent one: a group of
// transfers with every other rank (the absent one included, so it can never complete).
hc_status_t postPendingGroup(hc_comm_t comm, const WorkerOptions& o, uint8_t* buf,
                             std::vector<hc_request_t>* reqs) {
  hc_status_t rc = hc_group_start();
  for (int peer = 0; peer < o.nranks && rc == HC_OK; ++peer) {
    if (peer == o.rank) continue;
    reqs->push_back(nullptr);
    rc = hc_send(buf, 16, HC_INT32, peer, comm, nullptr, &reqs->back());
    reqs->push_back(nullptr);
    if (rc == HC_OK)
      rc = hc_recv(buf + 4096 * (1 + peer), 16, HC_INT32, peer, comm, nullptr, &reqs->back());
  }
  hc_status_t endRc = hc_group_end();
  return rc != HC_OK ? rc : endRc;
}

}  // namespace

int runAbort(hc_comm_t comm, const WorkerOptions& o) {
  const int absent = o.nranks - 1;
  const int aborter = o.aborter >= 0 ? o.aborter : absent;
  void* p = nullptr;
  if (hc_mem_alloc(&p, 4096 * (1 + static_cast<size_t>(o.nranks))) != HC_OK) {
    printStatus("result", HC_NO_RESOURCE, nullptr);
    return kExitOpFailed;
  }
  auto* buf = static_cast<uint8_t*>(p);
  // A waiting rank that aborts does so from a second thread while its main thread waits.
  std::thread helper;
  if (o.rank == aborter && o.rank != absent) {
    helper = std::thread([&] {
      waitForFile(o.goFile);
      printStatus("aborted", hc_comm_abort(comm), nullptr);
    });
  }
  // The aborter's handle is gone once hc_comm_abort returns: ask for the thread's last error.
  hc_comm_t errComm = o.rank == aborter ? nullptr : comm;
  int code = kExitOk;
  if (o.rank == absent) {
    std::printf("idle\n");
    std::fflush(stdout);
    waitForFile(o.goFile);
    if (o.rank == aborter) {
      printStatus("aborted", hc_comm_abort(comm), nullptr);
    } else {
      // Joins late: the communicator was aborted elsewhere, so this must fail too.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      hc_status_t rc;
      if (o.phase == "split") {
        hc_comm_t sub = nullptr;
        rc = hc_comm_split(comm, 0, o.rank, &sub, nullptr);
        if (rc == HC_OK && sub != nullptr) (void)hc_comm_abort(sub);
      } else {
        std::vector<hc_request_t> reqs;
        rc = postPendingGroup(comm, o, buf, &reqs);
        for (auto& r : reqs) {
          hc_status_t w = r != nullptr ? waitFor(&r, 10000) : HC_OK;
          if (rc == HC_OK) rc = w;
        }
      }
      printStatus("later", rc, comm);
    }
  } else if (o.phase == "split") {
    std::printf("posted\n");
    std::fflush(stdout);
    hc_comm_t sub = nullptr;
    hc_status_t rc = hc_comm_split(comm, 0, o.rank, &sub, nullptr);
    printStatus("result", rc, errComm);
    if (rc == HC_OK && sub != nullptr) (void)hc_comm_abort(sub);
    if (rc == HC_OK) code = kExitOpFailed;
  } else {
    std::vector<hc_request_t> reqs;
    hc_status_t rc = postPendingGroup(comm, o, buf, &reqs);
    std::printf("posted\n");
    std::fflush(stdout);
    for (auto& r : reqs) {
      hc_status_t w = r != nullptr ? hc_wait(&r) : HC_OK;
      if (rc == HC_OK) rc = w;
    }
    printStatus("result", rc, errComm);
    if (rc == HC_OK) code = kExitOpFailed;
  }
  if (helper.joinable()) helper.join();
  if (o.rank != aborter) (void)hc_comm_abort(comm);
  (void)hc_mem_free(p);
  return code;
}

namespace {

void printCheck(const char* name, hc_status_t status, hc_comm_t comm) {
  const char* text = status == HC_OK ? "" : hc_get_last_error(comm);
  std::printf("check %s status=%d text=%s\n", name, status, text != nullptr ? text : "(null)");
  std::fflush(stdout);
}

// Posts one call that should be refused; if it is accepted after all, waits (bounded) so that a
// wrongly accepted operation cannot leave a request behind.
template <typename Call>
void check(const char* name, hc_comm_t comm, Call call) {
  watchdogNote(std::string("check ") + name);
  hc_request_t req = nullptr;
  hc_status_t rc = call(&req);
  if (rc == HC_OK && req != nullptr) {
    rc = waitFor(&req, 5000);
    if (rc == HC_TIMEOUT) {
      std::printf("check %s status=%d text=accepted and never completed\n", name, rc);
      std::fflush(stdout);
      return;
    }
  }
  printCheck(name, rc, comm);
}

}  // namespace

int runBadArgs(hc_comm_t comm, const WorkerOptions& o) {
  const int n = o.nranks;
  const size_t kHuge = std::numeric_limits<size_t>::max();
  void* sp = nullptr;
  void* rp = nullptr;
  if (hc_mem_alloc(&sp, 1 << 16) != HC_OK || hc_mem_alloc(&rp, 1 << 16) != HC_OK) {
    printStatus("result", HC_NO_RESOURCE, nullptr);
    return kExitOpFailed;
  }
  std::vector<size_t> counts(n, 4), displs(n, 0);
  for (int j = 0; j < n; ++j) displs[j] = 8 * static_cast<size_t>(j);
  // One bad field at a time in an otherwise valid alltoallv; the last peer gets the bad value.
  auto alltoallv = [&](const char* name, int which, size_t value, hc_dtype_t dtype = HC_INT32) {
    std::vector<size_t> sc = counts, sd = displs, rc = counts, rd = displs;
    std::vector<size_t>* fields[] = {&sc, &sd, &rc, &rd};
    (*fields[which])[n - 1] = value;
    check(name, comm, [&](hc_request_t* req) {
      return hc_alltoallv(sp, sc.data(), sd.data(), rp, rc.data(), rd.data(), dtype, comm, nullptr,
                          req);
    });
  };
  alltoallv("alltoallv_sendcount_huge", 0, kHuge);
  alltoallv("alltoallv_sendcount_negative", 0, static_cast<size_t>(-5));
  alltoallv("alltoallv_sdispl_overflow", 1, kHuge - 2);
  alltoallv("alltoallv_recvcount_negative", 2, static_cast<size_t>(-1));
  alltoallv("alltoallv_rdispl_negative", 3, static_cast<size_t>(-1024));
  alltoallv("alltoallv_bytes_overflow", 0, (size_t{1} << 61) + 1, HC_INT64);
  check("alltoallv_null_counts", comm, [&](hc_request_t* req) {
    return hc_alltoallv(sp, nullptr, displs.data(), rp, counts.data(), displs.data(), HC_INT32,
                        comm, nullptr, req);
  });
  check("alltoall_count_overflow", comm, [&](hc_request_t* req) {
    return hc_alltoall(sp, rp, (size_t{1} << 62) + 1, HC_INT32, comm, nullptr, req);
  });
  check("alltoall_in_place", comm,
        [&](hc_request_t* req) { return hc_alltoall(rp, rp, 4, HC_INT32, comm, nullptr, req); });
  for (int peer : {n, -1, 1 << 30}) {
    std::string s = "send_peer_" + std::to_string(peer);
    std::string r = "recv_peer_" + std::to_string(peer);
    check(s.c_str(), comm,
          [&](hc_request_t* req) { return hc_send(sp, 4, HC_INT32, peer, comm, nullptr, req); });
    check(r.c_str(), comm,
          [&](hc_request_t* req) { return hc_recv(rp, 4, HC_INT32, peer, comm, nullptr, req); });
  }
  check("gather_root_out_of_range", comm,
        [&](hc_request_t* req) { return hc_gather(sp, rp, 4, HC_INT32, n, comm, nullptr, req); });
  check("scatter_root_negative", comm,
        [&](hc_request_t* req) { return hc_scatter(sp, rp, 4, HC_INT32, -1, comm, nullptr, req); });
  // A transfer to self needs its receive in the same group; alone it could never match.
  check("self_send_alone", comm,
        [&](hc_request_t* req) { return hc_send(sp, 4, HC_INT32, o.rank, comm, nullptr, req); });
  check("self_recv_alone", comm,
        [&](hc_request_t* req) { return hc_recv(rp, 4, HC_INT32, o.rank, comm, nullptr, req); });
  check("self_send_group_without_recv", comm, [&](hc_request_t* req) {
    hc_status_t rc = hc_group_start();
    if (rc == HC_OK) rc = hc_send(sp, 4, HC_INT32, o.rank, comm, nullptr, req);
    hc_status_t end = hc_group_end();
    return rc != HC_OK ? rc : end;
  });

  // None of that may have hurt the communicator: a verified ring exchange and a self pair.
  watchdogNote("the exchange after the refused calls");
  CaseRunner runner(comm, o.rank, n);
  uint64_t wrong = 0;
  hc_status_t after = HC_OK;
  if (std::string e = runner.allocate(4097); !e.empty()) {
    std::printf("error %s\n", e.c_str());
    after = HC_NO_RESOURCE;
  } else {
    for (const Case& c : {Case{Coll::SendRecv, HC_FLOAT32, Red::Sum, 4097, false, 0, o.seed},
                          Case{Coll::AllToAllV, HC_INT32, Red::Sum, 7, false, 0, o.seed + 1}}) {
      CaseResult r = runner.run(c);
      if (r.status != HC_OK && after == HC_OK) after = r.status;
      wrong += r.wrong;
      if (r.wrong != 0)
        std::printf("WRONG %s: first %s\n", describe(c).c_str(), r.firstWrong.c_str());
    }
  }
  // A send to self with its receive in the same group is valid.
  uint8_t* s = static_cast<uint8_t*>(sp);
  uint8_t* r = static_cast<uint8_t*>(rp);
  fillTransfer(HC_FLOAT64, 9, o.seed + 2, o.rank, n, s);
  clearTransfer(HC_FLOAT64, 9, r);
  hc_request_t sendReq = nullptr, recvReq = nullptr;
  hc_status_t pair = hc_group_start();
  if (pair == HC_OK) pair = hc_recv(r, 9, HC_FLOAT64, o.rank, comm, nullptr, &recvReq);
  if (pair == HC_OK) pair = hc_send(s, 9, HC_FLOAT64, o.rank, comm, nullptr, &sendReq);
  hc_status_t end = hc_group_end();
  if (pair == HC_OK) pair = end;
  if (pair == HC_OK) pair = waitFor(&sendReq, 10000);
  if (pair == HC_OK) pair = waitFor(&recvReq, 10000);
  printCheck("self_pair_in_group", pair, comm);
  if (pair == HC_OK) {
    CaseResult res;
    verifyTransfer(HC_FLOAT64, 9, o.seed + 2, o.rank, n, r, &res);
    wrong += res.wrong;
  }
  printStatus("after", after, comm);
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrong));
  (void)hc_mem_free(sp);
  (void)hc_mem_free(rp);
  if (after != HC_OK || pair != HC_OK) return kExitOpFailed;
  return wrong == 0 ? kExitOk : kExitWrong;
}

}  // namespace hc::integ
