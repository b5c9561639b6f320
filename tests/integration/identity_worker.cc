// hc_identity_worker's arguments, the life of its communicators (init, end) and main; the usage
// and the lines it prints are in identity_worker.h.
#include "tests/integration/identity_worker.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include "tests/integration/worker_modes.h"
#include "tests/support/hex.h"

namespace hc::integ::identity {
namespace {

using Clock = std::chrono::steady_clock;

std::string lastError(hc_comm_t comm) {
  const char* text = comm != nullptr ? hc_get_last_error(comm) : nullptr;
  if (text == nullptr || *text == '\0') text = hc_get_last_error(nullptr);
  return text != nullptr && *text != '\0' ? text : "(no message)";
}

std::vector<std::string> splitList(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool parsePhases(const std::string& text, std::vector<Phase>* out) {
  const std::map<std::string, Phase> names = {{"allreduce", Phase::AllReduce},
                                              {"broadcast", Phase::Broadcast},
                                              {"sendrecv", Phase::SendRecv}};
  out->clear();
  for (const std::string& name : splitList(text, ',')) {
    auto it = names.find(name);
    if (it == names.end()) return false;
    out->push_back(it->second);
  }
  return !out->empty();
}

bool parseOrder(std::string_view text, Order* out) {
  const std::map<std::string_view, Order> names = {
      {"forward", Order::Forward}, {"reverse", Order::Reverse}, {"pairs", Order::Pairs}};
  auto it = names.find(text);
  if (it == names.end()) return false;
  *out = it->second;
  return true;
}

bool parseTransfers(const std::string& text, std::vector<std::pair<int, int>>* out) {
  for (const std::string& t : splitList(text, ',')) {
    const size_t colon = t.find(':');
    if (colon == std::string::npos) return false;
    out->emplace_back(std::atoi(t.substr(0, colon).c_str()),
                      std::atoi(t.substr(colon + 1).c_str()));
  }
  return true;
}

bool readIds(const char* path, std::vector<std::string>* out) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out->push_back(line);
  }
  return in.eof();  // false when the file could not be read
}

// At least one rank, each in range and held once: the daemon refuses a second join of a rank.
bool ranksValid(const std::vector<int>& ranks, int nranks) {
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= nranks || !seen.insert(r).second) return false;
  }
  return !ranks.empty();
}

bool parseArgs(int argc, char** argv, Options* o) {
  bool ok = true;
  auto u64 = [](const char* v) { return std::strtoull(v, nullptr, 10); };
  const std::map<std::string_view, std::function<void(const char*)>> setters = {
      {"--mode", [&](const char* v) { o->mode = v; }},
      {"--id", [&](const char* v) { o->ids.emplace_back(v); }},
      {"--ids", [&](const char* v) { ok = readIds(v, &o->ids) && ok; }},
      {"--nranks", [&](const char* v) { o->nranks = std::atoi(v); }},
      {"--rank", [&](const char* v) { o->ranks.push_back(std::atoi(v)); }},
      {"--ranks",
       [&](const char* v) {
         for (const std::string& r : splitList(v, ',')) o->ranks.push_back(std::atoi(r.c_str()));
       }},
      {"--base", [&](const char* v) { o->base = std::atoll(v); }},
      {"--base-step", [&](const char* v) { o->baseStep = std::atoll(v); }},
      {"--iters", [&](const char* v) { o->iters = u64(v); }},
      {"--counts",
       [&](const char* v) {
         o->counts.clear();
         for (const std::string& c : splitList(v, ',')) o->counts.push_back(u64(c.c_str()));
       }},
      {"--ops", [&](const char* v) { ok = parsePhases(v, &o->ops) && ok; }},
      {"--order", [&](const char* v) { ok = parseOrder(v, &o->order) && ok; }},
      {"--transfers", [&](const char* v) { ok = parseTransfers(v, &o->transfers) && ok; }},
      {"--go-file", [&](const char* v) { o->goFile = v; }},
      {"--init-timeout-ms", [&](const char* v) { o->initTimeoutMs = std::atoi(v); }},
      {"--watchdog", [&](const char* v) { o->watchdog = std::atoi(v); }},
      {"--expect-failure", [&](const char* v) { o->expectFailure = std::atoi(v) != 0; }},
      {"--recv-again", [&](const char* v) { o->recvAgain = std::atoi(v) != 0; }},
      {"--end", [&](const char* v) { o->end = v; }},
  };
  if (argc % 2 != 1) return false;
  for (int i = 1; i + 1 < argc; i += 2) {
    auto it = setters.find(argv[i]);
    if (it == setters.end()) return false;
    it->second(argv[i + 1]);
  }
  const bool endOk = o->end == "destroy" || o->end == "abort" || o->end == "hold";
  return ok && !o->ids.empty() && o->nranks > 0 && ranksValid(o->ranks, o->nranks) &&
         !o->counts.empty() && endOk;
}

