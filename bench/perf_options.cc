#include "bench/perf_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "common/man_page.h"
#include "common/vocabulary.h"

namespace hc::bench {
namespace {

// hc-perf(1): the sections --help has no room for.
hc::man::PageText manPage() {
  using hc::man::Section;
  hc::man::PageText text;
  text.name = "hc-perf";
  text.section = "1";
  text.manual = "User Commands";
  text.summary = "measure hetero-commd's collectives the way nccl-tests measures NCCL's";
  text.description =
      "Each row is one operation, type, reduction operator and size: the time, algorithm and "
      "bus bandwidth (busbw, as nccl-tests defines it) out-of-place and in-place, and the "
      "number of wrong elements. The ranks are -N processes hc-perf forks itself, on one daemon "
      "or spread over several (--sockets); their buffers are in the daemon's shared segment, "
      "the process's own memory or simulated device memory (--device).\n\n"
      "Example: hc-perf -N 4 -b 8 -e 128M -f 2 -o all";
  text.sections = {
      Section{"ENVIRONMENT",
              "",
              {{"HC_SOCKET", "the daemon's socket when neither --socket nor --sockets is given"},
               {"HC_PERF_SOCKETS", "the sockets of several daemons, when --sockets is not given"},
               {"HC_SEGMENT_BYTES",
                "the ranks' shared segment; by default hc-perf asks for one that holds the "
                "largest send and receive buffers"}}},
      Section{"EXIT STATUS",
              "",
              {{"0", "every operation completed and every checked element was right"},
               {"1", "an operation failed, a rank stalled or died, or an element was wrong"},
               {"2", "bad options"}}}};
  text.seeAlso = {"hetero-commd(8)", "hcctl(1)"};
  return text;
}

constexpr std::pair<const char*, OpKind> kOps[] = {
    {"allreduce", OpKind::AllReduce},
    {"broadcast", OpKind::Broadcast},
    {"reduce", OpKind::Reduce},
    {"allgather", OpKind::AllGather},
    {"reduce_scatter", OpKind::ReduceScatter},
    {"alltoall", OpKind::AllToAll},
    {"gather", OpKind::Gather},
    {"scatter", OpKind::Scatter},
    {"sendrecv", OpKind::SendRecv},
    {"barrier", OpKind::Barrier},
};

constexpr std::pair<const char*, hc_redop_t> kRedops[] = {
    {"sum", HC_SUM}, {"prod", HC_PROD}, {"max", HC_MAX}, {"min", HC_MIN}, {"avg", HC_AVG},
};

template <typename T, size_t N>
bool lookup(const std::pair<const char*, T> (&table)[N], const std::string& name,
            std::vector<T>* out) {
  out->clear();
  for (const auto& [n, v] : table) {
    bool duplicate = false;
    for (T x : *out) duplicate = duplicate || x == v;
    if (name == "all" && !duplicate) out->push_back(v);
    if (name == n) {
      out->push_back(v);
      return true;
    }
  }
  return name == "all";
}

// "all" (every dtype, in the vocabulary's order) or one name the vocabulary knows.
bool parseDtypes(const std::string& name, std::vector<hc_dtype_t>* out) {
  out->clear();
  if (name == "all") {
    for (int d = 0; d < hc::kNumDtypes; ++d) out->push_back(static_cast<hc_dtype_t>(d));
    return true;
  }
  const auto d = hc::dtypeNamed(name);
  if (d) out->push_back(static_cast<hc_dtype_t>(*d));
  return d.has_value();
}

}  // namespace

std::optional<size_t> parseSize(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  size_t pos = 0;
  unsigned long long value;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string suffix = text.substr(pos);
  int shift = 0;
  if (suffix == "K" || suffix == "k") {
    shift = 10;
  } else if (suffix == "M" || suffix == "m") {
    shift = 20;
  } else if (suffix == "G" || suffix == "g") {
    shift = 30;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  if (shift > 0 && value > (~0ull >> shift)) return std::nullopt;
  return static_cast<size_t>(value << shift);
}

std::optional<int> parseOptions(int argc, char** argv, Options* out) {
  Options o;
  std::string minB = "32M", maxB = "32M", stepB = "1M", op = "allreduce", dtype = "float",
              redop = "sum";
  int membw = 1;
  CLI::App app{
      "hc-perf: nccl-tests-style benchmark of hetero-commd. Launches -N local ranks that link "
      "libhcclient, times each collective out-of-place and in-place, checks results (-c 1), "
      "prints the daemon's CPU-seconds per GB, and compares rows of at least 4x the last-level "
      "cache with the memory-bound floor measured right before and after each."};
  app.add_option("-b,--minbytes", minB, "smallest size (K/M/G suffixes)");
  app.add_option("-e,--maxbytes", maxB, "largest size");
  app.add_option("-f,--stepfactor", o.stepFactor, "multiply the size by this between rows");
  app.add_option("-i,--stepbytes", stepB, "add this between rows when -f is 1");
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->check(CLI::Range(1, 1 << 24));
  app.add_option("-w,--warmup_iters", o.warmup, "warmup iterations per size")
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("-c,--check", o.check, "check results (0/1)")->check(CLI::Range(0, 1));
  app.add_option("-o,--op", op,
                 "allreduce|broadcast|reduce|allgather|reduce_scatter|alltoall|gather|scatter|"
                 "sendrecv|barrier|all");
  app.add_option("-d,--datatype", dtype,
                 "int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|f8e4m3|f8e5m2|"
                 "all (aliases: float16 float32 float64 bf16 fp8_e4m3 fp8_e5m2)");
  app.add_option("-r,--redop", redop, "sum|prod|max|min|avg|all");
  app.add_option("-R,--root", o.root, "root rank of broadcast, reduce, gather and scatter");
  app.add_option("-N,--nranks", o.nranks, "local rank processes to launch")
      ->check(CLI::Range(1, kMaxRanks));
  CLI::Option* socket = app.add_option("-s,--socket", o.socket,
                                       "hetero-commd socket (default: HC_SOCKET, then the "
                                       "default path)");
  std::string sockets;
  app.add_option("--sockets", sockets,
                 "spread the ranks over several daemons: their sockets, comma-separated (env "
                 "HC_PERF_SOCKETS); contiguous blocks of ranks per daemon, unique id from the "
                 "first")
      ->type_name("PATH[,PATH...]")
      ->excludes(socket);
  std::string devices;
  app.add_option("--device", devices,
                 "where the ranks' send and receive buffers live: host (default: the daemon's "
                 "segment, zero copy), heap (the process's own memory, staged by the client) or "
                 "sim:nvidia|amd:INDEX, simulated device memory on a stream (hetero_comm/hc_sim.h; "
                 "the rank's daemon needs that device, devices.sim.*); one place for every rank, "
                 "or one per rank, comma-separated")
      ->type_name("PLACE[,PLACE...]");
  app.add_option("-T,--timeout", o.timeoutSec,
                 "give up when ranks stall this many seconds (0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-m,--membw", membw,
                 "measure memory bandwidth around rows of at least 4x the last-level cache and "
                 "bound them (0/1)")
      ->check(CLI::Range(0, 1));
  std::string llc;
  app.add_option("--llc", llc,
                 "the last-level cache size that decides which rows get a bound (K/M/G "
                 "suffixes); default: sysfs, else what cpuid reports")
      ->type_name("SIZE");
  app.add_option("--seed", o.seed, "seed of the checked data");
  std::string api = "hc";
  app.add_option("--api", api,
                 "hc: time hc_* calls of libhcclient; nccl: the same rows through NCCL's API "
                 "(libnccl.so.2, the shim: ncclCommInitRank, ncclMemAlloc, ncclAllReduce... with "
                 "the NULL stream for host buffers); NCCL has no barrier, so -o all leaves it out")
      ->check(CLI::IsMember({"hc", "nccl"}));
  app.add_flag("--latency", o.latency,
               "time each operation alone: issue it, wait for it, then issue the next; the time "
               "column is their mean and every size gets a median latency");
  app.add_flag("--small-ops", o.smallOps,
               "make the communicator with host_small_ops (hc_config_t): small collectives on host "
               "memory combine among the ranks in a shared area, not through the daemon");
  hc::man::addPrintManFlag(app, manPage());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "hc-perf: %s\n", what.c_str());
    return std::optional<int>(2);
  };
  auto mn = parseSize(minB), mx = parseSize(maxB), st = parseSize(stepB);
  if (!mn) return fail("bad -b size '" + minB + "'");
  if (!mx) return fail("bad -e size '" + maxB + "'");
  if (!st) return fail("bad -i size '" + stepB + "'");
  o.minBytes = *mn;
  o.maxBytes = *mx;
  o.stepBytes = *st;
  if (o.maxBytes < o.minBytes) return fail("-e must be at least -b");
  if (o.stepFactor < 1) return fail("-f must be at least 1");
  if (o.stepFactor == 1 && o.stepBytes == 0 && o.maxBytes > o.minBytes) {
    return fail("-i must be positive when -f is 1");
  }
  if (!lookup(kOps, op, &o.ops)) return fail("unknown -o '" + op + "'");
  o.api = api == "nccl" ? Api::Nccl : Api::Hc;
  // -o all: the operations the API has; one it lacks, named alone, is an error.
  std::erase_if(o.ops, [&](OpKind k) { return !apiHasOp(o.api, k); });
  if (o.ops.empty()) return fail("--api " + api + " has no " + op);
  if (!parseDtypes(dtype, &o.dtypes)) return fail("unknown -d '" + dtype + "'");
  if (!lookup(kRedops, redop, &o.redops)) return fail("unknown -r '" + redop + "'");
  if (o.root < 0 || o.root >= o.nranks) return fail("-R must name a rank below -N");
  // The environment only when neither flag was given: flags win over the environment.
  const char* envSockets = std::getenv("HC_PERF_SOCKETS");
  const bool fromEnv = sockets.empty() && o.socket.empty() && envSockets != nullptr;
  if (fromEnv) sockets = envSockets;
  const std::string from = fromEnv ? "HC_PERF_SOCKETS" : "--sockets";
  for (size_t start = 0; !sockets.empty() && start <= sockets.size();) {
    size_t comma = std::min(sockets.find(',', start), sockets.size());
    std::string path = sockets.substr(start, comma - start);
    if (path.empty()) return fail(from + " '" + sockets + "' has an empty path");
    if (std::find(o.sockets.begin(), o.sockets.end(), path) != o.sockets.end()) {
      return fail(from + " names '" + path + "' twice");
    }
    o.sockets.push_back(path);
    start = comma + 1;
  }
  if (o.sockets.size() > static_cast<size_t>(o.nranks)) {
    return fail(from + " names " + std::to_string(o.sockets.size()) + " daemons but -N is " +
                std::to_string(o.nranks) + ": every daemon must host a rank");
  }
  if (o.sockets.size() == 1) {
    o.socket = o.sockets.front();
    o.sockets.clear();
  }
  for (size_t start = 0; !devices.empty() && start <= devices.size();) {
    size_t comma = std::min(devices.find(',', start), devices.size());
    std::string word = devices.substr(start, comma - start);
    auto place = parsePlace(word);
    if (!place) {
      return fail("--device '" + word +
                  "' is not host, heap or sim:nvidia|amd:INDEX (e.g. sim:amd:0)");
    }
    o.devices.push_back(*place);
    start = comma + 1;
  }
  if (o.devices.size() > 1 && o.devices.size() != static_cast<size_t>(o.nranks)) {
    return fail("--device names " + std::to_string(o.devices.size()) + " places but -N is " +
                std::to_string(o.nranks) + ": give one place for every rank, or one per rank");
  }
  o.membw = membw != 0;
  if (!llc.empty()) {
    auto bytes = parseSize(llc);
    if (!bytes || *bytes == 0) return fail("--llc '" + llc + "' is not a size like 32M");
    o.llcBytes = *bytes;
  }
  *out = std::move(o);
  return std::nullopt;
}

