// The JSON form of a flight record, and its dump into the state directory. Field names follow
// PyTorch's flight recorder (record_id, pg_id, collective_seq_id, p2p_seq_id, op_id,
// profiling_name, time_created_ns, input_sizes, input_dtypes, output_sizes, output_dtypes, state,
// time_discovered_started_ns, time_discovered_completed_ns, is_p2p) with PyTorch's dtype names
// ("Float", "BFloat16", ...), so the same tools read both; ours add rank, peer and error.
// nlohmann_json stays inside flight_json.cc.
#pragma once

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
// created, mode 0750; the file appears whole, mode 0640, written under a fresh name opened with
// O_EXCL | O_NOFOLLOW and renamed) and returns its path. Synchronous: the daemon calls it through
// FlightDumper (flight_dumper.h), on a thread of its own.
[[nodiscard]] Result<std::string> dumpFlightRecord(const std::string& stateDir,
                                                   const FlightSnapshot& record,
                                                   const std::string& reason,
                                                   const std::string& detail);

}  // namespace hc::observe
