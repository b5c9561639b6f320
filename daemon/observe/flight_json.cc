#include "daemon/observe/flight_json.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

namespace hc::observe {
namespace {

using nlohmann::json;

json nsOrNull(int64_t ns) { return ns == 0 ? json(nullptr) : json(ns); }

json shapes(const std::vector<int64_t>& sizes) {
  return sizes.empty() ? json::array() : json::array({sizes});
}

json dtypes(const FlightEntry& e, const std::vector<int64_t>& sizes) {
  if (sizes.empty() || e.what.dtype.empty()) return json::array();
  return json::array({pytorchDtypeName(e.what.dtype)});
}

json entryJson(const FlightEntry& e, const std::string& key) {
  return json{
      {"record_id", e.recordId},
      {"pg_id", key},
      {"collective_seq_id", e.collectiveSeqId},
      {"p2p_seq_id", e.p2pSeqId},
      {"op_id", e.recordId},
      {"profiling_name", e.profilingName},
      {"time_created_ns", e.timeCreatedNs},
      {"input_sizes", shapes(e.what.inputSizes)},
      {"input_dtypes", dtypes(e, e.what.inputSizes)},
      {"output_sizes", shapes(e.what.outputSizes)},
      {"output_dtypes", dtypes(e, e.what.outputSizes)},
      {"state", flightStateName(e.state)},
      {"time_discovered_started_ns", nsOrNull(e.timeDiscoveredStartedNs)},
      {"time_discovered_completed_ns", nsOrNull(e.timeDiscoveredCompletedNs)},
      {"is_p2p", e.what.p2p},
      {"rank", e.what.rank},
      {"peer", e.what.peer < 0 ? json(nullptr) : json(e.what.peer)},
      {"error", e.error.empty() ? json(nullptr) : json(e.error)},
  };
}

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? name : "";
}

Status makeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0750) != 0 && errno != EEXIST) {
      return unavailable("cannot create " + prefix + ": " + std::strerror(errno));
    }
    if (slash == std::string::npos) return okStatus();
  }
}

}  // namespace

std::string pytorchDtypeName(const std::string& dtype) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"int8", "Char"},         {"uint8", "Byte"},         {"int32", "Int"},
      {"uint32", "UInt32"},     {"int64", "Long"},         {"uint64", "UInt64"},
      {"float16", "Half"},      {"float32", "Float"},      {"float64", "Double"},
      {"bfloat16", "BFloat16"}, {"fp8_e4m3", "Float8_e4m3fn"}, {"fp8_e5m2", "Float8_e5m2"},
  };
  for (const auto& [ours, theirs] : kNames) {
    if (dtype == ours) return theirs;
  }
  return dtype;
}

std::string flightJson(const FlightSnapshot& record, const std::string& reason,
                       const std::string& detail) {
  json ranks = json::array();
  for (const RankProgress& p : record.ranks) {
    ranks.push_back({{"rank", p.rank},
                     {"collectives_posted", p.collectivesPosted},
                     {"collectives_finished", p.collectivesFinished},
                     {"p2p_posted", p.transfersPosted},
                     {"p2p_finished", p.transfersFinished},
                     {"last_posted", p.lastPosted ? entryJson(*p.lastPosted, record.comm.keyHex)
                                                  : json(nullptr)}});
  }
  json entries = json::array();
  for (const FlightEntry& e : record.entries) entries.push_back(entryJson(e, record.comm.keyHex));
  json doc{
      {"schema", "hetero_comm.flight_record.v1"},
      {"reason", reason},
      {"detail", detail},
      {"hostname", hostname()},
      {"time_dumped_ns", wallClockNs()},
      {"comm",
       {{"id", record.comm.id},
        {"key", record.comm.keyHex},
        {"nranks", record.comm.nranks},
        {"local_ranks", record.comm.localRanks},
        {"nodes", record.comm.nodes()},
        {"node_addresses", record.comm.nodeAddresses},
        {"ranks_of_node", record.comm.ranksOfNode},
        {"state", record.state},
        {"failure", record.failure.empty() ? json(nullptr) : json(record.failure)},
        {"ops_completed", record.opsCompleted},
        {"ops_failed", record.opsFailed}}},
      {"ranks", ranks},
      {"entries", entries},
  };
  return doc.dump(1) + "\n";
}

Result<std::string> dumpFlightRecord(const std::string& stateDir, const FlightSnapshot& record,
                                     const std::string& reason, const std::string& detail,
                                     std::optional<gid_t> readerGroup) {
  HC_RETURN_IF_ERROR(makeDirectories(stateDir));
  const int64_t ms = wallClockNs() / 1'000'000;
  std::string key = record.comm.keyHex;
  for (char& c : key) {
    if (c == '/' || c == ':') c = '-';  // split children's keys name their parent and color
  }
  const std::string stem = stateDir + "/flight-" + key + "-" + reason + "-" + std::to_string(ms);
  const std::string path = stem + ".json";
  // A fresh name, opened exclusively and never through a link: whatever else can write the
  // folder cannot make the daemon write elsewhere, or into a file it planted.
  static std::atomic<uint64_t> serial{0};
  const std::string temporary = path + "." + std::to_string(serial++) + ".tmp";
  const std::string text = flightJson(record, reason, detail);
  // Born owner-only; the group may read once it is the right group. A group the daemon cannot
  // give the file to (neither root nor a member) leaves it owner-only rather than readable by
  // the daemon's own group, whose members are the tenants.
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return unavailable("cannot write " + temporary + ": " + std::strerror(errno));
  if (!readerGroup || ::fchown(fd, static_cast<uid_t>(-1), *readerGroup) == 0) {
    (void)::fchmod(fd, 0640);  // on failure the file stays 0600: narrower, never wider
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(temporary.c_str());
      return unavailable("cannot write " + temporary + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  // link() never replaces what is there: a second dump of the same millisecond, or anything
  // planted under the name, keeps its place and this dump takes the next free suffix.
  std::string linked = path;
  int e = 0;
  for (int n = 1; n <= 100; ++n) {
    e = ::link(temporary.c_str(), linked.c_str()) == 0 ? 0 : errno;
    if (e != EEXIST) break;
    linked = stem + "-" + std::to_string(n) + ".json";
  }
  ::unlink(temporary.c_str());
  if (e != 0) return unavailable("cannot name the dump " + linked + ": " + std::strerror(e));
  return linked;
}

}  // namespace hc::observe
