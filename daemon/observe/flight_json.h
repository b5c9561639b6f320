// The JSON form of a flight record, and its dump into the state directory. Field names follow
// PyTorch's flight recorder (record_id, pg_id, collective_seq_id, p2p_seq_id, op_id,
// profiling_name, time_created_ns, input_sizes, input_dtypes, output_sizes, output_dtypes, state,
// time_discovered_started_ns, time_discovered_completed_ns, is_p2p) with PyTorch's dtype names
// ("Float", "BFloat16", ...), so the same tools read both; ours add rank, peer and error.
// nlohmann_json stays inside flight_json.cc.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "common/status.h"
#include "daemon/observe/flight_recorder.h"

namespace hc::observe {

// "Float" for "float32", ...; the input unchanged when PyTorch has no name for it.
std::string pytorchDtypeName(const std::string& dtype);

// One document: {"schema", "reason", "detail", "hostname", "comm": {...}, "ranks": [...],
// "entries": [...]}. reason: "late", "failed", "request".
std::string flightJson(const FlightSnapshot& record, const std::string& reason,
                       const std::string& detail);

// Writes flightJson() to <stateDir>/flight-<key>-<reason>-<unix ms>.json (the directory is
// created, mode 0750; the file appears whole, written under a fresh name opened with
// O_EXCL | O_NOFOLLOW and renamed) and returns its path. A dump holds one job's communicator
// key, ranks, operations and errors, so it is for the admin group (hetero-comm-admin), not for
// the daemon's own group, whose members are the tenants: with `readerGroup` the file gets that
// group and mode 0640 whatever the umask; a group the daemon may not give files to (it is
// neither root nor a member) leaves the file 0600. Without `readerGroup` (the system has no such
// group): 0640 in the daemon's group. Synchronous: the daemon calls it through FlightDumper
// (flight_dumper.h), on a thread of its own.
[[nodiscard]] Result<std::string> dumpFlightRecord(const std::string& stateDir,
                                                   const FlightSnapshot& record,
                                                   const std::string& reason,
                                                   const std::string& detail,
                                                   std::optional<gid_t> readerGroup = std::nullopt);

}  // namespace hc::observe
