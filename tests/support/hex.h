// Bytes as hex text, the form in which tests hand unique ids to rank processes on their command
// lines: two lowercase digits a byte when written, either case when read.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "hetero_comm/hc.h"

namespace hc::test {

// Reads size bytes from exactly 2 * size hex digits into out. False, with out untouched, when hex
// has another length or a character that is not a hex digit.
[[nodiscard]] bool parseHex(std::string_view hex, void* out, size_t size);
std::string toHex(const void* data, size_t size);

// A unique id from its hex digits, as hc_rank_worker --new-id prints them (toHex of its bytes).
[[nodiscard]] bool parseHexId(std::string_view hex, hc_unique_id_t* id);
std::string toHex(const hc_unique_id_t& id);

}  // namespace hc::test