int daemonOfRank(const Options& opts, int rank) {
  const int daemons = static_cast<int>(opts.sockets.size());
  const int base = opts.nranks / daemons;   // ranks on every daemon
  const int extra = opts.nranks % daemons;  // the first `extra` daemons host one more
  if (rank < extra * (base + 1)) return rank / (base + 1);
  return extra + (rank - extra * (base + 1)) / base;
}

BufferPlace placeOfRank(const Options& opts, int rank) {
  if (opts.devices.empty()) return {};
  if (opts.devices.size() == 1) return opts.devices.front();
  return opts.devices[static_cast<size_t>(rank)];
}

bool anyRankOnDevice(const Options& opts) {
  for (int r = 0; r < opts.nranks; ++r) {
    if (placeOfRank(opts, r).sim) return true;
  }
  return false;
}

bool anyRankOnHost(const Options& opts) {
  for (int r = 0; r < opts.nranks; ++r) {
    if (!placeOfRank(opts, r).sim) return true;
  }
  return false;
}

std::optional<BufferPlace> parsePlace(const std::string& text) {
  if (text == "host") return BufferPlace{};
  if (text == "heap") {
    BufferPlace heap;
    heap.heap = true;
    return heap;
  }
  BufferPlace p;
  p.sim = true;
  std::string index;
  if (text.rfind("sim:nvidia:", 0) == 0) {
    p.vendor = HC_SIM_NVIDIA;
    index = text.substr(11);
  } else if (text.rfind("sim:amd:", 0) == 0) {
    p.vendor = HC_SIM_AMD;
    index = text.substr(8);
  } else {
    return std::nullopt;
  }
  // The daemon says whether it has the device; here only the shape is checked.
  auto digit = [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; };
  if (index.empty() || index.size() > 4 || !std::all_of(index.begin(), index.end(), digit)) {
    return std::nullopt;
  }
  p.index = std::stoi(index);
  return p;
}

