// How each fuzz target reads the fuzzer's bytes, and how make_seeds writes inputs the targets
// read the same way: one header for both sides, so a seed cannot drift from its reader.
// Layouts whose bytes go to the parser as they are (ucx_wire, config_toml, peer) need nothing here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/ipc/protocol.h"

namespace hc::fuzz {

// ---- frames: a client's connection, frame after frame ------------------------------------------
// Each record: [descriptor count (low 2 bits)][length, u16 little-endian][the frame's bytes].
// A record whose length runs past the input takes what is left.
struct FrameRecord {
  size_t fds = 0;
  std::span<const uint8_t> bytes;
};

inline std::vector<FrameRecord> readFrameRecords(std::span<const uint8_t> in) {
  std::vector<FrameRecord> records;
  while (in.size() >= 3) {
    FrameRecord r;
    r.fds = in[0] & 3u;
    const size_t length = in[1] | size_t{in[2]} << 8;
    in = in.subspan(3);
    r.bytes = in.first(length < in.size() ? length : in.size());
    in = in.subspan(r.bytes.size());
    records.push_back(r);
  }
  return records;
}

inline void appendFrameRecord(std::vector<uint8_t>* out, std::span<const uint8_t> frame,
                              size_t fds) {
  out->push_back(static_cast<uint8_t>(fds & 3u));
  out->push_back(static_cast<uint8_t>(frame.size() & 0xffu));
  out->push_back(static_cast<uint8_t>(frame.size() >> 8));
  out->insert(out->end(), frame.begin(), frame.end());
}

// ---- submit: one submission entry on a communicator --------------------------------------------
// [SubmitEntry, 128 bytes][nranks - 1, u16 LE][rank, u16 LE, taken modulo nranks]: the engine
// resolves an entry only for a handle it knows, so rank < nranks always holds there.
struct SubmitInput {
  ipc::SubmitEntry entry{};
  int nranks = 1;
  int rank = 0;
};
constexpr size_t kSubmitInputBytes = sizeof(ipc::SubmitEntry) + 4;

inline std::optional<SubmitInput> readSubmitInput(std::span<const uint8_t> in) {
  if (in.size() < kSubmitInputBytes) return std::nullopt;
  SubmitInput s;
  std::memcpy(&s.entry, in.data(), sizeof(s.entry));
  const uint8_t* tail = in.data() + sizeof(s.entry);
  s.nranks = 1 + (tail[0] | tail[1] << 8);
  s.rank = (tail[2] | tail[3] << 8) % s.nranks;
  return s;
}

inline std::vector<uint8_t> writeSubmitInput(const ipc::SubmitEntry& entry, int nranks, int rank) {
  std::vector<uint8_t> out(kSubmitInputBytes);
  std::memcpy(out.data(), &entry, sizeof(entry));
  const unsigned n = static_cast<unsigned>(nranks - 1);
  const unsigned r = static_cast<unsigned>(rank);
  out[sizeof(entry) + 0] = static_cast<uint8_t>(n & 0xffu);
  out[sizeof(entry) + 1] = static_cast<uint8_t>(n >> 8);
  out[sizeof(entry) + 2] = static_cast<uint8_t>(r & 0xffu);
  out[sizeof(entry) + 3] = static_cast<uint8_t>(r >> 8);
  return out;
}

// ---- notices: a notice from another daemon, and where the communicator's ranks live ------------
// [nranks - 1, low 5 bits][placement: 2 bits per rank, rank 0 in the lowest bits of 8 bytes,
// 0 = here, 1 = the daemon the notice came from, 2 or 3 = elsewhere][the notice's bytes].
struct NoticeInput {
  std::vector<uint32_t> senders;  // ranks on the daemon the notice came from
  std::vector<bool> local;        // by rank: lives on this daemon
  std::vector<uint8_t> notice;
};
constexpr size_t kNoticePrefixBytes = 9;

inline std::optional<NoticeInput> readNoticeInput(std::span<const uint8_t> in) {
  if (in.size() < kNoticePrefixBytes) return std::nullopt;
  NoticeInput n;
  const uint32_t nranks = 1 + (in[0] & 31u);
  uint64_t placement = 0;
  std::memcpy(&placement, in.data() + 1, sizeof(placement));
  n.local.resize(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    const uint64_t where = (placement >> (2 * r)) & 3u;
    n.local[r] = where == 0;
    if (where == 1) n.senders.push_back(r);
  }
  n.notice.assign(in.begin() + kNoticePrefixBytes, in.end());
  return n;
}

// `where[r]` as in the layout above.
inline std::vector<uint8_t> writeNoticeInput(const std::vector<uint8_t>& where,
                                             const std::vector<uint8_t>& notice) {
  std::vector<uint8_t> out(kNoticePrefixBytes);
  out[0] = static_cast<uint8_t>((where.size() - 1) & 31u);
  uint64_t placement = 0;
  for (size_t r = 0; r < where.size() && r < 32; ++r) {
    placement |= uint64_t{where[r] & 3u} << (2 * r);
  }
  std::memcpy(out.data() + 1, &placement, sizeof(placement));
  out.insert(out.end(), notice.begin(), notice.end());
  return out;
}

// ---- config_env and config_flags: text, one item per line --------------------------------------
// config_env: each line NAME=VALUE is one variable (a line without '=' is a variable set to "").
// config_flags: each line is one argument after argv[0].
inline std::vector<std::string> readLines(std::span<const uint8_t> in) {
  std::vector<std::string> lines;
  std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
  while (!text.empty()) {
    const size_t end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

}  // namespace hc::fuzz
