// EngineOptions: what the engine and its parts are told by the daemon's configuration.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "daemon/metrics/daemon_metrics.h"
#include "daemon/observe/status_board.h"

namespace hc::session {

struct EngineOptions {
  uint64_t inlineBytes = 256 << 10;  // ops moving at most this run on the IPC thread
  uint64_t pieceBytes = 1 << 20;     // work of one pool piece, per buffer
  int initTimeoutMs = 120000;
  int opTimeoutMs = 0;
  uint32_t maxInFlight = 4096;  // per session: beyond it, submissions wait in the ring
  uint64_t stagingChunkBytes = 4 << 20;  // device<->host staging copies are issued in these
  uint32_t maxRanks = 65536;              // session.max_ranks: a local join of more is refused
  bool initAcrossUids = false;            // comm.init_across_uids (CommJoiner::join)
  uint64_t maxStagingBytes = 8ull << 30;  // session.max_staging_bytes (StagingPool's live cap)
  // What operators see (null board: no flight records, no dumps). Borrowed; outlives the engine.
  observe::StatusBoard* board = nullptr;
  metrics::DaemonMetrics* metrics = nullptr;  // borrowed; null: no metrics
  std::string stateDir;        // flight record dumps go here ("" = none)
  int lateReportMs = 0;        // comm.late_report_ms
  uint32_t flightRecordEntries = 2000;
  // Test hook (HC_TEST_JOIN_ANSWER_DELAY_MS): act on each rank table from the root this much
  // later, as when the root's answer reaches this daemon after the others'.
  std::chrono::milliseconds joinAnswerDelay{0};
};

}  // namespace hc::session