std::string placeName(const BufferPlace& place) {
  if (!place.sim) return place.heap ? "heap" : "host";
  return std::string("sim:") + (place.vendor == HC_SIM_AMD ? "amd" : "nvidia") + ":" +
         std::to_string(place.index);
}

const char* opName(OpKind op) {
  for (const auto& [n, v] : kOps) {
    if (v == op) return n;
  }
  return "?";
}

const char* dtypeName(hc_dtype_t dtype) {
  const auto d = hc::dtypeFrom(dtype);
  return d ? hc::ncclTestsDtypeName(*d) : "?";
}

const char* redopName(hc_redop_t redop) {
  if (redop == kNoRedop) return "none";
  for (const auto& [n, v] : kRedops) {
    if (v == redop) return n;
  }
  return "?";
}

size_t dtypeSize(hc_dtype_t dtype) {
  const auto d = hc::dtypeFrom(dtype);
  return d ? hc::dtypeSize(*d) : 0;
}

bool hasRedop(OpKind op) {
  return op == OpKind::AllReduce || op == OpKind::Reduce || op == OpKind::ReduceScatter;
}

bool hasRoot(OpKind op) {
  return op == OpKind::Broadcast || op == OpKind::Reduce || op == OpKind::Gather ||
         op == OpKind::Scatter;
}

const char* apiName(Api api) { return api == Api::Nccl ? "nccl" : "hc"; }

bool apiHasOp(Api api, OpKind op) { return api == Api::Hc || op != OpKind::Barrier; }

bool hasInPlace(OpKind op) {
  return op != OpKind::AllToAll && op != OpKind::SendRecv && op != OpKind::Barrier;
}

}  // namespace hc::bench
