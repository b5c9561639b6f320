// hc_comm_init_all: one communicator whose ranks are all in this process, as ncclCommInitAll
// makes one. Every rank joins before any is waited for (a blocking init of one rank would wait
// forever for the others, which this same call has yet to start), on the process's one
// connection, under a fresh id that names no root: every rank is on this daemon.
#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client/src/comm_handles.h"
#include "client/src/comm_init.h"
#include "client/src/comm_state.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

// The device of each rank: devlist[i], or i without a list. Each must be >= 0 and serve one rank
// only, as NCCL requires. They are not bounded by a runtime's device count: the client finds a
// buffer's device by its address, and a host-memory process has no runtime to ask.
Result<std::vector<int>> devicesOf(int ndev, const int* devlist) {
  std::vector<int> devices(static_cast<size_t>(ndev));
  std::unordered_map<int, int> rankOn;  // device -> the first rank on it
  for (int i = 0; i < ndev; ++i) {
    const int d = devlist != nullptr ? devlist[i] : i;
    if (d < 0) {
      return invalidArgument("hc_comm_init_all: devlist[" + std::to_string(i) + "] is " +
                             std::to_string(d) + "; devices are numbered from 0");
    }
    auto [at, fresh] = rankOn.emplace(d, i);
    if (!fresh) {
      return invalidArgument("hc_comm_init_all: device " + std::to_string(d) +
                             " is listed twice (devlist[" + std::to_string(at->second) +
                             "] and devlist[" + std::to_string(i) +
                             "]); each rank needs a device of its own");
    }
    devices[static_cast<size_t>(i)] = d;
  }
  return devices;
}

bool allDone(const std::vector<RequestPtr>& joins) {
  return std::all_of(joins.begin(), joins.end(),
                     [](const RequestPtr& r) { return r->done.load(std::memory_order_acquire); });
}

// The first failure among the finished joins, named by rank.
Status outcome(const std::vector<RequestPtr>& joins) {
  for (size_t i = 0; i < joins.size(); ++i) {
    const Request& r = *joins[i];
    if (!r.status.isOk()) {
      return Status{r.status.code(), "rank " + std::to_string(i) + ": " + r.status.message()};
    }
    if (r.result.value == 0) {
      return internalError("rank " + std::to_string(i) +
                           ": hetero-commd completed the join without a handle");
    }
  }
  return okStatus();
}

// Leaves nothing of a failed call: a communicator the daemon formed anyway is aborted there, and
// every handle is freed (none was handed out).
hc_status_t undo(const Status& why, Connection& conn, const std::vector<RequestPtr>& joins,
                 const std::vector<hc_comm*>& handles) {
  for (size_t i = 0; i < joins.size(); ++i) {
    const Request& r = *joins[i];
    if (r.done.load(std::memory_order_acquire) && r.status.isOk() && r.result.value != 0) {
      conn.abort(handles[i]->state.get(), r.result.value);
    }
  }
  for (hc_comm* h : handles) discardCommHandle(h);
  return fail(Status{why.code(), "hc_comm_init_all: " + why.message()});
}

}  // namespace
}  // namespace hc::client

using namespace hc::client;

extern "C" hc_status_t hc_comm_init_all(hc_comm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr) return fail(hc::invalidArgument("hc_comm_init_all: comms is NULL"));
  if (ndev < 1) {
    return fail(hc::invalidArgument("hc_comm_init_all: ndev is " + std::to_string(ndev) +
                                    "; a communicator needs at least 1 rank"));
  }
  std::fill_n(comms, ndev, nullptr);
  auto devices = devicesOf(ndev, devlist);
  if (!devices.isOk()) return fail(devices.status());
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  auto id = newUniqueId(**conn, /*nameRoot=*/false);
  if (!id.isOk()) return fail(id.status());

  // Every handle first, so that a shortage of memory fails before the daemon hears of anything.
  std::vector<hc_comm*> handles;
  handles.reserve(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) {
    auto state = std::make_shared<CommState>();
    state->conn = *conn;
    state->rank.store(i);
    state->nranks.store(ndev);
    state->device.store((*devices)[static_cast<size_t>(i)]);
    hc_comm* h = newCommHandle(std::move(state));
    if (h == nullptr) {
      return undo(hc::Status{hc::Code::NoResource, "out of memory"}, **conn, {}, handles);
    }
    handles.push_back(h);
  }

  // The daemon forms the communicator when the last rank joined and answers every join at once.
  std::vector<RequestPtr> joins;
  joins.reserve(handles.size());
  hc::Status s;
  for (int i = 0; i < ndev && s.isOk(); ++i) {
    auto r = submitInit(**conn, ndev, *id, i, /*timeoutMs=*/0);
    if (r.isOk()) {
      joins.push_back(*r);
    } else {
      // Only a lost connection stops a submission, and it fails the joins already made too.
      s = hc::Status{r.status().code(), "rank " + std::to_string(i) + ": " + r.status().message()};
    }
  }
  if (s.isOk()) s = (*conn)->waitUntil([&] { return allDone(joins); }, nullptr);
  if (s.isOk()) s = outcome(joins);
  if (!s.isOk()) return undo(s, **conn, joins, handles);

  for (size_t i = 0; i < handles.size(); ++i) {
    handles[i]->state->handle.store(joins[i]->result.value);
    comms[i] = handles[i];
  }
  return HC_OK;
}
