// Translation between the bootstrap's C++ types (peer_types.h) and hetero_comm.v1 messages
// (proto/hetero_comm/v1/peer.proto). The only code that sees both.
#pragma once

#include <span>
#include <string>

#include "common/status.h"
#include "daemon/control/membership_proof.h"
#include "daemon/peer/peer_types.h"
#include "hetero_comm/v1/peer.pb.h"

namespace hc::control {

void toProto(const peer::JoinRequest& join, const Nonce& rootNonce, const Nonce& joinerNonce,
             const Proof& proof, hetero_comm::v1::JoinRequest* out);
// The join in `message`; InvalidArgument for a wrong key size. Leaves nonces and proof alone.
[[nodiscard]] Result<peer::JoinRequest> fromProto(const hetero_comm::v1::JoinRequest& message);

void toProto(const peer::RankTable& table, hetero_comm::v1::RankTable* out);
// InvalidArgument when the table does not hold together (validateRankTable). Leaves the proof
// alone.
[[nodiscard]] Result<peer::RankTable> fromProto(const hetero_comm::v1::RankTable& message);

// A bytes field as bytes.
inline std::span<const uint8_t> bytesOf(const std::string& field) {
  return {reinterpret_cast<const uint8_t*>(field.data()), field.size()};
}
// A 32-byte field as a Nonce; InvalidArgument naming `what` for another size.
[[nodiscard]] Result<Nonce> nonceOf(const std::string& field, const char* what);

}  // namespace hc::control