// p2p needs one communicator, each rank sending and receiving at most once; split needs pairs.
// Relay and p2p wait for one member at a time, so they hold one rank.
bool modeAccepts(const Options& o) {
  if (o.mode == "collectives") return true;
  if (o.mode == "split") return o.nranks % 2 == 0;
  if (o.ranks.size() != 1) return false;
  if (o.mode == "relay") return true;
  if (o.mode != "p2p" || o.ids.size() != 1 || o.transfers.empty()) return false;
  std::map<int, int> sends, recvs;
  for (const auto& [src, dst] : o.transfers) {
    if (src == dst || src < 0 || dst < 0 || src >= o.nranks || dst >= o.nranks) return false;
    if (++sends[src] > 1 || ++recvs[dst] > 1) return false;
  }
  return true;
}

// --end, once the mode is done.
void finish(const std::vector<Member*>& ms, const Options& o, Outcome* out) {
  if (o.end == "hold" && !out->failed()) {
    // The test kills this process: its daemon sees the ranks vanish with their work done.
    std::printf("holding\n");
    std::fflush(stdout);
    for (;;) {
      watchdogNote("holding");
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  std::printf("ending\n");
  std::fflush(stdout);
  endMembers(ms, o.end == "abort", out);
  std::printf("ended\n");
}

}  // namespace

Arena::~Arena() { (void)hc_mem_free(p_); }

bool Arena::assign(std::vector<Member>& members, uint64_t maxCount) {
  const size_t bytes = members.size() * 2 * maxCount * sizeof(int32_t) + 4096;
  if (hc_mem_alloc(&p_, bytes) != HC_OK) return false;
  auto* at = static_cast<int32_t*>(p_);
  for (Member& m : members) {
    m.send = at;
    m.recv = at + maxCount;
    at += 2 * maxCount;
  }
  return true;
}

void recordFailure(Outcome* out, hc_status_t rc, const Member& m, const std::string& what) {
  if (out->failed()) return;
  out->status = rc;
  out->text = what + " on " + m.name + ": " + lastError(m.comm);
}

std::vector<Member*> ordered(std::vector<Member>& members, Order order, size_t ranksPerComm) {
  std::vector<size_t> comms(members.size() / ranksPerComm);
  for (size_t j = 0; j < comms.size(); ++j) comms[j] = j;
  if (order == Order::Reverse) std::reverse(comms.begin(), comms.end());
  if (order == Order::Pairs) {
    for (size_t j = 0; j + 1 < comms.size(); j += 2) std::swap(comms[j], comms[j + 1]);
  }
  std::vector<Member*> out;
  for (size_t j : comms) {
    for (size_t i = 0; i < ranksPerComm; ++i) out.push_back(&members[j * ranksPerComm + i]);
  }
  return out;
}

void startInits(const std::vector<Member*>& ms, const Options& o, Outcome* out) {
  for (Member* m : ms) {
    hc_config_t config = HC_CONFIG_INITIALIZER;
    config.blocking = 0;
    if (o.initTimeoutMs > 0) config.timeout_ms = o.initTimeoutMs;
    hc_status_t rc = hc_comm_init_rank_config(&m->comm, m->nranks, *m->id, m->rank, &config);
    if (rc != HC_OK && rc != HC_IN_PROGRESS) {
      recordFailure(out, rc, *m, "hc_comm_init_rank_config");
      m->comm = nullptr;
    }
  }
}

void awaitCreation(const std::vector<Member*>& ms, const char* what, Outcome* out) {
  std::vector<Member*> pending;
  for (Member* m : ms) {
    if (m->comm != nullptr) pending.push_back(m);
  }
  // Backing off: a test may run 200 of these processes on 2 cores, all waiting for the last
  // rank to join.
  auto nap = std::chrono::microseconds(50);
  while (!pending.empty()) {
    watchdogNote(std::string(what) + ": " + std::to_string(pending.size()) + " pending, first " +
                 pending.front()->name);
    std::vector<Member*> still;
    for (Member* m : pending) {
      hc_status_t async = HC_OK;
      hc_status_t rc = hc_comm_get_async_error(m->comm, &async);
      if (rc == HC_OK && async == HC_IN_PROGRESS) {
        still.push_back(m);
      } else if (rc != HC_OK || async != HC_OK) {
        recordFailure(out, rc != HC_OK ? rc : async, *m, what);
        (void)hc_comm_abort(m->comm);
        m->comm = nullptr;
      }
    }
    pending.swap(still);
    if (pending.empty()) break;
    std::this_thread::sleep_for(nap);
    nap = std::min(2 * nap, std::chrono::microseconds(5000));
  }
}

void endMembers(const std::vector<Member*>& ms, bool abort, Outcome* out) {
  for (Member* m : ms) {
    if (m->comm == nullptr) continue;
    watchdogNote("ending " + m->name);
    if (abort || out->failed()) {
      (void)hc_comm_abort(m->comm);
    } else if (hc_status_t rc = hc_comm_destroy(m->comm); rc != HC_OK) {
      recordFailure(out, rc, *m, "hc_comm_destroy");
    }
    m->comm = nullptr;
  }
}

void waitForFile(const std::string& path) {
  if (path.empty()) return;
  watchdogNote("waiting for " + path);
  struct stat st;
  while (::stat(path.c_str(), &st) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

int run(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, &o) || !modeAccepts(o)) {
    std::fprintf(stderr,
                 "usage: hc_identity_worker --mode collectives|split|relay|p2p --id HEX|--ids FILE "
                 "--nranks N --rank R [--rank R ...]|--ranks R[,R...] ... (identity_worker.h)\n");
    return kExitUsage;
  }
  std::vector<hc_unique_id_t> ids(o.ids.size());
  for (size_t j = 0; j < ids.size(); ++j) {
    if (!test::parseHexId(o.ids[j], &ids[j])) {
      std::fprintf(stderr, "bad id %zu: %s\n", j, o.ids[j].c_str());
      return kExitUsage;
    }
  }
  if (o.watchdog > 0) startWatchdog(o.watchdog);

  // Communicator j's ranks are members j * n .. j * n + n - 1, n = o.ranks.size().
  const size_t perComm = o.ranks.size();
  std::vector<Member> members(ids.size() * perComm);
  for (size_t k = 0; k < members.size(); ++k) {
    const size_t j = k / perComm;
    Member& m = members[k];
    m.id = &ids[j];
    m.rank = o.ranks[k % perComm];
    m.nranks = o.nranks;
    m.base = o.base + static_cast<int64_t>(j) * o.baseStep;
    m.name = "comm " + std::to_string(j) + " rank " + std::to_string(m.rank);
  }
  Arena arena;
  if (!arena.assign(members, *std::max_element(o.counts.begin(), o.counts.end()))) {
    std::printf("result status=%d text=hc_mem_alloc: %s\n", HC_NO_RESOURCE,
                lastError(nullptr).c_str());
    return kExitOpFailed;
  }

  // Relay forms its communicators one at a time; every other mode all of them at once.
  std::vector<Member*> all = ordered(members, o.order, perComm);
  std::vector<Member*> first = o.mode == "relay" ? std::vector<Member*>{&members[0]} : all;
  Outcome out;
  const auto initStart = Clock::now();
  startInits(first, o, &out);
  awaitCreation(first, "hc_comm_init_rank_config", &out);
  if (out.failed()) {
    std::printf("result status=%d text=%s\ninit failed\n", out.status, out.text.c_str());
    endMembers(all, true, &out);
    return kExitOpFailed;
  }
  const auto initMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - initStart).count();
  std::printf("init ms=%lld\nready\n", static_cast<long long>(initMs));
  std::fflush(stdout);

  waitForFile(o.goFile);
  if (o.mode == "collectives") runRounds(all, o, 0, o.iters, true, &out);
  if (o.mode == "split") runSplit(members, o, &out);
  if (o.mode == "relay") runRelay(members, o, &out);
  if (o.mode == "p2p") runTransfers(members.front(), o, &out);
  // Relay has destroyed all but its last communicator: endMembers skips those.
  finish(all, o, &out);
  if (out.failed() && !o.expectFailure) {
    std::printf("ERROR %s: status=%d\n", out.text.c_str(), out.status);
  }
  std::printf("result status=%d text=%s\n", out.status, out.text.c_str());
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(out.wrong));
  if (out.wrong != 0) return kExitWrong;
  return out.failed() && !o.expectFailure ? kExitOpFailed : kExitOk;
}

}  // namespace hc::integ::identity

int main(int argc, char** argv) {
  // Tests read stdout from a file while the worker runs, and may SIGKILL it: flush every line.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return hc::integ::identity::run(argc, argv);
}
